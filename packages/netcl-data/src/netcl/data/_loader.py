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
from ._sampler import fresh_seed
from ._samplers import BatchSampler, RandomSampler, SequentialSampler, index_batches
from ._worker import RemoteError, Task, WorkerConfig, worker_main
from .shared_batch import BatchLayout, SharedBatchRing

_MIN_SLOT_BYTES = 64 * 1024
_FALLBACK_SLOT_BYTES = 1 << 20
_GROWTH = 1.25
# Workers hold no state worth saving: a busy one is terminated after this long.
_SHUTDOWN_GRACE_S = 0.25
# How long ending an epoch early waits for the tasks in flight of persistent workers, when
# the loader has no timeout; past it the workers are stopped instead (next epoch starts anew).
_DRAIN_S = 60.0


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

    The arguments are PyTorch's (``torch.utils.data.DataLoader``), with NumPy generators in
    place of ``torch.Generator`` and two of netcl's own (``transform``, ``seed``).

    Batch ``k`` of an epoch holds the same samples, and draws the same random numbers, for a
    given seed and epoch whatever ``num_workers`` is: the order comes from ``(seed, epoch)``,
    ``transform`` gets a generator seeded by ``(seed, epoch, k)``, and per-sample transforms
    (:mod:`netcl.data.transforms`) draw from one seeded by the same triple. Workers write
    batches into a shared-memory ring (:mod:`netcl.data.shared_batch`) instead of pickling them.

    Each ``iter(loader)`` runs one epoch, numbered by a counter that starts at 0 and goes up by
    one per ``iter``; :meth:`set_epoch` picks the number of the next one (and is passed on to a
    sampler or batch sampler that has ``set_epoch``).

    Args:
        dataset: a :class:`~netcl.data.Dataset` (``len`` and integer indexing); one with a
            ``get_batch(indices)`` method is batched through it when ``collate_fn`` is None.
        batch_size: samples per batch (>= 1).
        shuffle: draw a new order every epoch (a :class:`~netcl.data.RandomSampler`).
        sampler: the indices of an epoch (any iterable of ints with ``len``, e.g. a
            :class:`~netcl.data.WeightedRandomSampler`); excludes ``shuffle``.
        batch_sampler: the batches of an epoch (an iterable of index lists, e.g. a
            :class:`~netcl.data.BatchSampler`); excludes ``batch_size``, ``shuffle``,
            ``sampler`` and ``drop_last``.
        num_workers: worker processes; 0 builds batches in this process.
        collate_fn: turns a list of items into a batch; default :func:`default_collate`.
        pin_memory: accepted for PyTorch compatibility. Batches built by workers already live
            in shared memory that the parent hands out without a copy, and the
            :class:`netcl.trainer.Trainer` uploads the next batch on a second queue while a
            step runs, so there is no separate pinning step (see the README).
        drop_last: drop the last batch when it is smaller than ``batch_size``.
        timeout: seconds to wait for one batch before raising; ``None`` or 0 waits as long as
            workers live (a dead worker is reported at once either way).
        worker_init_fn: called as ``worker_init_fn(worker_id)`` first thing in each worker.
        multiprocessing_context: ``"fork"``, ``"spawn"``, ``"forkserver"`` or a context; None is
            the platform default. Under spawn/forkserver everything above must be picklable.
        generator: the seed of the order and of every random draw: an int, a
            :class:`numpy.random.Generator` (the seed is drawn from it once), or None (drawn
            from the OS; kept in ``loader.seed``). ``seed`` is another name for it.
        prefetch_factor: batches in flight per worker (>= 1; default 2). ``prefetch`` is
            another name for it.
        persistent_workers: keep the worker processes (and their shared memory) from one
            epoch to the next instead of starting them every epoch; they stop with
            :meth:`close` or when the loader is garbage-collected.
        transform: ``transform(x, rng) -> x`` applied to the batch's inputs (the batch itself,
            or its first element when it is a tuple), e.g. an :mod:`netcl.data.augment` pipeline.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: ``batch_size`` < 1, ``num_workers`` < 0, ``prefetch_factor`` < 1,
            ``sampler`` with ``shuffle``, ``batch_sampler`` with batch options, both names of
            one option given, and so on.

    Examples:
        >>> import numpy as np
        >>> from netcl.data import ArrayDataset, DataLoader
        >>> ds = ArrayDataset(np.arange(10, dtype=np.float32), np.arange(10))
        >>> loader = DataLoader(ds, batch_size=4, shuffle=True, generator=0)
        >>> [y.tolist() for _, y in loader]
        [[1, 7, 9, 0], [6, 4, 5, 8], [2, 3]]
        >>> len(loader), loader.epoch
        (3, 1)
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: CollateFn | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float | None = None,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: str | BaseContext | None = None,
        generator: int | np.random.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        transform: BatchTransform | None = None,
        seed: int | None = None,
        prefetch: int | None = None,
    ) -> None:
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise TypeError(
                "DataLoader: dataset must define __len__ and __getitem__, "
                f"got {type(dataset).__name__}"
            )
        self.dataset = dataset
        self.num_workers = _check_int("num_workers", num_workers, 0)
        self.prefetch_factor = _check_int(
            "prefetch_factor", _alias("prefetch_factor", prefetch_factor, "prefetch", prefetch, 2),
            1,
        )
        self.seed = _seed_of(_alias("generator", generator, "seed", seed, None))
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.batch_size: int | None
        self.sampler: Any
        self.batch_sampler: Any
        self._init_sampling(batch_size, sampler, batch_sampler)
        _check_callable("collate_fn", collate_fn)
        _check_callable("transform", transform)
        _check_callable("worker_init_fn", worker_init_fn)
        self.collate_fn = collate_fn
        self.transform = transform
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = _resolve_context(multiprocessing_context)
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or timeout < 0
        ):
            raise ValueError(f"DataLoader: timeout must be None or a number >= 0, got {timeout!r}")
        self.timeout = None if not timeout else float(timeout)
        if not isinstance(pin_memory, bool) or not isinstance(persistent_workers, bool):
            raise TypeError("DataLoader: pin_memory and persistent_workers must be bools, got "
                            f"{pin_memory!r} and {persistent_workers!r}")
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers
        self._epoch = 0
        self._slot_bytes: int | None = None  # guessed at the first epoch with workers, then learnt
        self._pool: _Pool | None = None  # persistent workers, between epochs
        self._pool_finalizer: weakref.finalize[Any, Any] | None = None

    def _init_sampling(self, batch_size: Any, sampler: Any, batch_sampler: Any) -> None:
        """Check the sampling options as PyTorch does and build the batch sampler."""
        if batch_sampler is not None:
            if batch_size != 1 or self.shuffle or sampler is not None or self.drop_last:
                raise ValueError(
                    "DataLoader: batch_sampler is mutually exclusive with batch_size, shuffle, "
                    f"sampler and drop_last, got batch_size={batch_size}, shuffle="
                    f"{self.shuffle}, sampler={sampler!r}, drop_last={self.drop_last}"
                )
            if not hasattr(batch_sampler, "__iter__"):
                raise TypeError("DataLoader: batch_sampler must be an iterable of index lists, "
                                f"got {type(batch_sampler).__name__}")
            self.batch_size, self.sampler = None, None
            self.batch_sampler = batch_sampler
            return
        self.batch_size = _check_int("batch_size", batch_size, 1)
        if sampler is not None:
            if self.shuffle:
                raise ValueError("DataLoader: sampler is mutually exclusive with shuffle (the "
                                 "sampler decides the order)")
            if not hasattr(sampler, "__iter__"):
                raise TypeError("DataLoader: sampler must be an iterable of indices, got "
                                f"{type(sampler).__name__}")
        elif self.shuffle:
            sampler = RandomSampler(self.dataset, generator=self.seed)
        else:
            sampler = SequentialSampler(self.dataset)
        self.sampler = sampler
        self.batch_sampler = BatchSampler(sampler, self.batch_size, self.drop_last)

    @property
    def prefetch(self) -> int:
        """Another name for ``prefetch_factor``."""
        return self.prefetch_factor

    @property
    def generator(self) -> int:
        """The seed that the order and every random draw derive from (also ``seed``)."""
        return self.seed

    @property
    def epoch(self) -> int:
        """The number of the epoch that the next ``iter(loader)`` runs."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter(loader)`` run epoch ``epoch`` (its order and random draws)."""
        self._epoch = _check_int("epoch", epoch, 0)

    def __len__(self) -> int:
        try:
            return len(self.batch_sampler)
        except TypeError:
            inner = self.sampler if self.sampler is not None else self.batch_sampler
            raise TypeError(f"DataLoader: len() needs a sampler or batch sampler with a length, "
                            f"got {type(inner).__name__}") from None

    def __iter__(self) -> LoaderIterator:
        epoch, self._epoch = self._epoch, self._epoch + 1
        set_epoch = getattr(self.batch_sampler, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
        batches = index_batches(self.batch_sampler)
        if self.num_workers == 0 or not batches:
            return _InProcessIterator(self, epoch, batches)
        return _WorkerIterator(self, epoch, batches, self._persistent_pool())

    def _persistent_pool(self) -> _Pool | None:
        """The loader's pool when ``persistent_workers`` (None: the iterator makes its own)."""
        if not self.persistent_workers:
            return None
        pool = self._pool
        if pool is None or not pool.alive():
            if pool is not None:
                _shutdown(pool)
            pool = self._pool = _Pool(owner_pid=os.getpid())
            if self._pool_finalizer is not None:
                self._pool_finalizer.detach()
            self._pool_finalizer = weakref.finalize(self, _shutdown, pool)
        return pool

    def close(self) -> None:
        """Stop persistent workers and free their shared memory (the next epoch starts new
        ones). Without ``persistent_workers`` there is nothing to stop between epochs."""
        if self._pool_finalizer is not None:
            self._pool_finalizer()
        self._pool, self._pool_finalizer = None, None

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the persistent workers alive between epochs (empty otherwise)."""
        pool = self._pool
        return [] if pool is None else [p.pid for p in pool.procs if p.pid is not None]


def _alias(name: str, value: Any, old: str, old_value: Any, default: Any) -> Any:
    if value is not None and old_value is not None:
        raise ValueError(f"DataLoader: {name} and {old} are one option (the second is the old "
                         f"name); give one, got {name}={value!r} and {old}={old_value!r}")
    if value is not None:
        return value
    return default if old_value is None else old_value


def _seed_of(generator: Any) -> int:
    if generator is None:
        return fresh_seed()
    if isinstance(generator, np.random.Generator):
        return int(generator.integers(0, 1 << 63))
    return _check_int("generator (seed)", generator, 0)


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
    """Workers, their pipes and the ring, shared with the finalizers that release them. An
    epoch's iterator owns one; with ``persistent_workers`` the loader owns it across epochs."""

    owner_pid: int
    procs: list[Any] = field(default_factory=list)
    conns: list[connection.Connection] = field(default_factory=list)
    ring: SharedBatchRing | None = None
    outstanding: list[set[int]] = field(default_factory=list)  # batch indices, per worker
    free: deque[int] = field(default_factory=deque)  # ring slots free for the next task
    closed: bool = False
    broken: bool = False  # an epoch ended on an error: stop the workers, not only the epoch
    user: Any = None  # a weak reference to the iterator running an epoch on it

    def alive(self) -> bool:
        """Can serve another epoch (workers not started yet count as alive)."""
        return not (self.closed or self.broken) and all(p.is_alive() for p in self.procs)


def _shutdown(pool: _Pool) -> None:
    if os.getpid() != pool.owner_pid:
        return  # a forked child inherited this object; the parent cleans up
    pool.closed = True
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


def _end_epoch(pool: _Pool, persistent: bool, timeout: float | None) -> None:
    """Release what an epoch held: everything, or (persistent workers) only the tasks still
    in flight, whose replies are read and dropped so the next epoch starts clean."""
    if not persistent or pool.broken or not _drain(pool, timeout):
        _shutdown(pool)
    pool.user = None


def _drain(pool: _Pool, timeout: float | None) -> bool:
    """Wait for the replies to every task in flight and free their slots; False when a
    worker died, failed outside a batch, or did not answer within ``timeout`` (or 60 s)."""
    if os.getpid() != pool.owner_pid or pool.closed:
        return False
    deadline = time.monotonic() + (timeout or _DRAIN_S)
    sentinels = [p.sentinel for p in pool.procs]
    while any(pool.outstanding):
        busy = [c for c, o in zip(pool.conns, pool.outstanding) if o]
        ready = connection.wait([*busy, *sentinels],
                                timeout=max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        for worker, conn in enumerate(pool.conns):
            if conn not in ready:
                continue
            try:
                kind, batch_index, slot, *rest = conn.recv()
            except (EOFError, OSError):
                return False
            if batch_index is None:  # worker_init_fn failed: that worker is gone
                return False
            if kind == "inline" and pool.ring is not None:
                pool.ring.resize(slot, int(rest[1] * _GROWTH))
            pool.outstanding[worker].discard(batch_index)
            pool.free.append(slot)
        if any(s in ready for s in sentinels) and not all(p.is_alive() for p in pool.procs):
            return False
    return True


# Named for how it reads as a cause ("WorkerTraceback: ..."), not as an error of its own.
class WorkerTraceback(Exception):  # noqa: N818
    """Carries a worker's formatted traceback as the ``__cause__`` of the re-raised error."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return "\n\n" + self.text


def _guess_slot_bytes(loader: DataLoader, rows: int) -> int:
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
    return max(_MIN_SLOT_BYTES, _nbytes(item) * rows * factor + _MIN_SLOT_BYTES)


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
    def __init__(self, loader: DataLoader, epoch: int, batches: list[npt.NDArray[np.int64]],
                 pool: _Pool | None = None):
        super().__init__(epoch, batches)
        self._loader = loader
        self._timeout = loader.timeout
        persistent = pool is not None
        if pool is not None and pool.user is not None:
            previous = pool.user()
            if previous is not None:  # a new epoch ends the one still running, as in PyTorch
                previous.close()
        self._pool = pool if pool is not None else _Pool(owner_pid=os.getpid())
        self._finalizer = weakref.finalize(self, _end_epoch, self._pool, persistent,
                                           loader.timeout)
        self._pool.user = weakref.ref(self)
        num_workers = loader.num_workers
        self._ready: dict[int, Any] = {}
        self._in_flight_limit = num_workers * loader.prefetch_factor
        self._sent = 0
        self._pickled = 0
        try:
            if not self._pool.procs:
                if loader._slot_bytes is None:
                    rows = max(len(b) for b in batches)
                    loader._slot_bytes = _guess_slot_bytes(loader, rows)
                ring = SharedBatchRing(num_workers * loader.prefetch_factor, loader._slot_bytes)
                self._pool.ring = ring
                self._pool.free = deque(range(len(ring)))
                self._pool.outstanding = [set() for _ in range(num_workers)]
                self._start_workers(loader)
            if self._pool.ring is None:  # pragma: no cover - set above
                raise RuntimeError("DataLoader: worker pool without a ring")
            self._ring: SharedBatchRing = self._pool.ring
            self._free: deque[int] = self._pool.free
            self._outstanding: list[set[int]] = self._pool.outstanding
            self._dispatch()
        except BaseException:
            self._pool.broken = True
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
            self._pool.broken = True
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
        self._pool.broken = True
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
        self._pool.broken = True
        self.close()
        raise RuntimeError(
            f"DataLoader: worker {worker} (pid {proc.pid}) exited unexpectedly with "
            f"{_describe_exit(proc.exitcode)} {doing} in epoch {self.epoch}; a worker dies like "
            "this when it is killed (for example by the out-of-memory killer) or crashes in "
            "native code"
        )
