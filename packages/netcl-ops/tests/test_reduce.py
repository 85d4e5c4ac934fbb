"""Reductions on every backend: every kind over contiguous, permuted and size-1 axes, each
kernel variant forced in each float dtype (with multi-stage work-group reductions), integer
dtypes, NaN, empty axes, errors."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.tensor import Tensor
from netcl.core.testing import supports_dtype
from netcl.ops import _reduce
from netcl.ops.testing import OpInfo, Sample, check_error, check_op

VARIANTS = [KernelVariant.REDUCTION_SEQUENTIAL, KernelVariant.REDUCTION_PARALLEL,
            KernelVariant.REDUCTION_WORKGROUP]
FLOATS = ["float32", "float16", "float64"]


def _x(shape: tuple[int, ...], seed: int = 0) -> Any:
    return np.random.default_rng(seed + sum(shape)).uniform(-2.0, 3.0, size=shape)


def _ties(shape: tuple[int, ...]) -> Any:
    return np.random.default_rng(sum(shape)).integers(0, 4, size=shape).astype(float)


# (shape, axis, keepdims): contiguous rows and columns, a permuted pair of axes, size-1 axes
# that make a non-adjacent pair adjacent, negative axes, the whole tensor, an odd middle axis
_CASES = [
    ((7,), None, False),
    ((33, 257), 1, False),
    ((257, 33), 0, True),
    ((3, 5, 7), (0, 2), False),
    ((4, 1, 6), (0, 2), True),
    ((2, 3, 4), -1, True),
    ((2, 33, 3), 1, False),
    ((4, 3), None, True),
]


def _samples(cases: Any = _CASES, data: Any = _x) -> list[Any]:
    return [((data(shape),), {"axis": axis, "keepdims": keep}) for shape, axis, keep in cases]


def _argmax_samples() -> list[Any]:
    cases = [((7,), None, False), ((33, 257), 1, False), ((257, 33), 0, True),
             ((2, 3, 4), -2, False), ((3, 4), None, True)]
    return _samples(cases, _ties)


def _np_argmax(a: Any, axis: Any, keepdims: bool) -> Any:
    return np.argmax(a, axis=axis, keepdims=keepdims)


# rows of: a NaN, both infinities, +inf, -inf, zeros of both signs and a plain row
_SPECIAL = np.array([[1.0, np.nan, 3.0, -2.0], [np.inf, 1.0, -np.inf, 0.0],
                     [np.inf, 2.0, 5.0, 0.5], [-np.inf, -1.0, 4.0, 2.0],
                     [0.0, -0.0, 0.0, -0.0], [1.5, -2.5, 3.0, 0.25]])
_NAN_INPUTS: list[Sample] = [((_SPECIAL,), {"axis": 1, "keepdims": False}),
                             ((_SPECIAL[1:],), {"axis": 0, "keepdims": True}),
                             ((_SPECIAL,), {"axis": None, "keepdims": False})]
_X34 = _x((3, 4))

TABLE = [
    OpInfo("sum", ops.sum, np.sum, _samples(), grad="sum", nan_inputs=_NAN_INPUTS, errors=[
        ((_X34,), {"axis": 2}, IndexError, "sum: axis 2 is out of range"),
        ((_X34,), {"axis": (0, -2)}, IndexError, "sum: repeated axis")]),
    OpInfo("mean", ops.mean, np.mean, _samples(), grad="mean", nan_inputs=_NAN_INPUTS),
    OpInfo("max", ops.max, np.max, _samples(), grad="max", nan_inputs=_NAN_INPUTS),
    OpInfo("min", ops.min, np.min, _samples(), grad="min", nan_inputs=_NAN_INPUTS),
    OpInfo("var", ops.var, lambda a, axis, keepdims: np.var(a, axis, ddof=1, keepdims=keepdims),
           _samples(), grad="var", nan_inputs=_NAN_INPUTS),
    OpInfo("argmax", ops.argmax, _np_argmax, _argmax_samples(), nan_inputs=_NAN_INPUTS, errors=[
        ((_X34,), {"axis": 5}, IndexError, "argmax: axis 5")]),
]


def _need(dev: DeviceHandle, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")


# Every variant is forced in every dtype: each (input, accumulator, output) dtype triple is a
# program of its own, so a float accumulator or partial in the float64 build, or a lost
# float16 conversion, shows only there.
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
@pytest.mark.parametrize("info", TABLE, ids=lambda i: i.name)
def test_reduction_variants(dev: DeviceHandle, info: OpInfo, variant: KernelVariant,
                            dtype: str) -> None:
    _need(dev, dtype)
    with force_variant(variant):
        for args, kwargs in info.samples:
            check_op(dev, info.op, info.ref, args, kwargs, dtype=dtype, scale=4.0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("info", TABLE, ids=lambda i: i.name)
def test_multistage_workgroup(dev: DeviceHandle, info: OpInfo, dtype: str) -> None:
    """Reduced sizes that split into several work-group chunks, rows and columns: partials
    in the accumulator dtype (float64 for float64, float32 for float16)."""
    _need(dev, dtype)
    data = _ties if info.name == "argmax" else _x
    with force_variant(KernelVariant.REDUCTION_WORKGROUP):
        for shape, axis in (((2, 3001), 1), ((3001, 5), 0), ((5000,), None)):
            check_op(dev, info.op, info.ref, (data(shape),), {"axis": axis, "keepdims": False},
                     dtype=dtype, scale=10.0)


def test_default_selection_large(dev: DeviceHandle) -> None:
    """A 100 K-element sum and argmax through whatever the selector picks."""
    x = _x((100_003,))
    check_op(dev, ops.sum, np.sum, (x,), scale=10.0)
    check_op(dev, ops.argmax, np.argmax, (x,))


INTEGER = [
    ("sum_int32_to_int64", ops.sum, np.sum, np.arange(-50, 250, dtype=np.int32).reshape(3, 100),
     {"axis": 1}),
    ("max_uint8", ops.max, np.max, np.arange(200, dtype=np.uint8).reshape(10, 20), {"axis": 0}),
    ("argmax_int64", ops.argmax, np.argmax, np.array([[3, 9, 9], [-1, -5, -1]]), {"axis": 1}),
]


@pytest.mark.parametrize("case", INTEGER, ids=lambda c: c[0])
def test_integer_reductions(dev: DeviceHandle, case: Any) -> None:
    name, op, ref, x, kwargs = case
    check_op(dev, op, ref, (x,), kwargs, out_dtype="int64" if "argmax" in name or "sum" in name
             else None)


def test_nan_and_ties(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, 1.0]]))
    np.testing.assert_array_equal(ops.max(x, axis=1).to_host(), [np.nan, 5.0])
    np.testing.assert_array_equal(ops.min(x, axis=1).to_host(), [np.nan, 1.0])
    np.testing.assert_array_equal(ops.argmax(x, axis=1).to_host(), [1, 1])
    for variant in VARIANTS:
        with force_variant(variant):
            assert int(ops.argmax(x).to_host()) == 1


def test_empty(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.zeros((0, 3)))
    np.testing.assert_array_equal(ops.sum(x, axis=0).to_host(), np.zeros(3))
    assert np.isnan(ops.mean(x, axis=0).to_host()).all()
    assert ops.sum(x, axis=1).shape == (0,)
    assert ops.max(x, axis=1).shape == (0,)
    y = Tensor.from_host(dev.queue, np.ones((2, 1)))
    assert np.isnan(ops.var(y, axis=1).to_host()).all()  # 1 value, correction 1: 0/0
    np.testing.assert_array_equal(ops.var(y, axis=1, correction=0).to_host(), [0.0, 0.0])


def test_var_correction_and_large_offset(dev: DeviceHandle) -> None:
    x = 1e4 + _x((5, 999))
    check_op(dev, lambda t: ops.var(t, axis=1, ddof=0), lambda a: np.var(a, axis=1), (x,),
             scale=10.0)
    check_op(dev, lambda t: ops.var(t, axis=1, correction=3),
             lambda a: np.var(a, axis=1, ddof=3), (x,), scale=10.0)


# errors of one op are rows of its OpInfo (netcl-autograd's op raises them too); these are
# the others
ERRORS = [
    ("mean_int", lambda x: ops.mean(ops.cast(x, "int32")), TypeError,
     "mean: needs a floating-point tensor, got int32"),
    ("var_int", lambda x: ops.var(ops.cast(x, "uint8")), TypeError, "var: needs a floating"),
    ("max_empty", lambda x: ops.max(ops.getitem(x, (slice(0, 0),)), axis=0), ValueError,
     "max: cannot reduce an empty axis"),
    ("argmax_empty", lambda x: ops.argmax(ops.getitem(x, (slice(0, 0),))), ValueError,
     "argmax: cannot"),
    ("var_ddof", lambda x: ops.var(x, correction=0, ddof=2), ValueError,
     "var: give correction or ddof"),
    ("not_tensor", lambda x: ops.sum(np.ones(3)),  # type: ignore[arg-type]
     TypeError, "sum: input must be a netcl Tensor"),
]


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c[0])
def test_errors(dev: DeviceHandle, case: Any) -> None:
    _, op, exc, pattern = case
    check_error(dev, op, (_x((3, 4)),), {}, exc, pattern)


@pytest.mark.parametrize("info", [i for i in TABLE if i.errors], ids=lambda i: i.name)
def test_row_errors(dev: DeviceHandle, info: OpInfo) -> None:
    for args, kwargs, exc, pattern in info.errors:
        check_error(dev, info.op, args, kwargs, exc, pattern)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
@pytest.mark.parametrize("info", TABLE, ids=lambda i: i.name)
def test_nan_inputs(dev: DeviceHandle, info: OpInfo, variant: KernelVariant, dtype: str) -> None:
    """NaN and infinities in each kernel: NaN and each infinity exactly where NumPy has them
    (a NaN wins max, min and argmax, inf - inf is NaN)."""
    _need(dev, dtype)
    with force_variant(variant), np.errstate(all="ignore"):
        for args, kwargs in info.nan_inputs:
            check_op(dev, info.op, info.ref, args, kwargs, dtype=dtype, scale=4.0)


def test_reduce_sum_is_sum() -> None:
    assert ops.reduce_sum is ops.sum


def test_doctests() -> None:
    assert doctest.testmod(_reduce).failed == 0
