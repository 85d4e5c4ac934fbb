"""Trainer logging: per-epoch and per-interval metrics in a CSV file and in TensorBoard event
files, equal to the history the Trainer returns, on every device; the plot of the curves; and
the ImportError naming the extra when tensorboardX or matplotlib is missing."""

from __future__ import annotations

import csv
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import f1_score, recall_score

import netcl.autograd as ag
from netcl import metrics
from netcl._plot import plot_history, require_matplotlib, write_plot
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.nn import Linear
from netcl.optim import SGD
from netcl.trainer import CSVLogger, EpochMetrics, TensorBoardLogger, Trainer
from netcl.trainer._digits import DigitsConfig, train_digits

STEPS, ROWS = 6, 5  # batches per epoch, rows per batch


def _batches(seed: int = 0) -> list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((ROWS, 3)).astype(np.float32), rng.integers(0, 4, ROWS))
            for _ in range(STEPS)]


def _trainer(dev: DeviceHandle, loggers: list[Any], log_every: int | None,
             epochs: int = 3) -> Trainer:
    model = Linear(3, 4, queue=dev.queue, rng=np.random.default_rng(1))
    return Trainer(model, SGD(model.parameters(), lr=0.1), ag.cross_entropy, _batches(),
                   _batches(1), device=dev, epochs=epochs, progress=False, loggers=loggers,
                   log_every=log_every)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_csv_has_every_epoch_and_interval(dev: DeviceHandle, tmp_path: Path) -> None:
    path = tmp_path / "logs" / "metrics.csv"
    trainer = _trainer(dev, [CSVLogger(path)], log_every=2)
    history = trainer.fit()
    rows = _rows(path)
    epochs = [r for r in rows if r["epoch"]]
    steps = [r for r in rows if r["step/loss"]]
    assert [int(r["step"]) for r in epochs] == [STEPS, 2 * STEPS, 3 * STEPS]
    assert [int(r["step"]) for r in steps] == list(range(2, 3 * STEPS + 1, 2))
    for m, r in zip(history, epochs):
        assert int(float(r["epoch"])) == m.epoch
        assert float(r["epoch/train_loss"]) == pytest.approx(m.train_loss, rel=1e-12)
        assert float(r["epoch/train_accuracy"]) == pytest.approx(m.train_accuracy)
        assert float(r["epoch/val_accuracy"]) == pytest.approx(m.val_accuracy)
        assert float(r["epoch/lr"]) == pytest.approx(0.1)
        # equal-sized intervals of equal-sized batches: their mean is the epoch's
        mine = [s for s in steps if (m.epoch * STEPS) < int(s["step"]) <= (m.epoch + 1) * STEPS]
        assert np.mean([float(s["step/loss"]) for s in mine]) == pytest.approx(m.train_loss,
                                                                               rel=1e-6)
        assert np.mean([float(s["step/accuracy"]) for s in mine]) == pytest.approx(
            m.train_accuracy)
    assert trainer.global_step == 3 * STEPS


def test_intervals_span_epochs_and_need_no_extra_sync(tmp_path: Path) -> None:
    from netcl.core import manager

    dev = manager.default("cpu")
    assert dev is not None
    path = tmp_path / "m.csv"
    _trainer(dev, [CSVLogger(path)], log_every=4, epochs=2).fit()
    assert [int(r["step"]) for r in _rows(path) if r["step/loss"]] == [4, 8, 12]
    with pytest.raises(ValueError, match="log_every must be None or an integer >= 1"):
        _trainer(dev, [], log_every=0)
    with pytest.raises(TypeError, match="loggers must have log_metrics"):
        _trainer(dev, [object()], log_every=None)


def test_csv_logger_appends_on_resume_and_checks_values(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    first = CSVLogger(path)
    first.log_metrics({"epoch/train_loss": 1.0}, step=3)
    again = CSVLogger(path, append=True)
    again.log_metrics({"epoch/train_loss": 0.5, "epoch/val_loss": 0.25}, step=6)
    assert [(r["step"], r["epoch/train_loss"], r["epoch/val_loss"]) for r in _rows(path)] == [
        ("3", "1.0", ""), ("6", "0.5", "0.25")]
    assert CSVLogger(path).rows == []  # no append: a new file
    with pytest.raises(TypeError, match="metric 'x' must be a number, got str"):
        again.log_metrics({"x": "high"}, step=1)  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="step must be an integer >= 0"):
        again.log_metrics({"x": 1.0}, step=-1)


def _scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """Read scalar summaries back from the TFRecord event files (tensorboardX's protos)."""
    event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")
    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(log_dir.glob("events.out.tfevents.*")):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            event = event_pb2.Event.FromString(data[pos + 12:pos + 12 + length])
            pos += 12 + length + 4  # length, its crc, the record, its crc
            for value in event.summary.value:
                out.setdefault(value.tag, []).append((event.step, value.simple_value))
    return out


def test_tensorboard_event_files_hold_the_history(dev: DeviceHandle, tmp_path: Path) -> None:
    pytest.importorskip("tensorboardX", reason="tensorboardX (netcl[tensorboard]) is not "
                        "installed in this environment")
    log = TensorBoardLogger(tmp_path / "run")
    history = _trainer(dev, [log], log_every=3).fit()
    log.close()
    scalars = _scalars(tmp_path / "run")
    got = scalars["epoch/train_loss"]
    assert [s for s, _ in got] == [STEPS, 2 * STEPS, 3 * STEPS]
    np.testing.assert_allclose([v for _, v in got], [m.train_loss for m in history], rtol=1e-6)
    np.testing.assert_allclose(np.array([v for _, v in scalars["epoch/val_accuracy"]]),
                               np.array([m.val_accuracy for m in history], float), rtol=1e-6)
    assert [s for s, _ in scalars["step/loss"]] == list(range(3, 3 * STEPS + 1, 3))


def test_missing_extras_name_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    with pytest.raises(ImportError, match=r"pip install 'netcl\[tensorboard\]'"):
        TensorBoardLogger(tmp_path)
    with pytest.raises(ImportError, match=r"pip install 'netcl\[tensorboard\]'"):
        train_digits(DigitsConfig(device="cpu", tensorboard_dir=tmp_path, progress=False))
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install 'netcl\[plot\]'"):
        require_matplotlib()


def test_plot_writes_a_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib (netcl[plot]) is not installed in "
                        "this environment")
    history = [EpochMetrics(0, 0.9, 0.7, 0.8, 0.75), EpochMetrics(1, 0.5, 0.85, 0.6, 0.8),
               EpochMetrics(2, 0.4, 0.9)]
    out = tmp_path / "plots" / "curves.png"
    assert plot_history(history, out) == out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "curves.svg"
    write_plot(svg, history)
    assert b"<svg" in svg.read_bytes()[:400]
    with pytest.raises(ValueError, match="history is empty"):
        plot_history([], out)


def test_metrics_on_the_held_out_batches(dev: DeviceHandle, tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    model = Linear(3, 4, queue=dev.queue, rng=np.random.default_rng(1))
    chosen = {"f1": metrics.F1Score(4), "recall": metrics.Recall(4, average=None),
              "top2": metrics.Accuracy(top_k=2)}
    trainer = Trainer(model, SGD(model.parameters(), lr=0.1), ag.cross_entropy, _batches(),
                      _batches(1), device=dev, epochs=2, progress=False,
                      loggers=[CSVLogger(path)], metrics=chosen, checkpoint_dir=tmp_path)
    last = trainer.fit()[-1]
    model.eval()
    scores = np.concatenate([model(Tensor.from_host(dev.queue, x)).to_host()
                             for x, _ in _batches(1)])
    target = np.concatenate([y for _, y in _batches(1)])
    pred = scores.argmax(1)
    assert last.extra["val_f1"] == pytest.approx(
        f1_score(target, pred, labels=range(4), average="macro", zero_division=0), abs=1e-6)
    np.testing.assert_allclose(last.extra["val_recall"], recall_score(
        target, pred, labels=range(4), average=None, zero_division=0), atol=1e-6)
    top2 = np.mean([(s > s[t]).sum() < 2 for s, t in zip(scores, target)])
    assert last.extra["val_top2"] == pytest.approx(top2)
    row = _rows(path)[-1]
    assert float(row["epoch/val_f1"]) == pytest.approx(last.extra["val_f1"])
    assert float(row["epoch/val_recall/3"]) == pytest.approx(last.extra["val_recall"][3])
    resumed = Trainer(model, SGD(model.parameters(), lr=0.1), ag.cross_entropy, _batches(),
                      _batches(1), device=dev, epochs=2, progress=False, metrics=chosen,
                      checkpoint_dir=tmp_path, resume=True)
    assert resumed.history[-1].extra == last.extra  # the values survive the checkpoint
    with pytest.raises(ValueError, match="give a val_loader"):
        Trainer(model, SGD(model.parameters(), lr=0.1), ag.cross_entropy, _batches(),
                device=dev, metrics=chosen)
