"""Fused versus unfused elementwise chain, forward + backward: kernel launches and time.

The chain is the one of the autograd issue, ``relu(x * w + b) * s - t``, with broadcasting:
``x`` and ``t`` are (n / 1024, 1024), ``w`` and ``b`` are (1024,) rows, ``s`` is a (1,) scalar
tensor; all five require gradients. *Unfused* runs it as five ``netcl.autograd.ops`` calls on a
Tape (one kernel each, and their backward rules); *fused* runs the same function through
``netcl.autograd.compiler.jit``: one generated kernel forward and two backward (one for the
full-size gradients, one reducing the broadcast ones).

Both variants run on the same inputs in one process, alternating, after one warm-up call each
(kernel builds); the table shows the best of ``--repeat`` runs (least disturbed by other load)
and the JSON keeps every run. Launches are counted by ``netcl.core.kernels.primitives``.

    PYTHONPATH=$(ls -d packages/*/src | tr '\\n' ':') python benchmarks/bench_fusion.py \\
        --device cl --n 4194304 --out bench_fusion.json
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

try:
    import netcl.autograd  # noqa: F401
except ImportError:  # running from a checkout without the packages installed
    root = Path(__file__).resolve().parents[1] / "packages"
    sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

import netcl.autograd as ag
from netcl.autograd import compiler, ops
from netcl.core.device import manager
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor

COLS = 1024


def chain(x: Tensor, w: Tensor, b: Tensor, s: Tensor, t: Tensor) -> Tensor:
    """relu(x * w + b) * s - t with the differentiable ops."""
    return ops.sub(ops.mul(ops.relu(ops.add(ops.mul(x, w), b)), s), t)


fused_chain = compiler.jit(chain)


def _sync(queue: Any) -> None:
    finish = getattr(queue, "finish", None)
    if finish is not None:
        finish()


def _cpu_time() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_once(fn: Any, args: list[Tensor], g: Tensor) -> dict[str, float]:
    """One forward + backward: wall times in seconds (device finished), the process's CPU time
    (what PoCL and NumPy spend, whatever else loads the machine), launch counts."""
    queue = args[0].queue
    for a in args:
        a.grad = None
    _sync(queue)
    c0 = _cpu_time()
    t0 = time.perf_counter()
    with ag.Tape() as tape:
        with count_launches() as fwd:
            y = fn(*args)
    _sync(queue)
    t1 = time.perf_counter()
    with count_launches() as bwd:
        tape.backward(y, grad=g)
    for a in args:
        if a.grad is not None:
            a.grad.wait()
    _sync(queue)
    t2 = time.perf_counter()
    return {"forward_s": t1 - t0, "backward_s": t2 - t1, "total_s": t2 - t0,
            "cpu_s": _cpu_time() - c0, "forward_launches": fwd[0],
            "backward_launches": bwd[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=16 * 1024 * 1024,
                        help="elements of x (a multiple of 1024; default 16M)")
    parser.add_argument("--device", choices=("cl", "cpu"), default="cl",
                        help="cl: the first OpenCL device; cpu: the NumPy backend")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per variant")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    opts = parser.parse_args(argv)
    if opts.n < COLS or opts.n % COLS:
        parser.error(f"--n must be a positive multiple of {COLS}, got {opts.n}")

    handle = manager.default(opts.device)
    if handle is None:
        parser.error(f"no device for --device {opts.device}")
    queue = handle.queue
    rows = opts.n // COLS
    rng = np.random.default_rng(0)
    shapes = [(rows, COLS), (COLS,), (COLS,), (1,), (rows, COLS)]
    args = [Tensor.from_host(queue, rng.standard_normal(s).astype(np.float32)) for s in shapes]
    for a in args:
        a.requires_grad = True
    g = Tensor.from_host(queue, np.ones((rows, COLS), dtype=np.float32))

    variants = {"unfused": chain, "fused": fused_chain}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    grads: dict[str, list[np.ndarray[Any, Any]]] = {}
    for name, fn in variants.items():  # warm-up: builds kernels
        run_once(fn, args, g)
        grads[name] = [a.grad.to_host() for a in args if a.grad is not None]
    for _ in range(opts.repeat):
        for name, fn in variants.items():
            results[name].append(run_once(fn, args, g))
    worst = max(float(np.max(np.abs(a - b)) / (1 + float(np.max(np.abs(b)))))
                for a, b in zip(grads["fused"], grads["unfused"]))

    best = {name: {k: min(r[k] for r in runs) for k in runs[0]}
            for name, runs in results.items()}
    print(f"device: {handle}  n = {opts.n} ({rows} x {COLS}), float32, best of {opts.repeat}")
    print(f"{'':10s}{'fwd launches':>14s}{'bwd launches':>14s}{'forward ms':>12s}"
          f"{'backward ms':>13s}{'total ms':>10s}{'cpu ms':>9s}")
    for name, b in best.items():
        print(f"{name:10s}{b['forward_launches']:14.0f}{b['backward_launches']:14.0f}"
              f"{b['forward_s'] * 1e3:12.1f}{b['backward_s'] * 1e3:13.1f}"
              f"{b['total_s'] * 1e3:10.1f}{b['cpu_s'] * 1e3:9.1f}")
    speedup = best["unfused"]["total_s"] / best["fused"]["total_s"]
    print(f"fused speedup (forward + backward): {speedup:.2f}x; "
          f"max relative gradient difference fused vs unfused: {worst:.2e}")
    if opts.out is not None:
        report = {
            "device": str(handle), "n": opts.n, "shape": [rows, COLS], "dtype": "float32",
            "repeat": opts.repeat, "best": best, "runs": results, "speedup": speedup,
            "max_rel_grad_diff": worst, "python": platform.python_version(),
            "host": platform.node(),
        }
        opts.out.write_text(json.dumps(report, indent=2))
        print(f"wrote {opts.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
