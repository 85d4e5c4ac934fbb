"""Host-side profile of netcl's dispatch: where a small op's and a ResNet-18 step's time goes.

    python scripts/gpu/gpu_profile.py --device cl [--batch 128] [--out DIR]

Prints per-call wall time of a small ``ops.add`` (the dispatch floor), then for a ResNet-18
(CIFAR stem) training step: wall time per step, host time to *enqueue* a step (no finish),
kernel launches per step, and the top functions by own time under cProfile.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import numpy as np

root = Path(__file__).resolve().parents[2] / "packages"
sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

import netcl.autograd as ag  # noqa: E402
import netcl.ops as ops  # noqa: E402
from netcl.core.device import manager  # noqa: E402
from netcl.core.kernels.primitives import count_launches  # noqa: E402
from netcl.core.tensor import Tensor  # noqa: E402
from netcl.nn import resnet18  # noqa: E402
from netcl.optim import SGD  # noqa: E402


def _top(profile: cProfile.Profile, n: int) -> str:
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(n)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cl")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    dev = manager.default(args.device)
    assert dev is not None
    q = dev.queue
    a = Tensor.from_host(q, np.ones(4096, np.float32))
    ops.add(a, a)
    q.finish()
    start = time.perf_counter()
    for _ in range(2000):
        ops.add(a, a)
    q.finish()
    print(f"ops.add n=4096: {(time.perf_counter() - start) / 2000 * 1e6:.1f} us per call")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        ops.add(a, a)
    q.finish()
    prof.disable()
    report = [_top(prof, 25)]

    net = resnet18(num_classes=10, stem="cifar", queue=q)
    opt = SGD(net.parameters(), lr=0.01, momentum=0.9)
    rng = np.random.default_rng(0)
    x = Tensor.from_host(q, rng.standard_normal((args.batch, 3, 32, 32)).astype(np.float32))
    y = Tensor.from_host(q, rng.integers(0, 10, args.batch))

    def step() -> None:
        with ag.Tape() as tape:
            loss = ag.cross_entropy(net(x), y)
        tape.backward(loss)
        opt.step()
        opt.zero_grad()

    for _ in range(2):
        step()
    q.finish()
    with count_launches() as launches:
        step()
    q.finish()
    steps = 5
    start = time.perf_counter()
    for _ in range(steps):
        step()
    enqueued = time.perf_counter() - start
    q.finish()
    wall = time.perf_counter() - start
    print(f"resnet18 batch {args.batch}: {wall / steps * 1e3:.1f} ms per step wall, "
          f"{enqueued / steps * 1e3:.1f} ms per step to enqueue, {launches[0]} launches per step")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2):
        step()
    q.finish()
    prof.disable()
    report.append(_top(prof, 40))
    text = "\n".join(report)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "profile.txt").write_text(text)


if __name__ == "__main__":
    main()
