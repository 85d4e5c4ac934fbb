"""Locate a conv variant that is wrong on one OpenCL device only.

1. Every variant of conv2d, forced, on ResNet-18 (CIFAR stem) and digits layer shapes against a
   float64 NumPy reference, run twice (run-to-run differences point at races).
2. ResNet-18 forward (every module's output) and every parameter's gradient, NumPy vs the
   device, with the default routing and with each conv variant forced.

    python3 scripts/gpu/gpu_conv_diag.py [cl]
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

import netcl.autograd as ag
import netcl.ops as o
from netcl.core.device import manager
from netcl.core.kernel_selector import KernelVariant, force_variant, get_kernel_selector
from netcl.core.tensor import Tensor
from netcl.nn import resnet18

V = KernelVariant
CONVS = [V.CONV2D_NAIVE, V.CONV2D_IM2COL, V.CONV2D_IMPLICIT_GEMM, V.CONV2D_TILED_LOCAL,
         V.CONV2D_WINOGRAD]
# (n, c, h, k, r, stride, padding)
SHAPES = [(2, 3, 32, 64, 3, 1, 1), (2, 64, 32, 64, 3, 1, 1), (2, 64, 32, 128, 3, 2, 1),
          (2, 64, 32, 128, 1, 2, 0), (2, 128, 16, 128, 3, 1, 1), (2, 128, 16, 256, 3, 2, 1),
          (2, 256, 8, 256, 3, 1, 1), (2, 256, 8, 512, 3, 2, 1), (2, 512, 4, 512, 3, 1, 1),
          (64, 1, 8, 16, 3, 1, 1), (64, 16, 8, 32, 3, 1, 1), (3, 5, 33, 7, 3, 2, 1),
          (1, 7, 7, 9, 3, 1, 1)]


def reference(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    n, _, h, ww = x.shape
    k, _, r, s = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - r) // stride + 1
    ow = (ww + 2 * pad - s) // stride + 1
    out = np.zeros((n, k, oh, ow))
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j].astype(np.float64))
    return out


def conv_shapes(dev: Any) -> None:
    rng = np.random.default_rng(1)
    print("== conv2d forward per forced variant (rel err vs float64; run-to-run) ==")
    for n, c, h, k, r, st, pad in SHAPES:
        x = rng.standard_normal((n, c, h, h)).astype(np.float32)
        w = (rng.standard_normal((k, c, r, r)) / np.sqrt(c * r * r)).astype(np.float32)
        ref = reference(x, w, st, pad)
        cells = []
        for v in CONVS:
            with force_variant(v):
                a = o.conv2d(Tensor.from_host(dev.queue, x), Tensor.from_host(dev.queue, w),
                             None, st, pad).to_host()
                b = o.conv2d(Tensor.from_host(dev.queue, x), Tensor.from_host(dev.queue, w),
                             None, st, pad).to_host()
            err = np.abs(a - ref).max() / np.abs(ref).max()
            det = np.abs(a - b).max()
            flag = "!" if err > 1e-4 or det > 0 else ""
            cells.append(f"{v.name[7:11]} {err:.0e}/{det:.0e}{flag}")
        print(f"n{n} {c}-{k} {h}x{h} {r}x{r} s{st}: " + "  ".join(cells), flush=True)


def resnet(handle: Any, x: np.ndarray, y: np.ndarray, hooks: bool
           ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    net = resnet18(num_classes=10, stem="cifar", queue=handle.queue, seed=0)
    acts: dict[str, np.ndarray] = {}
    if hooks:
        for name, mod in net.named_modules():
            if name:
                mod.register_forward_hook(
                    lambda m, i, out, name=name: acts.__setitem__(name, out.to_host()))
    with ag.Tape() as tape:
        logits = net(Tensor.from_host(handle.queue, x))
        loss = ag.cross_entropy(logits, Tensor.from_host(handle.queue, y))
    tape.backward(loss)
    acts["logits"] = logits.to_host()
    grads = {n: p.grad.to_host() for n, p in net.named_parameters() if p.grad is not None}
    return acts, grads


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def compare(label: str, ref: dict[str, np.ndarray], got: dict[str, np.ndarray], top: int
            ) -> None:
    errs = sorted(((rel(got[k], ref[k]), k) for k in ref), reverse=True)
    first = next((k for k in ref if rel(got[k], ref[k]) > 1e-3), None)
    print(f"  {label}: worst " + ", ".join(f"{k} {e:.1e}" for e, k in errs[:top])
          + f"; first over 1e-3 in order: {first}", flush=True)


def resnet_check(dev: Any) -> None:
    x = np.random.default_rng(4).standard_normal((2, 3, 32, 32)).astype(np.float32)
    y = np.array([3, 7])
    ref_a, ref_g = resnet(manager.default("cpu"), x, y, hooks=True)
    print("== ResNet-18 cifar, NumPy vs device ==")
    for v in [None, *CONVS]:
        ctx = force_variant(v) if v is not None else force_variant()
        with ctx:
            acts, grads = resnet(dev, x, y, hooks=True)
            _, grads2 = resnet(dev, x, y, hooks=False)
        name = v.name if v is not None else "default routing"
        print(name)
        compare("forward", ref_a, acts, 4)
        compare("grads (hooked run)", ref_g, grads, 4)
        compare("grads (no hooks)", ref_g, grads2, 4)
        compare("grads no-hooks vs hooked", grads, grads2, 2)


def main() -> None:
    dev = manager.default(sys.argv[1] if len(sys.argv) > 1 else "cl")
    assert dev is not None
    print("device:", dev, get_kernel_selector(dev.queue.device).profile.name, flush=True)
    conv_shapes(dev)
    resnet_check(dev)


if __name__ == "__main__":
    main()
