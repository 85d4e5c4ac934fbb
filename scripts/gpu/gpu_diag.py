"""Per-op agreement between the NumPy backend and an OpenCL device at ResNet-18 shapes, and
run-to-run determinism on the device: locates a kernel that is wrong only on one device.

    python3 scripts/gpu/gpu_diag.py [cl]
"""

from __future__ import annotations

import sys

import numpy as np

import netcl.ops as o
from netcl.core.device import manager
from netcl.core.tensor import Tensor


def main() -> None:
    cpu, dev = manager.default("cpu"), manager.default(sys.argv[1] if len(sys.argv) > 1 else "cl")
    assert cpu is not None and dev is not None
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 64, 32, 32)).astype(np.float32)
    w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32) * 0.05
    x3 = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    w3 = rng.standard_normal((64, 3, 3, 3)).astype(np.float32)
    g = rng.standard_normal((2, 64, 32, 32)).astype(np.float32)
    a = rng.standard_normal((2, 512)).astype(np.float32)
    b = rng.standard_normal((10, 512)).astype(np.float32)
    gc = rng.standard_normal((64,)).astype(np.float32)
    cases = {
        "conv_fwd_3to64": lambda q: o.conv2d(T(q, x3), T(q, w3), None, 1, 1),
        "conv_fwd_64": lambda q: o.conv2d(T(q, x), T(q, w), None, 1, 1),
        "conv_bwd_data": lambda q: o.conv2d_backward_data(T(q, g), T(q, w), x.shape, 1, 1),
        "conv_bwd_weight_3": lambda q: o.conv2d_backward_weight(T(q, x3), T(q, g), w3.shape, 1,
                                                                1),
        "conv_bwd_weight_64": lambda q: o.conv2d_backward_weight(T(q, x), T(q, g), w.shape, 1, 1),
        "sum_0_2_3": lambda q: o.sum(T(q, g), axis=(0, 2, 3)),
        "bn_train": lambda q: o.batch_norm(T(q, x), None, None, T(q, gc), T(q, gc))[0],
        "bn_bwd_dx": lambda q: _bn_bwd(q, x, g, gc)[0],
        "bn_bwd_dw": lambda q: _bn_bwd(q, x, g, gc)[1],
        "matmul_tb": lambda q: o.matmul(T(q, a), T(q, b), transpose_b=True),
        "matmul_ta": lambda q: o.matmul(T(q, a), T(q, a), transpose_a=True),
        "maxpool": lambda q: o.max_pool2d(T(q, x), 2),
        "avgpool_adapt": lambda q: o.adaptive_avg_pool2d(T(q, x), 1),
        "add_bcast": lambda q: o.add(T(q, x), T(q, gc.reshape(1, 64, 1, 1))),
        "mean_all": lambda q: o.mean(T(q, x)),
        "log_softmax": lambda q: o.log_softmax(T(q, a)),
    }
    for name, fn in cases.items():
        ref = fn(cpu.queue).to_host().astype(np.float64)
        r1 = fn(dev.queue).to_host().astype(np.float64)
        r2 = fn(dev.queue).to_host().astype(np.float64)
        err = np.abs(r1 - ref).max() / max(np.abs(ref).max(), 1e-30)
        det = np.abs(r1 - r2).max()
        flag = "  <-- MISMATCH" if err > 1e-4 else ""
        print(f"{name:20s} rel err {err:.2e}  run-to-run {det:.2e}{flag}", flush=True)


def T(q: object, a: np.ndarray) -> Tensor:
    return Tensor.from_host(q, a)


def _bn_bwd(q: object, x: np.ndarray, g: np.ndarray, gc: np.ndarray) -> tuple[Tensor, ...]:
    xt = T(q, x)
    _, mean, inv = o.batch_norm(xt, None, None, T(q, gc), T(q, gc))
    return o.batch_norm_backward(T(q, g), xt, mean, inv, T(q, gc))




def resnet_grads(device: str) -> None:
    """Per-parameter gradient agreement of ResNet-18 (CIFAR stem) between NumPy and ``device``."""
    import netcl.autograd as ag
    from netcl.nn import resnet18

    x = np.random.default_rng(4).standard_normal((2, 3, 32, 32)).astype(np.float32)
    y = np.array([3, 7])

    def run(handle: object) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        net = resnet18(num_classes=10, stem="cifar", queue=handle.queue, seed=0)  # type: ignore[attr-defined]
        with ag.Tape() as tape:
            logits = net(Tensor.from_host(handle.queue, x))  # type: ignore[attr-defined]
            loss = ag.cross_entropy(logits, Tensor.from_host(handle.queue, y))  # type: ignore[attr-defined]
        tape.backward(loss)
        return logits.to_host(), {n: p.grad.to_host() for n, p in net.named_parameters()}  # type: ignore[union-attr]

    ref_l, ref = run(manager.default("cpu"))
    got_l, got = run(manager.default(device))
    print(f"logits rel err {np.abs(got_l - ref_l).max() / np.abs(ref_l).max():.2e}")
    for name in reversed(list(ref)):
        err = np.abs(got[name] - ref[name]).max() / max(np.abs(ref[name]).max(), 1e-30)
        if err > 1e-4 or name.endswith(("fc.weight", "stem.0.weight")):
            print(f"  {name:32s} rel err {err:.2e}", flush=True)


if __name__ == "__main__":
    main()
    resnet_grads(sys.argv[1] if len(sys.argv) > 1 else "cl")
