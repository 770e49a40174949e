"""The operators' fake implementations: the shapes and dtypes of each
operator's results without running it (torch.compile's and torch.export's
tracing), from what the package recorded of each binding, or from a
graph's recipe in a process that never bound it; with the checks the
operators make."""

from __future__ import annotations

import hashlib
import math

import torch

from ._recipes import DTYPE_CODES, RECIPE_VERSION, recipe_text

# What the fake implementations need of each binding: per kernel binding
# its results' (dtype, shape kind: 0 [T, *S], 1 [*S], 2 a [1] scalar) and
# what a call is checked against (the tensor count, the device, per read
# (position, dtype, shape kind, may be None)); per training binding its
# forward and backward kernel bindings and which of the forward's results
# the autograd node returns.
_kernels: dict = {}
_trainings: dict = {}


def note_kernel(ident: int, results: list, num_args: int, device: torch.device,
                reads: list) -> None:
    _kernels[ident] = (list(results), num_args, device, list(reads))


def forget(ident: int) -> None:
    """Drops what was recorded of a released binding."""
    _kernels.pop(ident, None)
    _trainings.pop(ident, None)


def note_training(ident: int, forward: int, backward: int, returned: list) -> None:
    _trainings[ident] = (forward, backward, list(returned))


def _noted(table: dict, ident: int, what: str, recipe: str = ""):
    entry = table.get(ident)
    if entry is None and recipe:
        _note_recipe(recipe)
        entry = table.get(ident)
    if entry is None:
        raise RuntimeError(f"flexsn_native: no bound {what} #{ident} (released, or never bound)")
    return entry


_CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}


def _note_recipe(text: str) -> None:
    """What the fake implementations need of the bindings a recipe names (a
    graph traced again in a process that never bound them): the same
    fields the C++ reads, the device left to the call."""
    head, _, body = recipe_text(text).partition("\n")
    if head.split() != ["flexsn-recipe", str(RECIPE_VERSION), "sha1",
                        hashlib.sha1(body.encode()).hexdigest()]:
        raise RuntimeError("flexsn_native: a damaged FlexSN recipe, or one of another format")
    data, at = body.encode(), 0

    def line() -> str:
        nonlocal at
        end = data.index(b"\n", at)
        text_, at = data[at:end].decode(), end + 1
        return text_

    def blob(n: int) -> None:
        nonlocal at
        at += n + 1

    def kernel() -> int:
        _, key, _, _, _, num_args = line().split()
        blob(int(line().split()[1]))  # options
        blob(int(line().split()[1]))  # ir
        reads = []
        for _ in range(int(line().split()[1])):
            slot, pos, dtype, shape, optional = line().split(" ", 5)[:5]
            reads.append((int(pos), _CODE_DTYPES[int(dtype)], int(shape), bool(int(optional))))
        results = []
        for _ in range(int(line().split()[1])):
            _, dtype, shape = line().split()
            results.append((_CODE_DTYPES[int(dtype)], int(shape)))
        _kernels.setdefault(int(key), (results, int(num_args), None, reads))
        return int(key)
    first = line().split()
    if first[0] == "kernel":
        at = 0
        kernel()
        return
    forward, backward = kernel(), kernel()
    lists = {}
    for _ in range(6):
        parts = line().split()
        lists[parts[1]] = [int(v) for v in parts[3:]]
    _trainings.setdefault(int(first[1]), (forward, backward, lists["out"] + lists["state"]))


def _checked_results(ident: int, args, seq_shape, recipe: str = "") -> list:
    """The results of kernel binding `ident` on `args` (fake or meta
    tensors) at `seq_shape`, after the checks the operators make."""
    results, num_args, device, reads = _noted(_kernels, ident, "kernel", recipe)
    if len(args) != num_args:
        raise RuntimeError(f"flexsn_native: the kernel takes {num_args} tensors (or None); "
                           f"the call passes {len(args)}")
    like = None
    for j, t in enumerate(args):
        if t is not None:
            if device is not None and t.device != device:
                raise RuntimeError(f"flexsn_native: tensor #{j} of the call is on {t.device}; "
                                   f"the kernel runs on {device}")
            like = like if like is not None else t
    if like is None:
        raise RuntimeError("flexsn_native: a call without a tensor")
    T, NCL = seq_shape[0], math.prod(seq_shape[1:])
    for position, dtype, kind, optional in reads:
        t = args[position]
        if t is None:
            if not optional:
                raise RuntimeError(f"flexsn_native: tensor #{position} is None; the kernel "
                                   "reads it")
            continue
        if t.dtype != dtype:
            raise RuntimeError(f"flexsn_native: tensor #{position} is {t.dtype}; the kernel "
                               f"was compiled for {dtype}")
        want = T * NCL if kind == 0 else NCL if kind == 1 else 1
        torch._check(t.numel() == want, lambda: f"flexsn_native: tensor #{position} holds "
                     f"{t.numel()} elements; the kernel reads {want}")
    step = seq_shape[1:]
    return [like.new_empty(seq_shape if kind == 0 else step if kind == 1 else (1,),
                           dtype=dtype) for dtype, kind in results]


def register() -> None:
    """Shapes and dtypes of each operator's results without running it
    (torch.compile's tracing), from the bindings the package recorded."""
    lib = "flexsn_native::"

    @torch.library.register_fake(lib + "launch")
    def _launch_fake(ident, args, recipe=""):
        if not args or args[0] is None or args[0].dim() < 1:
            raise RuntimeError("flexsn_native: input #0 must be a [T, ...] tensor")
        return _checked_results(ident, args, list(args[0].shape), recipe)

    @torch.library.register_fake(lib + "forward")
    def _forward_fake(ident, leaves, recipe=""):
        return _launch_fake(_noted(_trainings, ident, "training", recipe)[0], leaves)

    @torch.library.register_fake(lib + "recompute")
    def _recompute_fake(ident, leaves, after, recipe=""):
        return _forward_fake(ident, leaves, recipe)

    @torch.library.register_fake(lib + "backward")
    def _backward_fake(ident, args, seq_shape, recipe=""):
        return _checked_results(_noted(_trainings, ident, "training", recipe)[1], args,
                                list(seq_shape))

    @torch.library.register_fake(lib + "train")
    def _train_fake(ident, leaves, recipe=""):
        forward, _, returned = _noted(_trainings, ident, "training", recipe)
        res = _launch_fake(forward, leaves)
        return [res[i] for i in returned]
