"""The interface every collective backend implements, and its typed error.

A :class:`Backend` moves data between the ranks of one job in place, on contiguous NumPy
arrays, as ``torch.distributed`` does on tensors: the shared-memory backend
(:mod:`._shm`) between processes of one host, the MPI backend (``._mpi``) across hosts. The
public layer (:mod:`._collectives`) stages netcl Tensors through the host and calls these.

Every call waits at most ``timeout_s`` seconds (default :func:`default_timeout_s`, from
``NETCL_DIST_TIMEOUT_S``) and then raises :class:`DistributedError` naming the collective,
the ranks that did not arrive and the time waited. Ranks exchange a small header with each
collective (op, shape, dtype, sequence number) so that calls that do not match across ranks
fail as such instead of mixing bytes.

Examples:
    >>> import numpy as np
    >>> err = DistributedError("all_reduce", "did not arrive", missing=(1,), waited_s=2.0)
    >>> str(err)
    'all_reduce: did not arrive (rank 1; waited 2.0 s)'
    >>> isinstance(err, RuntimeError), err.missing
    (True, (1,))
    >>> check_reduce_op("all_reduce", "sum", np.dtype("float32"))
    'sum'
"""

from __future__ import annotations

import abc
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal, TypeAlias

import numpy as np

__all__ = ["REDUCE_OPS", "Backend", "DistributedError", "ReduceOp", "Work",
           "check_contiguous", "check_reduce_op", "default_timeout_s"]

ReduceOp: TypeAlias = Literal["sum", "mean", "max", "min"]
REDUCE_OPS: tuple[str, ...] = ("sum", "mean", "max", "min")

#: Default wait of a collective, seconds, where ``NETCL_DIST_TIMEOUT_S`` does not say.
DEFAULT_TIMEOUT_S = 300.0


class DistributedError(RuntimeError):
    """A collective that could not complete: a rank died, hung, left or disagreed.

    Attributes:
        collective: the collective's name (``"all_reduce"``, ``"init_process_group"``, ...).
        missing: the ranks that did not arrive (or that failed), possibly empty.
        waited_s: how long this rank waited before giving up, seconds.
    """

    def __init__(self, collective: str, message: str, missing: Sequence[int] = (),
                 waited_s: float | None = None) -> None:
        self.collective = collective
        self.missing = tuple(int(r) for r in missing)
        self.waited_s = waited_s
        where = []
        if self.missing:
            word = "rank" if len(self.missing) == 1 else "ranks"
            where.append(f"{word} {', '.join(str(r) for r in self.missing)}")
        if waited_s is not None:
            where.append(f"waited {waited_s:.1f} s")
        suffix = f" ({'; '.join(where)})" if where else ""
        super().__init__(f"{collective}: {message}{suffix}")


def default_timeout_s() -> float:
    """``NETCL_DIST_TIMEOUT_S`` as a positive float, else :data:`DEFAULT_TIMEOUT_S`.

    Raises:
        ValueError: the variable is set but is not a positive number.
    """
    raw = os.environ.get("NETCL_DIST_TIMEOUT_S", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"NETCL_DIST_TIMEOUT_S must be a number of seconds, got {raw!r}") \
            from None
    if not value > 0:
        raise ValueError(f"NETCL_DIST_TIMEOUT_S must be positive, got {raw!r}")
    return value


def check_reduce_op(collective: str, op: str, dtype: np.dtype[Any]) -> str:
    """Return ``op`` if it is a reduction this library knows for ``dtype``.

    Raises:
        ValueError: ``op`` is not one of :data:`REDUCE_OPS`.
        TypeError: ``"mean"`` of an integer array (the mean would not fit in place).
    """
    if op not in REDUCE_OPS:
        raise ValueError(f"{collective}: op must be one of {', '.join(REDUCE_OPS)}, got {op!r}")
    if op == "mean" and dtype.kind not in "fc":
        raise TypeError(f"{collective}: op 'mean' needs a floating-point array to average in "
                        f"place, got {dtype}; use 'sum' and divide")
    return op


def check_contiguous(collective: str, name: str, arr: Any) -> np.ndarray[Any, Any]:
    """``arr`` if it is a C-contiguous NumPy array, else ``TypeError`` / ``ValueError``."""
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{collective}: {name} must be a NumPy array, "
                        f"got {type(arr).__name__}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{collective}: {name} must be C-contiguous (shape {arr.shape}, "
                         f"strides {arr.strides}); pass np.ascontiguousarray(...)")
    return arr


class Work:
    """A collective started by ``*_async``: :meth:`wait` for it (and see its error there).

    Examples:
        >>> from concurrent.futures import Future
        >>> f: Future[None] = Future()
        >>> f.set_result(None)
        >>> w = Work(f)
        >>> w.is_completed(), w.wait()
        (True, None)
    """

    def __init__(self, future: Future[None]) -> None:
        self._future = future

    def is_completed(self) -> bool:
        """Whether the collective has finished (successfully or not)."""
        return self._future.done()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the collective finished; re-raise its error (a DistributedError...)."""
        self._future.result(timeout)


class Backend(abc.ABC):
    """In-place collectives on contiguous NumPy arrays between the ranks of one job.

    Every rank calls the same collectives in the same order with arrays of the same shape and
    dtype (``scatter``'s ``send`` and ``gather``'s ``recv`` only on the root, ``None``
    elsewhere). Shapes: ``all_gather(send, recv)`` and ``gather``: ``recv.shape == (world,
    *send.shape)``; ``reduce_scatter(send, recv)`` and ``scatter``: ``send.shape == (world,
    *recv.shape)``. ``op`` is one of :data:`REDUCE_OPS` (``"mean"`` only on floats).

    :meth:`all_reduce_async` runs :meth:`all_reduce` on one worker thread by default (one per
    backend, so async collectives keep their order); a synchronous collective first waits for
    the async ones still pending, so every rank sees the same order. A backend with its own
    non-blocking collectives (MPI) may override it. Call a backend from one thread at a time
    (its worker aside): the ranks must see one order of collectives.
    """

    rank: int
    world_size: int
    name: str
    timeout_s: float

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future[None]] = []
        self._pending_lock = threading.Lock()
        self._worker_ident: int | None = None

    # -- the collectives ---------------------------------------------------------------------

    @abc.abstractmethod
    def all_reduce(self, buf: np.ndarray[Any, Any], op: str = "sum") -> None:
        """Reduce ``buf`` over all ranks with ``op``; every rank gets the result in ``buf``."""

    @abc.abstractmethod
    def broadcast(self, buf: np.ndarray[Any, Any], src: int = 0) -> None:
        """Copy rank ``src``'s ``buf`` into every rank's ``buf``."""

    @abc.abstractmethod
    def all_gather(self, send: np.ndarray[Any, Any], recv: np.ndarray[Any, Any]) -> None:
        """``recv[k] = send`` of rank k, on every rank."""

    @abc.abstractmethod
    def reduce_scatter(self, send: np.ndarray[Any, Any], recv: np.ndarray[Any, Any],
                       op: str = "sum") -> None:
        """``recv`` of rank r = reduction over ranks of their ``send[r]``."""

    @abc.abstractmethod
    def scatter(self, send: np.ndarray[Any, Any] | None, recv: np.ndarray[Any, Any],
                src: int = 0) -> None:
        """``recv`` of rank r = ``send[r]`` of rank ``src`` (``send`` is ``None`` elsewhere)."""

    @abc.abstractmethod
    def gather(self, send: np.ndarray[Any, Any], recv: np.ndarray[Any, Any] | None,
               dst: int = 0) -> None:
        """``recv[k] = send`` of rank k on rank ``dst`` (``recv`` is ``None`` elsewhere)."""

    @abc.abstractmethod
    def barrier(self) -> None:
        """Wait until every rank has called ``barrier``."""

    @abc.abstractmethod
    def close(self) -> None:
        """Leave the job and free what this rank holds; idempotent."""

    # -- async -------------------------------------------------------------------------------

    def all_reduce_async(self, buf: np.ndarray[Any, Any], op: str = "sum") -> Work:
        """Start :meth:`all_reduce` of ``buf`` on the backend's worker thread.

        Do not touch ``buf`` until the returned :class:`Work` is waited for.
        """
        return self._submit(self.all_reduce, buf, op)

    def synchronize(self) -> None:
        """Wait for every async collective still pending (re-raising the first error)."""
        with self._pending_lock:
            pending, self._pending = self._pending, []
        errors = []
        for fut in pending:
            exc = fut.exception()
            if exc is not None:
                errors.append(exc)
        if errors:
            raise errors[0]

    def _submit(self, fn: Callable[..., None], *args: Any) -> Work:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"netcl-{self.name}")
            self._executor.submit(self._mark_worker).result()
        fut = self._executor.submit(fn, *args)
        with self._pending_lock:
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(fut)
        return Work(fut)

    def _mark_worker(self) -> None:
        self._worker_ident = threading.get_ident()

    def _before_sync(self) -> None:
        """Called first by each synchronous collective: keep the async ones' order."""
        if self._pending and threading.get_ident() != self._worker_ident:
            self.synchronize()

    def _shutdown_worker(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
