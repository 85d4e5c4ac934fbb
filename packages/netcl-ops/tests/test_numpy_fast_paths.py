"""The NumPy backend's fast paths (wide im2col convolution, tiled max pooling, batch norm in
the compute type) against float64 references and the general paths they stand in for, on
every backend: the same calls on OpenCL must agree, so each test runs everywhere."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops import (
    batch_norm,
    batch_norm_backward,
    conv2d,
    conv2d_backward_data,
    conv2d_backward_weight,
    max_pool2d,
    max_pool2d_backward,
)

WIDE = [  # x shape, weight shape, padding, dilation, groups: all stride 1 (the wide path)
    ((3, 2, 7, 5), (4, 2, 3, 3), 1, 1, 1),
    ((2, 4, 9, 6), (6, 2, 3, 2), (2, 0), (2, 1), 2),
    ((1, 3, 5, 5), (3, 1, 3, 3), 0, 1, 3),
    ((2, 6, 4, 7), (4, 3, 1, 3), (0, 1), 1, 2),
    ((5, 1, 8, 8), (16, 1, 3, 3), 1, 1, 1),
]


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def _windows(xp: Any, r: int, s: int, dil: tuple[int, int], oh: int, ow: int) -> Any:
    """(N, C, R, S, OH, OW) float64 taps of padded ``xp`` (stride 1)."""
    out = np.empty((*xp.shape[:2], r, s, oh, ow))
    for a in range(r):
        for b in range(s):
            out[:, :, a, b] = xp[:, :, a * dil[0]:a * dil[0] + oh, b * dil[1]:b * dil[1] + ow]
    return out


def _refs(x: Any, w: Any, gy: Any, padding: Any, dilation: Any, groups: int
          ) -> tuple[Any, Any, Any]:
    """Forward, data gradient and weight gradient of a stride-1 convolution, in float64."""
    (ph, pw), dil = _pair(padding), _pair(dilation)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh, ow = gy.shape[2:]
    taps = _windows(xp, r, s, dil, oh, ow).reshape(n, groups, cg, r, s, oh, ow)
    wg = w.reshape(groups, k // groups, cg, r, s)
    gg = gy.reshape(n, groups, k // groups, oh, ow)
    y = np.einsum("ngcrsij,gkcrs->ngkij", taps, wg).reshape(n, k, oh, ow)
    dw = np.einsum("ngcrsij,ngkij->gkcrs", taps, gg).reshape(w.shape)
    dxp = np.zeros_like(xp)
    dtaps = np.einsum("gkcrs,ngkij->ngcrsij", wg, gg).reshape(n, c, r, s, oh, ow)
    for a in range(r):
        for b in range(s):
            dxp[:, :, a * dil[0]:a * dil[0] + oh, b * dil[1]:b * dil[1] + ow] += dtaps[:, :, a, b]
    return y, dxp[:, :, ph:ph + h, pw:pw + wd], dw


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", WIDE, ids=str)
def test_stride_one_conv_and_gradients(dev: DeviceHandle, case: Any, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev} has no {dtype}")
    xs, ws, padding, dilation, groups = case
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    q = dev.queue
    xt, wt = Tensor.from_host(q, x, dtype=dtype), Tensor.from_host(q, w, dtype=dtype)
    y = conv2d(xt, wt, padding=padding, dilation=dilation, groups=groups)
    gy = rng.standard_normal(y.shape)
    want_y, want_dx, want_dw = _refs(x, w, gy, padding, dilation, groups)
    gt = Tensor.from_host(q, gy, dtype=dtype)
    dx = conv2d_backward_data(gt, wt, xs, padding=padding, dilation=dilation, groups=groups)
    dw = conv2d_backward_weight(xt, gt, ws, padding=padding, dilation=dilation, groups=groups)
    scale = 4 * ws[1] * ws[2] * ws[3]  # sums of that many products
    assert_close(y.to_host(), want_y, dtype, scale=scale)
    assert_close(dx.to_host(), want_dx, dtype, scale=scale)
    assert_close(dw.to_host(), want_dw, dtype, scale=4 * xs[0] * y.shape[2] * y.shape[3])
    assert (y.dtype, dx.dtype, dw.dtype) == (dtype, dtype, dtype)


def _first_max(x: Any, k: tuple[int, int]) -> tuple[Any, Any]:
    """Tiled max pooling by loops: the first maximum of each window, or its first NaN."""
    n, c, h, w = x.shape
    oh, ow = h // k[0], w // k[1]
    y, idx = np.empty((n, c, oh, ow)), np.empty((n, c, oh, ow), np.int64)
    for pos in np.ndindex(n, c, oh, ow):
        best, at = -np.inf, -1
        for a in range(k[0]):
            for b in range(k[1]):
                r, s = pos[2] * k[0] + a, pos[3] * k[1] + b
                v = x[pos[0], pos[1], r, s]
                if at < 0 or v > best or (np.isnan(v) and not np.isnan(best)):
                    best, at = v, r * w + s
        y[pos], idx[pos] = best, at
    return y, idx


@pytest.mark.parametrize("shape,k", [((2, 3, 8, 8), (2, 2)), ((1, 2, 7, 9), (3, 2)),
                                     ((3, 1, 6, 5), (1, 1))], ids=str)
def test_tiled_max_pool_ties_nan_and_backward(dev: DeviceHandle, shape: Any, k: Any) -> None:
    rng = np.random.default_rng(5)
    x = np.round(rng.standard_normal(shape) * 2)  # many ties
    x[0, 0, 0, :3] = np.nan  # a NaN after a number, and NaN ties
    x[-1, -1, -2:, -2:] = -np.inf
    want_y, want_idx = _first_max(x, k)
    q = dev.queue
    xt = Tensor.from_host(q, x, dtype="float32")
    y, idx = max_pool2d(xt, k, return_indices=True)
    np.testing.assert_array_equal(y.to_host(), want_y.astype(np.float32))
    np.testing.assert_array_equal(idx.to_host(), want_idx)
    g = rng.standard_normal(y.shape)
    dx = max_pool2d_backward(Tensor.from_host(q, g, dtype="float32"), idx, shape, k)
    want_dx = np.zeros(x.size)
    planes = np.arange(0, x.size, shape[2] * shape[3]).reshape(shape[0], shape[1], 1, 1)
    np.add.at(want_dx, (want_idx + planes).reshape(-1), g.reshape(-1))
    assert_close(dx.to_host(), want_dx.reshape(shape), "float32")


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_batch_norm_about_a_large_mean(dev: DeviceHandle, dtype: str) -> None:
    """Statistics taken about the mean: a channel mean far above its spread loses nothing."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev} has no {dtype}")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5, 3, 3, 7)) + np.array([0.0, 300.0, -40.0]).reshape(1, 3, 1, 1)
    x = x.astype(dtype).astype(np.float64)  # what the device holds
    q = dev.queue
    xt = Tensor.from_host(q, x, dtype=dtype)
    y, mean, invstd = batch_norm(xt, None, None)
    mu, var = x.mean(axis=(0, 2, 3), keepdims=True), x.var(axis=(0, 2, 3), keepdims=True)
    xhat = (x - mu) / np.sqrt(var + 1e-5)
    assert_close(y.to_host(), xhat, dtype, scale=4)
    g = rng.standard_normal(x.shape)
    dx, dw, db = batch_norm_backward(Tensor.from_host(q, g, dtype=dtype), xt, mean, invstd)
    assert_close(db.to_host(), g.sum(axis=(0, 2, 3)), dtype, scale=4 * x.size / 3)
    inv = 1 / np.sqrt(var + 1e-5)
    want = inv * (g - g.mean(axis=(0, 2, 3), keepdims=True)
                  - xhat * (g * xhat).mean(axis=(0, 2, 3), keepdims=True))
    assert_close(dx.to_host(), want, dtype, scale=4)
    assert_close(dw.to_host(), (g * xhat).sum(axis=(0, 2, 3)), dtype, scale=4 * x.size / 3)
