"""Compiled programs and kernel launches.

A :class:`Program` is one module compiled by libFlexSN for one target
(``"cpu"`` or ``"cuda"`` with a chip), cached in the process by (IR,
target, options). A :class:`KernelEntry` is one kernel of it on one device:
it reads the manifest once to know, for every pointer argument, which
tensor it takes (by meaning: ``input`` #0, ``grad_output`` #1, ...) or
which result it writes and how large that is. A :class:`KernelBinding` is an
entry whose arguments are bound to positions in the tensor list a call
passes, in libFlexSNTorch.so's launch operator (flexsn/_native.py), which
then allocates the results and launches.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Optional, Sequence

import torch

from . import _cache, _capi, _fakes, _libdevice, _native, _recipes
from ._errors import FlexSNError

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "f64": torch.float64}
# Roles the kernel writes; the others it reads.
WRITTEN = {"output", "state_seq", "final_state", "sum_state"}

_lock = threading.Lock()
_programs: dict[tuple, "Program"] = {}


class Program:
    """A compiled module (owns its C handle and kernel entries)."""

    def __init__(self, handle: int, target: str):
        self.handle, self.target = handle, target
        # what the program was compiled from (get_program sets it): part of
        # its bindings' keys
        self.digest = ""
        self.manifest = json.loads(_capi.program_manifest(handle))
        self.kernels = {k["name"]: k for k in self.manifest["kernels"]}
        self._entries: dict[tuple, KernelEntry] = {}
        # handed to the operators (which then own it) by its first binding
        self.adopted = False
        self.source = None  # (IR, target, options but the chip): get_program

    def entry(self, name: str, device: int) -> "KernelEntry":
        key = (name, device)
        entry = self._entries.get(key)
        if entry is None:
            if name not in self.kernels:
                raise KeyError(f"no kernel {name!r} (have {sorted(self.kernels)})")
            handle = _capi.kernel_get(self.handle, name, device)
            entry = KernelEntry(self, self.kernels[name], handle, device)
            self._entries[key] = entry
        return entry

    def adopt(self) -> None:
        """Hands the program to the operators: a kernel bound there keeps it
        alive for as long as an autograd graph holds the binding."""
        if not self.adopted:
            _native.adopt_program(self.handle)
            self.adopted = True

    def __del__(self):
        handle = getattr(self, "handle", None)
        if handle:
            try:
                if self.adopted:
                    _native.drop_program(handle)
                else:
                    _capi.program_destroy(handle)
            except Exception:
                pass


def cache_dir() -> Optional[Path]:
    """Where compiled programs are kept across processes (a CUDA program's
    PTX and manifest; a CPU program's kernels' object files, written by the
    library at each kernel's first use): see flexsn/_cache.py; None:
    nowhere (FLEXSN_CACHE_DIR=off)."""
    return _cache.root()


def _compile(ir: str, target: str, options: str) -> Program:
    code = _capi.TARGET_CUDA if target == "cuda" else _capi.TARGET_CPU
    if target == "cuda":
        options = f"{options} {_libdevice.cuda_home_option()}".strip()
    directory = cache_dir()
    if target != "cuda":
        # The library keys, checks and writes each kernel's object file
        # itself (its lowered IR, the host CPU, LLVM): only the directory,
        # which _cache vouches for, is ours to give.
        program = Program(_capi.program_create(ir, code, options), target)
        if directory is not None:
            _capi.program_set_cpu_cache_dir(program.handle, str(directory))
        return program
    if directory is None:
        return Program(_capi.program_create(ir, code, options), target)
    # The PTX and manifest of a CUDA program are kept on disk as one entry,
    # under a key of everything they depend on.
    key = hashlib.sha256("\0".join(
        [_capi.version(), _capi.build(), target, options, ir]).encode()
    ).hexdigest()[:32]
    name = f"{key}.program"
    payload = _cache.read_entry(directory, name)
    if payload is not None:
        try:
            entry = json.loads(payload)
            return Program(_capi.program_load_cuda(entry["ptx"], entry["manifest"]), target)
        except (ValueError, KeyError, TypeError, FlexSNError):
            pass  # checksummed but unloadable (another version's): built again
    program = Program(_capi.program_create(ir, code, options), target)
    _cache.write_entry(directory, name, json.dumps({
        "ptx": _capi.program_ptx(program.handle),
        "manifest": _capi.program_manifest(program.handle)}).encode())
    return program


def get_program(ir: str, target: str, chip: Optional[str] = None,
                differentiate: bool = False, save_ops: str = "",
                transfer: bool = False) -> Program:
    """The program of `ir` for `target`, compiled once per process (and, for
    CUDA, once per cache directory). `save_ops` (with `differentiate`): the
    saving policy, as the compiler's save-ops option ("auto": a minimum
    cut). `transfer`: only the transfer functions of its affine scans (a
    FlexSNError names the state that is not affine where there are none)."""
    options = "differentiate=1" if differentiate else ""
    if differentiate and save_ops:
        options += f" save-ops={save_ops}"
    if transfer:
        options += " transfer=1"
    if target == "cuda":
        options += f" chip={chip}"
    options = options.strip()
    key = (ir, target, options)
    program = _programs.get(key)
    if program is not None:
        return program
    with _lock:
        program = _programs.get(key)
        if program is None:
            program = _compile(ir, target, options)
            program.digest = hashlib.sha256("\0".join(key).encode()).hexdigest()
            # what a recipe carries: the options without the chip, which a
            # process binding it takes from its device
            program.source = (ir, target, options.replace(f"chip={chip}", "").strip()
                              if chip else options)
            _programs[key] = program
    return program


_chips: dict[int, str] = {}


def chip_of(device: torch.device) -> str:
    index = device.index if device.index is not None else torch.cuda.current_device()
    chip = _chips.get(index)
    if chip is None:
        major, minor = torch.cuda.get_device_capability(index)
        chip = _chips[index] = f"sm_{major}{minor}"
    return chip


class KernelEntry:
    """One kernel on one device, with its arguments resolved by meaning."""

    def __init__(self, program: Program, info: dict, handle: int, device: int):
        self.program, self.info, self.handle, self.device = program, info, handle, device
        self.name = info["name"]
        ptrs = [a for a in info["args"] if a["kind"] == "ptr"]
        self.num_pointers = len(ptrs)
        # In launch order: (position, (meaning, index), may be null: the
        # kernel then reads zeros, dtype, shape rule) per read; (position,
        # (meaning, index), dtype, shape rule) per result.
        self.reads = [(i, (a["meaning"], a["meaning_index"]), a.get("optional", False),
                       DTYPES[a["dtype"]], a["shape"])
                      for i, a in enumerate(ptrs) if a["role"] not in WRITTEN]
        self.allocs = [(i, (a["meaning"], a["meaning_index"]), DTYPES[a["dtype"]], a["shape"])
                       for i, a in enumerate(ptrs) if a["role"] in WRITTEN]
        self.cuda = program.target == "cuda"

    def preload(self, NCL: int) -> None:
        """CUDA: start the driver's compile of the entry a launch at NCL
        takes, in the background (no-op once it is loaded)."""
        if self.cuda:
            _capi.kernel_preload(self.handle, NCL)


def _device_of(cuda: bool, index: int) -> torch.device:
    return torch.device("cuda", index) if cuda else torch.device("cpu")


class KernelBinding:
    """A kernel entry whose pointer arguments are bound once to positions: each
    read to an index of the tensor list a call passes (None at an optional
    read: a null pointer, which the kernel reads as zeros), each write to a
    fresh result of shape [T, *S], [*S] or, for an accumulated scalar, a
    zeroed [1]. The binding lives in libFlexSNTorch.so (`native`, its id),
    which allocates the results and launches on a call."""

    __slots__ = ("name", "variant", "reads", "read_keys", "allocs", "cuda", "device",
                 "result_keys", "checks", "num_args", "native", "section", "recipe",
                 "positions")

    SEQ, STEP, SCALAR = 0, 1, 2

    def __init__(self, entry: KernelEntry, positions: dict, in_place: bool = False):
        """`in_place`: the kernel writes into tensors a call passes, at the
        positions of their result keys, and returns nothing (a chunk repair
        kernel's: those of the kernel it repairs)."""
        self.name, self.cuda, self.device = entry.name, entry.cuda, entry.device
        self.variant = entry.info["variant"]
        self.positions = positions
        kinds = {"[T, NCL]": self.SEQ, "[NCL]": self.STEP}
        # (slot, position), and what the operator checks a tensor against
        # there: (slot, position, dtype, shape kind, may be None); (meaning,
        # index)
        self.reads, self.read_keys, checked = [], [], []
        reads, allocs = entry.reads, entry.allocs
        if in_place:
            reads = reads + [(slot, key, False, dtype, shape) for slot, key, dtype, shape in allocs]
            allocs = []
        for slot, key, optional, dtype, shape in reads:
            if key not in positions:
                if optional:
                    continue
                raise FlexSNError(f"internal error: kernel {self.name} reads "
                                  f"{key[0]} #{key[1]}, which the call does not pass")
            self.reads.append((slot, positions[key]))
            self.read_keys.append(key)
            checked.append((slot, positions[key], dtype, kinds.get(shape, self.SCALAR),
                            int(optional)))
        self.allocs = [(slot, dtype, kinds.get(shape, self.SCALAR))
                       for slot, _, dtype, shape in allocs]
        # the key (meaning, index) of each result, in the order a call returns them
        self.result_keys = [key for _, key, _, _ in allocs]
        # a call passes every position some kernel of its kind reads
        num_args = max(positions.values(), default=-1) + 1
        self.checks, self.num_args = checked, num_args
        names = [f"{meaning} #{index}" for meaning, index in self.read_keys]
        key = _native.content_key("kernel", entry.program.digest, self.name, self.device,
                                  entry.num_pointers, self.cuda, num_args, checked,
                                  self.allocs)

        def bind(key):
            entry.program.adopt()
            return _native.bind_kernel(entry.program.handle, entry.handle, self.name,
                                       entry.num_pointers, self.cuda, self.device,
                                       num_args, checked, names, self.allocs, key)
        self.native = _native.bind_shared(key, bind)
        # what binds it in another process (see csrc/FlexSNTorch.cpp, Recipes)
        self.section = _recipes.kernel_section(
            key, entry.program.source, self.name, entry.num_pointers, num_args,
            checked, names, self.allocs) if entry.program.source else ""
        self.recipe = _recipes.recipe(self.section) if self.section else ""
        _fakes.note_kernel(self.native, [(dtype, kind) for _, dtype, kind in self.allocs],
                            num_args, _device_of(self.cuda, self.device),
                            [row[1:] for row in checked])

    def __del__(self):
        if _native is not None:  # None while the interpreter shuts down
            _native.release(getattr(self, "native", None))

    def index(self, key) -> int:
        """Where the result `key` is in a call's returned list."""
        return self.result_keys.index(key)

    def __call__(self, args: Sequence) -> list:
        """The kernel's results on `args` (input #0 first: [T, *S], T > 0)."""
        try:
            return _native.launch(self.native, args)
        except RuntimeError as e:
            if str(e).startswith("flexsn: kernel launch failed"):
                raise FlexSNError(str(e)[len("flexsn: "):]) from None
            raise
