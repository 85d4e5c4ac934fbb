"""Trainer with a captured training step: bitwise equal to eager training on every device, the
NumPy backend included (the digits CNN, 2 epochs of an odd number of batches ending in a
partial one, an lr scheduler, two param groups), also across a checkpoint and resume, a
hyperparameter change between epochs, with and without prefetching, and under AMP with a step
the GradScaler skips; a step that cannot be captured warns once and trains eagerly with the
same results."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.nn import Dropout, Flatten, Linear, ReLU, Sequential, manual_seed
from netcl.optim import SGD, Adam, StepLR
from netcl.trainer import Trainer
from netcl.trainer._digits import digits_cnn

Batches = list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]
BATCH, ROWS = 24, 24 * 6 + 11  # 7 batches, the last of 11 rows


def _batches(rows: int, seed: int) -> Batches:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 10, rows)
    return [(x[i:i + BATCH], y[i:i + BATCH]) for i in range(0, rows, BATCH)]


class _HostReadingSGD(SGD):
    """SGD that reads a weight back after its update: the capture fails after the update was
    traced (the step's state must be put back as it was)."""

    def step(self, *args: Any, **kwargs: Any) -> None:
        super().step(*args, **kwargs)
        self.param_groups[0]["params"][0].to_host()


def _trainer(dev: DeviceHandle, capture: bool, ckpt: Path | None = None, resume: bool = False,
             loss_fn: Callable[[Tensor, Tensor], Tensor] = ag.cross_entropy,
             prefetch: bool = True, optimizer: type[SGD] = SGD) -> Trainer:
    model = digits_cnn(dev.queue, seed=1)
    params = list(model.parameters())
    groups: list[dict[str, Any]] = [{"params": params[:4]},
                                     {"params": params[4:], "weight_decay": 1e-3}]
    opt = optimizer(groups, lr=0.05, momentum=0.9)
    return Trainer(model, opt, loss_fn, _batches(ROWS, 0), _batches(37, 1), device=dev,
                   epochs=2, scheduler=StepLR(opt, step_size=1, gamma=0.5),
                   checkpoint_dir=ckpt, resume=resume, progress=False, capture=capture,
                   prefetch=prefetch)


def _same_run(a: Trainer, b: Trainer) -> None:
    for ma, mb in zip(a.history, b.history):
        assert (ma.train_loss, ma.train_accuracy, ma.val_loss, ma.val_accuracy, ma.lr) == (
            mb.train_loss, mb.train_accuracy, mb.val_loss, mb.val_accuracy, mb.lr)
    for (name, ta), (_, tb) in zip(a.model.state_dict().items(), b.model.state_dict().items()):
        np.testing.assert_array_equal(ta.to_host(), tb.to_host(), err_msg=name)


def test_captured_training_equals_eager_bitwise(dev: DeviceHandle) -> None:
    eager = _trainer(dev, capture=False)
    eager.fit()
    captured = _trainer(dev, capture=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning, on NumPy either
        captured.fit()
    assert captured.step.mode == "graph"
    assert eager.step.mode == "eager" and len(captured.history) == 2
    assert captured.history[1].lr == 0.025  # the scheduler's rate reached the graph
    _same_run(eager, captured)


def test_training_without_prefetch_is_the_same(dev: DeviceHandle) -> None:
    plain = _trainer(dev, capture=True, prefetch=False)
    plain.fit()
    prefetched = _trainer(dev, capture=True)
    prefetched.fit()
    assert plain.prefetcher is None and prefetched.prefetcher is not None
    _same_run(plain, prefetched)


def test_captured_training_resumes_exactly(dev: DeviceHandle, tmp_path: Path) -> None:
    full = _trainer(dev, capture=True)
    full.fit()
    _trainer(dev, capture=True, ckpt=tmp_path).fit(stop_after=1)
    resumed = _trainer(dev, capture=True, ckpt=tmp_path, resume=True)
    resumed.fit()
    _same_run(full, resumed)


def test_hyperparameter_change_captures_again(dev: DeviceHandle) -> None:
    runs = []
    for capture in (False, True):
        trainer = _trainer(dev, capture=capture)
        trainer.fit(stop_after=1)
        trainer.optimizer.param_groups[1]["momentum"] = 0.5  # baked into the first graph
        trainer.fit()
        runs.append(trainer)
    _same_run(*runs)


def _host_reading_loss(logits: Tensor, labels: Tensor) -> Tensor:
    loss = ag.cross_entropy(logits, labels)
    if not np.isfinite(loss.to_host()):  # a host read: a replay could not repeat it
        raise FloatingPointError("loss is not finite")
    return loss


@pytest.mark.parametrize("where", ["loss", "optimizer"])
def test_step_that_cannot_be_captured_warns_once_and_trains_eagerly(dev: DeviceHandle,
                                                                    where: str) -> None:
    kwargs: dict[str, Any] = ({"loss_fn": _host_reading_loss} if where == "loss"
                              else {"optimizer": _HostReadingSGD})
    eager = _trainer(dev, capture=False, **kwargs)
    eager.fit()
    captured = _trainer(dev, capture=True, **kwargs)
    with pytest.warns(RuntimeWarning, match="cannot be captured.*Tensor.to_host") as seen:
        captured.fit()
    assert len([w for w in seen if "cannot be captured" in str(w.message)]) == 1
    assert captured.step.mode == "eager" and captured.step.failure is not None
    _same_run(eager, captured)


def _amp_trainer(dev: DeviceHandle, capture: bool) -> Trainer:
    rng = np.random.default_rng(2)
    q = dev.queue
    model = Sequential(Flatten(), Linear(64, 33, queue=q, rng=rng), ReLU(),
                       Linear(33, 10, queue=q, rng=rng))
    opt = Adam(model.parameters(), lr=3e-3)
    batches = _batches(ROWS, 3)
    batches[4][0][:] *= 3e4  # float16 overflows: the scaler skips this step
    return Trainer(model, opt, ag.cross_entropy, batches, device=dev, epochs=2,
                   scheduler=StepLR(opt, step_size=1, gamma=0.5), progress=False, amp=True,
                   capture=capture)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's float16 overflow warnings
def test_captured_amp_training_equals_eager_bitwise(dev: DeviceHandle) -> None:
    eager = _amp_trainer(dev, capture=False)
    eager.fit()
    captured = _amp_trainer(dev, capture=True)
    captured.fit()
    assert captured.step.failure is None
    assert captured.step.mode == "graph"
    # the inf batch's loss is left out of the mean (skipped step), not a divergence
    assert all(np.isfinite(m.train_loss) for m in captured.history)
    assert captured.scaler.get_scale() == eager.scaler.get_scale() < 2.0**16
    _same_run(eager, captured)


def _dropout_trainer(dev: DeviceHandle, capture: bool) -> Trainer:
    rng = np.random.default_rng(4)
    q = dev.queue
    model = Sequential(Flatten(), Linear(64, 33, queue=q, rng=rng), ReLU(), Dropout(0.3),
                       Linear(33, 10, queue=q, rng=rng))
    opt = SGD(model.parameters(), lr=0.05, momentum=0.9)
    return Trainer(model, opt, ag.cross_entropy, _batches(ROWS, 5), _batches(37, 6), device=dev,
                   epochs=2, scheduler=StepLR(opt, step_size=1, gamma=0.5), progress=False,
                   capture=capture)


def test_captured_training_with_dropout_equals_eager_bitwise(dev: DeviceHandle) -> None:
    """Each replay draws the masks eager steps would (the default generator's state is a
    graph parameter), the partial batch's eager step included."""
    runs = []
    for capture in (False, True):
        manual_seed(11)
        trainer = _dropout_trainer(dev, capture)
        trainer.fit()
        runs.append(trainer)
    assert runs[1].step.mode == "graph"
    _same_run(*runs)
