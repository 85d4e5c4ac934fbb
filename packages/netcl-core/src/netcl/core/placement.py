"""Where a tensor goes: ``device=`` arguments, ``Tensor.to(device)`` and the default device.

A *device* argument is anything the PyTorch-style surface accepts: ``None`` (the active
device), a selector string as :class:`~netcl.core.device.DeviceManager` reads it (``"cpu"`` or
``"numpy"`` for the NumPy backend, ``"cl"``, ``"gpu"``, ``"cl:P:D"``, ``"auto"``, or a name
fragment such as ``"pthread"``), a :class:`~netcl.core.device.DeviceHandle`, a
``pyopencl.Device`` (what ``Tensor.device`` gives, so ``x.to(y.device)`` works), or a queue.

The default device (what ``None`` means) is, in order: the innermost
``with netcl.core.device.device(...)`` block of the thread, then :func:`set_default_device`'s
choice, then the ``NETCL_DEVICE`` environment variable, then ``"auto"`` (a GPU, then an
accelerator, then an OpenCL CPU device, then NumPy). :func:`set_default_device` sets
``NETCL_DEVICE`` for this process (and the processes it starts), which is what ``auto`` reads.

Examples:
    >>> handle = device("cpu")
    >>> handle.backend, resolve_queue("cpu") is handle.queue, resolve_queue(handle.queue).backend
    ('cpu', True, 'cpu')
"""

from __future__ import annotations

import os
from typing import Any

from .device import CPUQueue, DeviceHandle, get_active_device, manager

__all__ = ["device", "get_default_device", "resolve_queue", "set_default_device"]


def device(spec: Any = "auto") -> DeviceHandle:
    """The :class:`~netcl.core.device.DeviceHandle` a device argument names (``netcl.device``).

    Raises:
        ValueError: an unknown selector, or an argument that is not a device.
        RuntimeError: the selector matches no usable device on this machine.
    """
    if isinstance(spec, DeviceHandle):
        return spec
    if spec is None:
        return get_active_device()
    if not isinstance(spec, str):
        for handle in manager.all_handles() if hasattr(spec, "platform") else ():
            if handle.cl_device == spec:  # a pyopencl.Device: what Tensor.device gives
                return handle
        raise ValueError(f"device: expected a selector string, a DeviceHandle, a "
                         f"pyopencl.Device or None, got {type(spec).__name__} {spec!r}")
    found = manager.default(spec)
    if found is None:
        raise RuntimeError(f"device: no usable device matches {spec!r} on this machine; "
                           f"devices: {', '.join(str(h) for h in manager.all_handles())}")
    return found


def resolve_queue(spec: Any, op: str = "device") -> Any:
    """The queue a device argument of ``op`` names (see the module docstring).

    Raises:
        ValueError: an unknown selector or an argument that is not a device (named with ``op``).
        RuntimeError: the selector matches no usable device.
    """
    if spec is None:
        return get_active_device().queue
    if isinstance(spec, CPUQueue) or (not isinstance(spec, (str, DeviceHandle))
                                      and hasattr(spec, "context") and hasattr(spec, "device")):
        return spec  # a queue already
    try:
        return device(spec).queue
    except ValueError as err:
        raise ValueError(f"{op}: {err}") from None


def set_default_device(spec: Any) -> DeviceHandle:
    """Make ``spec`` the device that ``None`` (and ``"auto"``) means from now on.

    Returns the chosen handle. A ``with netcl.core.device.device(...)`` block still wins inside
    it. The choice is stored in ``NETCL_DEVICE`` (so worker processes inherit it).

    Raises:
        ValueError, RuntimeError: as :func:`device`.

    Examples:
        >>> import os
        >>> saved = os.environ.get("NETCL_DEVICE")
        >>> set_default_device("cpu").backend, get_default_device().backend
        ('cpu', 'cpu')
        >>> _ = os.environ.pop("NETCL_DEVICE") if saved is None else os.environ.update(
        ...     NETCL_DEVICE=saved)
    """
    handle = device(spec)
    os.environ["NETCL_DEVICE"] = _selector(handle)
    return handle


def get_default_device() -> DeviceHandle:
    """The device ``None`` means now (the thread's active device)."""
    return get_active_device()


def _selector(handle: DeviceHandle) -> str:
    """A ``NETCL_DEVICE`` value naming exactly ``handle``: ``cpu`` or ``cl:P:D``."""
    if handle.backend == "cpu":
        return "cpu"
    platforms: list[Any] = []
    devices = manager.discover()
    for platform, _ in devices:
        if platform not in platforms:
            platforms.append(platform)
    for p_index, platform in enumerate(platforms):
        on_platform = [d for p, d in devices if p == platform]
        for d_index, dev in enumerate(on_platform):
            if dev == handle.cl_device:
                return f"cl:{p_index}:{d_index}"
    raise RuntimeError(f"set_default_device: {handle} is not among this process's devices")
