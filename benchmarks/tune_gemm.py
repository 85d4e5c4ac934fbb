"""GEMM tile configurations compared on one OpenCL device by kernel time (profiling events).

For each register-tiled configuration (tiles, work-item block, warp layout) and each shape
and transpose layout: the kernel's device time per launch (back-to-back launches, first
start to last end), its TFLOP/s, its registers per work-item where the driver reports them
(NVIDIA: ``-cl-nv-verbose``) and its local memory per work-group; with PyTorch on CUDA in
the same run, ``torch.mm`` timed by CUDA events (TF32 off) on the same shapes and layouts.
``--check`` instead compares every configuration and layout with NumPy on odd small sizes
(any device: PoCL too).

    PYTHONPATH=$(ls -d packages/*/src | tr '\\n' ':') python benchmarks/tune_gemm.py --device cl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
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
SHAPES = [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
          (1000, 1000, 1000), (4095, 4095, 4095), (128, 4096, 4096), (4096, 128, 4096)]


def config(bm: int, bn: int, bk: int, tm: int, tn: int, warp_n: int = 0,
           split_k: int = 0) -> KernelConfig:
    extra: dict[str, Any] = {"micro_n": tn, "warp_n": warp_n}
    if split_k:
        extra["split_k"] = split_k
    return KernelConfig(RT, tile_m=bm, tile_n=bn, tile_k=bk, work_per_thread=tm, extra=extra)


def label(c: KernelConfig) -> str:
    e = c.extra
    s = f"{c.tile_m}x{c.tile_n}x{c.tile_k}/{c.work_per_thread}x{e.get('micro_n')}"
    s += f" w{e.get('warp_n', 0)}"
    return s + (f" sk{e['split_k']}" if e.get("split_k") else "")


def registers(ctx: Any, dev: Any, p: mk.GemmParams) -> str:
    """Registers per work-item from NVIDIA's verbose build log ('' elsewhere)."""
    if "NVIDIA" not in dev.platform.name:
        return ""
    src = kernel_header(ctx, p.dtype) + mk.gemm_source(p)
    prg = cl.Program(ctx, src).build(options="-cl-nv-verbose")
    log = prg.get_build_info(dev, cl.program_build_info.LOG)
    found = re.findall(r"Used (\d+) registers", log)
    spill = re.findall(r"(\d+) bytes spill stores", log)
    return (found[-1] if found else "?") + (f" spill{spill[-1]}" if spill and spill[-1] != "0"
                                            else "")


def run_one(q: Any, cfg: KernelConfig, shape: tuple[int, int, int], layout: str,
            bufs: dict[str, Any], reps: int) -> float:
    M, N, K = shape
    ta, tb = LAYOUTS[layout]
    a = ml.Operand(bufs["a"], 0, M if ta else K)
    b = ml.Operand(bufs["b"], 0, K if tb else N)
    c = ml.Operand(bufs["c"], 0, N)
    ml.run_gemm(q, cfg, "float32", a, b, c, M, N, K, trans_a=ta, trans_b=tb)
    q.finish()
    events = [ml.run_gemm(q, cfg, "float32", a, b, c, M, N, K, trans_a=ta, trans_b=tb)
              for _ in range(reps)]
    q.finish()
    first = events[0][0] if isinstance(events[0], list) else events[0]
    return float(events[-1].profile.end - first.profile.start) * 1e-9 / reps


def torch_times(shapes: list[tuple[int, int, int]], layouts: list[str],
                reps: int) -> dict[str, float]:
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    out = {}
    for shape in shapes:
        M, N, K = shape
        for layout in layouts:
            ta, tb = LAYOUTS[layout]
            x = torch.randn((K, M) if ta else (M, K), device="cuda")
            y = torch.randn((N, K) if tb else (K, N), device="cuda")
            x = x.t() if ta else x
            y = y.t() if tb else y
            torch.mm(x, y)
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                torch.mm(x, y)
            end.record()
            torch.cuda.synchronize()
            out[f"{shape}/{layout}"] = start.elapsed_time(end) * 1e-3 / reps
    return out


def check(handle: Any, configs: list[KernelConfig]) -> int:
    q = handle.queue
    rng = np.random.default_rng(0)
    bad = 0
    for cfg in configs:
        for (M, N, K) in [(33, 257, 7), (130, 68, 36), (64, 64, 64), (7, 5, 1), (129, 131, 133)]:
            for layout, (ta, tb) in LAYOUTS.items():
                x = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
                y = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
                want = (x.T if ta else x) @ (y.T if tb else y)
                mf = cl.mem_flags
                bx = cl.Buffer(q.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
                by = cl.Buffer(q.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=y)
                bc = cl.Buffer(q.context, mf.READ_WRITE, M * N * 4)
                ml.run_gemm(q, cfg, "float32", ml.Operand(bx, 0, M if ta else K),
                        ml.Operand(by, 0, K if tb else N), ml.Operand(bc, 0, N), M, N, K,
                        trans_a=ta, trans_b=tb)
                got = np.empty((M, N), np.float32)
                cl.enqueue_copy(q, got, bc)
                err = float(np.abs(got - want).max() / max(1e-30, float(np.abs(want).max())))
                if err > 1e-5:
                    bad += 1
                    print(f"FAIL {label(cfg)} {(M, N, K)} {layout} err={err:.2e}")
        print(f"checked {label(cfg)}")
    return bad


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", default="cl")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--selected-only", action="store_true",
                        help="only the selector's choice per shape and layout")
    parser.add_argument("--out", default="tune_gemm.json")
    args = parser.parse_args(argv)
    handle = manager.default(args.device)
    assert handle is not None
    configs = [] if args.selected_only else [config(*c) for c in CONFIGS]
    if args.check:
        return 1 if check(handle, configs) else 0
    ctx, dev = handle.queue.context, handle.queue.device
    q = cl.CommandQueue(ctx, dev, properties=cl.command_queue_properties.PROFILING_ENABLE)
    big = max(max(m * k, k * n, m * n) for m, n, k in SHAPES)
    rng = np.random.default_rng(0)
    host = rng.standard_normal(big, dtype=np.float32)
    mf = cl.mem_flags
    bufs = {k: cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host) for k in "abc"}
    sel = get_kernel_selector(dev)
    rows: list[dict[str, Any]] = []
    ref = torch_times(SHAPES, list(LAYOUTS), args.reps)
    print(f"device: {dev.name}, local mem {dev.local_mem_size}, CUs {dev.max_compute_units}")
    for cfg in configs:
        p = fam.gemm_params(cfg, "float32", False, False)
        p = dataclasses.replace(p, vec_a=True, vec_b=True, vec_c=True)
        regs = registers(ctx, dev, p)
        lmem = fam.gemm_kernel(ctx, p).get_work_group_info(
            cl.kernel_work_group_info.LOCAL_MEM_SIZE, dev)
        split = bool(cfg.extra.get("split_k"))
        for shape in SHAPES[:2] + SHAPES[-2:] if split else SHAPES:
            for layout in ["nn", "tn"] if split else list(LAYOUTS):
                t = run_one(q, cfg, shape, layout, bufs, args.reps)
                tf = 2 * shape[0] * shape[1] * shape[2] / t / 1e12
                r = ref.get(f"{shape}/{layout}")
                rows.append({"config": label(cfg), "shape": shape, "layout": layout,
                             "ms": t * 1e3, "tflops": tf, "regs": regs, "lmem": lmem,
                             "torch_ms": None if r is None else r * 1e3})
                x = f"{r / t:5.2f}" if r else "  -  "
                print(f"{label(cfg):<28} {shape!s:<20} {layout} {t * 1e3:8.3f} ms "
                      f"{tf:6.1f} TF/s  x torch {x}  regs {regs} lmem {lmem}", flush=True)
    for shape in SHAPES:
        for layout in LAYOUTS:
            chosen = sel.select_matmul_kernel(*shape)
            t = run_one(q, chosen, shape, layout, bufs, args.reps)
            r = ref.get(f"{shape}/{layout}")
            x = f"{r / t:5.2f}" if r else "  -  "
            print(f"selected {label(chosen) if chosen.variant is RT else chosen.variant.name:<19}"
                  f" {shape!s:<20} {layout} {t * 1e3:8.3f} ms  torch "
                  f"{(r or 0) * 1e3:8.3f} ms  x torch {x}", flush=True)
            rows.append({"config": "selected", "shape": shape, "layout": layout,
                         "ms": t * 1e3, "torch_ms": None if r is None else r * 1e3})
    Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


# (bm, bn, bk, tm, tn, warp_n[, split_k])
# (bm, bn, bk, tm, tn, warp_n[, split_k]): the NVIDIA rule's three and their neighbours
CONFIGS = [
    (128, 128, 8, 8, 8, 8), (128, 128, 16, 8, 8, 8), (128, 128, 8, 8, 8, 0),
    (64, 64, 16, 4, 4, 8), (128, 64, 16, 8, 4, 8), (128, 64, 16, 8, 4, 8, 4),
]

if __name__ == "__main__":
    raise SystemExit(main())
