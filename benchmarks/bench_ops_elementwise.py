"""Elementwise add against the device's copy bandwidth; softmax and sum against NumPy/PyTorch.

Rows, all in one process on one device:

- ``copy_float4``: a plain ``b[i] = a[i]`` float4 kernel: the bandwidth ceiling for
  elementwise work on this device, measured in the same run;
- ``add``: ``netcl.ops.add`` of two float32 vectors (16 M and 64 M elements by default), GB/s
  counting 3 x 4 bytes per element, and its ratio to the copy's GB/s;
- ``softmax`` of a 4096 x 1024 float32 matrix along the last axis, ``sum`` of 16 M floats;
- the same through NumPy on the host, and through PyTorch on CUDA when ``torch`` imports and
  sees a GPU (``torch.cuda.synchronize`` around each timing).

With ``--ops relu,exp,...`` only those ops run instead, each on ``--ops-size`` float32
elements (1M by default): netcl in each kernel form (the bundle with the op as a runtime
argument, what GPUs run; a kernel per op, what OpenCL CPU devices run: NOTE [ Elementwise
kernels on CPU devices ] in ``netcl.ops._elementwise_base``) and layout ("vec", "flat"), and
NumPy, with the ratios NumPy/netcl for the device's default ("now") and for what it ran
before per-op kernels ("former"), and former/now.

Every timing is per call, from batches of back-to-back calls with one ``queue.finish()``
each (``benchmarks/_timing.py``; the op's Python dispatch included), after one warm-up call
(kernel builds); the table shows the median of ``--repeat`` samples and the JSON keeps every
sample. Launches are counted by ``netcl.core.kernels.primitives``.

    PYTHONPATH=$(ls -d packages/*/src | tr '\\n' ':') python benchmarks/bench_ops_elementwise.py \\
        --device cl --out bench_ops_elementwise.json
    ... --device Intel --ops relu,exp,neg,sqrt,add,mul --ops-size 1M
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

try:
    import netcl.ops  # noqa: F401
except ImportError:  # running from a checkout without the packages installed
    root = Path(__file__).resolve().parents[1] / "packages"
    sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

from _timing import per_call_samples

import netcl.ops as ops
from netcl.core.device import manager
from netcl.core.kernel_selector import KernelVariant, force_variant, get_kernel_selector
from netcl.core.kernels.cache import get_kernel
from netcl.core.kernels.header import kernel_header
from netcl.core.kernels.primitives import count_launches, launch
from netcl.core.tensor import Tensor
from netcl.ops._elementwise_base import FORMS, forced_form, kernel_form

_COPY4 = """
__kernel void copy_float4(__global const float4* a, __global float4* b, const int n4) {
  const int i = get_global_id(0);
  if (i < n4) b[i] = a[i];
}
"""

MI = 1 << 20


def _sizes(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip().upper()
        out.append(int(part[:-1]) * MI if part.endswith("M") else int(part))
    return out


def _timed(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> list[float]:
    samples: list[float] = per_call_samples(fn, sync, repeat)
    return samples


def _row(rows: list[dict[str, Any]], op: str, shape: tuple[int, ...], impl: str,
         times: list[float], nbytes: int | None = None, **extra: Any) -> dict[str, Any]:
    med = statistics.median(times)
    row = {"op": op, "shape": list(shape), "impl": impl, "median_ms": med * 1e3,
           "best_ms": min(times) * 1e3, "runs_ms": [t * 1e3 for t in times], **extra}
    if nbytes is not None:
        row["gbps"] = nbytes / med / 1e9
    rows.append(row)
    return row


def _torch_cuda() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


class Bench:
    """One device's rows: netcl on ``handle``, NumPy on the host, PyTorch on CUDA if present."""

    def __init__(self, handle: Any, repeat: int) -> None:
        self.handle = handle
        self.q = handle.queue
        self.repeat = repeat
        self.torch = _torch_cuda()
        self.rows: list[dict[str, Any]] = []
        self.ratios: dict[str, float] = {}
        self.rng = np.random.default_rng(0)
        self.selector = get_kernel_selector(handle.cl_device)
        self.impl = f"netcl-{handle.backend}"

    def sync(self) -> None:
        self.q.finish()

    def time(self, fn: Callable[[], Any]) -> list[float]:
        return _timed(fn, self.sync, self.repeat)

    def time_torch(self, fn: Callable[[], Any]) -> list[float]:
        return _timed(fn, self.torch.cuda.synchronize, self.repeat)

    def add(self, n: int) -> None:
        a_host = self.rng.random(n, dtype=np.float32)
        b_host = self.rng.random(n, dtype=np.float32)
        a, b = Tensor.from_host(self.q, a_host), Tensor.from_host(self.q, b_host)
        a.wait()
        b.wait()
        copy = None
        if self.handle.backend == "cl":
            ctx = self.q.context
            kernel = get_kernel(ctx, kernel_header(ctx, "float32") + _COPY4, "copy_float4")
            dst = Tensor.from_shape(self.q, (n,), fill=None)
            n4 = n // 4
            grid = (-(-n4 // 256) * 256,)
            copy = _row(self.rows, "copy_float4", (n,), self.impl,
                        self.time(lambda: launch(self.q, kernel, grid, (256,), a, dst,
                                                 np.int32(n4))), 2 * 4 * n)
        variant = self.selector.select_elementwise_kernel(n).variant
        with count_launches() as launches:
            ops.add(a, b)
        add = _row(self.rows, "add", (n,), self.impl, self.time(lambda: ops.add(a, b)),
                   3 * 4 * n, variant=variant.name, launches=launches[0])
        if copy is not None:
            self.ratios[f"add/copy {n // MI}M"] = add["gbps"] / copy["gbps"]
        _row(self.rows, "add", (n,), "numpy",
             _timed(lambda: np.add(a_host, b_host), lambda: None, self.repeat), 3 * 4 * n)
        if self.torch is not None:
            ta, tb = self.torch.from_numpy(a_host).cuda(), self.torch.from_numpy(b_host).cuda()
            _row(self.rows, "add", (n,), "torch-cuda",
                 self.time_torch(lambda: self.torch.add(ta, tb)), 3 * 4 * n)

    def op(self, name: str, n: int) -> None:
        """``name`` on ``n`` float32 elements (inputs in [0.5, 1.5): every op defined) in each
        kernel form and layout, and NumPy; ``now`` marks what the device runs by default,
        ``former`` what it ran before CPU devices got per-op kernels (the bundle, "vec" above
        1024 elements)."""
        hosts = [self.rng.random(n, dtype=np.float32) + np.float32(0.5) for _ in range(2)]
        reference: dict[str, Callable[..., Any]] = {
            "relu": lambda a: np.maximum(a, np.float32(0)), "exp": np.exp, "neg": np.negative,
            "sqrt": np.sqrt, "add": np.add, "mul": np.multiply, "sub": np.subtract,
            "div": np.divide, "sigmoid": lambda a: 1 / (1 + np.exp(-a)), "tanh": np.tanh,
            "lt": np.less, "maximum": np.maximum}
        if name not in reference:
            raise SystemExit(f"--ops: no NumPy reference for {name!r}; one of {list(reference)}")
        arity = ops.ELEMENTWISE[name].arity
        args = [Tensor.from_host(self.q, h) for h in hosts[:arity]]
        for a in args:
            a.wait()
        want = reference[name](*hosts[:arity]).astype(np.float64)
        nbytes = (arity + 1) * 4 * n
        fn = getattr(ops, name)
        ref = _row(self.rows, name, (n,), "numpy",
                   _timed(lambda: reference[name](*hosts[:arity]), lambda: None, self.repeat),
                   nbytes)
        if self.handle.backend != "cl":
            return
        layouts = {"vec": KernelVariant.ELEMENTWISE_VECTORIZED,
                   "flat": KernelVariant.ELEMENTWISE_SCALAR}
        now_layout = ("vec" if self.selector.select_elementwise_kernel(n).variant
                      is KernelVariant.ELEMENTWISE_VECTORIZED else "flat")
        now = (kernel_form(self.q.device), now_layout)
        former = ("bundle", "vec" if n > 1024 else "flat")
        times = {}
        for form in FORMS:
            for layout, variant in layouts.items():
                with forced_form(form), force_variant(variant):
                    err = float(np.abs(fn(*args).to_host().astype(np.float64) - want).max())
                    tags = [t for t, c in (("now", now), ("former", former))
                            if c == (form, layout)]
                    row = _row(self.rows, name, (n,), f"{self.impl}:{form}:{layout}",
                               self.time(lambda: fn(*args)), nbytes, max_abs_error=err,
                               variant=",".join(tags) or "-")
                times[(form, layout)] = row["median_ms"]
        self.ratios[f"{name} numpy/now ({':'.join(now)})"] = ref["median_ms"] / times[now]
        self.ratios[f"{name} numpy/former ({':'.join(former)})"] = (
            ref["median_ms"] / times[former])
        self.ratios[f"{name} former/now"] = times[former] / times[now]

    def softmax(self, shape: tuple[int, int]) -> None:
        x_host = self.rng.standard_normal(shape, dtype=np.float32)
        x = Tensor.from_host(self.q, x_host)
        variant = self.selector.select_reduction_kernel(shape[1], "max").variant
        nbytes = 2 * 4 * x_host.size

        def np_softmax() -> Any:
            e = np.exp(x_host - x_host.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)

        row = _row(self.rows, "softmax", shape, self.impl, self.time(lambda: ops.softmax(x)),
                   nbytes, variant=variant.name)
        row["max_abs_error"] = float(np.abs(ops.softmax(x).to_host() - np_softmax()).max())
        _row(self.rows, "softmax", shape, "numpy", _timed(np_softmax, lambda: None, self.repeat),
             nbytes)
        if self.torch is not None:
            tx = self.torch.from_numpy(x_host).cuda()
            _row(self.rows, "softmax", shape, "torch-cuda",
                 self.time_torch(lambda: self.torch.softmax(tx, dim=1)), nbytes)

    def sum(self, n: int) -> None:
        s_host = self.rng.random(n, dtype=np.float32)
        s = Tensor.from_host(self.q, s_host)
        variant = self.selector.select_reduction_kernel(n, "sum").variant
        with count_launches() as launches:
            total = float(ops.sum(s).to_host())
        row = _row(self.rows, "sum", (n,), self.impl, self.time(lambda: ops.sum(s)), 4 * n,
                   variant=variant.name, launches=launches[0])
        exact = float(s_host.astype(np.float64).sum())
        row["rel_error"] = abs(total - exact) / exact
        _row(self.rows, "sum", (n,), "numpy", _timed(s_host.sum, lambda: None, self.repeat),
             4 * n)
        if self.torch is not None:
            ts = self.torch.from_numpy(s_host).cuda()
            _row(self.rows, "sum", (n,), "torch-cuda", self.time_torch(ts.sum), 4 * n)


def run(device: str, sizes: list[int], repeat: int, op_names: list[str] | None = None,
        op_size: int = MI) -> dict[str, Any]:
    handle = manager.default(device)
    if handle is None:
        raise SystemExit(f"no device matches {device!r}")
    bench = Bench(handle, repeat)
    if op_names:
        for name in op_names:
            bench.op(name, op_size)
    else:
        for n in sizes:
            bench.add(n)
        bench.softmax((4096, 1024))
        bench.sum(16 * MI)
    meta = {
        "device": f"{handle.platform_name} / {handle.device_name}",
        "backend": handle.backend,
        "host": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch_cuda": None if bench.torch is None else bench.torch.cuda.get_device_name(0),
        "repeat": repeat,
    }
    return {"meta": meta, "rows": bench.rows, "ratios": bench.ratios}


def table(result: dict[str, Any]) -> str:
    lines = [f"device: {result['meta']['device']}",
             f"{'op':<12} {'shape':<14} {'impl':<20} {'median ms':>10} {'GB/s':>8}  notes"]
    for r in result["rows"]:
        shape = "x".join(str(d) for d in r["shape"])
        notes = " ".join(f"{k}={r[k]}" for k in ("variant", "launches") if k in r)
        if "max_abs_error" in r:
            notes += f" max_abs_error={r['max_abs_error']:.1e}"
        if "rel_error" in r:
            notes += f" rel_error={r['rel_error']:.1e}"
        gbps = f"{r['gbps']:8.1f}" if "gbps" in r else " " * 8
        lines.append(f"{r['op']:<12} {shape:<14} {r['impl']:<20} {r['median_ms']:>10.3f} "
                     f"{gbps}  {notes}")
    for name, value in result["ratios"].items():
        lines.append(f"ratio {name}: {value:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto",
                        help="cl, cpu (NumPy), auto, or NETCL_DEVICE syntax (default: auto)")
    parser.add_argument("--sizes", default="16M,64M", help="add sizes, e.g. 16M,64M")
    parser.add_argument("--ops", default="",
                        help="instead of the default rows: these ops (e.g. relu,exp,add), "
                             "bundle kernel vs the device's kernel form vs NumPy")
    parser.add_argument("--ops-size", default="1M", help="elements per --ops op (default 1M)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default="bench_ops_elementwise.json")
    args = parser.parse_args(argv)
    op_names = [o.strip() for o in args.ops.split(",") if o.strip()]
    result = run(args.device, _sizes(args.sizes), args.repeat, op_names,
                 _sizes(args.ops_size)[0])
    print(table(result))
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
