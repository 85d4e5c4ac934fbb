"""SGEMM and ResNet-18 convolutions per kernel variant, beside NumPy and PyTorch in the same run.

Rows, all in one process on one device:

- ``sgemm`` M x N x K float32 for each ``--sizes`` entry: every ``MATMUL_*`` variant forced
  (with its default tiles), register-tiled tile configurations worth comparing on GPUs, and
  the selector's own choice (``selected``); the same product through NumPy (BLAS on the host
  CPU) and through ``torch.mm`` on CUDA when PyTorch sees a GPU (TF32 off: strict FP32);
- ``conv2d`` on ResNet-18's layer shapes (batch 32; 32x32 CIFAR and 56x56 ImageNet inputs):
  every ``CONV2D_*`` variant forced and ``selected``; netcl's NumPy path (im2col + BLAS) and
  ``torch.nn.functional.conv2d`` on CUDA (cuDNN, TF32 off) as references.

GFLOP/s counts 2 flops per multiply-add of the direct algorithm (also for Winograd). Each
netcl row checks its result against the NumPy reference (``err``: max abs difference over max
abs value). Timings are wall-clock around the call plus ``queue.finish()`` after one warm-up
call (kernel builds); the table shows the best of ``--repeat`` runs and GFLOP/s and ratios come
from it (other work on the machine only ever adds time: a median of 5 let two throttled runs
of a 4096^3 SGEMM on the H100 move it by 20%); the JSON keeps the median and every run.
Ratio columns divide netcl's GFLOP/s by NumPy's and PyTorch's for the same shape. On GPUs the
SGEMM rows also time ``PIPELINE_CALLS`` back-to-back calls and one sync (``pipe ms`` per call,
best of ``--repeat``; the second ``x torch`` is PyTorch's pipe ms over netcl's): the host's
per-call overhead then overlaps the device's work, as it does in a training step, while a
single call also pays the driver's wait for completion (NVIDIA's OpenCL: 0.1-0.4 ms more than
the kernel's own time on the H100).

    PYTHONPATH=$(ls -d packages/*/src | tr '\\n' ':') python benchmarks/bench_ops_linalg.py \\
        --device cl --out linalg.json            # the full run (GPU: well under 5 minutes)
    ... --quick                                  # smaller sizes and batch (PoCL, a laptop)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

try:
    import netcl.ops  # noqa: F401
except ImportError:  # running from a checkout without the packages installed
    root = Path(__file__).resolve().parents[1] / "packages"
    sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

from netcl.core.device import manager
from netcl.core.kernel_selector import (
    KernelConfig,
    KernelVariant,
    default_config,
    force_variant,
    get_kernel_selector,
)
from netcl.core.tensor import Tensor
from netcl.ops import build_matmul_kernel, matmul
from netcl.ops._conv import conv2d

V = KernelVariant
MATMUL_VARIANTS = [V.MATMUL_NAIVE, V.MATMUL_TILED, V.MATMUL_REGISTER_TILED, V.MATMUL_VECTORIZED]
CONV_VARIANTS = [V.CONV2D_NAIVE, V.CONV2D_IM2COL, V.CONV2D_IMPLICIT_GEMM, V.CONV2D_TILED_LOCAL,
                 V.CONV2D_WINOGRAD]

# Register-tiled configurations to compare on GPUs: (tile_m, tile_n, tile_k, rows x columns
# per work-item, warp_n); more of them, per layout, in benchmarks/tune_gemm.py.
GPU_TILES = [(64, 64, 16, 4, 4, 0), (128, 128, 8, 8, 8, 8), (128, 128, 16, 8, 8, 8),
             (128, 64, 16, 8, 4, 8)]

# ResNet-18 convolutions: (name, C, K, H=W, kernel, stride, padding)
RESNET_LAYERS = [
    ("c32 conv 64-64 3x3", 64, 64, 32, 3, 1, 1),
    ("c32 conv 64-128 3x3 s2", 64, 128, 32, 3, 2, 1),
    ("c32 down 64-128 1x1 s2", 64, 128, 32, 1, 2, 0),
    ("c32 conv 128-128 3x3", 128, 128, 16, 3, 1, 1),
    ("c32 conv 256-256 3x3", 256, 256, 8, 3, 1, 1),
    ("c32 conv 512-512 3x3", 512, 512, 4, 3, 1, 1),
    ("i56 conv 64-64 3x3", 64, 64, 56, 3, 1, 1),
    ("i56 conv 64-128 3x3 s2", 64, 128, 56, 3, 2, 1),
    ("i56 down 64-128 1x1 s2", 64, 128, 56, 1, 2, 0),
    ("i56 conv 128-128 3x3", 128, 128, 28, 3, 1, 1),
    ("i56 conv 256-256 3x3", 256, 256, 14, 3, 1, 1),
    ("i56 conv 512-512 3x3", 512, 512, 7, 3, 1, 1),
]
QUICK_LAYERS = [0, 1, 2, 6, 9]
PIPELINE_CALLS = 10


def _timed(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> list[float]:
    fn()
    sync()  # warm-up: kernel builds, pool buckets
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return times


def _pipelined(fn: Callable[[], Any], sync: Callable[[], None], repeat: int,
               calls: int = PIPELINE_CALLS) -> list[float]:
    """Seconds per call of ``calls`` back-to-back calls and one sync (the host's overhead
    overlaps the device's work, as in a training step), one figure per round."""
    fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        times.append((time.perf_counter() - start) / calls)
    return times


def _torch_cuda() -> Any:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return torch


def _error(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> float:
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))


class Bench:
    """Rows for one device: netcl variants, NumPy on the host, PyTorch on CUDA if present."""

    def __init__(self, handle: Any, repeat: int, quick: bool) -> None:
        self.handle = handle
        self.q = handle.queue
        self.cl = handle.backend == "cl"
        self.repeat = repeat
        self.quick = quick
        self.torch = _torch_cuda()
        self.rows: list[dict[str, Any]] = []
        self.rng = np.random.default_rng(0)
        self.selector = get_kernel_selector(handle.cl_device)
        self.gpu = self.selector.profile.device_type == "gpu"

    def _row(self, op: str, shape: str, impl: str, times: list[float], flops: int,
             **extra: Any) -> dict[str, Any]:
        med = statistics.median(times)
        row = {"op": op, "shape": shape, "impl": impl, "median_ms": med * 1e3,
               "best_ms": min(times) * 1e3, "runs_ms": [t * 1e3 for t in times],
               "gflops": flops / min(times) / 1e9, **extra}
        self.rows.append(row)
        return row

    def _ratios(self, op: str, shape: str) -> None:
        rows = [r for r in self.rows if r["op"] == op and r["shape"] == shape and "gflops" in r]
        refs = {r["impl"]: r["gflops"] for r in rows if r["impl"] in ("numpy", "torch-cuda")}
        torch_pipe = next((r["pipe_ms"] for r in rows
                           if r["impl"] == "torch-cuda" and "pipe_ms" in r), None)
        for r in rows:
            if r["impl"] not in refs:
                r["x_numpy"] = r["gflops"] / refs["numpy"] if "numpy" in refs else None
                r["x_torch"] = r["gflops"] / refs["torch-cuda"] if "torch-cuda" in refs else None
                if torch_pipe and "pipe_ms" in r:
                    r["x_torch_pipe"] = torch_pipe / r["pipe_ms"]

    def time(self, fn: Callable[[], Any]) -> list[float]:
        return _timed(fn, self.q.finish, self.repeat)

    def _measure(self, op: str, shape: str, impl: str, call: Callable[[], Tensor], flops: int,
                 want: np.ndarray[Any, Any], pipe: bool = False, **extra: Any) -> None:
        """Check one netcl candidate against ``want``, then time it; a failure is a row too."""
        try:
            err = _error(call().to_host(), want)
            row = self._row(op, shape, impl, self.time(call), flops, err=err, **extra)
            if pipe:
                row["pipe_ms"] = min(_pipelined(call, self.q.finish, self.repeat)) * 1e3
        except Exception as exc:  # a kernel that fails to build or run on this device
            self.rows.append({"op": op, "shape": shape, "impl": impl, "error": repr(exc)[:300],
                              **extra})

    # -- SGEMM --

    def sgemm(self, size: tuple[int, int, int]) -> None:
        m, n, k = size
        shape = f"{m}x{n}x{k}"
        flops = 2 * m * n * k
        a_host = self.rng.standard_normal((m, k), dtype=np.float32)
        b_host = self.rng.standard_normal((k, n), dtype=np.float32)
        want = a_host @ b_host
        self._row("sgemm", shape, "numpy", _timed(lambda: a_host @ b_host, lambda: None,
                                                  self.repeat), flops)
        if self.torch is not None:
            ta, tb = self.torch.from_numpy(a_host).cuda(), self.torch.from_numpy(b_host).cuda()
            row = self._row("sgemm", shape, "torch-cuda",
                            _timed(lambda: self.torch.mm(ta, tb), self.torch.cuda.synchronize,
                                   self.repeat), flops)
            row["pipe_ms"] = min(_pipelined(lambda: self.torch.mm(ta, tb),
                                            self.torch.cuda.synchronize, self.repeat)) * 1e3
        if self.cl:
            a, b = Tensor.from_host(self.q, a_host), Tensor.from_host(self.q, b_host)
            for impl, call, config in self._gemm_candidates(size, a, b):
                self._measure("sgemm", shape, impl, call, flops, want, pipe=self.gpu,
                              config=config)
        self._ratios("sgemm", shape)

    def _gemm_candidates(self, size: tuple[int, int, int], a: Tensor,
                         b: Tensor) -> list[tuple[str, Callable[[], Tensor], str]]:
        out: list[tuple[str, Callable[[], Tensor], str]] = []
        slow = 512 if self.gpu is False else 2048  # the naive kernel only where it is quick
        for v in MATMUL_VARIANTS:
            if v is V.MATMUL_NAIVE and max(size) > slow:
                continue
            if v is V.MATMUL_TILED and self.gpu and max(size) > 4096:
                continue  # seconds per call
            with force_variant(v):
                forced = self.selector.select_matmul_kernel(*size)
            out.append((v.name, _forced(v, lambda: matmul(a, b)), _describe(forced)))
        if self.gpu:
            for tm, tn, tk, wm, wn, warp in GPU_TILES:
                cfg = dataclasses.replace(default_config(V.MATMUL_REGISTER_TILED), tile_m=tm,
                                          tile_n=tn, tile_k=tk, work_per_thread=wm,
                                          extra={"micro_n": wn, "warp_n": warp})
                kernel = build_matmul_kernel(self.q, cfg)
                out.append((f"RT {tm}x{tn}x{tk}/{wm}x{wn} w{warp}", _bound(kernel, a, b),
                            _describe(cfg)))
        chosen = self.selector.select_matmul_kernel(*size)
        out.append((f"selected={chosen.variant.name}", lambda: matmul(a, b), _describe(chosen)))
        return out

    # -- conv2d --

    def conv(self, layer: tuple[str, int, int, int, int, int, int], batch: int) -> None:
        name, c, k, hw, ksize, stride, pad = layer
        x_host = self.rng.standard_normal((batch, c, hw, hw), dtype=np.float32)
        w_host = (self.rng.standard_normal((k, c, ksize, ksize), dtype=np.float32)
                  / np.sqrt(c * ksize * ksize)).astype(np.float32)
        oh = (hw + 2 * pad - ksize) // stride + 1
        flops = 2 * batch * k * oh * oh * c * ksize * ksize
        shape = f"{name} N{batch}"
        cpu = manager.default("cpu")
        assert cpu is not None
        xc, wc = Tensor.from_host(cpu.queue, x_host), Tensor.from_host(cpu.queue, w_host)
        want = conv2d(xc, wc, stride=stride, padding=pad).to_host()
        self._row("conv2d", shape, "numpy", _timed(
            lambda: conv2d(xc, wc, stride=stride, padding=pad), lambda: None, self.repeat), flops)
        if self.torch is not None:
            F = self.torch.nn.functional
            tx, tw = self.torch.from_numpy(x_host).cuda(), self.torch.from_numpy(w_host).cuda()
            self._row("conv2d", shape, "torch-cuda", _timed(
                lambda: F.conv2d(tx, tw, stride=stride, padding=pad),
                self.torch.cuda.synchronize, self.repeat), flops)
        if self.cl:
            x, w = Tensor.from_host(self.q, x_host), Tensor.from_host(self.q, w_host)

            def run() -> Tensor:
                return conv2d(x, w, stride=stride, padding=pad)

            variants: list[Any] = [*CONV_VARIANTS, None]
            for v in variants:
                if v is V.CONV2D_NAIVE and not self.gpu and self.quick and hw > 32:
                    continue  # minutes on a CPU device
                if v is V.CONV2D_WINOGRAD and (ksize, stride) != (3, 1):
                    continue  # not applicable (forcing it runs the implicit GEMM)
                if v is None:
                    cfg = self.selector.select_conv2d_kernel(batch, c, hw, hw, k, ksize, ksize,
                                                             stride, pad)
                    impl = f"selected={cfg.variant.name}"
                    call = run
                else:
                    impl, call = v.name, _forced(v, run)
                self._measure("conv2d", shape, impl, call, flops, want)
        self._ratios("conv2d", shape)


def _forced(variant: KernelVariant, fn: Callable[[], Tensor]) -> Callable[[], Tensor]:
    def call() -> Tensor:
        with force_variant(variant):
            return fn()
    return call


def _bound(kernel: Any, a: Tensor, b: Tensor) -> Callable[[], Tensor]:
    return lambda: kernel(a, b)


def _describe(cfg: KernelConfig) -> str:
    extra = "".join(f" {k}={cfg.extra[k]}" for k in ("micro_n", "warp_n", "split_k")
                    if cfg.extra.get(k))
    return (f"{cfg.tile_m}x{cfg.tile_n}x{cfg.tile_k} wpt={cfg.work_per_thread} "
            f"local={cfg.local_size_2d[0]}x{cfg.local_size_2d[1]} vw={cfg.vector_width}{extra}")


def run(device: str, sizes: list[tuple[int, int, int]], repeat: int, quick: bool, batch: int,
        layers: list[int]) -> dict[str, Any]:
    handle = manager.default(device)
    if handle is None:
        raise SystemExit(f"no device matches {device!r}")
    bench = Bench(handle, repeat, quick)
    for size in sizes:
        bench.sgemm(size)
    for i in layers:
        bench.conv(RESNET_LAYERS[i], batch)
    meta = {
        "device": f"{handle.platform_name} / {handle.device_name}",
        "backend": handle.backend,
        "host": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch_cuda": None if bench.torch is None else bench.torch.cuda.get_device_name(0),
        "repeat": repeat,
        "quick": quick,
        "batch": batch,
    }
    return {"meta": meta, "rows": bench.rows}


def table(result: dict[str, Any]) -> str:
    lines = [f"device: {result['meta']['device']}  (torch: {result['meta']['torch_cuda']})",
             f"{'op':<7} {'shape':<30} {'impl':<36} {'best ms':>9} {'GFLOP/s':>9} {'x numpy':>8} "
             f"{'x torch':>8} {'err':>8} {'pipe ms':>9} {'x torch':>8}"]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"{r['op']:<7} {r['shape']:<30} {r['impl'][:36]:<36} FAILED {r['error']}")
            continue
        ratios = " ".join(f"{r[k]:8.2f}" if isinstance(r.get(k), float) else " " * 8
                          for k in ("x_numpy", "x_torch"))
        err = f"{r['err']:8.1e}" if "err" in r else " " * 8
        pipe = f" {r['pipe_ms']:>9.3f}" if "pipe_ms" in r else ""
        if isinstance(r.get("x_torch_pipe"), float):
            pipe += f" {r['x_torch_pipe']:8.2f}"
        lines.append(f"{r['op']:<7} {r['shape']:<30} {r['impl'][:36]:<36} {r['best_ms']:>9.3f} "
                     f"{r['gflops']:>9.1f} {ratios} {err}{pipe}")
    return "\n".join(lines)


DEFAULT_SIZES = "512,1024,2048,4096,8192,1000,4095,128x4096x4096,4096x128x4096"


def _size(text: str) -> tuple[int, int, int]:
    """``"N"`` -> ``(N, N, N)``; ``"MxNxK"`` -> ``(M, N, K)``."""
    dims = [int(d) for d in text.lower().split("x")]
    if len(dims) == 1:
        return dims[0], dims[0], dims[0]
    if len(dims) != 3:
        raise SystemExit(f"--sizes: {text!r} is neither N nor MxNxK")
    return dims[0], dims[1], dims[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", default="auto",
                        help="cl, cpu (NumPy only), auto, or NETCL_DEVICE syntax (default: auto)")
    parser.add_argument("--sizes", default=None,
                        help="SGEMM sizes: N for N x N x N or MxNxK, e.g. 1024,128x4096x4096 "
                             "(default " + DEFAULT_SIZES + "; --quick: 256,512,1024)")
    parser.add_argument("--batch", type=int, default=None,
                        help="conv2d batch (default 32; --quick: 8)")
    parser.add_argument("--layers", default=None,
                        help="indices into the ResNet-18 layer list (default: all; --quick: "
                             + ",".join(map(str, QUICK_LAYERS)) + ")")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs (default 5/3)")
    parser.add_argument("--quick", action="store_true", help="small sizes, batch 8, 5 layers")
    parser.add_argument("--out", default="bench_ops_linalg.json")
    args = parser.parse_args(argv)
    sizes = [_size(s) for s in (args.sizes or ("256,512,1024" if args.quick
                                                else DEFAULT_SIZES)).split(",")]
    layers = ([int(s) for s in args.layers.split(",")] if args.layers
              else QUICK_LAYERS if args.quick else list(range(len(RESNET_LAYERS))))
    batch = args.batch or (8 if args.quick else 32)
    repeat = args.repeat or (3 if args.quick else 5)
    result = run(args.device, sizes, repeat, args.quick, batch, layers)
    print(table(result))
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
