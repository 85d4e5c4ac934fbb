"""The NumPy evaluator's ``c ? g : +0`` bit-mask form gives np.where's bits exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.autograd._cexpr import _where


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("size", [1, 7, 33, 257])
def test_masked_where_equals_np_where_bitwise(dtype: Any, size: int) -> None:
    rng = np.random.default_rng(size)
    a = rng.standard_normal(size).astype(dtype)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], dtype)
    a[: min(size, 5)] = specials[: min(size, 5)]
    cond = rng.standard_normal(size) > 0
    zero = np.asarray(0).astype(dtype)[()]
    got, want = _where(cond, a, zero), np.where(cond, a, zero)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("b", [np.float32(-0.0), np.float32(1.0), np.float64(0.0), 0.0])
def test_other_fills_take_np_where(b: Any) -> None:
    """-0.0, a nonzero fill or another dtype: the general form, same result as np.where."""
    a = np.array([1.0, -2.0, np.nan], np.float32)
    cond = np.array([False, True, False])
    got, want = _where(cond, a, b), np.where(cond, a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_broadcast_condition_takes_np_where() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    cond = np.array([True, False, True])
    np.testing.assert_array_equal(_where(cond, a, np.float32(0)),
                                  np.where(cond, a, np.float32(0)))
