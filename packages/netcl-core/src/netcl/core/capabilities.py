"""What a device can do: the ``cl_khr_fp16`` probe, subgroups, atomics, and the kernel strategy.

``device_profile(cl_device)`` reads a PyOpenCL device once and returns a frozen
:class:`DeviceProfile`; ``numpy_profile()`` is the same record for the NumPy backend.
``kernel_strategy(profile)`` says whether kernels should stay ``"portable"`` or may use
vendor-tuned ``"optimized"`` code paths (``NETCL_KERNEL_STRATEGY`` overrides it).

Nothing here imports PyOpenCL: a device is read through its attributes only, so the module
imports (and is testable with stand-in device objects) on machines without an OpenCL driver.

Examples:
    >>> prof = numpy_profile()
    >>> prof.device_type, prof.has_fp16, prof.supports_fp16
    ('cpu', True, True)
    >>> kernel_strategy(prof)
    'portable'
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any, Literal

from .env import env_choice

__all__ = [
    "DeviceProfile",
    "DeviceType",
    "KernelStrategy",
    "VendorFamily",
    "device_profile",
    "device_type_name",
    "kernel_strategy",
    "numpy_profile",
    "vendor_family_of",
]

DeviceType = Literal["gpu", "cpu", "accel", "other"]
KernelStrategy = Literal["portable", "optimized"]
VendorFamily = Literal["nvidia", "amd", "intel", "apple", "pocl", "numpy", "other"]

#: Devices with less local memory than this get the portable kernels (the optimized ones
#: stage tiles of 16 KiB and more).
SMALL_LOCAL_MEM_BYTES = 16 * 1024

# cl_device_type bits from the OpenCL headers, so no pyopencl import is needed to decode them.
_CL_DEVICE_TYPE_CPU = 1 << 1
_CL_DEVICE_TYPE_GPU = 1 << 2
_CL_DEVICE_TYPE_ACCELERATOR = 1 << 3

_STRATEGY_ENV = "NETCL_KERNEL_STRATEGY"


@dataclass(frozen=True)
class DeviceProfile:
    """Frozen summary of what one device supports.

    Attributes:
        name: device name as the driver reports it (``"NVIDIA H100 80GB HBM3"``).
        vendor: vendor string as the driver reports it.
        device_type: ``"gpu"``, ``"cpu"``, ``"accel"`` or ``"other"``.
        has_fp16: half-precision *arithmetic* is available (``cl_khr_fp16``). fp16 *storage*
            (``vload_half``/``vstore_half``) works everywhere and does not need this.
        has_fp64: double precision is available (``cl_khr_fp64`` or a vendor fp64 extension).
        has_subgroups: some subgroup extension is advertised.
        fast_atomics: ``cl_khr_int64_base_atomics`` or an extended-atomics extension.
        local_mem_size: bytes of ``__local`` memory per work-group.
        compute_units: ``CL_DEVICE_MAX_COMPUTE_UNITS``.
        max_work_group_size: largest work-group the device accepts.
        extensions: the extension names, in the driver's order.

    Examples:
        >>> p = DeviceProfile("dev", "ACME", "gpu", has_fp16=False, has_fp64=True,
        ...                   has_subgroups=False, fast_atomics=True, local_mem_size=65536,
        ...                   compute_units=8, max_work_group_size=256, extensions=())
        >>> p.supports_fp16
        False
    """

    name: str
    vendor: str
    device_type: DeviceType
    has_fp16: bool
    has_fp64: bool
    has_subgroups: bool
    fast_atomics: bool
    local_mem_size: int
    compute_units: int
    max_work_group_size: int
    extensions: tuple[str, ...]

    @property
    def supports_fp16(self) -> bool:
        """Alias of :attr:`has_fp16` (the name the ops layer uses)."""
        return self.has_fp16


def device_type_name(type_bits: int) -> DeviceType:
    """Map a ``cl_device_type`` bitfield to ``"gpu"``, ``"cpu"``, ``"accel"`` or ``"other"``.

    A GPU bit wins over the others (some drivers also set ``DEFAULT``).

    Examples:
        >>> device_type_name(4), device_type_name(2), device_type_name(8), device_type_name(16)
        ('gpu', 'cpu', 'accel', 'other')
    """
    if type_bits & _CL_DEVICE_TYPE_GPU:
        return "gpu"
    if type_bits & _CL_DEVICE_TYPE_ACCELERATOR:
        return "accel"
    if type_bits & _CL_DEVICE_TYPE_CPU:
        return "cpu"
    return "other"


def vendor_family_of(vendor: str, name: str = "", version: str = "") -> VendorFamily:
    """Classify a device's vendor string (and, for PoCL, its version string).

    PoCL is recognised first, from ``version``: its CPU device reports the *CPU's* vendor
    (``"AuthenticAMD"``, ``"GenuineIntel"``), but what matters for kernels is PoCL's compiler.

    Examples:
        >>> vendor_family_of("NVIDIA Corporation")
        'nvidia'
        >>> vendor_family_of("Advanced Micro Devices, Inc.")
        'amd'
        >>> vendor_family_of("AuthenticAMD", "pthread-AMD EPYC", "OpenCL 3.0 PoCL HSTR: ...")
        'pocl'
    """
    if "pocl" in version.lower():
        return "pocl"
    text = f"{vendor} {name}".lower()
    if "numpy" in vendor.lower():
        return "numpy"
    if "nvidia" in text:
        return "nvidia"
    if "advanced micro devices" in text or "amd" in vendor.lower():
        return "amd"
    if "intel" in text:
        return "intel"
    if "apple" in text:
        return "apple"
    return "other"


def _has_fp16(extensions: tuple[str, ...]) -> bool:
    return "cl_khr_fp16" in extensions or any("fp16" in ext for ext in extensions)


def _has_fp64(extensions: tuple[str, ...]) -> bool:
    return any("fp64" in ext for ext in extensions)


def _has_subgroups(extensions: tuple[str, ...]) -> bool:
    return any("subgroup" in ext for ext in extensions)


def _has_fast_atomics(extensions: tuple[str, ...]) -> bool:
    return "cl_khr_int64_base_atomics" in extensions or any(
        "extended_atomics" in ext for ext in extensions
    )


def _extensions(cl_device: Any) -> tuple[str, ...]:
    return tuple(str(getattr(cl_device, "extensions", "") or "").split())


def device_profile(cl_device: Any) -> DeviceProfile:
    """Read a PyOpenCL device (or an object with the same attributes) into a :class:`DeviceProfile`.

    Memoized per device: the driver is queried once per process.

    Args:
        cl_device: a ``pyopencl.Device``.

    Returns:
        The frozen profile. ``has_fp16`` is true when any extension mentions ``"fp16"``;
        ``has_subgroups`` when any mentions ``"subgroup"``; ``fast_atomics`` when
        ``cl_khr_int64_base_atomics`` or an extended-atomics extension is listed.

    Examples:
        >>> class Dev:
        ...     name, vendor, type = "Tiny GPU", "ACME", 4
        ...     extensions = "cl_khr_fp16 cl_khr_subgroups"
        ...     local_mem_size, max_compute_units, max_work_group_size = 32768, 4, 256
        >>> p = device_profile(Dev())
        >>> p.device_type, p.has_fp16, p.has_subgroups, p.fast_atomics
        ('gpu', True, True, False)
    """
    return _profile_for(cl_device)


@functools.cache  # one positional key: device_profile(d) and device_profile(cl_device=d) agree
def _profile_for(cl_device: Any) -> DeviceProfile:
    extensions = _extensions(cl_device)
    return DeviceProfile(
        name=str(cl_device.name).strip(),
        vendor=str(cl_device.vendor).strip(),
        device_type=device_type_name(int(cl_device.type)),
        has_fp16=_has_fp16(extensions),
        has_fp64=_has_fp64(extensions),
        has_subgroups=_has_subgroups(extensions),
        fast_atomics=_has_fast_atomics(extensions),
        local_mem_size=int(cl_device.local_mem_size),
        compute_units=int(cl_device.max_compute_units),
        max_work_group_size=int(cl_device.max_work_group_size),
        extensions=extensions,
    )


@functools.cache
def numpy_profile() -> DeviceProfile:
    """The profile of the NumPy backend: a CPU with float16 and float64, no local memory.

    Examples:
        >>> p = numpy_profile()
        >>> p.vendor, p.device_type, p.has_fp64, p.local_mem_size
        ('numpy', 'cpu', True, 0)
    """
    return DeviceProfile(
        name="numpy",
        vendor="numpy",
        device_type="cpu",
        has_fp16=True,
        has_fp64=True,
        has_subgroups=False,
        fast_atomics=False,
        local_mem_size=0,
        compute_units=os.cpu_count() or 1,
        max_work_group_size=1,
        extensions=(),
    )


def _strategy_override() -> KernelStrategy | None:
    try:
        value = env_choice(_STRATEGY_ENV, ("auto", "portable", "optimized"))
    except ValueError as err:
        raise ValueError(f"kernel_strategy: {err}") from None
    if value == "portable":
        return "portable"
    if value == "optimized":
        return "optimized"
    return None


def kernel_strategy(profile: DeviceProfile) -> KernelStrategy:
    """Return ``"optimized"`` or ``"portable"`` for a device.

    ``NETCL_KERNEL_STRATEGY`` (``auto`` | ``portable`` | ``optimized``) is read on every call
    and wins when it is not ``auto``. Otherwise CPUs and devices with less than 16 KiB of local
    memory get ``"portable"`` (this takes precedence); devices with subgroups or fp16, or made
    by NVIDIA or AMD, get ``"optimized"``; everything else ``"portable"``.

    Raises:
        ValueError: ``NETCL_KERNEL_STRATEGY`` holds anything else.

    Examples:
        >>> kernel_strategy(numpy_profile())
        'portable'
    """
    override = _strategy_override()
    if override is not None:
        return override
    if profile.device_type == "cpu" or profile.local_mem_size < SMALL_LOCAL_MEM_BYTES:
        return "portable"
    if profile.has_subgroups or profile.has_fp16:
        return "optimized"
    if vendor_family_of(profile.vendor, profile.name) in ("nvidia", "amd"):
        return "optimized"
    return "portable"
