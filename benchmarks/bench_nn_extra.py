"""Forward + backward time of the layers added for PyTorch users (ConvTranspose2d, GroupNorm,
Upsample nearest/bilinear, Conv1d 'same', AdaptiveMaxPool2d) and one step of the new
optimizers, on a netcl device beside PyTorch (CUDA when present, else CPU).

    python3 benchmarks/bench_nn_extra.py [--device cl] [--scale 1] [--repeat 10]

Prints one line per case: netcl and PyTorch median milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import netcl.autograd as ag
import netcl.nn as nn
import netcl.optim as optim
from netcl.core import Tensor
from netcl.core.device import device as use_device
from netcl.core.device import manager


def _median_ms(fn: Callable[[], None], sync: Callable[[], None], repeat: int) -> float:
    fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _cases(scale: int) -> list[tuple[str, Callable[[Any], Any], tuple[int, ...], str]]:
    n = 8 * scale
    return [
        ("conv_transpose2d 64->32 k4 s2", lambda m: m.ConvTranspose2d(64, 32, 4, 2, 1),
         (n, 64, 32, 32), "ConvTranspose2d"),
        ("group_norm 8x64", lambda m: m.GroupNorm(8, 64), (n, 64, 32, 32), "GroupNorm"),
        ("upsample nearest x2", lambda m: m.Upsample(scale_factor=2), (n, 64, 32, 32),
         "Upsample"),
        ("upsample bilinear x2", lambda m: m.Upsample(scale_factor=2, mode="bilinear"),
         (n, 64, 32, 32), "Upsample"),
        ("conv1d 64 k5 same", lambda m: m.Conv1d(64, 64, 5, padding="same"), (n, 64, 1024),
         "Conv1d"),
        ("adaptive_max_pool2d 7", lambda m: m.AdaptiveMaxPool2d(7), (n, 64, 30, 30),
         "AdaptiveMaxPool2d"),
    ]


def bench_netcl(device: str, scale: int, repeat: int) -> dict[str, float]:
    handle = manager.default(device)
    if handle is None:
        raise SystemExit(f"no device {device!r}")
    q = handle.queue
    sync = q.finish if hasattr(q, "finish") else (lambda: None)
    out = {}
    rng = np.random.default_rng(0)
    for name, make, shape, _ in _cases(scale):
        with use_device(handle):
            layer = make(nn)
        x = Tensor.from_host(q, rng.standard_normal(shape).astype(np.float32))
        x.requires_grad = True

        def step(layer: Any = layer, x: Tensor = x) -> None:
            with ag.Tape() as tape:
                loss = ag.ops.sum(layer(x))
            tape.backward(loss)
            x.grad = None

        out[name] = _median_ms(step, sync, repeat)
    for opt_name in ("Adam", "RAdam", "NAdam", "Adagrad"):
        p = Tensor.from_host(q, rng.standard_normal(1 << 22).astype(np.float32))
        p.grad = Tensor.from_host(q, rng.standard_normal(1 << 22).astype(np.float32))
        opt = getattr(optim, opt_name)([p], lr=1e-3)
        out[f"{opt_name} step 4M"] = _median_ms(opt.step, sync, repeat)
    return out


def bench_torch(scale: int, repeat: int) -> tuple[str, dict[str, float]]:
    try:
        import torch
    except ImportError:
        return "none", {}
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    out = {}
    for name, _, shape, cls in _cases(scale):
        kw = {"ConvTranspose2d": (64, 32, 4, 2, 1), "GroupNorm": (8, 64),
              "Conv1d": (64, 64, 5)}.get(cls, ())
        if cls == "Upsample":
            layer = torch.nn.Upsample(scale_factor=2, mode="bilinear" if "bilinear" in name
                                      else "nearest")
        elif cls == "Conv1d":
            layer = torch.nn.Conv1d(*kw, padding="same")
        elif cls == "AdaptiveMaxPool2d":
            layer = torch.nn.AdaptiveMaxPool2d(7)
        else:
            layer = getattr(torch.nn, cls)(*kw)
        layer = layer.to(dev)
        x = torch.randn(shape, device=dev, requires_grad=True)

        def step(layer: Any = layer, x: Any = x) -> None:
            layer(x).sum().backward()
            x.grad = None

        out[name] = _median_ms(step, sync, repeat)
    for opt_name in ("Adam", "RAdam", "NAdam", "Adagrad"):
        p = torch.nn.Parameter(torch.randn(1 << 22, device=dev))
        p.grad = torch.randn(1 << 22, device=dev)
        opt = getattr(torch.optim, opt_name)([p], lr=1e-3)
        out[f"{opt_name} step 4M"] = _median_ms(opt.step, sync, repeat)
    return dev, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--scale", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    mine = bench_netcl(args.device, args.scale, args.repeat)
    where, theirs = bench_torch(args.scale, args.repeat)
    handle = manager.default(args.device)
    print(f"netcl on {handle.device_name if handle else args.device}, PyTorch on {where}; "
          f"median ms of {args.repeat}, forward + backward (optimizers: one step)")
    for name, ms in mine.items():
        ref = theirs.get(name)
        print(f"{name:32s} netcl {ms:9.2f}  torch {ref if ref is None else f'{ref:9.2f}'}")


if __name__ == "__main__":
    main()
