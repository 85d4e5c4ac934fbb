"""triu, tril and masked_fill on every backend against NumPy (odd shapes, batch dims, every
diagonal sign, float and integer dtypes), and their errors."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.ops import _masking


def _x(shape: tuple[int, ...], dtype: str = "float32") -> Any:
    a = np.random.default_rng(sum(shape)).standard_normal(shape) * 4
    return a.astype(np.int64 if dtype == "int64" else np.float64)


@pytest.mark.parametrize("shape", [(1, 1), (7, 33), (2, 3, 5, 4)])
@pytest.mark.parametrize("diagonal", [-2, 0, 1, 40])
def test_triu_tril(dev: DeviceHandle, shape: tuple[int, ...], diagonal: int) -> None:
    for dtype in ("float32", "float16", "int64"):
        a = _x(shape, dtype)
        t = Tensor.from_host(dev.queue, a, dtype=dtype)
        for op, ref in ((ops.triu, np.triu), (ops.tril, np.tril)):
            got = op(t, diagonal)
            assert got.dtype == dtype and got.shape == shape
            want = ref(a.astype(got.to_host().dtype), diagonal)
            np.testing.assert_array_equal(got.to_host(), want)


def test_tril_of_ones_is_the_causal_mask(dev: DeviceHandle) -> None:
    ones = Tensor.from_host(dev.queue, np.ones((5, 7), np.uint8), dtype="uint8")
    np.testing.assert_array_equal(ops.tril(ones).to_host(), np.tri(5, 7, dtype=np.uint8))


@pytest.mark.parametrize("mask_shape", [(3, 7), (7,), (1, 7), (3, 1)])
def test_masked_fill(dev: DeviceHandle, mask_shape: tuple[int, ...]) -> None:
    a = _x((3, 7))
    a[0, 0] = np.nan  # a NaN not filled stays, a filled one goes
    a[1, 1] = np.nan
    m = np.random.default_rng(1).random(mask_shape) > 0.5
    m.flat[0] = True
    for dtype in ("float32", "float16"):
        t = Tensor.from_host(dev.queue, a, dtype=dtype)
        mt = Tensor.from_host(dev.queue, m)
        got = ops.masked_fill(t, mt, -np.inf)
        assert got.dtype == dtype
        want = np.where(m, -np.inf, a.astype(got.to_host().dtype))
        np.testing.assert_array_equal(got.to_host(), want)
    ti = Tensor.from_host(dev.queue, _x((3, 7), "int64"), dtype="int64")
    got = ops.masked_fill(ti, Tensor.from_host(dev.queue, m), 5)
    assert got.dtype == "int64"
    np.testing.assert_array_equal(got.to_host(), np.where(m, 5, _x((3, 7), "int64")))


def test_errors(dev: DeviceHandle) -> None:
    t = Tensor.from_host(dev.queue, np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"triu: input must have at least 2 dimensions, got "
                                         r"shape \(4,\)"):
        ops.triu(Tensor.from_host(dev.queue, np.zeros(4)))
    with pytest.raises(TypeError, match=r"tril: diagonal must be an int, got 0\.5"):
        ops.tril(t, 0.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="masked_fill: mask must be a uint8"):
        ops.masked_fill(t, t, 0.0)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 4\) must broadcast to the "
                                         r"input's shape \(3, 4\)"):
        ops.masked_fill(t, Tensor.from_host(dev.queue, np.ones((2, 4), bool)), 0.0)
    with pytest.raises(ValueError, match=r"mask of shape \(2, 3, 4\)"):
        ops.masked_fill(t, Tensor.from_host(dev.queue, np.ones((2, 3, 4), bool)), 0.0)
    with pytest.raises(TypeError, match="masked_fill: value must be a number"):
        ops.masked_fill(t, Tensor.from_host(dev.queue, np.ones(4, bool)), "x")  # type: ignore
    ti = Tensor.from_host(dev.queue, np.zeros((3, 4), np.int64), dtype="int64")
    with pytest.raises(ValueError, match=r"value 0\.5 cannot be stored in int64"):
        ops.masked_fill(ti, Tensor.from_host(dev.queue, np.ones(4, bool)), 0.5)


def test_doctests() -> None:
    assert doctest.testmod(_masking).failed == 0
