"""netcl.metrics against sklearn.metrics and NumPy formulas on every device: odd sizes,
several batches, every average, the in-range check, and typed errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm

from netcl import metrics
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor

Array = np.ndarray[Any, Any]


def _data(n: int, classes: int, seed: int) -> tuple[Array, Array]:
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((n, classes)).astype(np.float32)
    target = rng.integers(0, classes, n)
    return scores, target


def _batches(dev: DeviceHandle, scores: Array, target: Array,
             sizes: tuple[int, ...]) -> list[tuple[Tensor, Tensor]]:
    out, start = [], 0
    for size in sizes:
        sl = slice(start, start + size)
        out.append((Tensor.from_host(dev.queue, scores[sl]),
                    Tensor.from_host(dev.queue, target[sl])))
        start += size
    return out


SIZES = (1, 7, 33, 257)


@pytest.mark.parametrize("classes", [2, 3, 11])
def test_accuracy_and_confusion_matrix_match_sklearn(dev: DeviceHandle, classes: int) -> None:
    scores, target = _data(sum(SIZES), classes, classes)
    acc, cm = metrics.Accuracy(num_classes=classes), metrics.ConfusionMatrix(classes)
    for x, t in _batches(dev, scores, target, SIZES):
        acc.update(x, t)
        cm.update(x, t)
    pred = scores.argmax(1)
    assert acc.compute() == pytest.approx(skm.accuracy_score(target, pred), abs=1e-6)
    got = cm.compute()
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, skm.confusion_matrix(target, pred,
                                                           labels=range(classes)))
    for norm in ("true", "pred", "all"):
        m = metrics.ConfusionMatrix(classes, normalize=norm)
        m.update(Tensor.from_host(dev.queue, scores), Tensor.from_host(dev.queue, target))
        want = skm.confusion_matrix(target, pred, labels=range(classes), normalize=norm)
        np.testing.assert_allclose(m.compute(), np.nan_to_num(want), atol=1e-6)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_top_k_accuracy_matches_sklearn(dev: DeviceHandle, k: int) -> None:
    scores, target = _data(298, 7, k)
    acc = metrics.Accuracy(top_k=k, num_classes=7)
    for x, t in _batches(dev, scores, target, SIZES):
        acc.update(x, t)
    want = skm.top_k_accuracy_score(target, scores, k=k, labels=range(7))
    assert acc.compute() == pytest.approx(want, abs=1e-6)
    one = metrics.accuracy(Tensor.from_host(dev.queue, scores),
                           Tensor.from_host(dev.queue, target.astype(np.int32)), top_k=k)
    assert float(one.to_host()) == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize("average", ["macro", "micro", "weighted", None, "binary"])
@pytest.mark.parametrize("kind", ["precision", "recall", "f1"])
def test_scores_match_sklearn(dev: DeviceHandle, kind: str, average: str | None) -> None:
    classes = 2 if average == "binary" else 9
    scores, target = _data(298, classes, 5)
    scores[:, classes - 1] -= 5.0  # the last class is (almost) never predicted: zero_division
    cls = {"precision": metrics.Precision, "recall": metrics.Recall, "f1": metrics.F1Score}[kind]
    sk = {"precision": skm.precision_score, "recall": skm.recall_score, "f1": skm.f1_score}[kind]
    m = cls(classes, average=average)
    for x, t in _batches(dev, scores, target, SIZES):
        m.update(x, t)
    pred = scores.argmax(1)
    want = sk(target, pred, labels=range(classes), average=average, zero_division=0.0)
    np.testing.assert_allclose(m.compute(), want, rtol=1e-5, atol=1e-6)
    fn = {"precision": metrics.precision, "recall": metrics.recall, "f1": metrics.f1_score}[kind]
    labels = Tensor.from_host(dev.queue, pred)  # class indices as input
    got = fn(labels, Tensor.from_host(dev.queue, target), classes, average=average)
    np.testing.assert_allclose(got.to_host(), want, rtol=1e-5, atol=1e-6)


def test_zero_division_value(dev: DeviceHandle) -> None:
    q = dev.queue
    x, t = Tensor.from_host(q, np.array([0, 0, 1])), Tensor.from_host(q, np.array([0, 1, 1]))
    got = metrics.precision(x, t, 3, average=None, zero_division=1.0).to_host()
    want = skm.precision_score([0, 1, 1], [0, 0, 1], labels=range(3), average=None,
                               zero_division=1.0)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_reset_starts_over(dev: DeviceHandle) -> None:
    q = dev.queue
    acc = metrics.Accuracy()
    acc.update(Tensor.from_host(q, np.array([1, 1])), Tensor.from_host(q, np.array([0, 0])))
    acc.reset()
    with pytest.raises(ValueError, match="before any update"):
        acc.compute()
    acc.update(Tensor.from_host(q, np.array([1, 1, 0])), Tensor.from_host(q, np.array([1, 0, 0])))
    assert acc.compute() == pytest.approx(2 / 3)


def test_labels_out_of_range_raise_at_compute(dev: DeviceHandle) -> None:
    q = dev.queue
    for m in (metrics.ConfusionMatrix(3), metrics.F1Score(3), metrics.Accuracy(num_classes=3)):
        m.update(Tensor.from_host(q, np.array([0, 1, 2])), Tensor.from_host(q, np.array([0, 3, 2])))
        with pytest.raises(ValueError, match=r"1 labels were outside \[0, 3\)"):
            m.compute()
    top = metrics.Accuracy(top_k=2, num_classes=3)
    top.update(Tensor.from_host(q, np.eye(3, dtype=np.float32)),
               Tensor.from_host(q, np.array([0, -1, 2])))
    with pytest.raises(ValueError, match="outside"):
        top.compute()


def test_mean_is_weighted_and_compensated(dev: DeviceHandle) -> None:
    rng = np.random.default_rng(0)
    m, values = metrics.Mean(), []
    for size in SIZES:
        v = rng.standard_normal(size).astype(np.float32) + 1000.0
        m.update(Tensor.from_host(dev.queue, v))
        values.append(v.astype(np.float64))
    m.update(3.5, weight=2.0)
    flat = np.concatenate(values)
    want = (flat.sum() + 7.0) / (flat.size + 2.0)
    assert m.compute() == pytest.approx(want, rel=1e-6)
    many = metrics.Mean()
    step = Tensor.from_host(dev.queue, np.float32(0.1))
    for _ in range(3001):
        many.update(step)
    assert many.compute() == pytest.approx(np.float32(0.1), rel=1e-6)


def test_running_mean_is_a_debiased_ema(dev: DeviceHandle) -> None:
    values = [3.0, -1.0, 4.0, 1.5, 9.0, 2.25, 6.0]
    r = metrics.RunningMean(momentum=0.8)
    avg = 0.0
    for i, v in enumerate(values):
        r.update(v if i % 2 else Tensor.from_host(dev.queue, np.array([v, v], np.float32)))
        avg = 0.8 * avg + 0.2 * v
    assert r.compute() == pytest.approx(avg / (1 - 0.8 ** len(values)), rel=1e-6)


def test_typed_errors(dev: DeviceHandle) -> None:
    q = dev.queue
    scores = Tensor.from_host(q, np.zeros((4, 3), np.float32))
    with pytest.raises(TypeError, match="target must be 1-D integer"):
        metrics.accuracy(scores, Tensor.from_host(q, np.zeros(4, np.float32)))
    with pytest.raises(ValueError, match="same number of rows"):
        metrics.accuracy(scores, Tensor.from_host(q, np.zeros(5, np.int64)))
    with pytest.raises(ValueError, match="top_k=4 exceeds the 3 classes"):
        metrics.accuracy(scores, Tensor.from_host(q, np.zeros(4, np.int64)), top_k=4)
    with pytest.raises(TypeError, match="needs scores"):
        metrics.accuracy(Tensor.from_host(q, np.zeros(4, np.int64)),
                         Tensor.from_host(q, np.zeros(4, np.int64)), top_k=2)
    with pytest.raises(ValueError, match="average must be one of"):
        metrics.F1Score(3, average="samples")
    with pytest.raises(ValueError, match="needs num_classes=2"):
        metrics.Recall(3, average="binary")
    with pytest.raises(TypeError, match="num_classes must be an integer"):
        metrics.ConfusionMatrix(3.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="momentum must be in"):
        metrics.RunningMean(momentum=1.0)
    with pytest.raises(TypeError, match="netcl Tensor or a NumPy array"):
        metrics.accuracy([[1.0]], [0])
    assert "num_classes=3" in repr(metrics.F1Score(3))
