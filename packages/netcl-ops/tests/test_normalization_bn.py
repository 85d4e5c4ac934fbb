"""Batch-norm kernels (NOTE [ Batch norm kernels ] in netcl.ops._norm_kernels): channels split
over several work-groups, the shifted one-pass variance far from 0, the 4-vector and scalar
paths of the 2-D kernels (HW a multiple of 4 or not, aligned or unaligned views), odd sizes,
every float dtype, and bitwise-equal repeated runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops import batch_norm, batch_norm_backward
from netcl.ops._norm_kernels import bn_splits

DTYPES = ["float32", "float16", "float64"]
# (N, C, H, W): HW % 4 == 0 (vectors) and odd HW; 8 x 32 x 32 splits each channel (M = 8192)
SHAPES = [(8, 3, 32, 32), (3, 5, 7, 7), (2, 4, 1, 4), (33, 7, 1, 1), (1, 2, 257, 1)]


def _need(dev: DeviceHandle, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev} has no {dtype}")


def _ref(x: Any, g: Any, w: Any, b: Any, eps: float = 1e-5) -> tuple[Any, ...]:
    axes = (0, 2, 3)
    mu = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(var + eps)
    xhat = (x - mu) * inv
    wv = w.reshape(1, -1, 1, 1)
    y = xhat * wv + b.reshape(1, -1, 1, 1)
    m = x.size // x.shape[1]
    sg = g.sum(axis=axes, keepdims=True)
    sgx = (g * xhat).sum(axis=axes, keepdims=True)
    dx = wv * inv * (g - sg / m - xhat * sgx / m)
    return y, mu.reshape(-1), inv.reshape(-1), dx, sgx.reshape(-1), sg.reshape(-1)


def _inputs(shape: tuple[int, ...], dtype: str, shift: float = 1.0) -> tuple[Any, ...]:
    rng = np.random.default_rng(sum(shape))
    c = shape[1]

    def cast(a: Any) -> Any:
        return a.astype(dtype).astype(np.float64)

    return (cast(rng.standard_normal(shape) * 2 + shift), cast(rng.standard_normal(shape)),
            cast(rng.uniform(0.5, 1.5, c)), cast(rng.standard_normal(c)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_forward_backward(dev: DeviceHandle, shape: tuple[int, ...], dtype: str) -> None:
    _need(dev, dtype)
    x, g, w, b = _inputs(shape, dtype)
    q = dev.queue
    xt, gt, wt, bt = (Tensor.from_host(q, a, dtype=dtype) for a in (x, g, w, b))
    rm = Tensor.from_host(q, np.zeros(shape[1]), dtype=dtype)
    rv = Tensor.from_host(q, np.ones(shape[1]), dtype=dtype)
    y, mean, invstd = batch_norm(xt, rm, rv, wt, bt, training=True)
    ry, rmu, rinv, rdx, rdw, rdb = _ref(x, g, w, b)
    assert_close(y.to_host(), ry, dtype, scale=4)
    assert_close(mean.to_host(), rmu, mean.dtype, scale=0.5)
    assert_close(invstd.to_host(), rinv, invstd.dtype, scale=0.5)
    dx, dw, db = batch_norm_backward(gt, xt, mean, invstd, wt)
    assert dw.dtype == db.dtype == dtype
    assert_close(dx.to_host(), rdx, dtype, scale=8)
    assert_close(dw.to_host(), rdw, dtype, scale=8)
    assert_close(db.to_host(), rdb, dtype, scale=8)
    ye = batch_norm(xt, rm, rv, wt, bt, training=False, fuse_relu=True)
    rmh, rvh = rm.to_host().astype(np.float64), rv.to_host().astype(np.float64)
    want = np.maximum((x - rmh.reshape(1, -1, 1, 1)) / np.sqrt(rvh.reshape(1, -1, 1, 1) + 1e-5)
                      * w.reshape(1, -1, 1, 1) + b.reshape(1, -1, 1, 1), 0)
    assert_close(ye.to_host(), want, dtype, scale=4)


def test_one_pass_variance_far_from_zero(dev: DeviceHandle) -> None:
    """Inputs around 1e4 with unit spread: the shift by the channel's first element keeps the
    float32 one-pass variance close (an unshifted sum of squares would lose it all)."""
    x, g, w, b = _inputs((8, 3, 32, 32), "float32", shift=1e4)
    xt = Tensor.from_host(dev.queue, x, dtype="float32")
    _, mean, invstd = batch_norm(xt, None, None, training=True)
    _, rmu, rinv, *_ = _ref(x, g, w, b)
    np.testing.assert_allclose(mean.to_host(), rmu, rtol=1e-6)
    np.testing.assert_allclose(invstd.to_host(), rinv, rtol=1e-3)


@pytest.mark.parametrize("start", [1, 2, 4])
def test_offset_views(dev: DeviceHandle, start: int) -> None:
    """Views 1, 2 or 4 elements into their buffers: unaligned ones take the scalar path."""
    shape = (4, 3, 4, 8)
    n = int(np.prod(shape))
    x, g, w, b = _inputs(shape, "float32")
    q = dev.queue

    def view(a: Any) -> Tensor:
        flat = Tensor.from_host(q, np.concatenate([np.zeros(start), a.reshape(-1)]),
                                dtype="float32")
        return ops.reshape(ops.getitem(flat, (slice(start, start + n),)), shape)

    xt, gt = view(x), view(g)
    wt, bt = (Tensor.from_host(q, a, dtype="float32") for a in (w, b))
    y, mean, invstd = batch_norm(xt, None, None, wt, bt, training=True)
    dx, _, _ = batch_norm_backward(gt, xt, mean, invstd, wt)
    ry, _, _, rdx, _, _ = _ref(x, g, w, b)
    assert_close(y.to_host(), ry, "float32", scale=4)
    assert_close(dx.to_host(), rdx, "float32", scale=8)


def test_bitwise_reproducible(dev: DeviceHandle) -> None:
    x, g, w, b = _inputs((8, 3, 32, 32), "float32")
    q = dev.queue
    xt, gt, wt, bt = (Tensor.from_host(q, a, dtype="float32") for a in (x, g, w, b))

    def run() -> list[bytes]:
        y, mean, invstd = batch_norm(xt, None, None, wt, bt, training=True)
        grads = batch_norm_backward(gt, xt, mean, invstd, wt)
        return [t.to_host().tobytes() for t in (y, mean, invstd, *grads)]

    assert run() == run()


def test_splits() -> None:
    class Device:
        max_compute_units = 132

    dev = Device()
    assert bn_splits(dev, 64, 128 * 1024) == (17, 7711)  # 1088 groups
    assert bn_splits(dev, 512, 128 * 16) == (1, 2048)  # too few elements to split
    groups, chunk = bn_splits(dev, 256, 32 * 56 * 56)
    assert groups == 5 and groups * chunk >= 32 * 56 * 56
