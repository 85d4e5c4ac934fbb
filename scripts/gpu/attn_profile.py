"""Where the time of one fused attention call goes: host per call, kernels by device time,
and the Python functions of the host side (cProfile), at a short and a long sequence.

    NETCL_PROFILE_EVENTS=1 python scripts/gpu/attn_profile.py --device cl

Besides ``fwd`` and ``fb`` (forward+backward, remembered launches: NOTE [ Remembered attention
launches ] in netcl.ops._attention_prepared) it times, in the same run, ``add`` (one eager
``ops.add`` of q and k: the host floor of a single launch), ``fwd_planned`` / ``fb_planned``
(the remembered launches forgotten before each call: the planning path) and ``fb_delta_ops``
(``NETCL_ATTENTION_DELTA=ops``: D from two copies, a multiply and a row sum, the old way).

    NETCL_PROFILE_EVENTS=1 python scripts/gpu/attn_profile.py --device cl --bwd fused split \
        --sizes 1024 2048 4096 [--causal]

``--bwd`` times only forward+backward (float16, B*H 32, E 64), once per value of
``NETCL_ATTENTION_BWD`` (``fused``: attn_bwd_fused_mma, ``split``: attn_bwd_dq_mma and
attn_bwd_dkdv_mma; NOTE [ Fused attention backward ] in netcl.ops._attention_mma), each with
its kernels' device times, beside torch SDPA (FlashAttention-2 on CUDA) in the same run:
``x torch`` is torch's time over netcl's (1.0 = parity, higher is better).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

root = Path(__file__).resolve().parents[2] / "packages"
sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

import netcl.ops as ops  # noqa: E402
from netcl.core.device import manager  # noqa: E402
from netcl.core.tensor import Tensor  # noqa: E402
from netcl.ops import _attention_prepared  # noqa: E402
from netcl.runtime import profile  # noqa: E402


def _calls(q: Tensor, k: Tensor, v: Tensor, g: Tensor) -> list[Callable[[], object]]:
    def add() -> object:
        return ops.add(q, k)

    def fwd() -> object:
        return ops.scaled_dot_product_attention_forward(q, k, v, is_causal=False)

    def fb() -> object:
        out, lse, stream = ops.scaled_dot_product_attention_forward(q, k, v)
        return ops.scaled_dot_product_attention_backward(g, q, k, v, out, lse, stream=stream)

    def fwd_planned() -> object:
        _attention_prepared.forget()
        return fwd()

    def fb_planned() -> object:
        _attention_prepared.forget()
        out, lse, stream = ops.scaled_dot_product_attention_forward(q, k, v)
        _attention_prepared.forget()
        return ops.scaled_dot_product_attention_backward(g, q, k, v, out, lse, stream=stream)

    def fb_delta_ops() -> object:
        os.environ["NETCL_ATTENTION_DELTA"] = "ops"
        try:
            return fb()
        finally:
            del os.environ["NETCL_ATTENTION_DELTA"]

    return [add, fwd, fb, fwd_planned, fb_planned, fb_delta_ops]


def _per_call(f: Callable[[], object], sync: Callable[[], object], n: int = 20) -> float:
    """Seconds per call of ``n`` back-to-back calls (after 5 warm-up calls), synced."""
    for _ in range(5):
        f()
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        f()
    sync()
    return (time.perf_counter() - t0) / n


def _torch_fb(shape: tuple[int, ...], causal: bool) -> float | None:
    """torch SDPA forward+backward in float16 on CUDA, seconds per call (None: no CUDA)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    F = torch.nn.functional
    q, k, v, g = (torch.randn(shape, dtype=torch.float16, device="cuda") for _ in range(4))
    for t in (q, k, v):
        t.requires_grad_(True)

    def fb() -> object:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return torch.autograd.grad(out, (q, k, v), g)

    return _per_call(fb, torch.cuda.synchronize)


def _compare_one(queue: Any, L: int, values: list[str], causal: bool) -> None:
    """Forward+backward at sequence length ``L`` under each NETCL_ATTENTION_BWD value of
    ``values`` beside torch SDPA: per value its time, TFLOP/s and kernels' device times."""
    rng = np.random.default_rng(0)
    shape = (4, 8, L, 64)
    q, k, v, g = (Tensor.from_host(queue, rng.standard_normal(shape).astype(np.float32),
                                   dtype="float16") for _ in range(4))
    flop = 3.5 * 4.0 * 32 * L * L * 64 / (2 if causal else 1)

    def fb() -> object:
        out, lse, stream = ops.scaled_dot_product_attention_forward(q, k, v, is_causal=causal)
        return ops.scaled_dot_product_attention_backward(g, q, k, v, out, lse,
                                                         is_causal=causal, stream=stream)

    ref = _torch_fb(shape, causal)
    line = [f"L{L}{' causal' if causal else ''} fwd+bwd:"]
    if ref is not None:
        line.append(f"torch {ref * 1e3:.3f} ms ({flop / ref / 1e12:.0f} TFLOP/s)")
    for value in values:
        os.environ["NETCL_ATTENTION_BWD"] = value
        try:
            t = _per_call(fb, queue.finish)
            with profile() as prof:
                fb()
                queue.finish()
        finally:
            del os.environ["NETCL_ATTENTION_BWD"]
        print(f"== float16 L{L} fb NETCL_ATTENTION_BWD={value}: {t * 1e3:.3f} ms/call, "
              f"launches {prof.launches}")
        print(prof.table(limit=12))
        ratio = f", {ref / t:.2f}x torch" if ref is not None else ""
        line.append(f"{value} {t * 1e3:.3f} ms ({flop / t / 1e12:.0f} TFLOP/s{ratio})")
    print("   ".join(line))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cl")
    parser.add_argument("--sizes", type=int, nargs="*", default=[512, 4096])
    parser.add_argument("--dtypes", nargs="*", default=["float16", "float32"])
    parser.add_argument("--bwd", nargs="*", choices=["fused", "split"], default=None,
                        help="only forward+backward (float16), under each of these "
                             "NETCL_ATTENTION_BWD values, beside torch SDPA")
    parser.add_argument("--causal", action="store_true", help="with --bwd: is_causal=True")
    args = parser.parse_args()
    dev = manager.default(args.device)
    assert dev is not None
    if args.bwd is not None:
        for L in args.sizes:
            _compare_one(dev.queue, L, args.bwd or ["fused", "split"], args.causal)
        return
    rng = np.random.default_rng(0)
    for dtype in args.dtypes:
        for L in args.sizes:
            shape = (4, 8, L, 64)
            q, k, v, g = (Tensor.from_host(dev.queue, rng.standard_normal(shape)
                                           .astype(np.float32), dtype=dtype) for _ in range(4))

            floor = 0.0  # add's host time per call: the first of the calls
            for f in _calls(q, k, v, g):
                for _ in range(5):
                    f()
                dev.queue.finish()
                n = 20
                t0 = time.perf_counter()
                host = 0.0
                for _ in range(n):
                    h0 = time.perf_counter()
                    f()
                    host += time.perf_counter() - h0
                dev.queue.finish()
                wall = (time.perf_counter() - t0) / n
                with profile() as prof:
                    f()
                    dev.queue.finish()
                floor = floor or host / n
                print(f"== {dtype} L{L} {f.__name__}: wall {wall * 1e6:.1f} us/call, "
                      f"host {host / n * 1e6:.1f} us/call ({host / n / floor:.1f}x add's), "
                      f"launches {prof.launches}")
                print(prof.table(limit=12))
                if min(args.sizes) == L and f.__name__ in ("fwd", "fb"):
                    pr = cProfile.Profile()
                    pr.enable()
                    for _ in range(n):
                        f()
                    dev.queue.finish()
                    pr.disable()
                    s = io.StringIO()
                    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
                    print(s.getvalue()[-3500:])


if __name__ == "__main__":
    main()
