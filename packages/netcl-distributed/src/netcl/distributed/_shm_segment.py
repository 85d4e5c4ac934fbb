"""One job's shared-memory segment: a file in ``/dev/shm`` mapped by every rank.

Layout (all little-endian int64 in the control block):

- control block: one row of :data:`ROW` int64 per rank (rows apart by 384 bytes, so ranks do
  not write the same cache line): ``ARRIVE`` (the rank's barrier counter), ``PID``, ``STATE``
  (joined, left, failed: a failed rank stays failed when it leaves), ``WORLD``/``CHUNK`` (what
  it was started with), ``CLOSED`` (it left), and two headers of
  :data:`HEADER` int64 (the collective's sequence number, kind, dtype, shape, root or op),
  used alternately by successive collectives;
- data block: per rank, two slots of ``chunk`` bytes used alternately by successive rounds.

The file is named from the job id (``netcl-dist-<id>``); the launcher unlinks it when the
job ends, the last rank to :meth:`Segment.close` unlinks it, and :func:`reclaim_dead` removes
the segments whose ranks are all dead (a job killed before it could clean up).

Examples:
    >>> seg = Segment.open("doctest-seg", rank=0, world_size=1, chunk=4096)
    >>> seg.slot(0, 1).nbytes, int(seg.ctrl[0, PID]) == os.getpid()
    (4096, True)
    >>> seg.close(); os.path.exists(seg.path)
    False
"""

from __future__ import annotations

import fcntl
import mmap
import os
import re
import tempfile
import time
from typing import Any

import numpy as np

__all__ = ["ARRIVE", "CHUNK", "CLOSED", "HEADER", "HEADER0", "PID", "PREFIX", "ROW", "STATE",
           "WORLD", "Segment", "pid_alive", "reclaim_dead", "segment_dir", "segment_path"]

PREFIX = "netcl-dist-"
ROW = 48  # int64 per rank row: 384 bytes
ARRIVE, PID, STATE, WORLD, CHUNK, CLOSED = 0, 1, 2, 3, 4, 5
HEADER0 = 8  # two headers of HEADER int64 from here
HEADER = 16
JOINED, LEFT, FAILED = 1, 2, 3
_PAGE = 4096
_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
# A segment file whose ranks wrote no pid yet is someone's job starting up, unless this old.
_STARTUP_GRACE_S = 120.0


def segment_dir() -> str:
    """Where segments live: ``NETCL_SHM_DIR``, else ``/dev/shm``, else the temp directory."""
    forced = os.environ.get("NETCL_SHM_DIR", "").strip()
    if forced:
        return forced
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


def segment_path(job_id: str) -> str:
    """The segment file of job ``job_id``.

    Raises:
        ValueError: the id has characters other than letters, digits, ``_ . -`` (or is empty
            or longer than 64).
    """
    if not _ID.fullmatch(job_id):
        raise ValueError(f"netcl.distributed: job id must be 1-64 letters, digits, '_', '.' "
                         f"or '-', got {job_id!r}")
    return os.path.join(segment_dir(), PREFIX + job_id)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux ``/proc``; else signal 0)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True  # no /proc: signal 0 said it exists
    # state is the field after the parenthesised command name
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def _layout(world_size: int, chunk: int) -> tuple[int, int]:
    """(data offset, total bytes) of a segment."""
    ctrl = world_size * ROW * 8
    offset = -(-ctrl // _PAGE) * _PAGE
    return offset, offset + world_size * 2 * chunk


class Segment:
    """The mapped segment of one job, as seen by one rank."""

    def __init__(self, path: str, fd: int, rank: int, world_size: int, chunk: int) -> None:
        self.path = path
        self.rank = rank
        self.world_size = world_size
        self.chunk = chunk
        self._fd = fd
        offset, total = _layout(world_size, chunk)
        self._map: mmap.mmap | None = mmap.mmap(fd, total)
        raw = np.frombuffer(self._map, dtype=np.uint8)
        #: (world, ROW) int64 control rows
        self.ctrl: np.ndarray[Any, Any] = raw[:world_size * ROW * 8].view(np.int64) \
            .reshape(world_size, ROW)
        self._data: np.ndarray[Any, Any] = raw[offset:].reshape(world_size, 2, chunk)
        self.closed = False

    @classmethod
    def open(cls, job_id: str, rank: int, world_size: int, chunk: int) -> Segment:
        """Create or join job ``job_id``'s segment and write this rank's row (pid, joined)."""
        path = segment_path(job_id)
        reclaim_dead(exclude=path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _, total = _layout(world_size, chunk)
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:  # grow only: a rank started with other sizes must not shrink it under others
                if os.fstat(fd).st_size < total:
                    os.ftruncate(fd, total)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
            seg = cls(path, fd, rank, world_size, chunk)
        except BaseException:
            os.close(fd)
            raise
        row = seg.ctrl[rank]
        row[WORLD], row[CHUNK], row[PID] = world_size, chunk, os.getpid()
        row[STATE] = JOINED
        return seg

    def slot(self, rank: int, parity: int) -> np.ndarray[Any, Any]:
        """Rank ``rank``'s data slot ``parity`` (0 or 1): ``chunk`` bytes."""
        return self._data[rank, parity]  # type: ignore[no-any-return]

    def mark(self, state: int) -> None:
        """Set this rank's state (:data:`FAILED` tells the others to stop waiting for it)."""
        if not self.closed:
            self.ctrl[self.rank, STATE] = state

    def close(self) -> None:
        """Leave: mark this rank left, unlink the file if every rank has left or died."""
        if self.closed:
            return
        self.closed = True
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            row = self.ctrl[self.rank]
            if row[STATE] != FAILED:  # the others must still see that this rank failed
                row[STATE] = LEFT
            row[CLOSED] = 1
            gone = all(int(r[CLOSED]) or (k != self.rank and not pid_alive(int(r[PID])))
                       for k, r in enumerate(self.ctrl))
            if gone:
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        del self.ctrl, self._data
        mapped, self._map = self._map, None
        if mapped is not None:
            try:
                mapped.close()
            except BufferError:  # a view handed out is still alive: the GC unmaps it later
                pass
        os.close(self._fd)


def reclaim_dead(exclude: str = "") -> list[str]:
    """Unlink this user's segments whose ranks are all dead; returns the paths removed.

    A segment whose ranks recorded no pid yet is left alone for two minutes after its last
    change (its job may be starting).
    """
    removed: list[str] = []
    folder = segment_dir()
    try:
        names = [n for n in os.listdir(folder) if n.startswith(PREFIX)]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(folder, name)
        if path == exclude:
            continue
        try:
            st = os.stat(path)
            if st.st_uid != os.getuid():
                continue
            pids = _recorded_pids(path, st.st_size)
        except OSError:
            continue
        if any(pid_alive(p) for p in pids):
            continue
        if not pids and time.time() - st.st_mtime < _STARTUP_GRACE_S:
            continue
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            pass
    return removed


def _recorded_pids(path: str, size: int) -> list[int]:
    """The nonzero pids in a segment's control rows (rows are read until the file ends)."""
    with open(path, "rb") as f:
        head = f.read(min(size, _PAGE * 16))
    usable = len(head) // (ROW * 8) * ROW * 8
    rows = np.frombuffer(head[:usable], dtype=np.int64).reshape(-1, ROW)
    # the first row a rank wrote says the world size (the rows after the control block are
    # padding and data, not rows)
    worlds = [int(w) for w in rows[:, WORLD] if w > 0]
    if not worlds or worlds[0] > len(rows):
        return []
    return [int(p) for p in rows[:worlds[0], PID] if p > 0]
