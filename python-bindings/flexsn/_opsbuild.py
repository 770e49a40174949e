"""Where the package's operator library (libFlexSNTorch.so) comes from.

The operators are C++ compiled against one PyTorch version. They are taken
from, in order:

1. ``libFlexSNTorch.so`` next to the libFlexSN.so the package loaded, when
   the ``libFlexSNTorch.torch-version`` beside it names this PyTorch (a
   build or wheel made where torch was importable);
2. a build for this PyTorch in the cache directory (flexsn/_cache.py):
   ``<cache>/torch-ops/<key>/``, the key covering the source, the PyTorch
   version, its C++ ABI and the compiler (its path and ``--version``).
   The ``current`` entry there (checksummed) names the build in use and
   the SHA-256 of its library, checked before it is loaded;
3. a build made now, once per key and cache: the source compiled with the
   C++ compiler (``$CXX``, split as a shell word list, else ``c++``)
   against the headers and libraries the installed torch ships (about
   15 s; at most ``$FLEXSN_BUILD_TIMEOUT`` seconds, 900 by default), into a
   fresh ``build-*`` directory that ``current`` then names. A lock file
   makes concurrent processes (DDP ranks) wait for one build, and say
   that they wait. A cached library that is damaged or does not load is
   built again, once, the same way.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Optional

import torch

from . import _cache, _capi, _errors

SOURCE = Path(__file__).resolve().parent / "csrc" / "FlexSNTorch.cpp"


def base(version: str) -> str:
    """2.11.0+cu130 -> 2.11.0: the CUDA variant does not change the C++ ABI
    of the operators used here."""
    return version.split("+", 1)[0]


def torch_dirs() -> tuple[Path, Path]:
    """(include directory, library directory) of the installed torch."""
    root = Path(torch.__file__).resolve().parent
    return root / "include", root / "lib"


def _cxx11_abi() -> int:
    return int(torch._C._GLIBCXX_USE_CXX11_ABI)


def compiler() -> Optional[list]:
    """The C++ compiler a build uses, as a command: $CXX split as a shell
    word list ("ccache g++"), else c++ or g++ on PATH."""
    env = os.environ.get("CXX")
    if env and env.strip():
        return shlex.split(env)
    found = shutil.which("c++") or shutil.which("g++")
    return [found] if found else None


_identities: dict = {}


def _compiler_identity(cxx: list) -> str:
    """What names the compiler: its command, the path it resolves to and
    what `--version` prints (a changed compiler is another build key)."""
    key = tuple(cxx)
    if key not in _identities:
        try:
            r = subprocess.run(cxx + ["--version"], capture_output=True, text=True,
                               timeout=60)
            version = r.stdout.strip()
        except (OSError, subprocess.SubprocessError) as e:
            version = f"unknown ({e})"
        path = shutil.which(cxx[0])
        _identities[key] = "\0".join(cxx + [os.path.realpath(path) if path else "", version])
    return _identities[key]


def build_key(cxx: list) -> str:
    """What a build depends on: the source, this PyTorch, its C++ ABI, the
    compiler."""
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(f"\0{base(torch.__version__)}\0{_cxx11_abi()}\0".encode())
    h.update(_compiler_identity(cxx).encode())
    h.update(("\0" + " ".join(_extra_flags() + _loaded_cxx_runtime())).encode())
    return h.hexdigest()[:20]


def _extra_flags() -> list:
    """$FLEXSN_OPS_CXXFLAGS, split as shell words: flags added to the build
    (the sanitizer job's -fsanitize=address,undefined)."""
    return shlex.split(os.environ.get("FLEXSN_OPS_CXXFLAGS", ""))


def _loaded_cxx_runtime() -> list:
    """The shared C++ runtime (libstdc++.so) this process has loaded for
    PyTorch, as a linker input, or nothing where none is found. Linked by
    its path, it comes before the compiler's own default: a toolchain that
    ships only a static libstdc++ would otherwise put a private copy into
    the operators, whose streams are never initialised there, and the
    first error message (TORCH_CHECK formats through an ostringstream)
    would crash the process."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(maxsplit=5)[-1].strip()
                if os.path.basename(path).startswith("libstdc++.so"):
                    return [path]
    except OSError:
        pass
    return []


def build_command(cxx: list, output: Path) -> list[str]:
    include, lib = torch_dirs()
    return list(cxx) + [
        "-O2", "-std=c++17", "-shared", "-fPIC", "-w",
        f"-D_GLIBCXX_USE_CXX11_ABI={_cxx11_abi()}",
        "-isystem", str(include),
        "-isystem", str(include / "torch" / "csrc" / "api" / "include"),
        str(SOURCE), "-o", str(output),
        f"-L{lib}", "-ltorch_cpu", "-lc10", f"-Wl,-rpath,{lib}"] + _loaded_cxx_runtime() \
        + _extra_flags()


def _timeout() -> float:
    try:
        return max(float(os.environ.get("FLEXSN_BUILD_TIMEOUT", "900")), 1.0)
    except ValueError:
        return 900.0


def _usable_compiler() -> list:
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler to build them (c++ or g++ on PATH)")
    if shutil.which(cxx[0]) is None:
        raise RuntimeError(f"no C++ compiler to build them: {cxx[0]!r} not found")
    return cxx


def _compile_into(cxx: list, directory: Path) -> Path:
    """libFlexSNTorch.so compiled into `directory`."""
    if not SOURCE.is_file():
        raise RuntimeError(f"the operators' source {SOURCE} is missing from the package")
    target = directory / "libFlexSNTorch.so"
    sys.stderr.write(f"flexsn: building its PyTorch operators for torch "
                     f"{torch.__version__} (once; kept in {directory})\n")
    try:
        r = subprocess.run(build_command(cxx, target), capture_output=True, text=True,
                           timeout=_timeout())
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"building {SOURCE.name} with {shlex.join(cxx)} took over "
                           f"{_timeout():.0f} s (FLEXSN_BUILD_TIMEOUT) and was stopped") from None
    if r.returncode != 0:
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-8:])
        raise RuntimeError(f"building {SOURCE.name} with {shlex.join(cxx)} failed:\n{tail}")
    return target


def _current(key_dir: Path) -> Optional[Path]:
    """The library the `current` entry of `key_dir` names, when its
    checksum matches (else None, with a warning where it does not)."""
    payload = _cache.read_entry(key_dir, "current")
    if payload is None:
        return None
    try:
        entry = json.loads(payload)
        build, digest = str(entry["build"]), str(entry["sha256"])
    except (ValueError, KeyError, TypeError):
        return None
    if "/" in build or not build.startswith("build-"):
        return None
    library = key_dir / build / "libFlexSNTorch.so"
    try:
        _cache.check_dir(key_dir / build)
    except _cache.Untrusted:
        return None
    if _cache.file_digest(library) != digest:
        warnings.warn(f"flexsn: the cached operator library {library} is missing or fails "
                      "its checksum; building it again", _errors.CacheWarning, stacklevel=5)
        return None
    return library


def _build(key_dir: Path, cxx: list, failed: Optional[Path] = None) -> Path:
    """The operators built for `cxx` in `key_dir` (a private directory):
    the current build, unless there is none, it fails its checks or it is
    `failed` (one that did not load); else a build into a fresh directory,
    which `current` then names (the swap is one rename)."""
    with _file_lock(key_dir / ".lock"):
        library = _current(key_dir)
        if library is not None and library != failed:
            return library
        fresh = Path(tempfile.mkdtemp(dir=key_dir, prefix="build-"))
        try:
            library = _compile_into(cxx, fresh)
        except BaseException:
            shutil.rmtree(fresh, ignore_errors=True)
            raise
        digest = _cache.file_digest(library)
        _cache.write_entry(key_dir, "current", json.dumps(
            {"build": fresh.name, "sha256": digest}).encode())
        # older builds go (a process that loaded one keeps its mapping)
        for old in key_dir.glob("build-*"):
            if old != fresh:
                shutil.rmtree(old, ignore_errors=True)
        return library


@contextlib.contextmanager
def _file_lock(path: Path):
    """An exclusive lock on `path`; a process that has to wait for another's
    build says so, and gives up after the build timeout."""
    import fcntl
    import time
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            sys.stderr.write(f"flexsn: waiting for another process that is building the "
                             f"PyTorch operators in {path.parent}\n")
            deadline = time.monotonic() + _timeout() + 60
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"another process held {path} for longer than "
                                           "the build timeout") from None
                    time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def find(failed: Optional[Path] = None) -> tuple[Path, str]:
    """The library to load, and where it came from (for status()); `failed`:
    a cached build that did not load, to build again."""
    beside = Path(_capi.library_path()).parent
    prebuilt, stamp = beside / "libFlexSNTorch.so", beside / "libFlexSNTorch.torch-version"
    if failed is None and prebuilt.is_file() and stamp.is_file() \
            and base(stamp.read_text().strip()) == base(torch.__version__):
        return prebuilt, "built with the package"
    cxx = _usable_compiler()
    root = _cache.root()
    if root is not None:
        try:
            key_dir = _cache.subdir(_cache.subdir(root, "torch-ops"), build_key(cxx))
            return _build(key_dir, cxx, failed), "built for this PyTorch"
        except _cache.Untrusted as e:
            raise RuntimeError(f"the cache cannot hold the operators: {e}") from None
    # No cache: a build for this process only, in a folder of its own.
    return (_compile_into(cxx, Path(tempfile.mkdtemp(prefix="flexsn-ops-"))),
            "built for this process (FLEXSN_CACHE_DIR=off)")
