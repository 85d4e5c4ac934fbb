"""Trainer: checkpoints every epoch, and a run interrupted after epoch 2 and resumed ends with
the same weights as an uninterrupted one (bitwise on NumPy, within tolerance on OpenCL); a run
that diverges stops with DivergenceError and leaves the last good checkpoint; a checkpoint
that passes its checksum but does not fit the run is a CheckpointError before anything is
restored."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.core.device import DeviceHandle, manager
from netcl.core.tensor import Tensor
from netcl.io import CheckpointError, load_tensors, save_tensors
from netcl.nn import Linear
from netcl.optim import SGD, Adam, StepLR
from netcl.trainer import DivergenceError, EpochMetrics, Trainer, save_training_checkpoint
from netcl.trainer._digits import DigitsConfig, digits_cnn, train_digits

Batches = list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]


def _cfg(dev: DeviceHandle, ckpt: Path | None, resume: bool = False,
         stop_after: int | None = None, amp: bool = False) -> DigitsConfig:
    return DigitsConfig(device=dev, epochs=3, batch_size=128, lr=1e-2, seed=3,
                        checkpoint_dir=ckpt, resume=resume, progress=False,
                        stop_after=stop_after, amp=amp)


def test_interrupted_and_resumed_run_matches(dev: DeviceHandle, tmp_path: Path) -> None:
    full, _, _ = train_digits(_cfg(dev, tmp_path / "full"))
    _, hist, _ = train_digits(_cfg(dev, tmp_path / "part", stop_after=2))
    assert len(hist) == 2 and (tmp_path / "part" / "last.netcl").exists()
    resumed, hist2, _ = train_digits(_cfg(dev, tmp_path / "part", resume=True))
    assert [m.epoch for m in hist2] == [0, 1, 2]
    for (name, a), (_, b) in zip(full.model.state_dict().items(),
                                 resumed.model.state_dict().items()):
        if dev.backend == "cpu":
            np.testing.assert_array_equal(a.to_host(), b.to_host(), err_msg=name)
        else:
            np.testing.assert_allclose(a.to_host(), b.to_host(), rtol=1e-4, atol=1e-5,
                                       err_msg=name)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # float16 overflow
def test_amp_run_checkpoints_the_grad_scaler_and_resumes(tmp_path: Path) -> None:
    from netcl.core.device import manager
    from netcl.io import load_tensors

    dev = manager.default("cpu")
    assert dev is not None
    full, _, _ = train_digits(_cfg(dev, tmp_path / "full", amp=True))
    train_digits(_cfg(dev, tmp_path / "part", stop_after=2, amp=True))
    _, meta = load_tensors(tmp_path / "part" / "last.netcl")
    saved = meta["extra"]["grad_scaler"]
    assert set(saved) == {"scale", "growth_factor", "backoff_factor", "growth_interval",
                          "_growth_tracker"} and saved["_growth_tracker"] > 0
    resumed, hist, _ = train_digits(_cfg(dev, tmp_path / "part", resume=True, amp=True))
    assert [m.epoch for m in hist] == [0, 1, 2]
    assert resumed.scaler.state_dict() == full.scaler.state_dict()
    for (name, a), (_, b) in zip(full.model.state_dict().items(),
                                 resumed.model.state_dict().items()):
        np.testing.assert_array_equal(a.to_host(), b.to_host(), err_msg=name)


def test_corrupt_checkpoint_is_rejected(tmp_path: Path) -> None:
    from netcl.core.device import manager

    dev = manager.default("cpu")
    assert dev is not None
    train_digits(_cfg(dev, tmp_path, stop_after=1))
    path = tmp_path / "last.netcl"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        train_digits(_cfg(dev, tmp_path, resume=True))


def test_trainer_arguments() -> None:
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        Trainer(None, None, lambda a, b: a, [], epochs=0)
    with pytest.raises(ValueError, match="resume=True needs a checkpoint_dir"):
        Trainer(None, None, lambda a, b: a, [], resume=True)


@functools.cache
def _digits_batches(n: int = 4, size: int = 32) -> Batches:
    """``n`` batches of the first digits: enough to train on for a test, quickly."""
    from netcl.data import DigitsDataset

    data = DigitsDataset()
    return [(data.images[i * size:(i + 1) * size], data.labels[i * size:(i + 1) * size])
            for i in range(n)]


@pytest.mark.filterwarnings("ignore:(overflow|invalid value) encountered:RuntimeWarning")
def test_diverging_run_stops_and_keeps_the_last_good_checkpoint(dev: DeviceHandle,
                                                                tmp_path: Path) -> None:
    batches = _digits_batches()
    ends: list[EpochMetrics] = []
    model = digits_cnn(dev.queue, seed=1)
    Trainer(model, Adam(model.parameters(), lr=1e-2), ag.cross_entropy, batches, device=dev,
            checkpoint_dir=tmp_path, progress=False, on_epoch_end=ends.append).fit()
    assert [m.epoch for m in ends] == [0] and math.isfinite(ends[0].train_loss)
    good = (tmp_path / "last.netcl").read_bytes()

    model = digits_cnn(dev.queue, seed=1)
    optimizer = Adam(model.parameters(), lr=1e-2)
    trainer = Trainer(model, optimizer, ag.cross_entropy, batches, device=dev, epochs=3,
                      checkpoint_dir=tmp_path, resume=True, progress=False,
                      on_epoch_end=ends.append)
    optimizer.param_groups[0]["lr"] = 1e30  # after the resume, which restores the old lr
    with pytest.raises(DivergenceError, match=r"diverged: the loss is (nan|inf) at epoch 2, "
                       r"step \d of 4 \(lr 1e\+30\).*last.netcl was not overwritten") as err:
        trainer.fit()
    assert err.value.epoch == 1 and err.value.step is not None and err.value.step < 4
    assert err.value.loss is not None and not math.isfinite(err.value.loss)
    assert len(ends) == 1 and (tmp_path / "last.netcl").read_bytes() == good


def test_non_finite_weights_never_overwrite_a_checkpoint(tmp_path: Path) -> None:
    dev = manager.default("cpu")
    assert dev is not None
    model = Linear(3, 2, queue=dev.queue, rng=np.random.default_rng(0))
    optimizer = SGD(model.parameters(), lr=0.1)
    path = save_training_checkpoint(tmp_path / "last.netcl", model, optimizer, epoch=0)
    good = path.read_bytes()
    weight = model.weight.to_host().copy()
    weight[0, 1], weight[1, 2] = np.nan, -np.inf
    model.load_state_dict({**model.state_dict(), "weight": weight})
    with pytest.raises(DivergenceError, match=r"refusing to write .*last.netcl after epoch 2: "
                       r"model/weight has 1 NaN and 1 inf of 6 values") as err:
        save_training_checkpoint(path, model, optimizer, epoch=1)
    assert err.value.epoch == 1 and path.read_bytes() == good
    assert [f.name for f in tmp_path.iterdir()] == ["last.netcl"]


def _loss_infinite_on(steps: Callable[[int], bool]) -> Callable[[Tensor, Tensor], Tensor]:
    """Cross-entropy, times infinity on the calls (0-based) ``steps`` picks."""
    calls = [0]

    def loss_fn(logits: Tensor, labels: Tensor) -> Tensor:
        loss = ag.cross_entropy(logits, labels)
        calls[0] += 1
        return ag.ops.mul(loss, math.inf) if steps(calls[0] - 1) else loss

    return loss_fn


@pytest.mark.filterwarnings("ignore:(overflow|invalid value) encountered:RuntimeWarning")
def test_amp_excuses_a_skipped_step_but_not_a_stuck_run() -> None:
    dev = manager.default("cpu")
    assert dev is not None
    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(8, 4)).astype(np.float32), rng.integers(0, 3, 8))
               for _ in range(5)]
    model = Linear(4, 3, queue=dev.queue, rng=rng)
    # the loss function counts its calls in Python, which a captured step (NumPy captures too)
    # could not follow: these steps run eagerly
    trainer = Trainer(model, SGD(model.parameters(), lr=0.1), _loss_infinite_on(lambda i: i == 2),
                      batches, device=dev, progress=False, amp=True, capture=False)
    (metrics,) = trainer.fit()  # step 3's loss is inf, the scaler skipped it: not divergence
    assert math.isfinite(metrics.train_loss) and trainer.scaler.get_scale() == 2.0**15

    model = Linear(4, 3, queue=dev.queue, rng=rng)
    trainer = Trainer(model, SGD(model.parameters(), lr=0.1), _loss_infinite_on(lambda i: True),
                      batches, device=dev, progress=False, amp=True, capture=False)
    with pytest.raises(DivergenceError, match="every loss since the last check was non-finite"):
        trainer.fit()

    model = Linear(4, 3, queue=dev.queue, rng=rng)  # without AMP, one infinite loss is enough
    trainer = Trainer(model, SGD(model.parameters(), lr=0.1), _loss_infinite_on(lambda i: i == 2),
                      batches, device=dev, progress=False, capture=False)
    with pytest.raises(DivergenceError, match="the loss is inf at epoch 1, step 3 of 5"):
        trainer.fit()


EDITS: dict[str, tuple[Callable[[dict[str, Any], dict[str, Any]], Any], str]] = {
    "no optimizer state": (lambda m, t: m.pop("optimizer"), "optimizer must be"),
    "epoch a string": (lambda m, t: m.update(epoch="3"), "epoch must be an int"),
    "negative epoch": (lambda m, t: m.update(epoch=-1), "epoch must be an int"),
    "param groups an object": (lambda m, t: m["optimizer"].update(param_groups={}),
                               "optimizer.param_groups must be"),
    "no param groups": (lambda m, t: m["optimizer"].update(param_groups=[]),
                        "0 optimizer param groups in the file, 1 in the optimizer"),
    "lr a string": (lambda m, t: m["optimizer"]["param_groups"][0].update(lr="fast"),
                    "param group 0's 'lr' is 'fast'"),
    "unknown hyper-parameter": (lambda m, t: m["optimizer"]["param_groups"][0].update(x=1),
                                r"unexpected keys \['x'\]"),
    "one parameter too few": (lambda m, t: m["optimizer"]["param_groups"][0]["params"].pop(),
                              "1 parameters in the file, 2 here"),
    "scalars not per index": (lambda m, t: m["optimizer"].update(scalars={"a": {}}),
                              "optimizer.scalars must be"),
    "scalar index out of range": (lambda m, t: m["optimizer"].update(scalars={"7": {}}),
                                  "scalars for parameter 7"),
    "scalar a string": (lambda m, t: m["optimizer"].update(scalars={"0": {"step": "many"}}),
                        "must be numbers"),
    "optimizer tensor index out of range": (
        lambda m, t: t.update({"optim/9/momentum_buffer": np.zeros(3, np.float32)}),
        "'optim/9/momentum_buffer' is neither"),
    "optimizer tensor of the wrong shape": (
        lambda m, t: t.update({"optim/0/momentum_buffer": np.zeros(5, np.float32)}),
        "optimizer state does not fit"),
    "no scheduler state": (lambda m, t: m.update(scheduler=None), "holds no scheduler state"),
    "scheduler state a list": (lambda m, t: m.update(scheduler=[1]), "scheduler must be"),
    "scheduler state of another scheduler": (lambda m, t: m.update(scheduler={"T_max": 3}),
                                             "the scheduler has missing keys"),
    "scheduler value of the wrong kind": (lambda m, t: m["scheduler"].update(gamma=[0.1]),
                                          "scheduler's 'gamma' is"),
    "extra a list": (lambda m, t: m.update(extra=[]), "extra must be an object"),
    "history of strings": (lambda m, t: m["extra"].update(history=["epoch 1"]),
                           "extra.history must be"),
    "history without a loss": (lambda m, t: m["extra"].update(history=[{"epoch": 0}]),
                               "extra.history must be"),
    "bad grad scaler state": (lambda m, t: m["extra"].update(grad_scaler={"scale": -1.0}),
                              "unusable grad_scaler state"),
    "model tensor missing": (lambda m, t: t.pop("model/bias"), "missing keys"),
    "not a training checkpoint": (lambda m, t: m.update(kind="model"),
                                  "not a training checkpoint"),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_resume_rejects_a_checksum_valid_checkpoint_that_does_not_fit(
    tmp_path: Path, case: str
) -> None:
    """Each file is rewritten with a correct checksum, so only the field checks can catch it;
    nothing is restored before they have all passed."""
    dev = manager.default("cpu")
    assert dev is not None

    def run(resume: bool) -> Trainer:
        model = Linear(3, 2, queue=dev.queue, rng=np.random.default_rng(0))
        optimizer = SGD(model.parameters(), lr=0.1, momentum=0.9)
        return Trainer(model, optimizer, ag.cross_entropy, [], device=dev, epochs=3,
                       scheduler=StepLR(optimizer, step_size=1), checkpoint_dir=tmp_path,
                       resume=resume, progress=False, amp=True)

    trainer = run(False)
    path = save_training_checkpoint(
        tmp_path / "last.netcl", trainer.model, trainer.optimizer, trainer.scheduler, epoch=0,
        extra={"history": [vars(EpochMetrics(0, 0.5, 0.5))],
               "grad_scaler": trainer.scaler.state_dict()})
    tensors, meta = load_tensors(path)
    tensors = dict(tensors)
    run(True)  # the file as written resumes
    edit, message = EDITS[case]
    edit(meta, tensors)
    save_tensors(path, tensors, meta)
    with pytest.raises(CheckpointError, match=message):
        run(True)
