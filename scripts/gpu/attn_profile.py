"""Where the time of one fused attention call goes: host per call, kernels by device time,
and the Python functions of the host side (cProfile), at a short and a long sequence.

    NETCL_PROFILE_EVENTS=1 python scripts/gpu/attn_profile.py --device cl
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

root = Path(__file__).resolve().parents[2] / "packages"
sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

import netcl.ops as ops  # noqa: E402
from netcl.core.device import manager  # noqa: E402
from netcl.core.tensor import Tensor  # noqa: E402
from netcl.runtime import profile  # noqa: E402


def _calls(q: Tensor, k: Tensor, v: Tensor, g: Tensor
           ) -> tuple[Callable[[], object], Callable[[], object]]:
    def fwd() -> object:
        return ops.scaled_dot_product_attention_forward(q, k, v, is_causal=False)

    def fb() -> object:
        out, lse, stream = ops.scaled_dot_product_attention_forward(q, k, v)
        return ops.scaled_dot_product_attention_backward(g, q, k, v, out, lse, stream=stream)

    return fwd, fb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cl")
    parser.add_argument("--sizes", type=int, nargs="*", default=[512, 4096])
    parser.add_argument("--dtypes", nargs="*", default=["float16", "float32"])
    args = parser.parse_args()
    dev = manager.default(args.device)
    assert dev is not None
    rng = np.random.default_rng(0)
    for dtype in args.dtypes:
        for L in args.sizes:
            shape = (4, 8, L, 64)
            q, k, v, g = (Tensor.from_host(dev.queue, rng.standard_normal(shape)
                                           .astype(np.float32), dtype=dtype) for _ in range(4))

            fwd, fb = _calls(q, k, v, g)
            for f in (fwd, fb):
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
                print(f"== {dtype} L{L} {f.__name__}: wall {wall * 1e6:.1f} us/call, "
                      f"host {host / n * 1e6:.1f} us/call, launches {prof.launches}")
                print(prof.table(limit=12))
                if min(args.sizes) == L:
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
