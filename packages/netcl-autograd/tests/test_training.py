"""A small MLP and a small CNN trained for a few SGD steps give the same loss curve on every
backend (the MLP also matches a hand-written NumPy float64 backprop)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import netcl.autograd as ag
import netcl.ops
from netcl.autograd import compiler, ops
from netcl.core.device import DeviceHandle, manager
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close

rng = np.random.default_rng(5)
X = rng.standard_normal((32, 10))
Y = rng.integers(0, 3, size=32)
MLP_INIT = [rng.standard_normal((10, 16)) * 0.4, np.zeros(16),
            rng.standard_normal((16, 3)) * 0.4, np.zeros(3)]
IMG = rng.standard_normal((8, 1, 8, 8))
IMG_Y = rng.integers(0, 3, size=8)
CNN_INIT = [rng.standard_normal((4, 1, 3, 3)) * 0.5, np.zeros(4), np.ones(4), np.zeros(4),
            rng.standard_normal((64, 3)) * 0.2, np.zeros(3)]

Model = Callable[[Tensor, Sequence[Tensor]], Tensor]


def mlp(x: Tensor, p: Sequence[Tensor]) -> Tensor:
    h = ops.relu(ops.add(ops.matmul(x, p[0]), p[1]))
    return ops.add(ops.matmul(h, p[2]), p[3])


fused_bias_relu = compiler.jit(lambda h, b: ops.relu(h + b))


def mlp_fused(x: Tensor, p: Sequence[Tensor]) -> Tensor:
    h = fused_bias_relu(ops.matmul(x, p[0]), p[1])
    return ops.add(ops.matmul(h, p[2]), p[3])


def cnn(x: Tensor, p: Sequence[Tensor]) -> Tensor:
    h = ops.conv2d(x, p[0], p[1], padding=1)
    h = ops.relu(ops.batch_norm(h, None, None, p[2], p[3], training=True))
    h = ops.flatten(ops.max_pool2d(h, 2), 1)  # (8, 4 * 4 * 4)
    return ops.add(ops.matmul(h, p[4]), p[5])


def train(dev: DeviceHandle, model: Model, init: Sequence[np.ndarray[Any, Any]],
          x: np.ndarray[Any, Any], y: np.ndarray[Any, Any], steps: int, lr: float
          ) -> list[float]:
    params = [Tensor.from_host(dev.queue, a) for a in init]
    xt, yt = Tensor.from_host(dev.queue, x), Tensor.from_host(dev.queue, y)
    losses = []
    for _ in range(steps):
        for p in params:
            p.requires_grad = True
        with ag.Tape() as tape:
            loss = ag.cross_entropy(model(xt, params), yt)
        tape.backward(loss)
        losses.append(float(loss.to_host()))
        # SGD on the device; the new values are fresh leaves for the next step
        params = [netcl.ops.sub(p, netcl.ops.mul(p.grad, lr)) for p in params]  # type: ignore[arg-type]
    return losses


def mlp_reference(steps: int, lr: float) -> list[float]:
    w1, b1, w2, b2 = (a.copy() for a in MLP_INIT)
    losses = []
    for _ in range(steps):
        z = X @ w1 + b1
        h = np.maximum(z, 0)
        logits = h @ w2 + b2
        e = np.exp(logits - logits.max(1, keepdims=True))
        p = e / e.sum(1, keepdims=True)
        losses.append(float(-np.log(p[np.arange(32), Y]).mean()))
        d = p.copy()
        d[np.arange(32), Y] -= 1
        d /= 32
        gw2, gb2 = h.T @ d, d.sum(0)
        dz = (d @ w2.T) * (z > 0)
        gw1, gb1 = X.T @ dz, dz.sum(0)
        w1, b1, w2, b2 = w1 - lr * gw1, b1 - lr * gb1, w2 - lr * gw2, b2 - lr * gb2
    return losses


def test_mlp_loss_curve_matches_numpy_backprop(dev: DeviceHandle) -> None:
    want = mlp_reference(6, 0.5)
    assert want[-1] < want[0]
    for model in (mlp, mlp_fused):
        got = train(dev, model, MLP_INIT, X, Y, 6, 0.5)
        assert_close(got, want, "float32")


def test_cnn_loss_curve_is_the_same_on_every_backend(dev: DeviceHandle) -> None:
    cpu = manager.default("cpu")
    assert cpu is not None
    want = train(cpu, cnn, CNN_INIT, IMG, IMG_Y, 5, 0.2)
    assert want[-1] < want[0]
    got = train(dev, cnn, CNN_INIT, IMG, IMG_Y, 5, 0.2)
    assert_close(got, want, "float32", scale=2.0)  # five steps of a CNN, each through conv
