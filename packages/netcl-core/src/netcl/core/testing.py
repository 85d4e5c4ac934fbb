"""Helpers every netcl test suite shares: the devices to run on, one tolerance table and one
finite-difference routine.

Tests run on every backend present (the NumPy backend and each OpenCL device); setting
``NETCL_DEVICE`` (or pytest's ``--netcl-device``) restricts them to that one.

Every comparison of a computed value with a reference goes through :func:`assert_close`
(or :func:`tolerance`, for a check that is not an array comparison): the tolerance is the
dtype's row of :data:`TOLERANCES` times a ``scale`` for ops that add up many rounding errors,
and gradients get :data:`GRAD_SCALE` times that, never below what float64 central finite
differences resolve (:data:`FINITE_DIFFERENCE_FLOOR`). Gradients without a closed form are
compared with :func:`numeric_grad`, central differences in float64 on the host through
:func:`central_difference` (which ``netcl.autograd.gradcheck`` uses too).

Examples:
    >>> "cpu" in [device_id(d) for d in available_devices()] or bool(os.environ.get("NETCL_DEVICE"))
    True
    >>> tolerance("float32"), tolerance("float32", grad=True)
    ((0.0001, 1e-05), (0.002, 0.0002))
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
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
    "central_difference",
    "device_id",
    "device_report",
    "numeric_grad",
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
    infinity where it has the same infinity. A gradient's ``atol`` is relative to its size:
    ``|actual - expected| <= atol * max(1, max|expected|) + rtol * |expected|``.

    Examples:
        >>> assert_close(np.float32(1.00001), 1.0)
        >>> assert_close([np.nan, np.inf], [np.nan, np.inf])
        >>> assert_close(1.01, 1.0, "float16")
        >>> assert_close(1.001, 1.0)  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        AssertionError: Not equal to tolerance rtol=0.0001, atol=1e-05
    """
    rtol, atol = tolerance(dtype, scale, grad=grad)
    want = np.asarray(expected, dtype=np.float64)
    if grad and want.size and np.isfinite(want).all():
        atol *= max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), want, rtol=rtol, atol=atol,
                               err_msg=err_msg)


def central_difference(
    f: Callable[..., Any], args: Sequence[Any], steps: Mapping[int, np.ndarray[Any, Any]],
    eps: float = 1e-6,
) -> np.ndarray[Any, Any]:
    """``(f(x + eps d) - f(x - eps d)) / (2 eps)`` in float64, elementwise over ``f``'s output.

    ``x`` is ``args``; ``d`` adds ``steps[i]`` to ``args[i]`` (float64 arrays, broadcastable to
    it); the other arguments pass through unchanged.

    Examples:
        >>> import numpy as np
        >>> x = np.array([1.0, 2.0])
        >>> central_difference(lambda a: a**3, [x], {0: np.ones(2)}).round(6).tolist()
        [3.0, 12.0]
    """
    plus, minus = list(args), list(args)
    for i, d in steps.items():
        h = eps * d
        plus[i] = args[i] + h
        minus[i] = args[i] - h
    up = np.asarray(f(*plus), dtype=np.float64)
    down = np.asarray(f(*minus), dtype=np.float64)
    return (up - down) / (2 * eps)


def _sum_to(a: np.ndarray[Any, Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """``a`` summed over the axes that broadcasting added to an array of ``shape``."""
    lead = a.ndim - len(shape)
    out = a.sum(axis=tuple(range(lead))) if lead else a
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and out.shape[k] != 1)
    return out.sum(axis=axes, keepdims=True) if axes else out


def numeric_grad(
    ref: Callable[..., Any], args: Sequence[Any], index: int, v: np.ndarray[Any, Any],
    eps: float = 1e-6, elementwise: bool = False, independent: Sequence[int] = (),
) -> np.ndarray[Any, Any]:
    """d/d args[index] of ``sum(v * ref(*args))`` by central differences in float64.

    Element by element (two calls of ``ref`` per element), except along structure the caller
    states, where elements are stepped together and their differences read apart:

    - ``elementwise``: ``ref``'s output element depends only on the input elements broadcast
      to it; every element is stepped at once and the differences are summed back over the
      broadcast axes (two calls in all).
    - ``independent``: axes of the input that the output has at the same positions, with an
      output element depending only on input elements of its own index along them (the batch
      axis of a convolution, batch and channel of a pooling): one step per index of the other
      axes.

    Examples:
        >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])
        >>> numeric_grad(lambda a: a.sum(axis=0), [x], 0, np.ones(2)).round(6).tolist()
        [[1.0, 1.0], [1.0, 1.0]]
        >>> b = np.array([0.5, 2.0])
        >>> numeric_grad(np.multiply, [x, b], 1, np.ones((2, 2)), elementwise=True).round(6)
        array([4., 6.])
        >>> cumsum = lambda a: np.cumsum(a**2, axis=1)  # rows are independent
        >>> numeric_grad(cumsum, [x], 0, np.ones((2, 2)), independent=(0,)).round(6).tolist()
        [[4.0, 4.0], [12.0, 8.0]]
    """
    base = [np.array(a, dtype=np.float64) if _is_float(a) else a for a in args]
    x = base[index]
    if elementwise:
        diff = central_difference(ref, base, {index: np.ones_like(x)}, eps)
        return _sum_to(v * diff, x.shape).reshape(x.shape)
    kept = sorted(k % x.ndim for k in independent) if x.ndim else []
    free = [k for k in range(x.ndim) if k not in kept]
    grad = np.zeros_like(x)
    step = np.zeros_like(x)
    for position in np.ndindex(*(x.shape[k] for k in free)):
        where: list[Any] = [slice(None)] * x.ndim
        for k, p in zip(free, position):
            where[k] = p
        at = tuple(where)
        step[at] = 1.0
        weighted = v * central_difference(ref, base, {index: step}, eps)
        step[at] = 0.0
        summed = tuple(k for k in range(weighted.ndim) if k not in kept)
        grad[at] = weighted.sum(axis=summed) if summed else weighted
    return grad


def _is_float(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"
