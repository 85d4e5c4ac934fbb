"""Per-layer convolution device time: forward, data gradient and weight gradient of ResNet-18's
and ResNet-50's layers (batch 128; CIFAR 32x32 and ImageNet 224x224 stems) and the digits CNN's
(batch 64), netcl beside PyTorch in one process.

For each layer and computation:

- ``netcl``: the variant netcl's selector picks (named in the table, with its tiles), timed
  by OpenCL profiling events: the sum of the device time of every kernel the call launches
  (``netcl.runtime.profile``; the benchmark sets ``NETCL_PROFILE_EVENTS=1``), best of
  ``--repeat`` samples of ``inner`` calls each;
- ``torch``: the same computation in PyTorch on CUDA (cuDNN, TF32 off, ``cudnn.benchmark``
  on), timed by CUDA events the same way (``torch.ops.aten.convolution_backward`` for the
  gradients); without CUDA, PyTorch on the CPU by wall clock (``torch-cpu``), or ``-``;
- ``x torch``: torch's time over netcl's (above 1: netcl is faster);
- then every variant forced where it applies (each ``CONV2D_*`` for the forward, the column path
  ``CONV2D_IM2COL`` for the gradients, Winograd F(2x2, 3x3) ``WINOGRAD`` and F(4x4, 3x3)
  ``WINOGRAD_F4`` for all three, the phase-specialized data gradient ``IGEMM_PHASE`` of
  strided layers) and the register-tiled implicit GEMM with each tiling (``IGEMM 64x64`` ...;
  a strided layer's data gradient also by the phase kernel with each, ``PHASE 64x64`` ..., and
  with one phase per slot, ``PHASE1 64x64`` ...), so
  the fastest per layer can be read off; each checked against the reference (``err``, max abs
  difference over max abs value; a row above 1e-3 is marked ``!``).

``--set`` picks the layers: ``r18`` (ResNet-18 CIFAR and the digits CNN: the default, with
every variant forced), ``r50`` (ResNet-50 CIFAR), ``r18-imagenet``, ``r50-imagenet``, or
``all``; the other sets time the selected variant and torch only unless ``--variants``.
A ``step`` line per network sums its convolutions over a training step (each layer times its
count in the network): netcl's selected variants, the best variant per layer, and torch.

    PYTHONPATH=$(ls -d packages/*/src | tr '\\n' ':') python benchmarks/bench_conv_layers.py
    ... --quick                 # batch / 32, two layers, fewer variants (PoCL, a laptop)
    ... --set all --json conv.json   # every layer set; every row, with all samples
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import platform
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

from netcl.core.device import manager
from netcl.core.kernel_selector import (
    KernelConfig,
    KernelVariant,
    force_variant,
    get_kernel_selector,
)
from netcl.core.tensor import Tensor
from netcl.ops._conv import (
    DATA_RUNNERS,
    RUNNERS,
    WEIGHT_RUNNERS,
    conv2d,
    conv2d_backward_data,
    conv2d_backward_weight,
)
from netcl.ops._conv_geometry import ConvGeometry, conv_geometry
from netcl.ops._conv_igemm_kernels import TILINGS
from netcl.ops._conv_rule import (
    CONV2D_FAMILY,
    IMPLICIT_TILED,
    PHASE_DATA,
    WINOGRAD_F4,
    ConvQuery,
    phase_data_applies,
)
from netcl.runtime import profile

V = KernelVariant
FORWARD_VARIANTS: list[Any] = [V.CONV2D_IM2COL, V.CONV2D_IMPLICIT_GEMM, V.CONV2D_TILED_LOCAL,
                               V.CONV2D_WINOGRAD, WINOGRAD_F4, V.CONV2D_NAIVE]
WINOGRADS = (V.CONV2D_WINOGRAD, WINOGRAD_F4)  # F(2x2, 3x3) and F(4x4, 3x3)
GRADIENT_VARIANTS: list[Any] = [V.CONV2D_IM2COL, *WINOGRADS, PHASE_DATA]
PASSES = ("fwd", "data", "weight")
DIRECTION = {"fwd": "forward", "data": "data", "weight": "weight"}


@dataclass(frozen=True)
class Layer:
    """One convolution: ``c -> k`` channels, an ``h x h`` input, ``r x r`` kernel, ``count``
    times in its network (ResNet-18's step total)."""

    name: str
    batch: int
    c: int
    k: int
    h: int
    r: int
    stride: int
    padding: int
    count: int
    net: str = "ResNet-18 CIFAR"  # the step total it counts in ("" for none)

    def geometry(self, batch: int | None = None) -> ConvGeometry:
        n = self.batch if batch is None else batch
        return conv_geometry("bench", (n, self.c, self.h, self.h), (self.k, self.c, self.r,
                                                                     self.r),
                             self.stride, self.padding)


LAYERS = [
    Layer("r18 conv1 3-64 3x3 32", 128, 3, 64, 32, 3, 1, 1, 1),
    Layer("r18 64-64 3x3 32", 128, 64, 64, 32, 3, 1, 1, 4),
    Layer("r18 64-128 3x3 s2 32", 128, 64, 128, 32, 3, 2, 1, 1),
    Layer("r18 64-128 1x1 s2 32", 128, 64, 128, 32, 1, 2, 0, 1),
    Layer("r18 128-128 3x3 16", 128, 128, 128, 16, 3, 1, 1, 3),
    Layer("r18 128-256 3x3 s2 16", 128, 128, 256, 16, 3, 2, 1, 1),
    Layer("r18 128-256 1x1 s2 16", 128, 128, 256, 16, 1, 2, 0, 1),
    Layer("r18 256-256 3x3 8", 128, 256, 256, 8, 3, 1, 1, 3),
    Layer("r18 256-512 3x3 s2 8", 128, 256, 512, 8, 3, 2, 1, 1),
    Layer("r18 256-512 1x1 s2 8", 128, 256, 512, 8, 1, 2, 0, 1),
    Layer("r18 512-512 3x3 4", 128, 512, 512, 4, 3, 1, 1, 3),
    Layer("digits 1-16 3x3 8", 64, 1, 16, 8, 3, 1, 1, 1, net=""),
    Layer("digits 16-32 3x3 8", 64, 16, 32, 8, 3, 1, 1, 1, net=""),
]


def _conv(prefix: str, net: str, c: int, k: int, h: int, r: int, stride: int,
          count: int) -> Layer:
    s2 = " s2" if stride == 2 else ""
    return Layer(f"{prefix} {c}-{k} {r}x{r}{s2} {h}", 128, c, k, h, r, stride, r // 2, count,
                 net)


def resnet18_layers(imagenet: bool) -> list[Layer]:
    """ResNet-18's distinct convolutions (torchvision's layout) with their counts; the
    ImageNet stem is the 7x7 stride-2 convolution and a max pool (224 -> 56)."""
    net, p = ("ResNet-18 ImageNet", "r18i") if imagenet else ("ResNet-18 CIFAR", "r18")
    size = 56 if imagenet else 32
    layers = [_conv(p, net, 3, 64, 224, 7, 2, 1) if imagenet else _conv(p, net, 3, 64, 32, 3, 1, 1),
              _conv(p, net, 64, 64, size, 3, 1, 4)]
    for c in (64, 128, 256):
        k = 2 * c
        layers += [_conv(p, net, c, k, size, 3, 2, 1), _conv(p, net, c, k, size, 1, 2, 1),
                   _conv(p, net, k, k, size // 2, 3, 1, 3)]
        size //= 2
    return layers


def resnet50_layers(imagenet: bool) -> list[Layer]:
    """ResNet-50's distinct convolutions (torchvision v1.5 bottlenecks: the stride on the 3x3)
    with their counts per step."""
    net, p = ("ResNet-50 ImageNet", "r50i") if imagenet else ("ResNet-50 CIFAR", "r50")
    size = 56 if imagenet else 32
    layers = [_conv(p, net, 3, 64, 224, 7, 2, 1) if imagenet else _conv(p, net, 3, 64, 32, 3, 1, 1)]
    cin = 64
    for stage, (width, blocks) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
        out, stride = 4 * width, 1 if stage == 0 else 2
        small = size // stride
        layers += [_conv(p, net, cin, width, size, 1, 1, 1),          # first block's reduce
                   _conv(p, net, width, width, size, 3, stride, 1),    # first block's 3x3
                   _conv(p, net, cin, out, size, 1, stride, 1),        # downsample
                   _conv(p, net, width, out, small, 1, 1, blocks),     # every block's expand
                   _conv(p, net, out, width, small, 1, 1, blocks - 1)]  # later blocks' reduce
        if blocks > 1 and stride == 2:
            layers.append(_conv(p, net, width, width, small, 3, 1, blocks - 1))
        elif blocks > 1:
            layers[-4] = dataclasses.replace(layers[-4], count=blocks)  # stride 1: same shape
        cin, size = out, small
    return _merged(layers)


def _merged(layers: list[Layer]) -> list[Layer]:
    """One row per distinct shape, counts added (ResNet-50's first downsample has its
    expansion's shape)."""
    by_name: dict[str, Layer] = {}
    for layer in layers:
        seen = by_name.get(layer.name)
        by_name[layer.name] = (layer if seen is None
                               else dataclasses.replace(seen, count=seen.count + layer.count))
    return list(by_name.values())


SETS = {"r18": LAYERS, "r50": resnet50_layers(False), "r18-imagenet": resnet18_layers(True),
        "r50-imagenet": resnet50_layers(True)}
QUICK_LAYERS = [3, 12]
SPLIT_PER_UNIT = [8, 16]  # weight-gradient work-groups per compute unit to compare (default 4)
SPLIT_TILINGS = ("64x64", "128x128", "128x128v")  # ... with these tilings
ERR_LIMIT = 1e-3


def _error(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> float:
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return torch


class TorchConv:
    """The three computations of one layer in PyTorch (CUDA if present, else CPU)."""

    def __init__(self, torch: Any, g: ConvGeometry, x: Any, w: Any, gy: Any) -> None:
        self.torch, self.g = torch, g
        self.cuda = torch.cuda.is_available()
        dev = "cuda" if self.cuda else "cpu"
        self.x, self.w, self.gy = (torch.from_numpy(a).to(dev) for a in (x, w, gy))

    def call(self, which: str) -> Any:
        t, g = self.torch, self.g
        if which == "fwd":
            return t.nn.functional.conv2d(self.x, self.w, None, g.stride, g.padding)
        mask = [which == "data", which == "weight", False]
        grads = t.ops.aten.convolution_backward(self.gy, self.x, self.w, None, list(g.stride),
                                                list(g.padding), list(g.dilation), False,
                                                [0, 0], g.groups, mask)
        return grads[0] if which == "data" else grads[1]

    def time(self, which: str, repeat: int, inner: int) -> list[float]:
        """Seconds per call, one per sample."""
        t = self.torch
        fn = lambda: self.call(which)  # noqa: E731
        fn()
        if not self.cuda:
            samples = []
            for _ in range(repeat):
                start = time.perf_counter()
                for _ in range(inner):
                    fn()
                samples.append((time.perf_counter() - start) / inner)
            return samples
        return cuda_event_samples(t, fn, repeat, inner)


def device_time(fn: Callable[[], Any], repeat: int, inner: int) -> list[float]:
    """Seconds of device time per call of ``fn`` (every kernel it launches, by profiling
    events), one figure per sample of ``inner`` calls; the first call (builds) is not timed."""
    return device_samples(profile, fn, repeat, inner)[0]


class LayerBench:
    """Every row of one layer on one netcl device."""

    def __init__(self, handle: Any, layer: Layer, batch: int, torch: Any, repeat: int,
                 inner: int, quick: bool, variants: bool = True) -> None:
        self.q, self.layer, self.repeat, self.inner = handle.queue, layer, repeat, inner
        self.quick, self.variants = quick, variants
        self.g = layer.geometry(batch)
        g = self.g
        rng = np.random.default_rng(0)
        x = rng.standard_normal((g.n, g.c, g.h, g.w), dtype=np.float32)
        w = (rng.standard_normal((g.k, g.cg, g.r, g.s)) / np.sqrt(g.crs)).astype(np.float32)
        gy = rng.standard_normal((g.n, g.k, g.oh, g.ow), dtype=np.float32)
        self.xt, self.wt, self.gt = (Tensor.from_host(self.q, a) for a in (x, w, gy))
        self.torch = None if torch is None else TorchConv(torch, g, x, w, gy)
        self.want = self._reference(x, w, gy)
        self.selector = get_kernel_selector(handle.cl_device)
        self.rows: list[dict[str, Any]] = []

    def _reference(self, x: Any, w: Any, gy: Any) -> dict[str, np.ndarray[Any, Any]]:
        g = self.g
        if self.torch is not None:
            return {p: self.torch.call(p).cpu().numpy() for p in PASSES}
        cpu = manager.default("cpu").queue
        xs, ws, gs = (Tensor.from_host(cpu, a) for a in (x, w, gy))
        geo = (g.stride, g.padding)
        return {"fwd": conv2d(xs, ws, None, *geo).to_host(),
                "data": conv2d_backward_data(gs, ws, xs.shape, *geo).to_host(),
                "weight": conv2d_backward_weight(xs, gs, ws.shape, *geo).to_host()}

    def _netcl(self, which: str) -> Callable[[], Tensor]:
        geo = (self.g.stride, self.g.padding)
        if which == "fwd":
            return lambda: conv2d(self.xt, self.wt, None, *geo)
        if which == "data":
            return lambda: conv2d_backward_data(self.gt, self.wt, self.xt.shape, *geo)
        return lambda: conv2d_backward_weight(self.xt, self.gt, self.wt.shape, *geo)

    def _tiled(self, which: str, config: KernelConfig) -> Callable[[], Tensor]:
        g, q = self.g, self.q

        def call() -> Tensor:
            if which == "fwd":
                out = Tensor.from_shape(q, (g.n, g.k, g.oh, g.ow), "float32", fill=None)
                RUNNERS[IMPLICIT_TILED](self.xt, self.wt, None, g, out, config)
            elif which == "data":
                out = Tensor.from_shape(q, (g.n, g.c, g.h, g.w), "float32", fill=None)
                DATA_RUNNERS[config.variant](self.gt, self.wt, g, out, config)
            else:
                out = Tensor.from_shape(q, (g.k, g.cg, g.r, g.s), "float32", fill=None)
                WEIGHT_RUNNERS[IMPLICIT_TILED](self.xt, self.gt, g, out, config)
            return out
        return call

    def _measure(self, which: str, impl: str, fn: Callable[[], Tensor],
                 forced: Any = None) -> dict[str, Any]:
        row: dict[str, Any] = {"layer": self.layer.name, "pass": which, "impl": impl}
        try:
            with force_variant(*([forced] if forced is not None else [])):
                row["err"] = _error(fn().to_host(), self.want[which])
                samples = device_time(fn, self.repeat, self.inner)
            row.update(best_ms=min(samples) * 1e3, runs_ms=[s * 1e3 for s in samples])
        except Exception as exc:  # a kernel that fails to build or run on this device
            row["error"] = repr(exc)[:300]
        self.rows.append(row)
        return row

    def run(self) -> None:
        for which in PASSES:
            query = ConvQuery(self.g, "float32", DIRECTION[which])
            cfg = self.selector.select(CONV2D_FAMILY, query)
            tiles = cfg.extra.get("tiles")
            name = cfg.variant.name.replace("CONV2D_", "") + (f" {tiles}" if tiles else "")
            row = self._measure(which, "selected", self._netcl(which))
            row["variant"] = name
            if self.torch is not None:
                samples = self.torch.time(which, self.repeat, self.inner)
                kind = "torch-cuda" if self.torch.cuda else "torch-cpu"
                self.rows.append({"layer": self.layer.name, "pass": which, "impl": kind,
                                  "best_ms": min(samples) * 1e3,
                                  "runs_ms": [s * 1e3 for s in samples]})
            if not self.variants:
                continue
            forced = {"fwd": FORWARD_VARIANTS, "data": GRADIENT_VARIANTS,
                      "weight": GRADIENT_VARIANTS}[which]
            if self.quick:
                forced = [v for v in forced if v is not V.CONV2D_NAIVE]
            if not self.layer.name.startswith(("r18 ", "digits")):  # large sets: no slow kernels
                forced = [v for v in forced if v in (V.CONV2D_IM2COL, *WINOGRADS, PHASE_DATA)]
            for variant in forced:
                with force_variant(variant):  # forced where it does not apply: the rule's
                    if self.selector.select(CONV2D_FAMILY, query).variant is not variant:
                        continue
                self._measure(which, variant.name.replace("CONV2D_", ""), self._netcl(which),
                              forced=variant)
            # the implicit GEMM's tilings; a strided data gradient's also by the phase kernel
            # (PHASE: phases packed into slots, PHASE1: one phase per slot)
            kernels: list[tuple[Any, str, dict[str, Any]]] = [(IMPLICIT_TILED, "IGEMM", {})]
            if which == "data" and phase_data_applies(self.g):
                kernels += [(PHASE_DATA, "PHASE", {}),
                            (PHASE_DATA, "PHASE1", {"phase_pack": False})]
            for (kernel, prefix, more), (label, t) in itertools.product(kernels, TILINGS.items()):
                if self.quick and label != "64x64":
                    continue
                # the weight gradient's split: the default, and more work-groups per unit
                split = which == "weight" and not self.quick and label in SPLIT_TILINGS
                per_units = [None, *SPLIT_PER_UNIT] if split else [None]
                for per_unit in per_units:
                    extra: dict[str, Any] = {"dtype": "float32", **more}
                    if per_unit is not None:
                        extra["groups_per_unit"] = per_unit
                    config = KernelConfig(kernel, t.bm, t.bn, t.bk, t.tm,
                                          local_size_2d=(t.lx, t.ly),
                                          use_vectorization=t.vec, extra=extra)
                    name = f"{prefix} {label}" + ("" if per_unit is None else f" g{per_unit}")
                    self._measure(which, name, self._tiled(which, config))


def _fmt(ms: float | None) -> str:
    return "-" if ms is None else f"{ms:.3f}"


HEADER = (f"{'layer':<24} {'pass':<6} {'netcl variant':<30} {'netcl ms':>9} {'torch ms':>9} "
          f"{'x torch':>8} {'best variant':<22} {'best ms':>8}")


def table(rows: list[dict[str, Any]], layers: list[Layer]
          ) -> tuple[str, dict[str, dict[str, float]]]:
    """The layers' lines (the forced variants under each) and their step totals per network
    (``netcl``, ``best``, ``torch``: each layer's time times its count)."""
    out = []
    totals: dict[str, dict[str, float]] = {}
    for layer in layers:
        for which in PASSES:
            mine = [r for r in rows if r["layer"] == layer.name and r["pass"] == which]
            sel = next((r for r in mine if r["impl"] == "selected"), {})
            ref = next((r for r in mine if r["impl"].startswith("torch")), {})
            timed = [r for r in mine if "best_ms" in r and r.get("err", 1.0) <= ERR_LIMIT
                     and r["impl"] != "selected" and not r["impl"].startswith("torch")]
            best = min(timed, key=lambda r: r["best_ms"], default={})
            ratio = (f"{ref['best_ms'] / sel['best_ms']:.2f}"
                     if "best_ms" in ref and sel.get("best_ms") else "-")
            flag = " !" if sel.get("err", 0.0) > ERR_LIMIT or "error" in sel else ""
            out.append(f"{layer.name:<24} {which:<6} {sel.get('variant', '?')[:30]:<30} "
                       f"{_fmt(sel.get('best_ms')):>9} {_fmt(ref.get('best_ms')):>9} "
                       f"{ratio:>8} {best.get('impl', '-')[:22]:<22} "
                       f"{_fmt(best.get('best_ms')):>8}{flag}")
            forced = [f"{r['impl']} {_fmt(r.get('best_ms'))}"
                      + (" !" if r.get("err", 0.0) > ERR_LIMIT or "error" in r else "")
                      for r in mine if r["impl"] not in ("selected",)
                      and not r["impl"].startswith("torch")]
            if forced:
                out.append("    " + " | ".join(forced))
            if layer.net:
                net = totals.setdefault(layer.net, {"netcl": 0.0, "best": 0.0, "torch": 0.0})
                best_ms = min(best.get("best_ms", np.inf), sel.get("best_ms", np.inf))
                for key, ms in (("netcl", sel.get("best_ms", 0.0)),
                                ("best", 0.0 if best_ms == np.inf else best_ms),
                                ("torch", ref.get("best_ms", 0.0))):
                    net[key] += layer.count * ms
    return "\n".join(out), totals


def run(device: str, layers: list[Layer], batch_scale: float, repeat: int, inner: int,
        quick: bool, variants: bool = True) -> dict[str, Any]:
    handle = manager.default(device)
    if handle is None or handle.backend != "cl":
        raise SystemExit(f"bench_conv_layers: needs an OpenCL device, got {device!r}")
    torch = _torch()
    print(f"device: {handle.device_name} ({handle.platform_name}); torch "
          f"{None if torch is None else torch.__version__}; device ms per call, best of "
          f"{repeat} samples of {inner} calls; batch x {batch_scale:g}", flush=True)
    print(HEADER, flush=True)
    rows: list[dict[str, Any]] = []
    totals: dict[str, dict[str, float]] = {}
    for layer in layers:  # each layer's lines as soon as they are measured
        batch = max(1, int(layer.batch * batch_scale))
        bench = LayerBench(handle, layer, batch, torch, repeat, inner, quick, variants)
        bench.run()
        mine = bench.rows
        rows.extend(mine)
        del bench  # the layer's tensors, before the next (ImageNet layers are large)
        text, sums = table(mine, [layer])
        print(text, flush=True)
        for net, part in sums.items():
            mine = totals.setdefault(net, {"netcl": 0.0, "best": 0.0, "torch": 0.0})
            for key in mine:
                mine[key] += part[key]
    for net, t in totals.items():
        ratio = f" ({t['torch'] / t['netcl']:.2f}x torch)" if t["netcl"] and t["torch"] else ""
        print(f"step ({net} convs x count): netcl {t['netcl']:.2f} ms{ratio}, best variants "
              f"{t['best']:.2f} ms, torch {t['torch']:.2f} ms")
    return {"device": handle.device_name, "platform": handle.platform_name,
            "host": platform.node(), "torch": None if torch is None else torch.__version__,
            "batch_scale": batch_scale, "repeat": repeat, "inner": inner, "rows": rows,
            "totals": totals}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", default="cl", help="an OpenCL device (NETCL_DEVICE syntax; "
                                                       "default cl)")
    parser.add_argument("--quick", action="store_true",
                        help="batch / 32, two layers, 2 samples of 2 calls, no naive kernel, "
                             "one tiling")
    parser.add_argument("--set", default="r18", choices=[*SETS, "all"],
                        help="layer set (default r18: ResNet-18 CIFAR and digits)")
    parser.add_argument("--variants", action="store_true",
                        help="also force every variant on sets other than r18")
    parser.add_argument("--layers", default=None,
                        help="indices into the set's layer list (default: all; --quick on r18: "
                             + ",".join(map(str, QUICK_LAYERS)) + ")")
    parser.add_argument("--repeat", type=int, default=None, help="samples (default 5; quick 2)")
    parser.add_argument("--inner", type=int, default=None,
                        help="calls per sample (default 5; quick 2)")
    parser.add_argument("--json", default=None, help="write every row here")
    args = parser.parse_args(argv)
    pool = [layer for name in SETS for layer in SETS[name]] if args.set == "all" else SETS[args.set]
    indices = ([int(s) for s in args.layers.split(",")] if args.layers
               else QUICK_LAYERS if args.quick and args.set == "r18" else list(range(len(pool))))
    layers = [pool[i] for i in indices]
    result = run(args.device, layers, 1 / 32 if args.quick else 1.0,
                 args.repeat or (2 if args.quick else 5), args.inner or (2 if args.quick else 5),
                 args.quick, variants=args.variants or args.set == "r18")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
