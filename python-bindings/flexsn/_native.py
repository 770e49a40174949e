"""The package's PyTorch operators (libFlexSNTorch.so, built from
csrc/FlexSNTorch.cpp): its one way to launch a kernel, eager and compiled.
This module loads them (the library file comes from flexsn/_opsbuild.py),
calls their C entry points (binding kernels and training pairs, handing
over programs: the calls that take addresses, which are no operators) and
keeps the registry of bindings by content key. flexsn/_recipes.py writes
what a graph carries to bind them in another process, flexsn/_fakes.py
their fake implementations for tracing.

Where the operators do not load (no compiler, a build error), :func:`ops`
returns None and modules run their cores as PyTorch loops (backend
"torch") with one :class:`FallbackWarning` saying why and how to fix it;
:func:`status` says which it is.
"""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
import threading
import warnings
from typing import Optional

import torch

from . import _capi, _errors, _fakes, _opsbuild
from ._errors import FlexSNError
from ._recipes import code as _code


_lock = threading.Lock()
_loaded = False  # set once the outcome (ops or a reason) is final
_ops = None  # torch.ops.flexsn_native once loaded
_reason = "not loaded yet"
_fix = ("install a C++ compiler (g++) or set $CXX, then restart Python: the package "
        "builds its operators for this PyTorch on first use")
# The operators' overloads, looked up once (attribute lookups cost a call).
launch = None
train = None
run_plan = None


def _stream_getter() -> int:
    """The address of PyTorch's C shim aoti_torch_get_current_cuda_stream
    (libtorch_cuda.so), or 0 in a PyTorch without CUDA."""
    if not torch.version.cuda:
        return 0
    path = _opsbuild.torch_dirs()[1] / "libtorch_cuda.so"
    try:
        fn = ctypes.CDLL(str(path)).aoti_torch_get_current_cuda_stream
    except (OSError, AttributeError):
        return 0
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def _load() -> None:
    """Loads the operators once. Another thread asking meanwhile waits on
    the lock for the outcome (a first build takes seconds), rather than
    seeing "not loaded yet" and running its modules as PyTorch loops."""
    global _loaded
    with _lock:
        if _loaded:
            return
        try:
            _load_locked()
        finally:
            _loaded = True


def _load_locked() -> None:
    global _ops, _reason, _fix, launch, train, run_plan
    try:
        lib = _capi.lib()
    except FlexSNError as e:
        _reason, _fix = str(e).strip(), "set FLEXSN_LIBRARY to libFlexSN.so's path"
        return
    try:
        path, origin = _opsbuild.find()
        try:
            torch.ops.load_library(str(path))
        except OSError as e:
            if origin != "built for this PyTorch":
                raise
            # a cached build that does not load: built again, once
            warnings.warn(f"flexsn: the cached operator library {path} does not load "
                          f"({e}); building it again", _errors.CacheWarning, stacklevel=4)
            path, origin = _opsbuild.find(failed=path)
            torch.ops.load_library(str(path))
        ops = torch.ops.flexsn_native
        _declare(ctypes.CDLL(str(path)))
        address = lambda fn: ctypes.cast(fn, ctypes.c_void_p).value  # noqa: E731
        _checked(_clib.flexsn_torch_init, address(lib.flexsn_kernel_launch),
                 address(lib.flexsn_free), address(lib.flexsn_program_destroy),
                 address(lib.flexsn_program_create), address(lib.flexsn_kernel_get),
                 address(lib.flexsn_cuda_device_info), address(lib.flexsn_kernel_pointer),
                 _stream_getter())
    except (OSError, RuntimeError, AttributeError, subprocess.SubprocessError) as e:
        _reason = str(e).strip()
        return
    _ops = ops
    _fakes.register()
    # Each overload's own C++ callable where it has one: the overload
    # object's __call__ is a Python frame around it.
    launch, train, run_plan = (getattr(o, "_op", o) for o in (
        ops.launch.default, ops.train.default, ops.run_plan.default))
    _reason = f"{path} ({origin}, PyTorch {_opsbuild.base(torch.__version__)})"


# The operator library's C entry points (the calls that take addresses,
# which are no operators: see csrc/FlexSNTorch.cpp).
_clib = None


def _declare(clib: ctypes.CDLL) -> None:
    global _clib
    i64, vp, cp, sz = ctypes.c_int64, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
    p64 = ctypes.POINTER(i64)
    for name, res, args in (
            ("flexsn_torch_init", ctypes.c_int, [vp, vp, vp, vp, vp, vp, vp, vp, cp, sz]),
            ("flexsn_torch_adopt_program", ctypes.c_int, [vp, cp, sz]),
            ("flexsn_torch_drop_program", None, [vp]),
            ("flexsn_torch_release", None, [i64]),
            ("flexsn_torch_bind_train", i64, [i64, i64, p64, p64, ctypes.c_int, i64, cp, cp,
                                              sz]),
            ("flexsn_torch_bind", i64, [vp, vp, cp, i64, ctypes.c_int, i64, i64, p64, i64, cp,
                                        p64, i64, i64, cp, sz])):
        fn = getattr(clib, name)
        fn.restype, fn.argtypes = res, args
    _clib = clib


def _call(name: str, *args) -> int:
    """The operator library's C function `name` on `args`, once the
    operators are loaded (see _checked)."""
    if ops() is None:
        raise FlexSNError(unavailable_message())
    return _checked(getattr(_clib, name), *args)


def _int64s(values: list):
    """`values` as a C array of int64 (one element at least: never NULL)."""
    return (ctypes.c_int64 * max(len(values), 1))(*values)


def _checked(fn, *args) -> int:
    """`fn(*args, error buffer)`: its result, or the RuntimeError it reports."""
    error = ctypes.create_string_buffer(2048)
    result = fn(*args, error, len(error))
    if result < 0:
        raise RuntimeError(f"flexsn_native: {error.value.decode(errors='replace')}")
    return result


def adopt_program(handle: int) -> None:
    """Hands a libFlexSN program to the operators, which destroy it once
    drop_program() was called and no kernel bound to it remains."""
    _call("flexsn_torch_adopt_program", handle)


def drop_program(handle: int) -> None:
    _clib.flexsn_torch_drop_program(handle)


def bind_kernel(program: int, kernel: int, name: str, num_pointers: int, cuda: bool,
                device: int, num_args: int, reads: list, read_names: list, results: list,
                ident: int = 0) -> int:
    """Binds `kernel` (of the adopted `program`) to calls of `num_args`
    tensors: `reads` rows (slot, position, dtype, shape kind, optional),
    `results` rows (slot, dtype, shape kind); shape kinds 0 [T, NCL], 1
    [NCL], 2 one element. Returns its id (`ident` where not 0)."""
    def flat(rows):
        return _int64s([_code(v) for row in rows for v in row])
    return _call("flexsn_torch_bind", program, kernel, name.encode(),
                 num_pointers, int(cuda), device, num_args, flat(reads), len(reads),
                 "\n".join(read_names).encode(), flat(results), len(results), ident)


def bind_train(forward: int, backward: int, out: list, state: list, kept: list,
               read: list, grad: list, nondiff: list, recompute: bool, ident: int,
               recipe_text: str) -> int:
    """Binds the training pair of kernel bindings `forward` and `backward`
    (their results' indices: outputs, states, kept; per leaf whether the
    backward reads it and its gradient's index; the results without a
    gradient path) under `ident`."""
    lists = [out, state, kept, read, grad, nondiff]
    return _call("flexsn_torch_bind_train", forward, backward,
                 _int64s([int(v) for lst in lists for v in lst]),
                 _int64s([len(lst) for lst in lists]), int(recompute), ident,
                 recipe_text.encode())


def ops():
    """torch.ops.flexsn_native, or None where the operators cannot load
    (status() says why)."""
    if not _loaded:
        _load()
    return _ops


def status() -> str:
    """"native: <library> (...)" where the operators loaded, else "torch:
    <why>" (modules then run their cores as PyTorch loops)."""
    ops()
    return ("native: " if _ops is not None else "torch: ") + _reason


def unavailable_message() -> str:
    """Why compiled cores cannot run, and what to do about it."""
    return (f"flexsn cannot load its PyTorch operators ({_reason}); cores run as "
            f"PyTorch loops (backend 'torch'), much slower. To fix: {_fix}")


# Kernel and training bindings are named by a key derived from what they
# do, not by a counter: a torch.compile'd graph holds the key as an integer
# constant, and PyTorch's caches (Inductor's FX graph cache, AOTAutograd's
# cache) reuse a graph across processes by its text. A counter's id would
# name another binding in the next process (a recompute pair where the
# cached graph was traced for the plain one, say); a key names the same
# kernels, layout and autograd plumbing everywhere. Equal keys in one
# process share one binding, counted.
_refs: dict = {}
_refs_lock = threading.RLock()  # a binding's __del__ may run inside bind_shared (GC)


def content_key(*parts) -> int:
    """A key in [2^62, 2^63) from `parts` (their reprs): stable across
    processes, and above every counter id (plans' ids)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") >> 2) | (1 << 62)


def bind_shared(key: int, bind) -> int:
    """The binding named `key`: one more use of it where it exists, else
    `bind(key)` (which binds under that id)."""
    with _refs_lock:
        count = _refs.get(key)
        if count is None:
            if bind(key) != key:
                raise FlexSNError(f"internal error: binding #{key} came back under another id")
        _refs[key] = (count or 0) + 1
    return key


def release(ident: Optional[int]) -> bool:
    """Drops one use of a binding (bind / bind_train / bind_plan); the
    binding goes when nothing will call it again. True when it went."""
    if ident is None or _ops is None:
        return False
    with _refs_lock:
        count = _refs.get(ident)
        if count is not None:
            if count > 1:
                _refs[ident] = count - 1
                return False
            del _refs[ident]
        _fakes.forget(ident)
        # under the lock: a bind_shared of the same key waits until the
        # operators have dropped the old binding
        # a C call, not an operator: a collection during a trace must not
        # put a release into the graph
        try:
            _clib.flexsn_torch_release(ident)
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass
    return True
