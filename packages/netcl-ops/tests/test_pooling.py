"""Pooling ops against naive float64 loops, on every backend, odd sizes, ties and padding."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops import (
    _pooling,
    adaptive_avg_pool2d,
    adaptive_avg_pool2d_backward,
    avg_pool2d,
    avg_pool2d_backward,
    global_avg_pool2d,
    max_pool2d,
    max_pool2d_backward,
)
from netcl.ops import testing as ops_testing
from netcl.ops.testing import check_error, check_op, offset_view

CASES = [  # shape, kernel, stride, padding, dilation
    ((1, 1, 7, 7), 2, None, 0, 1),
    ((2, 3, 7, 9), 3, 2, 1, 1),
    ((1, 2, 33, 5), (3, 1), (2, 1), (1, 0), 1),
    ((2, 1, 8, 8), 2, 1, 0, 2),
]


def _out(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else v


def ref_max(x: Any, k: Any, s: Any, p: Any, d: Any) -> tuple[Any, Any]:
    (kh, kw), (ph, pw), (dh, dw) = _pair(k), _pair(p), _pair(d)
    sh, sw = _pair(k if s is None else s)
    n, c, h, w = x.shape
    oh, ow = _out(h, kh, sh, ph, dh), _out(w, kw, sw, pw, dw)
    y = np.full((n, c, oh, ow), -np.inf)
    idx = np.zeros((n, c, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    r, q = i * sh - ph + a * dh, j * sw - pw + b * dw
                    if 0 <= r < h and 0 <= q < w:
                        better = x[:, :, r, q] > y[:, :, i, j]
                        y[:, :, i, j] = np.where(better, x[:, :, r, q], y[:, :, i, j])
                        idx[:, :, i, j] = np.where(better, r * w + q, idx[:, :, i, j])
    return y, idx


def _out_ceil(n: int, k: int, s: int, p: int) -> int:
    """PyTorch's ceil_mode output size: the last window must start inside input or padding."""
    out = -(-(n + 2 * p - k) // s) + 1
    return out - 1 if (out - 1) * s >= n + p else out


def ref_avg(x: Any, k: Any, s: Any, p: Any, include: bool = True, ceil: bool = False) -> Any:
    """PyTorch's avg_pool2d, loop for loop (aten AvgPoolKernel): the divisor is the window
    clipped to the padded input with count_include_pad, else clipped to the input."""
    (kh, kw), (ph, pw) = _pair(k), _pair(p)
    sh, sw = _pair(k if s is None else s)
    n, c, h, w = x.shape
    size = _out_ceil if ceil else (lambda n_, k_, s_, p_: _out(n_, k_, s_, p_, 1))
    oh, ow = size(h, kh, sh, ph), size(w, kw, sw, pw)
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, q0 = i * sh - ph, j * sw - pw
            r1, q1 = min(r0 + kh, h + ph), min(q0 + kw, w + pw)
            pool_size = (r1 - r0) * (q1 - q0)
            r0, q0, r1, q1 = max(r0, 0), max(q0, 0), min(r1, h), min(q1, w)
            win = x[:, :, r0:r1, q0:q1]
            y[:, :, i, j] = win.sum(axis=(2, 3)) / (pool_size if include else
                                                    (r1 - r0) * (q1 - q0))
    return y


def _dtypes(dev: DeviceHandle) -> list[str]:
    return [d for d in ("float32", "float16", "float64") if supports_dtype(dev, d)]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_max_pool2d(dev: DeviceHandle, case: Any) -> None:
    shape, k, s, p, d = case
    x = np.random.default_rng(0).standard_normal(shape)
    for dtype in _dtypes(dev):
        check_op(dev, lambda t: max_pool2d(t, k, s, p, d), lambda a: ref_max(a, k, s, p, d)[0],
                 (x,), dtype=dtype)
        _, idx = check_op(dev, lambda t: max_pool2d(t, k, s, p, d, return_indices=True),
                          lambda a: ref_max(a, k, s, p, d), (x,), dtype=dtype)
        assert idx.dtype == np.int64


def test_max_pool2d_ties_pick_the_first(dev: DeviceHandle) -> None:
    x = np.zeros((1, 1, 4, 4))
    x[0, 0, 1, 1] = x[0, 0, 0, 1] = 1.0  # two maxima in the first window
    _, idx = check_op(dev, lambda t: max_pool2d(t, 2, return_indices=True),
                      lambda a: ref_max(a, 2, None, 0, 1), (x,))
    assert idx[0, 0, 0, 0] == 1 and idx[0, 0, 1, 1] == 2 * 4 + 2  # all-zero window: first


@pytest.mark.parametrize("case", CASES[:3], ids=str)
def test_max_pool2d_backward(dev: DeviceHandle, case: Any) -> None:
    shape, k, s, p, d = case
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    _, idx = ref_max(x, k, s, p, d)
    g = rng.standard_normal(idx.shape)

    def ref(g_: Any) -> Any:
        dx = np.zeros((shape[0] * shape[1], shape[2] * shape[3]))
        np.add.at(dx, (np.repeat(np.arange(shape[0] * shape[1]), idx[0, 0].size),
                       idx.reshape(-1)), g_.reshape(-1))
        return dx.reshape(shape)

    for dtype in _dtypes(dev):
        check_op(dev, lambda gt, it: max_pool2d_backward(gt, it, shape, k, s, p, d),
                 lambda g_, _i: ref(g_), (g, idx), dtype=dtype)


def _avg_adjoint(shape: Any, k: Any, s: Any, p: Any, include: bool, ceil: bool, g: Any
                 ) -> Any:
    """d/dx of sum(avg_pool(x) * g), by linearity: the reference's adjoint applied to g."""
    size = int(np.prod(shape))
    eye = np.eye(size).reshape(size, *shape)
    jac = np.stack([ref_avg(e, k, s, p, include, ceil) for e in eye])  # (size, *yshape)
    return (jac * g).reshape(size, -1).sum(axis=1).reshape(shape)


@pytest.mark.parametrize("include", [True, False])
@pytest.mark.parametrize("case", CASES[:3], ids=str)
def test_avg_pool2d_and_backward(dev: DeviceHandle, case: Any, include: bool) -> None:
    shape, k, s, p, _ = case
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape)
    g = rng.standard_normal(ref_avg(x, k, s, p, include).shape)
    for dtype in _dtypes(dev):
        check_op(dev, lambda t: avg_pool2d(t, k, s, p, count_include_pad=include),
                 lambda a: ref_avg(a, k, s, p, include), (x,), dtype=dtype)
        check_op(dev, lambda gt: avg_pool2d_backward(gt, shape, k, s, p, include),
                 lambda g_: _avg_adjoint(shape, k, s, p, include, False, g_), (g,), dtype=dtype)


CEIL_CASES = [  # shape, kernel, stride, padding: the last window overhangs input and padding
    ((2, 3, 7, 7), 2, 2, 0),
    ((1, 2, 8, 9), 3, 2, 1),  # rows overhang the padding, columns do not
    ((1, 1, 1, 7), (1, 2), (1, 2), 0),
    ((1, 1, 33, 8), (4, 2), (3, 3), (1, 1)),
]


@pytest.mark.parametrize("include", [True, False])
@pytest.mark.parametrize("case", CEIL_CASES, ids=str)
def test_avg_pool2d_ceil_mode_divides_by_the_window_inside_the_padded_input(
        dev: DeviceHandle, case: Any, include: bool) -> None:
    shape, k, s, p = case
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape)
    g = rng.standard_normal(ref_avg(x, k, s, p, include, ceil=True).shape)
    for dtype in _dtypes(dev):
        check_op(dev, lambda t: avg_pool2d(t, k, s, p, include, ceil_mode=True),
                 lambda a: ref_avg(a, k, s, p, include, ceil=True), (x,), dtype=dtype)
        check_op(dev, lambda gt: avg_pool2d_backward(gt, shape, k, s, p, include,
                                                     ceil_mode=True),
                 lambda g_: _avg_adjoint(shape, k, s, p, include, True, g_), (g,), dtype=dtype)


def test_avg_pool2d_ceil_mode_issue_example(dev: DeviceHandle) -> None:
    """The issue's case: 2x3x7x7, k2 s2, ceil_mode, count_include_pad. The corner window holds
    x[..., 6, 6] alone and lies outside the (zero) padding, so PyTorch divides by 1: it gave
    0.2897 (1.1589 / 4), PyTorch gives 1.1589."""
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 7))
    x[1, 2, 6, 6] = 1.1589
    for dtype in ("float32", "float64"):
        if not supports_dtype(dev, dtype):
            continue
        y = check_op(dev, lambda t: avg_pool2d(t, 2, 2, 0, True, ceil_mode=True),
                     lambda a: ref_avg(a, 2, 2, 0, True, ceil=True), (x,), dtype=dtype)
        assert y.shape == (2, 3, 4, 4)
        assert y[1, 2, 3, 3] == pytest.approx(1.1589, rel=1e-6)  # was 0.2897
        assert_close(y[:, :, :3, 3], x[:, :, 0:6:2, 6] / 2 + x[:, :, 1:6:2, 6] / 2, dtype,
                     scale=0.1)


def test_avg_pool2d_backward_checks_the_gradient_shape(dev: DeviceHandle) -> None:
    g = np.ones((1, 1, 4, 4))  # ceil_mode's shape for 7x7, k2 s2; floor mode gives 3x3
    check_error(dev, lambda gt: avg_pool2d_backward(gt, (1, 1, 7, 7), 2), (g,), {}, ValueError,
                r"avg_pool2d_backward: grad must have shape \(1, 1, 3, 3\).*ceil_mode=False")


def test_pooling_reads_views_with_an_element_offset(dev: DeviceHandle) -> None:
    """Every pooling op, forward and backward, on inputs that start 5 (or 3) elements into
    their buffer, as a slice of a bigger tensor does."""
    rng = np.random.default_rng(6)
    shape = (2, 3, 7, 7)
    x = rng.standard_normal(shape)
    _, idx = ref_max(x, 3, 2, 1, 1)
    g3, g2 = rng.standard_normal((2, 3, 4, 4)), rng.standard_normal((2, 3, 2, 2))
    for dtype in _dtypes(dev):
        xv = offset_view(dev, x, 5, dtype)
        xr = x.astype(dtype).astype(np.float64)
        g3r, g2r = (a.astype(dtype).astype(np.float64) for a in (g3, g2))
        g3v, g2v = offset_view(dev, g3, 3, dtype), offset_view(dev, g2, 5, dtype)
        y, i = max_pool2d(xv, 3, 2, 1, return_indices=True)
        assert_close(y.to_host(), ref_max(xr, 3, 2, 1, 1)[0], dtype)
        np.testing.assert_array_equal(i.to_host(), idx)
        dx = max_pool2d_backward(g3v, offset_view(dev, idx, 7), shape, 3, 2, 1)
        plain = max_pool2d_backward(Tensor.from_host(dev.queue, g3r, dtype=dtype),
                                    Tensor.from_host(dev.queue, idx), shape, 3, 2, 1)
        assert_close(dx.to_host(), plain.to_host(), dtype)
        assert_close(avg_pool2d(xv, 3, 2, 1).to_host(), ref_avg(xr, 3, 2, 1), dtype)
        assert_close(avg_pool2d_backward(g3v, shape, 3, 2, 1).to_host(),
                     _avg_adjoint(shape, 3, 2, 1, True, False, g3r), dtype)
        assert_close(adaptive_avg_pool2d(xv, 2).to_host(), adaptive_avg_pool2d(
            Tensor.from_host(dev.queue, xr, dtype=dtype), 2).to_host(), dtype)
        assert_close(adaptive_avg_pool2d_backward(g2v, shape).to_host(),
                     adaptive_avg_pool2d_backward(Tensor.from_host(dev.queue, g2r, dtype=dtype),
                                                  shape).to_host(), dtype)


@pytest.mark.parametrize("shape,out", [((2, 3, 7, 7), 1), ((1, 2, 9, 5), (4, 3)),
                                       ((1, 1, 33, 7), 5)], ids=str)
def test_adaptive_avg_pool2d(dev: DeviceHandle, shape: Any, out: Any) -> None:
    oh, ow = _pair(out)
    h, w = shape[2:]
    rb = [(i * h // oh, -(-(i + 1) * h // oh)) for i in range(oh)]
    cb = [(j * w // ow, -(-(j + 1) * w // ow)) for j in range(ow)]

    def ref(a: Any) -> Any:
        return np.array([[a[:, :, r0:r1, c0:c1].mean(axis=(2, 3)) for c0, c1 in cb]
                         for r0, r1 in rb]).transpose(2, 3, 0, 1)

    def ref_backward(g: Any) -> Any:
        dx = np.zeros(shape)
        for i, (r0, r1) in enumerate(rb):
            for j, (c0, c1) in enumerate(cb):
                dx[:, :, r0:r1, c0:c1] += g[:, :, i:i + 1, j:j + 1] / ((r1 - r0) * (c1 - c0))
        return dx

    x = np.random.default_rng(3).standard_normal(shape)
    g = np.random.default_rng(4).standard_normal((shape[0], shape[1], oh, ow))
    for dtype in _dtypes(dev):
        check_op(dev, lambda t: adaptive_avg_pool2d(t, out), ref, (x,), dtype=dtype)
        check_op(dev, lambda gt: adaptive_avg_pool2d_backward(gt, shape), ref_backward, (g,),
                 dtype=dtype)
        if out == 1:
            check_op(dev, global_avg_pool2d, ref, (x,), dtype=dtype)


def test_pooling_empty_batch(dev: DeviceHandle) -> None:
    x = np.zeros((0, 2, 5, 5))
    g2, g5 = np.zeros((0, 2, 2, 2)), np.zeros((0, 2, 5, 5))
    idx = np.zeros((0, 2, 2, 2), np.int64)
    for dtype in _dtypes(dev):
        check_op(dev, lambda t: max_pool2d(t, 2, return_indices=True),
                 lambda a: ref_max(a, 2, None, 0, 1), (x,), dtype=dtype)
        check_op(dev, lambda t: avg_pool2d(t, 3, 1, 1), lambda a: ref_avg(a, 3, 1, 1), (x,),
                 dtype=dtype)
        check_op(dev, lambda t: adaptive_avg_pool2d(t, 2), lambda a: g2, (x,), dtype=dtype)
        check_op(dev, lambda gt, it: max_pool2d_backward(gt, it, x.shape, 2),
                 lambda *_: x, (g2, idx), dtype=dtype)
        check_op(dev, lambda gt: avg_pool2d_backward(gt, x.shape, 3, 1, 1), lambda _: x, (g5,),
                 dtype=dtype)
        check_op(dev, lambda gt: adaptive_avg_pool2d_backward(gt, x.shape), lambda _: x, (g2,),
                 dtype=dtype)


def test_pooling_errors(dev: DeviceHandle) -> None:
    x = np.zeros((2, 3, 4))
    check_error(dev, lambda t: max_pool2d(t, 2), (x,), {}, ValueError,
                r"max_pool2d: input must be 4-D \(N, C, H, W\), got shape \(2, 3, 4\)")
    x4 = np.zeros((1, 1, 4, 4))
    check_error(dev, lambda t: max_pool2d(t, 0), (x4,), {}, ValueError,
                "kernel_size must be an int >= 1")
    check_error(dev, lambda t: avg_pool2d(t, 2, padding=2), (x4,), {}, ValueError,
                "padding .* must be at most half the kernel size")
    check_error(dev, lambda t: max_pool2d(t, 9), (x4,), {}, ValueError, "too small for kernel")
    check_error(dev, lambda t: max_pool2d(t, 2), (np.zeros((1, 1, 4, 4), np.int64),), {},
                TypeError, "must be floating point, got int64")


def test_doctests() -> None:
    assert doctest.testmod(_pooling).failed == 0
    assert doctest.testmod(ops_testing).failed == 0
