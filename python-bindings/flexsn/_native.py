"""The package's PyTorch operators (libFlexSNTorch.so, built from
csrc/FlexSNTorch.cpp): its one way to launch a kernel, eager and compiled.

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

Where none of them loads (no compiler, a build error), :func:`ops` returns
None and modules run their cores as PyTorch loops (backend "torch") with
one :class:`FallbackWarning` saying why and how to fix it; :func:`status`
says which it is.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Optional

import torch

from . import _cache, _capi, _errors
from ._errors import FlexSNError

SOURCE = Path(__file__).resolve().parent / "csrc" / "FlexSNTorch.cpp"

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
    h.update(f"\0{_base(torch.__version__)}\0{_cxx11_abi()}\0".encode())
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
    include, lib = _torch_dirs()
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


def _find(failed: Optional[Path] = None) -> tuple[Path, str]:
    """The library to load, and where it came from (for status()); `failed`:
    a cached build that did not load, to build again."""
    beside = Path(_capi.library_path()).parent
    prebuilt, stamp = beside / "libFlexSNTorch.so", beside / "libFlexSNTorch.torch-version"
    if failed is None and prebuilt.is_file() and stamp.is_file() \
            and _base(stamp.read_text().strip()) == _base(torch.__version__):
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
        path, origin = _find()
        try:
            torch.ops.load_library(str(path))
        except OSError as e:
            if origin != "built for this PyTorch":
                raise
            # a cached build that does not load: built again, once
            warnings.warn(f"flexsn: the cached operator library {path} does not load "
                          f"({e}); building it again", _errors.CacheWarning, stacklevel=4)
            path, origin = _find(failed=path)
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
    _register_fakes()
    # Each overload's own C++ callable where it has one: the overload
    # object's __call__ is a Python frame around it.
    launch, train, run_plan = (getattr(o, "_op", o) for o in (
        ops.launch.default, ops.train.default, ops.run_plan.default))
    _reason = f"{path} ({origin}, PyTorch {_base(torch.__version__)})"


# The operator library's C entry points (the calls that take addresses,
# which are no operators: see csrc/FlexSNTorch.cpp).
_clib = None
_DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3}


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


def _code(v) -> int:
    """A layout value as the C side reads it: a dtype by its code."""
    return _DTYPE_CODES[v] if isinstance(v, torch.dtype) else int(v)


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
    lines += [" ".join(str(_code(v)) for v in row) + " " + n
              for row, n in zip(reads, read_names)]
    lines.append(f"results {len(results)}")
    lines += [" ".join(str(_code(v)) for v in row) for row in results]
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
        _kernels.pop(ident, None)
        _trainings.pop(ident, None)
        # under the lock: a bind_shared of the same key waits until the
        # operators have dropped the old binding
        # a C call, not an operator: a collection during a trace must not
        # put a release into the graph
        try:
            _clib.flexsn_torch_release(ident)
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass
    return True


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


_CODE_DTYPES = {v: k for k, v in _DTYPE_CODES.items()}


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


def _register_fakes() -> None:
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
