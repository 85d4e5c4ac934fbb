"""PoCL's kernel cache: kept under netcl's cache folder, and checked before PoCL can trust it.

PoCL caches each program's LLVM bitcode (``program.bc``) and each kernel's compiled work-group
function (``<kernel>/<local size>/<kernel>.so``, loaded with ``dlopen``) under
``POCL_CACHE_DIR``, and trusts what it finds there: a ``.so`` cut short kills the process
(SIGBUS, SIGSEGV, or SIGABRT after a failed ``dlopen``), a short ``program.bc`` makes every
kernel of its program disappear until the cache is cleared. PoCL writes those files itself, so
netcl cannot checksum them; :func:`guard_pocl_cache` (run by ``netcl.core._cl.cl()`` before
pyopencl loads PoCL) does what can be done from outside:

- ``POCL_CACHE_DIR`` points at ``$NETCL_CACHE_DIR/pocl`` unless the user set it (then that
  folder is checked instead), so ``NETCL_CACHE_DIR`` holds every cache netcl's kernels use;
- every ``.so`` must be a whole ELF file: its program and section header tables and every
  segment and section they declare lie inside the file;
- every ``.bc`` must be whole LLVM bitcode: a run of complete top-level blocks that holds a
  module and ends with its string table;
- a file that fails is deleted with one ``RuntimeWarning`` naming it and the fault, and PoCL
  compiles it again.

A structurally whole file with flipped bits inside it, and damage done while a process runs,
stay outside what this check can see (the netcl-core README says so).

Examples:
    >>> import tempfile
    >>> find_bad_pocl_files(Path(tempfile.mkdtemp()))
    []
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

from ._paths import (
    CacheEntryError,
    cache_dir,
    cache_root,
    discard_entry,
    mark_in_use,
    read_entry,
    write_entry,
)

__all__ = [
    "find_bad_pocl_files",
    "guard_pocl_cache",
    "pocl_cache_dir",
    "pocl_folder",
    "scan_pocl_cache",
]

# POCL_CACHE_DIR as netcl set it; a child process that inherits both may move it to its own
# NETCL_CACHE_DIR, while a POCL_CACHE_DIR that differs from it is the user's and stays.
_SET_BY_NETCL = "_NETCL_SET_POCL_CACHE_DIR"
_ELF_MAGIC = b"\x7fELF"
_BITCODE_MAGIC = b"BC\xc0\xde"
_BITCODE_WRAPPER = b"\xde\xc0\x17\x0b"
_MODULE_BLOCK, _STRTAB_BLOCK = 8, 23
_SHT_NOBITS = 8


class _FaultError(Exception):
    """What is wrong with one file (internal: becomes the warning's reason)."""


def pocl_folder() -> tuple[Path, bool]:
    """The folder PoCL caches kernels in, and whether the user chose it (``POCL_CACHE_DIR``
    set by hand rather than by netcl); looks only, changes and creates nothing.

    Examples:
        >>> import os
        >>> os.environ["NETCL_CACHE_DIR"] = "/tmp/netcl-doc-cache"
        >>> pocl_folder()
        (PosixPath('/tmp/netcl-doc-cache/pocl'), False)
        >>> del os.environ["NETCL_CACHE_DIR"]
    """
    current = os.environ.get("POCL_CACHE_DIR")
    if current and current != os.environ.get(_SET_BY_NETCL):
        return Path(current), True
    return cache_root() / "pocl", False


def pocl_cache_dir() -> Path | None:
    """The folder PoCL will cache kernels in, after pointing ``POCL_CACHE_DIR`` at netcl's.

    None when PoCL's cache is off (``POCL_KERNEL_CACHE=0``) or netcl's folder cannot be made.
    """
    # PoCL's own variable, not netcl's: its spellings are PoCL's business, so env_flag (which
    # refuses what it does not know) is not used; "0" is the documented way to turn it off.
    if os.environ.get("POCL_KERNEL_CACHE", "1").strip() == "0":
        return None
    current = os.environ.get("POCL_CACHE_DIR")
    if current and current != os.environ.get(_SET_BY_NETCL):
        return Path(current)  # the user's choice: checked, not moved
    try:
        path = str(cache_dir("pocl"))
    except OSError:
        return Path(current) if current else None
    os.environ["POCL_CACHE_DIR"] = os.environ[_SET_BY_NETCL] = path
    return Path(path)


def _read_at(f: BinaryIO, offset: int, size: int) -> bytes:
    f.seek(offset)
    return f.read(size)


def _check_elf(f: BinaryIO, size: int) -> None:
    """Raise :class:`_FaultError` unless every table, segment and section lies inside the file."""
    head = _read_at(f, 0, 64)
    if head[:4] != _ELF_MAGIC:
        raise _FaultError(f"not an ELF file ({size} bytes, starts with {head[:4]!r})")
    if len(head) < 16:
        raise _FaultError(f"truncated to {size} bytes, inside the ELF header")
    wide, order = head[4] == 2, {1: "<", 2: ">"}.get(head[5])
    if head[4] not in (1, 2) or order is None:
        raise _FaultError("corrupt ELF header (class or byte order)")
    header = order + ("16xHHIQQQIHHHHHH" if wide else "16xHHIIIIIHHHHHH")
    if len(head) < struct.calcsize(header):
        raise _FaultError(f"truncated to {size} bytes, inside the ELF header")
    fields = struct.unpack_from(header, head)
    phoff, shoff, phentsize, phnum, shentsize, shnum = fields[4], fields[5], *fields[8:12]
    # (p_type, p_offset, p_filesz) of a program header; (sh_type, sh_offset, sh_size) of a section
    phdr, ph_at = (order + "I4xQ8x8xQ", 56) if wide else (order + "II8xI", 32)
    shdr, sh_at = (order + "4xI8x8xQQ", 64) if wide else (order + "4xI4x4xII", 40)
    for what, offset, entsize, count, layout, least in (
        ("program header table", phoff, phentsize, phnum, phdr, ph_at),
        ("section header table", shoff, shentsize, shnum, shdr, sh_at),
    ):
        if count == 0:
            continue
        if entsize < least:
            raise _FaultError(f"corrupt ELF header ({what} entries of {entsize} bytes)")
        if offset + entsize * count > size:
            raise _FaultError(f"truncated to {size} bytes: the {what} ends at byte "
                              f"{offset + entsize * count}")
        table = _read_at(f, offset, entsize * count)
        for i in range(count):
            kind, start, length = struct.unpack_from(layout, table, i * entsize)
            if (what[0] == "p" or kind != _SHT_NOBITS) and start + length > size:
                part = "segment" if what[0] == "p" else "section"
                raise _FaultError(f"truncated to {size} bytes: {part} {i} ends at byte "
                                  f"{start + length}")


class _Bits:
    """Little-endian bit fields of an LLVM bitstream, from a window of the file."""

    def __init__(self, window: bytes, skip: int) -> None:
        self.value = int.from_bytes(window, "little") >> skip
        self.left = len(window) * 8 - skip
        self.used = 0

    def take(self, width: int) -> int:
        if width > self.left:
            raise _FaultError("truncated inside a bitcode block header")
        out = self.value & ((1 << width) - 1)
        self.value >>= width
        self.left -= width
        self.used += width
        return out

    def vbr(self, width: int) -> int:
        out, shift, high = 0, 0, 1 << (width - 1)
        while True:
            piece = self.take(width)
            out |= (piece & (high - 1)) << shift
            if not piece & high:
                return out
            shift += width - 1


def _check_bitcode(f: BinaryIO, size: int) -> None:
    """Raise :class:`_FaultError` unless the file is a run of whole top-level bitcode blocks that
    holds a module and ends with its string table (LLVM writes that last)."""
    base, length = 0, size
    head = _read_at(f, 0, 20)
    if head[:4] == _BITCODE_WRAPPER:
        if len(head) < 20:
            raise _FaultError(f"truncated to {size} bytes, inside the bitcode wrapper header")
        base, length = struct.unpack_from("<II", head, 8)
        if base + length > size:
            raise _FaultError(f"truncated to {size} bytes: the wrapped bitcode ends at byte "
                              f"{base + length}")
        head = _read_at(f, base, 4)
    if head[:4] != _BITCODE_MAGIC:
        raise _FaultError(f"not LLVM bitcode ({size} bytes, starts with {head[:4]!r})")
    if length % 4:
        raise _FaultError(f"truncated: {length} bytes is not a whole number of 32-bit words")
    total, pos, blocks = length * 8, 32, []
    while pos < total:
        bits = _Bits(_read_at(f, base + pos // 8, 32), pos % 8)
        if bits.take(2) != 1:  # top level holds only ENTER_SUBBLOCK (abbreviation id 1)
            raise _FaultError(f"corrupt bitcode: no block starts at byte {pos // 8}")
        block = bits.vbr(8)
        bits.vbr(4)
        bits.take(-(pos + bits.used) % 32)  # the block length is 32-bit aligned
        words = bits.take(32)
        pos += bits.used + 32 * words
        if pos > total:
            raise _FaultError(f"truncated to {size} bytes: block {block} ends at byte "
                              f"{base + pos // 8}")
        blocks.append(block)
    if _MODULE_BLOCK not in blocks or blocks[-1] != _STRTAB_BLOCK:
        raise _FaultError(f"truncated to {size} bytes: the bitcode ends without its "
                          f"{'string table' if _MODULE_BLOCK in blocks else 'module'}")


_CHECKS = {".so": _check_elf, ".bc": _check_bitcode}
Stamp = tuple[int, int]  # (size, mtime in ns) of a file that passed its check


def _files(folder: str) -> list[tuple[str, Stamp]]:
    """(path, stamp) of every ``.so`` and ``.bc`` under ``folder``; PoCL's half-written
    ``tempfile_*`` (renamed into place once complete) and symbolic links are left out."""
    found: list[tuple[str, Stamp]] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return found
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                found.extend(_files(entry.path))
            elif (entry.name.endswith((".so", ".bc")) and not entry.name.startswith("tempfile")
                  and entry.is_file(follow_symlinks=False)):
                st = entry.stat(follow_symlinks=False)
                found.append((entry.path, (st.st_size, st.st_mtime_ns)))
        except OSError:
            continue  # gone meanwhile (another process cleaned it)
    return found


def scan_pocl_cache(
    root: Path, passed: Mapping[str, Stamp]
) -> tuple[list[tuple[Path, str]], dict[str, Stamp]]:
    """The files under ``root`` that PoCL must not load (with what is wrong), and the stamps
    of those that are sound. A file whose stamp is in ``passed`` is not read again."""
    bad: list[tuple[Path, str]] = []
    sound: dict[str, Stamp] = {}
    for path, stamp in _files(str(root)):
        if passed.get(path) != stamp:
            try:
                with open(path, "rb") as f:
                    _CHECKS[os.path.splitext(path)[1]](f, stamp[0])
            except _FaultError as fault:
                bad.append((Path(path), str(fault)))
                continue
            except OSError:
                continue
        sound[path] = stamp
    return bad, sound


def find_bad_pocl_files(root: Path) -> list[tuple[Path, str]]:
    """Each ``.so`` and ``.bc`` under ``root`` that PoCL must not load, with what is wrong."""
    return scan_pocl_cache(root, {})[0]


def _record_of(root: Path) -> tuple[Path, dict[str, str]] | None:
    """Where the stamps of the files already checked under ``root`` are kept, and its key."""
    try:
        folder = cache_dir("pocl-checked")
    except OSError:
        return None
    name = hashlib.sha256(str(root).encode()).hexdigest()[:20]
    return folder / f"{name}.entry", {"store": "pocl-checked", "root": str(root)}


def _read_record(path: Path, key: dict[str, str]) -> dict[str, Stamp]:
    try:
        data = json.loads(read_entry(path, key))
        return {str(p): (int(s[0]), int(s[1])) for p, s in data.items()}
    except FileNotFoundError:
        return {}
    except CacheEntryError as exc:
        discard_entry(path, exc.reason, "checking every PoCL cache file again", stacklevel=5)
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        pass  # sound framing, odd content (a newer netcl): check everything again
    return {}


def guard_pocl_cache() -> None:
    """Point PoCL's cache into netcl's folder and delete the files in it that would crash PoCL.

    Runs before pyopencl is imported; never raises (a cache problem must not stop a run).
    Files already checked and unchanged since (same size and modification time, recorded in
    ``$NETCL_CACHE_DIR/pocl-checked``) are not read again. The process holds netcl's in-use
    lock from here on, so ``netcl cache clear`` leaves PoCL's folder alone while it runs (see
    NOTE [ In-use lock ] in :mod:`netcl.core._paths`).
    """
    mark_in_use()
    root = pocl_cache_dir()
    if root is None:
        return
    try:
        _check_and_record(root)
    except Exception as exc:  # a bug here must not take OpenCL away: say so and go on
        warnings.warn(f"netcl: could not check PoCL's kernel cache {root}: {exc!r}",
                      RuntimeWarning, stacklevel=3)


def _check_and_record(root: Path) -> None:
    record = _record_of(root)
    passed = _read_record(*record) if record is not None else {}
    bad, sound = scan_pocl_cache(root, passed)
    for path, reason in bad:
        discard_entry(path, reason, "PoCL will compile it again", stacklevel=4)
    if record is not None and sound != passed:
        try:
            write_entry(*record, json.dumps(sound, separators=(",", ":")).encode())
        except OSError:
            pass  # a read-only cache: the next process checks the files again
