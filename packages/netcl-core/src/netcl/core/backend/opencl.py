"""The OpenCL transport: async, pinned and zero-copy uploads, downloads, and buffer leases.

:class:`OpenCLBackend` moves data between the host and one OpenCL queue's device. The
process-level safety around it (the ``atexit`` queue finish, the SIGINT watchdog, fork safety,
:func:`interruptible_finish`) lives in :mod:`netcl.core.process`; the first backend built
registers its queue there and installs those hooks. ``interruptible_finish``,
``install_process_hooks``, ``register_queue`` and ``track_owner`` stay importable from here.

Switches (read through :mod:`netcl.core.env`): ``NETCL_ASYNC_H2D`` (default on: uploads do not
block) and ``NETCL_PINNED_H2D`` (default on: discrete devices upload through a pinned buffer).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._cl import cl
from ..dtypes import numpy_dtype
from ..env import env_flag
from ..memory import (
    BufferHandle,
    BufferPool,
    aligned_host_copy,
    allocation_error,
    create_zero_copy_buffer,
    format_bytes,
    get_persistent_pool,
    get_pinned_pool,
    is_integrated_gpu,
)
from ..process import install_process_hooks, interruptible_finish, register_queue, track_owner
from ..recording import state as recording_state

__all__ = [
    "HostUpload",
    "OpenCLBackend",
    # re-exported from netcl.core.process: their home before the split, as the spec names them
    "install_process_hooks",
    "interruptible_finish",
    "register_queue",
    "track_owner",
]


class HostUpload(NamedTuple):
    """What an upload leaves behind until the tensor waits on it."""

    buffer: Any
    event: Any
    pending_release: BufferHandle | None
    host_ref: np.ndarray[Any, Any] | None
    pool_handle: BufferHandle | None


class OpenCLBackend:
    """Moves data between host and one OpenCL queue's device.

    A tensor larger than the device's largest buffer (``CL_DEVICE_MAX_MEM_ALLOC_SIZE``) raises
    ``MemoryError`` naming its size and the device's limits before anything is allocated.

    Args:
        queue: the ``pyopencl.CommandQueue`` every transfer is enqueued on.
    """

    name = "cl"

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.context = queue.context
        self.integrated = is_integrated_gpu(queue)
        device = queue.device
        self.max_alloc = int(device.max_mem_alloc_size)
        self.global_mem = int(device.global_mem_size)
        # Zero-copy buffers retired by dead tensors, with the marker event after which no
        # queued command can still use them (their host memory must outlive those commands).
        self._retired: list[tuple[Any, Any, Any]] = []
        register_queue(queue)
        install_process_hooks()

    def from_host(
        self,
        host: np.ndarray[Any, Any],
        async_copy: bool | None = None,
        use_pinned: bool | None = None,
        pool: BufferPool | None = None,
    ) -> HostUpload:
        """Upload a C-contiguous array (already of the target dtype).

        Integrated devices get a zero-copy ``USE_HOST_PTR`` buffer over a private copy of
        ``host``; discrete ones a pooled buffer filled by a (by default non-blocking) copy,
        routed through the pinned pool when ``use_pinned``.
        """
        self._check_fits(host.shape, host.dtype.name, host.nbytes)
        if async_copy is None:
            async_copy = env_flag("NETCL_ASYNC_H2D", True)
        if use_pinned is None:
            use_pinned = env_flag("NETCL_PINNED_H2D", True)
        if self._retired:
            self._purge_retired()
        if self.integrated and pool is None:
            private = aligned_host_copy(host)
            buffer = create_zero_copy_buffer(self.context, private)
            recorder = recording_state.recorder
            if recorder is not None:
                recorder.constant(self.queue, buffer, private)
            return HostUpload(buffer, None, None, private, None)
        lease = (pool or get_persistent_pool(self.queue)).allocate(host.nbytes)
        recorder = recording_state.recorder
        if recorder is not None:  # a graph capture or a profile: the recorder copies (or not)
            recorder.upload(self.queue, lease.buffer, host, 0)
            return HostUpload(lease.buffer, None, None, None, lease)
        if use_pinned:
            pinned = get_pinned_pool(self.queue).allocate(host.nbytes)
            mapped, map_event = cl().enqueue_map_buffer(
                self.queue, pinned.buffer, cl().map_flags.WRITE, 0, (host.nbytes,), np.uint8
            )
            map_event.wait()
            mapped[:] = host.reshape(-1).view(np.uint8)
            mapped.base.release(self.queue)
            event = cl().enqueue_copy(
                self.queue, lease.buffer, pinned.buffer, byte_count=host.nbytes
            )
            if not async_copy:
                event.wait()
                pinned.release()
                return HostUpload(lease.buffer, None, None, None, lease)
            return HostUpload(lease.buffer, event, pinned, None, lease)
        event = cl().enqueue_copy(self.queue, lease.buffer, host, is_blocking=not async_copy)
        if not async_copy:
            return HostUpload(lease.buffer, None, None, None, lease)
        return HostUpload(lease.buffer, event, None, host, lease)

    def retire(self, buffer: Any, host_memory: Any) -> None:
        """Keep a zero-copy buffer and its host memory alive until the queue passes this point.

        A tensor that dies while a kernel using its zero-copy buffer is still queued must not
        free the host memory under it.
        """
        marker = cl().enqueue_marker(self.queue)
        self._retired.append((marker, buffer, host_memory))
        if len(self._retired) > 64:
            self._purge_retired()

    def _purge_retired(self) -> None:
        complete = cl().command_execution_status.COMPLETE
        keep = 0
        for i, (marker, _, _) in enumerate(self._retired):
            if marker.command_execution_status != complete:
                keep = i
                break
        else:
            keep = len(self._retired)
        del self._retired[:keep]

    def from_shape(
        self,
        shape: Sequence[int],
        dtype: str,
        fill: float | None = 0,
        pool: BufferPool | None = None,
    ) -> BufferHandle:
        """Lease a buffer for ``shape`` of ``dtype`` from ``pool`` (the persistent pool by
        default), filled with ``fill``.

        ``fill=None`` leaves the buffer uninitialized (what ops use for outputs).
        """
        nbytes = math.prod(shape) * numpy_dtype(dtype).itemsize
        self._check_fits(shape, dtype, nbytes)
        lease = (pool or get_persistent_pool(self.queue)).allocate(nbytes)
        if fill is not None and nbytes:
            pattern = np.array([fill], dtype=numpy_dtype(dtype))
            recorder = recording_state.recorder
            if recorder is not None:
                recorder.fill(self.queue, lease.buffer, pattern, 0, nbytes)
            else:
                cl().enqueue_fill_buffer(self.queue, lease.buffer, pattern, 0, nbytes)
        return lease

    def _check_fits(self, shape: Sequence[int], dtype: str, nbytes: int) -> None:
        if nbytes > self.max_alloc:
            raise allocation_error(
                shape, dtype, f"cl:{self.queue.device.name.strip()}",
                f"one buffer there holds at most {format_bytes(self.max_alloc)} "
                f"(CL_DEVICE_MAX_MEM_ALLOC_SIZE), and its global memory is "
                f"{format_bytes(self.global_mem)}",
            )

    def to_host(
        self, buffer: Any, shape: Sequence[int], dtype: str, offset: int = 0
    ) -> np.ndarray[Any, Any]:
        """Blocking download into a new array."""
        out, _ = self.to_host_async(buffer, shape, dtype, offset, blocking=True)
        return out

    def to_host_async(
        self,
        buffer: Any,
        shape: Sequence[int],
        dtype: str,
        offset: int = 0,
        blocking: bool = False,
    ) -> tuple[np.ndarray[Any, Any], Any]:
        """Start a download; returns the destination array and the event marking completion."""
        out = np.empty(tuple(shape), dtype=numpy_dtype(dtype))
        if out.size == 0:
            return out, None
        event = cl().enqueue_copy(
            self.queue, out, buffer, src_offset=offset * out.itemsize, is_blocking=blocking
        )
        return out, event

    def wait(self, event: Any) -> None:
        """Block on ``event`` if there is one."""
        if event is not None:
            event.wait()

    def reshape(self, buffer: Any, shape: Sequence[int]) -> Any:
        """Reshape is metadata only on this backend: the same buffer."""
        return buffer
