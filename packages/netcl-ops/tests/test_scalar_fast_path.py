"""Elementwise ops on a Tensor and a Python or NumPy number through the remembered launch
(NOTE [ Elementwise fast path ] in netcl.ops._elementwise_base) on every device: each
repeated call of an (op, tensor layout, number type) gives the slow path's dtype and values,
numbers of another type or on the other side get their own entry, and a number out of range
raises on every call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.ops import _elementwise_base, _elementwise_table

CASES: list[tuple[str, Any, Any, str]] = [
    # (op, tensor dtype, scalar, result dtype)
    ("mul", np.float32, 2.5, "float32"),
    ("mul", np.float32, 3, "float32"),
    ("mul", np.float32, np.float64(0.5), "float32"),
    ("add", np.int32, 7, "int32"),
    ("add", np.int32, 1.5, "float32"),
    ("add", np.int32, True, "int32"),
    ("sub", np.float32, -0.0, "float32"),
]


def _ref(op: str, host: np.ndarray[Any, Any], v: Any, scalar_first: bool, dtype: str) -> Any:
    a, b = (v, host) if scalar_first else (host, v)
    fn = {"mul": np.multiply, "add": np.add, "sub": np.subtract}[op]
    return fn(np.asarray(a, dtype=dtype) if scalar_first else a.astype(dtype),
              b.astype(dtype) if scalar_first else np.asarray(b, dtype=dtype))


@pytest.mark.parametrize("scalar_first", [False, True], ids=["tensor_op_number",
                                                             "number_op_tensor"])
def test_repeated_scalar_ops_match_numpy(dev: DeviceHandle, scalar_first: bool) -> None:
    rng = np.random.default_rng(0)
    for op, dtype, value, out_dtype in CASES:
        host = (rng.standard_normal(33) * 10).astype(dtype)
        x = Tensor.from_host(dev.queue, host)
        fn = getattr(ops, op)
        for v in (value, type(value)(value * 2) if not isinstance(value, bool) else False):
            for _ in range(2):  # the second call goes through the remembered launch
                got = fn(v, x) if scalar_first else fn(x, v)
                assert got.dtype == out_dtype, (op, dtype, v)
                want = _ref(op, host, v, scalar_first, out_dtype)
                np.testing.assert_array_equal(got.to_host(), want)
                assert np.array_equal(np.signbit(got.to_host()), np.signbit(want))


def test_the_remembered_launch_is_used(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    if dev.backend != "cl":
        pytest.skip("the remembered launches are OpenCL's")
    monkeypatch.setattr(_elementwise_base, "_fast", {})  # what earlier tests remembered
    x = Tensor.from_host(dev.queue, np.arange(7, dtype=np.float32))
    ops.mul(x, 2.0)
    mul = _elementwise_table.OPS["mul"]
    assert _elementwise_base.run_fast(mul, [x, 4.0]) is not None
    assert _elementwise_base.run_fast(mul, [x, 4]) is None  # an int: not seen yet
    half = _elementwise_base.run_fast(mul, [x, 0.5])
    assert half is not None
    np.testing.assert_array_equal(half.to_host(), np.arange(7, dtype=np.float32) * 0.5)


def test_an_out_of_range_number_raises_every_call(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.arange(5, dtype=np.int32))
    np.testing.assert_array_equal(ops.mul(x, 3).to_host(), np.arange(5) * 3)
    for _ in range(3):
        with pytest.raises(ValueError, match="scalar 4294967296 is out of range for int32"):
            ops.mul(x, 2**32)
    np.testing.assert_array_equal(ops.mul(x, 3).to_host(), np.arange(5) * 3)
