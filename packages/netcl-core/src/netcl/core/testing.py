"""Helpers every netcl test suite shares: the devices to run on and one tolerance table.

Tests run on every backend present (the NumPy backend and each OpenCL device); setting
``NETCL_DEVICE`` (or pytest's ``--netcl-device``) restricts them to that one.

Every comparison of a computed value with a reference goes through :func:`assert_close`
(or :func:`tolerance`, for a check that is not an array comparison): the tolerance is the
dtype's row of :data:`TOLERANCES` times a ``scale`` for ops that add up many rounding errors,
and gradients get :data:`GRAD_SCALE` times that, never below what float64 central finite
differences resolve (:data:`FINITE_DIFFERENCE_FLOOR`).

Examples:
    >>> "cpu" in [device_id(d) for d in available_devices()] or bool(os.environ.get("NETCL_DEVICE"))
    True
    >>> tolerance("float32"), tolerance("float32", grad=True)
    ((0.0001, 1e-05), (0.002, 0.0002))
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .device import DeviceHandle, manager
from .dtypes import canonical_dtype

__all__ = [
    "FINITE_DIFFERENCE_FLOOR",
    "GRAD_SCALE",
    "TOLERANCES",
    "assert_close",
    "available_devices",
    "device_id",
    "device_report",
    "supports_dtype",
    "tolerance",
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

#: Gradients are compared with this multiple of the forward tolerance: a backward pass goes
#: through about as many roundings again as its forward, and a finite difference divides the
#: forward's rounding by the step.
GRAD_SCALE = 20.0

#: (rtol, atol) below which a gradient tolerance never goes: central differences in float64
#: with the step 1e-6 are good to about 1e-9 (truncation ~eps**2, cancellation ~1e-16 / eps).
FINITE_DIFFERENCE_FLOOR: tuple[float, float] = (1e-7, 1e-8)


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


def tolerance(dtype: str, scale: float = 1.0, *, grad: bool = False) -> tuple[float, float]:
    """``(rtol, atol)`` for values computed in ``dtype``: the table's row times ``scale``.

    With ``grad``, the tolerance of a gradient compared with finite differences: also times
    :data:`GRAD_SCALE`, and at least :data:`FINITE_DIFFERENCE_FLOOR`.

    Examples:
        >>> tolerance("float16", 2.0)
        (0.02, 0.02)
        >>> tolerance("float64", grad=True)
        (1e-07, 1e-08)
    """
    rtol, atol = TOLERANCES[canonical_dtype(dtype)]
    if not grad:
        return rtol * scale, atol * scale
    floor_rtol, floor_atol = FINITE_DIFFERENCE_FLOOR
    return max(rtol * scale * GRAD_SCALE, floor_rtol), max(atol * scale * GRAD_SCALE, floor_atol)


def assert_close(actual: Any, expected: Any, dtype: str = "float32", scale: float = 1.0, *,
                 grad: bool = False, err_msg: str = "") -> None:
    """``np.testing.assert_allclose`` with :func:`tolerance` ``(dtype, scale, grad=grad)``.

    Both sides are compared in float64; NaN must stand where the reference has NaN and an
    infinity where it has the same infinity.

    Examples:
        >>> assert_close(np.float32(1.00001), 1.0)
        >>> assert_close([np.nan, np.inf], [np.nan, np.inf])
        >>> assert_close(1.01, 1.0, "float16")
        >>> assert_close(1.001, 1.0)  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        AssertionError: Not equal to tolerance rtol=0.0001, atol=1e-05
    """
    rtol, atol = tolerance(dtype, scale, grad=grad)
    np.testing.assert_allclose(
        np.asarray(actual, dtype=np.float64),
        np.asarray(expected, dtype=np.float64),
        rtol=rtol,
        atol=atol,
        err_msg=err_msg,
    )
