"""Helpers every netcl test suite shares: the devices to run on and one tolerance table.

Tests run on every backend present (the NumPy backend and each OpenCL device); setting
``NETCL_DEVICE`` (or pytest's ``--netcl-device``) restricts them to that one.

Examples:
    >>> "cpu" in [device_id(d) for d in available_devices()] or bool(os.environ.get("NETCL_DEVICE"))
    True
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .device import DeviceHandle, manager
from .dtypes import canonical_dtype

__all__ = [
    "TOLERANCES",
    "assert_close",
    "available_devices",
    "device_id",
    "device_report",
    "supports_dtype",
]

# (rtol, atol) per dtype: the one table every op test uses.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2),
    "float32": (1e-4, 1e-5),
    "float64": (1e-10, 1e-12),
    "int32": (0.0, 0.0),
    "int64": (0.0, 0.0),
    "uint8": (0.0, 0.0),
}


def available_devices() -> list[DeviceHandle]:
    """The devices tests run on: ``NETCL_DEVICE``'s choice, else NumPy and every OpenCL device."""
    choice = os.environ.get("NETCL_DEVICE", "").strip()
    if choice:
        handle = manager.default(choice)
        if handle is None:
            raise RuntimeError(f"NETCL_DEVICE={choice!r} matches no device on this machine")
        return [handle]
    return [manager.default("cpu"), *manager.all_handles()[:-1]]  # type: ignore[list-item]


def device_report() -> list[str]:
    """The test session's header: the devices under test and each unusable one skipped.

    Examples:
        >>> device_report()[0].startswith("netcl devices under test: ")
        True
    """
    ids = ["cpu" if h.backend == "cpu" else str(h) for h in available_devices()]
    lines = [f"netcl devices under test: {', '.join(ids)}"]
    skipped = [f"{name} ({v.reason})" for name, v, _ in manager.unusable()]
    if skipped:
        lines.append(f"netcl devices skipped: {'; '.join(skipped)}")
    return lines


def device_id(handle: Any) -> str:
    """A short test id: ``cpu`` or ``cl-<device name>``."""
    if not isinstance(handle, DeviceHandle):
        return str(handle)
    if handle.backend == "cpu":
        return "cpu"
    return "cl-" + "".join(c if c.isalnum() else "_" for c in handle.device_name)[:24]


def supports_dtype(handle: DeviceHandle, dtype: str) -> bool:
    """Whether tensors of ``dtype`` can live on ``handle`` (float64 needs cl_khr_fp64)."""
    if handle.backend == "cpu" or canonical_dtype(dtype) != "float64":
        return True
    return "cl_khr_fp64" in handle.cl_device.extensions


def assert_close(actual: Any, expected: Any, dtype: str = "float32", scale: float = 1.0) -> None:
    """``np.testing.assert_allclose`` with the table's tolerance for ``dtype`` (times ``scale``)."""
    rtol, atol = TOLERANCES[canonical_dtype(dtype)]
    np.testing.assert_allclose(
        np.asarray(actual, dtype=np.float64),
        np.asarray(expected, dtype=np.float64),
        rtol=rtol * scale,
        atol=atol * scale,
    )
