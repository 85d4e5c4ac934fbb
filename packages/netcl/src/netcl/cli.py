"""The ``netcl`` command.

``netcl devices`` lists every usable OpenCL device plus the NumPy backend, which one ``auto``
picks, and every device that failed its probe with the reason and what to do about it
(``--probe`` probes every device again instead of trusting the stored verdicts).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from netcl.core.device import DeviceHandle, manager


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _describe(handle: DeviceHandle) -> list[str]:
    if handle.backend == "cpu":
        return ["NumPy backend", "  type: cpu (host NumPy, always available)"]
    dev: Any = handle.cl_device
    ext = dev.extensions
    return [
        f"{handle.platform_name}: {handle.device_name}",
        f"  type: {handle.device_type}, compute units: {dev.max_compute_units}, "
        f"OpenCL: {dev.version.strip()}, driver: {dev.driver_version.strip()}",
        f"  global memory: {dev.global_mem_size / 2**30:.1f} GiB, "
        f"local memory: {dev.local_mem_size / 1024:.0f} KiB",
        f"  fp16: {_yes('cl_khr_fp16' in ext)}, fp64: {_yes('cl_khr_fp64' in ext)}",
    ]


def devices(out: Any = None, reprobe: bool = False) -> int:
    """Print every usable device, the one ``auto`` selects, and the unusable ones with why."""
    out = out or sys.stdout
    if reprobe:
        for i in range(len(manager.discover())):
            manager.verdict(i, refresh=True)
    with warnings.catch_warnings():  # the unusable devices are listed below, with their remedy
        warnings.simplefilter("ignore", RuntimeWarning)
        chosen = manager.default("auto")
    for i, handle in enumerate(manager.all_handles()):
        marker = "*" if handle == chosen else " "
        selector = "cpu" if handle.backend == "cpu" else f"#{i}"
        lines = _describe(handle)
        print(f"{marker} [{selector}] {lines[0]}", file=out)
        for line in lines[1:]:
            print(f"      {line}", file=out)
    for name, verdict, remedy in manager.unusable():
        print(f"x [unusable] {name}", file=out)
        print(f"      reason: {verdict.reason}", file=out)
        print(f"      remedy: {remedy}", file=out)
    print(f"auto picks: {chosen}  (override with NETCL_DEVICE)", file=out)
    return 0


def train(args: argparse.Namespace, out: Any = None) -> int:
    """Train the digits CNN and print the held-out accuracy."""
    from netcl.trainer._digits import DigitsConfig, train_digits

    out = out or sys.stdout
    cfg = DigitsConfig(device=args.device, epochs=args.epochs, batch_size=args.batch_size,
                       lr=args.lr, seed=args.seed, workers=args.workers,
                       checkpoint_dir=args.checkpoint_dir, resume=args.resume,
                       progress=not args.no_progress, amp=args.amp)
    _, history, dev = train_digits(cfg)
    print(f"device: {dev}", file=out)
    for m in history:
        print(f"epoch {m.epoch + 1:2d}  loss {m.train_loss:.4f}  train acc {m.train_accuracy:.4f}"
              f"  test acc {m.val_accuracy:.4f}  ({m.seconds:.1f} s)", file=out)
    final = history[-1].val_accuracy if history else None
    print(f"held-out accuracy: {final:.4f}" if final is not None else "no epoch ran", file=out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``netcl`` console command."""
    parser = argparse.ArgumentParser(prog="netcl", description="netcl command line")
    sub = parser.add_subparsers(dest="command", required=True)
    dp = sub.add_parser("devices", help="list OpenCL devices and the NumPy backend")
    dp.add_argument("--probe", action="store_true",
                    help="probe every OpenCL device again (after a driver change)")
    tp = sub.add_parser("train", help="train a CNN on scikit-learn's handwritten digits")
    tp.add_argument("--device", default="auto",
                    help="auto (default), cpu (NumPy), cl, cl:P:D or a device-name fragment")
    tp.add_argument("--epochs", type=int, default=10)
    tp.add_argument("--batch-size", type=int, default=64)
    tp.add_argument("--lr", type=float, default=1e-2)
    tp.add_argument("--seed", type=int, default=0)
    tp.add_argument("--workers", type=int, default=0, help="DataLoader worker processes")
    tp.add_argument("--checkpoint-dir", default=None)
    tp.add_argument("--resume", action="store_true", help="continue from checkpoint-dir")
    tp.add_argument("--no-progress", action="store_true", help="no progress bar")
    tp.add_argument("--amp", action="store_true",
                    help="mixed precision: float16 matmuls/convolutions, dynamic loss scaling")
    args = parser.parse_args(argv)
    if args.command == "devices":
        return devices(reprobe=args.probe)
    if args.command == "train":
        return train(args)
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
