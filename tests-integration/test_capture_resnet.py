"""netcl.runtime.capture of a narrow ResNet-18 training step on every OpenCL device: residual
blocks, strided convolutions, BatchNorm, dropout before the classifier, AMP (autocast +
GradScaler) and momentum SGD or Adam with a scheduler changing the learning rate through a
graph parameter. Over several steps the replayed losses, parameters, BatchNorm statistics,
optimizer state, GradScaler state and random generator replay bitwise what an eager twin
computes, including a step whose gradients overflow (an inf injected through a second graph
parameter): it is skipped on the device, the loss scale backs off and then grows again."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.autograd.ops as agops
from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.nn import Dropout, GradScaler, Sequential, autocast, manual_seed, resnet18
from netcl.nn import functional as F
from netcl.ops import default_generator
from netcl.optim import SGD, Adam, LRScheduler, Optimizer, StepLR, WarmupCosine
from netcl.runtime import Param, capture

STEPS = 8
OVERFLOW_AT = 4  # this step's gradients are inf: skipped, the scale backs off
SHAPE = (3, 3, 11, 11)  # odd sizes: 11 -> 11, 6, 3, 2 through the strided stages
CLASSES = 7


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("graph capture runs on OpenCL devices")
    return dev


def dropout_resnet18(q: Any) -> Sequential:
    """ResNet-18 at width 4 with a dropout between the pooled features and the classifier."""
    net = resnet18(num_classes=CLASSES, stem="cifar", width=4, queue=q)
    return Sequential(net.conv1, net.bn1, net.relu, net.maxpool, net.layer1, net.layer2,
                      net.layer3, net.layer4, net.avgpool, net.flatten, Dropout(0.25), net.fc)


@dataclass
class Poison:
    """A factor on the scaled loss: 1, or inf for the step whose gradients overflow."""

    factor: float = 1.0


def _sgd(params: list[Tensor]) -> tuple[Optimizer, Callable[[Optimizer], LRScheduler]]:
    opt = SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-4)
    return opt, lambda o: StepLR(o, step_size=3, gamma=0.5)


def _adam(params: list[Tensor]) -> tuple[Optimizer, Callable[[Optimizer], LRScheduler]]:
    opt = Adam(params, lr=1e-2, betas=(0.8, 0.99))
    return opt, lambda o: WarmupCosine(o, warmup_steps=2, total_steps=STEPS)


OPTIMIZERS = {"sgd_momentum_steplr": _sgd, "adam_warmup_cosine": _adam}


def _batches() -> list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    rng = np.random.default_rng(3)
    return [(rng.standard_normal(SHAPE).astype(np.float32),
             rng.integers(0, CLASSES, SHAPE[0]).astype(np.int64)) for _ in range(STEPS)]


def _train(dev: DeviceHandle, make_opt: Any, captured: bool) -> dict[str, Any]:
    manual_seed(17)
    model = dropout_resnet18(dev.queue)
    opt, make_sched = make_opt(list(model.parameters()))
    sched = make_sched(opt)
    scaler = GradScaler(init_scale=2.0**9, growth_interval=2)
    poison = Poison()

    def step(x: Tensor, y: Tensor) -> Tensor:
        with ag.Tape() as tape:
            with autocast():
                loss = F.cross_entropy(model(x), y)
            scaled = agops.mul(scaler.scale(loss), poison.factor)
        tape.backward(scaled)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        return loss

    run: Any = step
    if captured:
        run = capture(step, params={"lr": Param.item(opt.param_groups[0], "lr"),
                                    "poison": Param.attribute(poison, "factor")})
    out: dict[str, Any] = {"losses": [], "params": [], "scales": [], "skipped": [], "lrs": []}
    for i, (x, y) in enumerate(_batches()):
        poison.factor = float("inf") if i == OVERFLOW_AT else 1.0
        out["lrs"].append(opt.param_groups[0]["lr"])
        loss = run(Tensor.from_host(dev.queue, x), Tensor.from_host(dev.queue, y))
        sched.step()  # the lr changes between calls: a graph parameter, no new capture
        out["losses"].append(loss.to_host().copy())
        out["params"].append([p.to_host().copy() for p in model.parameters()])
        out["scales"].append(scaler.get_scale())
        out["skipped"].append(int(scaler.found_inf.to_host()[0]))  # type: ignore[union-attr]
    out["buffers"] = [b.to_host().copy() for b in model.buffers()]
    out["opt"] = opt.state_dict()["state"]
    out["scaler"] = scaler.state_dict()
    out["rng"] = (int(default_generator.seed), int(default_generator.offset))
    out["mode"] = getattr(run, "mode", "eager")
    out["graph"] = getattr(run, "graph", None)
    return out


def _assert_bitwise(eager: dict[str, Any], replay: dict[str, Any]) -> None:
    for a, b in zip(eager["losses"], replay["losses"], strict=True):
        np.testing.assert_array_equal(a, b)
    for step_a, step_b in zip(eager["params"], replay["params"], strict=True):
        for a, b in zip(step_a, step_b, strict=True):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(eager["buffers"], replay["buffers"], strict=True):
        np.testing.assert_array_equal(a, b)  # BatchNorm running statistics
    assert eager["opt"].keys() == replay["opt"].keys()
    for index, state in eager["opt"].items():
        other = replay["opt"][index]
        assert state.keys() == other.keys()
        for key, value in state.items():
            np.testing.assert_array_equal(value, other[key], err_msg=f"state {index} {key}")
    assert eager["scaler"] == replay["scaler"]
    assert eager["scales"] == replay["scales"] and eager["skipped"] == replay["skipped"]
    assert eager["lrs"] == replay["lrs"] and eager["rng"] == replay["rng"]


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_captured_resnet18_amp_dropout_step_replays_eager_bitwise(cl_dev: DeviceHandle,
                                                                  name: str) -> None:
    eager = _train(cl_dev, OPTIMIZERS[name], captured=False)
    replay = _train(cl_dev, OPTIMIZERS[name], captured=True)
    assert replay["mode"] == "graph"
    graph = replay["graph"]
    assert graph.params["lr"] > 0 and graph.params["poison"] > 0
    assert any(param.startswith("rng") for param in graph.params)  # the dropout's generator
    _assert_bitwise(eager, replay)
    # growth_interval 2: doubled after steps 1 and 3, halved by the overflow, doubled after 6
    assert replay["scales"] == [2.0**9, 2.0**10, 2.0**10, 2.0**11, 2.0**10, 2.0**10, 2.0**11,
                                2.0**11]
    assert replay["skipped"] == [0, 0, 0, 0, 1, 0, 0, 0]
    for a, b in zip(replay["params"][OVERFLOW_AT - 1], replay["params"][OVERFLOW_AT]):
        np.testing.assert_array_equal(a, b)  # the skipped step left the weights alone
    assert all(state["step"] == STEPS - 1 for state in replay["opt"].values())
    assert replay["rng"][1] > 0  # the dropout drew from the default generator every step
    assert len(set(replay["lrs"])) > 2  # the scheduler moved the learning rate
    assert not np.array_equal(replay["params"][0][0], replay["params"][-1][0])
