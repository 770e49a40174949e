"""The native call path: libFlexSNTorch.so's PyTorch operators.

With it, a call allocates its results and launches in C++ (one operator
call from Python), and a training step's forward and backward are one C++
autograd node instead of a Python ``autograd.Function``. It sits next to
the libFlexSN.so the package loaded and is built against one PyTorch
version (written beside it in ``libFlexSNTorch.torch-version``); under any
other version, without the file, or with ``FLEXSN_NATIVE=0`` in the
environment, the package keeps its ctypes path, which computes the same
results. :func:`status` says which path runs and why.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Optional

import torch

from . import _capi

_lock = threading.Lock()
_loaded = False
_ops = None  # torch.ops.flexsn_native once loaded
_reason = "not loaded yet"
# The operators' overloads, looked up once (attribute lookups cost a call).
launch = None
train = None
run_plan = None


def _base(version: str) -> str:
    """2.11.0+cu130 -> 2.11.0: the CUDA variant does not change the C++ ABI
    of the operators used here."""
    return version.split("+", 1)[0]


def _load() -> None:
    global _loaded, _ops, _reason, launch, train, run_plan
    with _lock:
        if _loaded:
            return
        _loaded = True
        if os.environ.get("FLEXSN_NATIVE", "1").strip().lower() in ("0", "off", "no", "false"):
            _reason = "FLEXSN_NATIVE=0"
            return
        lib = _capi.lib()
        directory = Path(_capi.library_path()).parent
        path = directory / "libFlexSNTorch.so"
        stamp = directory / "libFlexSNTorch.torch-version"
        if not path.is_file() or not stamp.is_file():
            _reason = f"no libFlexSNTorch.so next to {_capi.library_path()}"
            return
        built = stamp.read_text().strip()
        if _base(built) != _base(torch.__version__):
            _reason = (f"libFlexSNTorch.so was built for PyTorch {built}, this is "
                       f"{torch.__version__}")
            return
        try:
            torch.ops.load_library(str(path))
            ops = torch.ops.flexsn_native
            ops.init(ctypes.cast(lib.flexsn_kernel_launch, ctypes.c_void_p).value,
                     ctypes.cast(lib.flexsn_free, ctypes.c_void_p).value)
        except (OSError, RuntimeError) as e:
            _reason = f"cannot load {path}: {str(e).splitlines()[0]}"
            return
        _ops = ops
        # Each overload's own C++ callable where it has one: the overload
        # object's __call__ is a Python frame around it.
        launch, train, run_plan = (getattr(o, "_op", o) for o in (
            ops.launch.default, ops.train.default, ops.run_plan.default))
        _reason = f"loaded {path} (PyTorch {built})"


def ops():
    """torch.ops.flexsn_native, or None where the ctypes path runs."""
    if not _loaded:
        _load()
    return _ops


def status() -> str:
    """Which call path runs, and why: "native: loaded ..." or
    "ctypes: <reason>"."""
    ops()
    return ("native: " if _ops is not None else "ctypes: ") + _reason


def release(ident: Optional[int]) -> None:
    """Drops a binding (bind / bind_train) that nothing will call again."""
    if ident is not None and _ops is not None:
        try:
            _ops.release(ident)
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass
