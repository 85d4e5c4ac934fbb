"""Memory-bound ops (issue #16) beside PyTorch and the device's copy bandwidth, in one run.

Rows: sum / mean over all, the last and the first axis, max; softmax and log_softmax (as
``ops`` runs them, the pre-softmax_mrow plan ``old``, and each row kernel of
``--softmax-kernels`` with its default plan: ``row`` softmax_row, ``mrow`` softmax_mrow,
``warp`` softmax_warp, ``warp-emu`` softmax_warp with emulated shuffles, ``warp-r<N>`` with
at most N registers a lane, or a path of ``ROW_PATHS`` such as ``rows1``; float32 and float16
shapes; on NVIDIA, softmax_warp's registers from ptxas first; the ``plans`` group sweeps
every softmax kernel's lanes and rows per work-group); cross-entropy
(``old``: log_softmax + NLL gather + mean; fused: xent_row in one launch, ``2 launches``:
xent_row + xent_sum, ``+logp`` also writing the log-probabilities); batch norm forward
(training, eval) and backward on ResNet shapes; max pooling 3x3 s2 and 2x2 s2; global
average pooling; an elementwise chain (add then relu); and a device-to-device copy of 64 MiB
(``clEnqueueCopyBuffer``, ``Tensor.copy_`` for PyTorch) as the bandwidth reference.

netcl's time is device time from OpenCL profiling events (every kernel a call launches, through
:func:`netcl.runtime.profile`; the benchmark sets ``NETCL_PROFILE_EVENTS=1`` before the device
is first used), per call over batches of ``--inner`` calls, best of ``--repeat``; ``wall ms``
is the wall-clock time per call of a batch of back-to-back calls and one sync (host dispatch
included). PyTorch's time is CUDA events around a batch of calls (per call, best of
``--repeat``) when ``torch.cuda.is_available()``, else wall-clock on the CPU. ``x torch`` is
PyTorch's time over netcl's (1.0 = as fast). GB/s counts the bytes an op must move at least
(each input read once, each output written once; batch norm training reads x twice) over
netcl's device time, and ``%copy`` compares it with the measured copy bandwidth (read + write).
Every netcl result is checked against the same op on the NumPy device (``err``: max abs
difference over max abs value). ``kernels`` lists the kernels one call launched.

    python3 benchmarks/bench_membound.py                       # the GPU run (device cl)
    python3 benchmarks/bench_membound.py --device pthread --quick --out m.json   # PoCL
    python3 benchmarks/bench_membound.py --only softmax,plans    # softmax old vs new, on a GPU
    python3 benchmarks/bench_membound.py --only softmax --softmax-kernels row,mrow,warp,warp-emu
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("NETCL_PROFILE_EVENTS", "1")  # before the device is first used

try:
    import netcl.ops  # noqa: F401
except ImportError:  # running from a checkout without the packages installed
    root = Path(__file__).resolve().parents[1] / "packages"
    sys.path[:0] = [str(p) for p in sorted(root.glob("*/src"))]

from _timing import cuda_event_samples, device_samples

import netcl.ops as ops
from netcl.core.device import manager
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.tensor import Tensor
from netcl.ops import _reduce
from netcl.ops._cross_entropy import softmax_cross_entropy
from netcl.ops._softmax import ROW_PATHS, row_plan, softmax_family, softmax_rows
from netcl.ops._softmax_rows import mrow_plan
from netcl.ops._softmax_warp import MATH_ENV, REGS_ENV, warp_plan
from netcl.runtime import profile

Arrays = dict[str, np.ndarray[Any, Any]]


@dataclass
class Case:
    """One row: ``net(tensors)`` on netcl, ``torch(tensors)`` on PyTorch, ``nbytes`` moved."""

    op: str
    shape: str
    inputs: Callable[[np.random.Generator], Arrays]
    net: Callable[[dict[str, Tensor]], Any]
    torch: Callable[[Any, dict[str, Any]], Any] | None
    nbytes: int
    # the reference: ``net`` on the NumPy device, or this on the same device (cheap: sweeps)
    device_ref: Callable[[dict[str, Tensor]], Any] | None = None


def _normal(*shape: int) -> Callable[[np.random.Generator], Arrays]:
    return lambda rng: {"x": rng.standard_normal(shape, dtype=np.float32)}


def _normal16(*shape: int) -> Callable[[np.random.Generator], Arrays]:
    return lambda rng: {"x": rng.standard_normal(shape, dtype=np.float32).astype(np.float16)}


def _shape(dims: tuple[int, ...]) -> str:
    return "x".join(map(str, dims))


def _first(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out


def reduction_cases(quick: bool) -> list[Case]:
    big = (1 << 16,) if quick else (1 << 24,)
    mats = ([(256, 256), (256, 64), (64, 256), (255, 63)] if quick else
            [(4096, 4096), (4096, 1024), (1024, 4096), (4095, 1023)])
    cases = []
    for dims in [big, *mats]:
        n = int(np.prod(dims))
        cases.append(Case("sum all", _shape(dims), _normal(*dims), lambda t: ops.sum(t["x"]),
                          lambda th, t: th.sum(t["x"]), 4 * n))
    for dims in mats:
        n = int(np.prod(dims))
        rows, cols = dims
        cases.append(Case("sum last", _shape(dims), _normal(*dims),
                          lambda t: ops.sum(t["x"], axis=1), lambda th, t: th.sum(t["x"], dim=1),
                          4 * (n + rows)))
        cases.append(Case("sum first", _shape(dims), _normal(*dims),
                          lambda t: ops.sum(t["x"], axis=0), lambda th, t: th.sum(t["x"], dim=0),
                          4 * (n + cols)))
    dims = mats[1]
    n = int(np.prod(dims))
    cases += [
        Case("mean all", _shape(big), _normal(*big), lambda t: ops.mean(t["x"]),
             lambda th, t: th.mean(t["x"]), 4 * big[0]),
        Case("mean last", _shape(dims), _normal(*dims), lambda t: ops.mean(t["x"], axis=1),
             lambda th, t: th.mean(t["x"], dim=1), 4 * (n + dims[0])),
        Case("mean first", _shape(dims), _normal(*dims), lambda t: ops.mean(t["x"], axis=0),
             lambda th, t: th.mean(t["x"], dim=0), 4 * (n + dims[1])),
        Case("max all", _shape(big), _normal(*big), lambda t: ops.max(t["x"]),
             lambda th, t: th.amax(t["x"]), 4 * big[0]),
        Case("max last", _shape(dims), _normal(*dims), lambda t: ops.max(t["x"], axis=1),
             lambda th, t: th.amax(t["x"], dim=1), 4 * (n + dims[0])),
    ]
    return cases


def _old_row_path(R: int) -> int:
    """The path ``softmax`` took before softmax_mrow (session 10): registers up to 32 elements
    a lane, else online, in 4-vectors only for lengths divisible by 4."""
    return 0 if R <= 32 * 1024 else 2 if R % 4 == 0 else 1


SOFTMAX_KERNELS = "row,mrow,warp"  # --softmax-kernels' default


def softmax_cases(quick: bool, kernels: str = SOFTMAX_KERNELS) -> list[Case]:
    """softmax and log_softmax as ``ops`` runs them (``default``: softmax_mrow, softmax_warp on
    a GPU), the pre-mrow plan (``old``) and each row kernel of ``kernels`` (see
    :func:`_kernel_call`) beside them, float32 and one float16 shape; cross entropy composed
    (``old``: log_softmax, nll_gather, mean) and fused (xent_row merging in one launch, or
    xent_row + xent_sum; with and without writing the log-probabilities), each beside
    PyTorch's same op."""
    shapes = ([(512, 256), (1024, 1000), (128, 10), (512, 128), (8, 50257), (512, 2048),
               (512, 4096)] if quick else
              [(4096, 1024), (32768, 1000), (128, 10), (16384, 128), (256, 50257),
               (4096, 256), (8192, 2048), (4096, 4096), (4096, 4095), (1024, 16384)])
    half = [(512, 1024)] if quick else [(4096, 1024), (32768, 1000)]
    names = [k for k in kernels.split(",") if k]
    cases = []
    for dims, f16 in [(d, False) for d in shapes] + [(d, True) for d in half]:
        n = int(np.prod(dims))
        size = 2 if f16 else 4
        make = _normal16(*dims) if f16 else _normal(*dims)
        for op, log in (("softmax", False), ("log_softmax", True)):
            def net_fn(t: dict[str, Tensor], log: bool = log) -> Any:
                return (ops.log_softmax if log else ops.softmax)(t["x"])

            def torch_fn(th: Any, t: dict[str, Any], log: bool = log) -> Any:
                return (th.log_softmax if log else th.softmax)(t["x"], dim=-1)

            label = f"{op} f16" if f16 else op
            cases.append(Case(label, _shape(dims), make, net_fn, torch_fn, 2 * size * n))
            if dims[1] < 32:  # the column kernel: no row plans
                continue
            if not f16:
                old = (_col_call(log) if dims[1] < 256 else  # the reduction rule's item a row
                       _plan_call(None, _old_row_path(dims[1]), None, log))
                cases.append(Case(f"{op} old", _shape(dims), make, old, torch_fn, 8 * n))
            for name in names:
                if name in ("mrow", "rows4", "rows1") and dims[1] > 4 * 8 * 1024:
                    continue  # longer than softmax_mrow holds
                if name.startswith("warp") and dims[1] > 32 * 1024:
                    continue
                cases.append(Case(f"{label} {name}", _shape(dims), make,
                                  _kernel_call(name, log), torch_fn, 2 * size * n))
    rows, classes = (512, 1000) if quick else (4096, 1000)

    def ce_inputs(rng: np.random.Generator) -> Arrays:
        return {"x": rng.standard_normal((rows, classes), dtype=np.float32),
                "y": rng.integers(0, classes, rows).astype(np.int64)}

    def ce_torch(th: Any, t: dict[str, Any]) -> Any:
        return th.nn.functional.cross_entropy(t["x"], t["y"])

    def ce_old(t: dict[str, Tensor]) -> Any:
        return ops.mean(ops.nll_gather(ops.log_softmax(t["x"]), t["y"]))

    nbytes = 4 * rows * classes + 8 * rows
    cases += [
        Case("cross_entropy old", f"{rows}x{classes}", ce_inputs, ce_old, ce_torch, nbytes),
        Case("cross_entropy", f"{rows}x{classes}", ce_inputs,
             lambda t: softmax_cross_entropy(t["x"], t["y"])[0], ce_torch, nbytes),
        Case("xent 2 launches", f"{rows}x{classes}", ce_inputs,
             lambda t: softmax_cross_entropy(t["x"], t["y"], merge=False)[0], ce_torch, nbytes),
        Case("xent +logp", f"{rows}x{classes}", ce_inputs,
             lambda t: softmax_cross_entropy(t["x"], t["y"], keep_logp=True)[0], ce_torch,
             nbytes + 4 * rows * classes),
    ]
    return cases


def _bn_inputs(dims: tuple[int, int, int, int]) -> Callable[[np.random.Generator], Arrays]:
    c = dims[1]

    def make(rng: np.random.Generator) -> Arrays:
        x = rng.standard_normal(dims, dtype=np.float32)
        g = rng.standard_normal(dims, dtype=np.float32)
        mu = x.mean(axis=(0, 2, 3))
        invstd = 1.0 / np.sqrt(x.var(axis=(0, 2, 3)) + 1e-5)
        return {"x": x, "g": g, "w": rng.uniform(0.5, 1.5, c).astype(np.float32),
                "b": rng.standard_normal(c, dtype=np.float32), "rm": np.zeros(c, np.float32),
                "rv": np.ones(c, np.float32), "mu": mu.astype(np.float32),
                "invstd": invstd.astype(np.float32)}
    return make


def _torch_bn_backward(th: Any, t: dict[str, Any]) -> Any:
    return th.ops.aten.native_batch_norm_backward(
        t["g"], t["x"], t["w"], t["rm"], t["rv"], t["mu"], t["invstd"], True, 1e-5,
        [True, True, True])


def norm_cases(quick: bool) -> list[Case]:
    shapes = ([(16, 64, 16, 16), (16, 512, 4, 4), (4, 32, 56, 56)] if quick else
              [(128, 64, 32, 32), (128, 512, 4, 4), (32, 256, 56, 56)])
    cases = []
    for dims in shapes:
        n = int(np.prod(dims))
        make = _bn_inputs(dims)
        cases.append(Case(
            "bn train fwd", _shape(dims), make,
            lambda t: ops.batch_norm(t["x"], t["rm"], t["rv"], t["w"], t["b"], training=True),
            lambda th, t: th.nn.functional.batch_norm(t["x"], t["rm"], t["rv"], t["w"], t["b"],
                                                      training=True), 12 * n))
        cases.append(Case(
            "bn eval fwd", _shape(dims), make,
            lambda t: ops.batch_norm(t["x"], t["rm"], t["rv"], t["w"], t["b"], training=False),
            lambda th, t: th.nn.functional.batch_norm(t["x"], t["rm"], t["rv"], t["w"], t["b"],
                                                      training=False), 8 * n))
        cases.append(Case(
            "bn backward", _shape(dims), make,
            lambda t: ops.batch_norm_backward(t["g"], t["x"], t["mu"], t["invstd"], t["w"]),
            _torch_bn_backward, 20 * n))
    return cases


def pool_cases(quick: bool) -> list[Case]:
    stem, small, gap = (((4, 64, 56, 56), (16, 64, 32, 32), (16, 512, 7, 7)) if quick else
                        ((32, 64, 112, 112), (128, 64, 32, 32), (128, 512, 7, 7)))
    n1, n2, n3 = (int(np.prod(d)) for d in (stem, small, gap))
    return [
        Case("maxpool 3x3 s2", _shape(stem), _normal(*stem),
             lambda t: ops.max_pool2d(t["x"], 3, 2, 1),
             lambda th, t: th.nn.functional.max_pool2d(t["x"], 3, 2, 1), 4 * n1 + n1),
        Case("maxpool 2x2 s2", _shape(small), _normal(*small), lambda t: ops.max_pool2d(t["x"], 2),
             lambda th, t: th.nn.functional.max_pool2d(t["x"], 2), 5 * n2),
        Case("global avgpool", _shape(gap), _normal(*gap), lambda t: ops.global_avg_pool2d(t["x"]),
             lambda th, t: th.nn.functional.adaptive_avg_pool2d(t["x"], 1),
             4 * n3 + 4 * gap[0] * gap[1]),
    ]


def elementwise_cases(quick: bool) -> list[Case]:
    n = 1 << 16 if quick else 1 << 24

    def make(rng: np.random.Generator) -> Arrays:
        return {"x": rng.standard_normal(n, dtype=np.float32),
                "y": rng.standard_normal(n, dtype=np.float32)}

    return [Case("add+relu", str(n), make, lambda t: ops.relu(ops.add(t["x"], t["y"])),
                 lambda th, t: th.relu(th.add(t["x"], t["y"])), 12 * n)]


# -- timing -----------------------------------------------------------------------------------


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def netcl_device_time(fn: Callable[[], Any], repeat: int, inner: int
                      ) -> tuple[list[float], list[str]]:
    """Seconds of device time per call (profiling events), and the kernels of one call."""
    return device_samples(profile, fn, repeat, inner)


def wall_time(fn: Callable[[], Any], sync: Callable[[], None], repeat: int, inner: int
              ) -> list[float]:
    """Seconds per call of ``inner`` back-to-back calls and one sync, after a warm-up."""
    fn()
    sync()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / inner)
    return samples


def torch_time(th: Any, fn: Callable[[], Any], repeat: int, inner: int) -> list[float]:
    """CUDA events around ``inner`` calls (per call), or wall-clock on the CPU."""
    if not th.cuda.is_available():
        return wall_time(fn, lambda: None, repeat, inner)
    return cuda_event_samples(th, fn, repeat, inner)


def _error(got: Any, want: Any) -> float:
    got = got.to_host() if isinstance(got, Tensor) else np.asarray(got)
    want = want.to_host() if isinstance(want, Tensor) else np.asarray(want)
    scale = float(np.abs(want).max()) if want.size else 1.0
    if got.shape != want.shape:
        return float("inf")
    return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()
                 / max(scale, 1e-30)) if got.size else 0.0


class Bench:
    def __init__(self, device: str, repeat: int, inner: int) -> None:
        handle = manager.default(device)
        if handle is None:
            raise SystemExit(f"no device matches {device!r}")
        self.handle = handle
        self.q = handle.queue
        self.cl = handle.backend == "cl"
        cpu = manager.default("cpu")
        if cpu is None:
            raise SystemExit("no NumPy device")
        self.cpu = cpu.queue
        self.repeat, self.inner = repeat, inner
        self.th = _torch()
        self.cuda = self.th is not None and self.th.cuda.is_available()
        self.copy_gbs: float | None = None
        self.rows: list[dict[str, Any]] = []

    def copy_bandwidth(self, nbytes: int) -> None:
        """Device copy of ``nbytes`` (read + write counted) on netcl's queue and in PyTorch."""
        row: dict[str, Any] = {"op": "copy", "shape": f"{nbytes >> 20} MiB", "bytes": 2 * nbytes}
        n = nbytes // 4
        if self.cl:
            import pyopencl as cl

            src = Tensor.from_host(self.q, np.ones(n, np.float32))
            dst = Tensor.from_host(self.q, np.zeros(n, np.float32))
            sb, db = src.buffer, dst.buffer
            cl.enqueue_copy(self.q, db, sb, byte_count=nbytes).wait()
            best = float("inf")
            for _ in range(self.repeat):
                events = [cl.enqueue_copy(self.q, db, sb, byte_count=nbytes)
                          for _ in range(self.inner)]
                self.q.finish()
                best = min(best, float(sum([e.profile.end - e.profile.start
                                               for e in events])) * 1e-9 / self.inner)
            row["ms"] = best * 1e3
            row["gbs"] = 2 * nbytes / best / 1e9
            self.copy_gbs = row["gbs"]
        if self.th is not None:
            dev = "cuda" if self.cuda else "cpu"
            a = self.th.ones(n, device=dev)
            b = self.th.zeros(n, device=dev)
            row["torch_ms"] = min(torch_time(self.th, lambda: b.copy_(a), self.repeat,
                                             self.inner)) * 1e3
        self.rows.append(row)

    def case(self, case: Case, rng: np.random.Generator) -> None:
        arrays = case.inputs(rng)
        row: dict[str, Any] = {"op": case.op, "shape": case.shape, "bytes": case.nbytes}
        try:
            tensors = {k: Tensor.from_host(self.q, a) for k, a in arrays.items()}
            ref = (case.device_ref(tensors) if case.device_ref is not None else
                   case.net({k: Tensor.from_host(self.cpu, a) for k, a in arrays.items()}))
            row["err"] = _error(_first(case.net(tensors)), _first(ref))

            def call() -> Any:
                return case.net(tensors)

            if self.cl:
                dev, kernels = netcl_device_time(call, self.repeat, self.inner)
                row["ms"] = min(dev) * 1e3
                row["kernels"] = kernels
            row["wall_ms"] = min(wall_time(call, self.q.finish, self.repeat, self.inner)) * 1e3
        except Exception as exc:  # a kernel that fails to build or run: a row too
            row["error"] = repr(exc)[:300]
        if self.th is not None and case.torch is not None:
            try:
                where = "cuda" if self.cuda else "cpu"
                tt = {k: self.th.from_numpy(a).to(where) for k, a in arrays.items()}
                th, fn = self.th, case.torch
                row["torch_ms"] = min(torch_time(th, lambda: fn(th, tt), self.repeat,
                                                 self.inner)) * 1e3
            except Exception as exc:
                row["torch_error"] = repr(exc)[:200]
        ms = row.get("ms", row.get("wall_ms"))
        if ms:
            row["gbs"] = case.nbytes / (ms * 1e-3) / 1e9
            if self.copy_gbs:
                row["pct_copy"] = 100 * row["gbs"] / self.copy_gbs
            if row.get("torch_ms"):
                row["x_torch"] = row["torch_ms"] / ms
        self.rows.append(row)
        print(_line(row), flush=True)


def softmax_plan_cases(quick: bool) -> list[Case]:
    """softmax_row at every lane count and path that can run (``row_plan``), softmax_mrow
    (paths ``rows4``/``rows1``) at lanes x rows per work-group of 128 to 1024 items
    (``mrow_plan``) and softmax_warp in 4-vectors (``warp4``) at lanes x rows of 64 to 1024
    items (``warp_plan``), to pick the default plan per row length; ``default`` is what
    ``ops.softmax`` runs. Row names: ``sm L<lanes> <path>`` and ``sm W<lanes>xR<rows> <path>``."""
    shapes = ([(512, 1024), (64, 50257), (64, 50256)] if quick else
              [(4096, 1024), (32768, 1000), (16384, 128), (4096, 4096), (256, 50257),
               (256, 50256)])
    cases = []
    for dims in shapes:
        n = int(np.prod(dims))
        R = dims[1]

        def sm_torch(th: Any, t: dict[str, Any]) -> Any:
            return th.softmax(t["x"], -1)

        cases.append(Case("sm default", _shape(dims), _normal(*dims),
                          lambda t: ops.softmax(t["x"]), sm_torch, 8 * n))
        for lanes in (32, 64, 128, 256, 512, 1024):
            for path, name in enumerate(ROW_PATHS[:3]):
                try:
                    row_plan(R, 0, 1024, lanes, path)
                except ValueError:
                    continue
                cases.append(Case(f"sm L{lanes} {name}", _shape(dims), _normal(*dims),
                                  _plan_call(lanes, path), sm_torch, 8 * n,
                                  lambda t: ops.softmax(t["x"])))
        for path in (3, 4):
            for lanes in (8, 16, 32, 64, 128, 256, 512, 1024):
                for per in (1, 2, 4, 8, 16, 32, 64):
                    if lanes * per not in (128, 256, 512, 1024):
                        continue
                    try:
                        mrow_plan(R, 0, 1024, lanes, per, path == 3)
                    except ValueError:
                        continue
                    cases.append(Case(f"sm W{lanes}xR{per} {ROW_PATHS[path]}", _shape(dims),
                                      _normal(*dims), _plan_call(lanes, path, per), sm_torch,
                                      8 * n, lambda t: ops.softmax(t["x"])))
        for lanes in (8, 16, 32, 64, 128, 256, 512, 1024):  # softmax_warp, 4-vectors (path 5)
            for per in (1, 2, 4, 8, 16, 32):
                if lanes * per not in (64, 128, 256, 512, 1024):
                    continue
                try:
                    warp_plan(R, 0, 1024, lanes, per, True)
                except ValueError:
                    continue
                cases.append(Case(f"sm W{lanes}xR{per} warp4", _shape(dims), _normal(*dims),
                                  _plan_call(lanes, 5, per), sm_torch, 8 * n,
                                  lambda t: ops.softmax(t["x"])))
    return cases


def _col_call(log: bool) -> Callable[[dict[str, Tensor]], Any]:
    """``ops.softmax`` (``log_softmax``) with REDUCTION_SEQUENTIAL forced: softmax_col."""
    def call(t: dict[str, Tensor]) -> Any:
        with force_variant(KernelVariant.REDUCTION_SEQUENTIAL):
            return ops.log_softmax(t["x"]) if log else ops.softmax(t["x"])
    return call


def _plan_call(lanes: int | None, path: int | None, rows: int | None = None, log: bool = False,
               kernel: str | None = None, shuffle: str | None = None
               ) -> Callable[[dict[str, Tensor]], Any]:
    def call(t: dict[str, Tensor]) -> Any:
        if t["x"].array is not None:  # the NumPy device (--device cpu)
            return ops.log_softmax(t["x"]) if log else ops.softmax(t["x"])
        return softmax_rows(t["x"], log, lanes, path, rows, kernel, shuffle)
    return call


def _kernel_call(name: str, log: bool) -> Callable[[dict[str, Tensor]], Any]:
    """A row kernel by name with its default plan: ``row``, ``mrow``, ``warp`` (``warp-emu``:
    its shuffles emulated in local memory; ``warp-r<N>``: built with at most N registers a
    lane, ``NETCL_SOFTMAX_WARP_REGS``), or a path of ``ROW_PATHS`` (``rows1``, ``warp1``: the
    scalar loads; ...); a ``-fast`` suffix builds it with ``NETCL_SOFTMAX_MATH=fast``."""
    if name.endswith("-fast"):
        return _with_env(_kernel_call(name[:-5], log), MATH_ENV, "fast")
    if name == "warp-emu":
        return _plan_call(None, None, None, log, "warp", "emulate")
    if name.startswith("warp-r") and name[6:].isdigit():
        return _with_env(_plan_call(None, None, None, log, "warp"), REGS_ENV, name[6:])
    if name in ROW_PATHS:
        return _plan_call(None, ROW_PATHS.index(name), None, log)
    if name in ("row", "mrow", "warp"):
        return _plan_call(None, None, None, log, name)
    raise SystemExit(f"--softmax-kernels: unknown kernel {name!r} (row, mrow, warp, warp-emu, "
                     f"warp-r<N>, {', '.join(ROW_PATHS)}; each with -fast)")


def _with_env(call: Callable[[dict[str, Tensor]], Any], var: str, value: str
              ) -> Callable[[dict[str, Tensor]], Any]:
    """``call`` with the environment variable ``var`` set to ``value`` while it runs."""
    def wrapped(t: dict[str, Tensor]) -> Any:
        saved = os.environ.get(var)
        os.environ[var] = value
        try:
            return call(t)
        finally:
            if saved is None:
                del os.environ[var]
            else:
                os.environ[var] = saved
    return wrapped


def warp_ptxas(queue: Any) -> None:
    """On NVIDIA's OpenCL, print what ptxas reports for the PTX softmax_warp programs
    (``-cl-nv-verbose``): registers per lane and spills, which set how many rows an SM holds."""
    import pyopencl as cl

    device = queue.device
    if "NVIDIA" not in device.platform.name:
        return
    for dtype in ("float32", "float16"):
        for vec4 in (1, 2, 4, 8):
            src = softmax_family.source("softmax_warp", dtype, False, 1024, "", True, vec4)
            try:
                prg = cl.Program(queue.context, src.render(queue.context)).build(
                    options="-cl-nv-verbose")
                log = str(prg.get_build_info(device, cl.program_build_info.LOG))
            except Exception as exc:  # a build failure: say so, the rows will fail too
                print(f"ptxas softmax_warp {dtype} vec4={vec4}: BUILD FAILED {exc!r}"[:400])
                continue
            regs = re.search(r"Used (\d+) registers", log)
            spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
            print(f"ptxas softmax_warp {dtype} vec4={vec4} (rows to {128 * vec4} a warp): "
                  f"regs={regs.group(1) if regs else '?'} "
                  f"spill={spill.group(1) + '/' + spill.group(2) if spill else '?'}")


def split_cases(quick: bool) -> list[Case]:
    """Whole-tensor sums with red_vec's rows split into 2, 4, 8 (the default), 16 or 32
    work-groups per compute unit (``_reduce._ROW_GROUPS_PER_CU``)."""
    n = 1 << 16 if quick else 1 << 24
    return [Case(f"sum all G/CU={g}", str(n), _normal(n), _split_sum(g),
                 lambda th, t: th.sum(t["x"]), 4 * n, lambda t: ops.sum(t["x"]))
            for g in (2, 4, 8, 16, 32)]


def _split_sum(per_cu: int) -> Callable[[dict[str, Tensor]], Any]:
    def call(t: dict[str, Tensor]) -> Any:
        saved = _reduce._ROW_GROUPS_PER_CU
        _reduce._ROW_GROUPS_PER_CU = per_cu
        _reduce._launches.clear()  # remembered launches keep the split they were planned with
        try:
            return ops.sum(t["x"])
        finally:
            _reduce._ROW_GROUPS_PER_CU = saved
            _reduce._launches.clear()
    return call


GROUPS = {"reduce": reduction_cases, "softmax": softmax_cases, "plans": softmax_plan_cases,
          "splits": split_cases, "norm": norm_cases, "pool": pool_cases,
          "elementwise": elementwise_cases}


def _line(r: dict[str, Any]) -> str:
    def num(key: str, fmt: str, width: int) -> str:
        v = r.get(key)
        return f"{v:{width}{fmt}}" if isinstance(v, float) else " " * (width - 1) + "-"

    head = f"{r['op']:<24} {r['shape']:<17}"
    if "error" in r:
        return f"{head} FAILED {r['error']}"
    tail = " ".join(r.get("kernels", []))
    return (f"{head} {num('ms', '.4f', 9)} {num('wall_ms', '.4f', 9)} {num('torch_ms', '.4f', 9)}"
            f" {num('x_torch', '.2f', 7)} {num('gbs', '.0f', 7)} {num('pct_copy', '.0f', 6)}"
            f" {num('err', '.1e', 8)}  {tail}")


HEADER = (f"{'op':<24} {'shape':<17} {'ms':>9} {'wall ms':>9} {'torch ms':>9} {'x torch':>7}"
          f" {'GB/s':>7} {'%copy':>6} {'err':>8}  kernels")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", default="cl",
                        help="cl (default), cpu (NumPy), pthread (PoCL), or NETCL_DEVICE syntax")
    parser.add_argument("--quick", action="store_true", help="small sizes (PoCL, a laptop)")
    parser.add_argument("--only", default=",".join(GROUPS),
                        help="groups to run: " + ",".join(GROUPS))
    parser.add_argument("--repeat", type=int, default=None, help="samples (default 5; quick 2)")
    parser.add_argument("--inner", type=int, default=None,
                        help="calls per sample (default 20; quick 3)")
    parser.add_argument("--softmax-kernels", default=SOFTMAX_KERNELS,
                        help="the softmax group's row kernels, one row each beside the default "
                             "(row, mrow, warp, warp-emu, or a path: "
                             + ", ".join(ROW_PATHS) + f"; default {SOFTMAX_KERNELS})")
    parser.add_argument("--out", default="bench_membound.json")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    repeat = args.repeat or (2 if args.quick else 5)
    inner = args.inner or (3 if args.quick else 20)
    bench = Bench(args.device, repeat, inner)
    print(f"device: {bench.handle.platform_name} / {bench.handle.device_name}  torch: "
          f"{bench.th.cuda.get_device_name(0) if bench.cuda else 'cpu' if bench.th else None}")
    bench.copy_bandwidth((1 << 20) if args.quick else (64 << 20))
    copy = bench.rows[-1]
    print(f"copy {copy['shape']}: {copy.get('ms', 0):.4f} ms, {copy.get('gbs', 0):.0f} GB/s "
          f"(torch {copy.get('torch_ms', 0):.4f} ms)")
    if bench.cl and "softmax" in args.only.split(","):
        warp_ptxas(bench.q)
    print(HEADER)
    rng = np.random.default_rng(0)
    for group in args.only.split(","):
        cases = (softmax_cases(args.quick, args.softmax_kernels) if group == "softmax" else
                 GROUPS[group](args.quick))
        for case in cases:
            bench.case(case, rng)
    meta = {"device": f"{bench.handle.platform_name} / {bench.handle.device_name}",
            "host": platform.platform(), "repeat": repeat, "inner": inner, "quick": args.quick,
            "torch": None if bench.th is None else bench.th.__version__, "cuda": bench.cuda,
            "copy_gbs": bench.copy_gbs}
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": bench.rows}, indent=1))
    print(f"wrote {args.out} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
