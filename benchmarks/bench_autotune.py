"""What autotuning buys a training step: the step by rule, ``netcl tune``, the step tuned.

For each model (``--models``, default the CIFAR-stem ResNet-18 at batch 128; ``digits-cnn``
is the digits CNN at batch 64): the eager forward + backward step timed with tuning off (the
rules), then :func:`netcl._tune.tune` with ``--budget`` seconds (default 45), printing each
shape class's rule pick against its winner as it is tuned, then the same step timed again
with the winners (no further tuning: a class the budget left untuned keeps its rule). Times
are the median of ``--steps`` steps after ``--warmup``, each ended by ``queue.finish()``.
The device's stored winners are deleted first (``--keep-winners``: not), so the run tunes
from scratch; everything is printed and flushed as it happens (a timeout loses nothing).

    PYTHONPATH=$(ls -d packages/*/src | tr '\\n' ':') python benchmarks/bench_autotune.py \\
        --device cl --budget 45
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

try:
    import netcl.ops  # noqa: F401
except ImportError:  # running from a checkout without the packages installed
    root = Path(__file__).resolve().parents[1] / "packages"
    sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

import netcl.autograd as ag
from netcl._tune import MODELS, tune
from netcl.core.autotune import tuning
from netcl.core.device import DeviceHandle, manager
from netcl.core.kernel_selector import get_kernel_selector
from netcl.core.tensor import Tensor
from netcl.nn import Module


def step_ms(dev: DeviceHandle, model: Module, shape: tuple[int, ...], steps: int,
            warmup: int) -> float:
    """Median milliseconds of one eager forward + backward of ``model``."""
    rng = np.random.default_rng(0)
    x = Tensor.from_host(dev.queue, rng.standard_normal(shape).astype(np.float32))
    y = Tensor.from_host(dev.queue, rng.integers(0, 10, shape[0]))
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        with ag.Tape() as tape:
            loss = ag.cross_entropy(model(x), y)
        tape.backward(loss)
        dev.queue.finish()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cl")
    parser.add_argument("--models", default="resnet18")
    parser.add_argument("--budget", type=float, default=45.0)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--keep-winners", action="store_true",
                        help="start from the device's stored winners (default: delete them)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    os.environ.setdefault("NETCL_CACHE_DIR", tempfile.mkdtemp(prefix="netcl-autotune-"))
    dev = manager.default(args.device)
    if dev is None or dev.backend != "cl":
        raise SystemExit(f"bench_autotune: needs an OpenCL device, got {args.device!r}")
    sel = get_kernel_selector(dev.cl_device)
    if not args.keep_winners:
        sel.tuned_path().unlink(missing_ok=True)
    rows: list[dict[str, Any]] = []
    print(f"device: {dev}; winners in {sel.tuned_path()}", flush=True)
    for name in args.models.split(","):
        spec = MODELS[name]
        model = spec.build(dev.queue)
        model.train()
        sel.clear_cache()
        with tuning("off"):
            rule = step_ms(dev, model, spec.input_shape, args.steps, args.warmup)
        print(f"{name}: step by rule {rule:.2f} ms", flush=True)
        report = tune(name, device=dev, budget_s=args.budget, out=sys.stdout)
        # tune() left its decisions cached: the winners, and the rule where the budget ran out
        with tuning("on", budget_s=0.0):  # tune nothing more
            tuned = step_ms(dev, model, spec.input_shape, args.steps, args.warmup)
        print(f"{name}: step tuned {tuned:.2f} ms ({rule / tuned:.2f}x the rule's)", flush=True)
        rows.append({"model": name, "input_shape": spec.input_shape, "rule_ms": rule,
                     "tuned_ms": tuned, "tune_seconds": report.seconds,
                     "classes": [{"family": r.family, "shape_class": r.shape_class,
                                  "rule": r.rule, "rule_ms": _ms(r.rule_s),
                                  "winner": r.winner, "winner_ms": _ms(r.winner_s),
                                  "complete": r.complete} for r in report.rows]})
    if args.out:
        args.out.write_text(json.dumps({"device": str(dev), "rows": rows}, indent=1))
        print(f"wrote {args.out}")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


if __name__ == "__main__":
    main()
