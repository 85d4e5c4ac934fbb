"""Batch norm and layer norm, forward (training and eval, fused ReLU) and backward, against
float64 formulas and finite differences, on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, numeric_grad, supports_dtype
from netcl.ops import (
    _normalization,
    batch_norm,
    batch_norm_backward,
    layer_norm,
    layer_norm_backward,
)
from netcl.ops.testing import check_error, check_op, offset_view

SHAPES = [(7, 3), (2, 3, 5), (4, 2, 3, 3), (1, 5, 7, 7)]
DTYPES = ["float32", "float16", "float64"]


def _need(dev: DeviceHandle, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev} has no {dtype}")


def ref_bn(x: Any, w: Any, b: Any, eps: float = 1e-5) -> Any:
    axes = (0, *range(2, x.ndim))
    view = (1, -1) + (1,) * (x.ndim - 2)
    mu, var = x.mean(axis=axes), x.var(axis=axes)
    return (x - mu.reshape(view)) / np.sqrt(var.reshape(view) + eps) * w.reshape(view) \
        + b.reshape(view)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_batch_norm_training_and_running_stats(dev: DeviceHandle, shape: Any, dtype: str
                                               ) -> None:
    _need(dev, dtype)
    rng = np.random.default_rng(0)
    c = shape[1]
    x = rng.standard_normal(shape) * 3 + 1
    w, b = rng.standard_normal(c), rng.standard_normal(c)
    rm = Tensor.from_host(dev.queue, np.full(c, 0.5), dtype=dtype)
    rv = Tensor.from_host(dev.queue, np.full(c, 2.0), dtype=dtype)
    stats: list[Any] = []

    def op(t: Tensor, wt: Tensor, bt: Tensor) -> Tensor:
        y, mean, invstd = batch_norm(t, rm, rv, wt, bt, training=True, momentum=0.2)
        stats.extend((mean, invstd))
        return y  # type: ignore[no-any-return]

    check_op(dev, op, lambda a, wa, ba: ref_bn(a, wa, ba), (x, w, b), dtype=dtype, scale=4)
    xr = x.astype(dtype).astype(np.float64)  # what the device saw
    axes = (0, *range(2, x.ndim))
    m = x.size // c
    # one blend of statistics computed in the compute type: a tenth of the table (float64:
    # a hundredth, its sums are exact to a few ulps)
    tenth = 0.01 if dtype == "float64" else 0.1
    assert_close(rm.to_host(), 0.8 * 0.5 + 0.2 * xr.mean(axis=axes), dtype, scale=tenth)
    assert_close(rv.to_host(), 0.8 * 2.0 + 0.2 * xr.var(axis=axes) * m / (m - 1), dtype,
                 scale=tenth)
    # the statistics are in the compute type: float64 for float64, float32 otherwise
    sdt = "float64" if dtype == "float64" else "float32"
    assert [t.dtype for t in stats] == [sdt, sdt]
    stats_scale = 0.01 if sdt == "float64" else 0.1
    assert_close(stats[0].to_host(), xr.mean(axis=axes), sdt, scale=stats_scale)
    assert_close(stats[1].to_host(), 1 / np.sqrt(xr.var(axis=axes) + 1e-5), sdt,
                 scale=stats_scale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", [KernelVariant.BATCHNORM_NAIVE,
                                     KernelVariant.BATCHNORM_FUSED], ids=lambda v: v.name)
def test_batch_norm_eval_with_relu(dev: DeviceHandle, variant: KernelVariant, dtype: str
                                   ) -> None:
    _need(dev, dtype)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5, 5))
    rm, rv = rng.standard_normal(4), rng.uniform(0.5, 2, 4)
    w, b = rng.standard_normal(4), rng.standard_normal(4)
    view = (1, 4, 1, 1)

    def ref(a: Any, rma: Any, rva: Any, wa: Any, ba: Any) -> Any:
        y = (a - rma.reshape(view)) / np.sqrt(rva.reshape(view) + 1e-5)
        return np.maximum(y * wa.reshape(view) + ba.reshape(view), 0)

    with force_variant(variant):
        check_op(dev, lambda *t: batch_norm(t[0], t[1], t[2], t[3], t[4], training=False,
                                            fuse_relu=True), ref, (x, rm, rv, w, b),
                 dtype=dtype, scale=4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 2, 3)], ids=str)
def test_batch_norm_backward_matches_finite_differences(dev: DeviceHandle, shape: Any,
                                                        dtype: str) -> None:
    _need(dev, dtype)
    rng = np.random.default_rng(2)
    c = shape[1]
    x, w, b = rng.standard_normal(shape), rng.standard_normal(c), rng.standard_normal(c)
    g = rng.standard_normal(shape)
    want_dx = numeric_grad(lambda a: ref_bn(a, w, b), [x], 0, g)
    want_dw = numeric_grad(lambda wa: ref_bn(x, wa, b), [w], 0, g)
    q = dev.queue
    xt, wt = Tensor.from_host(q, x, dtype=dtype), Tensor.from_host(q, w, dtype=dtype)
    _, mean, invstd = batch_norm(xt, None, None, wt, Tensor.from_host(q, b, dtype=dtype))
    dx, dw, db = batch_norm_backward(Tensor.from_host(q, g, dtype=dtype), xt, mean, invstd, wt)
    # one kernel's rounding: a tenth of the gradient tolerance
    assert_close(dx.to_host(), want_dx, dtype, scale=0.1, grad=True)
    assert_close(dw.to_host(), want_dw, dtype, scale=0.1, grad=True)
    assert_close(db.to_host(), g.sum(axis=(0, *range(2, g.ndim))), dtype)
    if dtype == "float64":  # and the closed form, to float64 precision
        axes = (0, *range(2, x.ndim))
        view = (1, -1) + (1,) * (x.ndim - 2)
        inv = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-5)
        xhat = (x - x.mean(axis=axes, keepdims=True)) * inv
        exact_dx = w.reshape(view) * inv * (g - g.mean(axis=axes, keepdims=True)
                                            - xhat * (g * xhat).mean(axis=axes, keepdims=True))
        assert_close(dx.to_host(), exact_dx, "float64", scale=0.1)
        assert_close(dw.to_host(), (g * xhat).sum(axis=axes), "float64", scale=0.1)


def ref_ln(x: Any, d: int, w: Any = None, b: Any = None, eps: float = 1e-5) -> Any:
    rows = x.reshape(-1, d)
    y = (rows - rows.mean(1, keepdims=True)) / np.sqrt(rows.var(1, keepdims=True) + eps)
    if w is not None:
        y = y * w.reshape(1, d) + b.reshape(1, d)
    return y.reshape(x.shape)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,norm", [((7, 33), (33,)), ((2, 3, 4), (3, 4)),
                                        ((1, 257), (257,))], ids=str)
def test_layer_norm_forward_backward(dev: DeviceHandle, shape: Any, norm: Any, dtype: str
                                     ) -> None:
    _need(dev, dtype)
    rng = np.random.default_rng(3)
    d = int(np.prod(norm))
    x = rng.standard_normal(shape)
    w, b = rng.standard_normal(norm), rng.standard_normal(norm)
    check_op(dev, lambda t, wt, bt: layer_norm(t, norm, wt, bt)[0],
             lambda a, wa, ba: ref_ln(a, d, wa, ba), (x, w, b), dtype=dtype, scale=4)
    check_op(dev, lambda t: layer_norm(t, norm)[0], lambda a: ref_ln(a, d), (x,), dtype=dtype,
             scale=4)
    small = x[..., :] if x.size <= 64 else x.reshape(-1, d)[:1].reshape((1, *norm))
    g = rng.standard_normal(small.shape)
    want_dx = numeric_grad(lambda a: ref_ln(a, d, w, b), [small], 0, g, independent=(0,))
    want_dw = numeric_grad(lambda wa: ref_ln(small, d, wa, b), [w], 0, g)
    q = dev.queue
    xt = Tensor.from_host(q, small, dtype=dtype)
    wt, bt = Tensor.from_host(q, w, dtype=dtype), Tensor.from_host(q, b, dtype=dtype)
    _, mean, rstd = layer_norm(xt, norm, wt, bt)
    dx, dw, db = layer_norm_backward(Tensor.from_host(q, g, dtype=dtype), xt, norm, mean, rstd,
                                     wt)
    assert_close(dx.to_host(), want_dx, dtype, scale=0.1, grad=True)
    assert_close(dw.to_host(), want_dw, dtype, scale=0.1, grad=True)
    assert_close(db.to_host(), g.reshape(-1, d).sum(0).reshape(norm), dtype)
    if dtype == "float64":  # and the closed form, to float64 precision
        rows, gr = small.reshape(-1, d), g.reshape(-1, d) * w.reshape(1, d)
        inv = 1 / np.sqrt(rows.var(1, keepdims=True) + 1e-5)
        xhat = (rows - rows.mean(1, keepdims=True)) * inv
        exact_dx = inv * (gr - gr.mean(1, keepdims=True)
                          - xhat * (gr * xhat).mean(1, keepdims=True))
        assert_close(dx.to_host().reshape(-1, d), exact_dx, "float64", scale=0.1)
        assert_close(dw.to_host().reshape(-1), (g.reshape(-1, d) * xhat).sum(0), "float64",
                     scale=0.1)


def test_norm_errors(dev: DeviceHandle) -> None:
    x = np.zeros((4, 3, 2))
    q = dev.queue
    check_error(dev, lambda t: batch_norm(t, Tensor.from_host(q, np.zeros(2)), None), (x,), {},
                ValueError, r"per-channel tensors must have shape \(3,\) for input")
    check_error(dev, lambda t: batch_norm(t, None, None, training=False), (x,), {}, ValueError,
                "eval mode needs running_mean")
    check_error(dev, lambda t: batch_norm(t, None, None), (np.zeros((1, 3)),), {}, ValueError,
                "more than one value per channel")
    check_error(dev, lambda t: layer_norm(t, (3,)), (x,), {}, ValueError,
                r"normalized_shape \(3,\) must be the trailing dims of input \(4, 3, 2\)")


def test_norm_mixed_dtypes_are_refused(dev: DeviceHandle) -> None:
    # The OpenCL kernels read every tensor as the input's storage type, so a float32 weight
    # beside a float16 input must raise rather than be read as halves.
    q = dev.queue
    w32 = Tensor.from_host(q, np.ones(3))
    check_error(dev, lambda t: batch_norm(t, None, None, w32, w32), (np.ones((4, 3, 2)),), {},
                TypeError, "batch_norm: every tensor must have the input's dtype float16, got "
                "float32", dtype="float16")
    check_error(dev, lambda t: layer_norm(t, 3, w32, w32), (np.ones((4, 3)),), {}, TypeError,
                "layer_norm: every tensor must have the input's dtype float16", dtype="float16")
    x16 = Tensor.from_host(q, np.ones((4, 3)), dtype="float16")
    _, mean, invstd = batch_norm(x16, None, None)
    check_error(dev, lambda g: batch_norm_backward(g, x16, mean, invstd), (np.ones((4, 3)),), {},
                TypeError, "batch_norm_backward: every tensor must have the input's dtype")


def test_norm_backward_refuses_statistics_of_another_dtype(dev: DeviceHandle) -> None:
    # mean/invstd are read as the compute type: float32 statistics beside a float64 input
    # (or ones of the wrong length) would be garbage, so they are refused with their values.
    _need(dev, "float64")
    q = dev.queue
    x64 = Tensor.from_host(q, np.ones((4, 3)), dtype="float64")
    s32 = Tensor.from_host(q, np.ones(3), dtype="float32")
    check_error(dev, lambda g: batch_norm_backward(g, x64, s32, s32), (np.ones((4, 3)),), {},
                TypeError, r"batch_norm_backward: mean must be a \(3,\) float64 tensor for a "
                r"float64 input \(what the forward returned\), got float32 \(3,\)",
                dtype="float64")
    _, mean, _rstd = layer_norm(x64, 3)
    check_error(dev, lambda g: layer_norm_backward(g, x64, 3, mean, s32), (np.ones((4, 3)),), {},
                TypeError, r"layer_norm_backward: rstd must be a \(4,\) float64 tensor",
                dtype="float64")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_norms_read_views_with_an_element_offset(dev: DeviceHandle, dtype: str) -> None:
    """batch_norm (training with running statistics, eval, fused ReLU), layer_norm and both
    backward ops on tensors that start some elements into their buffer (as slices of bigger
    tensors do): the same numbers as offset-0 copies, bit for bit, and the float64 formulas."""
    _need(dev, dtype)
    rng = np.random.default_rng(7)
    q = dev.queue
    x, g = rng.standard_normal((4, 3, 2, 5)), rng.standard_normal((4, 3, 2, 5))
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    rm, rv = rng.standard_normal(3), rng.random(3) + 0.5

    def both(a: Any, offset: int) -> tuple[Tensor, Tensor]:
        return offset_view(dev, a, offset, dtype), Tensor.from_host(q, a, dtype=dtype)

    (xv, xc), (gv, gc), (wv, wc), (bv, bc) = both(x, 5), both(g, 3), both(w, 1), both(b, 2)
    (rmv, rmc), (rvv, rvc) = both(rm, 4), both(rv, 3)
    yv, mv, iv = batch_norm(xv, rmv, rvv, wv, bv, momentum=0.25)
    yc, mc, ic = batch_norm(xc, rmc, rvc, wc, bc, momentum=0.25)
    for got, want in ((yv, yc), (mv, mc), (iv, ic), (rmv, rmc), (rvv, rvc)):
        np.testing.assert_array_equal(got.to_host(), want.to_host())
    check = x.astype(dtype).astype(np.float64)
    assert_close(yv.to_host(), ref_bn(check, w.astype(dtype), b.astype(dtype)), dtype, 4)
    for fuse in (False, True):
        np.testing.assert_array_equal(
            batch_norm(xv, rmv, rvv, wv, bv, training=False, fuse_relu=fuse).to_host(),
            batch_norm(xc, rmc, rvc, wc, bc, training=False, fuse_relu=fuse).to_host())
    mean_v, invstd_v = offset_view(dev, mc.to_host(), 3, mc.dtype), offset_view(
        dev, ic.to_host(), 6, ic.dtype)
    for got, want in zip(batch_norm_backward(gv, xv, mean_v, invstd_v, wv),
                         batch_norm_backward(gc, xc, mc, ic, wc)):
        np.testing.assert_array_equal(got.to_host(), want.to_host())
    lw, lb = both(rng.standard_normal((2, 5)), 7), both(rng.standard_normal((2, 5)), 1)
    outs_v, outs_c = layer_norm(xv, (2, 5), lw[0], lb[0]), layer_norm(xc, (2, 5), lw[1], lb[1])
    for got, want in zip(outs_v, outs_c):
        np.testing.assert_array_equal(got.to_host(), want.to_host())
    assert_close(outs_v[0].to_host(), ref_ln(check, 10, lw[1].to_host().astype(np.float64),
                                             lb[1].to_host().astype(np.float64)), dtype, 4)
    mean_l, rstd_l = (offset_view(dev, t.to_host(), 2, t.dtype) for t in outs_c[1:])
    for got, want in zip(layer_norm_backward(gv, xv, (2, 5), mean_l, rstd_l, lw[0]),
                         layer_norm_backward(gc, xc, (2, 5), outs_c[1], outs_c[2], lw[1])):
        np.testing.assert_array_equal(got.to_host(), want.to_host())


@pytest.mark.parametrize("layout", ["item", "warp", "group"])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("d", [1, 67, 1024])
def test_layer_norm_both_kernel_layouts(dev: DeviceHandle, layout: str, affine: bool, d: int,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each OpenCL device runs every layer-norm layout (NOTE [ Layer norm on CPU devices ],
    NOTE [ Layer norm rows in warps ]): one work-item per row (CPU devices' default), one warp
    per row (GPUs' up to 1024 elements; shuffles emulated off NVIDIA) and one work-group per
    row (GPUs' beyond)."""
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend runs no OpenCL kernels")
    monkeypatch.setattr(_normalization, "ln_per_row", lambda device: layout == "item")
    monkeypatch.setattr(_normalization, "ln_warp_rows", lambda dd: layout == "warp")
    rng = np.random.default_rng(11)
    rows = 37
    x = rng.standard_normal((rows, d)) * 3 + 5
    g = rng.standard_normal((rows, d))
    w = rng.standard_normal(d) if affine else None
    b = rng.standard_normal(d) if affine else None
    q = dev.queue
    xt = Tensor.from_host(q, x, dtype="float32")
    wt = None if w is None else Tensor.from_host(q, w, dtype="float32")
    bt = None if b is None else Tensor.from_host(q, b, dtype="float32")
    y, mean, rstd = layer_norm(xt, d, wt, bt)
    assert_close(y.to_host(), ref_ln(x, d, w, b), "float32", scale=4)
    assert_close(mean.to_host(), x.mean(1), "float32", scale=8)
    inv = 1 / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    assert_close(rstd.to_host(), inv.reshape(-1), "float32")
    dx, dw, db = layer_norm_backward(Tensor.from_host(q, g, dtype="float32"), xt, d, mean, rstd,
                                     wt)
    xhat = (x - x.mean(1, keepdims=True)) * inv
    gr = g * (1.0 if w is None else w.reshape(1, d))
    want_dx = inv * (gr - gr.mean(1, keepdims=True) - xhat * (gr * xhat).mean(1, keepdims=True))
    assert_close(dx.to_host(), want_dx, "float32", scale=4)
    assert_close(dw.to_host(), (g * xhat).sum(0), "float32", scale=8)
    assert_close(db.to_host(), g.sum(0), "float32", scale=8)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("rows", "d", "splits"), [(4099, 33, 8), (2048, 1, 5), (1000, 257, 3),
                                                   (129, 7, 1), (7, 384, 4)], ids=str)
def test_layer_norm_parameter_gradients_split(dev: DeviceHandle, rows: int, d: int, splits: int,
                                              dtype: str, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    """dweight and dbias summed over row chunks that the last work-group merges (NOTE
    [ Layer norm parameter gradients ]): forced chunk counts, repeated launches (the ticket
    counters reset), the same bits every time, against float64 sums."""
    _need(dev, dtype)
    if dev.backend != "cpu":
        chunk = -(-rows // splits)
        monkeypatch.setattr(_normalization, "ln_param_splits",
                            lambda device, r, dd: (-(-r // chunk), chunk))
    rng = np.random.default_rng(rows + d)
    x = rng.standard_normal((rows, d)) * 2 + 1
    g = rng.standard_normal((rows, d))
    q = dev.queue
    xt = Tensor.from_host(q, x, dtype=dtype)
    gt = Tensor.from_host(q, g, dtype=dtype)
    _, mean, rstd = layer_norm(xt, d)
    xs = xt.to_host().astype(np.float64)
    xhat = (xs - mean.to_host().reshape(-1, 1)) * rstd.to_host().reshape(-1, 1)
    gs = gt.to_host().astype(np.float64)
    first = None
    for _ in range(3):
        _, dw, db = layer_norm_backward(gt, xt, d, mean, rstd)
        got = (dw.to_host(), db.to_host())
        if first is None:
            first = got
        np.testing.assert_array_equal(got[0], first[0])
        np.testing.assert_array_equal(got[1], first[1])
    assert first is not None
    scale = np.sqrt(rows)
    assert_close(first[0], (gs * xhat).sum(0), dtype, scale=scale)
    assert_close(first[1], gs.sum(0), dtype, scale=scale)
