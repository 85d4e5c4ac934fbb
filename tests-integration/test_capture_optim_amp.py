"""Optimizers and GradScaler without host reads: eager results against the PyTorch formulas
(step counts and bias corrections on the device, skipped steps, scale backoff and growth) on
every device, and ``netcl.runtime.capture`` replaying Adam, AdamW, SGD-momentum and AMP
(autocast + GradScaler) training steps of an MLP bitwise as the eager steps compute them, with
a scheduler changing the learning rate through a graph parameter and an overflowing step that
is skipped on the device."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.core.testing import assert_close
from netcl.nn import GradScaler, Linear, Module, ReLU, Sequential, autocast
from netcl.nn import functional as F
from netcl.optim import SGD, Adam, AdamW, Optimizer, StepLR
from netcl.runtime import Param, capture

STEPS = 7
IN, HIDDEN, OUT, BATCH = 7, 33, 5, 9  # odd sizes: no dimension a multiple of a tile


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("graph capture runs on OpenCL devices")
    return dev


def mlp(q: Any) -> Module:
    rng = np.random.default_rng(0)
    return Sequential(Linear(IN, HIDDEN, queue=q, rng=rng), ReLU(),
                      Linear(HIDDEN, OUT, queue=q, rng=rng))


def _batches(overflow_at: int | None = None) -> list[tuple[np.ndarray[Any, Any],
                                                        np.ndarray[Any, Any]]]:
    rng = np.random.default_rng(1)
    out = []
    for i in range(STEPS):
        x = rng.standard_normal((BATCH, IN)).astype(np.float32)
        if i == overflow_at:
            x[3, 2] = np.inf  # the loss and every gradient become inf/NaN
        out.append((x, rng.integers(0, OUT, BATCH).astype(np.int64)))
    return out


OPTIMIZERS: dict[str, Callable[[list[Tensor]], Optimizer]] = {
    "adam": lambda ps: Adam(ps, lr=1e-2),
    "adamw": lambda ps: AdamW(ps, lr=1e-2, weight_decay=0.1, betas=(0.8, 0.99)),
    "sgd_momentum": lambda ps: SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
}


def _train(dev: DeviceHandle, make_opt: Callable[[list[Tensor]], Optimizer], captured: bool,
           amp: bool = False, overflow_at: int | None = None) -> dict[str, Any]:
    model = mlp(dev.queue)
    opt = make_opt(list(model.parameters()))
    sched = StepLR(opt, step_size=3, gamma=0.5)
    scaler = GradScaler(init_scale=2.0**10, growth_interval=2) if amp else None

    def step(x: Tensor, y: Tensor) -> Tensor:
        with ag.Tape() as tape:
            if scaler is None:
                loss = F.cross_entropy(model(x), y)
                tape_loss = loss
            else:
                with autocast():
                    loss = F.cross_entropy(model(x), y)
                tape_loss = scaler.scale(loss)
        tape.backward(tape_loss)
        if scaler is None:
            opt.step()
        else:
            scaler.step(opt)
            scaler.update()
        opt.zero_grad()
        return loss

    run: Any = step
    if captured:
        run = capture(step, params={"lr": Param.item(opt.param_groups[0], "lr")})
    out: dict[str, Any] = {"losses": [], "params": [], "scales": [], "skipped": []}
    for x, y in _batches(overflow_at):
        loss = run(Tensor.from_host(dev.queue, x), Tensor.from_host(dev.queue, y))
        sched.step()  # the lr changes between calls: a graph parameter, no new capture
        out["losses"].append(loss.to_host().copy())
        out["params"].append([p.to_host().copy() for p in model.parameters()])
        if scaler is not None:
            out["scales"].append(scaler.get_scale())
            out["skipped"].append(int(scaler.found_inf.to_host()[0]))  # type: ignore[union-attr]
    out["steps"] = [s["step"] for s in opt.state_dict()["state"].values()]
    out["mode"] = getattr(run, "mode", "eager")
    return out


def _assert_bitwise(eager: dict[str, Any], replay: dict[str, Any]) -> None:
    for a, b in zip(eager["losses"], replay["losses"], strict=True):
        np.testing.assert_array_equal(a, b)
    for step_a, step_b in zip(eager["params"], replay["params"], strict=True):
        for a, b in zip(step_a, step_b, strict=True):
            np.testing.assert_array_equal(a, b)
    assert eager["scales"] == replay["scales"] and eager["skipped"] == replay["skipped"]
    assert eager["steps"] == replay["steps"]


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_captured_optimizer_step_replays_eager_bitwise(cl_dev: DeviceHandle, name: str) -> None:
    eager = _train(cl_dev, OPTIMIZERS[name], captured=False)
    replay = _train(cl_dev, OPTIMIZERS[name], captured=True)
    assert replay["mode"] == "graph"
    _assert_bitwise(eager, replay)
    assert replay["steps"] == [STEPS] * 4  # counted on the device, once per call


@pytest.mark.parametrize("name", ["adam", "sgd_momentum"])
def test_captured_amp_step_skips_an_overflow_on_the_device(cl_dev: DeviceHandle,
                                                          name: str) -> None:
    overflow_at = 4
    eager = _train(cl_dev, OPTIMIZERS[name], captured=False, amp=True, overflow_at=overflow_at)
    replay = _train(cl_dev, OPTIMIZERS[name], captured=True, amp=True, overflow_at=overflow_at)
    assert replay["mode"] == "graph"
    _assert_bitwise(eager, replay)
    # growth_interval 2: doubled after steps 1 and 3; the overflow halves it and is skipped
    assert replay["scales"] == [2.0**10, 2.0**11, 2.0**11, 2.0**12, 2.0**11, 2.0**11, 2.0**12]
    assert replay["skipped"] == [0, 0, 0, 0, 1, 0, 0]
    for a, b in zip(replay["params"][overflow_at - 1], replay["params"][overflow_at]):
        np.testing.assert_array_equal(a, b)  # the skipped step left the weights alone
    assert replay["steps"] == [STEPS - 1] * 4  # and did not count


# -- eager, every backend: against the formulas ------------------------------------------------


def _ref_adam_skipping(p: Any, grads: list[Any], lr: float, betas: tuple[float, float],
                       eps: float) -> Any:
    """PyTorch's Adam over the finite gradients only (a skipped step does not count)."""
    m, v, t = np.zeros_like(p), np.zeros_like(p), 0
    b1, b2 = betas
    for g in grads:
        if not np.isfinite(g).all():
            continue
        t += 1
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return p


def _ref_scales(init: float, grads: list[Any], growth: float, backoff: float,
                interval: int) -> list[float]:
    """PyTorch's ``_amp_update_scale_`` after each step."""
    scale, tracker, out = init, 0, []
    for g in grads:
        if not np.isfinite(g * scale).all():
            scale, tracker = scale * backoff, 0
        else:
            tracker += 1
            if tracker == interval:
                scale, tracker = scale * growth, 0
        out.append(scale)
    return out


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")  # NumPy on the infs
@pytest.mark.parametrize("shape", [(1,), (33, 3), (257,)], ids=str)
def test_grad_scaler_with_adam_matches_the_formulas(dev: DeviceHandle,
                                                    shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(shape[0])
    p0 = rng.standard_normal(shape).astype(np.float32)
    grads = [rng.standard_normal(shape).astype(np.float32) for _ in range(12)]
    for i in (2, 3, 8):  # inf, NaN, inf: skipped steps and backoffs, growth between them
        grads[i] = grads[i].copy()
        grads[i].flat[-1] = np.nan if i == 3 else np.inf
    p = Tensor.from_host(dev.queue, p0)
    opt = Adam([p], lr=0.01, betas=(0.9, 0.999), eps=1e-8)
    scaler = GradScaler(init_scale=8.0, growth_factor=2.0, backoff_factor=0.25,
                        growth_interval=3)
    scales, skipped = [], []
    for g in grads:
        p.grad = Tensor.from_host(dev.queue, g * np.float32(scaler.get_scale()))
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        skipped.append(int(scaler.found_inf.to_host()[0]))  # type: ignore[union-attr]
    assert scales == _ref_scales(8.0, grads, 2.0, 0.25, 3)
    assert skipped == [int(not np.isfinite(g).all()) for g in grads]
    expect = _ref_adam_skipping(p0.astype(np.float64), [g.astype(np.float64) for g in grads],
                                0.01, (0.9, 0.999), 1e-8)
    assert_close(p.to_host(), expect, "float32", scale=2.0)
    assert opt.state[0]["step"] == 9 and opt.state_dict()["state"][0]["step"] == 9
    assert scaler.state_dict()["_growth_tracker"] == 0  # grew at the last step


def test_scale_stops_growing_before_float32_overflows(dev: DeviceHandle) -> None:
    p = Tensor.from_host(dev.queue, np.zeros(3, np.float32))
    opt = SGD([p], lr=0.1)
    scaler = GradScaler(init_scale=2.0**126, growth_factor=4.0, growth_interval=1)
    for _ in range(2):
        p.grad = Tensor.from_host(dev.queue, np.zeros(3, np.float32))
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 2.0**126  # 2**128 is inf in float32: kept, as PyTorch does
