"""The shared-memory backend: the ranks of one host exchange data through one mapped file.

Each collective runs in rounds through fixed-size slots (:mod:`._shm_segment`): a rank
writes its part into its own slot, all ranks meet at a barrier (each bumps its counter and
waits for everyone else's), then each reads what it needs from the others' slots. Slots
alternate between two buffers from round to round, so the next round's writes never land in
a buffer someone is still reading, and a round needs one barrier (two for ``all_reduce``).

``all_reduce`` is a reduce-scatter then all-gather inside each round: each rank publishes in
its slot the parts the others reduce, rank r reduces the r-th part in place in its own buffer
(its own data read from there, the others' from their slots) and publishes the result, and
after the second barrier every rank copies the other reduced parts out. With W ranks, a rank
copies (W - 1) / W of a round in and out and reduces 1 / W of it; the ranks reduce in
parallel.

The first barrier of each collective also exchanges a header (collective, dtype, shape, root
or op, sequence number): calls that differ across ranks raise :class:`DistributedError` on
every rank before any data is read. A wait checks every 50 ms whether the ranks it waits for
have died (their pid), failed or left, and gives up after ``timeout_s``.

Examples:
    >>> import numpy as np
    >>> b = ShmBackend(0, 1, "doctest-shm", timeout_s=5)
    >>> x = np.arange(5, dtype=np.float32)
    >>> b.all_reduce(x, "sum"); x.tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0]
    >>> b.close()
"""

from __future__ import annotations

import os
import platform
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ._backend import (
    REDUCE_OPS,
    Backend,
    DistributedError,
    check_contiguous,
    check_reduce_op,
    default_timeout_s,
)
from ._shm_segment import (
    ARRIVE,
    CHUNK,
    FAILED,
    HEADER,
    HEADER0,
    LEFT,
    PID,
    STATE,
    WORLD,
    Segment,
    pid_alive,
)

__all__ = ["DEFAULT_CHUNK_BYTES", "ShmBackend"]

# NOTE [ Slot size ]
# A round costs one or two barriers (tens of microseconds when every rank has a core, up to
# a scheduler tick when ranks outnumber cores) and moves one slot per rank. all_reduce of
# 128 MB float32 (bench_allreduce.py, 2-core AMD EPYC at load ~3, NumPy copy 10 GB/s), best
# of 5, ms, 2 ranks / 4 ranks: 512 KiB slots 152 / 524, 1 MiB 122 / 424, 4 MiB 107 / 169,
# 16 MiB 117 / 256 (MPICH over mpi4py: 108 / 264). 4 MiB it is; a 4-rank segment is 32 MiB.
DEFAULT_CHUNK_BYTES = 4 << 20

_COLLECTIVES = ("init", "barrier", "all_reduce", "broadcast", "all_gather", "reduce_scatter",
                "scatter", "gather")
_UFUNCS: dict[str, Callable[..., Any]] = {
    "sum": np.add, "mean": np.add, "max": np.maximum, "min": np.minimum,
}
_MAX_DIMS = HEADER - 6  # header: seq, collective, dtype, ndim, arg, size, dims...
_CHECK_EVERY_S = 0.05

# NOTE [ Memory order ]
# A rank writes its slot, then its counter; another reads the counter, then the slot. x86
# keeps stores in order and loads in order, so that is enough there. Weakly ordered CPUs
# (ARM) may reorder them: there, a lock's release then acquire (store-release then
# load-acquire, not reordered with each other) fences each side.
_WEAK_ORDER = platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86")
_FENCE = threading.Lock()


def _fence() -> None:
    if _WEAK_ORDER:
        _FENCE.acquire()
        _FENCE.release()


def _chunk_bytes(chunk_bytes: int | None, world_size: int) -> int:
    raw = os.environ.get("NETCL_SHM_CHUNK_BYTES", "").strip()
    chunk = chunk_bytes if chunk_bytes is not None else int(raw) if raw else DEFAULT_CHUNK_BYTES
    # a multiple of 64 * world_size: each rank's part of a round is whole cache lines
    unit = 64 * world_size
    return max(unit, chunk // unit * unit)


class ShmBackend(Backend):
    """Collectives between the processes of one host through a shared-memory segment.

    Args:
        rank: this process's rank, ``0 <= rank < world_size``.
        world_size: how many processes take part.
        job_id: names the segment; every rank of a job passes the same one.
        timeout_s: how long a wait for the other ranks lasts (default
            :func:`~netcl.distributed._backend.default_timeout_s`).
        chunk_bytes: slot size (default ``NETCL_SHM_CHUNK_BYTES`` or 4 MiB).

    Raises:
        DistributedError: the other ranks did not join within ``timeout_s``, or they were
            started with another world size or slot size.
    """

    name = "shm"

    def __init__(self, rank: int, world_size: int, job_id: str, timeout_s: float | None = None,
                 chunk_bytes: int | None = None) -> None:
        super().__init__()
        if world_size < 1 or not 0 <= rank < world_size:
            raise ValueError(f"ShmBackend: need 0 <= rank < world_size, got rank {rank} and "
                             f"world_size {world_size}")
        self.rank = rank
        self.world_size = world_size
        self.job_id = job_id
        self.timeout_s = float(timeout_s) if timeout_s is not None else default_timeout_s()
        self._seg = Segment.open(job_id, rank, world_size, _chunk_bytes(chunk_bytes, world_size))
        self._arrive = self._seg.ctrl[:, ARRIVE]
        self._barriers = 0
        self._seq = 0
        self._parity = 0
        self._broken: DistributedError | None = None
        try:
            self._begin("init", np.dtype(np.uint8), (world_size, self._seg.chunk), 0)
            self._exchange("init")
        except BaseException:
            self._seg.mark(FAILED)
            self._seg.close()
            raise

    # -- the collectives -----------------------------------------------------------------

    def barrier(self) -> None:
        self._start("barrier")
        self._begin("barrier", np.dtype(np.uint8), (), 0)
        self._exchange("barrier")

    def all_reduce(self, buf: np.ndarray[Any, Any], op: str = "sum") -> None:
        self._start("all_reduce")
        check_contiguous("all_reduce", "buf", buf)
        check_reduce_op("all_reduce", op, buf.dtype)
        if self.world_size == 1:
            return
        self._begin("all_reduce", buf.dtype, buf.shape, REDUCE_OPS.index(op))
        flat, dt, world, me = buf.reshape(-1), buf.dtype, self.world_size, self.rank
        ufunc, n = _UFUNCS[op], buf.size
        per_round = self._seg.chunk // dt.itemsize
        for lo in range(0, max(n, 1), per_round):
            m = min(n, lo + per_round) - lo
            p = self._parity
            slots = [self._seg.slot(k, p)[:m * dt.itemsize].view(dt) for k in range(world)]
            mine = flat[lo:lo + m]
            part = -(-m // world)
            bounds = [(min(m, k * part), min(m, k * part + part)) for k in range(world)]
            for k, (a, b) in enumerate(bounds):  # publish the parts the others reduce
                if k != me:
                    slots[me][a:b] = mine[a:b]
            self._exchange("all_reduce", first=lo == 0)
            a, b = bounds[me]
            acc = mine[a:b]  # reduce this rank's part in place in the caller's buffer
            for k in range(world):
                if k != me:
                    ufunc(acc, slots[k][a:b], out=acc)
            if op == "mean":
                np.divide(acc, world, out=acc)
            slots[me][a:b] = acc  # publish the reduced part
            self._exchange("all_reduce")
            for k, (a, b) in enumerate(bounds):
                if k != me:
                    mine[a:b] = slots[k][a:b]
            self._parity ^= 1

    def broadcast(self, buf: np.ndarray[Any, Any], src: int = 0) -> None:
        self._start("broadcast")
        check_contiguous("broadcast", "buf", buf)
        self._check_root("broadcast", "src", src)
        if self.world_size == 1:
            return
        self._begin("broadcast", buf.dtype, buf.shape, src)
        data = buf.reshape(-1).view(np.uint8)
        chunk = self._seg.chunk
        for lo in range(0, max(data.size, 1), chunk):
            m = min(data.size, lo + chunk) - lo
            slot = self._seg.slot(src, self._parity)
            if self.rank == src:
                slot[:m] = data[lo:lo + m]
            self._exchange("broadcast", first=lo == 0)
            if self.rank != src:
                data[lo:lo + m] = slot[:m]
            self._parity ^= 1

    def all_gather(self, send: np.ndarray[Any, Any], recv: np.ndarray[Any, Any]) -> None:
        self._start("all_gather")
        self._gather("all_gather", send, recv, None)

    def gather(self, send: np.ndarray[Any, Any], recv: np.ndarray[Any, Any] | None,
               dst: int = 0) -> None:
        self._start("gather")
        self._check_root("gather", "dst", dst)
        self._gather("gather", send, recv if self.rank == dst else None, dst)

    def reduce_scatter(self, send: np.ndarray[Any, Any], recv: np.ndarray[Any, Any],
                       op: str = "sum") -> None:
        self._start("reduce_scatter")
        self._check_split("reduce_scatter", send, recv)
        check_reduce_op("reduce_scatter", op, recv.dtype)
        world, me, dt = self.world_size, self.rank, recv.dtype
        out, parts = recv.reshape(-1), send.reshape(world, -1)
        if world == 1:
            out[:] = parts[0]
            return
        self._begin("reduce_scatter", dt, recv.shape, REDUCE_OPS.index(op))
        ufunc, n = _UFUNCS[op], out.size
        per_round = self._seg.chunk // world // dt.itemsize
        for lo in range(0, max(n, 1), per_round):
            m = min(n, lo + per_round) - lo
            p = self._parity
            slots = [self._seg.slot(k, p)[:world * per_round * dt.itemsize].view(dt)
                     .reshape(world, per_round) for k in range(world)]
            slots[me][:, :m] = parts[:, lo:lo + m]
            self._exchange("reduce_scatter", first=lo == 0)
            acc = out[lo:lo + m]
            acc[:] = slots[me][me, :m]
            for k in range(world):
                if k != me:
                    ufunc(acc, slots[k][me, :m], out=acc)
            if op == "mean":
                np.divide(acc, world, out=acc)
            self._parity ^= 1

    def scatter(self, send: np.ndarray[Any, Any] | None, recv: np.ndarray[Any, Any],
                src: int = 0) -> None:
        self._start("scatter")
        self._check_root("scatter", "src", src)
        check_contiguous("scatter", "recv", recv)
        world = self.world_size
        if self.rank == src:
            if send is None:
                raise ValueError(f"scatter: rank {src} is the source and needs send, got None")
            self._check_split("scatter", send, recv)
        if world == 1 and send is not None:
            recv[...] = send[0]
            return
        self._begin("scatter", recv.dtype, recv.shape, src)
        out = recv.reshape(-1).view(np.uint8)
        parts = send.reshape(world, -1).view(np.uint8) if send is not None else None
        n = out.size
        per_round = self._seg.chunk // world
        for lo in range(0, max(n, 1), per_round):
            m = min(n, lo + per_round) - lo
            slot = self._seg.slot(src, self._parity).reshape(world, per_round)
            if parts is not None:
                slot[:, :m] = parts[:, lo:lo + m]
            self._exchange("scatter", first=lo == 0)
            out[lo:lo + m] = slot[self.rank, :m]
            self._parity ^= 1

    def close(self) -> None:
        if self._seg.closed:
            return
        try:
            self._shutdown_worker()
        finally:
            self._seg.close()

    # -- rounds ------------------------------------------------------------------------------

    def _gather(self, name: str, send: np.ndarray[Any, Any], recv: np.ndarray[Any, Any] | None,
                dst: int | None) -> None:
        """all_gather (``dst`` None: every rank receives) and gather (only ``dst``)."""
        check_contiguous(name, "send", send)
        world = self.world_size
        if recv is not None:
            check_contiguous(name, "recv", recv)
            if recv.shape != (world, *send.shape) or recv.dtype != send.dtype:
                raise ValueError(f"{name}: recv must be {send.dtype} of shape "
                                 f"{(world, *send.shape)} (world size, *send.shape), got "
                                 f"{recv.dtype} {recv.shape}")
        elif dst is None or self.rank == dst:
            raise ValueError(f"{name}: rank {self.rank} receives and needs recv, got None")
        if world == 1 and recv is not None:
            recv[0] = send
            return
        self._begin(name, send.dtype, send.shape, -1 if dst is None else dst)
        data = send.reshape(-1).view(np.uint8)
        into = recv.reshape(world, -1).view(np.uint8) if recv is not None else None
        chunk = self._seg.chunk
        for lo in range(0, max(data.size, 1), chunk):
            m = min(data.size, lo + chunk) - lo
            p = self._parity
            self._seg.slot(self.rank, p)[:m] = data[lo:lo + m]
            self._exchange(name, first=lo == 0)
            if into is not None:
                for k in range(world):
                    into[k, lo:lo + m] = self._seg.slot(k, p)[:m]
            self._parity ^= 1

    def _start(self, name: str) -> None:
        self._before_sync()
        if self._seg.closed:
            raise DistributedError(name, f"rank {self.rank} already left the group (closed)")
        if self._broken is not None:
            raise DistributedError(name, f"the group is unusable after an earlier failure: "
                                   f"{self._broken}")

    def _check_root(self, name: str, what: str, root: int) -> None:
        if not 0 <= root < self.world_size:
            raise ValueError(f"{name}: {what} must be a rank in [0, {self.world_size}), "
                             f"got {root}")

    def _check_split(self, name: str, send: np.ndarray[Any, Any],
                     recv: np.ndarray[Any, Any]) -> None:
        check_contiguous(name, "send", send)
        check_contiguous(name, "recv", recv)
        if send.shape != (self.world_size, *recv.shape) or send.dtype != recv.dtype:
            raise ValueError(f"{name}: send must be {recv.dtype} of shape "
                             f"{(self.world_size, *recv.shape)} (world size, *recv.shape), "
                             f"got {send.dtype} {send.shape}")

    def _begin(self, name: str, dtype: np.dtype[Any], shape: tuple[int, ...], arg: int) -> None:
        """Write this collective's header (read by the others after the first barrier)."""
        self._seq += 1
        at = HEADER0 + (self._seq % 2) * HEADER
        head = self._seg.ctrl[self.rank, at:at + HEADER]  # written in place: no allocation
        # a shape of more dimensions than the header lists goes in as a checksum
        dims = shape if len(shape) <= _MAX_DIMS else (zlib.crc32(repr(shape).encode()),)
        head[:] = 0
        head[:6] = (self._seq, _COLLECTIVES.index(name), ord(dtype.char), len(shape), arg,
                    int(np.prod(shape, dtype=np.int64)))
        head[6:6 + len(dims)] = dims

    def _exchange(self, name: str, first: bool = True) -> None:
        """Barrier; after a collective's first one, check that every rank made the same call."""
        self._wait(name)
        if not first:
            return
        at = HEADER0 + (self._seq % 2) * HEADER
        heads = self._seg.ctrl[:, at:at + HEADER]
        if (heads == heads[self.rank]).all():
            return
        if name == "init":
            self._check_started_alike()
        calls = [_describe(h) for h in heads]
        kinds = {(int(h[1]), int(h[4])) for h in heads}
        what = "shapes or dtypes differ across ranks" if len(kinds) == 1 else \
            "ranks made different calls"
        listed = "; ".join(f"rank {r} {c}" for r, c in enumerate(calls))
        odd = [r for r, h in enumerate(heads) if not (h == heads[0]).all()]
        raise DistributedError(name, f"{what} (call #{self._seq}): {listed}", missing=odd)

    def _check_started_alike(self) -> None:
        rows = self._seg.ctrl
        if len({(int(r[WORLD]), int(r[CHUNK])) for r in rows}) > 1:
            sizes = ", ".join(f"rank {k}: world {int(r[WORLD])} slot {int(r[CHUNK])}"
                              for k, r in enumerate(rows))
            raise self._fail(DistributedError("init_process_group", f"ranks of job "
                                              f"{self.job_id!r} were started differently: "
                                              f"{sizes}"))

    def _wait(self, name: str) -> None:
        """Bump this rank's counter and wait until every rank's has reached it."""
        self._barriers += 1
        target = self._barriers
        arrive = self._arrive
        _fence()  # this rank's slot writes before its counter
        arrive[self.rank] = target
        if arrive.min() >= target:
            _fence()  # the others' counters before their slots
            self._check_failed(name, 0.0)
            return
        start = time.monotonic()
        next_check = start + _CHECK_EVERY_S
        spins = 0
        while True:
            # NOTE [ Waiting ]: spin briefly (the others usually arrive within microseconds
            # when each rank has a core), then yield the core (ranks often outnumber cores),
            # then sleep in growing steps up to 1 ms so that a long wait costs little CPU.
            if spins < 20:
                pass
            elif spins < 200:
                os.sched_yield()
            else:
                time.sleep(min(1e-3, 1e-5 * (spins - 199)))
            spins += 1
            if arrive.min() >= target:
                _fence()
                self._check_failed(name, time.monotonic() - start)
                return
            now = time.monotonic()
            if now >= next_check:
                next_check = now + _CHECK_EVERY_S
                self._check_missing(name, target, now - start)

    def _check_failed(self, name: str, waited: float) -> None:
        """After a barrier: a rank that gave up on the group may have arrived before it did."""
        states = self._seg.ctrl[:, STATE]
        if (states == FAILED).any():
            failed = [int(r) for r in np.flatnonzero(states == FAILED)]
            raise self._fail(DistributedError(name, f"rank {failed[0]} failed (it raised an "
                                              f"error)", missing=failed, waited_s=waited))

    def _check_missing(self, name: str, target: int, waited: float) -> None:
        rows = self._seg.ctrl
        missing = [r for r in range(self.world_size) if rows[r, ARRIVE] < target]
        for r in missing:
            pid, state = int(rows[r, PID]), int(rows[r, STATE])
            if state == FAILED:
                raise self._fail(DistributedError(name, f"rank {r} failed (it raised an error)",
                                                  missing=(r,), waited_s=waited))
            if state == LEFT:
                raise self._fail(DistributedError(name, f"rank {r} left the group before this "
                                                  f"collective", missing=(r,), waited_s=waited))
            if pid > 0 and not _alive(pid):
                raise self._fail(DistributedError(name, f"rank {r} (pid {pid}) died",
                                                  missing=(r,), waited_s=waited))
        if waited >= self.timeout_s:
            joined = [r for r in missing if rows[r, PID] > 0]
            verb = "did not arrive" if len(joined) == len(missing) else "did not join"
            pids = ", ".join(f"rank {r}: pid {int(rows[r, PID]) or '?'}" for r in missing)
            raise self._fail(DistributedError(
                name, f"{verb} within the timeout of {self.timeout_s:g} s (hung? {pids}; "
                f"job {self.job_id!r}; set NETCL_DIST_TIMEOUT_S to wait longer)",
                missing=missing, waited_s=waited))

    def _fail(self, err: DistributedError) -> DistributedError:
        """Remember ``err`` (the group is unusable now) and tell the other ranks."""
        self._broken = err
        self._seg.mark(FAILED)
        return err


def _alive(pid: int) -> bool:
    return pid == os.getpid() or pid_alive(pid)


def _describe(head: np.ndarray[Any, Any]) -> str:
    """A header as ``all_reduce(sum) float32 (7,)``."""
    seq, kind, char, ndim, arg, size = (int(v) for v in head[:6])
    name = _COLLECTIVES[kind] if 0 <= kind < len(_COLLECTIVES) else f"collective {kind}"
    if name in ("all_reduce", "reduce_scatter") and 0 <= arg < len(REDUCE_OPS):
        name += f"({REDUCE_OPS[arg]})"
    elif name in ("broadcast", "scatter", "gather"):
        name += f"(root {arg})"
    if seq == 0:
        return "nothing"
    dtype = np.dtype(chr(char)).name if char else "?"
    shape = tuple(int(d) for d in head[6:6 + ndim]) if ndim <= _MAX_DIMS else \
        f"<{ndim}-d, {size} elements>"
    return f"{name} {dtype} {shape}"
