"""Recipes: the text a graph (torch.compile, torch.export, AOTInductor)
carries with each binding it names, from which csrc/FlexSNTorch.cpp
("Recipes") binds it in a process that never built the module: the
program's IR and options, the kernel's entry and argument layout,
versioned and checksummed, as one line. Also the dtype codes the operators'
C entry points and recipes share."""

from __future__ import annotations

import hashlib
import re

import torch

DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3}


def code(v) -> int:
    """A layout value as the C side reads it: a dtype by its code."""
    return DTYPE_CODES[v] if isinstance(v, torch.dtype) else int(v)


RECIPE_VERSION = 2


def kernel_section(key: int, source: tuple, name: str, num_pointers: int, num_args: int,
                   reads: list, read_names: list, results: list) -> str:
    """A kernel binding as a recipe's section (csrc/FlexSNTorch.cpp,
    Recipes): its id, program (IR, target, options but the chip), entry and
    layout."""
    ir, target, options = source
    lines = [f"kernel {key} {target} {name} {num_pointers} {num_args}",
             f"options {len(options.encode())}", options,
             f"ir {len(ir.encode())}", ir, f"reads {len(reads)}"]
    lines += [" ".join(str(code(v)) for v in row) + " " + n
              for row, n in zip(reads, read_names)]
    lines.append(f"results {len(results)}")
    lines += [" ".join(str(code(v)) for v in row) for row in results]
    return "\n".join(lines) + "\n"


def training_section(key: int, recompute: bool, forward: str, backward: str,
                     lists: dict) -> str:
    body = f"training {key} {int(recompute)}\n" + forward + backward
    for what in ("out", "state", "kept", "read", "grad", "nondiff"):
        values = lists[what]
        body += f"ints {what} {len(values)} " + " ".join(str(int(v)) for v in values) + "\n"
    return body


def recipe(body: str) -> str:
    """`body` with the recipe header (the format, then its checksum), as
    the one line a graph carries (csrc/FlexSNTorch.cpp, Recipes)."""
    digest = hashlib.sha1(body.encode()).hexdigest()
    text = f"flexsn-recipe {RECIPE_VERSION} sha1 {digest}\n{body}"
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")


_ESCAPES = {"\\": "\\", "n": "\n", "r": "\r"}


def recipe_text(line: str) -> str:
    """The text of a recipe's one-line form."""
    if "\n" in line or "\r" in line:
        raise RuntimeError("flexsn_native: a damaged FlexSN recipe (a line break)")
    try:
        return re.sub(r"\\(.?)", lambda m: _ESCAPES[m.group(1)], line, flags=re.S)
    except KeyError:
        raise RuntimeError("flexsn_native: a damaged FlexSN recipe (a bad escape)") from None
