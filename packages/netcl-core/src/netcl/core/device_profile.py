"""The richer device record the kernel selector decides from: vendor family and architecture.

:class:`ExtendedDeviceProfile` is a :class:`~netcl.core.capabilities.DeviceProfile` (so
``kernel_strategy`` accepts it) plus the vendor family, the architecture family, work-item
limits, preferred vector widths, versions and memory facts. ``extended_profile(device)``
builds it once per device; ``extended_profile(None)`` describes the NumPy backend.

Examples:
    >>> p = extended_profile(None)
    >>> p.vendor_family, p.architecture, p.is_integrated
    ('numpy', 'cpu', True)
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, fields
from typing import Any

from netcl.core.capabilities import (
    DeviceProfile,
    DeviceType,
    VendorFamily,
    device_profile,
    numpy_profile,
    vendor_family_of,
)

__all__ = ["ExtendedDeviceProfile", "architecture_of", "extended_profile"]

# NVIDIA compute capability (major, minor) -> architecture family. A major alone covers the
# rest of that major (checked after the exact pairs).
_NVIDIA_CC: dict[tuple[int, int | None], str] = {
    (8, 9): "ada",
    (7, 5): "turing",
    (12, None): "blackwell",
    (10, None): "blackwell",
    (9, None): "hopper",
    (8, None): "ampere",
    (7, None): "volta",
    (6, None): "pascal",
    (5, None): "maxwell",
}

# Name patterns, first match wins; order matters where one name contains another.
_NVIDIA_NAMES: tuple[tuple[str, str], ...] = (
    (r"\b(GH|H)(100|200|800|20)\b", "hopper"),
    (r"\b(B100|B200|GB200)\b|RTX (PRO )?50\d0", "blackwell"),
    (r"\bL(4|40S?|20)\b|RTX 40\d0|RTX \d{4} Ada|\bAda\b", "ada"),
    (r"\bA(2|10G?|16|30|40|100|800)\b|RTX 30\d0|RTX A\d{4}|\bAmpere\b", "ampere"),
    (r"\bT4\b|RTX 20\d0|GTX 16\d0|Quadro RTX|TITAN RTX|\bTuring\b", "turing"),
    (r"\bV100\b|TITAN V\b|\bVolta\b", "volta"),
    (r"GTX 10\d0|\bP(4|40|100)\b|\bPascal\b", "pascal"),
)

_AMD_GFX: tuple[tuple[str, str], ...] = (
    (r"gfx12\d\d", "rdna4"),
    (r"gfx11\d\d", "rdna3"),
    (r"gfx103\d", "rdna2"),
    (r"gfx101\d", "rdna"),
    (r"gfx9(08|0a|4\d)", "cdna"),
    (r"gfx[6-9]\d\w?", "gcn"),
)

_AMD_NAMES: tuple[tuple[str, str], ...] = (
    (r"RX 9\d{3}", "rdna4"),
    (r"RX 7\d{3}|Radeon 7\d0M|W7\d{3}", "rdna3"),
    (r"RX 6\d{3}|Radeon 6\d0M|W6\d{3}", "rdna2"),
    (r"RX 5\d{3}|W5\d{3}", "rdna"),
    (r"Instinct|\bMI\d{2,3}", "cdna"),
    (r"Vega|RX [45]\d0\b|Fury|\bR[79] \d{3}|Polaris|Ellesmere|Fiji|Hawaii", "gcn"),
)

_INTEL_NAMES: tuple[tuple[str, str], ...] = (
    (r"\bArc\b|Iris\(R\) Xe|Iris Xe|\bXe\b|Data Center GPU|UHD Graphics 7\d\d", "xe"),
    (r"HD Graphics|UHD Graphics|Iris", "gen"),
)


@dataclass(frozen=True)
class ExtendedDeviceProfile(DeviceProfile):
    """Everything in :class:`DeviceProfile` plus what the kernel selector needs.

    Attributes:
        vendor_family: ``"nvidia"``, ``"amd"``, ``"intel"``, ``"apple"``, ``"pocl"``,
            ``"numpy"`` or ``"other"``.
        architecture: architecture family: NVIDIA ``"hopper"``, ``"ada"``, ``"ampere"``,
            ``"turing"``, ``"volta"``, ...; AMD ``"rdna3"``, ``"rdna2"``, ``"rdna"``,
            ``"cdna"``, ``"gcn"``; Intel ``"xe"`` or ``"gen"``; ``"cpu"`` for CPU devices;
            ``"unknown"`` when nothing matched.
        compute_capability: NVIDIA ``(major, minor)`` when the driver reports it, else None.
        max_work_item_sizes: per-dimension work-item limits.
        preferred_vector_width_float: ``CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT``.
        preferred_vector_width_half: ``CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF`` (0: no fp16).
        driver_version: ``CL_DRIVER_VERSION``.
        opencl_version: ``CL_DEVICE_VERSION`` (``"OpenCL 3.0 CUDA"``).
        global_mem_size: bytes of global memory.
        is_integrated: host and device share memory (``CL_DEVICE_HOST_UNIFIED_MEMORY``);
            always true for CPU devices.

    Examples:
        >>> p = extended_profile(None)
        >>> isinstance(p, DeviceProfile), p.name
        (True, 'numpy')
    """

    vendor_family: VendorFamily = "other"
    architecture: str = "unknown"
    compute_capability: tuple[int, int] | None = None
    max_work_item_sizes: tuple[int, ...] = ()
    preferred_vector_width_float: int = 1
    preferred_vector_width_half: int = 0
    driver_version: str = ""
    opencl_version: str = ""
    global_mem_size: int = 0
    is_integrated: bool = False

    @property
    def opencl_cpu(self) -> bool:
        """An OpenCL CPU device (PoCL, Intel's CPU runtime); not the NumPy backend.

        Examples:
            >>> extended_profile(None).opencl_cpu
            False
        """
        return self.device_type == "cpu" and self.vendor_family != "numpy"


def _first_match(patterns: tuple[tuple[str, str], ...], text: str) -> str | None:
    for pattern, family in patterns:
        if re.search(pattern, text, flags=re.IGNORECASE):
            return family
    return None


def _nvidia_from_cc(major: int, minor: int) -> str:
    return _NVIDIA_CC.get((major, minor)) or _NVIDIA_CC.get((major, None)) or "unknown"


def architecture_of(
    vendor_family: VendorFamily,
    device_type: DeviceType,
    name: str,
    compute_capability: tuple[int, int] | None = None,
) -> str:
    """Name the architecture family of a device from its vendor, name and NVIDIA CC.

    For NVIDIA the compute capability wins over the name (``sm_90`` is Hopper whatever the
    board is called). CPU devices (PoCL, Intel's CPU runtime, the NumPy backend) are ``"cpu"``.

    Examples:
        >>> architecture_of("nvidia", "gpu", "NVIDIA H200")
        'hopper'
        >>> architecture_of("nvidia", "gpu", "some board", (8, 6))
        'ampere'
        >>> architecture_of("amd", "gpu", "gfx1100")
        'rdna3'
        >>> architecture_of("intel", "gpu", "Intel(R) Iris(R) Xe Graphics")
        'xe'
    """
    if device_type == "cpu":
        return "cpu"
    if vendor_family == "nvidia":
        if compute_capability is not None:
            return _nvidia_from_cc(*compute_capability)
        return _first_match(_NVIDIA_NAMES, name) or "unknown"
    if vendor_family == "amd":
        return _first_match(_AMD_GFX, name) or _first_match(_AMD_NAMES, name) or "unknown"
    if vendor_family == "intel":
        return _first_match(_INTEL_NAMES, name) or "unknown"
    if vendor_family == "apple":
        return "apple"
    return "unknown"


def _optional_info(cl_device: Any, attribute: str) -> Any:
    """Read an optional device attribute; drivers raise for queries they do not support."""
    try:
        return getattr(cl_device, attribute)
    except Exception:  # pyopencl.LogicError / RuntimeError for unsupported queries
        return None


def _nvidia_compute_capability(cl_device: Any) -> tuple[int, int] | None:
    # cl_nv_device_attribute_query: pyopencl exposes COMPUTE_CAPABILITY_MAJOR_NV/MINOR_NV as
    # these attributes; other drivers (and older pyopencl) raise or lack them.
    major = _optional_info(cl_device, "compute_capability_major_nv")
    minor = _optional_info(cl_device, "compute_capability_minor_nv")
    if isinstance(major, int) and isinstance(minor, int):
        return (major, minor)
    return None


def _read_extended(cl_device: Any) -> ExtendedDeviceProfile:
    base = device_profile(cl_device)
    version = str(_optional_info(cl_device, "version") or "")
    family = vendor_family_of(base.vendor, base.name, version)
    cc = _nvidia_compute_capability(cl_device) if family == "nvidia" else None
    arch_name = base.name
    if family == "amd":  # AMD's runtime names GPUs "gfx1100"; the board name helps otherwise
        arch_name = f"{base.name} {_optional_info(cl_device, 'board_name_amd') or ''}"
    unified = _optional_info(cl_device, "host_unified_memory")
    item_sizes = _optional_info(cl_device, "max_work_item_sizes") or ()
    return ExtendedDeviceProfile(
        **{f.name: getattr(base, f.name) for f in fields(DeviceProfile)},
        vendor_family=family,
        architecture=architecture_of(family, base.device_type, arch_name, cc),
        compute_capability=cc,
        max_work_item_sizes=tuple(int(s) for s in item_sizes),
        preferred_vector_width_float=int(
            _optional_info(cl_device, "preferred_vector_width_float") or 1
        ),
        preferred_vector_width_half=int(
            _optional_info(cl_device, "preferred_vector_width_half") or 0
        ),
        driver_version=str(_optional_info(cl_device, "driver_version") or ""),
        opencl_version=version,
        global_mem_size=int(_optional_info(cl_device, "global_mem_size") or 0),
        is_integrated=base.device_type == "cpu" or bool(unified),
    )


def _numpy_extended() -> ExtendedDeviceProfile:
    import numpy as np

    base = numpy_profile()
    return ExtendedDeviceProfile(
        **{f.name: getattr(base, f.name) for f in fields(DeviceProfile)},
        vendor_family="numpy",
        architecture="cpu",
        max_work_item_sizes=(1, 1, 1),
        preferred_vector_width_float=1,
        preferred_vector_width_half=1,
        driver_version=f"numpy {np.__version__}",
        opencl_version="",
        global_mem_size=0,
        is_integrated=True,
    )


def extended_profile(cl_device: Any | None = None) -> ExtendedDeviceProfile:
    """Build the :class:`ExtendedDeviceProfile` of a PyOpenCL device; memoized per device.

    Args:
        cl_device: a ``pyopencl.Device`` (or an object with its attributes), or None for the
            NumPy backend.

    Examples:
        >>> class Dev:
        ...     name, vendor, type = "NVIDIA H100 80GB HBM3", "NVIDIA Corporation", 4
        ...     extensions, local_mem_size, max_compute_units = "", 49152, 132
        ...     max_work_group_size = 1024
        ...     version = "OpenCL 3.0 CUDA"
        >>> p = extended_profile(Dev())
        >>> p.vendor_family, p.architecture, p.compute_capability
        ('nvidia', 'hopper', None)
    """
    return _extended_for(cl_device)


@functools.cache  # one positional key, so extended_profile() and (None) share an entry
def _extended_for(cl_device: Any | None) -> ExtendedDeviceProfile:
    return _numpy_extended() if cl_device is None else _read_extended(cl_device)
