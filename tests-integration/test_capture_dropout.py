"""netcl.runtime.capture of training steps with dropout on every OpenCL device: an MLP with
Dropout layers (one on the default generator, one with a seed of its own; odd sizes) trained
with SGD replays bitwise what eager steps compute over several steps, drawing fresh masks each
step; eager and replayed calls interleave and give the all-eager sequence; manual_seed replays
a captured run, and a reseed between calls is followed; both generators end where eager
execution leaves them."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.ops as ops
from netcl.core import Tensor
from netcl.core.device import DeviceHandle, manager
from netcl.nn import Dropout, Linear, ReLU, Sequential, manual_seed
from netcl.ops import default_generator
from netcl.optim import SGD
from netcl.runtime import HostReadError, Param, capture

STEPS = 7
_NUMPY = manager.default("cpu")
assert _NUMPY is not None
NUMPY = _NUMPY.queue
BATCH, FEATURES, HIDDEN, CLASSES = 19, 21, 37, 10


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("graph capture runs on OpenCL devices")
    return dev


def dropout_mlp(q: Any) -> Sequential:
    rng = np.random.default_rng(0)
    return Sequential(Linear(FEATURES, HIDDEN, queue=q, rng=rng), ReLU(), Dropout(0.3),
                      Linear(HIDDEN, 13, queue=q, rng=rng), ReLU(), Dropout(0.5, seed=11),
                      Linear(13, CLASSES, queue=q, rng=rng))


def _batches() -> list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((BATCH, FEATURES)).astype(np.float32),
             rng.integers(0, CLASSES, BATCH)) for _ in range(STEPS)]


def _train(dev: DeviceHandle, captured: bool, eager_at: Sequence[int] = (),
           reseed_at: int | None = None) -> tuple[list[Any], Any]:
    """Losses and hidden activations after dropout of each call, the parameters, both
    generators' states; calls in ``eager_at`` run the step function itself."""
    manual_seed(5)
    model = dropout_mlp(dev.queue)
    head, tail, seeded = model[:3], model[3:], model[5]  # head ends with the first dropout
    assert isinstance(seeded, Dropout) and seeded.generator is not None
    opt = SGD(model.parameters(), lr=0.05, momentum=0.9)

    def step(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        with ag.Tape() as tape:
            hidden = head(x)
            loss = ag.cross_entropy(tail(hidden), y)
        tape.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss, hidden

    run: Callable[..., Any] = step
    if captured:
        run = capture(step, params={"lr": Param.item(opt.param_groups[0], "lr")})
    seen = []
    for i, (x, y) in enumerate(_batches()):
        if i == 3:
            opt.param_groups[0]["lr"] = 0.01
        if i == reseed_at:
            manual_seed(8)
        call = step if i in eager_at else run
        loss, hidden = call(Tensor.from_host(dev.queue, x), Tensor.from_host(dev.queue, y))
        seen += [loss.to_host().copy(), hidden.to_host().copy()]
    seen += [p.to_host().copy() for p in model.parameters()]
    states = (default_generator.seed, default_generator.offset, seeded.generator.offset)
    return seen, (states, run)


def _assert_same(a: list[Any], b: list[Any]) -> None:
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)


def test_replay_equals_eager_bitwise_with_fresh_masks(cl_dev: DeviceHandle) -> None:
    eager, (eager_states, _) = _train(cl_dev, captured=False)
    replayed, (states, step) = _train(cl_dev, captured=True)
    assert step.mode == "graph" and step.graph.params["rng0.offset"] == 1
    assert step.graph.params["rng1.offset"] == 1
    _assert_same(eager, replayed)
    assert states == eager_states == (5, STEPS * 704, STEPS * 248)  # 19*37 -> 704, 19*13 -> 248
    # step i drops where the default generator's words at offset 704 * i say (NumPy reference)
    ones = Tensor.from_host(NUMPY, np.ones((BATCH, HIDDEN), np.float32))
    masks = [ops.dropout(ones, 0.3, seed=5, offset=704 * i)[1].to_host() for i in range(STEPS)]
    for mask, hidden in zip(masks, replayed[1:2 * STEPS:2], strict=True):
        assert not hidden[mask == 0].any()
    assert all((a != b).any() for a, b in itertools.pairwise(masks))


def test_eager_and_replayed_calls_interleave(cl_dev: DeviceHandle) -> None:
    eager, (eager_states, _) = _train(cl_dev, captured=False)
    mixed, (states, step) = _train(cl_dev, captured=True, eager_at=(3, 5))
    assert step.mode == "graph" and step.calls == STEPS - 2
    _assert_same(eager, mixed)
    assert states == eager_states


def test_manual_seed_replays_a_captured_run(cl_dev: DeviceHandle) -> None:
    eager, (eager_states, _) = _train(cl_dev, captured=False, reseed_at=4)
    first, (states, _) = _train(cl_dev, captured=True, reseed_at=4)
    again, _ = _train(cl_dev, captured=True, reseed_at=4)
    _assert_same(eager, first)
    _assert_same(first, again)
    assert states == eager_states == (8, 3 * 704, STEPS * 248)


def test_numpy_backend_draws_the_same_masks(dev: DeviceHandle) -> None:
    """The NumPy backend captures the step too: the same numbers as without capture, the
    generators left where eager steps leave them."""
    if dev.backend != "cpu":
        pytest.skip("the NumPy backend's capture")
    eager, (eager_states, _) = _train(dev, captured=False)
    mixed, (states, step) = _train(dev, captured=True, eager_at=(3,), reseed_at=4)
    again, (again_states, _) = _train(dev, captured=True)
    assert step.mode == "graph"
    _assert_same(eager, again)
    assert again_states == eager_states
    reseeded, (reseeded_states, _) = _train(dev, captured=False, reseed_at=4)
    _assert_same(reseeded, mixed)
    assert states == reseeded_states


def test_layers_made_inside_the_step_are_refused(cl_dev: DeviceHandle) -> None:
    """Weight initialisation draws on the host from the default generator: a replay could not
    repeat it, so the capture refuses it by name and leaves the generator as it was."""
    x = Tensor.from_host(cl_dev.queue, np.ones((BATCH, FEATURES), np.float32))
    step = capture(lambda t: Linear(FEATURES, 3, queue=cl_dev.queue)(t), warmup=0)
    manual_seed(2)
    with pytest.raises(HostReadError, match=r"numpy_generator: weight initialisation"):
        step(x)
    assert (default_generator.seed, default_generator.offset) == (2, 0)
