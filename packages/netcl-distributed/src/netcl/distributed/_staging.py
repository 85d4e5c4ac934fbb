"""Host staging that is made once and reused: device<->host copies straight into its slices.

# NOTE [ Persistent host staging ]
The collectives run on host arrays, so an OpenCL tensor's data goes through host memory. Going
through ``Tensor.to_host`` made a new NumPy array per tensor per step, and the flat messages and
their write-back made more. Here the host arrays are made once per layout (a gradient bucket's
flat array, a dtype's flat array of broadcast buffers, a pool of arrays per shape and dtype for
the single-tensor collectives) and every step copies each tensor straight into its slice with
a non-blocking ``enqueue_copy``, waits once for all of them before the reduction, and copies
the result back from the same slices (non-blocking again, one wait). On the NumPy backend the
tensor's own array is copied into the slice and back, with no temporary.

The copies are netcl-core's ``download_into``/``upload_from``/``wait_events`` (no PyOpenCL
here); everything else in the package goes through :func:`download`, :func:`upload` and
:func:`wait`. While a graph capture or profile records (a recorder is
active) the copies go through ``Tensor.to_host``/``copy_from_host`` as before, so the recorder
sees them.

Pinned host memory (an ``ALLOC_HOST_PTR`` buffer mapped once) was not used: on the PoCL CPU
device a 32 MB copy into a mapped one took as long as into a NumPy array or longer (median of
20: device to host 8.6 ms against 7.9 ms, host to device 8.3 ms against 8.1 ms; a second run
9.2 against 8.4 and 9.0 against 8.9).
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from netcl.core.dtypes import numpy_dtype
from netcl.core.recording import state as recording_state
from netcl.core.tensor import Tensor, copy_from_host
from netcl.core.transfer import download_into, upload_from, wait_events

__all__ = ["FlatStaging", "StagingPool", "download", "own_array", "upload", "wait"]


def _direct(t: Tensor, host: np.ndarray[Any, Any]) -> bool:
    """Whether ``t`` and ``host`` can be copied byte for byte (same dtype and size, nothing
    recording); otherwise the copy goes through ``to_host``/``copy_from_host`` (casting)."""
    return (host.dtype == numpy_dtype(t.dtype) and host.size == t.size
            and host.flags.c_contiguous and recording_state.recorder is None)


def own_array(t: Tensor) -> np.ndarray[Any, Any] | None:
    """The NumPy-backend tensor's own storage in its shape (what ``to_host`` returns there,
    without its check for a recorder); ``None`` on OpenCL or while a recorder is active."""
    if t.array is None or recording_state.recorder is not None:
        return None
    t.wait()
    return t.array.reshape(t.shape)


def download(t: Tensor, out: np.ndarray[Any, Any]) -> Any:
    """Start copying ``t``'s data into ``out`` (a C-contiguous host array of ``t.size``
    elements, any shape, cast where the dtypes differ); returns the event to :func:`wait` for,
    ``None`` when it is done.

    Examples:
        >>> from netcl.core.device import manager
        >>> t = Tensor.from_host(manager.default("cpu").queue, [1.0, 2.0, 3.0])
        >>> out = np.zeros(4, np.float32)
        >>> wait([download(t, out[1:])]); out.tolist()
        [0.0, 1.0, 2.0, 3.0]
    """
    if not _direct(t, out):
        np.copyto(out, np.asarray(t.to_host()).reshape(out.shape), casting="unsafe")
        return None
    return download_into(t, out)


def upload(t: Tensor, src: np.ndarray[Any, Any]) -> Any:
    """Start copying ``src`` (a C-contiguous host array of ``t.size`` elements) into ``t`` in
    place; returns the event to :func:`wait` for (``src`` must not change until then), ``None``
    when it is done.

    Examples:
        >>> from netcl.core.device import manager
        >>> t = Tensor.from_shape(manager.default("cpu").queue, (2,))
        >>> wait([upload(t, np.array([5.0, 6.0], np.float32))]); t.to_host().tolist()
        [5.0, 6.0]
    """
    if not _direct(t, src):
        copy_from_host(t, src.reshape(t.shape))
        return None
    return upload_from(t, src)


def wait(events: Iterable[Any]) -> None:
    """Block until every event (``None`` entries are skipped) has completed."""
    wait_events(events)


class FlatStaging:
    """One flat host array for a list of tensors of one dtype, made again only when their
    sizes or dtype change; :meth:`views` gives each tensor's slice.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> ts = [Tensor.from_host(q, [1.0, 2.0]), Tensor.from_host(q, [[3.0]])]
        >>> staging = FlatStaging()
        >>> views = staging.views(ts)
        >>> wait([download(t, v) for t, v in zip(ts, views)]); staging.flat.tolist()
        [1.0, 2.0, 3.0]
        >>> staging.views(ts)[0].base is views[0].base  # the same array next time
        True
    """

    def __init__(self) -> None:
        self.flat: np.ndarray[Any, Any] = np.empty(0)
        self._key: tuple[Any, ...] = ()
        self._views: list[np.ndarray[Any, Any]] = []

    def views(self, tensors: Sequence[Tensor]) -> list[np.ndarray[Any, Any]]:
        """The 1-D slices of the flat array, one per tensor in order (``tensors`` share a
        dtype)."""
        key = (tensors[0].dtype, *(t.size for t in tensors)) if tensors else ()
        if key != self._key:
            sizes = [int(t.size) for t in tensors]
            self.flat = np.empty(sum(sizes), numpy_dtype(tensors[0].dtype) if tensors else None)
            offsets = np.cumsum([0, *sizes]).tolist()
            self._views = [self.flat[a:b] for a, b in itertools.pairwise(offsets)]
            self._key = key
        return self._views


class StagingPool:
    """Host arrays lent by (shape, dtype) and given back, at most ``limit`` kept (the least
    recently given back go first): a collective on a tensor of a shape seen before stages it
    through an array made for an earlier call.

    An array is lent to one call at a time, so two collectives in flight (``async_op``) never
    share one.

    Examples:
        >>> pool = StagingPool(limit=2)
        >>> a = pool.take((3,), np.dtype(np.float32))
        >>> pool.give(a)
        >>> pool.take((3,), np.dtype(np.float32)) is a
        True
    """

    def __init__(self, limit: int = 8) -> None:
        self.limit = limit
        self._free: OrderedDict[tuple[Any, ...], list[np.ndarray[Any, Any]]] = OrderedDict()
        self._count = 0
        self._lock = threading.Lock()

    def take(self, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
        """A C-contiguous array of ``shape`` and ``dtype`` (contents undefined)."""
        key = (shape, dtype)
        with self._lock:
            free = self._free.get(key)
            if free:
                self._count -= 1
                return free.pop()
        return np.empty(shape, dtype)

    def give(self, array: np.ndarray[Any, Any]) -> None:
        """Hand ``array`` back for a later :meth:`take`."""
        key = (array.shape, array.dtype)
        with self._lock:
            self._free.setdefault(key, []).append(array)
            self._free.move_to_end(key)
            self._count += 1
            while self._count > self.limit:
                oldest_key, oldest = next(iter(self._free.items()))
                oldest.pop(0)
                self._count -= 1
                if not oldest:
                    del self._free[oldest_key]
