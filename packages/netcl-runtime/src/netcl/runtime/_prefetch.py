"""``Prefetcher``: upload the next batches on a second command queue while the device computes.

# NOTE [ Two queues, ordered by events ]
# The copies run on a copy queue of the compute queue's context and device, so an upload
# overlaps the kernels of the step before it. Nothing waits on the host; two kinds of events
# order the queues:
# * a batch is handed out only after a barrier on the compute queue that waits for its copies'
#   events: every command enqueued after that (the step) sees the uploaded data;
# * each batch lands in a slot -- device tensors the Prefetcher owns, ``depth + 1`` per batch
#   shape, used round robin -- and a copy into a slot waits for a marker on the compute queue
#   enqueued when the consumer moved past the slot's previous batch (it asks for the next one),
#   so an upload never overwrites data a queued kernel still reads. A new slot's buffer comes
#   from the pool, where a tensor that died may have left it with kernels still queued on the
#   compute queue: its first copy waits for a marker enqueued when it was allocated.
# When the iteration ends the compute queue waits (a barrier) for every copy still in flight,
# so the slots' buffers can go back to the pool behind them.
# So a batch's tensors are valid for the work enqueued before the next batch is asked for; a
# consumer that keeps one longer must copy it. The host arrays are copied once (the producer
# may reuse its arrays): PyOpenCL's copy event holds that copy until the transfer is done.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core import Tensor
from netcl.core.device import CPUQueue, get_active_device
from netcl.core.dtypes import canonical_dtype, numpy_dtype
from netcl.core.recording import pyopencl
from netcl.core.tensor import host_default_dtype

__all__ = ["Prefetcher"]

Batch = Sequence[Any]
Batches = Generator[tuple[Tensor, ...], None, None]


@dataclass
class _Slot:
    tensor: Tensor
    free: Any  # a compute-queue marker: the slot's previous users are done after it
    copy: Any = None  # the event of the copy into it (holds the host data until done)


def _dtype_of(array: np.ndarray[Any, Any], wanted: str | None) -> str:
    """``wanted``, else the rule of ``Tensor.from_host`` (:func:`host_default_dtype`)."""
    if wanted is not None:
        return canonical_dtype(wanted, "Prefetcher")
    return host_default_dtype(array)


class Prefetcher:
    """Device batches from host batches, uploaded ``depth`` batches ahead on a second queue.

    ``prefetcher(batches)`` iterates over ``batches`` (sequences of NumPy arrays, such as a
    :class:`netcl.data.DataLoader`'s ``(x, y)``) and yields tuples of Tensors on ``queue``.
    On an OpenCL device each batch is copied on a copy queue of the same context while the
    work enqueued for the batches before it runs; the compute queue waits for the copy on the
    device (NOTE [ Two queues, ordered by events ]): no host wait. A yielded batch stays valid
    for the work enqueued until the next one is asked for. On the NumPy backend the batches
    pass through (``Tensor.from_host``).

    Args:
        queue: the compute queue (default: the active device's).
        depth: how many batches are uploaded ahead of the one being used (1: double
            buffering).
        dtypes: each array's device dtype (``None`` per entry, or for all: the rule of
            :meth:`Tensor.from_host`).

    Raises:
        ValueError: ``depth < 1``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import manager
        >>> pre = Prefetcher(manager.default("cpu").queue, dtypes=("float32", None))
        >>> host = [(np.ones((2, 3)), np.arange(2)), (np.zeros((2, 3)), np.arange(2))]
        >>> [(x.dtype, y.dtype, float(x.to_host().sum())) for x, y in pre(host)]
        [('float32', 'int64', 6.0), ('float32', 'int64', 0.0)]
    """

    def __init__(self, queue: Any = None, depth: int = 1,
                 dtypes: Sequence[str | None] | None = None) -> None:
        if depth < 1:
            raise ValueError(f"Prefetcher: depth must be >= 1, got {depth}")
        self.queue = queue if queue is not None else get_active_device().queue
        self.depth = depth
        self.dtypes = tuple(dtypes) if dtypes is not None else None
        self._copy_queue: Any = None
        self._slots: dict[tuple[int, tuple[int, ...], str], list[_Slot]] = {}
        self._turn: dict[tuple[int, tuple[int, ...], str], int] = {}

    def __call__(self, batches: Iterable[Batch]) -> Batches:
        if isinstance(self.queue, CPUQueue):
            return self._pass_through(batches)
        return self._prefetch(batches)

    def _wanted(self, i: int) -> str | None:
        return None if self.dtypes is None or i >= len(self.dtypes) else self.dtypes[i]

    def _pass_through(self, batches: Iterable[Batch]) -> Batches:
        for batch in batches:
            yield tuple(Tensor.from_host(self.queue, np.asarray(a),
                                         dtype=_dtype_of(np.asarray(a), self._wanted(i)))
                        for i, a in enumerate(batch))

    def _prefetch(self, batches: Iterable[Batch]) -> Batches:
        cl = pyopencl()
        if self._copy_queue is None:
            self._copy_queue = cl.CommandQueue(self.queue.context, self.queue.device)
        source = iter(batches)
        ahead: deque[list[_Slot]] = deque()
        used: list[_Slot] = []  # the batch handed out last
        try:
            while True:
                if used:  # the consumer moved on: the last batch's slots are free after this
                    marker = cl.enqueue_marker(self.queue)
                    for slot in used:
                        slot.free = marker
                while len(ahead) <= self.depth:
                    batch = next(source, None)
                    if batch is None:
                        break
                    ahead.append(self._upload(batch))
                if not ahead:
                    return
                used = ahead.popleft()
                cl.enqueue_barrier(self.queue, wait_for=[s.copy for s in used if s.copy] or None)
                yield tuple(slot.tensor for slot in used)
        finally:
            marker = cl.enqueue_marker(self.queue)
            for slot in used:
                slot.free = marker
            # the slots' buffers may return to the pool (on this queue) behind these copies
            pending = [s.copy for slots in self._slots.values() for s in slots if s.copy]
            cl.enqueue_barrier(self.queue, wait_for=pending or None)

    def _upload(self, batch: Batch) -> list[_Slot]:
        cl = pyopencl()
        slots = []
        for i, array in enumerate(batch):
            host = np.asarray(array)
            dtype = _dtype_of(host, self._wanted(i))
            slot = self._slot(i, host.shape, dtype)
            data = np.array(host, dtype=numpy_dtype(dtype), order="C", copy=True)
            slot.copy = None
            if data.size:
                slot.copy = cl.enqueue_copy(self._copy_queue, slot.tensor.buffer, data,
                                            is_blocking=False, wait_for=[slot.free])
            slots.append(slot)
        self._copy_queue.flush()
        return slots

    def _slot(self, i: int, shape: tuple[int, ...], dtype: str) -> _Slot:
        key = (i, shape, dtype)
        ring = self._slots.setdefault(key, [])
        turn = self._turn.get(key, 0)
        self._turn[key] = turn + 1
        if len(ring) <= self.depth:
            tensor = Tensor.from_shape(self.queue, shape, dtype, fill=None)
            tensor.persistent = True
            ring.append(_Slot(tensor, pyopencl().enqueue_marker(self.queue)))
            return ring[-1]
        return ring[turn % len(ring)]

