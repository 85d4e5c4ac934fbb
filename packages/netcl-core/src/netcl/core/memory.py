"""Device-buffer pools: recycle ``cl.Buffer`` objects instead of allocating per call.

``BufferPool`` is unbounded with power-of-two buckets; ``PersistentBufferPool`` has a fixed
bucket table (1 KiB ... 256 MiB), a byte cap and a per-bucket count cap; ``PinnedBufferPool``
hands out ``ALLOC_HOST_PTR`` buffers for fast host transfers. With ``context=None`` the pools
hold host ``bytearray`` blocks, which is how the NumPy backend and the pool tests use them.

Examples:
    >>> pool = BufferPool(None)
    >>> h = pool.allocate(1000)
    >>> h.capacity
    1024
    >>> h.release()
    >>> pool.allocate(900).capacity, pool.stats.hits
    (1024, 1)
"""

from __future__ import annotations

import collections
import math
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._cl import cl
from .env import env_number
from .process import track_owner
from .recording import state as _recording

__all__ = [
    "HOST_ALIGN",
    "aligned_host_copy",
    "allocation_error",
    "BufferHandle",
    "BufferPool",
    "PersistentBufferPool",
    "PinnedBufferPool",
    "PoolStats",
    "create_pinned_buffer",
    "create_zero_copy_buffer",
    "format_bytes",
    "get_persistent_pool",
    "get_pinned_pool",
    "has_svm_support",
    "is_integrated_gpu",
]

_MIN_BUCKET = 1024
_MAX_SIZES = 4096  # distinct request sizes a pool remembers the bucket of
_MAX_BUCKET = 256 * 1024 * 1024


@dataclass
class PoolStats:
    """Counters of one pool.

    Examples:
        >>> PoolStats(hits=3, misses=1).hit_rate
        0.75
    """

    hits: int = 0
    misses: int = 0
    releases: int = 0
    bytes_allocated: int = 0
    bytes_cached: int = 0

    @property
    def hit_rate(self) -> float:
        """Fraction of allocations served from the free lists (0.0 before any)."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class BufferHandle:
    """One lease of a buffer from a pool. ``release()`` gives it back; a second call is harmless.

    Reading ``buffer`` after release raises ``RuntimeError`` (the buffer may already belong to
    another tensor). A handle dropped without release is released by its finalizer.
    """

    __slots__ = ("__weakref__", "_buffer", "_pool", "capacity", "nbytes")

    def __init__(self, buffer: Any, nbytes: int, capacity: int, pool: BufferPool | None) -> None:
        self._buffer = buffer
        self._pool = pool
        self.nbytes = nbytes
        self.capacity = capacity

    @property
    def buffer(self) -> Any:
        """The leased buffer."""
        if self._buffer is None:
            raise RuntimeError(
                f"BufferHandle: use after release (a {self.nbytes}-byte lease was already "
                "returned to its pool)"
            )
        return self._buffer

    @property
    def released(self) -> bool:
        """True once the lease went back to the pool."""
        return self._buffer is None

    def release(self) -> None:
        """Return the buffer to its pool. Idempotent."""
        buffer, self._buffer = self._buffer, None
        if buffer is not None and self._pool is not None:
            self._pool._give_back(buffer, self.capacity)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "released" if self._buffer is None else "leased"
        return f"BufferHandle(nbytes={self.nbytes}, capacity={self.capacity}, {state})"


def format_bytes(nbytes: int) -> str:
    """``nbytes`` in binary units to three significant digits, as NumPy's MemoryError has it.

    Examples:
        >>> format_bytes(4 * 10**12), format_bytes(2 * 1024**3), format_bytes(100)
        ('3.64 TiB', '2 GiB', '100 bytes')
        >>> format_bytes(2**82), format_bytes(1023 * 1024)
        ('4 YiB', '1023 KiB')
    """
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")
    power = min(len(units) - 1, (max(int(nbytes), 1).bit_length() - 1) // 10)
    if power == 0:
        return f"{nbytes} bytes"
    value = nbytes / 1024**power
    return f"{value:.3g} {units[power]}" if value < 999.5 else f"{value:.0f} {units[power]}"


def allocation_error(shape: Any, dtype: str, where: str, reason: str) -> MemoryError:
    """The ``MemoryError`` every backend raises for a tensor it cannot allocate (one wording).

    ``reason`` names the device's limits.

    Examples:
        >>> err = allocation_error((10**12,), "float32", "cpu", "the host has 16 GiB of memory")
        >>> print(err)  # doctest: +NORMALIZE_WHITESPACE
        cannot allocate 3.64 TiB for a tensor of shape (1000000000000,) and dtype float32
        on cpu: the host has 16 GiB of memory
    """
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    return MemoryError(
        f"cannot allocate {format_bytes(nbytes)} for a tensor of shape {tuple(shape)} and dtype "
        f"{dtype} on {where}: {reason}"
    )


def _bucket(nbytes: int) -> int:
    """Smallest power of two >= nbytes, at least 1 KiB."""
    return max(_MIN_BUCKET, 1 << max(0, int(nbytes) - 1).bit_length())


class BufferPool:
    """Power-of-two bucketed pool of device buffers for one context (unbounded).

    Args:
        context: a ``pyopencl.Context``, or ``None`` for host memory blocks.
        flags: ``cl.mem_flags`` for new buffers (default ``READ_WRITE``).
    """

    def __init__(self, context: Any, flags: int | None = None) -> None:
        self.context = context
        self._flags = flags
        self._free: dict[int, list[Any]] = {}
        self._capacities: dict[int, int] = {}  # nbytes -> _bucket_for(nbytes), the sizes seen
        # buffers a replay graph holds (id -> count), and those of them given back meanwhile
        self._held: dict[int, int] = {}
        self._parked: dict[int, tuple[Any, int]] = {}
        # NOTE [ Finalizers inside the pool ]: the garbage collector may run at any allocation,
        # also inside a locked section below, and a BufferHandle it frees gives its buffer back
        # from that same thread. So the lock is reentrant and such a give-back, seeing the pool
        # busy, is queued and done when the section ends (a plain Lock deadlocked a CI run).
        self._lock = threading.RLock()
        self._busy = 0
        self._pending: collections.deque[tuple[Any, int]] = collections.deque()
        self.stats = PoolStats()
        if context is not None:
            track_owner(self)  # a forked child keeps the parent's buffers alive (see .process)

    # -- the policy hooks PersistentBufferPool overrides ----------------------------------

    def _bucket_for(self, nbytes: int) -> int:
        return _bucket(nbytes)

    def _may_cache(self, capacity: int) -> bool:
        return True

    # -- public API --------------------------------------------------------------------------

    def allocate(self, nbytes: int) -> BufferHandle:
        """Lease a buffer of at least ``nbytes`` bytes.

        Raises:
            ValueError: ``nbytes`` is negative or not an integer.
        """
        if type(nbytes) is not int or nbytes < 0:  # a Python int >= 0 skips the checks
            if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)) \
                    or nbytes < 0:
                raise ValueError(
                    f"BufferPool.allocate: nbytes must be an integer >= 0, got {nbytes!r}")
            nbytes = int(nbytes)
        capacity = self._capacities.get(nbytes)
        if capacity is None:  # a pure function of nbytes: worked out once per size
            capacity = self._bucket_for(nbytes)
            if len(self._capacities) < _MAX_SIZES:
                self._capacities[nbytes] = capacity
        stats = self.stats
        with self._lock:
            self._busy += 1
            try:
                free = self._free.get(capacity)
                if free:
                    buffer = free.pop()
                    stats.hits += 1
                    stats.bytes_cached -= capacity
                else:
                    buffer = None
                    stats.misses += 1
                    stats.bytes_allocated += capacity
            finally:
                self._leave()
        handle = BufferHandle(self._new_buffer(capacity) if buffer is None else buffer, nbytes,
                              capacity, self)
        recorder = _recording.recorder
        if recorder is not None:
            recorder.allocated(self, handle)
        return handle

    def hold(self, buffer: Any) -> None:
        """Keep ``buffer`` out of circulation until :meth:`unhold`: if it is free now, or is
        given back later, it waits aside instead of being leased again. Holds count (two holds
        need two unholds). A replay graph holds every buffer it writes or reads.

        Examples:
            >>> pool = BufferPool(None)
            >>> h = pool.allocate(10)
            >>> buf = h.buffer
            >>> pool.hold(buf); h.release()
            >>> pool.allocate(10).buffer is buf
            False
            >>> pool.unhold(buf)
            >>> pool.allocate(10).buffer is buf
            True
        """
        key = id(buffer)
        with self._lock:
            self._busy += 1
            try:
                self._held[key] = self._held.get(key, 0) + 1
                for capacity, free in self._free.items():
                    for i, candidate in enumerate(free):
                        if candidate is buffer:
                            del free[i]
                            self.stats.bytes_cached -= capacity
                            self._parked[key] = (buffer, capacity)
                            return
            finally:
                self._leave()

    def unhold(self, buffer: Any) -> None:
        """Undo one :meth:`hold`; after the last, a buffer given back meanwhile is free again."""
        key = id(buffer)
        with self._lock:
            self._busy += 1
            try:
                count = self._held.get(key, 0)
                if count > 1:
                    self._held[key] = count - 1
                    return
                self._held.pop(key, None)
                parked = self._parked.pop(key, None)
            finally:
                self._leave()
        if parked is not None:
            self._give_back(*parked)

    def _new_buffer(self, capacity: int) -> Any:
        if self.context is None:
            return bytearray(capacity)
        flags = self._flags if self._flags is not None else cl().mem_flags.READ_WRITE
        try:
            return cl().Buffer(self.context, flags, capacity)
        except Exception:
            # Out of device memory: drop what we cache and try once more.
            self.clear()
            return cl().Buffer(self.context, flags, capacity)

    def _give_back(self, buffer: Any, capacity: int) -> None:
        with self._lock:
            if self._busy:  # a finalizer inside this thread's section: after it (NOTE above)
                self._pending.append((buffer, capacity))
                return
            self._busy += 1
            try:
                self._return(buffer, capacity)
            finally:
                self._leave()

    def _return(self, buffer: Any, capacity: int) -> None:
        """Put ``buffer`` back (free, parked or dropped); the caller holds the lock."""
        self.stats.releases += 1
        if self._held and id(buffer) in self._held:
            self._parked[id(buffer)] = (buffer, capacity)
            return
        if self._may_cache(capacity):
            self._free.setdefault(capacity, []).append(buffer)
            self.stats.bytes_cached += capacity
        else:
            self.stats.bytes_allocated -= capacity

    def _leave(self) -> None:
        """End a locked section (the caller holds the lock): the outermost one gives back what
        finalizers queued meanwhile."""
        self._busy -= 1
        while self._pending and not self._busy:
            self._busy += 1
            try:
                self._return(*self._pending.popleft())
            finally:
                self._busy -= 1

    def clear(self) -> None:
        """Drop every cached buffer (the driver frees them)."""
        with self._lock:
            self._busy += 1
            try:
                for capacity, free in self._free.items():
                    self.stats.bytes_allocated -= capacity * len(free)
                self._free.clear()
                self.stats.bytes_cached = 0
            finally:
                self._leave()

    def get_stats(self) -> dict[str, Any]:
        """Counters as a dict: hits, misses, hit_rate, bytes_allocated, bytes_cached, buckets."""
        with self._lock:
            self._busy += 1
            try:
                buckets = {cap: len(free) for cap, free in sorted(self._free.items()) if free}
            finally:
                self._leave()
        return {
            "hits": self.stats.hits,
            "misses": self.stats.misses,
            "hit_rate": self.stats.hit_rate,
            "bytes_allocated": self.stats.bytes_allocated,
            "bytes_cached": self.stats.bytes_cached,
            "buckets": buckets,
        }


class PersistentBufferPool(BufferPool):
    """A bounded pool: buckets 1 KiB ... 256 MiB, ``max_cached_bytes`` and a per-bucket cap.

    Buffers above 256 MiB are never cached. A released buffer that would push the cached bytes
    over ``max_cached_bytes`` (default ``NETCL_MAX_CACHED_GB``, 4 GB), or its bucket over
    ``max_per_bucket`` buffers, is freed instead.

    Examples:
        >>> pool = PersistentBufferPool(None, max_cached_bytes=4096)
        >>> hs = [pool.allocate(2048) for _ in range(3)]
        >>> for h in hs:
        ...     h.release()
        >>> pool.get_stats()["bytes_cached"]
        4096
    """

    def __init__(
        self,
        context: Any,
        max_cached_bytes: int | None = None,
        max_per_bucket: int = 64,
        flags: int | None = None,
    ) -> None:
        super().__init__(context, flags)
        if max_cached_bytes is None:
            max_cached_bytes = int(env_number("NETCL_MAX_CACHED_GB", 4.0, minimum=0.0) * 1e9)
        if max_cached_bytes < 0 or max_per_bucket < 0:
            raise ValueError(
                f"PersistentBufferPool: caps must be >= 0, got max_cached_bytes="
                f"{max_cached_bytes}, max_per_bucket={max_per_bucket}"
            )
        self.max_cached_bytes = int(max_cached_bytes)
        self.max_per_bucket = int(max_per_bucket)

    def _bucket_for(self, nbytes: int) -> int:
        if nbytes > _MAX_BUCKET:
            return int(nbytes)  # exact size, never cached
        return _bucket(nbytes)

    def _may_cache(self, capacity: int) -> bool:
        if capacity > _MAX_BUCKET:
            return False
        if self.stats.bytes_cached + capacity > self.max_cached_bytes:
            return False
        return len(self._free.get(capacity, ())) < self.max_per_bucket


class PinnedBufferPool(BufferPool):
    """Pool of page-locked (``ALLOC_HOST_PTR``) buffers used for host-device transfers."""

    def __init__(self, context: Any) -> None:
        flags = None
        if context is not None:
            mf = cl().mem_flags
            flags = mf.READ_WRITE | mf.ALLOC_HOST_PTR
        super().__init__(context, flags)


_pools_lock = threading.Lock()
_persistent: weakref.WeakKeyDictionary[Any, PersistentBufferPool] = weakref.WeakKeyDictionary()
_pinned: weakref.WeakKeyDictionary[Any, PinnedBufferPool] = weakref.WeakKeyDictionary()
_host_persistent: list[PersistentBufferPool] = []


def get_persistent_pool(queue: Any) -> PersistentBufferPool:
    """The process-wide :class:`PersistentBufferPool` of ``queue``'s context."""
    context = getattr(queue, "context", None)
    with _pools_lock:
        if context is None:
            if not _host_persistent:
                _host_persistent.append(PersistentBufferPool(None))
            return _host_persistent[0]
        pool = _persistent.get(context)
        if pool is None:
            pool = _persistent[context] = PersistentBufferPool(context)
        return pool


def get_pinned_pool(queue: Any) -> PinnedBufferPool:
    """The process-wide :class:`PinnedBufferPool` of ``queue``'s context."""
    context = queue.context
    with _pools_lock:
        pool = _pinned.get(context)
        if pool is None:
            pool = _pinned[context] = PinnedBufferPool(context)
        return pool


def _device_of(queue_or_device: Any) -> Any:
    return getattr(queue_or_device, "device", queue_or_device)


def is_integrated_gpu(queue_or_device: Any) -> bool:
    """True when host and device share memory (iGPUs, APUs and OpenCL CPU devices)."""
    dev = _device_of(queue_or_device)
    if dev is None:
        return True
    try:
        if int(dev.type) & int(cl().device_type.CPU):
            return True
        return bool(dev.host_unified_memory)
    except Exception:
        return False


def has_svm_support(queue_or_device: Any) -> bool:
    """True when the device reports any shared-virtual-memory capability."""
    dev = _device_of(queue_or_device)
    try:
        return bool(int(dev.svm_capabilities))
    except Exception:
        return False


def create_pinned_buffer(context: Any, nbytes: int) -> Any:
    """One ``ALLOC_HOST_PTR | READ_WRITE`` buffer of ``nbytes`` bytes."""
    mf = cl().mem_flags
    return cl().Buffer(context, mf.READ_WRITE | mf.ALLOC_HOST_PTR, max(1, int(nbytes)))


HOST_ALIGN = 128


def aligned_host_copy(host: np.ndarray[Any, Any], align: int = HOST_ALIGN) -> np.ndarray[Any, Any]:
    """A C-contiguous copy of ``host`` whose data starts on an ``align``-byte boundary.

    A ``USE_HOST_PTR`` buffer's device address is the host address on CPU devices, and
    kernels may read it through vector pointers (float8 is 32 bytes, double8 64): NumPy's
    16-byte alignment made PoCL's aligned vector loads fault. 128 bytes covers every vector
    type and the base-address alignment OpenCL devices report.

    Examples:
        >>> a = aligned_host_copy(np.arange(5, dtype=np.float64))
        >>> a.ctypes.data % HOST_ALIGN, a.tolist()
        (0, [0.0, 1.0, 2.0, 3.0, 4.0])
    """
    raw = np.empty(host.nbytes + align, dtype=np.uint8)
    start = -raw.ctypes.data % align
    out: np.ndarray[Any, Any] = raw[start:start + host.nbytes].view(host.dtype)
    out = out.reshape(host.shape)
    out[...] = host
    return out


def create_zero_copy_buffer(context: Any, host_array: np.ndarray[Any, Any]) -> Any:
    """A ``USE_HOST_PTR`` buffer over ``host_array`` (which must stay alive and contiguous)."""
    if not host_array.flags.c_contiguous:
        raise ValueError("create_zero_copy_buffer: host_array must be C-contiguous")
    mf = cl().mem_flags
    return cl().Buffer(context, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=host_array)
