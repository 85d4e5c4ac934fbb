"""Tensor-core convolutions (netcl.ops._conv_mma): routing answers on every device, the source
generator's configurations and errors, all three directions with emulated PTX on every
OpenCL device against a float64 NumPy reference, and the real kernels (plus conv2d's routing
through them) where a GPU passes the mma probe (NVIDIA only: skipped elsewhere)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.ops import conv2d, conv2d_backward_data, conv2d_backward_weight
from netcl.ops._conv_geometry import ConvGeometry, conv_geometry
from netcl.ops._conv_mma import (
    ConvMmaConfig,
    conv2d_mma,
    conv2d_mma_applicable,
    conv2d_mma_config,
    conv_dims,
    weight_split,
)
from netcl.ops._conv_mma_source import (
    CONV_DIRECTIONS,
    ConvDims,
    _b_variant,
    conv_mma_source,
    gemm_dims,
)
from netcl.ops._matmul_mma import MMA_ENV, mma_available
from netcl.ops.testing import skip_unless_one_opencl_cpu_device

RNG = np.random.default_rng(16)

# Small tiles keep the emulated kernels (a barrier per emulated warp instruction) quick on CPUs.
EMULATED = ConvMmaConfig(bm=32, bn=32, warps_m=1, warps_n=2, emulate=True)

# (input shape, weight shape, stride, padding, dilation): odd sizes, strides, 1x1, edges.
# Rows of 16 and 8 (output) pixels take the chunked B gathers (NOTE [ Chunked B gather ]).
GEOMETRIES = [
    ((2, 3, 7, 16), (5, 3, 3, 3), 1, 1, 1),
    ((3, 5, 8, 16), (10, 5, 3, 3), 2, 1, 1),
    ((1, 4, 9, 7), (7, 4, 3, 2), (2, 1), (0, 2), (1, 2)),
    ((2, 40, 6, 16), (36, 40, 1, 1), 2, 0, 1),
]


def is_opencl(dev: DeviceHandle) -> bool:
    return dev.backend != "cpu"


def view(t: Tensor, offset: int, shape: tuple[int, ...]) -> Tensor:
    """``shape`` elements of ``t``'s buffer from element ``offset`` on (OpenCL tensors)."""
    return Tensor(shape=shape, dtype=t.dtype, queue=t.queue, context=t.context,
                  buffer=t.buffer, offset=offset, _backend=t._backend)


def geometry(case: tuple[Any, ...]) -> ConvGeometry:
    xs, ws, stride, padding, dilation = case
    return conv_geometry("conv2d", xs, ws, stride, padding, dilation)


def reference(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], g: ConvGeometry
              ) -> tuple[np.ndarray[Any, Any], ...]:
    """float64 im2col ``(cols, y)``: columns (n, c*r*s, oh*ow) and the forward output."""
    (sh, sw), (ph, pw), (dh, dw) = g.stride, g.padding, g.dilation
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    taps: np.ndarray[Any, Any] = np.empty((g.n, g.c, g.r, g.s, g.oh, g.ow))
    for r in range(g.r):
        for s in range(g.s):
            taps[:, :, r, s] = xp[:, :, r * dh:r * dh + sh * (g.oh - 1) + 1:sh,
                                  s * dw:s * dw + sw * (g.ow - 1) + 1:sw]
    cols = taps.reshape(g.n, g.crs, g.pixels)
    y = np.einsum("kq,nqp->nkp", w.astype(np.float64).reshape(g.k, g.crs), cols)
    return cols, y.reshape(g.n, g.k, g.oh, g.ow)


def backward_reference(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any],
                       gy: np.ndarray[Any, Any], g: ConvGeometry
                       ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """float64 ``(dx, dw)`` by the adjoint of the forward (a dense Jacobian; small sizes)."""
    cols, _ = reference(x, w, g)
    g64 = gy.astype(np.float64).reshape(g.n, g.k, g.pixels)
    dw = np.einsum("nkp,nqp->kq", g64, cols).reshape(g.k, g.c, g.r, g.s)
    dx = np.zeros(x.shape)
    base = np.zeros(x.shape)
    for idx in np.ndindex(*x.shape):  # d y / d x[idx] is the forward of a unit impulse
        base[idx] = 1.0
        _, unit = reference(base, w, g)
        dx[idx] = float((unit * gy.astype(np.float64)).sum())
        base[idx] = 0.0
    return dx, dw


def check(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], terms: int) -> None:
    """float16 output of a float32-accumulated sum of ``terms`` products of float16 values."""
    scale = max(1.0, float(np.abs(want).max()))
    tol = 2e-3 * scale + 1e-3 * np.sqrt(terms)
    err = float(np.abs(got.astype(np.float64) - want).max())
    assert err <= tol, f"max error {err:.3g} > {tol:.3g}"


def test_routing_answers_without_raising(dev: DeviceHandle) -> None:
    g = geometry(GEOMETRIES[0])
    ok = mma_available(dev.queue)
    assert _b_variant("forward", conv_dims(g), EMULATED) == "forward_chunk"
    assert _b_variant("data", conv_dims(geometry(GEOMETRIES[2])), EMULATED) == "data"
    for direction in CONV_DIRECTIONS:
        assert conv2d_mma_applicable(dev.queue, g, "float16", direction) is ok
        assert not conv2d_mma_applicable(dev.queue, g, "float32", direction)
    assert not conv2d_mma_applicable(dev.queue, g, "float16", "sideways")
    grouped = conv_geometry("conv2d", (2, 4, 5, 5), (4, 2, 3, 3), groups=2)
    assert not conv2d_mma_applicable(dev.queue, grouped, "float16")
    vendor = "" if dev.cl_device is None else dev.cl_device.vendor.lower()
    if "nvidia" not in vendor:
        assert not ok


def test_env_switch_turns_routing_off(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    monkeypatch.setenv(MMA_ENV, "0")
    assert not conv2d_mma_applicable(dev.queue, geometry(GEOMETRIES[0]), "float16")


@pytest.mark.parametrize("direction", CONV_DIRECTIONS)
@pytest.mark.parametrize("config", [
    ConvMmaConfig(),
    ConvMmaConfig(bm=64, bn=128, warps_m=2, warps_n=2, out_f16=False),
    ConvMmaConfig(bm=64, bn=128, bk=64, warps_m=2, warps_n=4),
    ConvMmaConfig(bm=64, bn=64, warps_m=2, warps_n=2),
], ids=lambda c: c.label())
def test_source_text(direction: str, config: ConvMmaConfig) -> None:
    d = ConvDims(3, 5, 7, 9, 6, 3, 3, 4, 5, sh=2, sw=2, ph=1, pw=1)
    for partial in (False, True):
        src = conv_mma_source(direction, d, config, partial)
        assert src.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 1
        assert f"#define KERNEL_NAME conv_mma_{direction}\n" in src
        assert ("conv_mma_wsum" in src) is (direction == "weight")
        assert ("#define OUT_T half" in src) is (config.out_f16 and not partial)
        assert "$" not in src
        assert src.count("{") == src.count("}")
        emulated = conv_mma_source(direction, d, ConvMmaConfig(**{**config.__dict__,
                                                                   "emulate": True}))
        assert "__asm__" not in emulated


@pytest.mark.parametrize(("changes", "direction", "rule"), [
    ({"bk": 48}, "forward", "bk must be a multiple of 32"),
    ({"warps_m": 3}, "forward", "bm / warps_m must be a multiple of 16"),
    ({"bn": 256}, "data", "data needs bn to divide the 128 work-items"),
    ({"bm": 256, "bn": 128, "bk": 64}, "weight", "the two stages must fit in 48 KiB"),
    ({}, "sideways", "direction must be one of"),
])
def test_bad_configs_name_the_rule(changes: dict[str, int], direction: str, rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        ConvMmaConfig(**changes).check(direction)  # type: ignore[arg-type]


def test_config_choice() -> None:
    big = ConvDims(128, 128, 16, 16, 256, 3, 3, 16, 16, ph=1, pw=1)
    assert conv2d_mma_config("forward", big, 132).bm == 128
    narrow = ConvDims(128, 64, 32, 32, 64, 3, 3, 32, 32, ph=1, pw=1)
    assert conv2d_mma_config("forward", narrow, 132).bm == 64
    assert conv2d_mma_config("forward", big, 132).threads == 256
    small = ConvDims(2, 8, 4, 4, 8, 3, 3, 4, 4, ph=1, pw=1)
    assert conv2d_mma_config("data", small, 132).label() == "64x128x32_w2x2"
    assert conv2d_mma_config("weight", small, 132).label() == "64x64x32_w2x2"
    few = ConvDims(128, 256, 8, 8, 512, 3, 3, 4, 4, sh=2, sw=2, ph=1, pw=1)  # 64 big tiles
    assert conv2d_mma_config("forward", few, 132).label() == "64x64x32_w2x2"
    assert conv2d_mma_config("weight", few, 132).label() == "128x128x32_w2x4"
    splits, per = weight_split(narrow, conv2d_mma_config("weight", narrow, 132), 132)
    k_tiles = -(-gemm_dims("weight", narrow)[2] // 32)
    assert splits > 1 and (splits - 1) * per < k_tiles <= splits * per
    assert weight_split(small, ConvMmaConfig(), 132) == (1, 1)


@pytest.mark.parametrize("case", GEOMETRIES, ids=lambda c: "x".join(map(str, c[0])) + "_"
                         + "x".join(map(str, c[1])))
def test_emulated_directions_match_numpy(dev: DeviceHandle, case: tuple[Any, ...]) -> None:
    skip_unless_one_opencl_cpu_device(dev)  # emulated PTX: slow builds, the same math
    g = geometry(case)
    x = RNG.uniform(-1, 1, (g.n, g.c, g.h, g.w)).astype(np.float16)
    w = RNG.uniform(-1, 1, (g.k, g.c, g.r, g.s)).astype(np.float16)
    b = RNG.uniform(-1, 1, (g.k,)).astype(np.float16)
    gy = RNG.uniform(-1, 1, (g.n, g.k, g.oh, g.ow)).astype(np.float16)
    _, y_ref = reference(x, w, g)
    dx_ref, dw_ref = backward_reference(x, w, gy, g)
    q = dev.queue
    tx, tw, tb, tgy = (Tensor.from_host(q, a, dtype="float16") for a in (x, w, b, gy))
    y = Tensor.from_shape(q, (g.n, g.k, g.oh, g.ow), "float16", fill=None)
    conv2d_mma("forward", tx, tw, g, y, bias=tb, config=EMULATED)
    check(y.to_host(), y_ref + b.astype(np.float64).reshape(1, -1, 1, 1), g.crs)
    dx = Tensor.from_shape(q, (g.n, g.c, g.h, g.w), "float16", fill=None)
    conv2d_mma("data", tgy, tw, g, dx, config=EMULATED)
    check(dx.to_host(), dx_ref, g.k * g.r * g.s)
    for out_dtype in ("float16", "float32"):
        config = ConvMmaConfig(**{**EMULATED.__dict__, "out_f16": out_dtype == "float16"})
        dw = Tensor.from_shape(q, (g.k, g.c, g.r, g.s), out_dtype, fill=None)
        conv2d_mma("weight", tx, tgy, g, dw, config=config)
        check(dw.to_host(), dw_ref, g.n * g.pixels)


def test_emulated_split_weight_gradient_and_offsets(dev: DeviceHandle) -> None:
    """A reduction long enough to split (float32 partial sums, then their ordered sum), with
    every tensor a view some elements into its buffer."""
    skip_unless_one_opencl_cpu_device(dev)  # emulated PTX: slow builds, the same math
    g = conv_geometry("conv2d", (6, 3, 16, 12), (4, 3, 3, 3), padding=1)
    dims = conv_dims(g)
    assert weight_split(dims, EMULATED, 8)[0] > 1
    x = RNG.uniform(-1, 1, (g.n, g.c, g.h, g.w)).astype(np.float16)
    gy = RNG.uniform(-1, 1, (g.n, g.k, g.oh, g.ow)).astype(np.float16)
    cols, _ = reference(x, np.zeros((g.k, g.c, g.r, g.s)), g)
    dw_ref = np.einsum("nkp,nqp->kq", gy.astype(np.float64).reshape(g.n, g.k, -1), cols)
    q = dev.queue
    hx = Tensor.from_host(q, np.concatenate([np.zeros(8, np.float16), x.ravel()]),
                          dtype="float16")
    hg = Tensor.from_host(q, np.concatenate([np.zeros(16, np.float16), gy.ravel()]),
                          dtype="float16")
    tx, tgy = view(hx, 8, x.shape), view(hg, 16, gy.shape)
    hout = Tensor.from_host(q, np.full(3 + g.k * g.crs, 7.0, np.float16), dtype="float16")
    dw = view(hout, 3, (g.k, g.c, g.r, g.s))
    conv2d_mma("weight", tx, tgy, g, dw, config=EMULATED)
    out = hout.to_host()
    assert (out[:3] == 7.0).all()
    check(out[3:].reshape(g.k, g.crs), dw_ref, g.n * g.pixels)


def test_errors(dev: DeviceHandle) -> None:
    g = geometry(GEOMETRIES[0])
    x = Tensor.from_host(dev.queue, np.zeros((g.n, g.c, g.h, g.w)), dtype="float32")
    w = Tensor.from_host(dev.queue, np.zeros((g.k, g.c, g.r, g.s)), dtype="float16")
    y = Tensor.from_shape(dev.queue, (g.n, g.k, g.oh, g.ow), "float16", fill=None)
    with pytest.raises(ValueError, match="direction must be one of"):
        conv2d_mma("sideways", x, w, g, y, config=EMULATED)
    if not is_opencl(dev):
        return
    with pytest.raises(TypeError, match="conv2d_mma: needs float16 operands"):
        conv2d_mma("forward", x, w, g, y, config=EMULATED)
    grouped = conv_geometry("conv2d", (2, 4, 5, 5), (4, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match="needs one group"):
        conv2d_mma("forward", w, w, grouped, y, config=EMULATED)


# -- real tensor cores (NVIDIA only) -------------------------------------------------------

# ResNet-18 (CIFAR) layers at a small batch, plus odd edges.
GPU_GEOMETRIES = [
    ((4, 3, 32, 32), (64, 3, 3, 3), 1, 1, 1),
    ((4, 64, 32, 32), (64, 64, 3, 3), 1, 1, 1),
    ((4, 64, 32, 32), (128, 64, 3, 3), 2, 1, 1),
    ((4, 64, 32, 32), (128, 64, 1, 1), 2, 0, 1),
    ((4, 256, 8, 8), (512, 256, 3, 3), 2, 1, 1),
    ((4, 512, 4, 4), (512, 512, 3, 3), 1, 1, 1),
    ((3, 7, 11, 13), (9, 7, 5, 3), (2, 1), (2, 1), (1, 2)),
]


@pytest.mark.parametrize("case", GPU_GEOMETRIES, ids=lambda c: "x".join(map(str, c[0])) + "_"
                         + "x".join(map(str, c[1])))
def test_tensor_cores_match_numpy(dev: DeviceHandle, case: tuple[Any, ...]) -> None:
    if not is_opencl(dev) or not mma_available(dev.queue):
        pytest.skip("no tensor cores on this device (NVIDIA's OpenCL driver only)")
    g = geometry(case)
    x = RNG.standard_normal((g.n, g.c, g.h, g.w)).astype(np.float16)
    w = (RNG.standard_normal((g.k, g.c, g.r, g.s)) / np.sqrt(g.crs)).astype(np.float16)
    b = RNG.standard_normal((g.k,)).astype(np.float16)
    gy = RNG.standard_normal((g.n, g.k, g.oh, g.ow)).astype(np.float16)
    cols, y_ref = reference(x, w, g)
    dw_ref = np.einsum("nkp,nqp->kq", gy.astype(np.float64).reshape(g.n, g.k, -1), cols)
    q = dev.queue
    tx, tw, tb, tgy = (Tensor.from_host(q, a, dtype="float16") for a in (x, w, b, gy))
    stride, padding, dilation = case[2:]
    y = conv2d(tx, tw, tb, stride, padding, dilation)  # routed to the tensor cores
    check(y.to_host(), y_ref + b.astype(np.float64).reshape(1, -1, 1, 1), g.crs)
    dw = conv2d_backward_weight(tx, tgy, w.shape, stride, padding, dilation)
    check(dw.to_host().reshape(g.k, -1), dw_ref, g.n * g.pixels)
    dx = conv2d_backward_data(tgy, tw, x.shape, stride, padding, dilation)
    # the data gradient through float32 conv2d_backward_data on the NumPy-exact path
    want = conv2d_backward_data(Tensor.from_host(q, gy, dtype="float32"),
                                Tensor.from_host(q, w, dtype="float32"), x.shape, stride,
                                padding, dilation).to_host()
    check(dx.to_host(), want.astype(np.float64), g.k * g.r * g.s)
