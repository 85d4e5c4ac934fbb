"""Probe and time the tensor-core convolutions (``netcl.ops._conv_mma``) on NVIDIA's OpenCL.

Issue #16: float16 (AMP) convolutions on ``mma.sync``. For every ResNet-18 CIFAR layer at
batch 128 and each direction (forward, data gradient, weight gradient) this script runs
netcl's kernel with its default tiles (``conv2d_mma_config``, the ``default`` row) and with
every candidate tiling, checks each against PyTorch's float16 cuDNN result in the same process
(``err``: max |netcl - torch16| / max |torch32|; ``t16``: torch16's own error against float32,
for scale) and prints the device time (OpenCL profiling events, best of ``REPEAT`` samples of
``INNER`` calls) beside torch float16's (CUDA events), then a ResNet-18 step total (each layer
times its count: default tiles, best tiles per layer, torch). Build logs are printed in full
on a failure. Each layer runs in a child process, so a crash (an illegal address) costs one
layer, not the run. Then the TF32 GEMM (``set_float32_matmul_precision("high")``) at 2048^3
and 4096^3 beside netcl's float32 GEMM and torch float32/TF32, and finally
``pytest packages/netcl-ops/tests/test_conv_mma.py test_precision.py`` on the GPU
(``--no-tests`` skips it).

Run from the repository root:  bash scripts/gpu/gpu_run.sh benchmarks/probe_conv_mma.py
(or ``python3 benchmarks/probe_conv_mma.py`` where pyopencl sees an NVIDIA GPU and the netcl
packages are importable).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("NETCL_PROFILE_EVENTS", "1")  # before the device is first used

import numpy as np

try:
    import netcl.ops  # noqa: F401
except ImportError:  # a checkout without the packages installed
    root = Path(__file__).resolve().parents[1] / "packages"
    sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

from netcl.core.device import manager
from netcl.core.tensor import Tensor
from netcl.ops import matmul, set_float32_matmul_precision
from netcl.ops._conv_geometry import ConvGeometry, conv_geometry
from netcl.ops._conv_mma import (
    ConvMmaConfig,
    conv2d_mma,
    conv2d_mma_config,
    conv_dims,
    weight_split,
)
from netcl.ops._matmul_mma import mma_verdict
from netcl.ops._matmul_mma_tf32 import Tf32Config, matmul_tf32
from netcl.runtime import profile

ROOT = Path(__file__).resolve().parents[1]
# PROBE_CONV_DRY=1: any OpenCL device, PTX emulated, tiny batch, torch on the CPU (checks this
# script's flow; slow).
DRY = bool(os.environ.get("PROBE_CONV_DRY"))
REPEAT, INNER = (1, 1) if DRY else (5, 5)
DIRECTIONS = ("forward", "data", "weight")
FULL = Path(os.environ.get("OUT", "/tmp/out")) / "probe_conv_mma_full.txt"

# (name, c, k, size, r, stride, count in ResNet-18 CIFAR)
LAYERS = [
    ("conv1 3-64 3x3 32", 3, 64, 32, 3, 1, 1),
    ("64-64 3x3 32", 64, 64, 32, 3, 1, 4),
    ("64-128 3x3 s2 32", 64, 128, 32, 3, 2, 1),
    ("64-128 1x1 s2 32", 64, 128, 32, 1, 2, 1),
    ("128-128 3x3 16", 128, 128, 16, 3, 1, 3),
    ("128-256 3x3 s2 16", 128, 256, 16, 3, 2, 1),
    ("128-256 1x1 s2 16", 128, 256, 16, 1, 2, 1),
    ("256-256 3x3 8", 256, 256, 8, 3, 1, 3),
    ("256-512 3x3 s2 8", 256, 512, 8, 3, 2, 1),
    ("256-512 1x1 s2 8", 256, 512, 8, 1, 2, 1),
    ("512-512 3x3 4", 512, 512, 4, 3, 1, 3),
]

CANDIDATES = [
    ConvMmaConfig(bm=128, bn=128, warps_m=2, warps_n=2),
    ConvMmaConfig(bm=128, bn=128, warps_m=2, warps_n=4),
    ConvMmaConfig(bm=64, bn=128, warps_m=2, warps_n=2),
    ConvMmaConfig(bm=64, bn=64, warps_m=2, warps_n=2),
    ConvMmaConfig(bm=64, bn=128, bk=64, warps_m=2, warps_n=2),
]
if DRY:
    CANDIDATES = [ConvMmaConfig(bm=32, bn=32, warps_m=1, warps_n=2, emulate=True)]
# --quick (set for the children through the environment): the GPU tests first, then the
# default tiles and one more tiling on four layers, the TF32 GEMM at 2048^3 only.
QUICK = bool(os.environ.get("PROBE_CONV_QUICK"))
QUICK_LAYERS = (1, 4, 7, 8)
if QUICK and not DRY:
    CANDIDATES = [ConvMmaConfig(bm=64, bn=128, warps_m=2, warps_n=4)]


def geometry(layer: tuple[Any, ...], batch: int) -> ConvGeometry:
    _, c, k, size, r, stride, _ = layer
    return conv_geometry("probe", (batch, c, size, size), (k, c, r, r), stride, r // 2)


def torch_module() -> Any:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return torch


def torch_call(t: Any, g: ConvGeometry, x: Any, w: Any, gy: Any, direction: str) -> Any:
    if direction == "forward":
        return t.nn.functional.conv2d(x, w, None, g.stride, g.padding)
    mask = [direction == "data", direction == "weight", False]
    grads = t.ops.aten.convolution_backward(gy, x, w, None, list(g.stride), list(g.padding),
                                            list(g.dilation), False, [0, 0], 1, mask)
    return grads[0] if direction == "data" else grads[1]


def torch_time(t: Any, fn: Any) -> float:
    fn()
    if not t.cuda.is_available():
        start = time.perf_counter()
        fn()
        return (time.perf_counter() - start) * 1e3
    t.cuda.synchronize()
    best = float("inf")
    for _ in range(REPEAT):
        begin, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(INNER):
            fn()
        end.record()
        end.synchronize()
        best = min(best, begin.elapsed_time(end) / INNER)
    return best


def netcl_time(fn: Any) -> float:
    """Best device ms per call (every kernel the call launches)."""
    fn()
    best = float("inf")
    for _ in range(REPEAT):
        with profile() as prof:
            for _ in range(INNER):
                fn()
        total_us = sum(s.device_us or 0.0 for s in prof.summary())
        best = min(best, total_us / 1e3 / INNER)
    return best


def run_layer(index: int, batch: int) -> list[dict[str, Any]]:
    """Every row of one layer (in a child process)."""
    t = torch_module()
    layer = LAYERS[index]
    g = geometry(layer, batch)
    handle = manager.default("cl")
    q = handle.queue
    units = int(q.device.max_compute_units)
    rng = np.random.default_rng(index)
    x = rng.standard_normal((g.n, g.c, g.h, g.w)).astype(np.float16)
    w = (rng.standard_normal((g.k, g.c, g.r, g.s)) / np.sqrt(g.crs)).astype(np.float16)
    gy = rng.standard_normal((g.n, g.k, g.oh, g.ow)).astype(np.float16)
    where = "cuda" if t.cuda.is_available() else "cpu"
    cx, cw, cg = (t.from_numpy(a).to(where) for a in (x, w, gy))
    tx, tw, tg = (Tensor.from_host(q, a, dtype="float16") for a in (x, w, gy))
    shapes = {"forward": (g.n, g.k, g.oh, g.ow), "data": (g.n, g.c, g.h, g.w),
              "weight": (g.k, g.c, g.r, g.s)}
    operands = {"forward": (tx, tw), "data": (tg, tw), "weight": (tx, tg)}
    rows: list[dict[str, Any]] = []
    for direction in DIRECTIONS:
        ref32 = torch_call(t, g, cx.float(), cw.float(), cg.float(), direction).double()
        ref16 = torch_call(t, g, cx, cw, cg, direction) if not DRY else ref32.half()
        scale = float(ref32.abs().max())
        t16_err = float((ref16.double() - ref32).abs().max()) / scale
        torch_ms = torch_time(t, lambda d=direction: torch_call(t, g, cx, cw, cg, d))
        default = conv2d_mma_config(direction, conv_dims(g), units)
        default = CANDIDATES[0] if DRY else default
        configs = [("default", default)] + [(c.label(), c) for c in CANDIDATES]
        for name, config in configs:
            row: dict[str, Any] = {"layer": layer[0], "count": layer[6], "dir": direction,
                                   "config": name, "tiles": config.label(),
                                   "torch_ms": torch_ms, "t16_err": t16_err}
            if direction == "weight":
                row["splits"] = weight_split(conv_dims(g), config, units)
            try:
                config.check(direction)
            except ValueError as exc:
                row["skip"] = str(exc)
                rows.append(row)
                continue
            out = Tensor.from_shape(q, shapes[direction], "float16", fill=None)
            a, b = operands[direction]

            def call(a: Tensor = a, b: Tensor = b, out: Tensor = out, d: str = direction,
                     config: ConvMmaConfig = config) -> None:
                conv2d_mma(d, a, b, g, out, config=config)

            try:
                call()
                got = out.to_host().astype(np.float64)
                want = ref32.cpu().numpy()
                row["err"] = float(np.abs(got - want).max()) / scale
                row["err16"] = float(np.abs(got - ref16.double().cpu().numpy()).max()) / scale
                row["ms"] = netcl_time(call)
            except Exception as exc:  # a build failure: print everything
                row["error"] = "".join(traceback.format_exception(exc))[-6000:]
            rows.append(row)
    return rows


def tf32_section() -> None:
    """TF32 GEMM (set_float32_matmul_precision("high")): error against float64 and TFLOP/s
    beside netcl's float32 GEMM and torch float32 / TF32 (in a child process)."""
    t = torch_module()
    q = manager.default("cl").queue
    rng = np.random.default_rng(5)
    configs = [Tf32Config()] if QUICK else [
               Tf32Config(), Tf32Config(bm=128, bn=128, bk=32, warps_m=2, warps_n=4),
               Tf32Config(bm=64, bn=64, warps_m=2, warps_n=2),
               Tf32Config(bm=128, bn=64, bk=32, warps_m=2, warps_n=2)]
    for size in (2048,) if QUICK else (2048, 4096):
        a = rng.standard_normal((size, size), dtype=np.float32)
        b = rng.standard_normal((size, size), dtype=np.float32)
        xa, xb = Tensor.from_host(q, a), Tensor.from_host(q, b)
        flop = 2.0 * size**3
        want = a.astype(np.float64) @ b.astype(np.float64) if size == 2048 else None
        lines = []
        for name, fn in [("netcl float32 (highest)", lambda xa=xa, xb=xb: matmul(xa, xb))] + [
                (f"netcl tf32 {c.label()}",
                 lambda c=c, xa=xa, xb=xb: matmul_tf32(xa, xb, config=c)) for c in configs]:
            try:
                got = fn().to_host()
                err = ("" if want is None else
                       f" err {float(np.abs(got - want).max() / np.abs(want).max()):.2e}")
                ms = netcl_time(fn)
                lines.append(f"  {name:<34} {flop / ms / 1e9:8.1f} TFLOP/s{err}")
            except Exception as exc:
                lines.append(f"  {name}: FAILED\n" + "".join(
                    traceback.format_exception(exc))[-4000:])
        set_float32_matmul_precision("high")
        try:
            got = matmul(xa, xb).to_host()
            if want is not None:
                err = float(np.abs(got - want).max() / np.abs(want).max())
                lines.append(f"  matmul under 'high' err {err:.2e}")
        finally:
            set_float32_matmul_precision("highest")
        ca, cb = t.from_numpy(a).cuda(), t.from_numpy(b).cuda()
        for tf32 in (False, True):
            t.backends.cuda.matmul.allow_tf32 = tf32
            ms = torch_time(t, lambda ca=ca, cb=cb: ca @ cb)
            lines.append(f"  torch {'tf32' if tf32 else 'float32':<28} "
                         f"{flop / ms / 1e9:8.1f} TFLOP/s")
        t.backends.cuda.matmul.allow_tf32 = False
        print(f"TF32 GEMM {size}^3:\n" + "\n".join(lines), flush=True)


def fmt(row: dict[str, Any]) -> str:
    head = f"{row['layer']:<20} {row['dir']:<8} {row['config']:<22} "
    if "skip" in row:
        return head + f"skip: {row['skip']}"
    if "error" in row:
        return head + "FAILED\n" + row["error"]
    ratio = row["torch_ms"] / row["ms"] if row["ms"] else 0.0
    mark = " !" if row["err"] > 5 * max(row["t16_err"], 1e-3) else ""
    split = f" splits {row['splits']}" if "splits" in row else ""
    return (head + f"{row['tiles']:<18} {row['ms']:8.3f} ms  torch16 {row['torch_ms']:8.3f} ms"
            f"  x{ratio:5.2f}  err {row['err']:.2e} (vs torch16 {row['err16']:.2e}, torch16 "
            f"{row['t16_err']:.2e}){mark}{split}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1 if DRY else 128)
    parser.add_argument("--layer", type=int, default=None, help="(internal) one layer, JSON out")
    parser.add_argument("--no-tests", action="store_true")
    parser.add_argument("--json", default=os.path.join(os.environ.get("OUT", "/tmp/out"),
                                                       "probe_conv_mma.json"))
    parser.add_argument("--tf32", action="store_true", help="(internal) the TF32 section")
    parser.add_argument("--quick", action="store_true",
                        help="GPU tests first, four layers, default tiles plus one tiling")
    args = parser.parse_args(argv)
    if args.quick:
        os.environ["PROBE_CONV_QUICK"] = "1"
        run_tests(quick=True)
        args.no_tests = True
    if args.tf32:
        tf32_section()
        return 0
    if args.layer is not None:
        rows = run_layer(args.layer, args.batch)
        print("ROWS " + json.dumps(rows))
        return 0
    FULL.parent.mkdir(parents=True, exist_ok=True)
    FULL.write_text("")
    handle = manager.default("cl")
    print(f"every row of every tiling: {FULL}")
    print(f"device: {handle.device_name} ({handle.platform_name}); mma verdict "
          f"{mma_verdict(handle.queue)}", flush=True)
    all_rows: list[dict[str, Any]] = []
    for i, layer in enumerate(LAYERS):
        if (DRY and i not in (0, 3)) or (args.quick and i not in QUICK_LAYERS):
            continue
        proc = subprocess.run([sys.executable, __file__, "--layer", str(i), "--batch",
                               str(args.batch)], capture_output=True, text=True, timeout=600)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("ROWS ")]
        if proc.returncode or not lines:
            print(f"{layer[0]}: child failed (rc {proc.returncode})\n{proc.stdout[-3000:]}\n"
                  f"{proc.stderr[-6000:]}", flush=True)
            continue
        rows = json.loads(lines[-1][5:])
        all_rows.extend(rows)
        with FULL.open("a") as full:
            full.write("\n".join(fmt(row) for row in rows) + "\n")
        for direction in DIRECTIONS:  # stdout: the default row, the best, any failure
            mine = [r for r in rows if r["dir"] == direction]
            timed = [r for r in mine if "ms" in r]
            shown = [r for r in mine if r["config"] == "default"]
            if timed:
                best = min(timed, key=lambda r: r["ms"])
                shown += [dict(best, config="best " + best["tiles"])]
            shown += [r for r in mine if "error" in r and r["config"] != "default"][:1]
            for row in shown:
                print(fmt(row), flush=True)
    totals = {"default": 0.0, "best": 0.0, "torch": 0.0}
    for layer in LAYERS:
        for direction in DIRECTIONS:
            mine = [r for r in all_rows if r["layer"] == layer[0] and r["dir"] == direction
                    and "ms" in r]
            if not mine:
                continue
            count = layer[6]
            totals["torch"] += count * mine[0]["torch_ms"]
            totals["default"] += count * next((r["ms"] for r in mine
                                               if r["config"] == "default"), float("nan"))
            totals["best"] += count * min(r["ms"] for r in mine)
    print(f"ResNet-18 CIFAR step convolutions (batch {args.batch}): default tiles "
          f"{totals['default']:.2f} ms, best tiles {totals['best']:.2f} ms, torch float16 "
          f"{totals['torch']:.2f} ms (torch/default "
          f"{totals['torch'] / max(totals['default'], 1e-9):.2f}x)",
          flush=True)
    best: dict[str, dict[str, str]] = {}
    for r in all_rows:
        if "ms" in r and r["config"] != "default":
            key = f"{r['layer']}|{r['dir']}"
            if key not in best or r["ms"] < float(best[key]["ms"]):
                best[key] = {"tiles": r["tiles"], "ms": str(r["ms"])}
    print("best tiles per layer and direction: " + json.dumps(
        {k: v["tiles"] for k, v in best.items()}), flush=True)
    if not DRY:
        proc = subprocess.run([sys.executable, __file__, "--tf32"], capture_output=True,
                              text=True, timeout=300)
        print(proc.stdout[-5000:] + ("" if proc.returncode == 0 else proc.stderr[-5000:]),
              flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"rows": all_rows, "totals": totals}, indent=1))
    if not args.no_tests:
        run_tests(quick=False)
    return 0


def run_tests(quick: bool) -> None:
    """pytest of the tensor-core conv and precision tests on the GPU (``quick``: the GPU-only
    ones, no emulated kernels)."""
    env = {**os.environ, "NETCL_DEVICE": "cl"}
    select = ["-k", "tensor_cores or routing or exact"] if quick else []
    print("== pytest test_conv_mma.py test_precision.py on the GPU", flush=True)
    try:
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-rs", *select, "packages/netcl-ops/tests/test_conv_mma.py",
                               "packages/netcl-ops/tests/test_precision.py"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=100 if quick else 900)
        print(proc.stdout[-6000:] + proc.stderr[-3000:], flush=True)
    except subprocess.TimeoutExpired as exc:
        print(f"pytest timed out: {str(exc.stdout)[-3000:]}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
