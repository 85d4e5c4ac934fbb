"""Fused scaled-dot-product attention, forward and forward+backward, beside PyTorch in one run.

    python benchmarks/bench_attention.py --device cl [--json F]      # GPU: the full table
    python benchmarks/bench_attention.py --device cl --quick         # L 1024 and 4096 (GPU)
    python benchmarks/bench_attention.py --device pthread --sizes 128 256 --dtypes float32
    python benchmarks/bench_attention.py --device cl --dtypes float32 --kernel tiled rows

One row per (dtype, causal, sequence length L = S, kernel family of ``--kernel``: ``rows`` or
``tiled`` forced through ``NETCL_ATTENTION_KERNEL``, ``auto`` the default choice, printed as
``mma``, ``tiled``, ``rows`` or ``plain``; ``NETCL_ATTENTION_TILED_BLOCK=4x2`` tries another
register block of the tiled kernels, printed after the name) at head dim 64 and batch x heads 32
(4 x 8): ``fwd ms`` / ``fwd+bwd ms`` are netcl's time per call of back-to-back calls until the
queue finished (``benchmarks/_timing.py``: inner calls per sample, best of ``--repeat``),
``TFLOP/s`` the attention's FLOPs over that time: forward 4 B L S E (two matmuls), backward
2.5 times that (five), halved for causal (FlashAttention's count). The reference is
``torch.nn.functional.scaled_dot_product_attention`` in the same precision on CUDA when PyTorch
sees a GPU (its default backend choice: FlashAttention-2 for float16, memory-efficient for
float32; TF32 off), else PyTorch on the CPU (or the NumPy float64 formula when torch is
missing), timed the same way; ``x ref`` is the reference's time over netcl's (1.0 = parity,
higher is better). Each row checks netcl's forward against the reference (``err``: max abs
difference over max abs value).

``extra MiB`` is the device memory one forward+backward allocates beyond its inputs: the
bytes netcl's buffer pool had to create for it, emptied before (every output, saved and
temporary buffer; freed temporaries are reused, so this is the high-water mark of what the
pool holds). The fused path keeps O(B L) beyond the outputs (the row log-sum-exp, the
backward's D = rowsum(dO O)): linear in L. ``plain MiB`` is the same for the plain
(materialized) path, which stores (B, L, S) scores and probabilities: quadratic in L (measured
up to L = 1024 only: the pool hands buffers of 256 MiB and more back to the driver when
they are freed, so beyond that its count would miss the biggest temporaries).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from _timing import cuda_event_samples, per_call_samples

try:
    import netcl.ops  # noqa: F401
except ImportError:  # running from a checkout without the packages installed
    root = Path(__file__).resolve().parents[1] / "packages"
    sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

import netcl.ops as ops
from netcl.core.device import DeviceHandle, manager
from netcl.core.memory import get_persistent_pool
from netcl.core.tensor import Tensor
from netcl.ops import _attention_fused, _attention_plain, _attention_plan

HEAD_DIM = 64
BATCH, HEADS = 4, 8


def flops(L: int, S: int, causal: bool, backward: bool) -> float:
    f = 4.0 * BATCH * HEADS * L * S * HEAD_DIM * (3.5 if backward else 1.0)
    return f / 2 if causal else f


def _pool_bytes(dev: DeviceHandle, fn: Callable[[], Any]) -> int:
    """Bytes the buffer pool creates while ``fn`` runs (emptied before)."""
    if dev.backend == "cpu":
        return 0
    pool = get_persistent_pool(dev.queue)
    pool.clear()
    before = pool.stats.bytes_allocated
    fn()
    dev.queue.finish()
    return int(pool.stats.bytes_allocated - before)


def _netcl_calls(dev: DeviceHandle, q: Tensor, k: Tensor, v: Tensor, g: Tensor, causal: bool
                 ) -> tuple[Callable[[], Any], Callable[[], Any]]:
    def fwd() -> Any:
        return ops.scaled_dot_product_attention_forward(q, k, v, is_causal=causal)

    def fwd_bwd() -> Any:
        out, lse, stream = ops.scaled_dot_product_attention_forward(q, k, v, is_causal=causal)
        return ops.scaled_dot_product_attention_backward(g, q, k, v, out, lse,
                                                         is_causal=causal, stream=stream)

    return fwd, fwd_bwd


def _plain_bytes(dev: DeviceHandle, q: Tensor, k: Tensor, v: Tensor, g: Tensor,
                 causal: bool) -> int:
    plan = _attention_plan.plan_attention(q, k, v, None, 0.0, causal, None, False)

    def run() -> None:
        out, lse = _attention_plain.plain_forward(plan, 0, 0)
        _attention_plain.plain_backward(plan, g, out, lse, 0, 0, False)

    return _pool_bytes(dev, run)


def _torch_ref(torch: Any, cuda: bool, arrays: list[Any], dtype: str, causal: bool,
               repeat: int) -> tuple[float, float, Any]:
    """(fwd s, fwd+bwd s, forward output as float64 NumPy) of torch's SDPA."""
    F = torch.nn.functional
    tdt = {"float32": torch.float32, "float16": torch.float16}[dtype]
    device = "cuda" if cuda else "cpu"
    q, k, v, g = (torch.tensor(a, dtype=tdt, device=device) for a in arrays)
    for t in (q, k, v):
        t.requires_grad_(True)

    def fwd() -> Any:
        with torch.no_grad():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def fwd_bwd() -> Any:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return torch.autograd.grad(out, (q, k, v), g)

    if cuda:
        tf = min(cuda_event_samples(torch, fwd, repeat, 5))
        tb = min(cuda_event_samples(torch, fwd_bwd, repeat, 5))
    else:
        tf = min(per_call_samples(fwd, lambda: None, repeat, max_inner=4))
        tb = min(per_call_samples(fwd_bwd, lambda: None, repeat, max_inner=4))
    return tf, tb, fwd().double().cpu().numpy()


def _numpy_ref(arrays: list[Any], causal: bool, repeat: int) -> tuple[float, float, Any]:
    q, k, v, _ = (np.asarray(a, np.float32) for a in arrays)

    def fwd() -> Any:
        s = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])
        if causal:
            s = np.where(np.tri(*s.shape[-2:]) > 0, s, -np.inf)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return np.matmul(e / e.sum(axis=-1, keepdims=True), v)

    tf = min(per_call_samples(fwd, lambda: None, repeat, max_inner=2))
    return tf, float("nan"), fwd().astype(np.float64)


def _family(plan: Any, kernel: str) -> str:
    """The kernels ``--kernel kernel`` runs for ``plan``: tensor-core, tiled, rows or plain."""
    if not _attention_fused.fused_applies(plan):
        return "plain"
    if kernel == "auto" and _attention_fused.mma_applies(plan):
        return "mma"
    family = _attention_fused.kernel_choice(plan, kernel)
    block = os.environ.get(_attention_fused.BLOCK_ENV, "")
    return f"{family}{block}" if family == "tiled" else family


def run(dev: DeviceHandle, sizes: list[int], dtypes: list[str], repeat: int,
        torch: Any, kernels: list[str]) -> list[dict[str, Any]]:
    cuda = torch is not None and torch.cuda.is_available()
    if torch is not None and cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    ref_name = "torch-cuda" if cuda else "torch-cpu" if torch is not None else "numpy"
    print(f"device: {dev}; reference: {ref_name}; batch x heads {BATCH}x{HEADS}, head dim "
          f"{HEAD_DIM}")
    print(f"{'dtype':8} {'causal':6} {'L':>5} {'kernels':7} | {'fwd ms':>8} {'TFLOP/s':>7} "
          f"{'x ref':>6} | "
          f"{'f+b ms':>8} {'TFLOP/s':>7} {'x ref':>6} | {'ref fwd':>8} {'ref f+b':>8} | "
          f"{'extra MiB':>9} {'plain MiB':>9} {'err':>8}")
    rows = []
    rng = np.random.default_rng(0)
    for dtype in dtypes:
        for causal in (False, True):
            for L in sizes:
                shape = (BATCH, HEADS, L, HEAD_DIM)
                arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(4)]
                q, k, v, g = (Tensor.from_host(dev.queue, a, dtype=dtype) for a in arrays)
                plan = _attention_plan.plan_attention(q, k, v, None, 0.0, causal, None, False)
                if not _attention_fused.fused_applies(plan):
                    print("  (the fused kernels do not apply here: plain path)")
                if torch is not None:
                    rf, rb, want = _torch_ref(torch, cuda, arrays, dtype, causal, repeat)
                else:
                    rf, rb, want = _numpy_ref(arrays, causal, repeat)
                plain = _plain_bytes(dev, q, k, v, g, causal) if L <= 1024 else 0
                for kernel in kernels:
                    os.environ[_attention_fused.KERNEL_ENV] = kernel
                    family = _family(plan, kernel)
                    fwd, fwd_bwd = _netcl_calls(dev, q, k, v, g, causal)
                    sync = dev.queue.finish
                    try:
                        tf = min(per_call_samples(fwd, sync, repeat, max_inner=8))
                        tb = min(per_call_samples(fwd_bwd, sync, repeat, max_inner=8))
                    except Exception as exc:  # report the row's failure, go on
                        print(f"{dtype:8} {causal!s:6} {L:5} {family:7} | failed: {exc!r}"[:400],
                              flush=True)
                        continue
                    extra = _pool_bytes(dev, fwd_bwd)
                    got = fwd()[0].to_host().astype(np.float64)
                    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
                    row = {"dtype": dtype, "causal": causal, "L": L, "kernel": family,
                           "fwd_s": tf, "fwd_bwd_s": tb,
                           "fwd_tflops": flops(L, L, causal, False) / tf / 1e12,
                           "fwd_bwd_tflops": flops(L, L, causal, True) / tb / 1e12,
                           "ref": ref_name, "ref_fwd_s": rf, "ref_fwd_bwd_s": rb,
                           "extra_bytes": extra, "plain_bytes": plain, "err": err}
                    rows.append(row)
                    mib = 2.0**20
                    print(f"{dtype:8} {causal!s:6} {L:5} {family:7} | {tf * 1e3:8.2f} "
                          f"{row['fwd_tflops']:7.3f} {rf / tf:6.2f} | {tb * 1e3:8.2f} "
                          f"{row['fwd_bwd_tflops']:7.3f} {rb / tb:6.2f} | {rf * 1e3:8.2f} "
                          f"{rb * 1e3:8.2f} | {extra / mib:9.1f} {plain / mib:9.1f} "
                          f"{err:8.1e}", flush=True)
                os.environ.pop(_attention_fused.KERNEL_ENV, None)
                for t in (q, k, v, g):
                    t.release()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cl", help="netcl device (cl, gpu, pthread...)")
    parser.add_argument("--quick", action="store_true",
                        help="L 1024 and 4096 only, 2 repeats (the GPU request)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[512, 1024, 2048, 4096])
    parser.add_argument("--dtypes", nargs="*", default=["float16", "float32"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-torch", action="store_true", help="NumPy as the reference")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--kernel", nargs="+", default=["auto"],
                        choices=list(_attention_fused.KERNELS),
                        help="portable kernel families to time, each beside the reference: "
                             "rows, tiled (NETCL_ATTENTION_KERNEL) or auto (the default "
                             "choice, tensor cores where they apply)")
    args = parser.parse_args()
    dev = manager.default(args.device)
    if dev is None or dev.backend == "cpu":
        raise SystemExit(f"no OpenCL device matches {args.device!r}")
    torch: Any = None
    if not args.no_torch:
        try:
            import torch as torch_module
        except ImportError:
            torch_module = None
        torch = torch_module
    sizes = [1024, 4096] if args.quick else args.sizes
    rows = run(dev, sizes, args.dtypes, 2 if args.quick else args.repeat, torch, args.kernel)
    if args.json:
        args.json.write_text(json.dumps({"device": str(dev), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
