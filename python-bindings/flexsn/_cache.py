"""The on-disk cache: compiled programs (a CUDA program's PTX and manifest;
a CPU program's kernel objects, which libFlexSN writes itself) and the
package's PyTorch operators built for this PyTorch.

Where: ``$FLEXSN_CACHE_DIR``, else ``~/.cache/flexsn``;
``FLEXSN_CACHE_DIR=off``: nowhere. What it trusts: a directory that is
not a symbolic link, is owned by this user and is writable by no one else
(it is created with mode 0700). One that is not, or that cannot be created
or written, is not used: the process takes a private temporary directory
instead, with one :class:`flexsn.CacheWarning`. Entries are regular files
of this user, opened without following symbolic links, and each carries a
SHA-256 of its contents checked before use; one that fails is built again
and replaced, with one warning.

Sharing a cache between users is not supported: another user's files are
code this process would run. Ship the operators with the package instead
(a wheel built where torch is installed has them beside libFlexSN.so).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Optional

from ._errors import CacheWarning

_lock = threading.Lock()
_roots: dict = {}  # (FLEXSN_CACHE_DIR, HOME) -> the directory in use, or None
_fallback: Optional[Path] = None
_warned: set = set()

HEADER = b"flexsn-cache-entry-1 sha256="


class Untrusted(Exception):
    """A path the cache will not use; the message says why."""


def _warn_once(key, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, CacheWarning, stacklevel=4)


def check_dir(path: Path) -> None:
    """Raises Untrusted unless `path` is a directory (not a symbolic link)
    of this user that no one else can write."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise Untrusted(f"{path} cannot be read ({e.strerror})") from None
    if stat.S_ISLNK(st.st_mode):
        raise Untrusted(f"{path} is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise Untrusted(f"{path} is not a directory")
    if st.st_uid != os.geteuid():
        raise Untrusted(f"{path} belongs to user id {st.st_uid}, not this user "
                        f"({os.geteuid()})")
    if st.st_mode & 0o022:
        raise Untrusted(f"{path} is writable by its group or others (mode "
                        f"{stat.S_IMODE(st.st_mode):04o})")


def private_dir(path: Path) -> Path:
    """`path` as a directory of this user with mode 0700 (created so where
    missing), or Untrusted."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise Untrusted(f"{path} cannot be created ({e.strerror})") from None
    check_dir(path)
    if not os.access(path, os.W_OK | os.X_OK):
        raise Untrusted(f"{path} is not writable")
    return path


def subdir(parent: Path, name: str) -> Path:
    """The private directory `parent`/`name`."""
    return private_dir(parent / name)


def _private_fallback() -> Path:
    global _fallback
    if _fallback is None:
        _fallback = Path(tempfile.mkdtemp(prefix="flexsn-cache-"))
    return _fallback


def root() -> Optional[Path]:
    """The cache directory this process uses (see the module's doc), or
    None where FLEXSN_CACHE_DIR=off."""
    where = os.environ.get("FLEXSN_CACHE_DIR")
    key = (where, os.environ.get("HOME"))
    with _lock:
        if key in _roots:
            return _roots[key]
        if where is not None and where.strip().lower() in ("", "0", "off", "none"):
            found = None
        else:
            try:
                path = Path(where) if where else Path.home() / ".cache" / "flexsn"
                found = private_dir(path)
            except (Untrusted, RuntimeError) as e:  # RuntimeError: no home directory
                found = _private_fallback()
                _warn_once(("root", key), f"flexsn does not use the cache directory: {e}; "
                           f"this process caches in {found} instead (see the cache section "
                           "of docs/python.md)")
        _roots[key] = found
        return found


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_entry(directory: Path, name: str, payload: bytes) -> None:
    """Writes `payload` to `directory`/`name` with its checksum, whole or not
    at all (a temporary file of mode 0600, then renamed). An error only
    costs a later process the build."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(HEADER + _digest(payload).encode() + b"\n" + payload)
        os.replace(tmp, directory / name)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def read_trusted(path: Path) -> Optional[bytes]:
    """The bytes of `path` when it is a regular file of this user writable by
    it alone (not followed if a symbolic link); None where it is missing;
    Untrusted otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise Untrusted(f"{path} cannot be opened ({e.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise Untrusted(f"{path} is not a regular file of this user writable by it alone")
        return f.read()


def read_entry(directory: Path, name: str) -> Optional[bytes]:
    """The payload of the entry `directory`/`name`, or None where it is
    missing or fails its checks (then with one warning: the caller builds
    it again and replaces it)."""
    path = directory / name
    try:
        data = read_trusted(path)
        if data is None:
            return None
        head, sep, payload = data.partition(b"\n")
        if not sep or not head.startswith(HEADER):
            raise Untrusted(f"{path} has no checksum (damaged, or written by another "
                            "version)")
        if head[len(HEADER):].decode(errors="replace") != _digest(payload):
            raise Untrusted(f"{path} fails its checksum (damaged)")
        return payload
    except Untrusted as e:
        _warn_once(("entry", str(path)), f"flexsn: {e}; building it again")
        return None


def file_digest(path: Path) -> Optional[str]:
    """The SHA-256 of a trusted file (read_trusted), or None."""
    try:
        data = read_trusted(path)
    except Untrusted:
        return None
    return None if data is None else _digest(data)
