"""The README's digits job (``netcl train``) with eager steps and with the captured step, on the
NumPy backend and every OpenCL device present, beside PyTorch CPU measured in the same run.

    python benchmarks/bench_digits_capture.py                  # every device, 10 epochs
    python benchmarks/bench_digits_capture.py --devices pthread --runs 1

Each figure is ``train_digits`` end to end (10 epochs, batch 64, Adam 1e-2 with cosine
annealing, held-out evaluation every epoch; ``Trainer(capture=False)`` against the default
captured step; both prefetch), the minimum over ``--runs`` alternating runs, and the mean epoch
after the first (the first compiles kernels and captures). On the NumPy backend the captured
step replays the step's NumPy calls (netcl.runtime._numpy_graph). PyTorch CPU
(``bench_numpy_train.torch_epochs``: the same model, split, optimizer and schedule) runs with
``--threads`` threads; without torch it is skipped. Captured and eager runs must reach the same
held-out accuracy (the steps are bitwise equal); a mismatch is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from bench_numpy_train import _import_torch, torch_epochs

from netcl.core.device import DeviceHandle, manager
from netcl.trainer._digits import DigitsConfig, train_digits


def netcl_run(dev: DeviceHandle, capture: bool, epochs: int, batch: int) -> dict[str, Any]:
    """One ``train_digits`` run: total seconds, mean seconds of epochs 2.., held-out acc."""
    start = time.perf_counter()
    trainer, history, _ = train_digits(DigitsConfig(device=dev, epochs=epochs,
                                                    batch_size=batch, progress=False,
                                                    capture=capture))
    seconds = time.perf_counter() - start
    later = [m.seconds for m in history[1:]] or [history[0].seconds]
    return {"seconds": seconds, "epoch_s": sum(later) / len(later),
            "accuracy": history[-1].val_accuracy, "mode": trainer.step.mode}


def _devices(names: str | None) -> list[DeviceHandle]:
    handles = list(manager.all_handles())
    if not names:
        return handles
    wanted = names.split(",")
    return [h for h in handles if any(w in str(h) or (w == "cpu" and h.backend == "cpu")
                                      for w in wanted)]


def _label(dev: DeviceHandle) -> str:
    if dev.backend == "cpu":
        return "NumPy"
    return f"{dev.platform_name.split()[0]} {dev.device_name}"[:28]


def _ratio(ours: float, ref: float | None, what: str) -> str:
    return "" if ref is None else f"  {ours / ref:5.2f}x {what}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--runs", type=int, default=2,
                        help="runs of each configuration, alternating (minimum kept)")
    parser.add_argument("--devices", default=None,
                        help="comma list of device-name fragments (default: every device)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    torch = _import_torch(args.threads)
    report: dict[str, Any] = {"epochs": args.epochs, "batch": args.batch_size,
                              "threads": args.threads}
    ref = None
    if torch is None:
        print("torch is not installed: PyTorch CPU reference skipped")
    else:
        runs = [torch_epochs(torch, args.epochs, args.batch_size) for _ in range(args.runs)]
        best_torch = min(runs, key=lambda r: r["seconds"])
        ref = best_torch["seconds"]
        report["torch_cpu"] = best_torch
        print(f"{'PyTorch CPU':<38} {ref:7.2f} s  (val acc {best_torch['accuracy']:.3f}, "
              f"{args.threads} threads)")
    for dev in _devices(args.devices):
        best: dict[str, dict[str, Any]] = {}
        for _ in range(args.runs):  # alternate, so a burst of load hits both
            for name, capture in (("eager", False), ("captured", True)):
                r = netcl_run(dev, capture, args.epochs, args.batch_size)
                if name not in best or r["seconds"] < best[name]["seconds"]:
                    best[name] = r
        report[_label(dev)] = best
        eager_s = best["eager"]["seconds"]
        for name, r in best.items():
            line = (f"{_label(dev):<28} {name:<9} {r['seconds']:7.2f} s  "
                    f"({r['epoch_s']:.2f} s/epoch, val acc {r['accuracy']:.3f}, "
                    f"step {r['mode']})")
            line += _ratio(r["seconds"], ref, "PyTorch CPU")
            if name == "captured":
                line += f"  {eager_s / r['seconds']:5.2f}x faster than eager"
            print(line, flush=True)
        if best["eager"]["accuracy"] != best["captured"]["accuracy"]:
            print(f"  MISMATCH: eager and captured held-out accuracy differ on {dev}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
