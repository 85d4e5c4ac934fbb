"""Eager vs captured (netcl.runtime.capture) training steps: step time, host enqueue time,
launches per step and the host cost per launch, with PyTorch CPU beside them where installed.

    python benchmarks/bench_runtime.py                    # NumPy + every OpenCL device
    NETCL_DEVICE=pthread python benchmarks/bench_runtime.py --json out.json

Steps: a small MLP (batch 64, 64-128-10, ReLU) and the digits CNN (batch 64, 1x8x8, the
README's model), each a full training step: forward, cross-entropy, backward, SGD with momentum,
gradients reset. "host" is the time until the step's calls have returned (the work
enqueued) with the queue idle before each call, "step" the time of back-to-back steps until the
queue finished, both per step over ``--steps`` steps after warm-up. On a CPU OpenCL device the
kernels share the host's cores, so eager "host" includes kernels that run while it enqueues.
On the NumPy backend the replay is the planned sequence of NumPy calls (no launches).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import netcl.autograd as ag
from netcl.core import Tensor
from netcl.core.device import DeviceHandle, manager
from netcl.core.testing import available_devices
from netcl.nn import BatchNorm2d, Conv2d, Flatten, Linear, MaxPool2d, Module, ReLU, Sequential
from netcl.optim import SGD
from netcl.runtime import CaptureFallbackWarning, capture


def mlp(q: Any) -> Module:
    rng = np.random.default_rng(0)
    return Sequential(Linear(64, 128, queue=q, rng=rng), ReLU(), Linear(128, 10, queue=q, rng=rng))


def digits_cnn(q: Any) -> Module:
    rng = np.random.default_rng(0)
    return Sequential(
        Conv2d(1, 16, 3, padding=1, queue=q, rng=rng), BatchNorm2d(16, queue=q), ReLU(),
        Conv2d(16, 32, 3, padding=1, queue=q, rng=rng), BatchNorm2d(32, queue=q), ReLU(),
        MaxPool2d(2), Flatten(), Linear(32 * 4 * 4, 10, queue=q, rng=rng),
    )


MODELS: dict[str, tuple[Callable[[Any], Module], tuple[int, ...]]] = {
    "mlp": (mlp, (64, 64)),
    "digits_cnn": (digits_cnn, (64, 1, 8, 8)),
}


def _step(model: Module, opt: SGD) -> Callable[[Tensor, Tensor], Tensor]:
    def step(x: Tensor, y: Tensor) -> Tensor:
        with ag.Tape() as tape:
            loss = ag.cross_entropy(model(x), y)
        tape.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    return step


def _sync(dev: DeviceHandle) -> None:
    if dev.backend == "cl":
        dev.queue.finish()


def time_steps(dev: DeviceHandle, name: str, captured: bool, steps: int) -> dict[str, Any]:
    make, shape = MODELS[name]
    model = make(dev.queue)
    opt = SGD(model.parameters(), lr=0.01, momentum=0.9)
    step: Any = _step(model, opt)
    if captured:
        step = capture(step)
    rng = np.random.default_rng(1)
    x = Tensor.from_host(dev.queue, rng.standard_normal(shape).astype(np.float32))
    y = Tensor.from_host(dev.queue, rng.integers(0, 10, shape[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CaptureFallbackWarning)
        for _ in range(3):  # warm-up, capture, one replay
            step(x, y)
    host = 0.0
    for _ in range(steps):  # host time of a call on an idle queue: no waiting on the device
        _sync(dev)
        start = time.perf_counter()
        step(x, y)
        host += time.perf_counter() - start
    _sync(dev)
    start = time.perf_counter()
    for _ in range(steps):  # step time back to back
        step(x, y)
    _sync(dev)
    total = time.perf_counter() - start
    graph = step.graph if captured and dev.backend == "cl" else None
    launches = getattr(graph, "launches", None)
    return {"host_ms": host / steps * 1e3, "step_ms": total / steps * 1e3,
            "launches": launches, "mode": step.mode if captured else "eager"}


def torch_step_ms(name: str, steps: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    nn = torch.nn
    if name == "mlp":
        model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                              nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Flatten(), nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    shape = MODELS[name][1]
    x, y = torch.randn(shape), torch.randint(0, 10, (shape[0],))
    for i in range(steps + 3):
        if i == 3:
            start = time.perf_counter()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return (time.perf_counter() - start) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args()
    rows = []
    header = (f"{'device':<44} {'step':<11} {'mode':<6} {'host ms':>8} {'step ms':>8} "
              f"{'launches':>8} {'us/launch':>9} {'vs eager':>8}")
    print(header)
    for dev in available_devices():
        where = "cpu (NumPy)" if dev.backend == "cpu" else str(dev)
        for name in MODELS:
            eager = time_steps(dev, name, False, args.steps)
            replay = time_steps(dev, name, True, args.steps)
            launches = replay["launches"] if replay else None
            for mode, row in (("eager", eager), ("replay", replay)):
                if row is None:
                    continue
                per_launch = (f"{row['host_ms'] * 1e3 / launches:.1f}" if launches else "-")
                ratio = f"{eager['step_ms'] / row['step_ms']:.2f}x"
                print(f"{where[:44]:<44} {name:<11} {mode:<6} {row['host_ms']:>8.3f} "
                      f"{row['step_ms']:>8.3f} {launches or '-':>8} {per_launch:>9} {ratio:>8}")
                rows.append({"device": where, "step": name, "mode": mode, **row,
                             "launches": launches})
    for name in MODELS:
        ms = torch_step_ms(name, args.steps)
        if ms is not None:
            print(f"{'PyTorch CPU':<44} {name:<11} {'eager':<6} {'':>8} {ms:>8.3f}")
            rows.append({"device": "PyTorch CPU", "step": name, "mode": "eager", "step_ms": ms})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    manager.discover()
    main()
