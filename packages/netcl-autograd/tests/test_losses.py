"""Losses: values and gradients against NumPy float64 references on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor

rng = np.random.default_rng(3)


def log_softmax(x: Any, axis: int = 1) -> Any:
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def ce_ref(logits: Any, labels: Any, reduction: str = "mean", ignore_index: int = -100,
           label_smoothing: float = 0.0) -> Any:
    if logits.ndim > 2:
        logits = np.moveaxis(logits, 1, -1).reshape(-1, logits.shape[1])
    flat = labels.reshape(-1)
    logp = log_softmax(logits)
    valid = flat != ignore_index
    safe = np.where(valid, flat, 0)
    nll = -logp[np.arange(len(flat)), safe]
    smooth = -logp.mean(axis=1)
    per = np.where(valid, (1 - label_smoothing) * nll + label_smoothing * smooth, 0.0)
    if reduction == "none":
        return per.reshape(labels.shape)
    if reduction == "sum":
        return per.sum()
    return per.sum() / valid.sum()


LABELS = np.array([3, 0, 4, -100, 1, 3, 2])


@pytest.mark.parametrize("kwargs", [
    {},
    {"reduction": "sum"},
    {"reduction": "none"},
    {"label_smoothing": 0.1},
    {"ignore_index": 3, "label_smoothing": 0.2, "reduction": "mean"},
], ids=["mean", "sum", "none", "smoothing", "ignore_smoothing"])
def test_cross_entropy(dev: DeviceHandle, kwargs: dict[str, Any]) -> None:
    labels = np.where(LABELS == -100, kwargs.get("ignore_index", -100), LABELS)
    check_grad(dev, ag.cross_entropy, ce_ref, (rng.standard_normal((7, 5)), labels), kwargs)


def test_cross_entropy_spatial(dev: DeviceHandle) -> None:
    labels = rng.integers(0, 3, size=(2, 4))
    check_grad(dev, ag.cross_entropy, ce_ref, (rng.standard_normal((2, 3, 4)), labels))


def test_nll_loss(dev: DeviceHandle) -> None:
    def ref(logp: Any, labels: Any, reduction: str = "mean") -> Any:
        valid = labels != -100
        per = np.where(valid, -logp[np.arange(len(labels)), np.where(valid, labels, 0)], 0.0)
        return per.sum() / valid.sum() if reduction == "mean" else per.sum()

    logp = log_softmax(rng.standard_normal((7, 5)))
    check_grad(dev, ag.nll_loss, ref, (logp, LABELS))
    check_grad(dev, ag.nll_loss, ref, (logp, LABELS), {"reduction": "sum"})


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_out_of_range_label_raises_on_every_backend(dev: DeviceHandle, loss: str) -> None:
    """The issue's case: label 5 of 5 classes was a NaN loss on OpenCL and a ValueError on
    NumPy; every backend raises now (the spatial form goes through the same rows)."""
    fn = getattr(ag, loss)
    for shape, labels in (((4, 5), np.array([0, 5, 4, 1])),
                          ((2, 5, 3), np.array([[0, 1, 2], [3, 5, -100]]))):
        x = Tensor.from_host(dev.queue, rng.standard_normal(shape))
        with pytest.raises(ValueError, match=r"(nll_gather|softmax_cross_entropy): label 5 is "
                                             r"out of range for 5 classes"):
            fn(x, Tensor.from_host(dev.queue, labels))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_loss(dev: DeviceHandle, reduction: str) -> None:
    def ref(a: Any, b: Any, reduction: str) -> Any:
        sq = (a - b) ** 2
        return sq.mean() if reduction == "mean" else sq.sum() if reduction == "sum" else sq

    check_grad(dev, ag.mse_loss, ref, (rng.standard_normal((3, 5)), rng.standard_normal(5)),
               {"reduction": reduction})


def bce_ref(x: Any, y: Any, reduction: str = "mean", pos_weight: Any = None) -> Any:
    weight = 1.0 if pos_weight is None else 1 + (pos_weight - 1) * y
    per = (1 - y) * x + weight * (np.log1p(np.exp(-np.abs(x))) + np.maximum(-x, 0))
    return per.mean() if reduction == "mean" else per.sum() if reduction == "sum" else per


def test_bce_with_logits(dev: DeviceHandle) -> None:
    x, y = rng.standard_normal((4, 3)) * 3, rng.uniform(0, 1, (4, 3))
    check_grad(dev, ag.binary_cross_entropy_with_logits, bce_ref, (x, y))
    check_grad(dev, ag.binary_cross_entropy_with_logits, bce_ref, (x, y),
               {"reduction": "none"})


def test_bce_with_logits_pos_weight(dev: DeviceHandle) -> None:
    x, y = rng.standard_normal((4, 3)), rng.uniform(0, 1, (4, 3))
    pw = np.array([0.5, 2.0, 3.0])
    check_grad(dev, lambda a, b, p: ag.binary_cross_entropy_with_logits(a, b, "sum", p),
               lambda a, b, p: bce_ref(a, b, "sum", p), (x, y, pw), wrt=[0, 1])


def test_bce_gradient_at_zero_is_exact(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.zeros(3))
    x.requires_grad = True
    y = Tensor.from_host(dev.queue, np.array([0.0, 1.0, 0.25]))
    with ag.Tape() as tape:
        loss = ag.binary_cross_entropy_with_logits(x, y, reduction="sum")
    tape.backward(loss)
    assert x.grad is not None
    # sigmoid(0) - y: 1 / (1 + exp(0)) is 0.5 exactly, and so are the differences
    np.testing.assert_array_equal(x.grad.to_host(), [0.5, -0.5, 0.25])


def test_loss_errors(dev: DeviceHandle) -> None:
    logits = Tensor.from_host(dev.queue, np.zeros((2, 3)))
    labels = Tensor.from_host(dev.queue, np.array([0, 1]))
    with pytest.raises(ValueError, match="reduction must be one of mean, sum, none, got 'avg'"):
        ag.cross_entropy(logits, labels, reduction="avg")
    with pytest.raises(TypeError, match="labels must be int32 or int64"):
        ag.cross_entropy(logits, Tensor.from_host(dev.queue, np.zeros(2)))
    with pytest.raises(ValueError, match=r"labels must have shape \(2,\)"):
        ag.cross_entropy(logits, Tensor.from_host(dev.queue, np.array([0, 1, 2])))
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        ag.cross_entropy(logits, labels, label_smoothing=1.5)
    with pytest.raises(ValueError, match="targets must have the shape of logits"):
        ag.binary_cross_entropy_with_logits(logits, Tensor.from_host(dev.queue, np.zeros(3)))
    with pytest.raises(TypeError, match="logits must be a netcl Tensor"):
        ag.cross_entropy(np.zeros((2, 3)), labels)  # type: ignore[arg-type]
