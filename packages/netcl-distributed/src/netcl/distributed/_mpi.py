"""The MPI backend: the collectives of :class:`~._backend.Backend` on mpi4py, across hosts.

Run the same script under ``mpiexec -n N python script.py``; :func:`under_mpi` tells the
process group to pick this backend. mpi4py (and an MPI library: ``pip install
netcl-distributed[mpi]`` brings MPICH's wheels) is imported only when a backend is built, so
this module imports without it.

# NOTE [ MPI timeouts ]
MPI collectives have no timeout, and a blocked ``MPI_Allreduce`` cannot be interrupted. So each
collective starts with a header exchange that this rank polls with ``Test`` until its deadline
(``timeout_s``): point to point with every other rank (``Isend``/``Irecv`` of 16 int64:
sequence number, collective, op, root, dtype, shape). A rank whose header has not arrived by
the deadline is named in the :class:`DistributedError`; headers that differ (another
collective, shape, dtype, op or root) raise one naming each rank's call, on every rank alike,
before any data moves. Once every header is in, every rank is inside the same collective, and
the data moves with MPI's blocking call (``Allreduce``, ``Bcast``, ...): the non-blocking ones
polled from Python were up to 5x slower on 1 MB here (MPICH progresses a schedule only inside
MPI calls). A rank that dies in between is seen by ``mpiexec``, which stops the job at once.

A timeout leaves MPI in an unknown state, so the backend remembers it and aborts the job
(``MPI_Abort``) when it is closed or the process exits: ``mpiexec`` then stops every rank, and
a hung rank cannot keep the job alive forever.

Polling spins on ``Test`` (which releases the GIL) for 10 ms, then naps 0.2 ms between tests:
a quick exchange pays no sleep, and a rank waiting long for a slow one (rank 0 writing a
checkpoint) does not take a core from the ranks still computing.
"""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._backend import (
    Backend,
    DistributedError,
    check_contiguous,
    check_reduce_op,
    default_timeout_s,
)

__all__ = ["MPIBackend", "mpi_available", "under_mpi_env"]

_HEADER_TAG = 0x4E43  # "NC": the tag of the header messages on the backend's own communicator
_HEADER_LEN = 16
_SHAPE_SLOTS = 8
_COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "reduce_scatter", "scatter", "gather",
                "barrier")
_OPS = ("", "sum", "mean", "max", "min")
# Environment variables the MPI launchers set in each rank (MPICH/Hydra, Open MPI, Intel MPI,
# Slurm's PMI2/PMIx).
_MPI_ENV = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "MPI_LOCALRANKID")
_SPIN_CHECK = 64  # Test() calls between clock reads while polling
_SPIN_S = 0.01  # spin this long at full speed, then nap between tests
_NAP_S = 2e-4


def mpi_available() -> bool:
    """Whether mpi4py is importable (without initialising MPI)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def under_mpi_env(environ: dict[str, str] | None = None) -> bool:
    """Whether this process was started by an MPI launcher (``mpiexec``, ``srun``).

    Examples:
        >>> under_mpi_env({"PMI_RANK": "0", "PMI_SIZE": "2"}), under_mpi_env({})
        (True, False)
    """
    env = os.environ if environ is None else environ
    return any(name in env for name in _MPI_ENV)


def _load_mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError("MPIBackend needs mpi4py and an MPI library: pip install "
                          f"'netcl-distributed[mpi]' (mpi4py and MPICH's wheels); {exc}") \
            from exc
    return MPI


def _header(seq: int, collective: str, op: str, root: int, arr: np.ndarray[Any, Any] | None
            ) -> np.ndarray[Any, np.dtype[np.int64]]:
    h = np.full(_HEADER_LEN, -1, np.int64)
    h[:4] = seq, _COLLECTIVES.index(collective), _OPS.index(op), root
    if arr is not None:
        shape = arr.shape
        h[4:8] = ord(arr.dtype.char), arr.dtype.itemsize, arr.ndim, arr.size
        dims = list(shape[:_SHAPE_SLOTS])
        if len(shape) > _SHAPE_SLOTS:  # fold the tail: the size still tells a mismatch apart
            dims[-1] = int(np.prod(shape[_SHAPE_SLOTS - 1:]))
        h[8: 8 + len(dims)] = dims
    return h


def _describe(h: np.ndarray[Any, Any]) -> str:
    coll = _COLLECTIVES[int(h[1])] if 0 <= h[1] < len(_COLLECTIVES) else f"#{h[1]}"
    parts = [coll]
    if h[2] > 0:
        parts.append(f"op={_OPS[int(h[2])]}")
    if h[3] >= 0:
        parts.append(f"root={int(h[3])}")
    if h[6] >= 0:
        dims = tuple(int(d) for d in h[8: 8 + min(int(h[6]), _SHAPE_SLOTS)])
        parts.append(f"{np.dtype(chr(int(h[4]))).name} {dims}")
    return f"{' '.join(parts)} (call {int(h[0])})"


class MPIBackend(Backend):
    """In-place collectives between the ranks of an MPI communicator (mpi4py).

    Args:
        timeout_s: the longest wait of each phase of a collective (NOTE [ MPI timeouts ]);
            default :func:`~._backend.default_timeout_s`.
        comm: an mpi4py communicator (default ``MPI.COMM_WORLD``); the backend works on a
            duplicate, so its messages never mix with the caller's.

    Attributes:
        local_rank: this rank's index among the ranks on its host (``local_world_size`` of
            them), for picking a device.

    Raises:
        ImportError: mpi4py is not installed.
    """

    name = "mpi"

    def __init__(self, timeout_s: float | None = None, comm: Any = None) -> None:
        super().__init__()
        self._mpi = _load_mpi()
        base = self._mpi.COMM_WORLD if comm is None else comm
        self.timeout_s = default_timeout_s() if timeout_s is None else float(timeout_s)
        if not self.timeout_s > 0:
            raise ValueError(f"MPIBackend: timeout_s must be positive, got {timeout_s!r}")
        self._comm = base.Dup()
        self.rank = int(self._comm.Get_rank())
        self.world_size = int(self._comm.Get_size())
        local = self._comm.Split_type(self._mpi.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank = int(local.Get_rank())
        self.local_world_size = int(local.Get_size())
        local.Free()
        self._ops = {"sum": self._mpi.SUM, "mean": self._mpi.SUM, "max": self._mpi.MAX,
                     "min": self._mpi.MIN}
        self._seq = 0
        self._failed = False
        self._closed = False
        atexit.register(self._at_exit)

    # -- polling -----------------------------------------------------------------------------

    def _poll(self, collective: str, requests: Sequence[Any], start: float,
              ranks: Sequence[int]) -> None:
        """Test ``requests`` until all completed or the deadline; on timeout name the ranks
        (``ranks[i]`` for ``requests[i]``) whose request is still open."""
        deadline = start + self.timeout_s
        done = [False] * len(requests)
        spins = 0
        while True:
            for i, req in enumerate(requests):
                if not done[i]:
                    done[i] = bool(req.Test())
            if all(done):
                return
            spins += 1
            if spins % _SPIN_CHECK == 0:
                now = time.monotonic()
                if now >= deadline:
                    break
                if now - start > _SPIN_S:  # a long wait: leave the processor to others
                    time.sleep(_NAP_S)
        self._failed = True
        waited = time.monotonic() - start
        missing = sorted({ranks[i] for i, d in enumerate(done) if not d})
        raise DistributedError(collective, "did not arrive within the timeout; the job is "
                               "aborted when this rank exits", missing, waited)

    def _exchange_headers(self, collective: str, op: str, root: int,
                          arr: np.ndarray[Any, Any] | None) -> None:
        """Phase 1 of NOTE [ MPI timeouts ]: every rank's header, checked against ours."""
        if self._closed:
            raise RuntimeError(f"{collective}: the MPI backend was closed")
        if self._failed:
            raise DistributedError(collective, "an earlier collective timed out; the job is "
                                   "broken (restart it)")
        self._before_sync()
        self._seq += 1
        mine = _header(self._seq, collective, op, root, arr)
        others = [r for r in range(self.world_size) if r != self.rank]
        if not others:
            return
        recv = np.empty((len(others), _HEADER_LEN), np.int64)
        start = time.monotonic()
        reqs = [self._comm.Irecv(recv[i], source=r, tag=_HEADER_TAG)
                for i, r in enumerate(others)]
        sends = [self._comm.Isend(mine, dest=r, tag=_HEADER_TAG) for r in others]
        self._poll(collective, reqs + sends, start, others + others)
        if all(np.array_equal(h, mine) for h in recv):
            return
        calls = sorted([(self.rank, mine), *zip(others, recv)], key=lambda c: c[0])
        described = ", ".join(f"rank {r} {_describe(h)}" for r, h in calls)
        raise DistributedError(collective, "calls differ across ranks (another collective, "
                               f"shape, dtype, op or root): {described}",
                               [r for r, h in calls if not np.array_equal(h, calls[0][1])])

    def _check_root(self, collective: str, root: int) -> int:
        if isinstance(root, bool) or not isinstance(root, (int, np.integer)) \
                or not 0 <= root < self.world_size:
            raise ValueError(f"{collective}: root rank must be in [0, {self.world_size}), "
                             f"got {root!r}")
        return int(root)

    # -- the collectives ---------------------------------------------------------------------

    def all_reduce(self, buf: np.ndarray[Any, Any], op: str = "sum") -> None:
        check_contiguous("all_reduce", "buf", buf)
        check_reduce_op("all_reduce", op, buf.dtype)
        self._exchange_headers("all_reduce", op, -1, buf)
        work = buf.astype(np.float32) if buf.dtype == np.float16 else buf
        self._comm.Allreduce(self._mpi.IN_PLACE, work, self._ops[op])
        if op == "mean":
            np.divide(work, self.world_size, out=work)
        if work is not buf:
            buf[...] = work

    def broadcast(self, buf: np.ndarray[Any, Any], src: int = 0) -> None:
        check_contiguous("broadcast", "buf", buf)
        src = self._check_root("broadcast", src)
        self._exchange_headers("broadcast", "", src, buf)
        self._comm.Bcast(_raw(buf), root=src)

    def all_gather(self, send: np.ndarray[Any, Any], recv: np.ndarray[Any, Any]) -> None:
        check_contiguous("all_gather", "send", send)
        check_contiguous("all_gather", "recv", recv)
        _check_stacked("all_gather", recv, send, self.world_size)
        self._exchange_headers("all_gather", "", -1, send)
        self._comm.Allgather(_raw(send), _raw(recv))

    def reduce_scatter(self, send: np.ndarray[Any, Any], recv: np.ndarray[Any, Any],
                       op: str = "sum") -> None:
        check_contiguous("reduce_scatter", "send", send)
        check_contiguous("reduce_scatter", "recv", recv)
        check_reduce_op("reduce_scatter", op, recv.dtype)
        _check_stacked("reduce_scatter", send, recv, self.world_size)
        self._exchange_headers("reduce_scatter", op, -1, recv)
        wide = recv.dtype == np.float16
        s, r = (send.astype(np.float32), recv.astype(np.float32)) if wide else (send, recv)
        self._comm.Reduce_scatter_block(s, r, self._ops[op])
        if op == "mean":
            np.divide(r, self.world_size, out=r)
        if wide:
            recv[...] = r

    def scatter(self, send: np.ndarray[Any, Any] | None, recv: np.ndarray[Any, Any],
                src: int = 0) -> None:
        check_contiguous("scatter", "recv", recv)
        src = self._check_root("scatter", src)
        if self.rank == src:
            if send is None:
                raise ValueError(f"scatter: rank {src} is the root and needs send")
            check_contiguous("scatter", "send", send)
            _check_stacked("scatter", send, recv, self.world_size)
        self._exchange_headers("scatter", "", src, recv)
        self._comm.Scatter(_raw(send) if self.rank == src else None, _raw(recv), root=src)

    def gather(self, send: np.ndarray[Any, Any], recv: np.ndarray[Any, Any] | None,
               dst: int = 0) -> None:
        check_contiguous("gather", "send", send)
        dst = self._check_root("gather", dst)
        if self.rank == dst:
            if recv is None:
                raise ValueError(f"gather: rank {dst} is the root and needs recv")
            check_contiguous("gather", "recv", recv)
            _check_stacked("gather", recv, send, self.world_size)
        self._exchange_headers("gather", "", dst, send)
        self._comm.Gather(_raw(send), _raw(recv) if self.rank == dst else None, root=dst)

    def barrier(self) -> None:
        # every rank's header in = every rank arrived: the exchange is the barrier
        self._exchange_headers("barrier", "", -1, None)

    def close(self) -> None:
        """Free the communicator; after a timeout, abort the whole job (NOTE [ MPI timeouts ])."""
        if self._closed:
            return
        self._closed = True
        try:
            self._shutdown_worker()
        finally:
            if self._failed:
                self._comm.Abort(1)
            self._comm.Free()

    def _at_exit(self) -> None:
        if self._failed and not self._closed:
            self._closed = True
            self._comm.Abort(1)


def _raw(arr: np.ndarray[Any, Any] | None) -> Any:
    """The bytes of a contiguous array (data movement needs no MPI type of its dtype)."""
    return None if arr is None else arr.reshape(-1).view(np.uint8)


def _check_stacked(collective: str, stacked: np.ndarray[Any, Any], part: np.ndarray[Any, Any],
                   world: int) -> None:
    if stacked.shape != (world, *part.shape) or stacked.dtype != part.dtype:
        raise ValueError(f"{collective}: needs the stacked array of shape {(world, *part.shape)} "
                         f"dtype {part.dtype} for {world} ranks, got shape {stacked.shape} dtype "
                         f"{stacked.dtype}")
