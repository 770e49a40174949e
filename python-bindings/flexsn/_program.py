"""Compiled programs and kernel launches.

A :class:`Program` is one module compiled by libFlexSN for one target
(``"cpu"`` or ``"cuda"`` with a chip), cached in the process by (IR,
target, options). A :class:`Launcher` is one kernel of it on one device:
it reads the manifest once to know, for every pointer argument, which
tensor it takes (by meaning: ``input`` #0, ``grad_output`` #1, ...) or
which result it writes and how large that is, so that a call only
allocates the results, fills a pointer array and launches.
"""

from __future__ import annotations

import ctypes
import json
import threading
from typing import Optional, Sequence

import torch

from . import _capi

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "f64": torch.float64}
# Roles the kernel writes; the others it reads.
WRITTEN = {"output", "state_seq", "final_state", "sum_state"}

_lock = threading.Lock()
_programs: dict[tuple, "Program"] = {}


class Program:
    def __init__(self, ir: str, target: str, options: str):
        self.ir, self.target, self.options = ir, target, options
        code = _capi.TARGET_CUDA if target == "cuda" else _capi.TARGET_CPU
        self.handle = _capi.program_create(ir, code, options)
        self.manifest = json.loads(_capi.program_manifest(self.handle))
        self.kernels = {k["name"]: k for k in self.manifest["kernels"]}
        self._launchers: dict[tuple, Launcher] = {}

    def launcher(self, name: str, device: int) -> "Launcher":
        key = (name, device)
        launcher = self._launchers.get(key)
        if launcher is None:
            if name not in self.kernels:
                raise KeyError(f"no kernel {name!r} (have {sorted(self.kernels)})")
            handle = _capi.kernel_get(self.handle, name, device)
            launcher = Launcher(self, self.kernels[name], handle, device)
            self._launchers[key] = launcher
        return launcher

    def __del__(self):
        handle = getattr(self, "handle", None)
        if handle:
            try:
                _capi.program_destroy(handle)
            except Exception:
                pass


def get_program(ir: str, target: str, chip: Optional[str] = None,
                differentiate: bool = False) -> Program:
    options = "differentiate=1" if differentiate else ""
    if target == "cuda":
        options += f" chip={chip}"
    key = (ir, target, options)
    program = _programs.get(key)
    if program is not None:
        return program
    with _lock:
        program = _programs.get(key)
        if program is None:
            program = Program(ir, target, options.strip())
            _programs[key] = program
    return program


def chip_of(device: torch.device) -> str:
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


class Launcher:
    """One kernel on one device, with its arguments resolved by meaning."""

    def __init__(self, program: Program, info: dict, handle: int, device: int):
        self.program, self.info, self.handle, self.device = program, info, handle, device
        self.name = info["name"]
        ptrs = [a for a in info["args"] if a["kind"] == "ptr"]
        self.num_pointers = len(ptrs)
        # (meaning, index) per pointer; `reads` and `writes` in launch order.
        self.slots = [(a["meaning"], a["meaning_index"]) for a in ptrs]
        self.writes = [(i, a) for i, a in enumerate(ptrs) if a["role"] in WRITTEN]
        self.reads = [(i, (a["meaning"], a["meaning_index"]))
                      for i, a in enumerate(ptrs) if a["role"] not in WRITTEN]
        self._array_type = ctypes.c_void_p * max(1, self.num_pointers)
        self.cuda = program.target == "cuda"

    def __call__(self, tensors: dict, T: int, NCL: int, device: torch.device):
        """Runs the kernel reading `tensors[(meaning, index)]` and returns
        the results it writes as {(meaning, index): tensor} ([T, NCL], [NCL]
        or [1] tensors)."""
        ptrs = self._array_type()
        results = {}
        for i, key in self.reads:
            t = tensors.get(key)
            if t is None:
                raise RuntimeError(f"kernel {self.name} needs {key[0]} #{key[1]}")
            ptrs[i] = t.data_ptr()
        for i, a in self.writes:
            dtype = DTYPES[a["dtype"]]
            shape = a["shape"]
            if shape == "[T, NCL]":
                t = torch.empty((T, NCL), dtype=dtype, device=device)
            elif shape == "[NCL]":
                t = torch.empty((NCL,), dtype=dtype, device=device)
            else:
                t = torch.zeros((1,), dtype=dtype, device=device)
            results[(a["meaning"], a["meaning_index"])] = t
            ptrs[i] = t.data_ptr()
        if self.cuda:
            stream = torch.cuda.current_stream(device).cuda_stream
            threads = 0
        else:
            stream, threads = None, torch.get_num_threads()
        _capi.kernel_launch(self.handle, ptrs, self.num_pointers, T, NCL, stream, threads)
        return results


def flat(t: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """`t` as a contiguous tensor viewed as `shape` (no copy when already
    contiguous)."""
    if not t.is_contiguous():
        t = t.contiguous()
    return t.view(shape)
