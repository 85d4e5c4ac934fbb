"""The phase-specialized data gradient of strided convolutions (``CONV2D_IGEMM_PHASE``, NOTE
[ Phase-specialized data gradient ]) against the float64 NumPy reference on every OpenCL
device: strides 2 and 3, kernels 1x1 to 7x7, paddings 0-3, odd planes and channel counts,
batches of 1 and 3, groups, input rows and columns no output reads (they come back as zeros:
every result starts as NaN), several tilings, float16 storage and float64; the rule's pick
and the variant's reach. The windows of 3x3 stride 3 and over, the tilings and the dtypes
run on one OpenCL CPU device (Intel's where present: PoCL takes 30-185 s to compile each of
those programs at its first launch, 20 minutes for this file; the kernels do not depend on
the CPU device) and on GPUs; every OpenCL device runs the 1x1 and 3x3 stride 2 windows."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.device_profile import extended_profile
from netcl.core.kernel_selector import KernelConfig, KernelSelector, force_variant
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops._conv import conv2d_backward_data
from netcl.ops._conv_geometry import ConvGeometry, conv_geometry
from netcl.ops._conv_igemm import igemm_backward_data_phase
from netcl.ops._conv_igemm_kernels import (
    FALLBACK_TILES,
    TILINGS,
    IgemmTiles,
    phase_channel_fast,
    phase_data_source,
    phase_slots,
    phase_table,
)
from netcl.ops._conv_rule import (
    CONV2D_FAMILY,
    IMPLICIT_TILED,
    PHASE_DATA,
    ConvQuery,
    phase_data_applies,
)
from netcl.ops.testing import check_op, skip_unless_one_opencl_cpu_device

RNG = np.random.default_rng(7)
SCALE = 10.0  # test_conv's tolerance multiplier for convolutions


def ref_backward_data(x_shape: tuple[int, ...], w: Any, gy: Any, stride: Any, padding: Any,
                      dilation: Any = 1, groups: int = 1) -> Any:
    """The data gradient in float64: each tap's weight times grad_out scattered back onto the
    padded input, then the padding cut off."""
    (sh, sw), (ph, pw), (dh, dw) = ((int(a), int(b)) for a, b in (
        np.broadcast_to(p, 2) for p in (stride, padding, dilation)))
    n, c, h, wd = x_shape
    k, cg, r_, s_ = w.shape
    oh, ow = gy.shape[2:]
    dxp = np.zeros((n, c, h + 2 * ph + sh * r_ * dh, wd + 2 * pw + sw * s_ * dw))
    for g in range(groups):
        ks, cs = slice(g * k // groups, (g + 1) * k // groups), slice(g * cg, (g + 1) * cg)
        for r in range(r_):
            for s in range(s_):
                hs = slice(r * dh, r * dh + (oh - 1) * sh + 1, sh)
                ws = slice(s * dw, s * dw + (ow - 1) * sw + 1, sw)
                dxp[:, cs, hs, ws] += np.einsum("kc,nkhw->nchw", w[ks, :, r, s], gy[:, ks])
    return dxp[:, :, ph:ph + h, pw:pw + wd]

# (input (N, C, H, W), weight (K, C / groups, R, S), stride, padding, groups): every window
# (kernel, stride, padding) is one program, so each carries several planes, channel counts
# and batches
CASES: list[tuple[tuple[int, ...], tuple[int, ...], Any, Any, int]] = [
    ((3, 33, 7, 7), (9, 33, 1, 1), 2, 0, 1),  # 1x1 stride 2: one phase, three of zeros
    ((1, 1, 1, 1), (3, 1, 1, 1), 2, 0, 1),
    ((3, 7, 9, 9), (33, 7, 1, 1), 3, 0, 1),  # 1x1 stride 3: eight phases of zeros
    ((1, 3, 7, 7), (7, 3, 1, 1), 3, 0, 1),  # rows and columns 1, 2, 4, 5 read by no output
    ((1, 3, 9, 9), (7, 3, 1, 1), 2, 1, 1),  # 1x1 padded: the even pixels get nothing
    ((3, 33, 9, 9), (7, 33, 3, 3), 2, 1, 1),  # ResNet's 3x3 stride 2: 4, 2, 2 and 1 taps
    ((1, 7, 33, 33), (3, 7, 3, 3), 2, 1, 1),
    ((1, 1, 1, 1), (1, 1, 3, 3), 2, 1, 1),
    ((2, 9, 9, 9), (6, 3, 3, 3), 2, 1, 3),  # grouped
    ((1, 3, 8, 8), (7, 3, 3, 3), 3, 0, 1),  # rows and columns 6, 7 read by no output
    ((3, 7, 9, 9), (1, 7, 3, 3), 3, 0, 1),
    ((1, 3, 7, 7), (5, 3, 3, 3), 2, 3, 1),  # padding beyond the kernel
    ((3, 7, 9, 9), (33, 7, 5, 5), 2, 2, 1),
    ((1, 33, 7, 7), (3, 33, 5, 5), 2, 2, 1),
    ((1, 3, 33, 33), (7, 3, 5, 5), 3, 1, 1),
    ((1, 3, 33, 33), (7, 3, 7, 7), 2, 3, 1),  # ResNet's stem on an odd plane
    ((3, 1, 9, 9), (3, 1, 7, 7), 2, 3, 1),
    ((1, 7, 9, 9), (3, 7, 7, 7), 3, 0, 1),  # one output row: rows 7, 8 get nothing
    ((3, 7, 9, 7), (5, 7, 3, 5), (2, 3), (0, 2), 1),  # non-square kernel, unequal strides
]


def _geometry(case: tuple[Any, ...]) -> ConvGeometry:
    xs, ws, stride, padding, groups = case
    return conv_geometry("conv2d", xs, ws, stride, padding, 1, groups)


def _config(t: IgemmTiles, pack: bool = True) -> KernelConfig:
    return KernelConfig(PHASE_DATA, t.bm, t.bn, t.bk, t.tm, local_size_2d=(t.lx, t.ly),
                        use_vectorization=t.vec, extra={"phase_pack": pack})


def _run(dev: DeviceHandle, case: tuple[Any, ...], tiles: IgemmTiles, dtype: str = "float32",
         pack: bool = True) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The kernel's data gradient (into a NaN-filled result: every element must be written)
    and the float64 reference (of the operands rounded to ``dtype``)."""
    xs, ws, stride, padding, groups = case
    g = _geometry(case)
    w = RNG.standard_normal(ws).astype(dtype).astype(np.float64)
    gy = RNG.standard_normal((g.n, g.k, g.oh, g.ow)).astype(dtype).astype(np.float64)
    q = dev.queue
    wt, gt = (Tensor.from_host(q, a, dtype=dtype) for a in (w, gy))
    dx = Tensor.from_host(q, np.full(xs, np.nan), dtype=dtype)
    igemm_backward_data_phase(gt, wt, g, dx, _config(tiles, pack))
    want = ref_backward_data(xs, w, gy, stride, padding, 1, groups)
    return dx.to_host().astype(np.float64), want


def _opencl(dev: DeviceHandle) -> None:
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend has no kernel variants")


# the CASES whose programs every OpenCL device builds (1x1 and 3x3 stride 2 windows)
EVERY_DEVICE = range(9)


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: f"case{i}")
def test_phase_data_gradient(dev: DeviceHandle, case: int) -> None:
    """Each case against the reference; the pixels no output reads are exact zeros."""
    if case in EVERY_DEVICE:
        _opencl(dev)
    else:
        skip_unless_one_opencl_cpu_device(dev)
    got, want = _run(dev, CASES[case], TILINGS["32x64"])
    assert not np.isnan(got).any()
    assert_close(got, want, "float32", scale=SCALE)
    assert (got[want == 0] == 0).all()  # the rows and columns no output reads


@pytest.mark.parametrize(("case", "tiling"), [
    (5, "128x128"), (5, "128x64v"), (5, "64x64v"), (5, "fallback"), (5, "32x64 one per slot"),
    (14, "32x64 one per slot"), (0, "128x128v"), (0, "64x64"), (0, "fallback"), (18, "128x64"),
])
def test_phase_data_tilings(dev: DeviceHandle, case: int, tiling: str) -> None:
    """The tilings the rule picks from and the fallback, on a 3x3 and a 1x1 stride 2 (the
    1x1's channel-fast A loads, :func:`phase_channel_fast`) and the non-square window; one
    phase per slot (``phase_pack`` False) on the two windows whose phases pack."""
    skip_unless_one_opencl_cpu_device(dev)
    name = tiling.split()[0]
    tiles = FALLBACK_TILES if name == "fallback" else TILINGS[name]
    got, want = _run(dev, CASES[case], tiles, pack="one per slot" not in tiling)
    assert_close(got, want, "float32", scale=SCALE)


@pytest.mark.parametrize(("case", "dtype"), [(5, "float16"), (0, "float16"), (5, "float64")])
def test_phase_data_dtypes(dev: DeviceHandle, case: int, dtype: str) -> None:
    """float16 storage (float accumulation) and float64."""
    skip_unless_one_opencl_cpu_device(dev)
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    got, want = _run(dev, CASES[case], TILINGS["64x64"], dtype)
    assert_close(got, want, dtype, scale=SCALE)


@pytest.mark.parametrize("case", [0, 5, 8])
def test_phase_data_forced(dev: DeviceHandle, case: int) -> None:
    """Forced through ``conv2d_backward_data`` (one launch on OpenCL devices; the NumPy
    backend computes it its own way), with the tiles the rule gives the device."""
    xs, ws, stride, padding, groups = CASES[case]
    g = _geometry(CASES[case])
    w, gy = RNG.standard_normal(ws), RNG.standard_normal((g.n, g.k, g.oh, g.ow))
    geo = {"stride": stride, "padding": padding, "groups": groups}
    with force_variant(PHASE_DATA), count_launches() as n:
        check_op(dev, lambda gt, wt: conv2d_backward_data(gt, wt, xs, **geo),
                 lambda ga, wa: ref_backward_data(xs, wa, ga, stride, padding, 1, groups),
                 (gy, w), scale=SCALE)
    if dev.backend != "cpu":
        assert n[0] == 1


def test_phase_data_is_reproducible(dev: DeviceHandle) -> None:
    """Each element written once, no atomics: bitwise equal reruns."""
    _opencl(dev)
    xs, ws, stride, padding, groups = CASES[5]
    g = _geometry(CASES[5])
    q = dev.queue
    wt = Tensor.from_host(q, RNG.standard_normal(ws), dtype="float32")
    gt = Tensor.from_host(q, RNG.standard_normal((g.n, g.k, g.oh, g.ow)), dtype="float32")
    with force_variant(PHASE_DATA):
        first = conv2d_backward_data(gt, wt, xs, stride, padding, 1, groups).to_host()
        again = conv2d_backward_data(gt, wt, xs, stride, padding, 1, groups).to_host()
    assert first.tobytes() == again.tobytes()


def test_phase_data_gives_way(dev: DeviceHandle) -> None:
    """Forced where it does not apply (stride 1, a dilated stride 2, the forward), the
    selector names another variant and the results stay right."""
    for stride, dilation in ((1, 1), (2, 2)):
        g = conv_geometry("conv2d", (2, 5, 9, 9), (4, 5, 3, 3), stride, 1, dilation)
        assert not phase_data_applies(g)
        w, gy = RNG.standard_normal((4, 5, 3, 3)), RNG.standard_normal((2, 4, g.oh, g.ow))
        with force_variant(PHASE_DATA):
            check_op(dev, lambda gt, wt: conv2d_backward_data(gt, wt, (2, 5, 9, 9), stride, 1,
                                                              dilation),
                     lambda ga, wa: ref_backward_data((2, 5, 9, 9), wa, ga, stride, 1,
                                                      dilation),
                     (gy, w), scale=SCALE)
    g = conv_geometry("conv2d", (2, 5, 9, 9), (4, 5, 3, 3), 2, 1)
    with force_variant(PHASE_DATA):
        forward = KernelSelector(extended_profile(None)).select(CONV2D_FAMILY, ConvQuery(g))
    assert forward.variant is not PHASE_DATA


def test_phase_table() -> None:
    """Every tap belongs to exactly one phase; phases go heaviest first; packed slots hold
    every phase once, none over 5/4 of the heaviest phase's taps."""
    for r, s, sh, sw, ph, pw in [(3, 3, 2, 2, 1, 1), (1, 1, 2, 2, 0, 0), (7, 7, 2, 2, 3, 3),
                                 (5, 5, 3, 3, 1, 1), (3, 5, 2, 3, 0, 2), (1, 1, 3, 3, 0, 0),
                                 (2, 4, 3, 2, 0, 3)]:
        table = phase_table((r, s, sh, sw, ph, pw, 1, 1))
        taps = [nth * ntw for *_, nth, ntw in table]
        assert sum(taps) == r * s and len(table) == sh * sw
        assert taps == sorted(taps, reverse=True)
        for a, b, rh, rw, nth, ntw in table:
            assert all((a + ph - (rh + i * sh)) % sh == 0 for i in range(nth))
            assert all((b + pw - (rw + j * sw)) % sw == 0 for j in range(ntw))
        for pack in (True, False):
            slots = phase_slots((r, s, sh, sw, ph, pw, 1, 1), pack)
            assert sorted(p for slot in slots for p in slot) == sorted(table)
            assert max(sum(p[4] * p[5] for p in slot) for slot in slots) * 4 <= taps[0] * 5
    assert [[p[4] * p[5] for p in slot] for slot in phase_slots((5, 5, 3, 3, 1, 1, 1, 1))] \
        == [[4, 1], [4], [4], [4], [2, 2], [2, 2]]
    assert [t[4] * t[5] for t in phase_table((3, 3, 2, 2, 1, 1, 1, 1))] == [4, 2, 2, 1]
    assert phase_channel_fast((1, 1, 2, 2, 0, 0, 1, 1), TILINGS["128x128"])
    assert not phase_channel_fast((3, 3, 2, 2, 1, 1, 1, 1), TILINGS["128x128"])


def test_phase_data_source_errors() -> None:
    for window in [(3, 3, 1, 1, 1, 1, 1, 1), (3, 3, 2, 2, 1, 1, 2, 2), (3, 3, 2, 2)]:
        with pytest.raises(ValueError, match="strided, undilated"):
            phase_data_source(window, TILINGS["64x64"])
    with pytest.raises(ValueError, match="does not cover"):
        phase_data_source((3, 3, 2, 2, 1, 1, 1, 1), IgemmTiles(64, 64, 16, 16, 5))
    g = conv_geometry("conv2d", (1, 3, 8, 8), (4, 3, 3, 3), 1, 1)
    with pytest.raises(ValueError, match="stride > 1"):
        igemm_backward_data_phase(None, None, g, None, _config(TILINGS["64x64"]))  # type: ignore[arg-type]


def _gpu() -> KernelSelector:
    return KernelSelector(dataclasses.replace(
        extended_profile(None), name="GPU", device_type="gpu", vendor_family="nvidia",
        compute_units=132, local_mem_size=49152, max_work_group_size=1024))


@pytest.mark.parametrize(("case", "expected"), [
    # (N, C, H, K, R, stride, padding, dilation) -> the data gradient's variant on a GPU
    # 3x3 stride 2: two slots of taps; 128 x 128 would give 128 work-groups to 132 units
    ((128, 128, 16, 256, 3, 2, 1, 1), "CONV2D_IGEMM_PHASE 128x64x16/8x4"),  # wide phases
    ((128, 256, 8, 512, 3, 2, 1, 1), "CONV2D_IGEMM_PHASE 64x64x16/4x4v"),
    ((128, 256, 8, 512, 1, 2, 0, 1), "CONV2D_IGEMM_PHASE 32x64x16/4x4"),  # 1 phase of 4
    ((128, 64, 56, 128, 1, 2, 0, 1), "CONV2D_IGEMM_PHASE 64x64x16/4x4"),
    ((128, 3, 224, 64, 7, 2, 3, 1), "CONV2D_IM2COL"),  # 3 rows of C: the column path
    ((128, 64, 16, 64, 3, 2, 2, 2), "CONV2D_IMPLICIT_TILED 64x64x16/4x4v"),  # dilated
    ((128, 64, 32, 64, 3, 1, 1, 1), "CONV2D_WINOGRAD_F4"),
])
def test_phase_data_gpu_rule(case: tuple[int, ...], expected: str,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU rule picks the phase kernel for strided, undilated data gradients of 9+ input
    channels; ``NETCL_CONV_PHASE_DATA=0`` gives them back to the phased implicit GEMM."""
    n, c, h, k, r, stride, padding, dilation = case
    g = conv_geometry("conv2d", (n, c, h, h), (k, c, r, r), stride, padding, dilation)
    cfg = _gpu().select(CONV2D_FAMILY, ConvQuery(g, "float32", "data"))
    assert " ".join([cfg.variant.name, *([cfg.extra["tiles"]] if "tiles" in cfg.extra
                                         else [])]) == expected
    if cfg.variant is PHASE_DATA:
        monkeypatch.setenv("NETCL_CONV_PHASE_DATA", "0")
        assert _gpu().select(CONV2D_FAMILY, ConvQuery(g, "float32", "data")).variant \
            is IMPLICIT_TILED
