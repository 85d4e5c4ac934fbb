"""Host dispatch cost of small eager ops: microseconds per call, beside NumPy and PyTorch.

An op on a few elements does almost no work on the device, so what a call costs is its
host side: Python dispatch, argument setting, the driver's enqueue. Each row is the time of
``--calls`` back-to-back calls followed by one ``queue.finish()``, divided by the calls (the
kernels are only enqueued while the calls run; the best of ``--repeat`` such batches, after a
warm-up batch that builds the kernels). On a CPU OpenCL device the kernels run on the host's
cores meanwhile, so its rows include some kernel time too.

Rows, per device (NumPy and every OpenCL device found, or ``--device``):

- ``add``, ``mul_scalar`` (``x * 2.0``), ``relu``, ``sum`` (all elements) of float32 vectors
  of each ``--sizes`` length (7 and 257 by default);
- ``matmul`` of two 33 x 33 float32 matrices; ``conv2d`` of a 1 x 3 x 8 x 8 input with a
  4 x 3 x 3 x 3 weight (padding 1);
- ``mlp_step``: forward and backward of a tiny MLP through netcl.autograd (4 x 8 input,
  8 -> 16 -> 3, ReLU, sum as loss); the row also gives the time per launched kernel;
- ``pyopencl_enqueue[n]`` (OpenCL devices): the floor under every eager op -- PyOpenCL's
  ``enqueue_nd_range_kernel`` of a plain add kernel whose arguments were set once, no netcl
  code at all, so ``add[n]`` minus this row is netcl's own host cost.

References in the same run: NumPy's own call on the same arrays (``np.add(a, b)``, ...) and
PyTorch CPU (when ``torch`` imports); ``ratio`` is netcl's time over NumPy's. ``cpu us`` is
the calling thread's CPU time per call in the same batches: steadier than the wall time on a
shared machine.

    python benchmarks/bench_dispatch.py                        # every device
    python benchmarks/bench_dispatch.py --device pthread --out bench_dispatch.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyopencl as cl

try:
    import netcl.ops  # noqa: F401
except ImportError:  # running from a checkout without the packages installed
    root = Path(__file__).resolve().parents[1] / "packages"
    sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

import netcl.autograd as ag
import netcl.ops as ops
from netcl.core.device import DeviceHandle, manager
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor
from netcl.core.testing import available_devices

try:
    import torch
except ImportError:
    torch = None


def per_call_us(fn: Callable[[], Any], sync: Callable[[], None], calls: int,
                repeat: int) -> tuple[float, float]:
    """Best over ``repeat`` batches of microseconds per call (``calls`` calls, one sync): the
    wall time, and the calling thread's CPU time (what other processes on a shared machine
    disturb least; it leaves out the device's worker threads and the final wait)."""
    for _ in range(min(calls, 200)):  # warm-up: builds, plans, pool buckets
        fn()
    sync()
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.thread_time()
        for _ in range(calls):
            fn()
        cpu = time.thread_time() - start_cpu
        sync()
        best = min(best, (time.perf_counter() - start) / calls)
        best_cpu = min(best_cpu, cpu / calls)
    return best * 1e6, best_cpu * 1e6


def _nothing() -> None:
    pass


def cases(q: Any, sizes: list[int]) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(name, netcl call, NumPy call on the same data) of every row."""
    rng = np.random.default_rng(0)
    rows: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = []
    for n in sizes:
        ha, hb = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        a, b = Tensor.from_host(q, ha), Tensor.from_host(q, hb)
        rows += [
            (f"add[{n}]", lambda a=a, b=b: ops.add(a, b), lambda x=ha, y=hb: np.add(x, y)),
            (f"mul_scalar[{n}]", lambda a=a: ops.mul(a, 2.0), lambda x=ha: np.multiply(x, 2.0)),
            (f"relu[{n}]", lambda a=a: ops.relu(a), lambda x=ha: np.maximum(x, 0.0)),
            (f"sum[{n}]", lambda a=a: ops.sum(a), lambda x=ha: np.sum(x)),
        ]
    hm = rng.standard_normal((33, 33)).astype(np.float32)
    m = Tensor.from_host(q, hm)
    rows.append(("matmul[33x33]", lambda: ops.matmul(m, m), lambda: np.matmul(hm, hm)))
    hx = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    hw = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    x, w = Tensor.from_host(q, hx), Tensor.from_host(q, hw)
    rows.append(("conv2d[1x3x8x8,4x3x3x3]", lambda: ops.conv2d(x, w, padding=1), _nothing))
    rows.append(("mlp_step", _mlp_step(q, rng), _nothing))
    if hasattr(q, "context"):  # an OpenCL queue: the raw enqueue floor
        for n in sizes:
            rows.append((f"pyopencl_enqueue[{n}]", _raw_enqueue(q, n), _nothing))
    return rows


_RAW_ADD = """__kernel void raw_add(__global const float* a, __global const float* b,
                      __global float* c) {
    size_t i = get_global_id(0);
    c[i] = a[i] + b[i];
}"""


def _raw_enqueue(q: Any, n: int) -> Callable[[], Any]:
    """One PyOpenCL enqueue of a prebuilt add kernel on ``n`` floats (arguments set once)."""
    kernel = cl.Program(q.context, _RAW_ADD).build().raw_add
    mf = cl.mem_flags
    bufs = [cl.Buffer(q.context, mf.READ_WRITE, 4 * n) for _ in range(3)]
    kernel.set_args(*bufs)
    # the lambda keeps the buffers alive (a kernel holds no Python references to its arguments)
    return lambda bufs=bufs: cl.enqueue_nd_range_kernel(q, kernel, (n,), None)


def _mlp_step(q: Any, rng: np.random.Generator) -> Callable[[], Any]:
    """Forward and backward of a 8 -> 16 -> 3 MLP on a 4 x 8 batch (5 differentiable ops)."""
    x = Tensor.from_host(q, rng.standard_normal((4, 8)).astype(np.float32))
    params = [Tensor.from_host(q, rng.standard_normal(s).astype(np.float32) * 0.3)
              for s in ((8, 16), (16,), (16, 3))]
    for p in params:
        p.requires_grad = True
    w1, b1, w2 = params

    def step() -> None:
        with ag.Tape() as tape:
            h = ag.ops.relu(ag.ops.add(ag.ops.matmul(x, w1), b1))
            loss = ag.ops.sum(ag.ops.matmul(h, w2))
        tape.backward(loss)
        for p in params:
            p.grad = None

    return step


def torch_cases(sizes: list[int]) -> dict[str, Callable[[], Any]]:
    """PyTorch CPU's call for each row it has an equivalent of."""
    if torch is None:
        return {}
    out: dict[str, Callable[[], Any]] = {}
    for n in sizes:
        a, b = torch.randn(n), torch.randn(n)
        out[f"add[{n}]"] = lambda a=a, b=b: torch.add(a, b)
        out[f"mul_scalar[{n}]"] = lambda a=a: torch.mul(a, 2.0)
        out[f"relu[{n}]"] = lambda a=a: torch.relu(a)
        out[f"sum[{n}]"] = lambda a=a: torch.sum(a)
    m = torch.randn(33, 33)
    out["matmul[33x33]"] = lambda: torch.matmul(m, m)
    x, w = torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)
    out["conv2d[1x3x8x8,4x3x3x3]"] = lambda: torch.nn.functional.conv2d(x, w, padding=1)
    return out


def device_label(dev: DeviceHandle) -> str:
    return "numpy" if dev.backend == "cpu" else str(dev)


def measure(dev: DeviceHandle, sizes: list[int], calls: int, repeat: int,
            references: bool = True, only: tuple[str, ...] | None = None
            ) -> list[dict[str, Any]]:
    q = dev.queue
    sync = q.finish if dev.backend == "cl" else _nothing
    ref = torch_cases(sizes) if references else {}
    rows = []
    for name, fn, np_fn in cases(q, sizes):
        if only is not None and not name.startswith(only):
            continue
        n = max(50, calls // 20) if name.startswith(("mlp", "conv", "matmul")) else calls
        us, cpu_us = per_call_us(fn, sync, n, repeat)
        with count_launches() as launches:
            fn()
        sync()
        skip = np_fn is _nothing or not references
        np_us = None if skip else per_call_us(np_fn, _nothing, n, repeat)[0]
        torch_us = per_call_us(ref[name], _nothing, n, repeat)[0] if name in ref else None
        rows.append({
            "device": device_label(dev), "op": name, "us_per_call": us, "cpu_us_per_call": cpu_us,
            "launches": launches[0],
            "us_per_launch": us / launches[0] if launches[0] else None,
            "numpy_us": np_us, "torch_cpu_us": torch_us,
            "ratio_to_numpy": us / np_us if np_us else None,
        })
    return rows


def _fmt(v: float | None, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'device':<40} {'op':<26} {'us/call':>8} {'cpu us':>7} {'launch':>6} "
            f"{'us/launch':>9} {'numpy us':>8} {'torch us':>8} {'x numpy':>7}")
    lines = [head]
    for r in rows:
        lines.append(f"{r['device'][:40]:<40} {r['op']:<26} {r['us_per_call']:>8.1f} "
                     f"{r['cpu_us_per_call']:>7.1f} {r['launches']:>6} "
                     f"{_fmt(r['us_per_launch']):>9} {_fmt(r['numpy_us']):>8} "
                     f"{_fmt(r['torch_cpu_us']):>8} {_fmt(r['ratio_to_numpy']):>7}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None,
                        help="NETCL_DEVICE-style choice (cpu, cl, a name fragment); default: all")
    parser.add_argument("--sizes", default="7,257")
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-reference", action="store_true",
                        help="time netcl only (no NumPy or PyTorch rows)")
    parser.add_argument("--only", default=None, help="comma-separated op prefixes to time")
    parser.add_argument("--out", default=None, help="write every row here as JSON (and the "
                        "table beside it as .txt)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.device:
        found = manager.default(args.device)
        if found is None:
            raise SystemExit(f"--device {args.device!r} matches no device")
        devices = [found]
    else:
        devices = available_devices()
    rows: list[dict[str, Any]] = []
    for dev in devices:
        rows += measure(dev, sizes, args.calls, args.repeat, not args.no_reference,
                        None if args.only is None else tuple(args.only.split(",")))
        print(table([r for r in rows if r["device"] == device_label(dev)]), flush=True)
    if args.out:
        meta = {"host": platform.node(), "python": platform.python_version(),
                "numpy": np.__version__, "torch": None if torch is None else torch.__version__,
                "calls": args.calls, "repeat": args.repeat}
        Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
        Path(args.out).with_suffix(".txt").write_text(table(rows) + "\n")


if __name__ == "__main__":
    main()
