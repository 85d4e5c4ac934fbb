"""Kernels by device time of single convolution passes (forward, data or weight gradient) with
the rule's variant or a forced one: where a slow layer spends its time.

    NETCL_PROFILE_EVENTS=1 python scripts/gpu/conv_profile.py --device cl \
        --layer 128,256,256,8,3,1,1 --passes weight --variants auto WINOGRAD_F4

``--layer`` is ``N,C,K,H,R,stride,padding`` (an H x H input, R x R kernel).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

root = Path(__file__).resolve().parents[2] / "packages"
sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

from netcl.core.device import manager  # noqa: E402
from netcl.core.kernel_selector import KernelVariant, force_variant  # noqa: E402
from netcl.core.tensor import Tensor  # noqa: E402
from netcl.ops import _conv_rule  # noqa: E402
from netcl.ops._conv import conv2d, conv2d_backward_data, conv2d_backward_weight  # noqa: E402
from netcl.runtime import profile  # noqa: E402


def _variant(name: str) -> Any:
    if name == "auto":
        return None
    found = getattr(_conv_rule, name, None)
    return found if found is not None else KernelVariant[name]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cl")
    parser.add_argument("--layer", action="append", required=True)
    parser.add_argument("--passes", nargs="*", default=["fwd", "data", "weight"])
    parser.add_argument("--variants", nargs="*", default=["auto"])
    args = parser.parse_args()
    dev = manager.default(args.device)
    assert dev is not None
    rng = np.random.default_rng(0)
    for spec in args.layer:
        n, c, k, h, r, stride, pad = (int(v) for v in spec.split(","))
        ho = (h + 2 * pad - r) // stride + 1
        x = Tensor.from_host(dev.queue, rng.standard_normal((n, c, h, h)).astype(np.float32))
        w = Tensor.from_host(dev.queue, rng.standard_normal((k, c, r, r)).astype(np.float32))
        g = Tensor.from_host(dev.queue, rng.standard_normal((n, k, ho, ho)).astype(np.float32))
        calls: dict[str, Callable[[], Any]] = {
            "fwd": lambda: conv2d(x, w, None, stride, pad),  # noqa: B023
            "data": lambda: conv2d_backward_data(g, w, x.shape, stride, pad),  # noqa: B023
            "weight": lambda: conv2d_backward_weight(x, g, w.shape, stride, pad),  # noqa: B023
        }
        for which in args.passes:
            for name in args.variants:
                variant = _variant(name)
                forced = force_variant(variant) if variant is not None else contextlib.nullcontext()
                with forced:
                    for _ in range(3):
                        calls[which]()
                    dev.queue.finish()
                    with profile() as prof:
                        for _ in range(5):
                            calls[which]()
                        dev.queue.finish()
                total = sum(s.device_us or 0.0 for s in prof.summary()) / 5
                print(f"== {spec} {which} {name}: {total:.1f} us device per call")
                print(prof.table(limit=10))


if __name__ == "__main__":
    main()
