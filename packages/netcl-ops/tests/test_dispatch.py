"""Remembered launches give the results of fresh ones: the eager dispatch caches.

Each test repeats calls that hit a cache (the elementwise fast path and its scalar form,
remembered reductions and GEMM launches, output tensors, kernel arguments set once) with other
buffers, offsets, scalars and forced variants in between, and checks every result against
NumPy on every backend; errors must still be raised on every call, hit or not.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.kernels.primitives import forget_arguments
from netcl.core.tensor import Tensor, output_tensor
from netcl.core.testing import supports_dtype
from netcl.ops import _elementwise, _elementwise_base


def _x(dev: DeviceHandle, shape: tuple[int, ...], seed: int,
       dtype: Any = np.float32) -> tuple[np.ndarray[Any, Any], Tensor]:
    host = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return host, Tensor.from_host(dev.queue, host)


def _close(got: Tensor, want: Any, atol: float = 1e-6) -> None:
    np.testing.assert_allclose(got.to_host(), want, rtol=1e-5, atol=atol)


def test_interleaved_binary_ops_on_other_buffers(dev: DeviceHandle) -> None:
    """One kernel launched with other operands in turn: each launch sees its own buffers."""
    pairs = [(_x(dev, (257,), s), _x(dev, (257,), s + 10)) for s in range(3)]
    for _ in range(3):
        for (ha, a), (hb, b) in pairs:
            _close(ops.add(a, b), ha + hb)
            _close(ops.sub(b, a), hb - ha)
        (ha, a), (hb, b) = pairs[0]
        _close(ops.add(a, a), ha + ha)  # one buffer in both operand slots
        _close(ops.add(b, a), hb + ha)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_scalar_operands_change_between_calls(dev: DeviceHandle, dtype: str) -> None:
    """The scalar form of the fast path fills in each call's scalars (and parameters)."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on this device")
    host = np.arange(-3, 4).astype(dtype)
    x = Tensor.from_host(dev.queue, host)
    for _ in range(2):
        for s in (2, 3, 2, -1, 0):
            _close(ops.mul(x, s), host * s)
            _close(ops.sub(s, x), s - host)
    if dtype != "int32":
        for _ in range(2):  # the sign of a zero scalar reaches the kernel
            for z in (0.0, -0.0, 0.0):
                got = ops.mul(Tensor.from_host(dev.queue, np.ones(3, dtype)), z).to_host()
                assert np.array_equal(np.signbit(got), np.signbit(np.ones(3, dtype) * z))
        for q in (0.1, 0.2, 0.1):
            _close(ops.leaky_relu(x, q), np.where(host > 0, host, host * q))
            _close(ops.clamp(x, -q, q), np.clip(host, -q, q).astype(dtype))


def test_scalar_errors_on_every_call(dev: DeviceHandle) -> None:
    """A cached scalar launch never skips the range check or the released-tensor check."""
    x = Tensor.from_host(dev.queue, np.arange(5, dtype=np.int32))
    ops.add(x, 1)
    for _ in range(2):
        with pytest.raises(ValueError, match="out of range for int32"):
            ops.add(x, 2**40)
    y = Tensor.from_host(dev.queue, np.ones(7, np.float32))
    ops.mul(y, 2.0)
    y.release()
    for _ in range(2):
        with pytest.raises(ValueError, match="tensor was released"):
            ops.mul(y, 2.0)


def test_arguments_set_elsewhere_are_forgotten(dev: DeviceHandle) -> None:
    """A kernel whose arguments were set by other code gets all of them again after
    ``forget_arguments``."""
    if dev.backend != "cl":
        pytest.skip("kernel arguments are OpenCL's")
    ha, a = _x(dev, (33,), 1)
    hb, b = _x(dev, (33,), 2)
    _close(ops.add(a, b), ha + hb)
    entry = _elementwise_base._fast[_elementwise_base._fast_key(_elementwise.OPS["add"], [a, b])]
    kernel = entry.plan.kernel
    _, c = _x(dev, (65,), 3)  # other buffers and sizes set behind the record's back
    kernel.set_args(*[c.buffer if v is not None and not isinstance(v, (np.generic, np.ndarray))
                      else v for v in kernel._netcl_args])
    forget_arguments(kernel)
    _close(ops.add(a, b), ha + hb)


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2)])
def test_remembered_reductions(dev: DeviceHandle, axis: Any) -> None:
    """Repeated reductions of other tensors of one shape, and of a view at an offset."""
    xs = [_x(dev, (5, 33, 3), seed) for seed in range(3)]
    for _ in range(2):
        for host, x in xs:
            _close(ops.sum(x, axis=axis), host.sum(axis=axis), 1e-4)
            _close(ops.mean(x, axis=axis, keepdims=True), host.mean(axis=axis, keepdims=True))
            _close(ops.max(x, axis=axis), host.max(axis=axis))
    for variant in (KernelVariant.REDUCTION_SEQUENTIAL, KernelVariant.REDUCTION_PARALLEL):
        with force_variant(variant):
            host, x = xs[0]
            _close(ops.sum(x, axis=axis), host.sum(axis=axis), 1e-4)


def test_remembered_reduction_result_is_its_own_tensor(dev: DeviceHandle) -> None:
    """A remembered reduction returns a fresh tensor each call; releasing one leaves the next."""
    host, x = _x(dev, (7, 9), 4)
    first = ops.sum(x, axis=1)
    second = ops.sum(x, axis=1)
    first.release()
    _close(second, host.sum(axis=1), 1e-4)
    _close(ops.sum(x, axis=1), host.sum(axis=1), 1e-4)


def test_remembered_matmuls(dev: DeviceHandle) -> None:
    """A repeated GEMM with other operands, a transpose and a batch gets each call's buffers."""
    mats = [_x(dev, (33, 33), seed) for seed in range(3)]
    for _ in range(2):
        for (ha, a), (hb, b) in zip(mats, mats[1:] + mats[:1]):
            _close(ops.matmul(a, b), ha @ hb, 1e-4)
            _close(ops.matmul(a, b, transpose_b=True), ha @ hb.T, 1e-4)
    hb3, b3 = _x(dev, (4, 33, 7), 5)
    for _ in range(2):
        for ha, a in mats:
            _close(ops.matmul(a, b3), ha @ hb3, 1e-4)


def test_output_tensors_are_distinct_and_checked(dev: DeviceHandle) -> None:
    """``output_tensor`` hands out live tensors that share nothing, and its errors stay."""
    q = dev.queue
    outs = [output_tensor(q, (3, 5), "float32") for _ in range(4)]
    for k, t in enumerate(outs):
        assert t.shape == (3, 5) and t.dtype == "float32"
        ops.fill(t, float(k))
    for k, t in enumerate(outs):
        assert np.all(t.to_host() == k)
    assert output_tensor(q, (0, 4), "int32").shape == (0, 4)
    for _ in range(2):
        with pytest.raises(ValueError, match="shape entries must be >= 0"):
            output_tensor(q, (-1,), "float32")
    if dev.backend == "cl" and not supports_dtype(dev, "float64"):
        for _ in range(2):
            with pytest.raises(ValueError, match="cl_khr_fp64"):
                output_tensor(q, (3,), "float64")
