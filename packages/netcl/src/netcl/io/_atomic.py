"""Atomic file writes that also sweep up the temporary files of saves that were killed.

# NOTE [ Temporary files of a killed save ]
# A save writes ``.<name>.<8 hex digits>.tmp`` next to the target, fsyncs it and renames it over
# the target. A process killed between the first byte and the rename leaves its temporary file
# behind, as large as the checkpoint (hundreds of MB for a big model), and a training job that
# is killed and restarted every few hours would fill the disk with them. So each save, once its
# own temporary file exists, deletes the temporary files *of the same target name* whose
# modification time is strictly older than its own file's: those belong to saves that started
# earlier and are no longer writing (a save still writing keeps touching its file). Files of
# other names, and anything not matching the pattern exactly, are left alone. The pattern also
# matches the names ``tempfile.mkstemp`` gave (8 characters of ``[a-z0-9_]``), which earlier
# netcl versions used, so their leftovers are swept up too.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

__all__ = ["atomic_write", "stale_temp_files", "temp_pattern"]


def temp_pattern(target: Path) -> re.Pattern[str]:
    """The names of ``target``'s temporary files.

    Examples:
        >>> bool(temp_pattern(Path("last.netcl")).fullmatch(".last.netcl.0a1b2c3d.tmp"))
        True
        >>> bool(temp_pattern(Path("last.netcl")).fullmatch(".last.netcl.bak.0a1b2c3d.tmp"))
        False
    """
    return re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}\.tmp")


def stale_temp_files(target: Path, own: Path) -> list[Path]:
    """``target``'s temporary files other than ``own`` that are strictly older than ``own``."""
    pattern = temp_pattern(target)
    own_mtime = own.stat().st_mtime_ns
    stale = []
    with os.scandir(target.parent) as entries:
        for entry in entries:
            if entry.name == own.name or not pattern.fullmatch(entry.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:  # removed meanwhile
                continue
            if entry.is_file(follow_symlinks=False) and st.st_mtime_ns < own_mtime:
                stale.append(Path(entry.path))
    return stale


def _create_temp(target: Path) -> tuple[int, Path]:
    """A new, exclusively created ``.<name>.<8 hex>.tmp`` beside ``target``."""
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                           0o666), tmp
        except FileExistsError:  # 1 in 4 billion: draw another name
            continue


def atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` so a crash leaves either the old file or the new one.

    A temporary file in the same folder, fsync, rename over ``target``, fsync the folder.
    Temporary files that earlier, killed saves of ``target`` left behind are deleted first
    (NOTE [ Temporary files of a killed save ]).

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> atomic_write(folder / "a.bin", b"new")
        >>> [p.name for p in folder.iterdir()], (folder / "a.bin").read_bytes()
        (['a.bin'], b'new')
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(target)
    try:
        with os.fdopen(fd, "wb") as f:
            for stale in stale_temp_files(target, tmp):
                try:
                    stale.unlink()
                except OSError:  # gone already, or not ours to delete: not this save's problem
                    pass
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
