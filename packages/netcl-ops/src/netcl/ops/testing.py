"""The one helper every op test uses (``../shared/CONVENTIONS.md`` 5-7).

:func:`check_op` builds seeded inputs on a device in a dtype, runs the op, and compares shape,
dtype and values with a float64 NumPy reference within the per-dtype tolerance table of
:mod:`netcl.core.testing`. :func:`check_error` asserts the documented typed error.

An :class:`OpInfo` row is the op's whole test spec, read by the op's own tests and by
netcl-autograd's: its samples (forward against the reference on every device), ``nan_inputs``
(NaN and infinities where the reference has them), ``errors``, and where the op has a gradient,
``grad`` (the differentiable op, checked against finite differences and eager against fused)
and ``kinks`` (points whose derivative is a convention: kept out of the finite differences by
:func:`away_from_kinks` and checked against their documented value).

Examples:
    >>> import numpy as np
    >>> from netcl.core.device import manager
    >>> dev = manager.default("cpu")
    >>> x = np.arange(6.0).reshape(2, 3)
    >>> _ = check_op(dev, lambda t: t, lambda a: a, (x,))
"""

from __future__ import annotations

import dataclasses
import re
import unittest
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np

from netcl.core.device import DeviceHandle
from netcl.core.dtypes import canonical_dtype, is_float
from netcl.core.tensor import Tensor, reshape
from netcl.core.testing import assert_close, available_devices

__all__ = ["Kink", "OpInfo", "Sample", "away_from_kinks", "check_error", "check_op",
           "one_opencl_cpu_device", "offset_view", "skip_unless_one_opencl_cpu_device",
           "to_device"]

#: ``(args, kwargs)``: ndarray args become Tensors of the tested dtype.
Sample: TypeAlias = tuple[tuple[Any, ...], dict[str, Any]]


@dataclass(frozen=True)
class Kink:
    """A point where an elementwise op's derivative is a convention, not a limit.

    Args:
        at: one value per float operand (``(0.0,)`` for relu); a binary kink whose values are
            equal stands for every tie ``a == b`` (``(1.0, 1.0)`` for maximum).
        grads: the documented derivative of the op with respect to each operand there (with
            the kwargs of the row's first sample).

    Examples:
        >>> Kink(at=(0.0,), grads=(0.0,))  # relu'(0) = 0
        Kink(at=(0.0,), grads=(0.0,))
    """

    at: tuple[float, ...]
    grads: tuple[float, ...]

    def is_tie(self) -> bool:
        """Whether this kink is the tie of two operands."""
        return len(self.at) == 2 and self.at[0] == self.at[1]


@dataclass(frozen=True)
class OpInfo:
    """One row of an op test table: everything the op's tests, and its gradient's, need.

    Args:
        name: the row's name (test ids come from it).
        op: the netcl op, called with Tensors in place of the sample's arrays.
        ref: the float64 NumPy reference, called with the sample's arrays.
        samples: ``(args, kwargs)`` pairs; ndarray args become Tensors of the tested dtype.
        errors: ``(args, kwargs, exception type, message regex)`` rows.
        dtypes: dtypes to test.
        scale: tolerance multiplier for ops that accumulate error (matmul, conv).
        variants: kernel variants the row's tests force.
        grad: the differentiable version of ``op`` in ``netcl.autograd.ops``: its name there
            (called like ``op``, with the same samples), or a function of that module returning
            the callable (for rows whose ``op`` adapts the call); ``None``: no gradient. Rows
            live below netcl-autograd, so they name it rather than import it.
        kinks: points where the derivative is a convention (:class:`Kink`): finite differences
            stay away from them (:func:`away_from_kinks`); the gradient there must be the
            documented value.
        nan_inputs: samples holding NaN and infinities; the result must have NaN and
            infinities exactly where the reference has them.
    """

    name: str
    op: Callable[..., Any]
    ref: Callable[..., Any]
    samples: Sequence[Sample]
    errors: Sequence[tuple[tuple[Any, ...], dict[str, Any], type[Exception], str]] = ()
    dtypes: tuple[str, ...] = ("float32", "float16", "float64")
    scale: float = 1.0
    variants: tuple[Any, ...] = field(default=())
    grad: str | Callable[[Any], Callable[..., Any]] | None = None
    kinks: Sequence[Kink] = ()
    nan_inputs: Sequence[Sample] = ()


def away_from_kinks(args: tuple[Any, ...], kinks: Sequence[Kink],
                    margin: float = 1e-3) -> tuple[Any, ...]:
    """``args`` with every float-array element nearer than ``margin`` to a kink moved to
    ``margin`` from it, so that central finite differences never straddle a kink.

    A one-operand kink moves the first float array's elements off ``at[0]``; a tie moves the
    second float operand away from the first (the array one, where the other is a number).

    Examples:
        >>> x = np.array([-1.0, 0.0, 0.0004, 2.0])
        >>> away_from_kinks((x,), [Kink((0.0,), (0.0,))])[0].tolist()
        [-1.0, 0.001, 0.001, 2.0]
        >>> a, b = away_from_kinks((np.array([1.0, 2.0]), np.array([1.0, 5.0])),
        ...                        [Kink((1.0, 1.0), (0.5, 0.5))])
        >>> b.tolist()
        [1.001, 5.0]
    """
    out = list(args)
    floats = [k for k, a in enumerate(out) if _is_float_array(a) or isinstance(a, float)]
    for kink in kinks:
        if kink.is_tie() and len(floats) >= 2:
            i, j = floats[0], floats[1]
            if not _is_float_array(out[j]):
                i, j = j, i  # move the array operand off the number
            gap = out[j] - out[i]
            out[j] = np.where(np.abs(gap) < margin, out[i] + np.where(gap < 0, -margin, margin),
                              out[j])
        elif len(kink.at) == 1 and floats and _is_float_array(out[floats[0]]):
            x, p = out[floats[0]], kink.at[0]
            out[floats[0]] = np.where(np.abs(x - p) < margin,
                                      p + np.where(x < p, -margin, margin), x)
    return tuple(out)


def _is_float_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


def to_device(dev: DeviceHandle, value: Any, dtype: str) -> Any:
    """NumPy arrays become Tensors on ``dev`` (floats in ``dtype``, integers kept)."""
    if isinstance(value, np.ndarray):
        keep = value.dtype.kind in "iub"
        target = value.dtype.name if keep and value.dtype.kind != "b" else dtype
        if value.dtype.kind == "b":
            target = "uint8"
        return Tensor.from_host(dev.queue, value, dtype=target)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], np.ndarray):
        return type(value)(to_device(dev, v, dtype) for v in value)
    return value


def offset_view(dev: DeviceHandle, value: np.ndarray[Any, Any], offset: int = 5,
                dtype: str | None = None) -> Tensor:
    """``value`` on ``dev`` as a view ``offset`` elements into a larger buffer (the elements
    before it hold NaN, or -1 for integers), as a slice of a bigger tensor would be.

    Examples:
        >>> from netcl.core.device import manager
        >>> t = offset_view(manager.default("cpu"), np.arange(3.0), offset=2)
        >>> t.offset, t.to_host().tolist()
        (2, [0.0, 1.0, 2.0])
    """
    target = canonical_dtype(dtype or value.dtype.name)
    flat = np.concatenate([np.full(offset, -1 if value.dtype.kind in "iu" else np.nan),
                           value.reshape(-1)])
    whole = Tensor.from_host(dev.queue, flat, dtype=target)
    array = None if whole.array is None else whole.array[offset:].reshape(value.shape)
    # a view of ``whole`` (it keeps ``whole`` alive), moved to the offset
    return dataclasses.replace(reshape(whole, whole.shape), shape=value.shape, offset=offset,
                               array=array)


def _round_to(value: Any, dtype: str) -> Any:
    """Inputs rounded through ``dtype`` so the reference sees what the device sees."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.astype(canonical_dtype(dtype)).astype(np.float64)
    if isinstance(value, (list, tuple)) and value and isinstance(value[0], np.ndarray):
        return type(value)(_round_to(v, dtype) for v in value)
    return value


def check_op(
    dev: DeviceHandle,
    op: Callable[..., Any],
    ref: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any] | None = None,
    dtype: str = "float32",
    scale: float = 1.0,
    out_dtype: str | None = None,
) -> Any:
    """Run ``op`` on ``dev`` and compare with ``ref`` in float64; returns the host result.

    Checks the output's shape and dtype (``out_dtype``, default: ``dtype`` for float outputs of
    the reference, else the reference's integer dtype) and values within the tolerance table.
    Tuples of outputs are checked element by element.
    """
    kwargs = kwargs or {}
    dev_args = tuple(to_device(dev, a, dtype) for a in args)
    dev_kwargs = {k: to_device(dev, v, dtype) for k, v in kwargs.items()}
    got = op(*dev_args, **dev_kwargs)
    ref_args = tuple(_round_to(a, dtype) for a in args)
    ref_kwargs = {k: _round_to(v, dtype) for k, v in kwargs.items()}
    want = ref(*ref_args, **ref_kwargs)
    if isinstance(want, tuple):
        return tuple(
            _compare(g, w, dtype, scale, out_dtype) for g, w in zip(got, want, strict=True)
        )
    return _compare(got, want, dtype, scale, out_dtype)


def _compare(got: Any, want: Any, dtype: str, scale: float, out_dtype: str | None) -> Any:
    if not isinstance(got, Tensor):
        raise AssertionError(f"op returned {type(got).__name__}, expected a Tensor")
    want = np.asarray(want)
    expect_dtype = out_dtype or (
        canonical_dtype(dtype) if want.dtype.kind == "f" else want.dtype.name
    )
    if want.dtype.kind == "b":
        expect_dtype = out_dtype or "uint8"
    host = got.to_host()
    if got.shape != want.shape:
        raise AssertionError(f"shape {got.shape} != reference {want.shape}")
    if got.dtype != expect_dtype:
        raise AssertionError(f"dtype {got.dtype} != expected {expect_dtype}")
    if is_float(got.dtype):
        assert_close(host, want, got.dtype, scale)
    else:
        np.testing.assert_array_equal(host, want)
    return host


def check_error(
    dev: DeviceHandle,
    op: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    exc: type[Exception],
    pattern: str,
    dtype: str = "float32",
) -> None:
    """Assert that ``op`` raises ``exc`` whose message matches ``pattern``."""
    dev_args = tuple(to_device(dev, a, dtype) for a in args)
    dev_kwargs = {k: to_device(dev, v, dtype) for k, v in kwargs.items()}
    try:
        op(*dev_args, **dev_kwargs)
    except exc as err:
        if not re.search(pattern, str(err)):
            raise AssertionError(f"message {str(err)!r} does not match {pattern!r}") from err
        return
    raise AssertionError(f"expected {exc.__name__} matching {pattern!r}, nothing was raised")


def one_opencl_cpu_device(dev: DeviceHandle) -> str | None:
    """Why to skip ``dev`` for tests whose kernels are slow to build and do not depend on the
    CPU device (Intel's runtime builds in ~20 s what PoCL builds in ~70): ``None`` for a GPU or
    for the one OpenCL CPU device of the machine that runs them (Intel's where present, else
    the first), a reason for the NumPy backend and the other OpenCL CPU devices. A machine with
    any OpenCL CPU device still runs each such test once.

    Examples:
        >>> from netcl.core.device import manager
        >>> one_opencl_cpu_device(manager.default("cpu"))
        'the NumPy backend runs no OpenCL kernels'
    """
    if dev.backend == "cpu":
        return "the NumPy backend runs no OpenCL kernels"
    if dev.device_type.lower() != "cpu":
        return None
    cpus = [d for d in available_devices()
            if d.backend == "cl" and d.device_type.lower() == "cpu"]
    chosen = next((d for d in cpus if "intel" in d.platform_name.lower()),
                  cpus[0] if cpus else dev)
    if (chosen.device_name, chosen.platform_name) != (dev.device_name, dev.platform_name):
        return f"built on {chosen.platform_name} only (one OpenCL CPU device per machine)"
    return None


def skip_unless_one_opencl_cpu_device(dev: DeviceHandle) -> None:
    """Skip the calling test (``unittest.SkipTest``, which pytest reports as a skip) with
    :func:`one_opencl_cpu_device`'s reason for ``dev``, where it gives one.

    Examples:
        >>> from netcl.core.device import manager
        >>> skip_unless_one_opencl_cpu_device(manager.default("cpu"))
        Traceback (most recent call last):
        ...
        unittest.case.SkipTest: the NumPy backend runs no OpenCL kernels
    """
    reason = one_opencl_cpu_device(dev)
    if reason is not None:
        raise unittest.SkipTest(reason)
