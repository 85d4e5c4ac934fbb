"""A ring of shared-memory slots through which worker processes hand batches to the parent.

# NOTE [ Shared-memory ring ]
The parent owns every segment: it creates them, names them in each task, and is the only
process that unlinks them, so a worker that is killed can never leave a segment behind. A
worker writes a batch's arrays into the slot named by its task and sends back only a small
:class:`BatchLayout` (dtypes, shapes, offsets, and the nesting of tuples/lists/dicts); the
parent copies the arrays out and reuses the slot for the next task. Slots go back to the end
of the free list, so they are used round-robin.

A batch larger than its slot is sent pickled once, and the parent grows that slot
(:meth:`SharedBatchRing.resize`) so the next batch fits.

Examples:
    >>> import numpy as np
    >>> ring = SharedBatchRing(num_slots=2, slot_bytes=4096)
    >>> layout, arrays = layout_of((np.arange(6.0).reshape(2, 3), np.array([1, 2])))
    >>> write_batch(ring.buffer(0), layout, arrays)
    >>> x, y = read_batch(ring.buffer(0), layout)
    >>> x.tolist(), y.tolist()
    ([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [1, 2])
    >>> ring.close()
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
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
    offset = 0

    def visit(node: Any) -> Any:
        nonlocal offset
        if isinstance(node, np.ndarray) and not node.dtype.hasobject:
            specs.append(ArraySpec(node.dtype, tuple(node.shape), offset))
            arrays.append(node)
            offset = _align(offset + node.nbytes)
            return ("a", len(arrays) - 1)
        if isinstance(node, tuple):
            return ("t", tuple(visit(c) for c in node))
        if isinstance(node, list):
            return ("l", tuple(visit(c) for c in node))
        if isinstance(node, dict):
            return ("d", tuple(node.keys()), tuple(visit(c) for c in node.values()))
        return ("v", node)

    tree = visit(batch)
    return BatchLayout(tree, tuple(specs), offset), arrays


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

    def build(node: Any) -> Any:
        kind = node[0]
        if kind == "a":
            return copies[node[1]]
        if kind == "t":
            return tuple(build(c) for c in node[1])
        if kind == "l":
            return [build(c) for c in node[1]]
        if kind == "d":
            return {k: build(c) for k, c in zip(node[1], node[2], strict=True)}
        return node[1]

    return build(layout.tree)


def _create_segment(nbytes: int) -> shared_memory.SharedMemory:
    size = max(_PAGE, _align(nbytes, _PAGE))
    while True:
        try:
            return shared_memory.SharedMemory(
                name=segment_prefix() + secrets.token_hex(4), create=True, size=size
            )
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue


def _release(shm: shared_memory.SharedMemory, *, unlink: bool) -> None:
    if unlink:
        with contextlib.suppress(FileNotFoundError):
            shm.unlink()
    # BufferError: a view is still exported; the mapping then goes when that view does.
    with contextlib.suppress(BufferError):
        shm.close()


def _buffer(shm: shared_memory.SharedMemory) -> memoryview:
    buf = shm.buf
    if buf is None:
        raise RuntimeError(f"shared_batch: segment {shm.name} is already closed")
    return buf


class SharedBatchRing:
    """The parent's side: ``num_slots`` shared-memory segments it creates, grows and unlinks.

    Args:
        num_slots: how many batches can be in flight at once.
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
        try:
            for _ in range(num_slots):
                self._segments.append(_create_segment(slot_bytes))
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self._segments)

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
        """Replace ``slot`` by a segment of at least ``nbytes`` (a new name; the old is gone)."""
        new = _create_segment(nbytes)
        old, self._segments[slot] = self._segments[slot], new
        _release(old, unlink=True)

    def close(self) -> None:
        """Unlink and close every segment. Safe to call twice."""
        segments, self._segments = self._segments, []
        for shm in segments:
            _release(shm, unlink=True)


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
