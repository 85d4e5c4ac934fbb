"""Device discovery, the process-wide ``manager`` and the thread-local active device.

Importing this module touches no driver: ``manager`` is constructed here, but platforms are
only enumerated on the first ``discover()`` / ``default()`` call, and each device is probed
(its verdict read from the cache, or one tiny kernel run) the first time it is considered.

Examples:
    >>> from netcl.core.device import manager
    >>> dev = manager.default("cpu")
    >>> dev.backend, dev.device_type
    ('cpu', 'cpu')
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._cl import _INSTALL_HINT, cl, have_pyopencl
from .capabilities import device_type_name
from .device_probe import Verdict, remedy, verdict
from .env import env_flag
from .process import install_process_hooks, on_fork_in_child, register_queue

__all__ = [
    "CPUQueue",
    "DeviceHandle",
    "DeviceManager",
    "device",
    "get_active_device",
    "manager",
]


class CPUQueue:
    """Stand-in queue for the NumPy backend: every call is synchronous, so ``finish`` is a no-op.

    Examples:
        >>> q = CPUQueue()
        >>> q.backend, q.context, q.device
        ('cpu', None, None)
        >>> q.finish()
    """

    backend = "cpu"
    context: Any = None
    device: Any = None

    def finish(self) -> None:
        """Nothing is ever pending on the NumPy backend."""

    def flush(self) -> None:
        """Nothing is ever pending on the NumPy backend."""

    def __repr__(self) -> str:
        return "CPUQueue()"


@dataclass(frozen=True)
class DeviceHandle:
    """Immutable handle on one device: what every other layer needs to run work there.

    ``context`` is ``None`` and ``queue`` a :class:`CPUQueue` on the NumPy backend.
    """

    platform_name: str
    device_name: str
    backend: str
    device_type: str
    context: Any
    queue: Any
    cl_device: Any = None

    @property
    def device(self) -> Any:
        """The ``pyopencl.Device`` (``None`` on the NumPy backend)."""
        return self.cl_device

    def __str__(self) -> str:
        if self.backend == "cpu":
            return "cpu (NumPy)"
        return f"cl:{self.platform_name}:{self.device_name}"


_opencl_disabled: list[str] = []


def disable_opencl(reason: str) -> None:
    """From now on ``auto`` picks NumPy and any OpenCL selector raises ``RuntimeError(reason)``."""
    _opencl_disabled[:] = [reason]


_CPU_HANDLE = DeviceHandle("NumPy", "NumPy", "cpu", "cpu", None, CPUQueue())

# Selection order for "auto": a GPU, then an accelerator, then an OpenCL CPU device.
_AUTO_ORDER = ("gpu", "accel", "cpu", "other")

# NOTE [ Which OpenCL CPU runtime auto prefers ]
# Where both pip runtimes work, PoCL comes before Intel's CPU runtime whatever order the ICD
# loader lists them in: `netcl train` (digits, warm caches, 2-core AMD EPYC Zen 2, session 4)
# ran 0.6-0.7 s per epoch on PoCL and 0.9-1.0 s on Intel's runtime (first epoch with empty
# caches 16.7 vs 15.1 s). Where PoCL cannot compile (CPUs newer than its LLVM) its probe fails
# and Intel's runtime is next.
_CPU_PLATFORM_PREFERENCE = ("portable computing language",)


def _preference(platform: Any) -> int:
    """Rank of a platform among devices of one kind (listed first = 0; others keep order)."""
    name = platform.name.strip().lower()
    return next((i for i, p in enumerate(_CPU_PLATFORM_PREFERENCE) if p in name),
                len(_CPU_PLATFORM_PREFERENCE))


class DeviceManager:
    """Discovers OpenCL platforms and devices and caches one :class:`DeviceHandle` per selector.

    Selectors: ``"auto"`` (GPU, then accelerator, then OpenCL CPU device, then NumPy; the
    ``NETCL_DEVICE`` variable overrides it), ``"gpu"``, ``"cpu"`` / ``"numpy"`` (the NumPy
    backend), ``"cl"`` (the best OpenCL device), ``"cl:P:D"`` (platform and device index), or a
    fragment of a platform or device name (case-insensitive).

    Every OpenCL device is probed before it is offered (:mod:`.device_probe`): kind selectors
    and ``auto`` skip an unusable device (one ``RuntimeWarning`` each, with the reason and what
    to do), and an index or name that points only at unusable devices raises ``RuntimeError``.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._devices: list[tuple[Any, Any]] | None = None
        self._handles: dict[str, DeviceHandle | None] = {}
        self._verdicts: dict[int, Verdict] = {}
        self._warned: set[int] = set()

    def discover(self) -> list[tuple[Any, Any]]:
        """Every ``(platform, device)`` pair the OpenCL drivers report (empty without pyopencl)."""
        with self._lock:
            if self._devices is None:
                found: list[tuple[Any, Any]] = []
                if have_pyopencl():
                    try:
                        platforms = cl().get_platforms()
                    except Exception:  # no ICD loader, or no platform at all
                        platforms = []
                    for platform in platforms:
                        try:
                            devices = platform.get_devices()
                        except Exception:
                            devices = []
                        found.extend((platform, dev) for dev in devices)
                self._devices = found
            return list(self._devices)

    def verdict(self, index: int, refresh: bool = False) -> Verdict:
        """Whether discovered device ``index`` passed the probe (see :mod:`.device_probe`)."""
        with self._lock:
            if refresh or index not in self._verdicts:
                platform, dev = self.discover()[index]
                self._verdicts[index] = verdict(platform, dev, refresh=refresh)
            return self._verdicts[index]

    def unusable(self) -> list[tuple[str, Verdict, str]]:
        """``(device id, verdict, remedy)`` for every discovered device that failed its probe.

        Examples:
            >>> DeviceManager().unusable() == [] or True
            True
        """
        found = []
        for i, (platform, dev) in enumerate(self.discover()):
            v = self.verdict(i)
            if not v.usable:
                found.append((_device_id(platform, dev), v, _remedy_of(platform, dev)))
        return found

    def _usable(self, index: int, warn: bool) -> bool:
        """The probe's verdict on device ``index``; a skipped device is reported once."""
        v = self.verdict(index)
        if not v.usable and warn and index not in self._warned:
            self._warned.add(index)
            platform, dev = self.discover()[index]
            warnings.warn(
                f"netcl: skipped unusable OpenCL device {_device_id(platform, dev)} "
                f"({v.reason}); {_remedy_of(platform, dev)}",
                RuntimeWarning,
                stacklevel=4,
            )
        return v.usable

    @staticmethod
    def _device_type(dev: Any) -> str:
        """Map a ``cl.Device.type`` bitfield to ``"gpu"``, ``"cpu"``, ``"accel"`` or ``"other"``."""
        return device_type_name(int(dev.type))

    def default(self, selector: str = "auto") -> DeviceHandle | None:
        """Return the cached handle for ``selector``; ``None`` when no such device exists.

        ``"auto"`` always returns a handle; when ``NETCL_DEVICE`` replaces it with a selector
        that matches no device, that is an error. ``"cl"``, ``"gpu"`` and ``"accel"`` return
        ``None`` when pyopencl is installed but no usable device of that kind is found.

        Raises:
            ImportError: an OpenCL selector (anything but ``auto``, ``cpu``, ``numpy``) while
                pyopencl is not installed; the message says how to install it.
            ValueError: the selector names no known device kind, index or name.
            RuntimeError: the selector names only unusable devices, or ``NETCL_DEVICE`` names
                a device kind that is not present.
        """
        if not isinstance(selector, str):
            raise TypeError(f"DeviceManager.default: selector must be a str, got {selector!r}")
        key = selector.strip().lower()
        if key == "auto" and _opencl_disabled:
            return _CPU_HANDLE  # a forked child: the best device left is NumPy
        described = repr(selector)
        if key == "auto":
            value = os.environ.get("NETCL_DEVICE", "auto")
            key = value.strip().lower() or "auto"
            if key != "auto":
                described = f"{value!r} (from NETCL_DEVICE)"
        with self._lock:
            if key not in self._handles:
                self._handles[key] = self._select(key, described)
            handle = self._handles[key]
        if handle is None and selector.strip().lower() == "auto":
            raise RuntimeError(
                f"DeviceManager.default: {described} matches no device on this machine; "
                f"devices: {', '.join(str(h) for h in self.all_handles())}"
            )
        return handle

    def all_handles(self) -> list[DeviceHandle]:
        """A handle for every usable OpenCL device found, then the NumPy backend."""
        usable = [i for i in range(len(self.discover())) if self.verdict(i).usable]
        handles = [self._handle(i) for i in usable]
        return [*handles, _CPU_HANDLE]

    def reset(self) -> None:
        """Forget every cached handle and discovery result (used after ``fork``)."""
        with self._lock:
            self._devices = None
            self._handles.clear()
            self._verdicts.clear()

    # -- selection -------------------------------------------------------------------------

    def _select(self, key: str, original: str) -> DeviceHandle | None:
        if key in ("cpu", "numpy"):
            return _CPU_HANDLE
        if _opencl_disabled:
            if key == "auto":
                return _CPU_HANDLE
            raise RuntimeError(f"DeviceManager.default({original}): {_opencl_disabled[0]}")
        if not have_pyopencl():
            if key == "auto":
                return _CPU_HANDLE
            raise ImportError(f"DeviceManager.default({original}): {_INSTALL_HINT}")
        devices = self.discover()
        if key in ("auto", "cl", "gpu", "accel"):
            kinds = _AUTO_ORDER if key in ("auto", "cl") else (key,)
            for kind in kinds:
                of_kind = [i for i, (_, d) in enumerate(devices) if self._device_type(d) == kind]
                if kind == "cpu":
                    of_kind.sort(key=lambda i: _preference(devices[i][0]))
                for i in of_kind:
                    if self._usable(i, warn=True):
                        return self._handle(i)
            return _CPU_HANDLE if key == "auto" else None
        if key.startswith("cl:"):
            return self._checked(self._select_index(key, original, devices), original)
        matches = [
            i for i, (platform, dev) in enumerate(devices)
            if key in dev.name.lower() or key in platform.name.lower()
        ]
        for i in matches:
            if self._usable(i, warn=False):
                return self._handle(i)
        if matches:
            return self._checked(matches[0], original)
        names = [f"{p.name.strip()}: {d.name.strip()}" for p, d in devices] or ["no OpenCL device"]
        raise ValueError(
            f"DeviceManager.default: unknown device selector {original}; use auto, gpu, cpu, "
            f"cl, cl:PLATFORM:DEVICE or a name fragment of one of: {'; '.join(names)}"
        )

    def _checked(self, index: int, original: str) -> DeviceHandle:
        """The handle of device ``index``, or a ``RuntimeError`` saying why it is unusable."""
        v = self.verdict(index)
        if v.usable:
            return self._handle(index)
        platform, dev = self.discover()[index]
        usable = [str(h) for h in self.all_handles()]
        raise RuntimeError(
            f"DeviceManager.default({original}): OpenCL device {_device_id(platform, dev)} "
            f"is unusable: {v.reason}; {_remedy_of(platform, dev)}. "
            f"Usable devices: {', '.join(usable)}"
        )

    def _select_index(
        self, key: str, original: str, devices: list[tuple[Any, Any]]
    ) -> int:
        parts = key.split(":")
        try:
            p_index, d_index = int(parts[1]), int(parts[2]) if len(parts) > 2 else 0
        except (IndexError, ValueError):
            raise ValueError(
                f"DeviceManager.default: selector {original} must look like cl:PLATFORM:DEVICE "
                f"with integer indices"
            ) from None
        platforms: list[Any] = []
        for platform, _ in devices:
            if platform not in platforms:
                platforms.append(platform)
        if not 0 <= p_index < len(platforms):
            raise ValueError(
                f"DeviceManager.default: platform index {p_index} in {original} is out of range "
                f"(found {len(platforms)} platforms)"
            )
        on_platform = [i for i, (p, _) in enumerate(devices) if p == platforms[p_index]]
        if not 0 <= d_index < len(on_platform):
            raise ValueError(
                f"DeviceManager.default: device index {d_index} in {original} is out of range "
                f"(platform {p_index} has {len(on_platform)} devices)"
            )
        return on_platform[d_index]

    def _handle(self, index: int) -> DeviceHandle:
        key = f"#{index}"
        with self._lock:
            cached = self._handles.get(key)
            if cached is not None:
                return cached
            platform, dev = self.discover()[index]
            if _opencl_disabled:
                raise RuntimeError(f"DeviceManager: {_opencl_disabled[0]}")
            context = cl().Context([dev])
            props = 0
            if env_flag("NETCL_PROFILE_EVENTS", False):
                props = cl().command_queue_properties.PROFILING_ENABLE
            queue = cl().CommandQueue(context, dev, properties=props)
            register_queue(queue)
            install_process_hooks()
            handle = DeviceHandle(
                platform_name=platform.name.strip(),
                device_name=dev.name.strip(),
                backend="cl",
                device_type=self._device_type(dev),
                context=context,
                queue=queue,
                cl_device=dev,
            )
            self._handles[key] = handle
            return handle


def _device_id(platform: Any, dev: Any) -> str:
    """``cl:<platform>:<device>``, the form ``str(DeviceHandle)`` prints."""
    return f"cl:{platform.name.strip()}:{dev.name.strip()}"


def _remedy_of(platform: Any, dev: Any) -> str:
    return remedy(platform.name, device_type_name(int(dev.type)))


manager = DeviceManager()


def _forget_devices_after_fork() -> list[DeviceHandle | None]:
    """In a forked child: forget every handle and turn OpenCL off; return the parent's handles.

    Drivers such as PoCL cannot be used again in a forked child (their threads are gone), so
    the child runs on NumPy. :mod:`.process` keeps the returned handles referenced for the
    child's life, so it never releases the parent's contexts and queues.
    """
    inherited = list(manager._handles.values())
    manager.reset()
    disable_opencl(
        "this process was forked after OpenCL was initialised in its parent; OpenCL drivers "
        "cannot be used after fork: use the NumPy backend here, or start the process with "
        "multiprocessing's 'spawn' context"
    )
    return inherited


on_fork_in_child(_forget_devices_after_fork)

_active = threading.local()


def get_active_device() -> DeviceHandle:
    """The current thread's active device, else ``manager.default("auto")``."""
    stack: list[DeviceHandle] = getattr(_active, "stack", [])
    if stack:
        return stack[-1]
    handle = manager.default("auto")
    return handle if handle is not None else _CPU_HANDLE


@contextlib.contextmanager
def device(selector: str | DeviceHandle = "auto") -> Iterator[DeviceHandle]:
    """Make a device the thread's active one for the ``with`` block; restore the previous on exit.

    Raises:
        RuntimeError: the selector names a device kind that is not present.

    Examples:
        >>> with device("cpu") as dev:
        ...     get_active_device() is dev
        True
    """
    if isinstance(selector, DeviceHandle):
        handle: DeviceHandle | None = selector
    else:
        handle = manager.default(selector)
    if handle is None:
        raise RuntimeError(f"device: no device matches selector {selector!r} on this machine")
    stack: list[DeviceHandle] = getattr(_active, "stack", None) or []
    _active.stack = stack
    stack.append(handle)
    try:
        yield handle
    finally:
        stack.pop()
