"""conv2d (every variant, forced) and its backward computations against a float64 NumPy
reference, on every backend: odd sizes, stride, asymmetric padding, dilation, groups,
depthwise, 1x1, non-square kernels, every float dtype, empty batches, and errors."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle, manager
from netcl.core.device_profile import extended_profile
from netcl.core.kernel_selector import KernelConfig, KernelSelector, KernelVariant, force_variant
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops import _conv_winograd
from netcl.ops._conv import conv2d, conv2d_backward_data, conv2d_backward_weight
from netcl.ops._conv_geometry import conv_geometry
from netcl.ops._conv_igemm import (
    igemm_backward_data,
    igemm_backward_weight,
    igemm_forward,
    tiles_of,
    weight_splits,
)
from netcl.ops._conv_igemm_kernels import (
    DEFAULT_TILES,
    FALLBACK_TILES,
    TILINGS,
    IgemmTiles,
    igemm_source,
)
from netcl.ops._conv_rule import CONV2D_FAMILY, IMPLICIT_TILED, WINOGRAD_F4, ConvQuery
from netcl.ops._matmul_family import gemm_family
from netcl.ops.testing import OpInfo, check_error, check_op, skip_unless_one_opencl_cpu_device

RNG = np.random.default_rng(0)


def arr(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape)


def _pairs(stride: Any, padding: Any, dilation: Any) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in (np.broadcast_to(p, 2) for p in (stride, padding,
                                                                          dilation))]


def _windows(x: Any, w_shape: tuple[int, ...], stride: Any, padding: Any,
             dilation: Any) -> Any:
    """``(n, c, oh, ow, r, s)``: the input element each output pixel reads per kernel tap.

    NumPy's sliding windows over the zero-padded input, strided and dilated, so the output
    size comes out of the window count (the formula lives once, in ``ConvGeometry``)."""
    (sh, sw), (ph, pw), (dh, dw) = _pairs(stride, padding, dilation)
    r, s = w_shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    view = np.lib.stride_tricks.sliding_window_view(
        xp, ((r - 1) * dh + 1, (s - 1) * dw + 1), axis=(2, 3))
    return view[:, :, ::sh, ::sw, ::dh, ::dw]


def ref_conv(x: Any, w: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
             dilation: Any = 1, groups: int = 1) -> Any:
    win = _windows(x, w.shape, stride, padding, dilation)
    k, cg = w.shape[:2]
    y = np.zeros((x.shape[0], k, *win.shape[2:4]))
    for g in range(groups):
        ks = slice(g * k // groups, (g + 1) * k // groups)
        y[:, ks] = np.einsum("nchwrs,kcrs->nkhw", win[:, g * cg:(g + 1) * cg], w[ks])
    return y if bias is None else y + bias.reshape(1, -1, 1, 1)


def ref_backward(x: Any, w: Any, gy: Any, stride: Any, padding: Any, dilation: Any,
                 groups: int) -> tuple[Any, Any]:
    """(dx, dw) of ``sum(conv2d(x, w) * gy)``: each tap's outputs scattered back."""
    (sh, sw), (ph, pw), (dh, dw_) = _pairs(stride, padding, dilation)
    win = _windows(x, w.shape, stride, padding, dilation)
    k, cg, r_, s_ = w.shape
    oh, ow = gy.shape[2:]
    dxp = np.zeros((x.shape[0], x.shape[1], x.shape[2] + 2 * ph, x.shape[3] + 2 * pw))
    dw = np.zeros(w.shape)
    for g in range(groups):
        ks, cs = slice(g * k // groups, (g + 1) * k // groups), slice(g * cg, (g + 1) * cg)
        dw[ks] = np.einsum("nchwrs,nkhw->kcrs", win[:, cs], gy[:, ks])
        for r in range(r_):
            for s in range(s_):
                hs = slice(r * dh, r * dh + (oh - 1) * sh + 1, sh)
                ws = slice(s * dw_, s * dw_ + (ow - 1) * sw + 1, sw)
                dxp[:, cs, hs, ws] += np.einsum("kc,nkhw->nchw", w[ks, :, r, s], gy[:, ks])
    return dxp[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]], dw


# (input, weight, stride, padding, dilation, groups)
GEOMETRIES: list[tuple[tuple[int, ...], tuple[int, ...], Any, Any, Any, int]] = [
    ((2, 3, 7, 9), (4, 3, 3, 3), 1, 1, 1, 1),
    ((1, 4, 8, 8), (6, 2, 3, 3), 2, (1, 0), 1, 2),
    ((2, 4, 9, 7), (4, 1, 3, 3), 1, 1, 1, 4),  # depthwise
    ((1, 3, 10, 10), (5, 3, 1, 1), 1, 0, 1, 1),  # pointwise
    ((2, 3, 11, 9), (2, 3, 3, 2), (1, 2), (2, 1), (2, 1), 1),
    ((1, 2, 5, 5), (3, 2, 5, 5), 1, 2, 1, 1),
    ((1, 1, 1, 1), (1, 1, 1, 1), 1, 0, 1, 1),
    ((3, 5, 6, 6), (7, 5, 3, 3), 1, 0, 1, 1),
    ((1, 1, 5, 5), (1, 1, 3, 3), 1, 0, 1, 1),
    ((1, 4, 9, 7), (6, 2, 3, 1), (2, 1), (1, 0), 1, 2),  # a 3x1 kernel in groups
    ((2, 3, 8, 8), (3, 1, 3, 3), 2, 1, 1, 3),  # depthwise, strided
    ((1, 2, 9, 9), (3, 2, 3, 3), 1, 2, 2, 1),  # dilated
]


def _samples() -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    out = []
    for xs, ws, st, pad, dil, g in GEOMETRIES:
        kw = {"stride": st, "padding": pad, "dilation": dil, "groups": g}
        out.append(((arr(*xs), arr(*ws), arr(ws[0])), kw))
    return out


CONV2D = OpInfo(
    name="conv2d",
    op=conv2d,
    ref=ref_conv,
    samples=_samples(),
    errors=[
        ((arr(8, 3, 32, 32), arr(16, 4, 3, 3)), {}, ValueError,
         r"conv2d requires input channels to match weight, got input \(8, 3, 32, 32\) and "
         r"weight \(16, 4, 3, 3\)"),
        ((arr(1, 6, 5, 5), arr(4, 2, 3, 3)), {"groups": 4}, ValueError,
         "groups=4 must divide input channels 6 and output channels 4"),
        ((arr(8, 3, 8, 8), arr(4, 1, 3, 3)), {"groups": 2}, ValueError,
         "groups=2 must divide input channels 3"),
        ((arr(3, 5, 5), arr(4, 3, 3, 3)), {}, ValueError, r"input must be 4-D .* \(3, 5, 5\)"),
        ((arr(1, 3, 5, 5), arr(4, 3, 3)), {}, ValueError, "weight must be 4-D"),
        ((arr(1, 3, 5, 5), arr(4, 3, 3, 3)), {"stride": 0}, ValueError,
         "stride must be an int >= 1 or a pair of them, got 0"),
        ((arr(1, 3, 5, 5), arr(4, 3, 3, 3)), {"padding": (1, -1)}, ValueError,
         r"padding must be an int >= 0 or a pair of them, got \(1, -1\)"),
        ((arr(1, 3, 5, 5), arr(4, 3, 3, 3)), {"stride": 1.5}, TypeError,
         "stride must be an int or a pair of ints"),
        ((arr(1, 3, 2, 2), arr(4, 3, 3, 3)), {}, ValueError, "2x2 is too small for a 3x3 kernel"),
        ((arr(1, 3, 5, 5), arr(4, 3, 3, 3), arr(3)), {}, ValueError,
         r"bias must have shape \(4,\), got \(3,\)"),
        ((np.ones((1, 3, 5, 5), np.int32), np.ones((4, 3, 3, 3), np.int32)), {}, TypeError,
         "tensors must share one float dtype"),
        ((arr(1, 3, 5, 5), "w"), {}, TypeError, "weight must be a netcl Tensor, got str"),
    ],
    scale=10.0,
)

VARIANTS: list[Any] = [None, KernelVariant.CONV2D_NAIVE, KernelVariant.CONV2D_IM2COL,
                       KernelVariant.CONV2D_IMPLICIT_GEMM, KernelVariant.CONV2D_TILED_LOCAL,
                       KernelVariant.CONV2D_WINOGRAD, IMPLICIT_TILED]


def _vid(v: Any) -> str:
    return "selected" if v is None else v.name


@pytest.mark.parametrize("variant", VARIANTS, ids=_vid)
@pytest.mark.parametrize("sample", range(len(GEOMETRIES)), ids=lambda i: f"geometry{i}")
def test_conv2d_float32(dev: DeviceHandle, variant: Any, sample: int) -> None:
    if dev.backend == "cpu" and variant is not None:
        pytest.skip("the NumPy backend has no kernel variants")
    if variant is KernelVariant.CONV2D_TILED_LOCAL and sample not in (0, 1, 2, 7, 9):
        pytest.skip("one build per window geometry: keep PoCL builds few")
    args, kwargs = CONV2D.samples[sample]
    with force_variant(*([variant] if variant else [])):
        check_op(dev, CONV2D.op, CONV2D.ref, args, kwargs, "float32", CONV2D.scale)


@pytest.mark.parametrize("variant", VARIANTS, ids=_vid)
@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_conv2d_other_dtypes(dev: DeviceHandle, variant: Any, dtype: str) -> None:
    """At the float32 test's scale: a float64 result rounded through float32 even once is
    6e-8 off, well outside float64's 1e-9 (a scale of 1e3 let it through)."""
    if dev.backend == "cpu" and variant is not None:
        pytest.skip("the NumPy backend has no kernel variants")
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    args, kwargs = CONV2D.samples[0]
    with force_variant(*([variant] if variant else [])):
        check_op(dev, CONV2D.op, CONV2D.ref, args, kwargs, dtype, CONV2D.scale)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
@pytest.mark.parametrize("sample", range(len(GEOMETRIES)), ids=lambda i: f"geometry{i}")
def test_conv2d_selected_every_dtype(dev: DeviceHandle, sample: int, dtype: str) -> None:
    """Every geometry in float16 and float64 with the selector's choice, with a bias and
    without one."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    (x, w, b), kwargs = CONV2D.samples[sample]
    check_op(dev, CONV2D.op, CONV2D.ref, (x, w, b), kwargs, dtype, CONV2D.scale)
    check_op(dev, CONV2D.op, CONV2D.ref, (x, w), kwargs, dtype, CONV2D.scale)


@pytest.mark.parametrize("row", range(len(CONV2D.errors)), ids=lambda i: f"error{i}")
def test_conv2d_errors(dev: DeviceHandle, row: int) -> None:
    args, kwargs, exc, pattern = CONV2D.errors[row]
    check_error(dev, CONV2D.op, args, kwargs, exc, pattern)


def test_conv2d_dtype_mismatch_and_devices(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, arr(1, 3, 5, 5), dtype="float32")
    w = Tensor.from_host(dev.queue, arr(4, 3, 3, 3), dtype="float64")
    with pytest.raises(TypeError, match="input float32, weight float64"):
        conv2d(x, w)
    other = manager.default("cl" if dev.backend == "cpu" else "cpu")
    if other is None:
        pytest.skip("only one backend present")
    w2 = Tensor.from_host(other.queue, arr(4, 3, 3, 3))
    with pytest.raises(ValueError, match="conv2d: tensors are on different devices"):
        conv2d(x, w2)


# float32 and float64 on every geometry; float16 (its own set of PoCL builds) on two geometries
# that between them run every backward kernel: groups with stride and asymmetric padding
# (im2col, col2im, batch sum) and pointwise (the GEMMs on the tensors themselves)
_BACKWARD_CASES = [(i, dtype) for dtype in ("float32", "float64")
                   for i in range(len(GEOMETRIES))] + [(i, "float16") for i in (1, 3)]


@pytest.mark.parametrize("sample,dtype", _BACKWARD_CASES,
                         ids=lambda c: f"geometry{c}" if isinstance(c, int) else c)
def test_conv2d_backward(dev: DeviceHandle, sample: int, dtype: str) -> None:
    """Both backward computations: their im2col/col2im and batch-sum kernels and scratch
    buffers are built per dtype (float64 checked to float64 precision)."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    xs, ws, st, pad, dil, groups = GEOMETRIES[sample]
    x, w = arr(*xs), arr(*ws)
    gy = arr(*ref_conv(x, w, None, st, pad, dil, groups).shape)
    geo = {"stride": st, "padding": pad, "dilation": dil, "groups": groups}
    check_op(dev, lambda g, wt: conv2d_backward_data(g, wt, xs, **geo),
             lambda g, wa: ref_backward(np.zeros(xs), wa, g, st, pad, dil, groups)[0],
             (gy, w), dtype=dtype, scale=CONV2D.scale)
    check_op(dev, lambda xt, g: conv2d_backward_weight(xt, g, ws, **geo),
             lambda xa, g: ref_backward(xa, np.zeros(ws), g, st, pad, dil, groups)[1],
             (x, gy), dtype=dtype, scale=CONV2D.scale)


def test_conv2d_backward_errors(dev: DeviceHandle) -> None:
    xs, ws = (2, 4, 6, 5), (6, 2, 3, 3)
    x, w, gy = arr(*xs), arr(*ws), arr(2, 6, 3, 3)
    check_error(dev, lambda g, wt: conv2d_backward_data(g, wt, xs, 1, 1, 1, 2), (gy, w), {},
                ValueError, r"grad_out must have shape \(2, 6, 6, 5\)")
    check_error(dev, lambda xt, g: conv2d_backward_weight(xt, g, (6, 3, 3, 3), 2, 1, 1, 2),
                (x, gy), {}, ValueError, "requires input channels to match weight")


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_conv2d_empty_batch(dev: DeviceHandle, dtype: str) -> None:
    """N = 0: empty outputs, and a zero weight gradient (the sum over no images)."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    xs, ws = (0, 4, 6, 5), (6, 2, 3, 3)
    x, w, b, gy = np.zeros(xs), arr(*ws), arr(6), np.zeros((0, 6, 3, 3))
    geo = {"stride": 2, "padding": 1, "groups": 2}
    for variant in VARIANTS:
        with force_variant(*([variant] if variant else [])):
            check_op(dev, lambda xt, wt, bt: conv2d(xt, wt, bt, **geo),
                     lambda xa, wa, ba: ref_conv(xa, wa, ba, **geo), (x, w, b), dtype=dtype)
    check_op(dev, lambda g, wt: conv2d_backward_data(g, wt, xs, **geo), lambda *_: x, (gy, w),
             dtype=dtype)
    check_op(dev, lambda xt, g: conv2d_backward_weight(xt, g, ws, **geo),
             lambda *_: np.zeros(ws), (x, gy), dtype=dtype)
    check_error(dev, conv2d, (arr(1, 0, 5, 5), arr(4, 0, 3, 3)), {}, ValueError,
                r"conv2d: channels and kernel sizes must be >= 1 \(the batch >= 0\), got input "
                r"\(1, 0, 5, 5\) and weight \(4, 0, 3, 3\)")


def test_pointwise_conv_is_one_gemm(dev: DeviceHandle) -> None:
    if dev.backend == "cpu":
        pytest.skip("counts OpenCL launches")
    x = Tensor.from_host(dev.queue, arr(2, 8, 5, 5))
    w = Tensor.from_host(dev.queue, arr(4, 8, 1, 1))
    with force_variant(KernelVariant.CONV2D_IM2COL), count_launches() as n:
        conv2d(x, w).to_host()
    assert n[0] == 1


# --- the register-tiled implicit GEMM (CONV2D_IMPLICIT_TILED): forward and both gradients ---

# Odd sizes beside GEOMETRIES: 33 channels (over a 32-row tile), 65 output channels (two
# 64-row tiles), 1x1 planes, 33x33 planes, 1x1 stride 2, 5x5 padding 2, grouped and dilated
# with stride 2, and a weight gradient whose reduction is split over work-groups; strided data
# gradients go by phases (NOTE [ Strided data gradient by phases ]), some with no taps or no
# pixels.
IGEMM_GEOMETRIES: list[tuple[tuple[int, ...], tuple[int, ...], Any, Any, Any, int]] = [
    ((3, 33, 9, 7), (7, 33, 3, 3), 1, 1, 1, 1),
    ((1, 7, 33, 33), (33, 7, 3, 3), 2, 1, 1, 1),
    ((3, 3, 5, 5), (65, 3, 1, 1), 2, 0, 1, 1),
    ((3, 1, 1, 1), (3, 1, 1, 1), 1, 0, 1, 1),
    ((1, 3, 7, 9), (5, 3, 5, 5), 1, 2, 1, 1),
    ((3, 7, 33, 33), (7, 7, 3, 3), 1, 1, 1, 1),
    ((3, 33, 7, 7), (33, 11, 3, 3), 2, 2, 2, 3),
    ((1, 3, 1, 1), (2, 3, 3, 3), 1, 1, 1, 1),
    ((2, 5, 1, 6), (4, 5, 3, 3), 3, 1, 1, 1),  # stride 3 on one row: phases with no pixels
    ((1, 3, 8, 9), (4, 3, 2, 4), (2, 3), (0, 2), 1, 1),  # an even kernel, unequal strides
]


def _all_three(dev: DeviceHandle, xs: tuple[int, ...], ws: tuple[int, ...], geo: dict[str, Any],
               dtype: str = "float32") -> None:
    """conv2d (with a bias), its data gradient and its weight gradient against the
    references."""
    st, pad, dil, groups = geo["stride"], geo["padding"], geo["dilation"], geo["groups"]
    x, w, b = arr(*xs), arr(*ws), arr(ws[0])
    gy = arr(*ref_conv(x, w, None, st, pad, dil, groups).shape)
    check_op(dev, lambda xt, wt, bt: conv2d(xt, wt, bt, **geo),
             lambda xa, wa, ba: ref_conv(xa, wa, ba, **geo), (x, w, b), dtype=dtype,
             scale=CONV2D.scale)
    check_op(dev, lambda g, wt: conv2d_backward_data(g, wt, xs, **geo),
             lambda g, wa: ref_backward(np.zeros(xs), wa, g, st, pad, dil, groups)[0],
             (gy, w), dtype=dtype, scale=CONV2D.scale)
    check_op(dev, lambda xt, g: conv2d_backward_weight(xt, g, ws, **geo),
             lambda xa, g: ref_backward(xa, np.zeros(ws), g, st, pad, dil, groups)[1],
             (x, gy), dtype=dtype, scale=CONV2D.scale)


def _geo(row: tuple[Any, ...]) -> dict[str, Any]:
    return {"stride": row[2], "padding": row[3], "dilation": row[4], "groups": row[5]}


@pytest.mark.parametrize("sample", range(len(IGEMM_GEOMETRIES)), ids=lambda i: f"odd{i}")
def test_implicit_tiled_odd_sizes(dev: DeviceHandle, sample: int) -> None:
    """Forced (on the NumPy backend: the NumPy path) on the odd geometries."""
    row = IGEMM_GEOMETRIES[sample]
    with force_variant(IMPLICIT_TILED):
        _all_three(dev, row[0], row[1], _geo(row))


@pytest.mark.parametrize("sample,dtype", [(i, "float32") for i in range(len(GEOMETRIES))]
                         + [(i, dt) for i in (1, 3) for dt in ("float16", "float64")],
                         ids=lambda c: f"geometry{c}" if isinstance(c, int) else c)
def test_implicit_tiled_gradients(dev: DeviceHandle, sample: int, dtype: str) -> None:
    """Both gradients forced to the implicit GEMM on every geometry of the forward tests;
    float16 storage and float64 on a grouped strided and a pointwise one."""
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend has no kernel variants")
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    xs, ws, st, pad, dil, groups = GEOMETRIES[sample]
    x, w = arr(*xs), arr(*ws)
    gy = arr(*ref_conv(x, w, None, st, pad, dil, groups).shape)
    geo = {"stride": st, "padding": pad, "dilation": dil, "groups": groups}
    with force_variant(IMPLICIT_TILED):
        check_op(dev, lambda g, wt: conv2d_backward_data(g, wt, xs, **geo),
                 lambda g, wa: ref_backward(np.zeros(xs), wa, g, st, pad, dil, groups)[0],
                 (gy, w), dtype=dtype, scale=CONV2D.scale)
        check_op(dev, lambda xt, g: conv2d_backward_weight(xt, g, ws, **geo),
                 lambda xa, g: ref_backward(xa, np.zeros(ws), g, st, pad, dil, groups)[1],
                 (x, gy), dtype=dtype, scale=CONV2D.scale)


@pytest.mark.parametrize("tiling", [*TILINGS, "fallback", "64x64 split 8"])
def test_implicit_tiled_every_tiling(dev: DeviceHandle, tiling: str) -> None:
    """Each tiling the rule can pick (and the fallback for a device that shrinks the
    work-group) computes all three passes; the odd geometry with a split weight gradient.
    On GPUs and one OpenCL CPU device (Intel's where present): PoCL compiles each tiling's
    three programs at their first launch, 15-30 s each."""
    skip_unless_one_opencl_cpu_device(dev)
    t = FALLBACK_TILES if tiling == "fallback" else TILINGS[tiling.split()[0]]
    extra = {"groups_per_unit": 8} if "split" in tiling else {}  # a weight gradient's split
    config = KernelConfig(IMPLICIT_TILED, t.bm, t.bn, t.bk, t.tm, local_size_2d=(t.lx, t.ly),
                          use_vectorization=t.vec, extra=extra)
    xs, ws, st, pad, dil, groups = IGEMM_GEOMETRIES[5]
    geom = conv_geometry("conv2d", xs, ws, st, pad, dil, groups)
    x, w, gy = arr(*xs), arr(*ws), arr(xs[0], ws[0], geom.oh, geom.ow)
    q = dev.queue
    xt, wt, gt = (Tensor.from_host(q, a, dtype="float32") for a in (x, w, gy))
    y = Tensor.from_shape(q, (geom.n, geom.k, geom.oh, geom.ow), "float32", fill=None)
    dx = Tensor.from_shape(q, xs, "float32", fill=None)
    dw = Tensor.from_shape(q, ws, "float32", fill=None)
    igemm_forward(xt, wt, None, geom, y, config)
    igemm_backward_data(gt, wt, geom, dx, config)
    igemm_backward_weight(xt, gt, geom, dw, config, 2)
    want_dx, want_dw = ref_backward(x, w, gy, st, pad, dil, groups)
    for got, want in ((y, ref_conv(x, w, None, st, pad, dil, groups)), (dx, want_dx),
                      (dw, want_dw)):
        assert_close(got.to_host(), want, "float32", scale=CONV2D.scale)


def test_implicit_tiled_weight_gradient_is_reproducible(dev: DeviceHandle) -> None:
    """A reduction split over work-groups, summed in a fixed order: bitwise equal reruns."""
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend has no kernel variants")
    xs, ws, st, pad, dil, groups = IGEMM_GEOMETRIES[5]
    geom = conv_geometry("conv2d", xs, ws, st, pad, dil, groups)
    assert weight_splits(geom, DEFAULT_TILES, 2)[0] > 1
    x = Tensor.from_host(dev.queue, arr(*xs), dtype="float32")
    gy = Tensor.from_host(dev.queue, arr(xs[0], ws[0], geom.oh, geom.ow), dtype="float32")
    with force_variant(IMPLICIT_TILED), count_launches() as n:
        first = conv2d_backward_weight(x, gy, ws, st, pad, dil, groups).to_host()
    assert n[0] == 2  # the split reduction and its sum: no im2col, no per-image GEMMs
    with force_variant(IMPLICIT_TILED):
        again = conv2d_backward_weight(x, gy, ws, st, pad, dil, groups).to_host()
    assert first.tobytes() == again.tobytes()


def _gpu_profile() -> Any:
    return dataclasses.replace(extended_profile(None), name="GPU", device_type="gpu",
                               vendor_family="nvidia", compute_units=132,
                               local_mem_size=49152, max_work_group_size=1024)


@pytest.mark.parametrize("direction", ["data", "weight"])
def test_gradient_rule(direction: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gradients: the implicit GEMM on a GPU (Winograd F(4x4) for a data gradient from 64
    channels, a weight gradient from 128 or from 64 on planes up to 32x32), the column path
    on CPU devices; the forward-only variants never apply to them (forced, they give way), the
    implicit GEMM's tiles follow the GEMM's rows (NETCL_CONV_WINOGRAD=0 from the second check
    on)."""
    gpu, numpy_profile = KernelSelector(_gpu_profile()), KernelSelector(extended_profile(None))
    g = conv_geometry("conv2d", (128, 64, 32, 32), (64, 64, 3, 3), 1, 1)
    query = ConvQuery(g, "float32", direction)
    assert gpu.select(CONV2D_FAMILY, query).variant is WINOGRAD_F4  # 64 channels on 32x32
    monkeypatch.setenv("NETCL_CONV_WINOGRAD", "0")
    cfg = gpu.select(CONV2D_FAMILY, query)
    tiles = "64x64x16/4x4" if direction == "weight" else "64x64x16/4x4v"
    split = 8 if direction == "weight" else None  # 576 columns: more split-K
    assert (cfg.variant, cfg.extra["tiles"], cfg.extra.get("groups_per_unit")) == (
        IMPLICIT_TILED, tiles, split)
    assert numpy_profile.select(CONV2D_FAMILY, query).variant is KernelVariant.CONV2D_IM2COL
    for forward_only in (KernelVariant.CONV2D_TILED_LOCAL, KernelVariant.CONV2D_NAIVE,
                         KernelVariant.CONV2D_IMPLICIT_GEMM):
        with force_variant(forward_only):
            assert gpu.select(CONV2D_FAMILY, query).variant is IMPLICIT_TILED
    with force_variant(KernelVariant.CONV2D_IM2COL):
        assert gpu.select(CONV2D_FAMILY, query).variant is KernelVariant.CONV2D_IM2COL
    wide = ConvQuery(conv_geometry("conv2d", (128, 256, 8, 8), (256, 256, 3, 3), 1, 1),
                     "float32", direction)
    # the weight gradient's split reduction fills the GPU with 128x128 tiles; the data
    # gradient's 2 x 64 of them would not, its 2 x 128 of 128x64 do
    big = "128x128x16/8x8v" if direction == "weight" else "128x64x16/8x4v"
    assert gpu.select(CONV2D_FAMILY, wide).extra["tiles"] == big
    first = ConvQuery(conv_geometry("conv2d", (128, 3, 32, 32), (64, 3, 3, 3), 1, 1), "float32",
                      direction)
    cfg = gpu.select(CONV2D_FAMILY, first)
    if direction == "data":  # 3 rows of C: the column path
        assert cfg.variant is KernelVariant.CONV2D_IM2COL
    else:
        assert (cfg.variant, cfg.extra["tiles"]) == (IMPLICIT_TILED, "64x64x16/4x4v")
    monkeypatch.delenv("NETCL_CONV_WINOGRAD")
    wide_winograd = WINOGRAD_F4  # 256 channels: both gradients
    assert gpu.select(CONV2D_FAMILY, wide).variant is wide_winograd
    assert query.key()[-1] == direction and ConvQuery(g).key()[-1] == "float32"


@pytest.mark.parametrize(("shape", "expected"), [
    # (N, C, H, K, R, stride, padding) -> the forward's variant and tiles on an H100 (Winograd
    # F(4x4) from the H200's measurements)
    ((128, 3, 32, 64, 3, 1, 1), "CONV2D_IMPLICIT_TILED 64x64x16/4x4"),  # ResNet's stem
    ((128, 64, 32, 64, 3, 1, 1), "CONV2D_WINOGRAD_F4"),
    ((128, 64, 32, 128, 3, 2, 1), "CONV2D_IMPLICIT_TILED 128x128x16/8x8v"),
    ((128, 64, 32, 128, 1, 2, 0), "CONV2D_IMPLICIT_TILED 128x64x16/8x4"),  # strided 1x1
    ((128, 128, 16, 256, 3, 2, 1), "CONV2D_IMPLICIT_TILED 128x128x16/8x8v"),
    ((128, 256, 8, 512, 3, 2, 1), "CONV2D_IMPLICIT_TILED 128x64x16/8x4v"),
    ((128, 128, 16, 128, 3, 1, 1), "CONV2D_WINOGRAD_F4"),
    ((128, 512, 4, 512, 3, 1, 1), "CONV2D_WINOGRAD_F4"),  # a 4x4 plane: 512 2x2 tiles
    ((32, 512, 4, 512, 3, 1, 1), "CONV2D_IMPLICIT_TILED 64x64x16/4x4"),  # 128 tiles
    ((64, 16, 8, 32, 3, 1, 1), "CONV2D_IMPLICIT_TILED 32x64x16/4x4"),  # the digits CNN
    # ImageNet planes (ResNet-18/50)
    ((128, 512, 7, 512, 3, 1, 1), "CONV2D_WINOGRAD_F4"),  # 2048 2x2 tiles
    ((128, 64, 56, 256, 1, 1, 0), "CONV2D_IM2COL"),  # 1x1 64 -> 256: the tuned GEMM
    ((128, 256, 56, 64, 1, 1, 0), "CONV2D_IM2COL"),
    ((128, 64, 56, 64, 1, 1, 0), "CONV2D_IMPLICIT_TILED 64x64x16/4x4"),
    ((128, 128, 28, 512, 1, 1, 0), "CONV2D_IMPLICIT_TILED 128x64x16/8x4v"),
    ((128, 256, 14, 512, 1, 2, 0), "CONV2D_IMPLICIT_TILED 128x64x16/8x4v"),
    ((128, 256, 28, 256, 3, 2, 1), "CONV2D_IMPLICIT_TILED 128x128x16/8x8v"),
])
def test_forward_gpu_rule(shape: tuple[int, ...], expected: str) -> None:
    """The forward on a GPU (NOTE [ GPU conv2d rules ]): Winograd F(4x4) from 64 channels on
    3x3 stride 1 with a plane from 16x16 or 512 2x2 tiles, else the register-tiled implicit
    GEMM with the tiles that fill the device."""
    n, c, h, k, r, stride, padding = shape
    q = ConvQuery(conv_geometry("conv2d", (n, c, h, h), (k, c, r, r), stride, padding))
    cfg = KernelSelector(_gpu_profile()).select(CONV2D_FAMILY, q)
    assert " ".join([cfg.variant.name, *([cfg.extra["tiles"]] if "tiles" in cfg.extra else [])
                     ]) == expected


# Winograd geometries (3x3, stride 1, one group) with padding 0, 1 and 2, odd sizes
WINOGRAD_DATA = [((3, 33, 9, 7), (7, 33, 3, 3), 1), ((1, 5, 6, 6), (7, 5, 3, 3), 0),
                 ((2, 7, 5, 9), (33, 7, 3, 3), 2), ((1, 1, 1, 1), (3, 1, 3, 3), 1)]


@pytest.mark.parametrize("sample,dtype", [(i, "float32") for i in range(len(WINOGRAD_DATA))]
                         + [(0, "float16"), (0, "float64")],
                         ids=lambda c: f"winograd{c}" if isinstance(c, int) else c)
def test_winograd_gradients(dev: DeviceHandle, sample: int, dtype: str) -> None:
    """Forced, Winograd computes the data gradient as a convolution of grad_out with the
    transposed, rotated filters and the weight gradient from the transformed tiles; a data
    gradient with a padding over 2 gives way."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    xs, ws, pad = WINOGRAD_DATA[sample]
    x, w = arr(*xs), arr(*ws)
    gy = arr(*ref_conv(x, w, None, 1, pad).shape)
    with force_variant(KernelVariant.CONV2D_WINOGRAD):
        check_op(dev, lambda g, wt: conv2d_backward_data(g, wt, xs, 1, pad),
                 lambda g, wa: ref_backward(np.zeros(xs), wa, g, 1, pad, 1, 1)[0],
                 (gy, w), dtype=dtype, scale=CONV2D.scale)
        check_op(dev, lambda xt, g: conv2d_backward_weight(xt, g, ws, 1, pad),
                 lambda xa, g: ref_backward(xa, np.zeros(ws), g, 1, pad, 1, 1)[1],
                 (x, gy), dtype=dtype, scale=CONV2D.scale)
        wide = ConvQuery(conv_geometry("conv2d", (1, 16, 9, 9), (4, 16, 3, 3), 1, 3), "float32",
                         "data")
        assert KernelSelector(_gpu_profile()).select(CONV2D_FAMILY, wide).variant is (
            IMPLICIT_TILED)


@pytest.mark.parametrize("xs", [(9, 5, 17, 17), (12, 5, 16, 16)], ids=["rest", "even"])
def test_winograd_weight_gradient_split(dev: DeviceHandle, xs: tuple[int, ...],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """NOTE [ Split Winograd weight gradient ]: the reduction over tiles cut into slices (729
    tiles: a full slice and a shorter one; 768: three full ones) and summed in order."""
    if dev.backend != "cl":
        pytest.skip("the Winograd kernels run on OpenCL devices")
    monkeypatch.setattr(_conv_winograd, "_SPLIT_PER_UNIT", 10_000)  # as many slices as fit
    sums = []
    family = gemm_family

    def spy(context: Any, params: Any) -> Any:
        sums.append(params)
        return family(context, params)

    monkeypatch.setattr(_conv_winograd, "gemm_family", spy)
    ws = (7, xs[1], 3, 3)
    x, w = arr(*xs), arr(*ws)
    gy = arr(*ref_conv(x, w, None, 1, 1).shape)
    with force_variant(KernelVariant.CONV2D_WINOGRAD):
        check_op(dev, lambda xt, g: conv2d_backward_weight(xt, g, ws, 1, 1),
                 lambda xa, g: ref_backward(xa, np.zeros(ws), g, 1, 1, 1, 1)[1],
                 (x, gy), dtype="float32", scale=CONV2D.scale)
    assert sums, "the split path did not run"


@pytest.mark.parametrize(("shape", "tiles"), [
    # (N, C, H, K, stride) of a 3x3 padding-1 layer -> the data gradient's tiles on an H100
    ((128, 128, 16, 128, 1), "128x128x16/8x8v"),
    ((128, 256, 8, 256, 1), "128x64x16/8x4v"),
    ((128, 512, 4, 512, 1), "128x64x16/8x4v"),
    ((128, 256, 8, 512, 2), "64x64x16/4x4v"),  # CONV2D_IGEMM_PHASE: two slots of taps
    ((128, 64, 32, 128, 2), "64x64x16/4x4v"),
])
def test_data_gradient_tiles(shape: tuple[int, ...], tiles: str,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_CONV_WINOGRAD", "0")  # the implicit GEMM's tiles
    n, c, h, k, stride = shape
    q = ConvQuery(conv_geometry("conv2d", (n, c, h, h), (k, c, 3, 3), stride, 1), "float32",
                  "data")
    assert KernelSelector(_gpu_profile()).select(CONV2D_FAMILY, q).extra["tiles"] == tiles


@pytest.mark.parametrize(("shape", "expected"), [
    # (N, C, H, K, stride, direction) of a 1x1 layer -> the variant and tiles on an H100
    ((128, 256, 56, 64, 1, "data"), "CONV2D_IM2COL"),  # 64 output channels: a GEMM
    ((128, 256, 56, 128, 1, "data"), "CONV2D_IM2COL"),
    ((128, 64, 56, 256, 1, "data"), "CONV2D_IM2COL"),
    ((128, 512, 28, 256, 1, "data"), "CONV2D_IMPLICIT_TILED 128x128x16/8x8v"),
    ((128, 256, 56, 512, 2, "data"), "CONV2D_IGEMM_PHASE 128x128x16/8x8"),  # wide phases
    # narrow: one phase of four has taps, 128 x 128 would leave compute units idle
    ((128, 1024, 8, 2048, 2, "data"), "CONV2D_IGEMM_PHASE 128x64x16/8x4v"),
    ((128, 64, 32, 128, 2, "data"), "CONV2D_IGEMM_PHASE 64x64x16/4x4"),
    ((128, 64, 56, 256, 1, "weight"), "CONV2D_IMPLICIT_TILED 128x64x16/8x4v"),
    ((128, 128, 28, 512, 1, "weight"), "CONV2D_IMPLICIT_TILED 128x128x16/8x8v"),
    ((128, 64, 56, 64, 1, "weight"), "CONV2D_IMPLICIT_TILED 64x64x16/4x4v"),
])
def test_pointwise_gradient_gpu_rule(shape: tuple[Any, ...], expected: str) -> None:
    """1x1 gradients on a GPU (NOTE [ GPU implicit-GEMM tiles ]): the column path (a plain
    GEMM for 1x1) between narrow and wide channel counts, the phase kernel with scalar tiles
    for wide strided phases, 128-row tiles for weight gradients of 64+ columns."""
    n, c, h, k, stride, direction = shape
    q = ConvQuery(conv_geometry("conv2d", (n, c, h, h), (k, c, 1, 1), stride, 0), "float32",
                  direction)
    cfg = KernelSelector(_gpu_profile()).select(CONV2D_FAMILY, q)
    assert " ".join([cfg.variant.name, *([cfg.extra["tiles"]] if "tiles" in cfg.extra else [])
                     ]) == expected


def test_cpu_gradient_rule() -> None:
    """OpenCL CPU devices: Winograd for both gradients from a 16x16 input plane (64 channels
    on 32x32, data: 2.6x over the column path on PoCL, 4.4x on Intel's runtime), the column
    path otherwise."""
    pocl = KernelSelector(dataclasses.replace(extended_profile(None), name="pthread",
                                              device_type="cpu", vendor_family="pocl",
                                              local_mem_size=524288, compute_units=2))
    big = conv_geometry("conv2d", (4, 64, 32, 32), (64, 64, 3, 3), 1, 1)
    small = conv_geometry("conv2d", (4, 16, 8, 8), (32, 16, 3, 3), 1, 1)
    im2col, winograd = KernelVariant.CONV2D_IM2COL, KernelVariant.CONV2D_WINOGRAD
    for g, direction, want in ((big, "data", winograd), (big, "weight", winograd),
                               (small, "data", im2col), (small, "weight", im2col)):
        assert pocl.select(CONV2D_FAMILY, ConvQuery(g, "float32", direction)).variant is want


def test_geometry_is_remembered_and_still_checked() -> None:
    """NOTE [ Remembered geometries ]: a repeated call returns the checked geometry; an
    argument equal to a remembered one but of another type (True, 1.0) is still refused."""
    first = conv_geometry("conv2d", (1, 3, 5, 5), (4, 3, 3, 3), 1, 1)
    assert conv_geometry("conv2d", (1, 3, 5, 5), (4, 3, 3, 3), 1, 1) is first
    bads: list[Any] = [True, 1.0, (1, True)]
    for bad in bads:
        with pytest.raises(TypeError, match="stride must be an int or a pair of ints"):
            conv_geometry("conv2d", (1, 3, 5, 5), (4, 3, 3, 3), bad, 1)


def test_conv_query_and_source_errors() -> None:
    g = conv_geometry("conv2d", (1, 3, 5, 5), (4, 3, 3, 3))
    with pytest.raises(ValueError, match="ConvQuery: direction must be one of forward, data, "
                                         "weight, got 'backward'"):
        ConvQuery(g, "float32", "backward")
    window = (3, 3, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="unknown direction 'sideways'"):
        igemm_source("sideways", window, DEFAULT_TILES)
    with pytest.raises(ValueError, match=r"a window is \(r, s, sh, sw, ph, pw, dh, dw\)"):
        igemm_source("forward", window[:6], DEFAULT_TILES)
    with pytest.raises(ValueError, match="does not cover its tiles"):
        igemm_source("forward", window, IgemmTiles(64, 64, 16, 16, 3))
    bad = KernelConfig(IMPLICIT_TILED, 64, 64, 16, local_size_2d=(16, 3))  # 64 rows over 3
    assert tiles_of(bad) == FALLBACK_TILES
