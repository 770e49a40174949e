"""ctypes binding of libFlexSN.so (include/flexsn-c/FlexSN.h, API version 3).

One thin layer: it finds and loads the library, declares each C function's
signature and turns a non-zero return into :class:`flexsn.FlexSNError` with
the library's message. It holds no logic of its own.

The library is looked up, in order: ``$FLEXSN_LIBRARY``; ``libFlexSN.so``
next to this file (an installed package); ``build/lib/libFlexSN.so`` of a
source checkout this package sits in.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

from ._errors import FlexSNError

API_VERSION = 3
TARGET_CPU = 0
TARGET_CUDA = 1

_lock = threading.Lock()
_lib = None
_build = ""
_path = ""


def _candidates() -> list[Path]:
    env = os.environ.get("FLEXSN_LIBRARY")
    if env:
        return [Path(env)]
    here = Path(__file__).resolve().parent
    return [here / "libFlexSN.so", here.parent.parent / "build" / "lib" / "libFlexSN.so"]


def _declare(lib: ctypes.CDLL) -> None:
    c_int, c_char_p, c_void_p = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p
    err = ctypes.POINTER(c_void_p)
    sigs = {
        "flexsn_api_version": (c_int, []),
        "flexsn_version": (c_char_p, []),
        "flexsn_free": (None, [c_void_p]),
        "flexsn_program_create": (
            c_int, [c_char_p, c_int, c_char_p, ctypes.POINTER(c_void_p), err]),
        "flexsn_program_load_cuda": (
            c_int, [c_char_p, c_char_p, ctypes.POINTER(c_void_p), err]),
        "flexsn_program_manifest": (c_char_p, [c_void_p]),
        "flexsn_program_ptx": (c_char_p, [c_void_p]),
        "flexsn_program_destroy": (None, [c_void_p]),
        "flexsn_program_set_cpu_cache_dir": (c_int, [c_void_p, c_char_p, err]),
        "flexsn_kernel_get": (
            c_int, [c_void_p, c_char_p, c_int, ctypes.POINTER(c_void_p), err]),
        "flexsn_kernel_num_pointers": (ctypes.c_size_t, [c_void_p]),
        "flexsn_kernel_preload": (c_int, [c_void_p, ctypes.c_int64, err]),
        "flexsn_kernel_launch": (
            c_int, [c_void_p, c_void_p, ctypes.c_size_t, ctypes.c_int64,
                    ctypes.c_int64, c_void_p, ctypes.c_uint, err]),
        "flexsn_cuda_device_count": (c_int, [ctypes.POINTER(c_int), err]),
        "flexsn_cuda_device_info": (
            c_int, [c_int, ctypes.POINTER(c_int), ctypes.POINTER(c_void_p), err]),
        "flexsn_cuda_synchronize": (c_int, [c_int, err]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in _candidates():
            if not path.is_file():
                tried.append(f"{path} (missing)")
                continue
            try:
                handle = ctypes.CDLL(str(path))
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            # The version first: another version's library may lack a
            # function this package declares.
            handle.flexsn_api_version.restype = ctypes.c_int
            handle.flexsn_api_version.argtypes = []
            version = handle.flexsn_api_version()
            if version != API_VERSION:
                raise FlexSNError(
                    f"{path} implements C API version {version}; this package "
                    f"needs version {API_VERSION}")
            _declare(handle)
            global _build, _path
            stat = path.stat()
            _path = str(path.resolve())
            _build = f"{_path}:{stat.st_size}:{stat.st_mtime_ns}"
            _lib = handle
            return _lib
        raise FlexSNError(
            "cannot load libFlexSN.so; tried: " + "; ".join(tried)
            + ". Set FLEXSN_LIBRARY to its path.")


def library_path() -> str:
    """The path of the loaded libFlexSN.so."""
    lib()
    return _path


def _take_string(ptr: ctypes.c_void_p) -> str:
    if not ptr:
        return ""
    text = ctypes.string_at(ptr).decode("utf-8", "replace")
    lib().flexsn_free(ptr)
    return text


def _check(result: int, error: ctypes.c_void_p, what: str) -> None:
    if result != 0:
        message = _take_string(error)
        raise FlexSNError(f"{what}: {message}" if message else what)


def version() -> str:
    return lib().flexsn_version().decode()


def build() -> str:
    """Which build of the library is loaded (its path, size and mtime): a
    rebuilt compiler makes different PTX under the same version string."""
    lib()
    return _build


def program_create(source: str, target: int, options: str) -> int:
    handle, error = ctypes.c_void_p(), ctypes.c_void_p()
    r = lib().flexsn_program_create(source.encode(), target, options.encode(),
                                    ctypes.byref(handle), ctypes.byref(error))
    _check(r, error, "compilation failed")
    return handle.value


def program_load_cuda(ptx: str, manifest: str) -> int:
    handle, error = ctypes.c_void_p(), ctypes.c_void_p()
    r = lib().flexsn_program_load_cuda(ptx.encode(), manifest.encode(),
                                       ctypes.byref(handle), ctypes.byref(error))
    _check(r, error, "cannot load a cached program")
    return handle.value


def program_manifest(program: int) -> str:
    return lib().flexsn_program_manifest(program).decode()


def program_ptx(program: int) -> str:
    return lib().flexsn_program_ptx(program).decode()


def program_set_cpu_cache_dir(program: int, directory: str) -> None:
    error = ctypes.c_void_p()
    r = lib().flexsn_program_set_cpu_cache_dir(program, os.fsencode(directory),
                                               ctypes.byref(error))
    _check(r, error, "cannot set the CPU object cache")


def program_destroy(program: int) -> None:
    lib().flexsn_program_destroy(program)


def kernel_get(program: int, name: str, device: int) -> int:
    handle, error = ctypes.c_void_p(), ctypes.c_void_p()
    r = lib().flexsn_kernel_get(program, name.encode(), device,
                                ctypes.byref(handle), ctypes.byref(error))
    _check(r, error, f"cannot load kernel {name!r}")
    return handle.value


def kernel_preload(kernel: int, NCL: int) -> None:
    """CUDA: compile, in the background, the entry a launch at NCL takes."""
    error = ctypes.c_void_p()
    _check(lib().flexsn_kernel_preload(kernel, NCL, ctypes.byref(error)), error,
           "kernel preload failed")
