"""The OpenCL transport: async/pinned/zero-copy uploads, downloads, and process-level safety.

Process-level behaviour, installed once when the first :class:`OpenCLBackend` is made:

- ``atexit`` finishes every registered queue so no command is cut off at interpreter exit;
- a ``SIGINT`` watchdog: the C-level signal handler wakes a thread through
  ``signal.set_wakeup_fd``; if the process is still alive 3 s after Ctrl+C (a kernel is stuck and
  the main thread never gets back to Python), it calls ``os._exit(130)``;
- fork safety: before ``fork`` every live queue is snapshotted; the child keeps those objects
  referenced forever, so it never releases (and so never touches) the parent's driver objects,
  and it forgets the parent's device handles.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import signal
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._cl import cl
from ..dtypes import numpy_dtype
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

__all__ = [
    "HostUpload",
    "OpenCLBackend",
    "install_process_hooks",
    "interruptible_finish",
    "register_queue",
    "track_owner",
]

SIGINT_GRACE_S = 3.0


def _env_flag(name: str, default: str) -> bool:
    return os.environ.get(name, default).strip().lower() not in ("0", "false", "no", "off", "")


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
            async_copy = _env_flag("NETCL_ASYNC_H2D", "1")
        if use_pinned is None:
            use_pinned = _env_flag("NETCL_PINNED_H2D", "1")
        if self._retired:
            self._purge_retired()
        if self.integrated and pool is None:
            private = aligned_host_copy(host)
            buffer = create_zero_copy_buffer(self.context, private)
            return HostUpload(buffer, None, None, private, None)
        lease = (pool or get_persistent_pool(self.queue)).allocate(host.nbytes)
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


def interruptible_finish(queue: Any, timeout: float = 30.0) -> bool:
    """``queue.finish()`` in a worker thread, polled every 10 ms so SIGINT still gets through.

    Returns True when the queue drained.

    Raises:
        TimeoutError: the queue did not drain within ``timeout`` seconds.
    """
    worker = threading.Thread(target=queue.finish, name="netcl-finish", daemon=True)
    worker.start()
    deadline = time.monotonic() + timeout
    while worker.is_alive():
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"interruptible_finish: queue did not finish within {timeout} s "
                f"(a kernel may be stuck)"
            )
        worker.join(0.01)
    return True


# -- process-level hooks --------------------------------------------------------------------

# CommandQueue and Buffer objects cannot be weakly referenced: queues are held strongly (there
# are few, and the device handles keep them alive anyway); buffers are reached through the
# Python objects that own them (tensors, pools), which are tracked weakly.
_queues: list[Any] = []
_owners: weakref.WeakSet[Any] = weakref.WeakSet()
_fork_snapshot: list[Any] = []
_inherited: list[Any] = []  # parent's objects, kept alive forever in a forked child
_hooks_lock = threading.Lock()
_hooks_installed = False


def register_queue(queue: Any) -> None:
    """Track a queue for the atexit finish and the fork snapshot."""
    with _hooks_lock:
        if not any(q is queue for q in _queues):
            _queues.append(queue)


def track_owner(owner: Any) -> None:
    """Track a Python object that owns device buffers (a Tensor, a pool) for the fork snapshot."""
    _owners.add(owner)


def _finish_all_queues() -> None:
    for queue in list(_queues):
        with contextlib.suppress(Exception):
            queue.finish()


def _before_fork() -> None:
    _fork_snapshot[:] = [*_queues, *list(_owners)]


def _after_fork_in_parent() -> None:
    _fork_snapshot.clear()


def _after_fork_in_child() -> None:
    # The child must never release the parent's driver objects: keep them referenced forever.
    _inherited.extend(_fork_snapshot)
    _fork_snapshot.clear()
    _queues.clear()
    from .. import device

    # Drivers such as PoCL cannot be used again in a forked child (their threads are gone):
    # the child keeps the parent's handles alive, forgets them, and runs on NumPy.
    _inherited.append(list(device.manager._handles.values()))
    device.manager.reset()
    device.disable_opencl(
        "this process was forked after OpenCL was initialised in its parent; OpenCL drivers "
        "cannot be used after fork: use the NumPy backend here, or start the process with "
        "multiprocessing's 'spawn' context"
    )


_sigints_handled = [0]  # SIGINTs that reached the Python-level handler


def _on_sigint(signum: int, frame: Any) -> None:
    _sigints_handled[0] += 1
    signal.default_int_handler(signum, frame)


def _watchdog(read_fd: int) -> None:
    received = 0
    while True:
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        if not data:
            return
        received += data.count(int(signal.SIGINT))
        if received > _sigints_handled[0]:
            # The main thread normally turns SIGINT into KeyboardInterrupt at once. If it has
            # not within the grace window it is stuck in the driver (a long kernel): exit.
            deadline = time.monotonic() + SIGINT_GRACE_S
            while time.monotonic() < deadline:
                if _sigints_handled[0] >= received:
                    break
                time.sleep(0.01)
            else:
                os._exit(130)


def _install_sigint_watchdog() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return  # the application installed its own handler: leave it alone
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    try:
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except ValueError:
        os.close(read_fd)
        os.close(write_fd)
        return
    if previous != -1:  # someone (asyncio) uses the wakeup fd: give it back
        signal.set_wakeup_fd(previous)
        os.close(read_fd)
        os.close(write_fd)
        return
    signal.signal(signal.SIGINT, _on_sigint)
    threading.Thread(target=_watchdog, args=(read_fd,), name="netcl-sigint", daemon=True).start()


def install_process_hooks() -> None:
    global _hooks_installed
    with _hooks_lock:
        if _hooks_installed:
            return
        _hooks_installed = True
    atexit.register(_finish_all_queues)
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )
    _install_sigint_watchdog()
