"""capture on the NumPy backend: a replayed training step equals eager steps bitwise (an MLP,
the digits CNN with BatchNorm and max pooling, a narrow ResNet-18; SGD with momentum, Adam with
dropout, a learning-rate change through a Param), random draws follow the generators, and what
a replay could not repeat raises its typed error (NOTE [ Replaying NumPy calls ] in
netcl.runtime._numpy_graph)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.ops as ops
from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.nn import (
    BatchNorm2d,
    Conv2d,
    Dropout,
    Flatten,
    Linear,
    MaxPool2d,
    Module,
    ReLU,
    Sequential,
    manual_seed,
    resnet18,
)
from netcl.optim import SGD, Adam, Optimizer, clip_grad_norm_device
from netcl.runtime import (
    CaptureUnsupportedError,
    HostReadError,
    InputMismatchError,
    Param,
    UnstableStepError,
    capture,
)

STEPS = 5


@pytest.fixture
def np_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cpu":
        pytest.skip("the NumPy backend's capture")
    return dev


def mlp(q: Any) -> Module:
    rng = np.random.default_rng(0)
    return Sequential(Linear(21, 33, queue=q, rng=rng), ReLU(), Dropout(0.3),
                      Linear(33, 10, queue=q, rng=rng))


def digits_cnn(q: Any) -> Module:
    rng = np.random.default_rng(0)
    return Sequential(
        Conv2d(1, 16, 3, padding=1, queue=q, rng=rng), BatchNorm2d(16, queue=q), ReLU(),
        Conv2d(16, 32, 3, padding=1, queue=q, rng=rng), BatchNorm2d(32, queue=q), ReLU(),
        MaxPool2d(2), Flatten(), Linear(32 * 4 * 4, 10, queue=q, rng=rng),
    )


def small_resnet18(q: Any) -> Module:
    return resnet18(num_classes=10, stem="cifar", width=8, queue=q)


def _step(model: Module, opt: Optimizer) -> Callable[[Tensor, Tensor], Tensor]:
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
           adam: bool, captured: bool) -> tuple[list[Any], Any]:
    manual_seed(3)
    model = make(dev.queue)
    opt: Optimizer = (Adam(model.parameters(), lr=3e-3) if adam
                      else SGD(model.parameters(), lr=0.05, momentum=0.9))
    step: Any = _step(model, opt)
    if captured:
        step = capture(step, params={"lr": Param.item(opt.param_groups[0], "lr")})
    seen = []
    for i, (x, y) in enumerate(_batches(shape)):
        if i == 3:
            opt.param_groups[0]["lr"] *= 0.5  # a scheduler's change, without a new capture
        loss = step(Tensor.from_host(dev.queue, x), Tensor.from_host(dev.queue, y))
        seen.append(loss.to_host().copy())
    seen += [p.to_host().copy() for p in model.parameters()]
    seen += [b.to_host().copy() for b in model.buffers()]  # BatchNorm's running statistics
    return seen, step


@pytest.mark.parametrize("make, shape, adam", [
    (mlp, (17, 21), True), (mlp, (17, 21), False), (digits_cnn, (13, 1, 8, 8), True),
    (digits_cnn, (13, 1, 8, 8), False), (small_resnet18, (3, 3, 9, 9), False)],
    ids=["mlp-adam", "mlp-sgd", "digits-adam", "digits-sgd", "resnet18-sgd"])
def test_replay_equals_eager_bitwise(np_dev: DeviceHandle, make: Callable[[Any], Module],
                                     shape: tuple[int, ...], adam: bool) -> None:
    eager, _ = _train(np_dev, make, shape, adam, captured=False)
    replayed, step = _train(np_dev, make, shape, adam, captured=True)
    assert step.mode == "graph" and step.graph.calls > 0
    assert len(eager) == len(replayed)
    for a, b in zip(eager, replayed):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("accumulate", [False, True])
def test_clipping_replays_and_accumulation_is_refused(np_dev: DeviceHandle,
                                                      accumulate: bool) -> None:
    """clip_grad_norm_device inside the step; zero_grad(set_to_none=False) keeps gradient
    tensors that the next call accumulates into: refused, as a replay would read stale ones."""
    runs = []
    for captured in (False, True):
        manual_seed(3)
        model = mlp(np_dev.queue)
        opt = SGD(model.parameters(), lr=0.05, momentum=0.9)

        def step(x: Tensor, y: Tensor, model: Module = model, opt: Optimizer = opt
                 ) -> tuple[Tensor, Tensor]:
            with ag.Tape() as tape:
                loss = ag.cross_entropy(model(x), y)
            tape.backward(loss)
            norm = clip_grad_norm_device(model.parameters(), 0.5)
            opt.step()
            opt.zero_grad(set_to_none=not accumulate)
            return loss, norm

        run: Any = capture(step) if captured else step
        if captured and accumulate:
            xt, yt = (Tensor.from_host(np_dev.queue, a) for a in _batches((17, 21))[0])
            run(xt, yt)
            with pytest.raises(UnstableStepError, match="previous call made"):
                run(xt, yt)
            return
        seen = []
        for xa, ya in _batches((17, 21)):
            loss, norm = run(Tensor.from_host(np_dev.queue, xa),
                             Tensor.from_host(np_dev.queue, ya))
            seen += [loss.to_host().copy(), norm.to_host().copy()]
        runs.append(seen + [p.to_host().copy() for p in model.parameters()])
    assert run.mode == "graph"
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_dropout_masks_follow_the_generator(np_dev: DeviceHandle) -> None:
    q = np_dev.queue
    x = Tensor.from_host(q, np.ones((5, 7), np.float32))

    def draws(t: Tensor) -> tuple[Tensor, ...]:
        return (ops.dropout(t, 0.5)[1], ops.uniform(q, (3,)), ops.normal(q, (2, 3)),
                ops.bernoulli(q, (9,), 0.3), ops.random_bits(q, (2,)))

    manual_seed(5)
    eager = [[d.to_host().copy() for d in draws(x)] for _ in range(4)]
    manual_seed(5)
    step = capture(draws, warmup=1)
    replayed = [[d.to_host().copy() for d in step(x)] for _ in range(4)]
    assert step.mode == "graph"
    for a, b in zip(eager, replayed, strict=True):
        for u, v in zip(a, b, strict=True):
            np.testing.assert_array_equal(u, v)
    assert all((a[0] != b[0]).any() for a, b in itertools.pairwise(replayed))


def test_out_of_range_label_raises_at_the_replay(np_dev: DeviceHandle) -> None:
    model = mlp(np_dev.queue)
    step = capture(_step(model, SGD(model.parameters(), lr=0.01)), warmup=0)
    x = Tensor.from_host(np_dev.queue, np.zeros((17, 21), np.float32))
    step(x, Tensor.from_host(np_dev.queue, np.zeros(17, np.int64)))
    with pytest.raises(ValueError, match="label 12 is out of range for 10 classes"):
        step(x, Tensor.from_host(np_dev.queue, np.full(17, 12, np.int64)))


def test_index_ops_replay_and_check_each_call(np_dev: DeviceHandle) -> None:
    q = np_dev.queue
    x = Tensor.from_host(q, np.arange(21, dtype=np.float32).reshape(3, 7))
    row = Tensor.from_host(q, np.arange(7, dtype=np.float32).reshape(1, 7) * 0.5)

    def step(idx: Tensor) -> tuple[Tensor, Tensor]:
        return ops.index_select(x, 1, idx), ops.gather(row, 1, ops.reshape(idx, (1, 5)))

    run = capture(step, warmup=0)
    for values in ([0, 6, 2, 2, 5], [1, 1, 3, 0, 4]):
        idx = Tensor.from_host(q, np.array(values, np.int64))
        for a, b in zip(run(idx), step(idx), strict=True):
            np.testing.assert_array_equal(a.to_host(), b.to_host())
    assert run.mode == "graph"
    with pytest.raises(IndexError, match="index 7 is out of range"):
        run(Tensor.from_host(q, np.array([0, 7, 1, 1, 1], np.int64)))


def test_another_shape_is_refused(np_dev: DeviceHandle) -> None:
    step = capture(lambda t: ops.mul(t, 2.0), warmup=0)
    step(Tensor.from_host(np_dev.queue, np.ones(3, np.float32)))
    with pytest.raises(InputMismatchError, match="shape"):
        step(Tensor.from_host(np_dev.queue, np.ones(4, np.float32)))


def test_host_read_inside_the_step_is_refused(np_dev: DeviceHandle) -> None:
    def step(t: Tensor) -> Tensor:
        return ops.mul(t, 2.0) if float(t.to_host().sum()) > 0 else t

    with pytest.raises(HostReadError, match=r"Tensor\.to_host"):
        capture(step, warmup=0)(Tensor.from_host(np_dev.queue, np.ones(3, np.float32)))


def test_numpy_work_outside_the_hook_is_refused(np_dev: DeviceHandle) -> None:
    def step(t: Tensor) -> Tensor:
        arr = t.array
        assert arr is not None
        doubled = Tensor.from_host(t.queue, arr * 2)  # NumPy work no hook sees
        return ops.add(doubled, 1.0)

    with pytest.raises(CaptureUnsupportedError, match="numpy_call"):
        capture(step, warmup=0)(Tensor.from_host(np_dev.queue, np.ones(3, np.float32)))


def test_a_scalar_that_changes_without_a_param_is_refused(np_dev: DeviceHandle) -> None:
    count = itertools.count(1)

    def step(t: Tensor) -> Tensor:
        return ops.mul(t, float(next(count)))  # a Python counter, not a graph parameter

    with pytest.raises(UnstableStepError, match="follows no graph parameter"):
        capture(step, warmup=0)(Tensor.from_host(np_dev.queue, np.ones(3, np.float32)))
