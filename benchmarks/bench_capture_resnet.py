"""ResNet-18 training step, eager vs captured (netcl.runtime.capture), with PyTorch beside it.

    python benchmarks/bench_capture_resnet.py --device cl [--batch 128] [--amp] [--json F]

One row per mode: ``host ms`` is the time until a step's calls have returned (its work only
enqueued) with the queue idle before the call; ``step ms`` the time per step of back-to-back
steps until the queue finished; ``device ms`` the kernels' own time in one step from OpenCL
profiling events (:func:`netcl.runtime.profile`; set NETCL_PROFILE_EVENTS=1, else "-");
``launches`` the kernel launches per step.
The reference is PyTorch on the same machine in the same run (CUDA when present, cuDNN with
TF32 off; else nothing). The model is the CIFAR-stem ResNet-18 of ``netcl.nn.resnet18`` and
torchvision's with the same stem, SGD with momentum, cross-entropy, float32 or AMP (float16
autocast with a GradScaler).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_train import torch_resnet_setup

import netcl.autograd as ag
from netcl.core import Tensor
from netcl.core.device import DeviceHandle, manager
from netcl.nn import resnet18
from netcl.nn.amp import GradScaler, autocast
from netcl.optim import SGD
from netcl.runtime import CaptureError, CaptureFallbackWarning, capture, profile


def make_step(dev: DeviceHandle, amp: bool) -> Callable[[Tensor, Tensor], Tensor]:
    net = resnet18(num_classes=10, stem="cifar", queue=dev.queue)
    opt = SGD(net.parameters(), lr=0.01, momentum=0.9)
    scaler = GradScaler(enabled=amp)

    def step(x: Tensor, y: Tensor) -> Tensor:
        with ag.Tape() as tape:
            with autocast(enabled=amp):
                logits = net(x)
            loss = ag.cross_entropy(ag.ops.cast(logits, "float32") if amp else logits, y)
            scaled = scaler.scale(loss)
        tape.backward(scaled)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        return loss

    return step


def time_mode(dev: DeviceHandle, batch: int, amp: bool, captured: bool,
              steps: int) -> dict[str, Any]:
    step: Any = make_step(dev, amp)
    if captured:
        step = capture(step)
    rng = np.random.default_rng(0)
    x = Tensor.from_host(dev.queue, rng.standard_normal((batch, 3, 32, 32)).astype(np.float32))
    y = Tensor.from_host(dev.queue, rng.integers(0, 10, batch))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CaptureFallbackWarning)
            for _ in range(3):  # warm-up (builds), capture, one replay
                step(x, y)
    except CaptureError as err:
        return {"error": f"{type(err).__name__}: {err}"}
    dev.queue.finish()
    host = 0.0
    for _ in range(steps):
        dev.queue.finish()
        start = time.perf_counter()
        step(x, y)
        host += time.perf_counter() - start
    dev.queue.finish()
    start = time.perf_counter()
    for _ in range(steps):
        step(x, y)
    dev.queue.finish()
    total = time.perf_counter() - start
    with profile() as prof:
        step(x, y)
        dev.queue.finish()
    stats = prof.summary()
    device_ms = (sum(k.device_us or 0.0 for k in stats) / 1e3 if prof.device_timed else None)
    launches = prof.launches
    return {"host_ms": host / steps * 1e3, "step_ms": total / steps * 1e3,
            "device_ms": device_ms, "launches": launches,
            "mode": step.mode if captured else "eager", "table": prof.table(limit=25)}


def torch_step(batch: int, amp: bool, steps: int) -> dict[str, Any] | None:
    found = torch_resnet_setup(batch, amp)
    if found is None:
        return None
    step, torch = found
    for _ in range(3):
        step()
    host = 0.0
    for _ in range(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        host += time.perf_counter() - start
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return {"host_ms": host / steps * 1e3,
            "step_ms": (time.perf_counter() - start) / steps * 1e3,
            "device": torch.cuda.get_device_name()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default="cl")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--amp", action="store_true", help="only the AMP rows")
    parser.add_argument("--both", action="store_true", help="float32 and AMP rows")
    parser.add_argument("--kernels", action="store_true",
                        help="print each eager step's kernels by device time")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    dev = manager.default(args.device)
    if dev is None or dev.backend != "cl":
        raise SystemExit(f"bench_capture_resnet: needs an OpenCL device, got {args.device!r}")
    precisions = [False, True] if args.both else [args.amp]
    rows: list[dict[str, Any]] = []
    print(f"{str(dev)[:40]}, ResNet-18 (CIFAR stem), batch {args.batch}")
    print(f"{'precision':<9} {'who':<14} {'host ms':>8} {'step ms':>8} {'device ms':>9} "
          f"{'launches':>8} {'vs torch':>8}")
    for amp in precisions:
        precision = "amp" if amp else "float32"
        ref = torch_step(args.batch, amp, args.steps)
        for who, captured in (("netcl eager", False), ("netcl replay", True)):
            row = time_mode(dev, args.batch, amp, captured, args.steps)
            rows.append({"precision": precision, "who": who, "batch": args.batch, **row})
            if "error" in row:
                print(f"{precision:<9} {who:<14} {row['error'][:100]}")
                continue
            table = row.pop("table")
            if args.kernels and not captured:
                print(table)
            ratio = f"{ref['step_ms'] / row['step_ms']:.2f}x" if ref else "-"
            device = "-" if row["device_ms"] is None else f"{row['device_ms']:.2f}"
            print(f"{precision:<9} {who:<14} {row['host_ms']:>8.2f} {row['step_ms']:>8.2f} "
                  f"{device:>9} {row['launches']:>8} {ratio:>8}")
        if ref is not None:
            rows.append({"precision": precision, "who": "pytorch", **ref})
            print(f"{precision:<9} {'pytorch':<14} {ref['host_ms']:>8.2f} {ref['step_ms']:>8.2f}")
    print("vs torch: PyTorch's step time over netcl's (higher is better, 1.0 = parity)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    manager.discover()
    main()
