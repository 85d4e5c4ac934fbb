"""Device time of netcl's matmul on given GEMM shapes and layouts beside torch.mm (CUDA, TF32
off) in the same run, with the configuration the selector picked.

Default shapes: the GEMMs of the charlm GPT step (batch 32 x sequence 256 = 8192 tokens, width
384, MLP 1536, vocab 128): forward (nt: x @ W^T), data gradient (nn: dY @ W), weight gradient
(tn: dY^T @ X, K = 8192).

    NETCL_PROFILE_EVENTS=1 python scripts/gpu/gemm_shapes.py --device cl
    NETCL_PROFILE_EVENTS=1 python scripts/gpu/gemm_shapes.py --shapes 1024x1024x1024:nn
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

root = Path(__file__).resolve().parents[2] / "packages"
sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

import netcl.ops as ops  # noqa: E402
from netcl.core.device import manager  # noqa: E402
from netcl.core.tensor import Tensor  # noqa: E402
from netcl.runtime import profile  # noqa: E402

T, C, H, V = 8192, 384, 1536, 128
GPT = [f"{T}x{n}x{k}:nt" for n, k in ((C, C), (H, C), (C, H), (V, C))] + \
      [f"{T}x{k}x{n}:nn" for n, k in ((C, C), (H, C), (C, H), (V, C))] + \
      [f"{n}x{k}x{T}:tn" for n, k in ((C, C), (H, C), (C, H), (V, C))]


def _torch_ms(shape: tuple[int, int, int], layout: str, reps: int, dtype: str
              ) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    m, n, k = shape
    tdt = getattr(torch, dtype)
    a = torch.randn((k, m) if layout[0] == "t" else (m, k), device="cuda", dtype=tdt)
    b = torch.randn((n, k) if layout[1] == "t" else (k, n), device="cuda", dtype=tdt)
    ta = a.t() if layout[0] == "t" else a
    tb = b.t() if layout[1] == "t" else b
    for _ in range(3):
        torch.mm(ta, tb)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(10):
            torch.mm(ta, tb)
        e.record()
        e.synchronize()
        best = min(best, s.elapsed_time(e) / 10)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cl")
    parser.add_argument("--shapes", nargs="*", default=GPT, help="MxNxK:layout (nn nt tn tt)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16"))
    args = parser.parse_args()
    dev = manager.default(args.device)
    assert dev is not None
    rng = np.random.default_rng(0)
    total = [0.0, 0.0]
    print(f"{'shape':>20} {'lay':>3} | {'netcl ms':>9} {'TFLOP/s':>7} | {'torch ms':>9} "
          f"{'x torch':>7} | kernels")
    for spec in args.shapes:
        dims, layout = spec.split(":")
        m, n, k = (int(v) for v in dims.split("x"))
        a_shape = (k, m) if layout[0] == "t" else (m, k)
        b_shape = (n, k) if layout[1] == "t" else (k, n)
        a = Tensor.from_host(dev.queue, rng.standard_normal(a_shape).astype(np.float32),
                             dtype=args.dtype)
        b = Tensor.from_host(dev.queue, rng.standard_normal(b_shape).astype(np.float32),
                             dtype=args.dtype)
        for _ in range(3):
            ops.matmul(a, b, layout[0] == "t", layout[1] == "t")
        dev.queue.finish()
        best, kernels = float("inf"), ""
        for _ in range(args.repeat):
            with profile() as prof:
                for _ in range(5):
                    ops.matmul(a, b, layout[0] == "t", layout[1] == "t")
            stats: list[Any] = prof.summary()
            t = sum(s.device_us or 0.0 for s in stats) / 5e3
            if t < best:
                best = t
                kernels = " ".join(f"{s.name}x{s.launches // 5}" for s in stats)
        ref = _torch_ms((m, n, k), layout, args.repeat, args.dtype)
        flops = 2.0 * m * n * k
        ratio = f"{ref / best:7.2f}" if ref else "      -"
        total[0] += best
        total[1] += ref or 0.0
        print(f"{dims:>20} {layout:>3} | {best:9.4f} {flops / best / 1e9:7.1f} | "
              f"{(ref or 0.0):9.4f} {ratio} | {kernels}", flush=True)
    if total[1]:
        print(f"sum: netcl {total[0]:.3f} ms, torch {total[1]:.3f} ms, "
              f"x torch {total[1] / total[0]:.2f}")


if __name__ == "__main__":
    main()
