"""One GPU run sweeping register-tiled GEMM configurations over the shapes of issue #16.

For each shape class (large squares, mid squares and a batched product, tall-skinny with a
split K, a classifier's small products) it times every candidate configuration (tiles,
work-item block, K depth, warp layout, work-group swizzle, split K) in the four transpose
layouts by kernel time (profiling events, back-to-back launches), with ``torch.mm``/``bmm``
on CUDA (TF32 off) as the reference where PyTorch sees a GPU, and prints, per shape and
layout, the fastest configuration and its ratio to cuBLAS beside the selector's current
pick; then, per configuration, the geometric mean of its ratio over each class, with the
registers per work-item the NVIDIA compiler reports. Every row goes to ``$OUT/sweep_gemm.json``.
A time budget (``--budget`` seconds) stops the sweep early and still prints the summary.

    bash scripts/gpu/gpu_run.sh benchmarks/sweep_gemm.py      # on the GPU machine
    python benchmarks/sweep_gemm.py --device cl --quick       # any OpenCL device, small
    python benchmarks/sweep_gemm.py --set 4 --classes mid,skinny,small   # split K: 1 vs 2 launches
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

try:
    import netcl.ops  # noqa: F401
except ImportError:  # running from a checkout without the packages installed
    root = Path(__file__).resolve().parents[1] / "packages"
    sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

import pyopencl as cl

from netcl.core.device import manager
from netcl.core.kernel_selector import KernelConfig, KernelVariant, get_kernel_selector
from netcl.core.kernels.header import kernel_header
from netcl.ops import _matmul_family as fam
from netcl.ops import _matmul_kernels as mk
from netcl.ops import _matmul_launch as ml

RT = KernelVariant.MATMUL_REGISTER_TILED
LAYOUTS = {"nn": (False, False), "nt": (False, True), "tn": (True, False), "tt": (True, True)}
Shape = tuple[int, int, int, int]  # (batch, M, N, K)

# (bm, bn, bk, tm, tn, warp_n, swizzle, split_k[, lds_pad (-1 auto)[, staged as tn: 1 nn/tt,
# 2 also nt]])
BIG_CONFIGS = [
    (128, 128, 8, 16, 8, 8, 0, 0, -1, 2),  # everything as tn (transposed copies)
    (128, 128, 8, 16, 8, 8, 8, 0, -1, 2),
    (128, 128, 16, 16, 8, 8, 0, 0, -1, 2),
    (128, 128, 8, 16, 8, 8, 0, 0),  # sweep 1's best at 4096^3 nt and tn
    (128, 128, 16, 16, 8, 8, 0, 0),  # ... and nn, tt
    (128, 128, 8, 16, 8, 8, 8, 0),
    (128, 128, 16, 16, 8, 8, 8, 0),
    (128, 128, 8, 16, 8, 8, 0, 0, 0),  # both local tiles unpadded
    (128, 128, 8, 16, 8, 8, 0, 0, 8),
    (128, 128, 16, 16, 8, 8, 0, 0, 0),
    (128, 128, 16, 16, 8, 8, 0, 0, 8),
    (128, 128, 16, 8, 16, 8, 0, 0),
    (128, 128, 8, 8, 16, 8, 0, 0),
    (128, 128, 8, 16, 8, 4, 0, 0),
    (256, 128, 8, 16, 8, 8, 0, 0),
    (128, 64, 8, 16, 8, 8, 0, 0),  # 64 work-items
    (128, 128, 8, 8, 8, 8, 0, 0),  # the current NVIDIA rule
]
MID_CONFIGS = [
    (64, 64, 16, 8, 4, 8, 0, 0),  # sweep 1's best at 1024^3
    (64, 64, 8, 8, 4, 8, 0, 0),
    (64, 64, 16, 8, 4, 8, 0, 0, 0),
    (64, 64, 16, 8, 4, 8, 4, 0),
    (64, 64, 16, 4, 8, 8, 0, 0),
    (128, 64, 16, 8, 4, 8, 0, 0),
    (64, 128, 8, 8, 16, 8, 0, 0),
    (128, 64, 8, 16, 8, 8, 0, 0),
    (64, 64, 16, 4, 4, 8, 0, 0),  # the current NVIDIA rule below 132 128x128 tiles
    (32, 64, 16, 4, 4, 8, 0, 0),
    (128, 128, 8, 16, 8, 8, 0, 0),
    (128, 128, 8, 16, 8, 8, 0, 2),  # split K: more work-groups from the efficient tile
    (128, 128, 8, 16, 8, 8, 0, 4),
    (64, 64, 16, 8, 4, 8, 0, 2),
]
SKINNY_CONFIGS = [
    (128, 64, 16, 8, 4, 8, 0, 4),  # the current NVIDIA split rule
    (128, 64, 16, 8, 4, 8, 0, 8),
    (128, 128, 8, 16, 8, 8, 0, 8),
    (128, 128, 8, 16, 8, 8, 0, 16),
    (128, 64, 8, 16, 8, 8, 0, 8),
    (128, 64, 8, 16, 8, 8, 0, 16),
    (64, 64, 16, 8, 4, 8, 0, 4),
    (64, 64, 16, 8, 4, 8, 0, 8),
    (64, 64, 16, 8, 4, 8, 0, 16),
    (64, 128, 16, 4, 8, 8, 0, 8),
    (64, 64, 16, 4, 4, 8, 0, 8),
    (128, 128, 8, 8, 8, 8, 0, 8),
    (64, 64, 16, 8, 4, 8, 0, 0),
]
NVIDIA_TILED = KernelConfig(KernelVariant.MATMUL_TILED, tile_m=32, tile_n=32, tile_k=16,
                            work_per_thread=4, local_size_2d=(32, 8))
SMALL_CONFIGS: list[Any] = [
    NVIDIA_TILED,  # what the NVIDIA rule ran below one 64x64 tile per compute unit
    (64, 64, 16, 8, 4, 8, 0, 0),
    (32, 64, 16, 4, 4, 8, 0, 0),
    (32, 32, 16, 4, 4, 8, 0, 0),
    (64, 64, 16, 4, 4, 8, 0, 0),
    (64, 64, 16, 4, 8, 8, 0, 0),
    (128, 64, 16, 8, 4, 8, 0, 0),
    (64, 64, 16, 8, 4, 8, 0, 2),
    (32, 64, 16, 4, 4, 8, 0, 2),
    (64, 64, 8, 8, 4, 8, 0, 0),
]
# --set 3 (the default): the NVIDIA rule's configs (shown as "sel") beside their nearest
# alternatives, to check the rule; --set 2: the wider sweep the rule was set from.
VERIFY_CONFIGS: dict[str, list[Any]] = {
    "big": [
        (128, 128, 8, 16, 8, 8, 0, 0, -2),  # the rule's nn/tt form
        (128, 128, 8, 16, 8, 8, 8, 0, 0),  # the rule's tn form
        (128, 128, 8, 16, 8, 8, 0, 0),  # the rule's nt form
        (128, 128, 8, 16, 8, 8, 8, 0, 0, 2),  # everything as tn, staged
        (128, 128, 8, 16, 8, 8, 8, 0, -2),
        (128, 128, 16, 16, 8, 8, 0, 0, 0),
    ],
    "mid": [
        (64, 64, 16, 8, 4, 8, 4, 0),  # the rule's
        (64, 64, 16, 8, 4, 8, 0, 0),
        (128, 128, 8, 16, 8, 8, 0, 4),
        (128, 128, 8, 16, 8, 8, 0, 4, -2),
        (128, 128, 8, 16, 8, 8, 0, 0, -2),
    ],
    "skinny": [
        (64, 64, 16, 8, 4, 8, 0, 4),  # the rule's
        (128, 128, 8, 16, 8, 8, 0, 8),
        (128, 128, 8, 16, 8, 8, 0, 8, -2),
        (64, 64, 16, 8, 4, 8, 0, 8),
        (128, 64, 8, 16, 8, 8, 0, 8),
    ],
    "small": [
        (32, 32, 16, 4, 4, 8, 0, 0),  # the rule's
        (32, 32, 8, 4, 4, 8, 0, 0),
        (64, 64, 16, 8, 4, 8, 0, 0),
        (64, 32, 16, 8, 4, 8, 0, 0),
        (32, 32, 16, 4, 4, 8, 4, 0),
    ],
}
# --set 4: a split K merged in one launch by the last work-group per tile ("k4m") beside the
# same config's two-launch path ("k4": slices, then gemm_split_k_sum; NOTE [ Split-K ] in
# netcl.ops._matmul_launch), with new split candidates for the mid squares; each split row
# runs in both forms, next to the unsplit configs the rule picks now.
SPLIT_CONFIGS: dict[str, list[Any]] = {
    "mid": [
        (64, 64, 16, 8, 4, 8, 4, 0),  # the rule's (no split)
        (64, 64, 16, 8, 4, 8, 0, 0),
        (128, 128, 8, 16, 8, 8, 0, 2),
        (128, 128, 8, 16, 8, 8, 0, 3),
        (128, 128, 8, 16, 8, 8, 0, 4),
        (128, 128, 8, 16, 8, 8, 0, 4, -2),
        (128, 64, 16, 8, 4, 8, 0, 2),
        (128, 64, 8, 16, 8, 8, 0, 2),
        (64, 64, 16, 8, 4, 8, 0, 2),
        (64, 64, 16, 8, 4, 8, 0, 4),
    ],
    "skinny": [
        (64, 64, 16, 8, 4, 8, 0, 4),  # the rule's
        (64, 64, 16, 8, 4, 8, 0, 8),
        (128, 128, 8, 16, 8, 8, 0, 4),
        (128, 128, 8, 16, 8, 8, 0, 8),
        (128, 64, 8, 16, 8, 8, 0, 8),
        (128, 64, 16, 8, 4, 8, 0, 4),
    ],
    "small": [
        (32, 32, 16, 4, 4, 8, 0, 0),  # the rule's
        (64, 64, 16, 8, 4, 8, 0, 0),
        (64, 64, 16, 8, 4, 8, 0, 2),
        (32, 64, 16, 4, 4, 8, 0, 2),
        (32, 32, 16, 4, 4, 8, 0, 2),
        (64, 64, 16, 8, 4, 8, 0, 4),
    ],
}
SPLIT_SHAPES = {"mid": [(1, 1024, 1024, 1024), (1, 1000, 1000, 1000)]}  # no batch: no split
CLASSES: dict[str, tuple[list[Shape], list[Any]]] = {
    "big": ([(1, 2048, 2048, 2048), (1, 4096, 4096, 4096), (1, 8192, 8192, 8192),
             (1, 4095, 4095, 4095)], BIG_CONFIGS),
    "mid": ([(1, 1024, 1024, 1024), (1, 1000, 1000, 1000), (32, 512, 512, 512)], MID_CONFIGS),
    "skinny": ([(1, 128, 4096, 4096), (1, 4096, 128, 4096)], SKINNY_CONFIGS),
    # a classifier: ResNet's 512 -> 1000 layer at batch 256 (nt) and its weight gradient
    "small": ([(1, 256, 1000, 512), (1, 1000, 512, 256), (1, 512, 512, 512)], SMALL_CONFIGS),
}
# each class's share of the budget, relative to the classes run (a class that ends early
# leaves its time to the next)
SHARE = {"big": 0.5, "mid": 0.2, "skinny": 0.15, "small": 0.15}
# shapes only the best few configurations of the class (by the earlier shapes) run
LATE = {(1, 8192, 8192, 8192): 5, (1, 4095, 4095, 4095): 6}


def make_config(c: Any, merge: str = "group") -> KernelConfig:
    """The config of a row; a split K merged by ``merge`` ("group": one launch, "launch")."""
    if isinstance(c, KernelConfig):
        return c
    bm, bn, bk, tm, tn, warp_n, swizzle, split = c[:8]
    extra: dict[str, Any] = {"micro_n": tn, "warp_n": warp_n, "swizzle": swizzle,
                             "split_k": split}
    if split:
        extra["split_merge"] = merge
    if len(c) > 8 and c[8] >= 0:
        extra["lds_pad"] = c[8]
    if len(c) > 9 and c[9]:
        extra["stage_tn"] = ("nn", "nt", "tt") if c[9] == 2 else ("nn", "tt")
    return KernelConfig(RT, tile_m=bm, tile_n=bn, tile_k=bk, work_per_thread=tm, extra=extra)


def is_split(c: Any) -> bool:
    """Whether a config row splits K (it then runs merged in one launch and in two)."""
    return not isinstance(c, KernelConfig) and bool(c[7])


def quick_configs(rows: list[Any], which: int) -> list[Any]:
    """The two configs ``--quick`` runs per class: the first two, or in ``--set 4`` the first
    and the first split one."""
    if which != 4:
        return rows[:2]
    return rows[:1] + [c for c in rows[1:] if is_split(c)][:1]


def label(c: KernelConfig) -> str:
    if c.variant is not RT:
        return f"{c.variant.name.removeprefix('MATMUL_').lower()} {c.tile_m}x{c.tile_n}"[:26]
    e = c.extra
    s = f"{c.tile_m}x{c.tile_n}x{c.tile_k}/{c.work_per_thread}x{e.get('micro_n', '?')}"
    s += f" w{e.get('warp_n', 0)}"
    s += f" s{e['swizzle']}" if e.get("swizzle") else ""
    s += f" p{e['lds_pad']}" if e.get("lds_pad", -1) >= 0 else ""
    s += " L" if e.get("by_layout") else ""
    s += f" T{len(e['stage_tn'])}" if e.get("stage_tn") else ""
    if not e.get("split_k"):
        return s
    return s + f" k{e['split_k']}" + ("m" if ml.split_merge_mode(c) == "group" else "")


def registers(ctx: Any, dev: Any, p: mk.GemmParams) -> str:
    """Registers per work-item (and spill bytes) from NVIDIA's verbose build log."""
    if "NVIDIA" not in dev.platform.name:
        return "-"
    src = kernel_header(ctx, p.dtype) + mk.gemm_source(p)
    try:
        prg = cl.Program(ctx, src).build(options="-cl-nv-verbose")
    except cl.Error:
        return "err"
    log = prg.get_build_info(dev, cl.program_build_info.LOG)
    found = re.findall(r"Used (\d+) registers", log)
    spill = re.findall(r"(\d+) bytes spill stores", log)
    return (found[-1] if found else "?") + (f"s{spill[-1]}" if spill and spill[-1] != "0" else "")


# A spin kernel holds the queue while the host enqueues the timed calls, so host overhead
# (Python, argument setting, a split K's workspace) stays out of the kernel time.
SPIN = """__kernel void spin(__global float* x, const int n) {
    float v = x[0];
    for (int i = 0; i < n; ++i) v = fma(v, 0.999999f, 1e-6f);
    if (v == -1.0f) x[0] = v;
}
"""


class Runner:
    """Times GEMM launches on one profiling queue over shared buffers."""

    def __init__(self, ctx: Any, dev: Any, elements: int) -> None:
        self.q = cl.CommandQueue(ctx, dev, properties=cl.command_queue_properties.PROFILING_ENABLE)
        host = np.random.default_rng(0).standard_normal(elements, dtype=np.float32)
        mf = cl.mem_flags
        self.bufs = {k: cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)
                     for k in "abcs"}
        self.first_s = 0.0  # time in first calls (kernel builds, mostly)
        self.spin = cl.Program(ctx, SPIN).build().spin
        n = 1 << 16
        ev = self.spin(self.q, (1,), (1,), self.bufs["s"], np.int32(n))
        ev.wait()
        self.spin_ns = max(float(ev.profile.end - ev.profile.start) / n, 1e-3)

    def hold(self, seconds: float) -> Any:
        n = int(min(2**31 - 1, seconds * 1e9 / self.spin_ns))
        return self.spin(self.q, (1,), (1,), self.bufs["s"], np.int32(n))

    def launch(self, cfg: KernelConfig, shape: Shape, layout: str) -> Any:
        nb, M, N, K = shape
        ta, tb = LAYOUTS[layout]
        a = ml.Operand(self.bufs["a"], 0, M if ta else K, 0, M * K if nb > 1 else 0)
        b = ml.Operand(self.bufs["b"], 0, K if tb else N, 0, K * N if nb > 1 else 0)
        c = ml.Operand(self.bufs["c"], 0, N, 0, M * N if nb > 1 else 0)
        return ml.run_gemm(self.q, cfg, "float32", a, b, c, M, N, K, trans_a=ta, trans_b=tb,
                           batch=(1, nb))

    def time(self, cfg: KernelConfig, shape: Shape, layout: str, target_s: float,
             repeats: int = 2) -> float:
        """Seconds per call, the best of ``repeats``: from the end of a spin kernel that
        holds the queue while ``reps`` calls are enqueued to the end of the last one."""
        t0 = time.perf_counter()
        self.launch(cfg, shape, layout)
        self.q.finish()
        self.first_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        self.launch(cfg, shape, layout)
        self.q.finish()
        guess = max(time.perf_counter() - t0, 1e-6)
        reps = int(min(200, max(3, target_s / guess)))
        best = float("inf")
        for _ in range(repeats):
            dam = self.hold(reps * guess * 1.2 + 1e-3)
            events = [self.launch(cfg, shape, layout) for _ in range(reps)]
            self.q.finish()
            last = events[-1][-1] if isinstance(events[-1], list) else events[-1]
            best = min(best, float(last.profile.end - dam.profile.end) * 1e-9 / reps)
        return best


def check(runner: Runner, cfg: KernelConfig) -> list[str]:
    """Layouts where ``cfg`` is wrong against NumPy on a 260 x 196 x 72 product (4-aligned,
    no whole tiles: the vector kernels the timings run, with clamped edges)."""
    M, N, K = 260, 196, 72
    rng = np.random.default_rng(1)
    q = runner.q
    bad = []
    for layout, (ta, tb) in LAYOUTS.items():
        x = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
        y = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
        want = (x.T if ta else x) @ (y.T if tb else y)
        cl.enqueue_copy(q, runner.bufs["a"], x)
        cl.enqueue_copy(q, runner.bufs["b"], y)
        runner.launch(cfg, (1, M, N, K), layout)
        got = np.empty((M, N), np.float32)
        cl.enqueue_copy(q, got, runner.bufs["c"])
        err = float(np.abs(got - want).max() / np.abs(want).max())
        if not err < 1e-5:
            bad.append(f"{layout} err {err:.1e}")
    return bad


def torch_time(shape: Shape, layout: str, target_s: float) -> float | None:
    """``torch.mm``/``bmm`` seconds per call (TF32 off), the best of 3 CUDA-event timings of
    back-to-back calls enqueued behind ``torch.cuda._sleep`` (no host gaps)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    nb, M, N, K = shape
    ta, tb = LAYOUTS[layout]
    x = torch.randn((nb, K, M) if ta else (nb, M, K), device="cuda")
    y = torch.randn((nb, N, K) if tb else (nb, K, N), device="cuda")
    x = x.transpose(1, 2) if ta else x
    y = y.transpose(1, 2) if tb else y
    if nb == 1:
        x, y = x[0], y[0]
    fn = torch.mm if nb == 1 else torch.bmm
    for _ in range(3):
        fn(x, y)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn(x, y)
    torch.cuda.synchronize()
    guess = max(time.perf_counter() - t0, 1e-6)
    reps = int(min(200, max(5, target_s / guess)))
    best = float("inf")
    for _ in range(3):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(int((reps * guess * 1.2 + 1e-3) * 2e9))
        start.record()
        for _ in range(reps):
            fn(x, y)
        end.record()
        torch.cuda.synchronize()
        best = min(best, float(start.elapsed_time(end)) * 1e-3 / reps)
    return best


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", default="cl")
    parser.add_argument("--budget", type=float, default=290.0, help="seconds for the sweep")
    parser.add_argument("--target", type=float, default=0.03, help="seconds timed per point")
    parser.add_argument("--classes", default=",".join(CLASSES))
    parser.add_argument("--set", type=int, default=3, choices=(2, 3, 4),
                        help="3: the NVIDIA rule's configs and neighbours; 2: the wide sweep; "
                             "4: split K merged in one launch (k4m) beside two launches (k4)")
    parser.add_argument("--quick", action="store_true",
                        help="small shapes and two configs per class (CPU OpenCL devices)")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."),
                                                      "sweep_gemm.json"))
    args = parser.parse_args(argv)
    start = time.perf_counter()
    handle = manager.default(args.device)
    if handle is None or handle.backend != "cl":
        print(f"no OpenCL device for {args.device!r}")
        return 1
    ctx, dev = handle.queue.context, handle.queue.device
    sets: dict[int, dict[str, list[Any]]] = {2: {k: v[1] for k, v in CLASSES.items()},
                                             3: VERIFY_CONFIGS, 4: SPLIT_CONFIGS}
    picked = [k for k in args.classes.split(",") if k in sets[args.set]]
    classes = {k: (SPLIT_SHAPES.get(k, CLASSES[k][0]) if args.set == 4 else CLASSES[k][0],
                   sets[args.set][k]) for k in picked}
    if args.quick:
        classes = {k: ([(nb, max(M // 16, 33), max(N // 16, 33), max(K // 16, 40))
                        for nb, M, N, K in shapes[:2]], quick_configs(cfgs, args.set))
                   for k, (shapes, cfgs) in classes.items()}
    elements = max(nb * max(M * K, K * N, M * N) for shapes, _ in classes.values()
                   for nb, M, N, K in shapes)
    runner = Runner(ctx, dev, max(elements, 260 * 196))
    sel = get_kernel_selector(dev)
    print(f"device: {dev.name} ({dev.platform.name}), CUs {dev.max_compute_units}")
    rows: list[dict[str, Any]] = []
    ref: dict[tuple[Shape, str], float | None] = {}
    regs: dict[str, str] = {}
    best: dict[tuple[Shape, str], tuple[float, str]] = {}
    ratios: dict[tuple[str, str], list[float]] = {}
    skipped = 0
    share = 0.0
    for cname, (shapes, cfg_rows) in classes.items():
        share += SHARE.get(cname, 0.1) / sum(SHARE.get(k, 0.1) for k in classes)
        deadline = args.budget * min(1.0, share)
        configs = [make_config(c, merge) for c in cfg_rows
                   for merge in (("group", "launch") if is_split(c) else ("group",))]
        score: dict[str, list[float]] = {}
        for shape in shapes:
            for layout in LAYOUTS:
                ref[(shape, layout)] = torch_time(shape, layout, args.target)
            run = configs
            if shape in LATE and not args.quick:  # the best few by the shapes before
                ranked = sorted(configs, key=lambda c: geomean(score.get(label(c), [1e9])))
                run = ranked[:LATE[shape]]
            for cfg in run:
                name = label(cfg)
                if time.perf_counter() - start > deadline:
                    skipped += 1
                    continue
                if name not in regs:
                    merged = bool(cfg.extra.get("split_k")) and ml.split_merge_mode(cfg) == "group"
                    p = dataclasses.replace(fam.gemm_params(cfg, "float32", False, False),
                                            vec_a=True, vec_b=True, vec_c=True,
                                            split_merge=merged and cfg.variant is RT,
                                            ptx_fence=merged and "NVIDIA" in dev.platform.name)
                    regs[name] = registers(ctx, dev, p)
                    for problem in check(runner, cfg):
                        print(f"WRONG {name}: {problem}")
                for layout in LAYOUTS:
                    try:
                        t = runner.time(cfg, shape, layout, args.target)
                    except cl.Error as e:  # a config the device cannot run
                        print(f"error {name} {shape} {layout}: {str(e)[:80]}")
                        continue
                    r = ref[(shape, layout)]
                    x = r / t if r else None
                    score.setdefault(name, []).append(t / (r or 1.0))
                    if x is not None:
                        ratios.setdefault((name, cname), []).append(x)
                    key = (shape, layout)
                    if key not in best or t < best[key][0]:
                        best[key] = (t, name)
                    rows.append({"class": cname, "config": name, "shape": shape,
                                 "layout": layout, "ms": t * 1e3, "ref_ms":
                                 None if r is None else r * 1e3, "regs": regs[name]})
        print(f"[{cname} done at {time.perf_counter() - start:.0f} s]", flush=True)
    print("== per shape (batch, M, N, K) and layout: the fastest config | the selector's pick")
    for cname, (shapes, _) in classes.items():
        for shape in shapes:
            nb, M, N, K = shape
            for layout in LAYOUTS:
                if (shape, layout) not in best:
                    continue
                t, name = best[(shape, layout)]
                r = ref[(shape, layout)]
                # as ops.matmul selects on a GPU: a batch of >= 128-row matrices as one
                chosen = sel.select_matmul_kernel(M * nb if M >= 128 else M, N, K)
                ts = runner.time(chosen, shape, layout, args.target)
                tf = 2 * nb * M * N * K / t / 1e12
                rx = f"{r / t:4.2f}x" if r else "  -  "
                sx = f"{r / ts:4.2f}x" if r else f"{ts * 1e3:.3f}ms"
                rows.append({"class": cname, "config": "selected " + label(chosen),
                             "shape": shape, "layout": layout, "ms": ts * 1e3,
                             "ref_ms": None if r is None else r * 1e3})
                shp = f"{nb}x{M}x{N}x{K}" if nb > 1 else f"{M}x{N}x{K}"
                print(f"{shp:<17}{layout} {name:<26}{t * 1e3:8.3f}ms {tf:5.1f}TF {rx}"
                      f" cuBLAS {(r or 0) * 1e3:7.3f}ms | sel {label(chosen)} {sx}")
    one_launch = [row for row in rows if re.search(r" k\d+m$", row["config"])]
    if one_launch:
        print("== split K merged in one launch (k..m) vs the same config in two launches (k..):"
              " two-launch time / one-launch time, per layout")
        times = {(r["config"], tuple(r["shape"]), r["layout"]): r["ms"] for r in rows}
        for row in one_launch:
            if row["layout"] != "nn":
                continue
            shape, name = tuple(row["shape"]), row["config"]
            pairs = []
            for layout in LAYOUTS:
                one = times.get((name, shape, layout))
                two = times.get((name[:-1], shape, layout))
                pairs.append(f"{layout}:{two / one:5.2f}" if one and two else f"{layout}:  -  ")
            nb, M, N, K = shape
            print(f"{f'{M}x{N}x{K}':<17}{name:<28}" + " ".join(pairs))
    if not ratios:  # no reference: ratios to the fastest config instead
        for row in rows:
            key = (tuple(row["shape"]), row["layout"])
            if not row["config"].startswith("selected") and key in best:
                ratios.setdefault((row["config"], row["class"]), []).append(
                    best[key][0] * 1e3 / row["ms"])
        print("(no cuBLAS: the table below is x the fastest config)")
    print("== per config: geometric mean x cuBLAS over each class (layouts pooled), registers")
    names = sorted({n for n, _ in ratios}, key=lambda n: -max(
        geomean(ratios.get((n, c), [])) if (n, c) in ratios else 0 for c in classes))
    print(f"{'config':<26}" + "".join(f"{c:>8}" for c in classes) + "  regs")
    for n in names:
        cells = "".join(f"{geomean(ratios[(n, c)]):8.2f}" if (n, c) in ratios else "       -"
                        for c in classes)
        print(f"{n:<26}{cells}  {regs.get(n, '')}")
    if "big" in classes and any(r.get("ref_ms") for r in rows):
        print("== big: geometric mean x cuBLAS per layout (2048^3, 4096^3; 8192^3, 4095^3 if run)")
        per: dict[tuple[str, str], list[float]] = {}
        for row in rows:
            if row["class"] == "big" and row.get("ref_ms") and not row["config"].startswith("sel"):
                per.setdefault((row["config"], row["layout"]), []).append(
                    row["ref_ms"] / row["ms"])
        for n in sorted({n for n, _ in per}, key=lambda n: -geomean(
                [x for (m, _), v in per.items() if m == n for x in v])):
            print(f"{n:<26}" + "".join(f"{lay}:{geomean(per.get((n, lay), [0.0])):5.2f} "
                                       if (n, lay) in per else f"{lay}:  -   "
                                       for lay in LAYOUTS))
    if skipped:
        print(f"budget: {skipped} (config, shape) points skipped")
    print(f"total {time.perf_counter() - start:.0f} s, first calls (builds) "
          f"{runner.first_s:.0f} s")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
