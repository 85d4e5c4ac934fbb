"""The tensor-core GEMM (netcl.ops._matmul_mma): the probe's verdict on every device, the source
generator's configurations and errors, the whole kernel with emulated PTX (its layouts and
split-K cases on one OpenCL CPU device, Intel's where present: PoCL compiles each emulated
program for ~20 s at its first launch), and the real kernel against NumPy where a GPU
passes the probe (NVIDIA only: skipped elsewhere, CI has none)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close
from netcl.ops import _matmul_mma as mma_module
from netcl.ops._matmul_mma import (
    MMA_ENV,
    MmaConfig,
    matmul_mma,
    mma_applicable,
    mma_available,
    mma_config,
    mma_split_k,
    mma_verdict,
    run_hgemm_mma,
)
from netcl.ops._matmul_mma_source import hgemm_alignment_ok, hgemm_kernel_name, hgemm_source
from netcl.ops.testing import skip_unless_one_opencl_cpu_device

RNG = np.random.default_rng(16)

# Small tiles keep the emulated kernels (a barrier per emulated warp instruction) quick on CPUs.
EMULATED = MmaConfig(bm=32, bn=32, bk=32, warps_m=1, warps_n=2, stages=2, emulate=True)

# (batch, M, N, K, transpose_a, transpose_b, out_dtype): edges in every dimension.
CASES = [
    (1, 7, 16, 24, False, False, "float32"),
    (1, 40, 48, 40, False, True, "float16"),
    (1, 16, 40, 72, True, False, "float32"),
    (2, 24, 8, 16, True, True, "float16"),
    (3, 33, 24, 8, False, False, "float32"),
]


def is_opencl(dev: DeviceHandle) -> bool:
    return dev.backend != "cpu"


def operands(batch: int, M: int, N: int, K: int, ta: bool, tb: bool
             ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Float16 A and B in their stored layouts and the float64 product of their values."""
    a = RNG.uniform(-1, 1, (batch, K, M) if ta else (batch, M, K)).astype(np.float16)
    b = RNG.uniform(-1, 1, (batch, N, K) if tb else (batch, K, N)).astype(np.float16)
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    fa = np.swapaxes(fa, 1, 2) if ta else fa
    fb = np.swapaxes(fb, 1, 2) if tb else fb
    return a, b, fa @ fb


def test_verdict_on_every_device(dev: DeviceHandle) -> None:
    ok, reason = mma_verdict(dev.queue)
    assert mma_available(dev.queue) is ok
    assert mma_verdict(dev.queue) == (ok, reason)  # cached: the same answer again
    vendor = "" if dev.cl_device is None else dev.cl_device.vendor.lower()
    if dev.backend == "cpu" or "nvidia" not in vendor:
        assert not ok
        assert reason


def test_env_switch_turns_it_off(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MMA_ENV, "0")
    ok, reason = mma_verdict(dev.queue)
    assert not ok
    assert reason == ("the NumPy backend has no tensor cores" if dev.backend == "cpu"
                      else f"{MMA_ENV}=0")


@pytest.mark.parametrize("config", [
    MmaConfig(),
    MmaConfig(bm=128, bn=256, bk=32, warps_m=2, warps_n=4, stages=2, out_f16=True),
    MmaConfig(bm=64, bn=64, bk=64, warps_m=2, warps_n=2, stages=2, trans_a=True),
    MmaConfig(bm=64, bn=128, bk=16, warps_m=2, warps_n=2, stages=4, pipeline=False,
              trans_b=True, l2_prefetch=True),
    MmaConfig(async_copy=False, ldmatrix=False, trans_a=True, trans_b=True),
], ids=lambda c: c.label())
def test_source_text(config: MmaConfig) -> None:
    src = hgemm_source(config)
    assert f"#define KERNEL_NAME {hgemm_kernel_name(config)}\n" in src
    assert src.count("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") == 1
    assert ("CP_ASYNC16(sa0" in src) is config.async_copy  # the macros are always defined
    assert ("LDSM_X4(af" in src or "LDSM_X4_T(af" in src) is config.ldmatrix
    assert ("L2::128B" in src) is config.l2_prefetch
    assert ("half" in src) is config.out_f16
    assert "$" not in src  # every template field was filled
    assert src.count("{") == src.count("}")
    emulated = hgemm_source(MmaConfig(**{**config.__dict__, "emulate": True}))
    assert "__asm__" not in emulated


@pytest.mark.parametrize(("changes", "rule"), [
    ({"bk": 24}, "bk must be a multiple of 16"),
    ({"bk": 16}, "bk must be a multiple of 32 for pipelined fragments"),
    ({"warps_m": 3}, "bm / warps_m must be a multiple of 16"),
    ({"stages": 1}, "stages must be >= 2"),
    ({"stages": 4}, "the stages must fit in 48 KiB"),
    ({"bm": 16, "bn": 64, "warps_m": 1, "warps_n": 4}, "divide among the work-items"),
])
def test_bad_configs_name_the_rule(changes: dict[str, int], rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        hgemm_source(MmaConfig(**changes))  # type: ignore[arg-type]


def test_alignment_rule() -> None:
    c = MmaConfig()
    assert hgemm_alignment_ok(c, 7, 16, 24, (0, 8, 2), (24, 16, 16), (168, 384, 112))
    assert not hgemm_alignment_ok(c, 7, 16, 20, (0, 0, 0), (20, 16, 16), (0, 0, 0))  # K
    assert not hgemm_alignment_ok(c, 7, 12, 24, (0, 0, 0), (24, 12, 12), (0, 0, 0))  # N
    assert not hgemm_alignment_ok(c, 7, 16, 24, (4, 0, 0), (24, 16, 16), (0, 0, 0))  # offset
    transposed = MmaConfig(trans_a=True)
    assert not hgemm_alignment_ok(transposed, 7, 16, 24, (0, 0, 0), (7, 16, 16), (0, 0, 0))
    assert hgemm_alignment_ok(transposed, 8, 16, 20, (0, 0, 0), (8, 16, 16), (0, 0, 0))


def test_config_choice_fills_the_device() -> None:
    assert (mma_config(4096, 4096, 4096).bm, mma_config(4096, 4096, 4096).bn) == (128, 128)
    small = mma_config(128, 128, 4096, out_f16=False)
    assert (small.bm, small.bn, small.out_f16) == (64, 64, False)
    assert mma_config(64, 64, 64, batch=512).bm == 128  # a big batch fills the device
    assert mma_config(8, 8, 8, trans_a=True, trans_b=True).trans_a


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:4])) + "_"
                         + ("t" if c[4] else "n") + ("t" if c[5] else "n") + "_" + c[6])
def test_emulated_kernel_matches_numpy(dev: DeviceHandle, case: tuple[Any, ...]) -> None:
    skip_unless_one_opencl_cpu_device(dev)
    batch, M, N, K, ta, tb, out_dtype = case
    a, b, ref = operands(batch, M, N, K, ta, tb)
    squeeze = batch == 1
    ta_, tb_ = (Tensor.from_host(dev.queue, x[0] if squeeze else x, dtype="float16")
                for x in (a, b))
    c = matmul_mma(ta_, tb_, transpose_a=ta, transpose_b=tb, out_dtype=out_dtype,
                   config=EMULATED)
    assert c.dtype == out_dtype
    assert c.shape == ((M, N) if squeeze else (batch, M, N))
    assert_close(c.to_host(), ref[0] if squeeze else ref, out_dtype)


def test_emulated_offsets_and_leading_dimensions(dev: DeviceHandle) -> None:
    if not is_opencl(dev):
        pytest.skip("emulated PTX runs on OpenCL devices; the NumPy backend has no kernels")
    batch, M, N, K = 2, 9, 16, 24
    lda, ldb, ldc = K + 8, N + 16, N + 2
    offsets = (8, 16, 4)
    strides = (M * lda + 8, K * ldb, M * ldc + 6)
    a, b, ref = operands(batch, M, N, K, False, False)
    ha = np.zeros(offsets[0] + batch * strides[0], np.float16)
    hb = np.zeros(offsets[1] + batch * strides[1], np.float16)
    for i in range(batch):
        ha[offsets[0] + i * strides[0]:][: M * lda].reshape(M, lda)[:, :K] = a[i]
        hb[offsets[1] + i * strides[1]:][: K * ldb].reshape(K, ldb)[:, :N] = b[i]
    hc = np.full(offsets[2] + batch * strides[2], 7.0, np.float32)
    da, db, dc = (Tensor.from_host(dev.queue, h, dtype=d)
                  for h, d in ((ha, "float16"), (hb, "float16"), (hc, "float32")))
    run_hgemm_mma(dev.queue, EMULATED, da.buffer, db.buffer, dc.buffer, M, N, K,
                  offsets=offsets, lds=(lda, ldb, ldc), batch=batch, batch_strides=strides)
    out = dc.to_host()
    for i in range(batch):
        block = out[offsets[2] + i * strides[2]:][: M * ldc].reshape(M, ldc)
        assert_close(block[:, :N], ref[i])
        assert (block[:, N:] == 7.0).all()  # the padding between rows is left alone
    assert (out[: offsets[2]] == 7.0).all()


def test_errors(dev: DeviceHandle) -> None:
    x16 = Tensor.from_host(dev.queue, np.ones((8, 8)), dtype="float16")
    x32 = Tensor.from_host(dev.queue, np.ones((8, 8)), dtype="float32")
    with pytest.raises(TypeError, match="matmul_mma: needs float16 tensors, got float32"):
        matmul_mma(x32, x16, config=EMULATED)
    with pytest.raises(TypeError, match="matmul_mma: a must be a netcl Tensor"):
        matmul_mma(np.ones((8, 8)), x16)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="out_dtype must be float16 or float32"):
        matmul_mma(x16, x16, out_dtype="float64", config=EMULATED)
    assert not mma_applicable(x16, x16) or mma_available(dev.queue)
    if not is_opencl(dev):
        with pytest.raises(RuntimeError, match="the NumPy backend has no tensor cores"):
            matmul_mma(x16, x16, config=EMULATED)
        return
    if not mma_available(dev.queue):
        with pytest.raises(RuntimeError, match="matmul_mma: no tensor cores on this device"):
            matmul_mma(x16, x16)
    y = Tensor.from_host(dev.queue, np.ones((8, 12)), dtype="float16")
    with pytest.raises(ValueError, match="inner dimensions differ"):
        matmul_mma(y, y, config=EMULATED)
    with pytest.raises(ValueError, match="multiples of 8 elements"):
        matmul_mma(x16, y, config=EMULATED)  # N = 12
    with pytest.raises(ValueError, match="the same batch dimensions"):
        matmul_mma(x16, Tensor.from_host(dev.queue, np.ones((2, 8, 8)), dtype="float16"),
                   config=EMULATED)


def test_emulated_four_dimensional_batch(dev: DeviceHandle,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    if not is_opencl(dev):
        pytest.skip("emulated PTX runs on OpenCL devices; the NumPy backend has no kernels")
    monkeypatch.setattr(mma_module, "_MAX_GRID_Y", 4)  # 6 matrices: launches of 4 and 2
    a = RNG.uniform(-1, 1, (2, 3, 9, 16)).astype(np.float16)
    b = RNG.uniform(-1, 1, (2, 3, 16, 24)).astype(np.float16)
    ta, tb = (Tensor.from_host(dev.queue, x, dtype="float16") for x in (a, b))
    c = matmul_mma(ta, tb, out_dtype="float32", config=EMULATED)
    assert c.shape == (2, 3, 9, 24)
    assert_close(c.to_host(), a.astype(np.float64) @ b.astype(np.float64))


GPU_CASES = [
    (1, 1000, 1000, 1000, False, False, "float32"),
    (1, 1000, 1000, 1000, False, False, "float16"),
    (3, 77, 136, 72, False, True, "float16"),
    (2, 136, 72, 264, True, False, "float32"),
    (1, 256, 264, 520, True, True, "float16"),
    (1, 8, 8, 8, False, False, "float32"),
    (1, 2048, 512, 4096, False, False, "float16"),
    (1, 384, 384, 8192, True, False, "float16"),  # split K (a GPT weight gradient)
    (1, 136, 72, 1064, True, True, "float32"),  # split K with a shorter last slice
]


@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: "x".join(map(str, c[:4])) + "_"
                         + ("t" if c[4] else "n") + ("t" if c[5] else "n") + "_" + c[6])
def test_tensor_cores_match_numpy(dev: DeviceHandle, case: tuple[Any, ...]) -> None:
    if not mma_available(dev.queue):
        pytest.skip(f"no tensor cores: {mma_verdict(dev.queue)[1]}")
    batch, M, N, K, ta, tb, out_dtype = case
    a, b, ref = operands(batch, M, N, K, ta, tb)
    squeeze = batch == 1
    ta_, tb_ = (Tensor.from_host(dev.queue, x[0] if squeeze else x, dtype="float16")
                for x in (a, b))
    assert mma_applicable(ta_, tb_, ta, tb)
    c = matmul_mma(ta_, tb_, transpose_a=ta, transpose_b=tb, out_dtype=out_dtype)
    # float32 output: accumulating K products (on tensor cores, with few guard bits) loses
    # about sqrt(K) ulps; float16 output: its own rounding dominates
    scale = max(1.0, float(np.sqrt(K)) / 4) if out_dtype == "float32" else 1.0
    assert_close(c.to_host(), ref[0] if squeeze else ref, out_dtype, scale=scale)


# (M, N, K, transpose_a, transpose_b, out_dtype, split): slices of 32-deep k tiles, with and
# without a shorter last slice (K = 72 in two: 64 + 8).
SPLIT_CASES = [
    (7, 16, 72, False, False, "float32", 2),
    (40, 48, 200, False, True, "float16", 3),
    (16, 40, 136, True, False, "float32", 5),
    (24, 8, 96, True, True, "float16", 3),
]


@pytest.mark.parametrize("case", SPLIT_CASES, ids=lambda c: "x".join(map(str, c[:3])) + "_"
                         + ("t" if c[3] else "n") + ("t" if c[4] else "n") + f"_{c[5]}_s{c[6]}")
def test_emulated_split_k_matches_numpy(dev: DeviceHandle, case: tuple[Any, ...]) -> None:
    """NOTE [ Tensor-core split-K ]: K slices as batch entries, a shorter last slice, their
    float32 sum rounded once to the output dtype; repeated calls give the same bits."""
    skip_unless_one_opencl_cpu_device(dev)
    M, N, K, ta, tb, out_dtype, split = case
    a, b, ref = operands(1, M, N, K, ta, tb)
    ta_, tb_ = (Tensor.from_host(dev.queue, x[0], dtype="float16") for x in (a, b))
    c = matmul_mma(ta_, tb_, transpose_a=ta, transpose_b=tb, out_dtype=out_dtype,
                   config=EMULATED, split_k=split)
    assert c.dtype == out_dtype and c.shape == (M, N)
    got = c.to_host()
    assert_close(got, ref[0], out_dtype)
    again = matmul_mma(ta_, tb_, transpose_a=ta, transpose_b=tb, out_dtype=out_dtype,
                       config=EMULATED, split_k=split)
    np.testing.assert_array_equal(again.to_host(), got)


def test_split_choice() -> None:
    """Few output tiles and a long K split (about two work-groups per compute unit, slices of
    at least 512); many tiles, a short K or a batch do not."""
    gpt = mma_config(384, 384, 8192)
    assert mma_split_k(384, 384, 8192, 1, 132, gpt) == 15
    assert mma_split_k(1536, 384, 8192, 1, 132, mma_config(1536, 384, 8192)) == 4
    assert mma_split_k(384, 384, 8192, 4, 132, gpt) == 1
    assert mma_split_k(384, 384, 256, 1, 132, gpt) == 1
    assert mma_split_k(4096, 4096, 8192, 1, 132, mma_config(4096, 4096, 8192)) == 1
