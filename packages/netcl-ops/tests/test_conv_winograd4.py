"""Winograd F(4x4, 3x3) (variant ``CONV2D_WINOGRAD_F4``), forced: the forward, the data gradient
and the weight gradient against a float64 NumPy reference on every backend (the OpenCL devices
run the 6x6-tile transforms; NumPy has its own convolution), odd sizes with partial tiles at the
edges, 1 to 33 channels, padding 0 to 2, batches 1 and 3, bias; the split weight-gradient
reduction; forcing by ``NETCL_FORCE_CONV2D``; float32 accuracy (NOTE [ Winograd F(4x4)
accuracy ])."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.device_profile import extended_profile
from netcl.core.kernel_selector import KernelSelector, KernelVariant, force_variant
from netcl.core.testing import supports_dtype
from netcl.ops import _conv_rule, _conv_winograd
from netcl.ops._conv import conv2d, conv2d_backward_data, conv2d_backward_weight
from netcl.ops._conv_family import conv2d_family
from netcl.ops._conv_geometry import conv_geometry
from netcl.ops._conv_kernels import WINOGRAD_MATRICES
from netcl.ops._conv_rule import CONV2D_FAMILY, WINOGRAD_F4, ConvQuery
from netcl.ops._matmul_family import gemm_family
from netcl.ops.testing import check_op, to_device

RNG = np.random.default_rng(4)
SCALE = 10.0  # conv2d's tolerance scale (test_conv.CONV2D)


def arr(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape)


def ref_conv(x: Any, w: Any, b: Any, padding: int) -> Any:
    """A stride-1 convolution in float64 through NumPy's sliding windows."""
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    y = np.einsum("nchwrs,kcrs->nkhw", win, w)
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def ref_grads(x: Any, w: Any, gy: Any, padding: int) -> tuple[Any, Any]:
    """(dx, dw) of ``sum(conv2d(x, w) * gy)``, stride 1."""
    p = padding
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(xp, w.shape[2:], axis=(2, 3))
    dw = np.einsum("nchwrs,nkhw->kcrs", win, gy)
    dxp = np.zeros(xp.shape)
    oh, ow = gy.shape[2:]
    for r in range(3):
        for s in range(3):
            dxp[:, :, r:r + oh, s:s + ow] += np.einsum("kc,nkhw->nchw", w[:, :, r, s], gy)
    return dxp[:, :, p:p + x.shape[2], p:p + x.shape[3]], dw


# (input, weight, padding): odd planes (partial 4x4 tiles), 1-33 channels, batches 1 and 3
SAMPLES = [
    ((1, 1, 1, 1), (3, 1, 3, 3), 1),
    ((3, 3, 5, 7), (7, 3, 3, 3), 0),
    ((1, 7, 9, 33), (16, 7, 3, 3), 1),
    ((3, 16, 7, 5), (1, 16, 3, 3), 1),
    ((1, 16, 33, 9), (7, 16, 3, 3), 0),
    ((3, 33, 5, 5), (3, 33, 3, 3), 2),
]


def _kinds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The conv2d program kinds ``_conv_winograd`` builds from now on."""
    kinds: list[str] = []
    family = conv2d_family

    def spy(context: Any, kind: str, dtype: str) -> Any:
        kinds.append(kind)
        return family(context, kind, dtype)

    monkeypatch.setattr(_conv_winograd, "conv2d_family", spy)
    return kinds


@pytest.mark.parametrize("sample", range(len(SAMPLES)))
def test_winograd4(dev: DeviceHandle, sample: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forced, F(4x4, 3x3) computes the forward (with bias), the data gradient and the weight
    gradient, through its own program on OpenCL devices."""
    kinds = _kinds(monkeypatch)
    xs, ws, pad = SAMPLES[sample]
    x, w, b = arr(*xs), arr(*ws), arr(ws[0])
    gy = arr(*ref_conv(x, w, None, pad).shape)
    with force_variant(WINOGRAD_F4):
        check_op(dev, lambda xt, wt, bt: conv2d(xt, wt, bt, 1, pad),
                 lambda xa, wa, ba: ref_conv(xa, wa, ba, pad), (x, w, b), scale=SCALE)
        check_op(dev, lambda g, wt: conv2d_backward_data(g, wt, xs, 1, pad),
                 lambda g, wa: ref_grads(np.zeros(xs), wa, g, pad)[0], (gy, w), scale=SCALE)
        check_op(dev, lambda xt, g: conv2d_backward_weight(xt, g, ws, 1, pad),
                 lambda xa, g: ref_grads(xa, np.zeros(ws), g, pad)[1], (x, gy), scale=SCALE)
    assert kinds == (["winograd4"] * 3 if dev.backend == "cl" else [])


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_winograd4_dtypes(dev: DeviceHandle, dtype: str, monkeypatch: pytest.MonkeyPatch
                          ) -> None:
    """float64 through the same kernels; float16, too inexact in 6x6 tiles (NOTE [ Winograd
    F(4x4) accuracy ]), gives way to the rule's variant when F(4x4) is forced."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    kinds = _kinds(monkeypatch)
    xs, ws, pad = (2, 5, 9, 7), (6, 5, 3, 3), 1
    x, w = arr(*xs), arr(*ws)
    gy = arr(*ref_conv(x, w, None, pad).shape)
    with force_variant(WINOGRAD_F4):
        check_op(dev, lambda xt, wt: conv2d(xt, wt, None, 1, pad),
                 lambda xa, wa: ref_conv(xa, wa, None, pad), (x, w), dtype=dtype, scale=SCALE)
        check_op(dev, lambda g, wt: conv2d_backward_data(g, wt, xs, 1, pad),
                 lambda g, wa: ref_grads(np.zeros(xs), wa, g, pad)[0], (gy, w), dtype=dtype,
                 scale=SCALE)
        check_op(dev, lambda xt, g: conv2d_backward_weight(xt, g, ws, 1, pad),
                 lambda xa, g: ref_grads(xa, np.zeros(ws), g, pad)[1], (x, gy), dtype=dtype,
                 scale=SCALE)
    assert "winograd4" not in kinds if dtype == "float16" else (
        kinds == (["winograd4"] * 3 if dev.backend == "cl" else []))


def test_winograd4_float32_accuracy(dev: DeviceHandle) -> None:
    """NOTE [ Winograd F(4x4) accuracy ]: at 64 channels on 14x14 the float32 error (max abs
    difference over max abs value, against float64) stays below 3e-5 in all three
    computations (measured 2-5e-6 on PoCL and Intel's CPU runtime; F(2x2): 3e-7)."""
    xs, ws, pad = (2, 64, 14, 14), (64, 64, 3, 3), 1
    x, w, b = arr(*xs), arr(*ws), arr(ws[0])
    gy = arr(*ref_conv(x, w, None, pad).shape)
    dx, dw = ref_grads(x, w, gy, pad)
    xt, wt, bt, gt = (to_device(dev, a, "float32") for a in (x, w, b, gy))
    with force_variant(WINOGRAD_F4):
        got = [conv2d(xt, wt, bt, 1, pad), conv2d_backward_data(gt, wt, xs, 1, pad),
               conv2d_backward_weight(xt, gt, ws, 1, pad)]
    for name, t, want in zip(("forward", "data", "weight"), got,
                             (ref_conv(x, w, b, pad), dx, dw), strict=True):
        err = float(np.abs(t.to_host() - want).max() / np.abs(want).max())
        assert err < 3e-5, f"{name}: relative error {err:.2e}"


@pytest.mark.parametrize("xs", [(9, 5, 17, 17), (3, 5, 16, 16)], ids=["rest", "even"])
def test_winograd4_weight_gradient_split(dev: DeviceHandle, xs: tuple[int, ...],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """NOTE [ Split Winograd weight gradient ] with 36 GEMMs: the reduction over the 4x4 tiles
    (9 x 25 = 225 and 3 x 16 = 48 of them) cut into slices and summed in order."""
    if dev.backend != "cl":
        pytest.skip("the Winograd kernels run on OpenCL devices")
    monkeypatch.setattr(_conv_winograd, "_SPLIT_PER_UNIT", 10_000)  # as many slices as fit
    monkeypatch.setattr(_conv_winograd, "_MIN_SLICE", 16)
    sums: list[Any] = []
    family = gemm_family

    def spy(context: Any, params: Any) -> Any:
        sums.append(params)
        return family(context, params)

    monkeypatch.setattr(_conv_winograd, "gemm_family", spy)
    ws = (7, xs[1], 3, 3)
    x, w = arr(*xs), arr(*ws)
    gy = arr(*ref_conv(x, w, None, 1).shape)
    with force_variant(WINOGRAD_F4):
        check_op(dev, lambda xt, g: conv2d_backward_weight(xt, g, ws, 1, 1),
                 lambda xa, g: ref_grads(xa, np.zeros(ws), g, 1)[1], (x, gy), scale=SCALE)
    assert sums, "the split path did not run"


def test_winograd4_forcing(monkeypatch: pytest.MonkeyPatch) -> None:
    """``NETCL_FORCE_CONV2D=CONV2D_WINOGRAD_F4`` picks it for all three computations of a
    3x3 stride-1 geometry; forced onto a strided one (or a data gradient of padding 3) it gives
    way to the rule, like ``CONV2D_WINOGRAD``; the GPU rule picks it for float32, F(2x2) for
    float16."""
    gpu = KernelSelector(dataclasses.replace(extended_profile(None), name="GPU", device_type="gpu",
                                             vendor_family="nvidia", compute_units=132,
                                             local_mem_size=49152, max_work_group_size=1024))
    three = conv_geometry("conv2d", (8, 64, 16, 16), (64, 64, 3, 3), 1, 1)
    strided = conv_geometry("conv2d", (8, 64, 16, 16), (64, 64, 3, 3), 2, 1)
    wide_pad = conv_geometry("conv2d", (8, 64, 16, 16), (64, 64, 3, 3), 1, 3)
    monkeypatch.setenv("NETCL_FORCE_CONV2D", "CONV2D_WINOGRAD_F4")
    for direction in ("forward", "data", "weight"):
        assert gpu.select(CONV2D_FAMILY, ConvQuery(three, "float32", direction)).variant is (
            WINOGRAD_F4)
        assert gpu.select(CONV2D_FAMILY, ConvQuery(strided, "float32", direction)).variant is not (
            WINOGRAD_F4)
    assert gpu.select(CONV2D_FAMILY, ConvQuery(wide_pad, "float32", "data")).variant is not (
        WINOGRAD_F4)
    monkeypatch.delenv("NETCL_FORCE_CONV2D")
    for direction in ("forward", "data", "weight"):  # the GPU rule: F(4x4) (H200 measured)
        assert gpu.select(CONV2D_FAMILY, ConvQuery(three, "float32", direction)).variant is (
            WINOGRAD_F4)
    for direction in ("forward", "data"):  # float16 keeps F(2x2)
        assert gpu.select(CONV2D_FAMILY, ConvQuery(three, "float16", direction)).variant is (
            KernelVariant.CONV2D_WINOGRAD)


def test_transform_matrices() -> None:
    """The F(m x m, 3x3) matrices the kernels are generated from compute a 3x3 correlation of
    an (m + 2)-square tile exactly (float64: to 1e-13)."""
    for m, (bt, g, at) in WINOGRAD_MATRICES.items():
        b_t, g_, a_t = (np.array(mat, dtype=np.float64) for mat in (bt, g, at))
        d, f = arr(m + 2, m + 2), arr(3, 3)
        y = a_t @ ((g_ @ f @ g_.T) * (b_t @ d @ b_t.T)) @ a_t.T
        want = np.array([[np.sum(d[i:i + 3, j:j + 3] * f) for j in range(m)] for i in range(m)])
        np.testing.assert_allclose(y, want, rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="tile must be one of"):
        _conv_winograd._program(None, "float32", 3)


def test_winograd4_image_chunks(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scratch of one image's tiles: the three computations go an image at a time (input and
    output offsets per chunk; the weight gradient's chunks added in order)."""
    if dev.backend != "cl":
        pytest.skip("the Winograd kernels run on OpenCL devices")
    xs, ws, pad = (3, 4, 9, 11), (5, 4, 3, 3), 1
    tiles = 3 * 3  # 4x4 tiles of one 9x11 output plane
    monkeypatch.setattr(_conv_winograd, "_SCRATCH_ELEMENTS", 36 * (4 + 5) * tiles)
    assert _conv_winograd._chunk(conv_geometry("t", xs, ws, 1, pad), 36, tiles) == 1
    x, w, b = arr(*xs), arr(*ws), arr(ws[0])
    gy = arr(*ref_conv(x, w, None, pad).shape)
    with force_variant(WINOGRAD_F4):
        check_op(dev, lambda xt, wt, bt: conv2d(xt, wt, bt, 1, pad),
                 lambda xa, wa, ba: ref_conv(xa, wa, ba, pad), (x, w, b), scale=SCALE)
        check_op(dev, lambda g, wt: conv2d_backward_data(g, wt, xs, 1, pad),
                 lambda g, wa: ref_grads(np.zeros(xs), wa, g, pad)[0], (gy, w), scale=SCALE)
        check_op(dev, lambda xt, g: conv2d_backward_weight(xt, g, ws, 1, pad),
                 lambda xa, g: ref_grads(xa, np.zeros(ws), g, pad)[1], (x, gy), scale=SCALE)


def test_winograd4_rule_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_conv_rule.GPU_WINOGRAD_VARIANT`` (the one-line switch) set to F(4x4): the GPU rule
    picks it wherever it picked F(2x2) (256 channels: all three computations), except for
    float16, which keeps F(2x2)."""
    monkeypatch.setattr(_conv_rule, "GPU_WINOGRAD_VARIANT", WINOGRAD_F4)
    gpu = KernelSelector(dataclasses.replace(extended_profile(None), name="GPU", device_type="gpu",
                                             vendor_family="nvidia", compute_units=132,
                                             local_mem_size=49152, max_work_group_size=1024))
    wide = conv_geometry("conv2d", (128, 256, 14, 14), (256, 256, 3, 3), 1, 1)
    for direction in ("forward", "data", "weight"):
        assert gpu.select(CONV2D_FAMILY, ConvQuery(wide, "float32", direction)).variant is (
            WINOGRAD_F4)
        assert gpu.select(CONV2D_FAMILY, ConvQuery(wide, "float16", direction)).variant is (
            KernelVariant.CONV2D_WINOGRAD)
