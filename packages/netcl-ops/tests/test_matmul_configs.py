"""The register-tiled GEMM's tuning knobs forced on every OpenCL device against NumPy: tall
and wide work-item blocks (16 x 8, 8 x 16 outputs: four 4-vector fragment reads), the swizzled
work-group order (with a shorter last band of tile rows), a split K with large blocks, over
odd sizes (non-multiples of the tiles and of 4: the scalar-load path; multiples of 4: the
vector loads), the four transpose layouts, batches, the bias epilogues and float16 storage.

The configs are scaled-down forms of the ones the GPU rules pick (same code paths, smaller
work-groups), so the CPU devices build them in seconds."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernel_selector import KernelConfig, KernelVariant
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor
from netcl.core.testing import supports_dtype
from netcl.ops import build_matmul_kernel
from netcl.ops._matmul_family import gemm_params
from netcl.ops._matmul_kernels import gemm_source
from netcl.ops._matmul_launch import Operand, run_gemm
from netcl.ops.testing import skip_unless_one_opencl_cpu_device

RNG = np.random.default_rng(7)
LAYOUTS = [(False, False), (False, True), (True, False), (True, True)]

# (bm, bn, bk, rows, columns per work-item, warp_n, swizzle, split_k)
CONFIGS = [
    (64, 64, 8, 16, 8, 8, 2, 0),  # 16 x 8 blocks, swizzled in bands of 2 tile rows
    (32, 128, 8, 8, 16, 8, 0, 0),  # 8 x 16 blocks
    (64, 64, 8, 8, 8, 8, 3, 3),  # 8 x 8 blocks, swizzle and a split K (shorter last slice)
]


def _config(c: tuple[int, ...]) -> KernelConfig:
    bm, bn, bk, tm, tn, warp_n, swizzle, split = c
    return KernelConfig(KernelVariant.MATMUL_REGISTER_TILED, tile_m=bm, tile_n=bn, tile_k=bk,
                        work_per_thread=tm,
                        extra={"micro_n": tn, "warp_n": warp_n, "swizzle": swizzle,
                               "split_k": split})


def _ref(a: Any, b: Any, ta: bool, tb: bool) -> Any:
    return np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)


def _close(got: Any, want: Any, tol: float, msg: str) -> None:
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()),
                               err_msg=msg)


def test_knobs_reach_the_kernel_parameters() -> None:
    p = gemm_params(_config(CONFIGS[0]), "float32", False, True)
    assert (p.bm, p.bn, p.bk, p.tm, p.tn, p.lx, p.ly, p.warp_n, p.swizzle) == (
        64, 64, 8, 16, 8, 8, 4, 8, 2)
    assert gemm_params(_config((64, 64, 8, 16, 8, 8, -1, 0)), "float32", False,
                       False).swizzle == 0
    cfg = _config(CONFIGS[0])
    cfg.extra["lds_pad"] = -2  # unpadded only when both operands are vector-loaded
    p = gemm_params(cfg, "float32", False, False)
    assert "#define LDA_S 68" in gemm_source(p)
    assert "#define LDA_S 64" in gemm_source(dataclasses.replace(p, vec_a=True, vec_b=True))
    cfg.extra["by_layout"] = {"nt": {"lds_pad": 8, "tile_k": 16}}
    p = gemm_params(cfg, "float32", False, True)
    assert (p.lds_pad, p.bk) == (8, 16) and "#define LDA_S 72" in gemm_source(p)


def _one_cpu_device(dev: DeviceHandle) -> None:
    """Skip ``dev`` unless it is a GPU or the one OpenCL CPU device these big kernels (16x8
    outputs per work-item, all four layouts, scalar and vector loads) are built on
    (:func:`netcl.ops.testing.one_opencl_cpu_device`)."""
    skip_unless_one_opencl_cpu_device(dev)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c)))
def test_register_tiled_knobs(dev: DeviceHandle, cfg: tuple[int, ...]) -> None:
    _one_cpu_device(dev)
    mm = build_matmul_kernel(dev.queue, _config(cfg))
    # unaligned odd sizes (scalar loads, clamped edges, a K tail) and 4-aligned ones (vector
    # loads) covering 3 x 2 and 5 x 1 tiles; a batch of 3 broadcasting B
    for (M, N, K) in [(131, 130, 71), (260, 68, 36)]:
        for ta, tb in LAYOUTS:
            a = RNG.standard_normal((K, M) if ta else (M, K))
            b = RNG.standard_normal((N, K) if tb else (K, N))
            got = mm(Tensor.from_host(dev.queue, a, dtype="float32"),
                     Tensor.from_host(dev.queue, b, dtype="float32"), ta, tb).to_host()
            _close(got, _ref(a, b, ta, tb), 1e-4, f"{cfg} {(M, N, K)} ta={ta} tb={tb}")
    a, b = RNG.standard_normal((3, 33, 20)), RNG.standard_normal((20, 257))
    got = mm(Tensor.from_host(dev.queue, a, dtype="float32"),
             Tensor.from_host(dev.queue, b, dtype="float32")).to_host()
    _close(got, a @ b, 1e-4, f"{cfg} batched")
    for n in (1, 7):
        x, y = RNG.standard_normal((n, n)), RNG.standard_normal((n, n))
        got = mm(Tensor.from_host(dev.queue, x, dtype="float32"),
                 Tensor.from_host(dev.queue, y, dtype="float32")).to_host()
        _close(got, x @ y, 1e-4, f"{cfg} {n}x{n}")


@pytest.mark.parametrize("mode", [1, 2])
def test_register_tiled_knobs_bias(dev: DeviceHandle, mode: int) -> None:
    """Bias per row (1) or per column (2), two second-level batch entries with their own bias:
    the epilogue of the vector store (4-aligned) and of the scalar one (odd N)."""
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend has no kernel variants")
    config = _config(CONFIGS[0])
    q = dev.queue
    for M, N, K in [(68, 132, 20), (67, 129, 21)]:
        a = RNG.standard_normal((2, M, K)).astype(np.float32)
        b = RNG.standard_normal((2, K, N)).astype(np.float32)
        nb = M if mode == 1 else N
        bias = RNG.standard_normal((2, nb)).astype(np.float32)
        ta, tb, tbias = (Tensor.from_host(q, v) for v in (a, b, bias))
        out = Tensor.from_host(q, np.zeros((2, M, N), np.float32))
        for t in (ta, tb, tbias, out):
            t.wait()
        run_gemm(q, config, "float32", Operand(ta.buffer, ta.offset, K, 0, M * K),
                 Operand(tb.buffer, tb.offset, N, 0, K * N),
                 Operand(out.buffer, out.offset, N, 0, M * N), M, N, K, batch=(1, 2),
                 bias=tbias.buffer, bias_mode=mode, sbias=nb)
        want = a @ b + (bias[:, :, None] if mode == 1 else bias[:, None, :])
        _close(out.to_host(), want, 1e-4, f"bias mode {mode} {(M, N, K)}")


def test_register_tiled_knobs_float16(dev: DeviceHandle) -> None:
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend has no kernel variants")
    if not supports_dtype(dev, "float16"):
        pytest.skip(f"float16 unsupported on {dev.device_name}")
    mm = build_matmul_kernel(dev.queue, _config(CONFIGS[0]), "float16")
    a, b = RNG.standard_normal((68, 36)), RNG.standard_normal((36, 132))
    got = mm(Tensor.from_host(dev.queue, a, dtype="float16"),
             Tensor.from_host(dev.queue, b, dtype="float16")).to_host()
    want = (a.astype(np.float16).astype(np.float64) @ b.astype(np.float16).astype(np.float64))
    _close(got.astype(np.float64), want, 1e-2, "float16")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_staging_for_tn(dev: DeviceHandle, dtype: str) -> None:
    """``extra["stage_tn"]``: nn, nt and tt run as tn through transposed scratch copies
    (batched, a broadcast operand transposed once, odd sizes, a split K behind it)."""
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend has no kernel variants")
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    cfg = _config((64, 64, 8, 8, 8, 8, 0, 0))
    cfg.extra.update(stage_tn=("nn", "nt", "tt"), lds_pad=-2)
    split = _config((64, 64, 8, 8, 8, 8, 0, 3))
    split.extra["stage_tn"] = ("nn", "nt", "tt")
    tol = 1e-4 if dtype == "float32" else 1e-2
    for config in (cfg, split):
        mm = build_matmul_kernel(dev.queue, config, dtype)
        for ta, tb in LAYOUTS:
            for a_shape, b_shape in [((3, 37, 70), (70, 33)), ((2, 68, 36), (2, 36, 132)),
                                     ((37, 70), (70, 33))]:
                a = RNG.standard_normal(a_shape[:-2] + a_shape[-2:][::-1] if ta else a_shape)
                b = RNG.standard_normal(b_shape[:-2] + b_shape[-2:][::-1] if tb else b_shape)
                if dtype == "float16":
                    a, b = (v.astype(np.float16).astype(np.float64) for v in (a, b))
                got = mm(Tensor.from_host(dev.queue, a, dtype=dtype),
                         Tensor.from_host(dev.queue, b, dtype=dtype), ta, tb).to_host()
                _close(got.astype(np.float64), _ref(a, b, ta, tb), tol,
                       f"staged {(ta, tb)} {a_shape} {b_shape}")
    x, y = (Tensor.from_host(dev.queue, RNG.standard_normal(s), dtype=dtype)
            for s in ((37, 70), (70, 33)))
    with count_launches() as launches:
        build_matmul_kernel(dev.queue, cfg, dtype)(x, y)
    assert launches[0] == 2  # the transpose of A, then the tn GEMM
    cfg.extra["stage_unaligned_only"] = True  # 37 x 70 @ 70 x 33: not 4-aligned, staged
    x4, y4 = (Tensor.from_host(dev.queue, RNG.standard_normal(s), dtype=dtype)
              for s in ((36, 68), (68, 32)))
    with count_launches() as launches:
        build_matmul_kernel(dev.queue, cfg, dtype)(x, y)
        build_matmul_kernel(dev.queue, cfg, dtype)(x4, y4)
    assert launches[0] == 3


@pytest.mark.parametrize("merge", ["group", "launch"])
def test_split_k_per_layout(dev: DeviceHandle, merge: str) -> None:
    """A ``by_layout`` entry's own split K, tiles and merge: nt splits K into 3 slices with
    32x64 tiles (one launch merged by the last group per tile; or slices, a shorter last
    slice, the sum), nn runs one launch."""
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend has no kernel variants")
    cfg = _config((64, 64, 8, 8, 8, 8, 0, 0))
    cfg.extra["by_layout"] = {"nt": {"split_k": 3, "tile_m": 32, "work_per_thread": 4,
                                     "split_merge": merge}}
    mm = build_matmul_kernel(dev.queue, cfg)
    for tb, count in ((True, 1 if merge == "group" else 3), (False, 1)):
        a, b = RNG.standard_normal((37, 70)), RNG.standard_normal((33, 70) if tb else (70, 33))
        x, y = (Tensor.from_host(dev.queue, v, dtype="float32") for v in (a, b))
        with count_launches() as launches:
            got = mm(x, y, False, tb).to_host()
        _close(got, _ref(a, b, False, tb), 1e-4, f"per-layout split tb={tb}")
        assert launches[0] == count
