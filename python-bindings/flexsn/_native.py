"""The package's PyTorch operators (libFlexSNTorch.so, built from
csrc/FlexSNTorch.cpp): its one way to launch a kernel, eager and compiled.

The operators are C++ compiled against one PyTorch version. They are taken
from, in order:

1. ``libFlexSNTorch.so`` next to the libFlexSN.so the package loaded, when
   the ``libFlexSNTorch.torch-version`` beside it names this PyTorch (a
   build or wheel made where torch was importable);
2. a build for this PyTorch in the cache directory
   (``<cache>/torch-ops/<key>/``, the key covering the source, the PyTorch
   version and its C++ ABI);
3. a build made now, once per PyTorch version and cache: the source
   compiled with the C++ compiler (``$CXX``, else ``c++``) against the
   headers and libraries the installed torch ships (about 15 s). A lock
   file makes concurrent processes (DDP ranks) wait for one build.

Where none of them loads (no compiler, a build error), :func:`ops` returns
None and modules run their cores as PyTorch loops (backend "torch") with
one :class:`FallbackWarning` saying why and how to fix it; :func:`status`
says which it is.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Optional

import torch

from . import _capi
from ._errors import FlexSNError

SOURCE = Path(__file__).resolve().parent / "csrc" / "FlexSNTorch.cpp"

_lock = threading.Lock()
_loaded = False
_ops = None  # torch.ops.flexsn_native once loaded
_reason = "not loaded yet"
_fix = ("install a C++ compiler (g++) or set $CXX, then restart Python: the package "
        "builds its operators for this PyTorch on first use")
# The operators' overloads, looked up once (attribute lookups cost a call).
launch = None
train = None
run_plan = None


def _base(version: str) -> str:
    """2.11.0+cu130 -> 2.11.0: the CUDA variant does not change the C++ ABI
    of the operators used here."""
    return version.split("+", 1)[0]


def _torch_dirs() -> tuple[Path, Path]:
    """(include directory, library directory) of the installed torch."""
    root = Path(torch.__file__).resolve().parent
    return root / "include", root / "lib"


def _cxx11_abi() -> int:
    return int(torch._C._GLIBCXX_USE_CXX11_ABI)


def _cache_root() -> Optional[Path]:
    from ._program import cache_dir
    return cache_dir()


def build_key() -> str:
    """What a build depends on: the source, this PyTorch, its C++ ABI."""
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(f"\0{_base(torch.__version__)}\0{_cxx11_abi()}".encode())
    return h.hexdigest()[:20]


def compiler() -> Optional[str]:
    """The C++ compiler a build uses: $CXX, else c++ or g++ on PATH."""
    env = os.environ.get("CXX")
    if env:
        return env
    return shutil.which("c++") or shutil.which("g++")


def build_command(cxx: str, output: Path) -> list[str]:
    include, lib = _torch_dirs()
    return [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-w",
            f"-D_GLIBCXX_USE_CXX11_ABI={_cxx11_abi()}",
            "-isystem", str(include),
            "-isystem", str(include / "torch" / "csrc" / "api" / "include"),
            str(SOURCE), "-o", str(output),
            f"-L{lib}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{lib}"]


def _build(directory: Path) -> Path:
    """libFlexSNTorch.so for this PyTorch in `directory`, compiled unless a
    finished build is there (whole files only: written, then renamed)."""
    target = directory / "libFlexSNTorch.so"
    if target.is_file():
        return target
    if not SOURCE.is_file():
        raise RuntimeError(f"the operators' source {SOURCE} is missing from the package")
    cxx = compiler()
    if cxx is None or shutil.which(cxx) is None:
        raise RuntimeError(f"no C++ compiler to build them: {cxx!r} not found" if cxx
                           else "no C++ compiler to build them (c++ or g++ on PATH)")
    directory.mkdir(parents=True, exist_ok=True)
    with _file_lock(directory / ".lock"):
        if target.is_file():  # another process built it while this one waited
            return target
        sys.stderr.write(f"flexsn: building its PyTorch operators for torch "
                         f"{torch.__version__} (once; kept in {directory})\n")
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".so")
        os.close(fd)
        try:
            r = subprocess.run(build_command(cxx, Path(tmp)), capture_output=True,
                               text=True)
            if r.returncode != 0:
                tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-8:])
                raise RuntimeError(f"building {SOURCE.name} with {cxx} failed:\n{tail}")
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return target


@contextlib.contextmanager
def _file_lock(path: Path):
    import fcntl
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _find() -> tuple[Path, str]:
    """The library to load, and where it came from (for status())."""
    beside = Path(_capi.library_path()).parent
    prebuilt, stamp = beside / "libFlexSNTorch.so", beside / "libFlexSNTorch.torch-version"
    if prebuilt.is_file() and stamp.is_file() \
            and _base(stamp.read_text().strip()) == _base(torch.__version__):
        return prebuilt, "built with the package"
    root = _cache_root()
    if root is not None:
        return _build(root / "torch-ops" / build_key()), "built for this PyTorch"
    # No cache: a build for this process only, in a folder of its own.
    return (_build(Path(tempfile.mkdtemp(prefix="flexsn-ops-"))),
            "built for this process (FLEXSN_CACHE_DIR=off)")


def _stream_getter() -> int:
    """The address of PyTorch's C shim aoti_torch_get_current_cuda_stream
    (libtorch_cuda.so), or 0 in a PyTorch without CUDA."""
    if not torch.version.cuda:
        return 0
    path = _torch_dirs()[1] / "libtorch_cuda.so"
    try:
        fn = ctypes.CDLL(str(path)).aoti_torch_get_current_cuda_stream
    except (OSError, AttributeError):
        return 0
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def _load() -> None:
    global _loaded, _ops, _reason, _fix, launch, train, run_plan
    with _lock:
        if _loaded:
            return
        _loaded = True
        try:
            lib = _capi.lib()
        except FlexSNError as e:
            _reason, _fix = str(e).strip(), "set FLEXSN_LIBRARY to libFlexSN.so's path"
            return
        try:
            path, origin = _find()
            torch.ops.load_library(str(path))
            ops = torch.ops.flexsn_native
            ops.init(ctypes.cast(lib.flexsn_kernel_launch, ctypes.c_void_p).value,
                     ctypes.cast(lib.flexsn_free, ctypes.c_void_p).value,
                     _stream_getter())
        except (OSError, RuntimeError, subprocess.SubprocessError) as e:
            _reason = str(e).strip()
            return
        _ops = ops
        _register_fakes()
        # Each overload's own C++ callable where it has one: the overload
        # object's __call__ is a Python frame around it.
        launch, train, run_plan = (getattr(o, "_op", o) for o in (
            ops.launch.default, ops.train.default, ops.run_plan.default))
        _reason = f"{path} ({origin}, PyTorch {_base(torch.__version__)})"


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
        _kernels.pop(ident, None)
        _trainings.pop(ident, None)
    try:
        _ops.release(ident)
    except Exception:  # noqa: BLE001 (interpreter shutdown)
        pass
    return True


# What the fake implementations need of each binding: per kernel binding its
# results' (dtype, shape kind: 0 [T, *S], 1 [*S], 2 a [1] scalar); per
# training binding its forward and backward kernel bindings and which of
# the forward's results the autograd node returns.
_kernels: dict = {}
_trainings: dict = {}


def note_kernel(ident: int, results: list) -> None:
    _kernels[ident] = list(results)


def note_training(ident: int, forward: int, backward: int, returned: list) -> None:
    _trainings[ident] = (forward, backward, list(returned))


def _results_like(ident: int, seq_shape, like: torch.Tensor) -> list:
    step = seq_shape[1:]
    out = []
    for dtype, kind in _kernels[ident]:
        shape = seq_shape if kind == 0 else step if kind == 1 else (1,)
        out.append(like.new_empty(shape, dtype=dtype))
    return out


def _register_fakes() -> None:
    """Shapes and dtypes of each operator's results without running it
    (torch.compile's tracing), from the bindings the package recorded."""
    lib = "flexsn_native::"

    @torch.library.register_fake(lib + "launch")
    def _launch_fake(ident, args):
        return _results_like(ident, args[0].shape, args[0])

    @torch.library.register_fake(lib + "forward")
    def _forward_fake(ident, leaves):
        return _results_like(_trainings[ident][0], leaves[0].shape, leaves[0])

    @torch.library.register_fake(lib + "recompute")
    def _recompute_fake(ident, leaves, after):
        return _forward_fake(ident, leaves)

    @torch.library.register_fake(lib + "backward")
    def _backward_fake(ident, args, seq_shape):
        like = next(t for t in args if t is not None)
        return _results_like(_trainings[ident][1], list(seq_shape), like)

    @torch.library.register_fake(lib + "train")
    def _train_fake(ident, leaves):
        forward, _, returned = _trainings[ident]
        res = _results_like(forward, leaves[0].shape, leaves[0])
        return [res[i] for i in returned]
