"""Does the KernelSelector pick the fastest variant? Every variant forced, per size class.

For each op family and size class (the classes the selector's rules distinguish), every
variant of the family is forced in turn (``force_variant``: the variant with its default
parameters) and timed, then the selector's own choice (rules, with its device-specific
parameters) is timed the same way. The table gives each time, the fastest forced variant,
the selected one, and ``sel/best`` = selected time / fastest forced time. A class counts as
the selector picking the fastest when the selected variant *is* the fastest forced one (a
ratio away from 1 is then the selector's device parameters or noise, flagged ``same``), or
when ``sel/best`` is at most 1.10 (two variants within 10% are a tie at these timings'
noise).

Timing: after a warm-up call (builds), ``--repeat`` samples, each ``inner`` back-to-back
calls then one ``queue.finish()``; ``inner`` is chosen so one sample lasts about 2 ms, so
small ops are timed at their throughput rather than at one launch-plus-sync latency. The
reported time is the fastest sample divided by ``inner`` (the minimum: other processes on
the machine only ever add time), over ``--rounds`` rounds that each time every variant and
the selection once more, interleaved, so a slow spell of the machine hits them all alike.

The reference printed beside each row is NumPy on the host (the netcl NumPy backend's own
path for that op) in the same run.

``--autotune`` sets the selector's tuning policy for the run (``NETCL_AUTOTUNE``; default: the
environment's, ``auto``: on for GPUs, off on CPU devices). With tuning on, the selection is
made (and its shape class tuned, within ``--budget`` seconds) when the cases are built, so
the timed selection is what users get by default on that device; a row then also names the
tuned config (``tuned``) where its class has a winner. A forced variant always runs with
its default parameters (forcing wins over tuned winners).

    PYTHONPATH=$(ls -d packages/*/src | tr '\\n' ':') python benchmarks/bench_selector.py \\
        --device cl --out bench_selector.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from functools import partial
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
from netcl.core.autotune import autotune_mode, budget_left
from netcl.core.device import DeviceHandle, manager
from netcl.core.kernel_selector import (
    AnyVariant,
    KernelSelector,
    KernelVariant,
    force_variant,
    get_kernel_selector,
)
from netcl.core.selection import family_named, variant_applies
from netcl.core.tensor import Tensor

V = KernelVariant
TIE = 1.10
_FAMILY_VARIANTS: dict[str, list[AnyVariant]] = {
    "elementwise": [V.ELEMENTWISE_SCALAR, V.ELEMENTWISE_VECTORIZED],
    "reduction": [V.REDUCTION_SEQUENTIAL, V.REDUCTION_PARALLEL, V.REDUCTION_WORKGROUP],
    "matmul": [V.MATMUL_NAIVE, V.MATMUL_TILED, V.MATMUL_REGISTER_TILED, V.MATMUL_VECTORIZED],
    "conv2d": [V.CONV2D_NAIVE, V.CONV2D_IM2COL, V.CONV2D_IMPLICIT_GEMM, V.CONV2D_TILED_LOCAL,
               V.CONV2D_WINOGRAD],
}


def throughput(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> float:
    """Seconds per call of ``fn``: the fastest of ``repeat`` batched samples."""
    return float(min(per_call_samples(fn, sync, repeat)))


class Case:
    """One size class: a netcl call, the NumPy reference, and which variants apply."""

    def __init__(self, family: str, name: str, call: Callable[[], Any],
                 reference: Callable[[], Any], variants: list[AnyVariant],
                 selected: AnyVariant, tuned: str | None = None) -> None:
        self.family, self.name, self.call, self.reference = family, name, call, reference
        self.variants, self.selected, self.tuned = variants, selected, tuned


def _tuned(sel: KernelSelector, family: str, *args: Any) -> str | None:
    """The label of the tuned winner of this call's shape class, if there is one."""
    fam = family_named(family)
    won = sel.lookup_class_winner(family, fam.parse(*args))
    return None if won is None else won.label


def _applicable(sel: KernelSelector, family: str, *args: Any) -> list[AnyVariant]:
    """The family's variants that compute this call (its ``applies`` predicates: one
    definition, in the op package's rule module); forcing any other gives way to the rule."""
    fam = family_named(family)
    query = fam.parse(*args)
    return [v for v in _FAMILY_VARIANTS[family] if variant_applies(v, sel.profile, query)]


def _upload(q: Any, a: np.ndarray[Any, Any]) -> Tensor:
    t = Tensor.from_host(q, a)
    t.wait()
    return t


def cases(handle: DeviceHandle, quick: bool) -> list[Case]:
    """The size classes measured on ``handle`` (smaller on CPU devices or with ``quick``)."""
    q = handle.queue
    sel = get_kernel_selector(handle.cl_device)
    rng = np.random.default_rng(0)
    gpu = not quick and sel.profile.device_type == "gpu"
    out: list[Case] = []

    def rand(*shape: int) -> np.ndarray[Any, Any]:
        return rng.standard_normal(shape, dtype=np.float32)

    for n in [100, 4096, 1 << 16, 1 << 20] + ([1 << 24] if gpu else []):
        a, b = rand(n), rand(n)
        ta, tb = _upload(q, a), _upload(q, b)
        out.append(Case("elementwise", f"add n={n}", partial(ops.add, ta, tb),
                        partial(np.add, a, b), _FAMILY_VARIANTS["elementwise"],
                        sel.select_elementwise_kernel(n).variant))

    reductions = [(100,), (10_000,), (1 << 20,), (256, 10), (1024, 1000), (64, 4096)]
    reductions += [(1 << 24,), (4096, 1024)] if gpu else []
    for shape in reductions:
        x = rand(*shape)
        tx = _upload(q, x)
        axis = len(shape) - 1
        out.append(Case("reduction", f"sum {'x'.join(map(str, shape))} axis={axis}",
                        partial(ops.sum, tx, axis=axis),
                        partial(np.sum, x, axis=axis),
                        _FAMILY_VARIANTS["reduction"],
                        sel.select_reduction_kernel(shape[-1], "sum").variant))
    col = rand(512, 64, 16)  # batch-norm-like: reduce dims 0 and 2 of (N, C, HW)
    tcol = _upload(q, col)
    out.append(Case("reduction", "sum 512x64x16 axis=(0,2)",
                    lambda: ops.sum(tcol, axis=(0, 2)), lambda: col.sum(axis=(0, 2)),
                    _FAMILY_VARIANTS["reduction"],
                    sel.select_reduction_kernel(512 * 16, "sum").variant))

    for m in [24, 128, 256, 512] + ([768, 1024, 2048] if gpu else []):
        a, b = rand(m, m), rand(m, m)
        ta, tb = _upload(q, a), _upload(q, b)
        variants = [v for v in _FAMILY_VARIANTS["matmul"]
                    if not (v is V.MATMUL_NAIVE and m > 1024)]
        out.append(Case("matmul", f"{m}x{m}x{m}", partial(ops.matmul, ta, tb),
                        partial(np.matmul, a, b), variants,
                        sel.select_matmul_kernel(m, m, m).variant,
                        _tuned(sel, "matmul", m, m, m)))

    batch = 32 if gpu else 4
    convs = [  # (N, C, H, K, R, stride, padding): the digits CNN, ResNet-18 CIFAR layers
        (64, 1, 8, 16, 3, 1, 1),
        (64, 16, 8, 32, 3, 1, 1),
        (batch, 64, 32, 64, 3, 1, 1),
        (batch, 64, 32, 128, 3, 2, 1),
        (batch, 64, 32, 128, 1, 2, 0),
        (batch, 128, 16, 128, 3, 1, 1),
        (batch, 256, 8, 256, 3, 1, 1),
        (batch, 512, 4, 512, 3, 1, 1),
    ] + ([(batch, 64, 56, 64, 3, 1, 1), (batch, 128, 28, 128, 3, 1, 1),
          (batch, 128, 16, 256, 3, 2, 1), (batch, 256, 8, 512, 3, 2, 1)] if gpu else [])
    for nb, c, h, k, r, s, p in convs:
        x, w = rand(nb, c, h, h), rand(k, c, r, r) * np.float32(0.05)
        tx, tw = _upload(q, x), _upload(q, w)
        variants = _applicable(sel, "conv2d", nb, c, h, h, k, r, r, s, p)
        out.append(Case(
            "conv2d", f"N{nb} {c}-{k} {h}x{h} {r}x{r} s{s}",
            partial(ops.conv2d, tx, tw, stride=s, padding=p),
            lambda: None, variants,
            sel.select_conv2d_kernel(nb, c, h, h, k, r, r, s, p).variant,
            _tuned(sel, "conv2d", nb, c, h, h, k, r, r, s, p)))
    return out


def run(device: str, repeat: int, quick: bool, rounds: int = 3) -> dict[str, Any]:
    handle = manager.default(device)
    if handle is None or handle.backend != "cl":
        raise SystemExit(f"no OpenCL device matches {device!r}")
    q = handle.queue
    rows = []
    for case in cases(handle, quick):
        times: dict[str, float] = {}
        selected = float("inf")
        for _ in range(rounds):
            for v in case.variants:
                with force_variant(v):
                    t = throughput(case.call, q.finish, repeat)
                times[v.name] = min(times.get(v.name, t), t)
            selected = min(selected, throughput(case.call, q.finish, repeat))
        best = min(times, key=times.__getitem__)
        row: dict[str, Any] = {"family": case.family, "case": case.name, "times_ms": {
            k: t * 1e3 for k, t in times.items()}, "selected": case.selected.name,
            "selected_ms": selected * 1e3, "fastest": best,
            "sel_over_best": selected / times[best], "tuned": case.tuned}
        if case.family != "conv2d":
            row["numpy_ms"] = throughput(case.reference, lambda: None, repeat) * 1e3
        row["same_variant"] = best == case.selected.name
        row["ok"] = row["same_variant"] or row["sel_over_best"] <= TIE
        rows.append(row)
        print(_line(row), flush=True)
    meta = {"device": f"{handle.platform_name} / {handle.device_name}",
            "device_type": get_kernel_selector(handle.cl_device).profile.device_type,
            "host": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__, "repeat": repeat, "rounds": rounds, "tie": TIE,
            "autotune": autotune_mode(), "autotune_budget_left_s": budget_left()}
    return {"meta": meta, "rows": rows}


def _line(row: dict[str, Any]) -> str:
    short = {"SCALAR": "scal", "VECTORIZED": "vec", "SEQUENTIAL": "seq", "PARALLEL": "par",
             "WORKGROUP": "wg", "NAIVE": "naive", "TILED": "tiled", "REGISTER_TILED": "rt",
             "IM2COL": "im2col", "IMPLICIT_GEMM": "igemm", "TILED_LOCAL": "tlocal",
             "WINOGRAD": "wino"}

    def name(v: str) -> str:
        return short.get(v.split("_", 1)[1], v)

    times = " ".join(f"{name(k)}={t:.3f}" for k, t in row["times_ms"].items())
    numpy = f" numpy={row['numpy_ms']:.3f}" if "numpy_ms" in row else ""
    numpy += f" tuned {row['tuned']}" if row.get("tuned") else ""
    flag = "SLOWER" if not row["ok"] else "ok" if row["sel_over_best"] <= TIE else "ok (same)"
    return (f"{row['family']:<11} {row['case']:<28} {times} | selected {name(row['selected'])}"
            f" {row['selected_ms']:.3f} ms, fastest {name(row['fastest'])}, sel/best "
            f"{row['sel_over_best']:.2f} {flag}{numpy}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cl")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="CPU-sized cases on any device")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--autotune", choices=("auto", "on", "off"), default=None,
                        help="the selector's tuning policy (NETCL_AUTOTUNE; default: the "
                        "environment's)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds of tuning allowed (NETCL_AUTOTUNE_BUDGET_S)")
    args = parser.parse_args(argv)
    if args.autotune is not None:
        os.environ["NETCL_AUTOTUNE"] = args.autotune
    if args.budget is not None:
        os.environ["NETCL_AUTOTUNE_BUDGET_S"] = str(args.budget)
    result = run(args.device, args.repeat, args.quick, args.rounds)
    rows = result["rows"]
    print(f"device: {result['meta']['device']}; autotune {result['meta']['autotune']}; "
          f"selector picked the fastest variant (or one within {TIE:.2f}x) in "
          f"{sum(r['ok'] for r in rows)} of {len(rows)} size classes")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
