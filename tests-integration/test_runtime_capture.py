"""netcl.runtime.capture on real training steps (netcl.nn + netcl.optim + netcl.autograd) on
every OpenCL device: an MLP, the digits CNN (convolutions, BatchNorm, max-pooling,
cross-entropy) and a narrow ResNet-18 (residual blocks, strided convolutions) replay bitwise
what eager steps compute, over several steps with a learning-rate change between them as a
graph parameter; the NumPy backend runs the step eagerly. Adam, AMP and dropout steps:
test_capture_optim_amp.py and test_capture_dropout.py."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.nn import (
    BatchNorm2d,
    Conv2d,
    Flatten,
    Linear,
    MaxPool2d,
    Module,
    ReLU,
    Sequential,
    resnet18,
)
from netcl.optim import SGD, Optimizer
from netcl.runtime import CaptureFallbackWarning, Param, capture

STEPS = 5



@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("graph capture runs on OpenCL devices")
    return dev


def mlp(q: Any) -> Module:
    rng = np.random.default_rng(0)
    return Sequential(Linear(20, 64, queue=q, rng=rng), ReLU(), Linear(64, 10, queue=q, rng=rng))


def digits_cnn(q: Any) -> Module:
    rng = np.random.default_rng(0)
    return Sequential(
        Conv2d(1, 16, 3, padding=1, queue=q, rng=rng), BatchNorm2d(16, queue=q), ReLU(),
        Conv2d(16, 32, 3, padding=1, queue=q, rng=rng), BatchNorm2d(32, queue=q), ReLU(),
        MaxPool2d(2), Flatten(), Linear(32 * 4 * 4, 10, queue=q, rng=rng),
    )


def small_resnet18(q: Any) -> Module:
    return resnet18(num_classes=10, stem="cifar", width=8, queue=q)


def training_step(model: Module, opt: Optimizer) -> Callable[[Tensor, Tensor], Tensor]:
    def step(x: Tensor, y: Tensor) -> Tensor:
        with ag.Tape() as tape:
            loss = ag.cross_entropy(model(x), y)
        tape.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    return step


def _batches(shape: tuple[int, ...]) -> list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    rng = np.random.default_rng(1)
    return [(rng.standard_normal(shape).astype(np.float32), rng.integers(0, 10, shape[0]))
            for _ in range(STEPS)]


def _train(dev: DeviceHandle, make: Callable[[Any], Module], shape: tuple[int, ...],
           captured: bool) -> tuple[list[Any], list[Any], Any]:
    model = make(dev.queue)
    opt = SGD(model.parameters(), lr=0.05, momentum=0.9)
    step: Any = training_step(model, opt)
    if captured:
        step = capture(step, params={"lr": Param.item(opt.param_groups[0], "lr")})
    losses = []
    for i, (x, y) in enumerate(_batches(shape)):
        if i == 3:
            opt.param_groups[0]["lr"] = 0.01  # a scheduler's change, without a new capture
        loss = step(Tensor.from_host(dev.queue, x), Tensor.from_host(dev.queue, y))
        losses.append(loss.to_host().copy())
    return losses, [p.to_host().copy() for p in model.parameters()], step


@pytest.mark.parametrize("make, shape", [(mlp, (32, 20)), (digits_cnn, (64, 1, 8, 8)),
                                         (small_resnet18, (4, 3, 16, 16))],
                         ids=["mlp", "digits_cnn", "resnet18"])
def test_replay_equals_eager_bitwise(cl_dev: DeviceHandle, make: Callable[[Any], Module],
                                     shape: tuple[int, ...]) -> None:
    eager_losses, eager_params, _ = _train(cl_dev, make, shape, captured=False)
    losses, params, step = _train(cl_dev, make, shape, captured=True)
    assert step.mode == "graph" and step.graph.params["lr"] > 0
    for a, b in zip(eager_losses, losses):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(eager_params, params):
        np.testing.assert_array_equal(a, b)


def test_out_of_range_label_raises_at_sync(cl_dev: DeviceHandle) -> None:
    model = mlp(cl_dev.queue)
    step = capture(training_step(model, SGD(model.parameters(), lr=0.01)), warmup=0)
    x = Tensor.from_host(cl_dev.queue, np.zeros((32, 20), np.float32))
    good = np.zeros(32, np.int64)
    step(x, Tensor.from_host(cl_dev.queue, good))
    step(x, Tensor.from_host(cl_dev.queue, np.full(32, 12, np.int64)))
    with pytest.raises(ValueError, match="label 12 is out of range for 10 classes"):
        step.sync()
    step(x, Tensor.from_host(cl_dev.queue, good))
    step.sync()


def test_numpy_backend_captures_the_step(dev: DeviceHandle) -> None:
    """The NumPy backend captures too (tests-integration/test_capture_numpy.py compares it with
    eager steps), with no fallback warning."""
    if dev.backend != "cpu":
        pytest.skip("the NumPy backend's capture")
    model = mlp(dev.queue)
    step = capture(training_step(model, SGD(model.parameters(), lr=0.01)), warmup=0)
    x, y = _batches((32, 20))[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureFallbackWarning)
        loss = step(Tensor.from_host(dev.queue, x), Tensor.from_host(dev.queue, y))
    assert step.mode == "graph" and np.isfinite(loss.to_host())
