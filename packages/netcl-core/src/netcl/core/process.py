"""Process-level safety for OpenCL: exit, Ctrl+C during a stuck kernel, and ``fork``.

The other core modules register what they create here, and this module reacts to the process
events; it imports no other netcl module, so the transport (:mod:`.backend.opencl`), the device
manager (:mod:`.device`) and the buffer pools (:mod:`.memory`) all import it one way.

- :func:`register_queue`: every OpenCL queue (the device manager's and each transport's) is
  finished at interpreter exit, so no command is cut off, and is kept out of a forked child;
- :func:`track_owner`: Python objects that own device buffers (tensors, pools) are snapshotted,
  weakly, before ``fork``;
- :func:`on_fork_in_child`: what a module does in a forked child (the device manager forgets
  its handles and turns OpenCL off there);
- :func:`install_process_hooks` (run once, by the first OpenCL queue): the ``atexit`` finish,
  the ``fork`` handlers and a ``SIGINT`` watchdog: the C-level signal handler wakes a thread
  through ``signal.set_wakeup_fd``; if the process is still alive ``SIGINT_GRACE_S`` seconds
  after Ctrl+C (a kernel is stuck and the main thread never gets back to Python), the watchdog
  calls ``os._exit(130)``;
- :func:`interruptible_finish`: ``queue.finish()`` that still lets Ctrl+C through.

Examples:
    >>> class StandInQueue:  # anything with finish(): what the hooks call on a queue
    ...     def finish(self) -> None:
    ...         pass
    >>> q = StandInQueue()
    >>> register_queue(q)
    >>> register_queue(q)  # registering twice keeps one entry
    >>> sum(r is q for r in registered_queues())
    1
    >>> interruptible_finish(q, timeout=5.0)
    True
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any

__all__ = [
    "SIGINT_GRACE_S",
    "install_process_hooks",
    "interruptible_finish",
    "on_fork_in_child",
    "register_queue",
    "registered_queues",
    "track_owner",
]

#: Seconds a Ctrl+C may wait for the main thread before the watchdog exits the process.
SIGINT_GRACE_S = 3.0

# NOTE [ Fork safety ]
# A forked child shares the parent's driver objects but not the driver's threads: releasing a
# parent's buffer or queue there can hang or corrupt the parent's device state, and drivers such
# as PoCL cannot run at all after fork. So before fork every live queue and every buffer owner is
# snapshotted; the child keeps that snapshot referenced forever (its objects are never released,
# so the driver is never touched), forgets the registered queues, and runs the callbacks given to
# on_fork_in_child (the device manager's: forget every handle, run on NumPy), keeping what they
# return alive as well.
#
# CommandQueue and Buffer objects cannot be weakly referenced: queues are held strongly (there
# are few, and the device handles keep them alive anyway); buffers are reached through the
# Python objects that own them (tensors, pools), which are tracked weakly.
_queues: list[Any] = []
_owners: weakref.WeakSet[Any] = weakref.WeakSet()
_fork_child_callbacks: list[Callable[[], object]] = []
_fork_snapshot: list[Any] = []
_inherited: list[Any] = []  # the parent's objects, kept alive forever in a forked child
_hooks_lock = threading.Lock()
_hooks_installed = False


def register_queue(queue: Any) -> None:
    """Track ``queue`` (anything with ``finish()``) for the exit finish and the fork snapshot.

    A queue registered twice is tracked once. See the module's example.
    """
    with _hooks_lock:
        if not any(q is queue for q in _queues):
            _queues.append(queue)


def registered_queues() -> list[Any]:
    """The queues tracked now (a copy), in registration order."""
    with _hooks_lock:
        return list(_queues)


def track_owner(owner: Any) -> None:
    """Track an object that owns device buffers (a Tensor, a pool), weakly, for the fork
    snapshot: a forked child keeps it alive, so it never releases the parent's buffers.

    Examples:
        >>> class Owner:
        ...     pass
        >>> track_owner(Owner())  # dropped at once: the tracking is weak
    """
    _owners.add(owner)


def on_fork_in_child(callback: Callable[[], object]) -> None:
    """Run ``callback()`` in a child process right after ``fork``, once the hooks are installed.

    Callbacks run in registration order. Whatever one returns (the parent's objects it stopped
    referencing, say) is kept referenced for the rest of the child's life, so the child never
    releases a driver object of its parent. A callback that raises is reported as a
    ``RuntimeWarning`` and the others still run.

    Examples:
        >>> forgotten: list[object] = []
        >>> on_fork_in_child(lambda: forgotten)  # runs only in a forked child
    """
    with _hooks_lock:
        _fork_child_callbacks.append(callback)


def interruptible_finish(queue: Any, timeout: float = 30.0) -> bool:
    """``queue.finish()`` in a worker thread, polled every 10 ms so SIGINT still gets through.

    Returns True when the queue drained.

    Raises:
        TimeoutError: the queue did not drain within ``timeout`` seconds.

    Examples:
        >>> class SlowQueue:
        ...     def finish(self) -> None:
        ...         time.sleep(0.2)
        >>> try:
        ...     interruptible_finish(SlowQueue(), timeout=0.01)
        ... except TimeoutError as err:
        ...     print(err)
        interruptible_finish: queue did not finish within 0.01 s (a kernel may be stuck)
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


def install_process_hooks() -> None:
    """Install the ``atexit`` finish, the ``fork`` handlers and the SIGINT watchdog, once.

    The first OpenCL queue calls it (the device manager when it makes a handle, the transport
    when it is built); later calls do nothing. The watchdog is installed only from the main
    thread, and not where the application has its own SIGINT handler or uses
    ``signal.set_wakeup_fd`` (asyncio).

    Examples:
        >>> install_process_hooks()
        >>> install_process_hooks()  # the second call does nothing
    """
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


# -- the hooks ------------------------------------------------------------------------------


def _finish_all_queues() -> None:
    for queue in list(_queues):
        with contextlib.suppress(Exception):
            queue.finish()


def _before_fork() -> None:
    _fork_snapshot[:] = [*_queues, *list(_owners)]


def _after_fork_in_parent() -> None:
    _fork_snapshot.clear()


def _after_fork_in_child() -> None:
    global _hooks_lock
    # Another thread may have held the lock at fork time; in the child it would never be freed.
    _hooks_lock = threading.Lock()
    _inherited.extend(_fork_snapshot)
    _fork_snapshot.clear()
    _queues.clear()
    for callback in list(_fork_child_callbacks):
        try:
            _inherited.append(callback())
        except Exception as exc:
            warnings.warn(
                f"netcl: a fork-child hook ({getattr(callback, '__qualname__', callback)!s}) "
                f"failed in process {os.getpid()}: {exc!r}",
                RuntimeWarning,
                stacklevel=1,
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
