"""Split-K merged by the last work-group of each output tile (NOTE [ Split-K ] in
netcl.ops._matmul_launch), on every OpenCL device: the one launch gives the same bits as the
two-launch path (slices, then ``gemm_split_k_sum``) and the float64 NumPy product within
float32 tolerance, in all four layouts, odd sizes, 2-8 slices with a shorter last one, every
bias mode; its tickets reset (repeated launches), the switches choose the path, and a
captured step replays it bitwise. Beside the OpenCL CPU device that runs slow-to-build programs
(Intel's where present), another CPU device (PoCL: it compiles each program at its first
launch, 30 s for these) runs each case in one layout, every layout in two cases."""

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
from netcl.ops import _matmul_launch as ml
from netcl.ops import build_matmul_kernel
from netcl.ops.testing import one_opencl_cpu_device

RNG = np.random.default_rng(7)
RT = KernelVariant.MATMUL_REGISTER_TILED
LAYOUTS = {"nn": (False, False), "nt": (False, True), "tn": (True, False), "tt": (True, True)}

# (bm, bn, bk, rows, columns per work-item, warp_n): the tiles GPU rules split with, and a
# block whose partials are stored as scalars
TILES = {
    "64x64x16/4x4": (64, 64, 16, 4, 4, 0),
    "64x64x16/8x4": (64, 64, 16, 8, 4, 8),
    "128x128x8/16x8": (128, 128, 8, 16, 8, 8),
    "128x64x16/8x4": (128, 64, 16, 8, 4, 8),
    "32x32x16/4x2": (32, 32, 16, 4, 2, 0),  # columns per work-item not a multiple of 4
}
# (M, N, K, slices asked for, bias mode, tiles): odd sizes, unaligned and 4-aligned (vector
# loads), K = 1000 / 4095 cut into 2-8 slices of whole k tiles with a shorter last slice
CASES = [
    (1, 7, 1000, 2, 0, "64x64x16/4x4"),
    (7, 33, 4095, 8, 1, "64x64x16/8x4"),
    (33, 257, 1000, 3, 2, "128x128x8/16x8"),
    (257, 1, 4095, 5, 2, "64x64x16/8x4"),
    (33, 33, 4095, 7, 0, "128x64x16/8x4"),
    (64, 36, 1000, 4, 1, "64x64x16/8x4"),
    (132, 68, 1000, 6, 2, "128x128x8/16x8"),
    (45, 70, 1000, 4, 1, "32x32x16/4x2"),
]


def config(tiles: str, split: int, merge: str | None) -> KernelConfig:
    bm, bn, bk, tm, tn, warp = TILES[tiles]
    extra: dict[str, Any] = {"micro_n": tn, "warp_n": warp, "split_k": split}
    if merge is not None:
        extra["split_merge"] = merge
    return KernelConfig(RT, tile_m=bm, tile_n=bn, tile_k=bk, work_per_thread=tm, extra=extra)


def opencl(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend has no kernel variants")
    return dev


class Gemm:
    """One product's operands on a device, run through ``run_gemm`` with a given config."""

    def __init__(self, dev: DeviceHandle, M: int, N: int, K: int, layout: str,
                 bias_mode: int = 0, dtype: str = "float32") -> None:
        self.q, self.dtype = dev.queue, dtype
        self.M, self.N, self.K = M, N, K
        self.ta, self.tb = LAYOUTS[layout]
        self.a = RNG.standard_normal((K, M) if self.ta else (M, K))
        self.b = RNG.standard_normal((N, K) if self.tb else (K, N))
        self.bias_mode = bias_mode
        self.bias = RNG.standard_normal(M if bias_mode == 1 else N)
        self.ta_t = Tensor.from_host(self.q, self.a, dtype=dtype)
        self.tb_t = Tensor.from_host(self.q, self.b, dtype=dtype)
        self.bias_t = Tensor.from_host(self.q, self.bias, dtype=dtype)

    def want(self) -> np.ndarray[Any, Any]:
        a = self.a.astype(np.float32 if self.dtype == "float32" else np.float64)
        b = self.b.astype(a.dtype)
        prod = (a.T if self.ta else a).astype(np.float64) @ (b.T if self.tb else b)
        bias = self.bias.astype(a.dtype).astype(np.float64)
        if self.bias_mode == 1:
            prod += bias[:, None]
        elif self.bias_mode == 2:
            prod += bias[None, :]
        return prod

    def run(self, cfg: KernelConfig) -> tuple[np.ndarray[Any, Any], int]:
        """The product and how many launches it took."""
        M, N, K = self.M, self.N, self.K
        c = Tensor.from_host(self.q, np.full((M, N), np.nan), dtype=self.dtype)
        with count_launches() as launches:
            ml.run_gemm(self.q, cfg, self.dtype, ml.operand(self.ta_t, M if self.ta else K),
                        ml.operand(self.tb_t, K if self.tb else N), ml.operand(c, N), M, N, K,
                        trans_a=self.ta, trans_b=self.tb,
                        bias=self.bias_t.buffer if self.bias_mode else None,
                        bias_mode=self.bias_mode)
        return c.to_host(), launches[0]


def check_close(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], what: str) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max(),
                               err_msg=what)


def same_bits(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], what: str) -> None:
    assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), (
        f"{what}: {int(np.sum(x != y))} elements differ, largest by "
        f"{float(np.nanmax(np.abs(x - y)))}")


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:4])) + f"b{c[4]}")
def test_one_launch_equals_two_launch_path_bitwise(dev: DeviceHandle, layout: str,
                                                   case: tuple[Any, ...]) -> None:
    dev = opencl(dev)
    if (one_opencl_cpu_device(dev) is not None
            and list(LAYOUTS).index(layout) != CASES.index(case) % len(LAYOUTS)):
        pytest.skip("the other layouts of this case run on the first OpenCL CPU device")
    M, N, K, split, bias_mode, tiles = case
    g = Gemm(dev, M, N, K, layout, bias_mode)
    what = f"{case} {layout}"
    merged, n_merged = g.run(config(tiles, split, "group"))
    launched, n_launched = g.run(config(tiles, split, "launch"))
    assert n_merged == 1, what
    assert n_launched == 3, what  # the full slices, the shorter last slice, the sum
    check_close(merged, g.want(), what)
    same_bits(merged, launched, what)


@pytest.mark.parametrize("split", range(2, 9))
def test_every_slice_count_and_repeated_launches(dev: DeviceHandle, split: int) -> None:
    """2..8 slices of K = 4095 (a shorter last slice each time): the same bits on every
    launch (the tickets are reset to 0), with a product on other tiles launched between."""
    dev = opencl(dev)
    g = Gemm(dev, 33, 65, 4095, "nt", 2)
    other = Gemm(dev, 70, 9, 1000, "tn", 1)
    cfg = config("64x64x16/8x4", split, "group")
    first, _ = g.run(cfg)
    check_close(first, g.want(), f"split {split}")
    same_bits(first, g.run(config("64x64x16/8x4", split, "launch"))[0], f"split {split}")
    for i in range(3):
        check_close(other.run(config("128x64x16/8x4", 3, "group"))[0], other.want(), "other")
        same_bits(first, g.run(cfg)[0], f"split {split}, launch {i + 2}")


def test_float64_bitwise(dev: DeviceHandle) -> None:
    dev = opencl(dev)
    if not supports_dtype(dev, "float64"):
        pytest.skip(f"float64 unsupported on {dev.device_name}")
    g = Gemm(dev, 33, 57, 1000, "tt", 1, "float64")
    merged, n = g.run(config("64x64x16/4x4", 5, "group"))
    assert n == 1
    np.testing.assert_allclose(merged, g.want(), rtol=1e-10, atol=1e-10)
    same_bits(merged, g.run(config("64x64x16/4x4", 5, "launch"))[0], "float64")


def test_the_switches_choose_the_path(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    """extra["split_merge"] wins over NETCL_GEMM_SPLIT_MERGE, which wins over the default
    ("group"); a K split in equal slices takes two launches on the old path; other values
    raise; a non-register-tiled kernel runs the old path."""
    dev = opencl(dev)
    g = Gemm(dev, 20, 12, 128, "nn")
    want = g.want()
    for env, merge, launches in [(None, None, 1), ("launch", None, 2), ("group", None, 1),
                                 ("launch", "group", 1), ("group", "launch", 2)]:
        if env is None:
            monkeypatch.delenv(ml.SPLIT_MERGE_ENV, raising=False)
        else:
            monkeypatch.setenv(ml.SPLIT_MERGE_ENV, env)
        got, n = g.run(config("64x64x16/4x4", 4, merge))
        check_close(got, want, f"{env} {merge}")
        assert n == launches, (env, merge)
    monkeypatch.setenv(ml.SPLIT_MERGE_ENV, "sometimes")
    with pytest.raises(ValueError, match="NETCL_GEMM_SPLIT_MERGE must be one of group, launch"):
        g.run(config("64x64x16/4x4", 4, None))
    monkeypatch.delenv(ml.SPLIT_MERGE_ENV)
    with pytest.raises(ValueError, match=r"split_merge'\] must be one of group, launch, got 1"):
        g.run(dataclasses.replace(config("64x64x16/4x4", 4, None),
                                  extra={"split_k": 4, "split_merge": 1}))
    tiled = KernelConfig(KernelVariant.MATMUL_TILED, tile_m=32, tile_n=32, tile_k=16,
                         work_per_thread=4, extra={"split_k": 3})
    got, n = g.run(tiled)
    check_close(got, want, "tiled")
    assert n == 3  # 128 = 48 + 48 + 32: slices, the last slice, the sum


def test_public_matmul_and_capture_replay(dev: DeviceHandle) -> None:
    """``matmul`` through a split config, eager and in a captured graph: the replays give the
    eager bits (the workspace is leased in the step, the tickets are the queue's)."""
    dev = opencl(dev)
    runtime = pytest.importorskip("netcl.runtime")
    q = dev.queue
    mm = build_matmul_kernel(q, config("64x64x16/8x4", 4, "group"))
    w = Tensor.from_host(q, RNG.standard_normal((1000, 37)), dtype="float32")

    def step(x: Tensor) -> Tensor:
        return mm(x, w)

    xs = [RNG.standard_normal((9, 1000)).astype(np.float32) for _ in range(4)]
    eager = [step(Tensor.from_host(q, x)).to_host().copy() for x in xs]
    captured = runtime.capture(step, warmup=0)
    first = Tensor.from_host(q, xs[0])
    with count_launches() as launches:
        captured(first)
    # one launch per run of the step while capturing too (it runs twice: 2; 8 before the
    # fix): a recorded launch returns no event, which the split path once took for "not
    # merged" and then also ran the two-launch path (twice the work in every replay; the H200
    # GPT step's kernel table showed both)
    assert launches[0] <= 2
    replayed = [captured(Tensor.from_host(q, x)).to_host().copy() for x in xs]
    assert captured.mode == "graph"
    for x, e, r in zip(xs, eager, replayed, strict=True):
        check_close(e, x.astype(np.float64) @ w.to_host().astype(np.float64), "eager")
        same_bits(e, r, "replay")


def test_two_queue_replay(dev: DeviceHandle) -> None:
    """Two independent split products in a graph replayed on two queues: they share the
    queue's ticket counters, so the replay orders them, and the results are the eager bits."""
    dev = opencl(dev)
    runtime = pytest.importorskip("netcl.runtime")
    q = dev.queue
    mm = build_matmul_kernel(q, config("64x64x16/4x4", 3, "group"))
    w1 = Tensor.from_host(q, RNG.standard_normal((600, 20)), dtype="float32")
    w2 = Tensor.from_host(q, RNG.standard_normal((600, 70)), dtype="float32")

    def step(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        return mm(x, w1), mm(y, w2)

    data = [(RNG.standard_normal((40, 600)).astype(np.float32),
             RNG.standard_normal((7, 600)).astype(np.float32)) for _ in range(3)]
    eager = [[t.to_host().copy() for t in step(Tensor.from_host(q, x), Tensor.from_host(q, y))]
             for x, y in data]
    captured = runtime.capture(step, warmup=0)
    captured(Tensor.from_host(q, data[0][0]), Tensor.from_host(q, data[0][1]))
    assert captured.graph is not None
    captured.graph.use_queues(2)
    for (x, y), want in zip(data, eager, strict=True):
        got = [t.to_host().copy() for t in captured(Tensor.from_host(q, x),
                                                    Tensor.from_host(q, y))]
        for g, e in zip(got, want, strict=True):
            same_bits(g, e, "two-queue replay")
