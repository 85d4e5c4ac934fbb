"""Losses: values and gradients against NumPy float64 transcriptions of PyTorch's formulas on
every backend (finite differences through ``check_grad``), the transcriptions against PyTorch
itself when it is installed, the modules' settings and reprs, and the argument errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.nn import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from netcl.nn import functional as F

Array = np.ndarray[Any, Any]


# -- NumPy references (float64), PyTorch's formulas ---------------------------------------------

def _log_softmax(x: Array) -> Any:
    z = x - x.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _reduce(per: Array, reduction: str) -> Any:
    return per if reduction == "none" else (per.sum() if reduction == "sum" else per.mean())


def ref_cross_entropy(x: Array, y: Array, weight: Array | None = None, ignore_index: int = -100,
                      reduction: str = "mean", label_smoothing: float = 0.0) -> Any:
    logp = _log_softmax(x)
    classes = x.shape[1]
    w = np.ones(classes) if weight is None else weight
    wb = w.reshape((1, classes) + (1,) * (x.ndim - 2))
    if y.dtype.kind == "f":  # probabilities
        t = y * (1 - label_smoothing) + label_smoothing / classes
        per = -(logp * t * wb).sum(axis=1)
        return _reduce(per, reduction)
    keep = y != ignore_index
    safe = np.where(keep, y, 0)
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1).squeeze(1)
    nll = -w[safe] * picked * keep
    smooth = -(logp * wb).sum(axis=1) * keep
    per = (1 - label_smoothing) * nll + label_smoothing / classes * smooth
    if reduction == "mean":
        return per.sum() / (w[safe] * keep).sum()
    return _reduce(per, reduction)


def ref_nll(logp: Array, y: Array, weight: Array | None = None, ignore_index: int = -100,
            reduction: str = "mean") -> Any:
    w = np.ones(logp.shape[1]) if weight is None else weight
    keep = y != ignore_index
    safe = np.where(keep, y, 0)
    picked = np.take_along_axis(logp, np.expand_dims(safe, 1), axis=1).squeeze(1)
    per = -w[safe] * picked * keep
    if reduction == "mean":
        return per.sum() / (w[safe] * keep).sum()
    return _reduce(per, reduction)


def ref_smooth_l1(a: Array, b: Array, reduction: str = "mean", beta: float = 1.0) -> Any:
    d = np.abs(a - b)
    per = d if beta == 0 else np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduce(per, reduction)


def ref_huber(a: Array, b: Array, reduction: str = "mean", delta: float = 1.0) -> Any:
    d = np.abs(a - b)
    return _reduce(np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


def ref_bce(p: Array, t: Array, weight: Array | None = None, reduction: str = "mean") -> Any:
    per = -(t * np.maximum(np.log(p), -100) + (1 - t) * np.maximum(np.log(1 - p), -100))
    return _reduce(per if weight is None else per * weight, reduction)


def ref_bce_logits(x: Array, t: Array, weight: Array | None = None, reduction: str = "mean",
                   pos_weight: Array | None = None) -> Any:
    log_sig, log_not = -np.logaddexp(0, -x), -np.logaddexp(0, x)
    pw = 1.0 if pos_weight is None else pos_weight
    per = -(pw * t * log_sig + (1 - t) * log_not)
    return _reduce(per if weight is None else per * weight, reduction)


def ref_kl(x: Array, t: Array, reduction: str = "mean", log_target: bool = False) -> Any:
    if log_target:
        per = np.exp(t) * (t - x)
    else:
        per = np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)), 0.0) - t * x
    if reduction == "batchmean":
        return per.sum() / x.shape[0]
    return _reduce(per, reduction)


# -- cases ------------------------------------------------------------------------------------

_R = np.random.default_rng(0)
_X = _R.standard_normal((7, 5))
_X4 = _R.standard_normal((3, 5, 2, 3))
_Y = np.array([0, 4, 2, -100, 1, 3, 4])
_Y4 = _R.integers(0, 5, (3, 2, 3))
_W = np.array([0.5, 1.0, 2.0, 1.5, 0.25])
_SOFT = np.exp(_log_softmax(_R.standard_normal((7, 5))))
_A, _B = _R.standard_normal((3, 7)), _R.standard_normal((3, 7))
_P = 1 / (1 + np.exp(-_R.standard_normal((3, 7))))
_T = _R.uniform(0, 1, (3, 7))
_EW = _R.uniform(0.5, 2, (3, 7))
_LOGP = _log_softmax(_R.standard_normal((3, 7)))
_TGT = np.exp(_log_softmax(_R.standard_normal((3, 7))))
_TGT[0, 2] = 0.0  # 0 log 0 = 0


def _ce(x: Any, y: Any, **kw: Any) -> Any:
    return F.cross_entropy(x, y, **kw)


def _w(dev: DeviceHandle) -> Tensor:
    return Tensor.from_host(dev.queue, _W.astype(np.float32))


CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...], dict[str, Any],
                       bool]] = {
    # name: (netcl fn, reference, args, kwargs, uses the class weight _W)
    "ce": (_ce, ref_cross_entropy, (_X, _Y), {}, False),
    "ce_sum_smooth": (_ce, ref_cross_entropy, (_X, _Y),
                      {"reduction": "sum", "label_smoothing": 0.2}, False),
    "ce_weight": (_ce, ref_cross_entropy, (_X, _Y), {}, True),
    "ce_weight_smooth_none": (_ce, ref_cross_entropy, (_X, _Y),
                              {"reduction": "none", "label_smoothing": 0.1}, True),
    "ce_weight_4d": (_ce, ref_cross_entropy, (_X4, _Y4), {"label_smoothing": 0.3}, True),
    "ce_soft": (_ce, ref_cross_entropy, (_X, _SOFT), {}, False),
    "ce_soft_weight_smooth": (_ce, ref_cross_entropy, (_X, _SOFT),
                              {"label_smoothing": 0.1, "reduction": "sum"}, True),
    "nll_weight": (F.nll_loss, ref_nll, (_log_softmax(_X), _Y), {}, True),
    "l1": (F.l1_loss, lambda a, b, reduction="mean": _reduce(np.abs(a - b), reduction),
           (_A, _B), {}, False),
    "smooth_l1": (F.smooth_l1_loss, ref_smooth_l1, (_A, _B), {"beta": 0.7}, False),
    "smooth_l1_beta0": (F.smooth_l1_loss, ref_smooth_l1, (_A, _B), {"beta": 0.0}, False),
    "huber": (F.huber_loss, ref_huber, (_A, _B), {"delta": 1.3, "reduction": "sum"}, False),
    "mse": (F.mse_loss, lambda a, b, reduction="mean": _reduce((a - b) ** 2, reduction),
            (_A, _B), {"reduction": "none"}, False),
    "bce": (F.binary_cross_entropy, ref_bce, (_P, _T), {}, False),
    "bce_weight": (F.binary_cross_entropy, ref_bce, (_P, _T, _EW), {"reduction": "sum"},
                   False),
    "bce_logits_weight": (F.binary_cross_entropy_with_logits, ref_bce_logits, (_A, _T, _EW),
                          {}, False),
    "kl": (F.kl_div, ref_kl, (_LOGP, _TGT), {"reduction": "batchmean"}, False),
    "kl_log_target": (F.kl_div, ref_kl, (_LOGP, _log_softmax(_B)),
                      {"reduction": "mean", "log_target": True}, False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_value_and_gradient(dev: DeviceHandle, name: str) -> None:
    fn, ref, args, kwargs, weighted = CASES[name]
    if weighted:
        w = _w(dev)
        check_grad(dev, lambda *a, **k: fn(*a, weight=w, **k),
                   lambda *a, **k: ref(*a, weight=_W.astype(np.float32).astype(float), **k),
                   args, kwargs, wrt=[0])
        return
    wrt = [0] if name.startswith(("ce", "nll", "kl", "bce")) else None
    check_grad(dev, fn, ref, args, kwargs, wrt=wrt)


def test_bce_clamps_the_log(dev: DeviceHandle) -> None:
    p = Tensor.from_host(dev.queue, np.array([0.0, 1.0, 0.5]))
    t = Tensor.from_host(dev.queue, np.array([1.0, 0.0, 1.0]))
    out = F.binary_cross_entropy(p, t, reduction="none").to_host()
    np.testing.assert_allclose(out, [100.0, 100.0, np.log(2)], rtol=1e-6)


def test_modules_call_their_functions(dev: DeviceHandle) -> None:
    q = dev.queue
    x, y = Tensor.from_host(q, _X.astype(np.float32)), Tensor.from_host(q, _Y)
    w = _w(dev)
    got = CrossEntropyLoss(weight=w, label_smoothing=0.1, reduction="sum")(x, y).to_host()
    np.testing.assert_allclose(got, ref_cross_entropy(_X, _Y, _W, reduction="sum",
                                                      label_smoothing=0.1), rtol=1e-5)
    lp = Tensor.from_host(q, _log_softmax(_X).astype(np.float32))
    np.testing.assert_allclose(NLLLoss(w)(lp, y).to_host(), ref_nll(_log_softmax(_X), _Y, _W),
                               rtol=1e-5)
    a, b = Tensor.from_host(q, _A.astype(np.float32)), Tensor.from_host(q, _B.astype(np.float32))
    for module, ref in ((L1Loss(), np.abs(_A - _B).mean()), (MSELoss(), ((_A - _B) ** 2).mean()),
                        (SmoothL1Loss(beta=0.5), ref_smooth_l1(_A, _B, beta=0.5)),
                        (HuberLoss(delta=0.5), ref_huber(_A, _B, delta=0.5)),
                        (BCEWithLogitsLoss(), ref_bce_logits(_A, _T))):
        target = Tensor.from_host(q, _T.astype(np.float32)) if module.__class__ is \
            BCEWithLogitsLoss else b
        np.testing.assert_allclose(module(a, target).to_host(), ref, rtol=1e-5, atol=1e-6)
    p, t = Tensor.from_host(q, _P.astype(np.float32)), Tensor.from_host(q, _T.astype(np.float32))
    np.testing.assert_allclose(BCELoss()(p, t).to_host(), ref_bce(_P, _T), rtol=1e-5)
    lt = Tensor.from_host(q, _TGT.astype(np.float32))
    lpt = Tensor.from_host(q, _LOGP.astype(np.float32))
    np.testing.assert_allclose(KLDivLoss("batchmean")(lpt, lt).to_host(),
                               ref_kl(_LOGP, _TGT, "batchmean"), rtol=1e-5, atol=1e-6)


def test_reprs_and_buffers() -> None:
    assert repr(CrossEntropyLoss()) == "CrossEntropyLoss(reduction='mean')"
    assert repr(SmoothL1Loss(beta=0.5)) == "SmoothL1Loss(reduction='mean', beta=0.5)"
    assert repr(KLDivLoss("batchmean")) == "KLDivLoss(reduction='batchmean', log_target=False)"
    assert CrossEntropyLoss().weight is None
    assert list(CrossEntropyLoss().state_dict()) == []


def test_bad_arguments(dev: DeviceHandle) -> None:
    q = dev.queue
    x = Tensor.from_host(q, np.zeros((2, 3), np.float32))
    y = Tensor.from_host(q, np.array([0, 1]))
    with pytest.raises(ValueError, match="reduction must be one of"):
        MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"weight must have shape \(3,\)"):
        F.cross_entropy(x, y, Tensor.from_host(q, np.ones(2, np.float32)))
    with pytest.raises(ValueError, match="target must have the shape"):
        F.cross_entropy(x, Tensor.from_host(q, np.zeros((2, 4), np.float32)))
    with pytest.raises(TypeError, match="must be a netcl Tensor"):
        F.l1_loss(x, np.zeros((2, 3)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="beta must be >= 0"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(ValueError, match="target must have the shape"):
        F.kl_div(x, Tensor.from_host(q, np.zeros(3, np.float32)))
    with pytest.raises(TypeError, match="weight must be a netcl Tensor"):
        CrossEntropyLoss(weight=np.ones(3))  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore:reduction. .mean. divides")
def test_references_match_torch() -> None:
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional

    def t(a: Array) -> Any:
        return torch.from_numpy(np.ascontiguousarray(a))

    for kw in ({}, {"label_smoothing": 0.2, "reduction": "sum"}, {"reduction": "none"}):
        for weight in (None, _W):
            got = tf.cross_entropy(t(_X), t(_Y), None if weight is None else t(weight), **kw)
            np.testing.assert_allclose(got.numpy(), ref_cross_entropy(_X, _Y, weight, **kw),
                                       rtol=1e-10)
            got = tf.cross_entropy(t(_X), t(_SOFT), None if weight is None else t(weight), **kw)
            np.testing.assert_allclose(got.numpy(), ref_cross_entropy(_X, _SOFT, weight, **kw),
                                       rtol=1e-10)
    got = tf.cross_entropy(t(_X4), t(_Y4), t(_W), label_smoothing=0.3)
    np.testing.assert_allclose(got.numpy(), ref_cross_entropy(_X4, _Y4, _W, label_smoothing=0.3))
    np.testing.assert_allclose(tf.nll_loss(t(_log_softmax(_X)), t(_Y), t(_W)).numpy(),
                               ref_nll(_log_softmax(_X), _Y, _W))
    np.testing.assert_allclose(tf.smooth_l1_loss(t(_A), t(_B), beta=0.7).numpy(),
                               ref_smooth_l1(_A, _B, beta=0.7))
    np.testing.assert_allclose(tf.huber_loss(t(_A), t(_B), delta=1.3).numpy(),
                               ref_huber(_A, _B, delta=1.3))
    np.testing.assert_allclose(tf.binary_cross_entropy(t(_P), t(_T), t(_EW)).numpy(),
                               ref_bce(_P, _T, _EW))
    np.testing.assert_allclose(
        tf.binary_cross_entropy_with_logits(t(_A), t(_T), t(_EW)).numpy(),
        ref_bce_logits(_A, _T, _EW))
    np.testing.assert_allclose(tf.kl_div(t(_LOGP), t(_TGT), reduction="batchmean").numpy(),
                               ref_kl(_LOGP, _TGT, "batchmean"))
    np.testing.assert_allclose(
        tf.kl_div(t(_LOGP), t(_log_softmax(_B)), log_target=True).numpy(),
        ref_kl(_LOGP, _log_softmax(_B), log_target=True))
