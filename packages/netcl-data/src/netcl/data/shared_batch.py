"""A ring of shared-memory slots through which worker processes hand batches to the parent.

# NOTE [ Shared-memory ring ]
The parent owns every segment: it creates them, names them in each task, and is the only
process that unlinks them, so a worker that is killed can never leave a segment behind. A
worker writes a batch's arrays into the slot named by its task and sends back only a small
:class:`BatchLayout` (dtypes, shapes, offsets, and the nesting of tuples/lists/dicts).

The parent does not copy: :meth:`SharedBatchRing.view_batch` hands out arrays that live in the
slot, and the slot is leased to them until the last of those arrays (or of their views) dies;
then it goes back to the end of the free list, so slots are used round-robin. A caller that
keeps batches just makes the ring grow by one slot per kept batch, never stall. Closing the
ring unlinks every segment at once and unmaps each one when its last array is gone.

A batch larger than its slot is sent pickled once, and the parent grows that slot
(:meth:`SharedBatchRing.resize`) so the next batch fits.

Examples:
    >>> import numpy as np
    >>> ring = SharedBatchRing(num_slots=2, slot_bytes=4096)
    >>> layout, arrays = layout_of((np.arange(6.0).reshape(2, 3), np.array([1, 2])))
    >>> write_batch(ring.buffer(0), layout, arrays)
    >>> x, y = ring.view_batch(0, layout)  # no copy: x and y live in slot 0
    >>> x.tolist(), y.tolist()
    ([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [1, 2])
    >>> del x, y
    >>> ring.reclaim()  # the batch is gone: slot 0 is free again
    [0]
    >>> ring.close()
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
import weakref
from collections import deque
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "SEGMENT_PREFIX",
    "ArraySpec",
    "BatchLayout",
    "SharedBatchRing",
    "SlotAttachments",
    "layout_of",
    "read_batch",
    "segment_prefix",
    "write_batch",
]

#: Every segment this module creates is named ``SEGMENT_PREFIX + <pid>_<8 hex digits>``, the
#: pid (in hex) being the process that owns it (see :func:`segment_prefix`); on Linux it shows
#: up as ``/dev/shm/netcl_data_...``. At most 27 characters keep within macOS's limit of 31.
SEGMENT_PREFIX = "netcl_data_"


def segment_prefix(pid: int | None = None) -> str:
    """The name prefix of the segments owned by process ``pid`` (default: this process)."""
    return f"{SEGMENT_PREFIX}{os.getpid() if pid is None else pid:x}_"


_ALIGN = 64
_PAGE = 4096


@dataclass(frozen=True)
class ArraySpec:
    """Where one array of a batch lives in a slot."""

    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    offset: int


@dataclass(frozen=True)
class BatchLayout:
    """What a worker sends instead of the batch: the nesting and where each array lives.

    ``tree`` is nested tuples: ``("a", k)`` is the k-th array, ``("t", children)`` a tuple,
    ``("l", children)`` a list, ``("d", keys, children)`` a dict, and ``("v", value)`` a small
    value carried inline (a string, a Python number, an object array).
    """

    tree: Any
    arrays: tuple[ArraySpec, ...]
    nbytes: int


def _align(n: int, to: int = _ALIGN) -> int:
    return (n + to - 1) // to * to


def layout_of(batch: Any) -> tuple[BatchLayout, list[npt.NDArray[Any]]]:
    """Plan where each array of ``batch`` goes in a slot.

    Returns:
        The layout and the arrays in slot order (pass both to :func:`write_batch`).
    """
    arrays: list[npt.NDArray[Any]] = []
    specs: list[ArraySpec] = []
    tree = _plan(batch, arrays, specs)
    nbytes = _align(specs[-1].offset + arrays[-1].nbytes) if specs else 0
    return BatchLayout(tree, tuple(specs), nbytes), arrays


# NOTE [ No closures over batches ]
# A recursive nested function is a reference cycle (it holds its own cell), so a closure over the
# batch would keep the batch alive until the cycle collector runs. NumPy's memory then cannot be
# reused for the next batch and every batch pays fresh page faults (measured: about 400 per
# 1.5 MB batch, which doubled a worker's time). The walkers are plain module-level functions.


def _plan(node: Any, arrays: list[npt.NDArray[Any]], specs: list[ArraySpec]) -> Any:
    if isinstance(node, np.ndarray) and not node.dtype.hasobject:
        offset = _align(specs[-1].offset + arrays[-1].nbytes) if specs else 0
        specs.append(ArraySpec(node.dtype, tuple(node.shape), offset))
        arrays.append(node)
        return ("a", len(arrays) - 1)
    if isinstance(node, tuple):
        return ("t", tuple(_plan(c, arrays, specs) for c in node))
    if isinstance(node, list):
        return ("l", tuple(_plan(c, arrays, specs) for c in node))
    if isinstance(node, dict):
        return ("d", tuple(node.keys()), tuple(_plan(c, arrays, specs) for c in node.values()))
    return ("v", node)


def write_batch(buf: memoryview, layout: BatchLayout, arrays: list[npt.NDArray[Any]]) -> None:
    """Copy ``arrays`` into ``buf`` at the offsets of ``layout``.

    Raises:
        ValueError: ``buf`` is smaller than ``layout.nbytes``.
    """
    if layout.nbytes > len(buf):
        raise ValueError(
            f"write_batch: the batch needs {layout.nbytes} bytes but the slot holds {len(buf)}"
        )
    for spec, arr in zip(layout.arrays, arrays, strict=True):
        dst: npt.NDArray[Any] = np.ndarray(spec.shape, spec.dtype, buffer=buf, offset=spec.offset)
        np.copyto(dst, arr, casting="no")
        del dst  # release the export on the mapping at once, so the slot can be closed


def read_batch(buf: memoryview, layout: BatchLayout) -> Any:
    """Rebuild the batch described by ``layout``, copying its arrays out of ``buf``."""
    copies = [
        np.ndarray(spec.shape, spec.dtype, buffer=buf, offset=spec.offset).copy()
        for spec in layout.arrays
    ]
    return _build(layout.tree, copies)


def _build(node: Any, arrays: list[npt.NDArray[Any]]) -> Any:
    kind = node[0]
    if kind == "a":
        return arrays[node[1]]
    if kind == "t":
        return tuple(_build(c, arrays) for c in node[1])
    if kind == "l":
        return [_build(c, arrays) for c in node[1]]
    if kind == "d":
        return {k: _build(c, arrays) for k, c in zip(node[1], node[2], strict=True)}
    return node[1]


def _create_segment(nbytes: int) -> shared_memory.SharedMemory:
    size = max(_PAGE, _align(nbytes, _PAGE))
    while True:
        try:
            return shared_memory.SharedMemory(
                name=segment_prefix() + secrets.token_hex(4), create=True, size=size
            )
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue


def _release(shm: shared_memory.SharedMemory, *, unlink: bool, close: bool = True) -> None:
    if unlink:
        with contextlib.suppress(FileNotFoundError):
            shm.unlink()
    if close:
        # BufferError: a view is still exported; the mapping then goes when that view does.
        with contextlib.suppress(BufferError):
            shm.close()


def _buffer(shm: shared_memory.SharedMemory) -> memoryview:
    buf = shm.buf
    if buf is None:
        raise RuntimeError(f"shared_batch: segment {shm.name} is already closed")
    return buf


class SharedBatchRing:
    """The parent's side: shared-memory slots that it creates, grows, leases and unlinks.

    Args:
        num_slots: how many slots to start with.
        slot_bytes: the starting size of each slot.

    Raises:
        ValueError: ``num_slots`` < 1 or ``slot_bytes`` < 1.
    """

    def __init__(self, num_slots: int, slot_bytes: int) -> None:
        if num_slots < 1:
            raise ValueError(f"SharedBatchRing: num_slots must be >= 1, got {num_slots}")
        if slot_bytes < 1:
            raise ValueError(f"SharedBatchRing: slot_bytes must be >= 1, got {slot_bytes}")
        self._segments: list[shared_memory.SharedMemory] = []
        self._addresses: list[int] = []
        self._leased: set[int] = set()
        self._returned: deque[int] = deque()
        self._closed = False
        try:
            for _ in range(num_slots):
                self.add_slot(slot_bytes)
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self._segments)

    def add_slot(self, nbytes: int) -> int:
        """Create one more slot of at least ``nbytes`` and return its index."""
        shm = _create_segment(nbytes)
        self._segments.append(shm)
        self._addresses.append(_address(shm))
        return len(self._segments) - 1

    def name(self, slot: int) -> str:
        """The segment name of ``slot`` (what a worker attaches to)."""
        return self._segments[slot].name

    def capacity(self, slot: int) -> int:
        """How many bytes ``slot`` holds."""
        return self._segments[slot].size

    def buffer(self, slot: int) -> memoryview:
        """The bytes of ``slot``."""
        return _buffer(self._segments[slot])

    def resize(self, slot: int, nbytes: int) -> None:
        """Replace ``slot`` by a segment of at least ``nbytes`` (a new name; the old is gone).

        Raises:
            RuntimeError: the slot is leased to a batch that is still alive.
        """
        if slot in self._leased:
            raise RuntimeError(f"SharedBatchRing: slot {slot} is leased and cannot be resized")
        new = _create_segment(nbytes)
        old, self._segments[slot] = self._segments[slot], new
        self._addresses[slot] = _address(new)
        _release(old, unlink=True)

    def view_batch(self, slot: int, layout: BatchLayout) -> Any:
        """The batch in ``slot`` as arrays that live in the slot itself: no copy.

        The slot is leased to the batch until every array of it, and every view of those, is
        gone; :meth:`reclaim` then hands the slot back. Closing the ring unlinks a leased
        slot's segment but leaves it mapped for as long as its arrays live.
        """
        if slot in self._leased:
            raise RuntimeError(f"SharedBatchRing: slot {slot} is already leased")
        shm = self._segments[slot]
        lease = _Lease()
        self._leased.add(slot)
        finalizer = weakref.finalize(lease, self._release_lease, slot, shm)
        finalizer.atexit = False  # at exit the OS unmaps; unmapping early could pull memory
        # from under an array that other exit code still reads
        base = self._addresses[slot]
        arrays = [
            np.asarray(_SlotArray(lease, base + spec.offset, spec.dtype, spec.shape))
            for spec in layout.arrays
        ]
        return _build(layout.tree, arrays)

    def _release_lease(self, slot: int, shm: shared_memory.SharedMemory) -> None:
        # Runs when the batch's last array dies, possibly inside the garbage collector: only
        # record the slot here; the owner picks it up with reclaim().
        if self._closed or self._segments[slot] is not shm:
            _release(shm, unlink=False)  # unlinked already; unmap now that nothing points in
            return
        self._leased.discard(slot)
        self._returned.append(slot)

    def reclaim(self) -> list[int]:
        """The slots whose batches have died since the last call."""
        slots = []
        while self._returned:
            slots.append(self._returned.popleft())
        return slots

    @property
    def leased(self) -> int:
        """How many slots hold batches that are still alive."""
        return len(self._leased)

    def close(self) -> None:
        """Unlink every segment, and unmap those that no live batch points into. Idempotent."""
        self._closed = True
        segments, self._segments = self._segments, []
        for slot, shm in enumerate(segments):
            # A leased slot stays mapped until its batch dies (its lease then unmaps it).
            _release(shm, unlink=True, close=slot not in self._leased)
        self._addresses = []


class _Lease:
    """Alive while any array of one batch is: its death hands the slot back."""

    __slots__ = ("__weakref__",)


class _SlotArray:
    """One array of a leased slot, shown to NumPy through ``__array_interface__``.

    NumPy keeps this object as the ``base`` of the array and of every view of it, and this
    object keeps the lease alive: so the slot is not reused while any of them exists.
    """

    __slots__ = ("__array_interface__", "lease")

    def __init__(
        self, lease: _Lease, address: int, dtype: np.dtype[Any], shape: tuple[int, ...]
    ) -> None:
        self.lease = lease
        self.__array_interface__ = {
            "version": 3,
            "shape": shape,
            "typestr": dtype.str,
            "descr": dtype.descr,
            "data": (address, False),
            "strides": None,
        }


def _address(shm: shared_memory.SharedMemory) -> int:
    """Where the segment is mapped in this process (a mapping never moves)."""
    probe = np.frombuffer(_buffer(shm), dtype=np.uint8)
    address = int(probe.ctypes.data)
    del probe  # release the export at once, so the segment can be closed later
    return address


class SlotAttachments:
    """A worker's side: segments attached by name, re-attached when a slot's name changes."""

    def __init__(self) -> None:
        self._attached: dict[int, shared_memory.SharedMemory] = {}

    def buffer(self, slot: int, name: str) -> memoryview:
        """The bytes of segment ``name``, which the parent uses as ``slot``."""
        shm = self._attached.get(slot)
        if shm is None or shm.name != name:
            if shm is not None:
                _release(shm, unlink=False)
            shm = _attach(name)
            self._attached[slot] = shm
        return _buffer(shm)

    def close(self) -> None:
        """Detach from every segment (never unlinks: the parent owns them)."""
        attached, self._attached = self._attached, {}
        for shm in attached.values():
            _release(shm, unlink=False)


def _attach(name: str) -> shared_memory.SharedMemory:
    if sys.version_info >= (3, 13):
        # The parent tracks the segment; a tracked attach would unlink it when a worker exits.
        return shared_memory.SharedMemory(name=name, track=False)
    # Before 3.13 an attach registers the name with the resource tracker that the parent shares
    # (fork and spawn both hand the tracker down); it keeps a set, so this adds nothing.
    return shared_memory.SharedMemory(name=name)
