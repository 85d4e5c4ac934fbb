"""DataLoader: batches in a fixed order, built in the parent or in worker processes."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import numbers
import os
import pickle
import signal
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing import connection
from multiprocessing.context import BaseContext
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt

from ._fetch import BatchTransform, CollateFn, fetch_batch
from ._sampler import batch_indices, fresh_seed
from ._worker import RemoteError, Task, WorkerConfig, worker_main
from .shared_batch import BatchLayout, SharedBatchRing

_MIN_SLOT_BYTES = 64 * 1024
_FALLBACK_SLOT_BYTES = 1 << 20
_GROWTH = 1.25
# Workers hold no state worth saving: a busy one is terminated after this long.
_SHUTDOWN_GRACE_S = 0.25


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"DataLoader: {name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"DataLoader: {name} must be >= {minimum}, got {value}")
    return int(value)


def _check_callable(name: str, value: object) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"DataLoader: {name} must be callable or None, got {type(value).__name__}")


def _resolve_context(context: str | BaseContext | None) -> BaseContext:
    if context is None:
        return mp.get_context()
    if isinstance(context, str):
        methods = mp.get_all_start_methods()
        if context not in methods:
            raise ValueError(
                f"DataLoader: multiprocessing_context must be one of {methods} or a "
                f"multiprocessing context, got {context!r}"
            )
        return mp.get_context(context)
    if isinstance(context, BaseContext):
        return context
    raise TypeError(
        "DataLoader: multiprocessing_context must be a start-method name or a multiprocessing "
        f"context, got {type(context).__name__}"
    )


class DataLoader:
    """Iterate over a dataset in batches, optionally built by worker processes.

    Batch ``k`` of an epoch holds the same samples, and draws the same random numbers, for a
    given ``seed`` and epoch whatever ``num_workers`` is: the order comes from ``(seed,
    epoch)`` and ``transform`` gets a generator seeded by ``(seed, epoch, k)``. Workers write
    batches into a shared-memory ring (:mod:`netcl.data.shared_batch`) instead of pickling them.

    Each ``iter(loader)`` runs one epoch, numbered by a counter that starts at 0 and goes up by
    one per ``iter``; :meth:`set_epoch` picks the number of the next one.

    Args:
        dataset: a :class:`~netcl.data.Dataset` (``len`` and integer indexing); one with a
            ``get_batch(indices)`` method is batched through it when ``collate_fn`` is None.
        batch_size: samples per batch (>= 1).
        shuffle: draw a new order every epoch.
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        num_workers: worker processes; 0 builds batches in this process.
        prefetch: batches in flight per worker (>= 1).
        seed: seeds order and transforms; None draws one (kept in ``loader.seed``).
        collate_fn: turns a list of items into a batch; default :func:`default_collate`.
        transform: ``transform(x, rng) -> x`` applied to the batch's inputs (the batch itself,
            or its first element when it is a tuple), e.g. an :mod:`netcl.data.augment` pipeline.
        multiprocessing_context: ``"fork"``, ``"spawn"``, ``"forkserver"`` or a context; None is
            the platform default. Under spawn/forkserver everything above must be picklable.
        worker_init_fn: called as ``worker_init_fn(worker_id)`` first thing in each worker.
        timeout: seconds to wait for one batch before raising; None waits as long as workers
            live (a dead worker is reported at once either way).

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: ``batch_size`` < 1, ``num_workers`` < 0, ``prefetch`` < 1, and so on.

    Examples:
        >>> import numpy as np
        >>> from netcl.data import ArrayDataset, DataLoader
        >>> ds = ArrayDataset(np.arange(10, dtype=np.float32), np.arange(10))
        >>> loader = DataLoader(ds, batch_size=4, shuffle=True, seed=0)
        >>> [y.tolist() for _, y in loader]
        [[1, 7, 9, 0], [6, 4, 5, 8], [2, 3]]
        >>> len(loader), loader.epoch
        (3, 1)
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool = False,
        drop_last: bool = False,
        num_workers: int = 0,
        prefetch: int = 2,
        seed: int | None = None,
        collate_fn: CollateFn | None = None,
        transform: BatchTransform | None = None,
        multiprocessing_context: str | BaseContext | None = None,
        worker_init_fn: Callable[[int], None] | None = None,
        timeout: float | None = None,
    ) -> None:
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise TypeError(
                "DataLoader: dataset must define __len__ and __getitem__, "
                f"got {type(dataset).__name__}"
            )
        self.dataset = dataset
        self.batch_size = _check_int("batch_size", batch_size, 1)
        self.num_workers = _check_int("num_workers", num_workers, 0)
        self.prefetch = _check_int("prefetch", prefetch, 1)
        self.seed = fresh_seed() if seed is None else _check_int("seed", seed, 0)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        _check_callable("collate_fn", collate_fn)
        _check_callable("transform", transform)
        _check_callable("worker_init_fn", worker_init_fn)
        self.collate_fn = collate_fn
        self.transform = transform
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = _resolve_context(multiprocessing_context)
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or timeout <= 0
        ):
            raise ValueError(f"DataLoader: timeout must be None or a number > 0, got {timeout!r}")
        self.timeout = None if timeout is None else float(timeout)
        self._epoch = 0
        self._slot_bytes: int | None = None  # guessed at the first epoch with workers, then learnt

    @property
    def epoch(self) -> int:
        """The number of the epoch that the next ``iter(loader)`` runs."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter(loader)`` run epoch ``epoch`` (its order and random draws)."""
        self._epoch = _check_int("epoch", epoch, 0)

    def __len__(self) -> int:
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> LoaderIterator:
        epoch, self._epoch = self._epoch, self._epoch + 1
        batches = batch_indices(
            len(self.dataset),
            self.batch_size,
            shuffle=self.shuffle,
            drop_last=self.drop_last,
            seed=self.seed,
            epoch=epoch,
        )
        if self.num_workers == 0 or not batches:
            return _InProcessIterator(self, epoch, batches)
        return _WorkerIterator(self, epoch, batches)


class LoaderIterator(Iterator[Any]):
    """One epoch of a :class:`DataLoader`. ``close()`` stops its workers early."""

    def __init__(self, epoch: int, batches: list[npt.NDArray[np.int64]]) -> None:
        self.epoch = epoch
        self._batches = batches
        self._next = 0

    def __len__(self) -> int:
        """Batches left in this epoch."""
        return len(self._batches) - self._next

    def __iter__(self) -> LoaderIterator:
        return self

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (empty without workers)."""
        return []

    @property
    def pickled_batches(self) -> int:
        """Batches that were too big for their ring slot and came pickled (the slot then grew)."""
        return 0

    def close(self) -> None:
        """Stop the workers and free the shared memory; later ``next`` raises StopIteration."""
        self._next = len(self._batches)


class _InProcessIterator(LoaderIterator):
    def __init__(self, loader: DataLoader, epoch: int, batches: list[npt.NDArray[np.int64]]):
        super().__init__(epoch, batches)
        self._loader = loader

    def __next__(self) -> Any:
        if self._next >= len(self._batches):
            raise StopIteration
        k = self._next
        self._next += 1
        ld = self._loader
        return fetch_batch(
            ld.dataset, self._batches[k], ld.collate_fn, ld.transform, ld.seed, self.epoch, k
        )


@dataclass
class _Pool:
    """What must be released when a worker iterator ends; shared with its finalizer."""

    owner_pid: int
    procs: list[Any] = field(default_factory=list)
    conns: list[connection.Connection] = field(default_factory=list)
    ring: SharedBatchRing | None = None


def _shutdown(pool: _Pool) -> None:
    if os.getpid() != pool.owner_pid:
        return  # a forked child inherited this object; the parent cleans up
    for conn in pool.conns:
        with contextlib.suppress(OSError):  # the worker is gone already
            conn.send(None)
    deadline = time.monotonic() + _SHUTDOWN_GRACE_S
    for proc in pool.procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    for proc in pool.procs:
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=_SHUTDOWN_GRACE_S)
        if proc.is_alive():  # pragma: no cover - ignored SIGTERM
            proc.kill()
            proc.join()
    for conn in pool.conns:
        conn.close()
    if pool.ring is not None:
        pool.ring.close()
    pool.procs.clear()
    pool.conns.clear()


# Named for how it reads as a cause ("WorkerTraceback: ..."), not as an error of its own.
class WorkerTraceback(Exception):  # noqa: N818
    """Carries a worker's formatted traceback as the ``__cause__`` of the re-raised error."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return "\n\n" + self.text


def _guess_slot_bytes(loader: DataLoader) -> int:
    """Guess a batch's size from item 0; a wrong guess only costs one pickled batch per slot.

    This loads item 0 in the parent, once per loader; later epochs start from the largest
    batch seen so far.
    """
    try:
        item = loader.dataset[0]
    except Exception:
        return _FALLBACK_SLOT_BYTES  # the workers will report the error with its traceback

    # Transforms commonly turn uint8 images into float32: leave room for 4x.
    factor = 4 if loader.transform is not None else 1
    return max(_MIN_SLOT_BYTES, _nbytes(item) * loader.batch_size * factor + _MIN_SLOT_BYTES)


def _nbytes(node: Any) -> int:
    if isinstance(node, np.ndarray | np.generic):
        return int(node.nbytes)
    if isinstance(node, tuple | list):
        return sum(_nbytes(c) for c in node)
    if isinstance(node, dict):
        return sum(_nbytes(c) for c in node.values())
    return 8


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "an unknown status"
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


class _WorkerIterator(LoaderIterator):
    def __init__(self, loader: DataLoader, epoch: int, batches: list[npt.NDArray[np.int64]]):
        super().__init__(epoch, batches)
        self._loader = loader
        self._timeout = loader.timeout
        self._pool = _Pool(owner_pid=os.getpid())
        self._finalizer = weakref.finalize(self, _shutdown, self._pool)
        num_workers = loader.num_workers
        self._outstanding: list[set[int]] = [set() for _ in range(num_workers)]
        self._ready: dict[int, Any] = {}
        self._in_flight_limit = num_workers * loader.prefetch
        self._sent = 0
        self._pickled = 0
        try:
            if loader._slot_bytes is None:
                loader._slot_bytes = _guess_slot_bytes(loader)
            self._ring = SharedBatchRing(num_workers * loader.prefetch, loader._slot_bytes)
            self._pool.ring = self._ring
            self._free: deque[int] = deque(range(len(self._ring)))
            self._start_workers(loader)
            self._dispatch()
        except BaseException:
            self.close()
            raise

    def _start_workers(self, loader: DataLoader) -> None:
        ctx = loader.multiprocessing_context
        config = WorkerConfig(
            loader.dataset, loader.collate_fn, loader.transform, loader.seed, loader.worker_init_fn
        )
        for worker_id in range(loader.num_workers):
            parent_conn, child_conn = ctx.Pipe(duplex=True)
            proc = ctx.Process(  # type: ignore[attr-defined]
                target=worker_main,
                args=(worker_id, child_conn, config),
                name=f"netcl-data-worker-{worker_id}",
                daemon=True,
            )
            try:
                proc.start()
            except Exception as exc:
                parent_conn.close()
                child_conn.close()
                method = ctx.get_start_method()
                raise RuntimeError(
                    f"DataLoader: could not start worker {worker_id} with the {method!r} start "
                    "method; under spawn/forkserver the dataset, collate_fn, transform and "
                    "worker_init_fn must be picklable (module-level, not lambdas or local "
                    f"classes): {type(exc).__name__}: {exc}"
                ) from exc
            finally:
                child_conn.close()  # only the worker keeps its end: its death reads as EOF here
            self._pool.procs.append(proc)
            self._pool.conns.append(parent_conn)

    @property
    def worker_pids(self) -> list[int]:
        return [p.pid for p in self._pool.procs if p.pid is not None]

    @property
    def pickled_batches(self) -> int:
        return self._pickled

    def close(self) -> None:
        super().close()
        self._ready.clear()
        self._finalizer()

    def __next__(self) -> Any:
        if self._next >= len(self._batches):
            self.close()
            raise StopIteration
        try:
            self._wait_for(self._next)
            batch = self._ready.pop(self._next)
            if isinstance(batch, RemoteError):  # raised in batch order, like the batches
                self._raise_remote(batch)
            self._next += 1
            if self._next == len(self._batches):
                self.close()
            else:
                self._dispatch()
        except BaseException:
            self.close()
            raise
        return batch

    # -- tasks out --------------------------------------------------------------------------

    def _dispatch(self) -> None:
        self._free.extend(self._ring.reclaim())
        in_flight = sum(len(o) for o in self._outstanding)
        while in_flight < self._in_flight_limit and self._sent < len(self._batches):
            worker = min(range(len(self._outstanding)), key=lambda w: len(self._outstanding[w]))
            if self._free:
                slot = self._free.popleft()
            else:  # every slot holds a batch still in use: add one rather than wait
                slot = self._ring.add_slot(self._loader._slot_bytes or _MIN_SLOT_BYTES)
            task = Task(
                batch_index=self._sent,
                epoch=self.epoch,
                indices=self._batches[self._sent],
                slot=slot,
                name=self._ring.name(slot),
                capacity=self._ring.capacity(slot),
            )
            try:
                self._pool.conns[worker].send(task)
            except OSError:
                self._worker_died(worker)
            self._outstanding[worker].add(self._sent)
            self._sent += 1
            in_flight += 1

    # -- results in -------------------------------------------------------------------------

    def _wait_for(self, batch_index: int) -> None:
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        conns = self._pool.conns
        sentinels: dict[Any, int] = {p.sentinel: w for w, p in enumerate(self._pool.procs)}
        while batch_index not in self._ready:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = connection.wait([*conns, *sentinels], timeout=remaining)
            if not ready:
                raise RuntimeError(
                    f"DataLoader: batch {batch_index} of epoch {self.epoch} did not arrive "
                    f"within timeout={self._timeout}s (workers {self.worker_pids} still alive); "
                    "raise timeout or look for a slow or stuck dataset"
                )
            for worker, conn in enumerate(conns):
                if conn in ready:
                    try:
                        message = conn.recv()
                    except (EOFError, OSError):  # closed, or reset with unread tasks in it
                        self._worker_died(worker)
                    self._handle(worker, message)
            for obj in ready:
                dead = sentinels.get(obj)
                if dead is not None and not conns[dead].poll():
                    self._worker_died(dead)

    def _handle(self, worker: int, message: tuple[Any, ...]) -> None:
        kind, batch_index, slot = message[0], message[1], message[2]
        if kind == "ok":
            layout: BatchLayout = message[3]
            # The batch stays in its slot; the slot comes back (reclaim) when the batch dies.
            self._ready[batch_index] = self._ring.view_batch(slot, layout)
            self._outstanding[worker].discard(batch_index)
            return
        if kind == "inline":
            self._ready[batch_index] = message[3]
            nbytes = int(message[4] * _GROWTH)
            self._ring.resize(slot, nbytes)
            self._loader._slot_bytes = max(self._loader._slot_bytes or 0, nbytes)
            self._pickled += 1
        elif batch_index is None:  # worker_init_fn failed: the worker serves nothing
            self._raise_remote(message[3])
        else:
            self._ready[batch_index] = message[3]
        self._outstanding[worker].discard(batch_index)
        self._free.append(slot)

    def _raise_remote(self, error: RemoteError) -> NoReturn:
        self.close()
        where = f"DataLoader worker {error.worker_id} (pid {error.pid})"
        what = (
            "in worker_init_fn"
            if error.batch_index is None
            else (f"while building batch {error.batch_index} of epoch {self.epoch}")
        )
        exc: BaseException | None = None
        if error.pickled is not None:
            try:
                exc = pickle.loads(error.pickled)
            except Exception:
                exc = None
        if not isinstance(exc, Exception):
            exc = RuntimeError(f"{where} raised {error.type_name} {what}: {error.message}")
        if hasattr(exc, "add_note"):
            exc.add_note(f"(raised in {where} {what}; the worker's traceback is shown above)")
        raise exc from WorkerTraceback(error.traceback)

    def _worker_died(self, worker: int) -> NoReturn:
        proc = self._pool.procs[worker]
        proc.join(timeout=_SHUTDOWN_GRACE_S)
        pending = sorted(self._outstanding[worker])
        doing = f"while batches {pending} were pending" if pending else "while idle"
        self.close()
        raise RuntimeError(
            f"DataLoader: worker {worker} (pid {proc.pid}) exited unexpectedly with "
            f"{_describe_exit(proc.exitcode)} {doing} in epoch {self.epoch}; a worker dies like "
            "this when it is killed (for example by the out-of-memory killer) or crashes in "
            "native code"
        )
