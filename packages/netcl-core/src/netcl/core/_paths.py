"""Where netcl keeps files between runs (program binaries, autotune winners), and how.

Every cache entry netcl writes is framed by :func:`write_entry`: a header naming the key the
entry was built for (device, driver version, source hash, options, ...) and a SHA-256 over that
key and the content. :func:`read_entry` checks all of it before anyone hands the content to a
driver, so a truncated, bit-flipped, swapped or foreign entry becomes a :class:`CacheEntryError`
(which :func:`discard_entry` turns into one ``RuntimeWarning`` and a rebuild) instead of a crash
or a wrong kernel.

Examples:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "entry"
    >>> write_entry(path, {"device": "gpu0"}, b"binary")
    >>> read_entry(path, {"device": "gpu0"})
    b'binary'
    >>> read_entry(path, {"device": "gpu1"})
    Traceback (most recent call last):
    ...
    netcl.core._paths.CacheEntryError: ... built for another key: device is 'gpu0', expected 'gpu1'
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; the in-use lock is a no-op there
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "IN_USE_LOCK",
    "CacheEntryError",
    "atomic_write",
    "cache_dir",
    "cache_root",
    "discard_entry",
    "exclusive_use",
    "mark_in_use",
    "read_entry",
    "write_entry",
]

# NOTE [ Cache entry format ]
# line 1: b"netcl-cache-entry 1"
# line 2: JSON {"key": {str: str}, "sha256": hex, "size": int}, keys sorted, no spaces
# then:   exactly `size` bytes of content
# sha256 = SHA-256(canonical key JSON + b"\n" + content), so a flipped byte anywhere but the
# header's own digest is a checksum mismatch, and a sound entry for another key (a swapped or
# copied file) is told apart from a corrupt one.
_MAGIC = b"netcl-cache-entry 1"


class CacheEntryError(ValueError):
    """A cache file that must not be used; ``reason`` says what is wrong with it."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"cache entry {path}: {reason}")


def cache_root() -> Path:
    """netcl's cache folder, not created: ``$NETCL_CACHE_DIR``, else ``$XDG_CACHE_HOME/netcl``,
    else ``~/.cache/netcl``.

    Examples:
        >>> import os
        >>> os.environ["NETCL_CACHE_DIR"] = "/tmp/netcl-doc-cache"
        >>> str(cache_root())
        '/tmp/netcl-doc-cache'
        >>> del os.environ["NETCL_CACHE_DIR"]
    """
    return Path(os.environ.get("NETCL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "netcl"
    ))


def cache_dir(*parts: str) -> Path:
    """Return (and create) ``$NETCL_CACHE_DIR/parts...``, default ``~/.cache/netcl``.

    Raises:
        OSError: the folder cannot be created (callers treat that as "no disk cache").

    Examples:
        >>> cache_dir("programs").name
        'programs'
    """
    path = Path(cache_root(), *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


# NOTE [ In-use lock ]
# PoCL trusts its cache folder: a .so it found there and then cannot dlopen aborts the process,
# and an ICD folder emptied before the loader reads it hides a platform. Files netcl itself
# frames (programs, autotune, probes) may vanish under a running process at any time: a missing
# entry is rebuilt. So each process that loads OpenCL holds a shared flock on
# $NETCL_CACHE_DIR/in-use.lock until it exits (the kernel drops it even on a crash), and
# `netcl cache clear` empties PoCL's and the ICD folders only when it gets the lock exclusively.
IN_USE_LOCK = "in-use.lock"
_held: dict[str, int] = {}  # cache root -> the descriptor holding this process's shared lock
_held_lock = threading.Lock()


def mark_in_use() -> None:
    """Hold a shared lock on ``$NETCL_CACHE_DIR/in-use.lock`` for the rest of this process.

    Called before OpenCL is loaded; waits while ``netcl cache clear`` empties the folders PoCL
    and the ICD loader read. Never raises: no cache folder, or no ``flock``, means no lock.

    Examples:
        >>> import os, tempfile
        >>> os.environ["NETCL_CACHE_DIR"] = tempfile.mkdtemp()
        >>> mark_in_use()
        >>> with exclusive_use() as alone:  # this process's own lock does not count
        ...     alone
        True
        >>> del os.environ["NETCL_CACHE_DIR"]
    """
    if fcntl is None:
        return
    try:
        root = cache_dir()
    except OSError:
        return
    with _held_lock:
        if str(root) in _held:
            return
        try:
            fd = os.open(root / IN_USE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:
            os.close(fd)
            return
        _held[str(root)] = fd


@contextmanager
def exclusive_use(root: Path | None = None) -> Iterator[bool]:
    """Whether no other process holds ``root``'s in-use lock; while the block runs, none can
    take it (they wait). ``root`` defaults to :func:`cache_root`.

    True without ``flock`` (Windows) or when the lock file cannot be made.
    """
    root = cache_root() if root is None else root
    if fcntl is None:
        yield True
        return
    with _held_lock:
        own = _held.get(str(root))
        fd = own
        if fd is None:
            try:
                root.mkdir(parents=True, exist_ok=True)
                fd = os.open(root / IN_USE_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError:
                yield True
                return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            yield True
        finally:
            if own is None:
                os.close(fd)  # drops the lock
            else:
                fcntl.flock(fd, fcntl.LOCK_SH)  # back to this process's shared lock


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so a crash leaves either the old file or the new one.

    Temporary file in the same folder, fsync, rename over ``path``, fsync the folder.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def _canonical(key: Mapping[str, str]) -> bytes:
    return json.dumps(dict(key), sort_keys=True, separators=(",", ":")).encode("utf-8")


def _digest(key: Mapping[str, str], content: bytes) -> str:
    return hashlib.sha256(_canonical(key) + b"\n" + content).hexdigest()


def write_entry(path: Path, key: Mapping[str, str], content: bytes) -> None:
    """Write ``content`` atomically to ``path``, framed with ``key`` and its checksum.

    Raises:
        OSError: the file cannot be written (a read-only cache).
    """
    header = json.dumps(
        {"key": dict(key), "sha256": _digest(key, content), "size": len(content)},
        sort_keys=True, separators=(",", ":"),
    ).encode("utf-8")
    atomic_write(path, _MAGIC + b"\n" + header + b"\n" + content)


def _parse(path: Path, data: bytes) -> tuple[dict[str, str], str, bytes]:
    """The (key, sha256, content) of an entry's bytes; the header's own sanity checks."""
    if not data:
        raise CacheEntryError(path, "empty file (truncated to 0 bytes)")
    start = _MAGIC + b"\n"
    header_end = data.find(b"\n", len(start))
    if not data.startswith(start) and not start.startswith(data):
        raise CacheEntryError(path, f"not a netcl cache entry (starts with {data[:len(start)]!r})")
    if header_end < 0:
        raise CacheEntryError(path, f"truncated inside the header ({len(data)} bytes in all)")
    try:
        header = json.loads(data[len(start) : header_end])
        key, digest, size = header["key"], header["sha256"], header["size"]
    except (ValueError, KeyError, TypeError) as exc:
        raise CacheEntryError(path, f"corrupt header ({exc})") from None
    if not (isinstance(key, dict) and all(isinstance(v, str) for v in key.values())
            and isinstance(digest, str) and isinstance(size, int)):
        raise CacheEntryError(path, "corrupt header (a field has the wrong type)")
    content = data[header_end + 1 :]
    if len(content) != size:
        kind = "truncated" if len(content) < size else "too long"
        raise CacheEntryError(
            path, f"{kind}: {len(content)} bytes of content, the header says {size}"
        )
    return key, digest, content


def read_entry(path: Path, key: Mapping[str, str]) -> bytes:
    """The content of the entry at ``path``, once its checksum and ``key`` are verified.

    Raises:
        FileNotFoundError: no entry (nothing was cached yet).
        OSError: the file cannot be read.
        CacheEntryError: truncated, corrupt, or built for another key; ``reason`` says which.
    """
    data = path.read_bytes()
    stored_key, digest, content = _parse(path, data)
    if _digest(stored_key, content) != digest:
        raise CacheEntryError(path, "checksum mismatch: the content is corrupt")
    expected = dict(key)
    if stored_key != expected:
        field = next(
            k for k in sorted(stored_key.keys() | expected.keys())
            if stored_key.get(k) != expected.get(k)
        )
        raise CacheEntryError(
            path, f"built for another key: {field} is {stored_key.get(field)!r}, "
            f"expected {expected.get(field)!r}"
        )
    return content


def discard_entry(path: Path, reason: str, then: str, stacklevel: int = 2) -> None:
    """Delete a bad cache file and say so in one ``RuntimeWarning`` naming it and ``reason``.

    ``then`` says what happens instead (``"rebuilding it from source"``).
    """
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only cache: the next process warns again, and still never uses it
    warnings.warn(
        f"netcl: discarded cache file {path}: {reason}; {then}",
        RuntimeWarning, stacklevel=stacklevel + 1,
    )
