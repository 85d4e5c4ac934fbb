"""Every file cache netcl keeps between runs: what each holds, and clearing them.

All of them live in one folder, :func:`~netcl.core._paths.cache_root`: ``$NETCL_CACHE_DIR``,
else ``$XDG_CACHE_HOME/netcl``, else ``~/.cache/netcl``. PoCL's kernel cache lives there too
unless ``POCL_CACHE_DIR`` names a folder of your own, which netcl lists but never clears.

Clearing is safe while other netcl processes run. netcl's own entries (programs, autotune
winners, probe verdicts) may vanish under a reader at any time: a missing entry is rebuilt, and
a writer's half-written temporary file is left alone (it becomes the entry by an atomic rename).
PoCL's folder and the ICD vendors folder are read by drivers that trust them, so they are
cleared only when no other netcl process holds the in-use lock (NOTE [ In-use lock ] in
:mod:`netcl.core._paths`); otherwise :func:`clear_caches` says so in ``skipped``.

Examples:
    >>> import os, tempfile
    >>> from netcl.core._paths import write_entry
    >>> os.environ["NETCL_CACHE_DIR"] = tempfile.mkdtemp()
    >>> write_entry(cache_root() / "programs" / "k.program", {"store": "program"}, b"x" * 100)
    >>> info = {c.name: c for c in cache_info()}
    >>> sorted(info)
    ['autotune', 'devices', 'failed', 'icd', 'pocl', 'pocl-checked', 'programs']
    >>> info["programs"].entries, info["programs"].bytes > 100, info["autotune"].entries
    (1, True, 0)
    >>> [(r.name, r.removed, r.skipped) for r in clear_caches(["programs"])]
    [('programs', 1, '')]
    >>> [c.entries for c in cache_info() if c.name == "programs"]
    [0]
    >>> del os.environ["NETCL_CACHE_DIR"]
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ._paths import cache_root, exclusive_use
from ._pocl_cache import pocl_folder

__all__ = [
    "CACHE_NAMES",
    "CacheInfo",
    "ClearResult",
    "cache_info",
    "cache_root",
    "cache_root_origin",
    "clear_caches",
    "format_size",
]

# A temporary file younger than this may belong to a writer that is about to rename it into
# place: clearing it would make that writer's rename fail. Older ones are a crashed writer's.
_IN_FLIGHT_S = 300.0


@dataclass(frozen=True)
class _Kind:
    """One cache: its folder under the root, what it holds, which files are its entries."""

    name: str
    what: str
    suffixes: tuple[str, ...]  # the suffixes of its entry files
    guarded: bool  # read by a driver that trusts it: cleared only under the exclusive lock


_KINDS = (
    _Kind("programs", "compiled OpenCL program binaries (NETCL_DISK_CACHE)", (".program",),
          False),
    _Kind("autotune", "autotune winners, one file per device and driver", (".winners",), False),
    _Kind("devices", "device probe verdicts, one per device and driver", (".json",), False),
    _Kind("pocl", "PoCL's own kernel cache (LLVM bitcode, compiled kernels)", (".bc", ".so"),
          True),
    _Kind("pocl-checked", "PoCL cache files netcl has checked already", (".entry",), False),
    _Kind("icd", "OpenCL vendors folders naming pip-installed runtimes", (".icd",), True),
    _Kind("failed", "sources of OpenCL programs that failed to build", (".cl",), False),
)
CACHE_NAMES = tuple(kind.name for kind in _KINDS)


@dataclass(frozen=True)
class CacheInfo:
    """One cache as :func:`cache_info` found it.

    Attributes:
        name: the cache's name (one of :data:`CACHE_NAMES`).
        path: its folder (may not exist yet).
        entries: how many entries it holds: device verdicts for ``devices``, ``.bc`` and ``.so``
            files for ``pocl``, entry files otherwise (a writer's temporary file is none).
        bytes: the size of every file in it.
        description: what it holds, in one line.
        note: anything else worth knowing (a folder of yours, a cache turned off), or ``""``.
    """

    name: str
    path: Path
    entries: int
    bytes: int
    description: str
    note: str = ""


@dataclass(frozen=True)
class ClearResult:
    """What :func:`clear_caches` did to one cache.

    Attributes:
        name: the cache's name.
        path: its folder.
        removed: entries removed.
        freed: bytes removed (entries and stale temporary files).
        skipped: why the cache was left as it was, or ``""`` when it was cleared.
    """

    name: str
    path: Path
    removed: int
    freed: int
    skipped: str = ""


def cache_root_origin() -> str:
    """Which rule picked :func:`cache_root`: ``NETCL_CACHE_DIR``, ``XDG_CACHE_HOME`` or
    ``default``.

    Examples:
        >>> import os
        >>> os.environ["NETCL_CACHE_DIR"] = "/tmp/x"
        >>> cache_root_origin()
        'NETCL_CACHE_DIR'
        >>> del os.environ["NETCL_CACHE_DIR"]
    """
    if os.environ.get("NETCL_CACHE_DIR"):
        return "NETCL_CACHE_DIR"
    return "XDG_CACHE_HOME" if os.environ.get("XDG_CACHE_HOME") else "default"


def format_size(n: int) -> str:
    """``n`` bytes for people: B, KiB, MiB or GiB.

    Examples:
        >>> format_size(0), format_size(1023), format_size(1536), format_size(5 * 2**30)
        ('0 B', '1023 B', '1.5 KiB', '5.0 GiB')
    """
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"


def _is_temporary(name: str) -> bool:
    """A writer's file before its rename: netcl's ``.<name>.<random>.tmp``, PoCL's
    ``tempfile*``."""
    return (name.startswith(".") and name.endswith(".tmp")) or name.startswith("tempfile")


@dataclass(frozen=True)
class _File:
    path: str
    size: int
    mtime: float
    temporary: bool


def _files(folder: str) -> Iterator[_File]:
    """Every file under ``folder`` (symbolic links as files, never followed); a file or
    folder that vanishes meanwhile (another process cleared it) is skipped."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from _files(entry.path)
                continue
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        yield _File(entry.path, st.st_size, st.st_mtime, _is_temporary(entry.name))


def _is_entry(kind: _Kind, f: _File) -> bool:
    return not f.temporary and f.path.endswith(kind.suffixes)


def _verdicts(folder: Path) -> int:
    """How many device verdicts ``probe.json`` holds (0 when it is missing or unreadable)."""
    try:
        data = json.loads((folder / "probe.json").read_text())
        devices = data.get("devices") if isinstance(data, dict) else None
    except (OSError, ValueError):
        return 0
    return len(devices) if isinstance(devices, dict) else 0


def _folder(kind: _Kind, root: Path) -> tuple[Path, str]:
    """The folder of ``kind`` and a note about it (``""`` when there is nothing to say)."""
    if kind.name != "pocl":
        return root / kind.name, ""
    path, yours = pocl_folder()
    if os.environ.get("POCL_KERNEL_CACHE", "1").strip() == "0":
        return root / "pocl", "off (POCL_KERNEL_CACHE=0)"
    if yours:
        return path, "POCL_CACHE_DIR names this folder of yours: netcl never clears it"
    return path, ""


def _kinds(names: Iterable[str] | None) -> list[_Kind]:
    if names is None:
        return list(_KINDS)
    wanted = list(dict.fromkeys(names))
    unknown = [n for n in wanted if n not in CACHE_NAMES]
    if unknown:
        raise ValueError(f"unknown cache {', '.join(map(repr, unknown))}; "
                         f"the caches are {', '.join(CACHE_NAMES)}")
    return [kind for kind in _KINDS if kind.name in wanted]


def cache_info(names: Iterable[str] | None = None) -> list[CacheInfo]:
    """Every cache (or those in ``names``): its folder, entries and size. Reads only: creates,
    locks and changes nothing, so it is safe beside running processes.

    Raises:
        ValueError: a name that is not in :data:`CACHE_NAMES`.

    Examples:
        >>> import os, tempfile
        >>> os.environ["NETCL_CACHE_DIR"] = root = tempfile.mkdtemp()
        >>> [(c.name, c.entries, c.bytes) for c in cache_info(["autotune", "devices"])]
        [('autotune', 0, 0), ('devices', 0, 0)]
        >>> os.listdir(root)  # nothing was created
        []
        >>> del os.environ["NETCL_CACHE_DIR"]
    """
    root = cache_root()
    found: list[CacheInfo] = []
    for kind in _kinds(names):
        path, note = _folder(kind, root)
        files = list(_files(str(path)))
        entries = (_verdicts(path) if kind.name == "devices"
                   else sum(_is_entry(kind, f) for f in files))
        found.append(CacheInfo(kind.name, path, entries, sum(f.size for f in files), kind.what,
                               note))
    return found


def _prune(folder: str) -> None:
    """Remove the empty folders under ``folder`` (not ``folder`` itself), deepest first."""
    for parent, dirs, _ in os.walk(folder, topdown=False):
        for name in dirs:
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass  # not empty: a file arrived meanwhile, or one could not be removed


def _clear(kind: _Kind, path: Path, now: float) -> ClearResult:
    removed = freed = 0
    for f in _files(str(path)):
        if f.temporary and now - f.mtime < _IN_FLIGHT_S:
            continue  # a writer's file about to be renamed into place
        try:
            os.unlink(f.path)
        except FileNotFoundError:
            continue  # another process removed it first
        except OSError:
            continue  # read-only: left in place (cache_info still counts it)
        removed += _is_entry(kind, f)
        freed += f.size
    _prune(str(path))
    return ClearResult(kind.name, path, removed, freed)


def clear_caches(names: Iterable[str] | None = None) -> list[ClearResult]:
    """Delete the entries of every cache (or those in ``names``); the folders themselves stay.

    Safe beside other processes using the same caches (see the module docstring): a cache
    that cannot be cleared now is returned with ``skipped`` saying why, ``removed == 0``.
    ``devices`` entries are removed as a file (``probe.json``), so ``removed`` counts 1 there.

    Raises:
        ValueError: a name that is not in :data:`CACHE_NAMES`.

    Examples:
        >>> import os, tempfile
        >>> os.environ["NETCL_CACHE_DIR"] = root = tempfile.mkdtemp()
        >>> os.makedirs(f"{root}/failed")
        >>> _ = open(f"{root}/failed/k-0123.cl", "w").write("__kernel void k() { oops }")
        >>> [(r.name, r.removed, r.freed) for r in clear_caches(["failed"])]
        [('failed', 1, 26)]
        >>> clear_caches(["nope"])
        Traceback (most recent call last):
        ...
        ValueError: unknown cache 'nope'; the caches are programs, autotune, devices, ...
        >>> del os.environ["NETCL_CACHE_DIR"]
    """
    root, now = cache_root(), time.time()
    kinds = _kinds(names)
    results: dict[str, ClearResult] = {}
    for kind in kinds:
        path, note = _folder(kind, root)
        if note.startswith("POCL_CACHE_DIR"):
            results[kind.name] = ClearResult(kind.name, path, 0, 0, note)
        elif not kind.guarded:
            results[kind.name] = _clear(kind, path, now)
    guarded = [k for k in kinds if k.guarded and k.name not in results]
    if guarded:
        with exclusive_use(root) as alone:
            for kind in guarded:
                path, _ = _folder(kind, root)
                results[kind.name] = _clear(kind, path, now) if alone else ClearResult(
                    kind.name, path, 0, 0,
                    "in use by a running netcl process; clear it again once that has exited")
    return [results[kind.name] for kind in kinds]
