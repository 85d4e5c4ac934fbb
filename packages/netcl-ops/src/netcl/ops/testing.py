"""The one helper every op test uses (``../shared/CONVENTIONS.md`` 5-6).

:func:`check_op` builds seeded inputs on a device in a dtype, runs the op, and compares shape,
dtype and values with a float64 NumPy reference within the per-dtype tolerance table of
:mod:`netcl.core.testing`. :func:`check_error` asserts the documented typed error.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netcl.core.device import DeviceHandle
from netcl.core.dtypes import canonical_dtype, is_float
from netcl.core.tensor import Tensor, reshape
from netcl.core.testing import TOLERANCES

__all__ = ["OpInfo", "check_error", "check_op", "offset_view", "to_device"]


@dataclass(frozen=True)
class OpInfo:
    """One row of an op test table.

    Args:
        name: the op's name (test ids come from it).
        op: the netcl op, called with Tensors in place of the sample's arrays.
        ref: the float64 NumPy reference, called with the sample's arrays.
        samples: ``(args, kwargs)`` pairs; ndarray args become Tensors of the tested dtype.
        errors: ``(args, kwargs, exception type, message regex)`` rows.
        dtypes: dtypes to test.
        scale: tolerance multiplier for ops that accumulate error (matmul, conv).
    """

    name: str
    op: Callable[..., Any]
    ref: Callable[..., Any]
    samples: Sequence[tuple[tuple[Any, ...], dict[str, Any]]]
    errors: Sequence[tuple[tuple[Any, ...], dict[str, Any], type[Exception], str]] = ()
    dtypes: tuple[str, ...] = ("float32", "float16", "float64")
    scale: float = 1.0
    variants: tuple[Any, ...] = field(default=())


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
        rtol, atol = TOLERANCES[canonical_dtype(got.dtype)]
        np.testing.assert_allclose(host.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol * scale, atol=atol * scale)
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
