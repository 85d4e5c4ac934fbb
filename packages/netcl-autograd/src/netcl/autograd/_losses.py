"""Losses: cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits.

All are built from differentiable ops (so their gradients come from the op registry), except
the elementwise core of ``binary_cross_entropy_with_logits``, a registry entry of its own: the
composite's subgradient at ``x = 0`` would be wrong (``relu'(0) = abs'(0) = 0`` do not cancel
the way the exact derivative ``sigmoid(x) - y`` does).
"""

from __future__ import annotations

import netcl.ops as _ops
from netcl.core.tensor import Tensor, reshape

from . import _ops_elementwise as ew
from . import _ops_movement as mv
from . import _ops_reduce as rd
from ._function import Grads, differentiable, unbroadcast
from ._lazy import has_lazy
from ._tape import Backward, no_grad, record

__all__ = ["binary_cross_entropy_with_logits", "cross_entropy", "mse_loss", "nll_loss"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(op: str, reduction: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {', '.join(_REDUCTIONS)}, "
                         f"got {reduction!r}")


def _check(op: str, x: object, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a netcl Tensor, got {type(x).__name__}")
    return x


def _rows(op: str, x: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
    """(N, C, d1, ...) scores and (N, d1, ...) labels as (M, C) rows and (M,) labels."""
    if labels.dtype not in ("int32", "int64"):
        raise TypeError(f"{op}: labels must be int32 or int64 class indices, got {labels.dtype}")
    if x.ndim < 2:
        raise ValueError(f"{op}: input must be (N, C) or (N, C, d1, ...), got shape {x.shape}")
    want = (x.shape[0], *x.shape[2:])
    if labels.shape != want:
        raise ValueError(f"{op}: labels must have shape {want} for input {x.shape}, got "
                         f"{labels.shape}")
    if x.ndim == 2:
        return x, labels
    order = [0, *range(2, x.ndim), 1]
    rows = mv.reshape(mv.permute(x, order), (-1, x.shape[1]))
    return rows, reshape(labels, (labels.size,))


def _reduce(per_item: Tensor, reduction: str, count: Tensor | None, shape: tuple[int, ...]
            ) -> Tensor:
    if reduction == "none":
        return mv.reshape(per_item, shape)
    total = rd.sum(per_item)
    if reduction == "sum":
        return total
    return ew.div(total, count) if count is not None else rd.mean(per_item)


def _valid_count(labels: Tensor, ignore_index: int, dtype: str) -> tuple[Tensor, Tensor]:
    """(per-row 0/1 weights in ``dtype``, their sum): rows whose label is not ignored."""
    valid = _ops.cast(_ops.ne(labels, ignore_index), dtype)
    return valid, _ops.sum(valid)


def nll_loss(logp: Tensor, labels: Tensor, reduction: str = "mean",
             ignore_index: int = -100) -> Tensor:
    """Negative log-likelihood of class ``labels`` under log-probabilities ``logp``.

    Args:
        logp: (N, C) or (N, C, d1, ...) log-probabilities.
        labels: (N,) or (N, d1, ...) int32/int64 class indices.
        reduction: ``"mean"`` (over rows whose label is not ``ignore_index``), ``"sum"`` or
            ``"none"`` (per row, in ``labels``' shape).
        ignore_index: a label value whose rows contribute nothing.

    Raises:
        TypeError: non-Tensor arguments or float labels.
        ValueError: bad ``reduction`` or shapes.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> logp = Tensor.from_host(q, np.log(np.array([[0.5, 0.5], [0.25, 0.75]])))
        >>> y = Tensor.from_host(q, np.array([0, 1]))
        >>> round(float(nll_loss(logp, y).to_host()), 4)
        0.4904
    """
    logp, labels = _check("nll_loss", logp, "logp"), _check("nll_loss", labels, "labels")
    _check_reduction("nll_loss", reduction)
    rows, flat = _rows("nll_loss", logp, labels)
    per_row = rd.nll_gather(rows, flat, ignore_index=ignore_index)
    count = _valid_count(flat, ignore_index, logp.dtype)[1] if reduction == "mean" else None
    return _reduce(per_row, reduction, count, labels.shape)


def cross_entropy(logits: Tensor, labels: Tensor, reduction: str = "mean",
                  ignore_index: int = -100, label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy of unnormalized ``logits`` against integer class ``labels``.

    ``log_softmax`` over the class axis (1), then :func:`nll_loss`; with ``label_smoothing``
    ``e`` the target is ``(1 - e)`` on the label plus ``e / C`` on every class (PyTorch).

    Args:
        logits: (N, C) or (N, C, d1, ...) scores.
        labels: (N,) or (N, d1, ...) int32/int64 class indices.
        reduction: ``"mean"`` (over non-ignored rows), ``"sum"`` or ``"none"``.
        ignore_index: a label value whose rows contribute nothing.
        label_smoothing: in ``[0, 1]``.

    Raises:
        TypeError: non-Tensor arguments or float labels.
        ValueError: bad ``reduction``, ``label_smoothing`` or shapes.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> logits = Tensor.from_host(q, np.array([[2.0, 0.0], [0.0, 0.0]]))
        >>> y = Tensor.from_host(q, np.array([0, 1]))
        >>> round(float(cross_entropy(logits, y).to_host()), 4)
        0.41
    """
    logits = _check("cross_entropy", logits, "logits")
    labels = _check("cross_entropy", labels, "labels")
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got "
                         f"{label_smoothing!r}")
    rows, flat = _rows("cross_entropy", logits, labels)
    if label_smoothing == 0 and reduction != "none" and not has_lazy((rows, flat), {}):
        return _cross_entropy_node(rows, flat, ignore_index, reduction == "mean")
    logp = rd.log_softmax(rows, axis=1)
    per_row = rd.nll_gather(logp, flat, ignore_index=ignore_index)
    valid, count = _valid_count(flat, ignore_index, logits.dtype)
    eps = float(label_smoothing)
    if eps > 0.0:
        uniform = ew.mul(ew.neg(rd.mean(logp, axis=1)), valid)
        per_row = ew.add(ew.mul(per_row, 1.0 - eps), ew.mul(uniform, eps))
    return _reduce(per_row, reduction, count if reduction == "mean" else None, labels.shape)


# NOTE [ One node for cross entropy ]
# Mean or summed cross entropy without label smoothing records a single node whose backward
# is the closed form ``(softmax - one_hot(label)) * valid * g / count``: the composite
# (log_softmax, nll_gather, sum, div: four nodes, a dozen backward ops) spent most of a small
# training step's loss time in recording and in backward rules (about a fifth of the digits
# CNN's step at batch 2 on NumPy). Its forward is netcl.ops.softmax_cross_entropy: on OpenCL
# one kernel (log-softmax, the label gather and the reduction; the backward's log-probabilities
# kept), elsewhere the same ops as the composite; jit traces (lazy values) keep the composite.


def _cross_entropy_node(rows: Tensor, labels: Tensor, ignore_index: int, mean: bool) -> Tensor:
    with no_grad():  # one launch on OpenCL devices (netcl.ops.softmax_cross_entropy)
        out, logp = _ops.softmax_cross_entropy(rows, labels, ignore_index,
                                               "mean" if mean else "sum", keep_logp=True)
    if logp is None:  # keep_logp=True returns them on every backend
        raise RuntimeError("cross_entropy: softmax_cross_entropy kept no log-probabilities")

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        keep = _ops.ne(labels, ignore_index)
        valid = _ops.cast(keep, rows.dtype)
        weight = _ops.mul(valid, g)
        if mean:
            weight = _ops.div(weight, _ops.sum(valid))
        hot = _ops.one_hot(_ops.where(keep, labels, 0), rows.shape[1], dtype=rows.dtype)
        diff = _ops.sub(_ops.exp(logp), hot)
        return _ops.mul(diff, reshape(weight, (rows.shape[0], 1))), None

    return record("cross_entropy", (rows, labels), out, backward)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean squared error ``(input - target)**2`` (``target`` broadcasts to ``input``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> a, b = Tensor.from_host(q, np.array([1.0, 2.0])), Tensor.from_host(q, np.zeros(2))
        >>> mse_loss(a, b).to_host().tolist()
        2.5
    """
    input, target = _check("mse_loss", input, "input"), _check("mse_loss", target, "target")
    _check_reduction("mse_loss", reduction)
    diff = ew.sub(input, target)
    return _reduce(ew.mul(diff, diff), reduction, None, diff.shape)


@differentiable("binary_cross_entropy_with_logits")
def _bce_with_logits(x: Tensor, y: Tensor, pos_weight: Tensor | None) -> tuple[Tensor, Backward]:
    """Per element: ``(1 - y) x + L softplus(-x)``, ``L = 1 + (pos_weight - 1) y``."""
    neg_abs = _ops.neg(_ops.abs(x))
    softplus_neg = _ops.add(_ops.log(_ops.add(_ops.exp(neg_abs), 1.0)), _ops.relu(_ops.neg(x)))
    weight = None if pos_weight is None else _ops.add(_ops.mul(_ops.sub(pos_weight, 1.0), y), 1.0)
    scaled = softplus_neg if weight is None else _ops.mul(weight, softplus_neg)
    out = _ops.add(_ops.mul(_ops.sub(1.0, y), x), scaled)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        gx = gy = None
        if needs[0]:  # (1 - y) + L (sigmoid(x) - 1)
            s1 = _ops.sub(_ops.sigmoid(x), 1.0)
            d = _ops.sub(_ops.add(s1 if weight is None else _ops.mul(weight, s1), 1.0), y)
            gx = unbroadcast(_ops.mul(g, d), x.shape)
        if needs[1]:  # -x + (pos_weight - 1) softplus(-x)
            d = _ops.neg(x)
            if pos_weight is not None:
                d = _ops.add(d, _ops.mul(_ops.sub(pos_weight, 1.0), softplus_neg))
            gy = unbroadcast(_ops.mul(g, d), y.shape)
        grads: list[Tensor | None] = [gx, gy]
        if pos_weight is not None:
            grads.append(None)  # pos_weight is a constant of the loss
        return grads

    return out, backward


def binary_cross_entropy_with_logits(logits: Tensor, targets: Tensor, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Sigmoid + binary cross entropy in one numerically stable step.

    Args:
        logits: scores of any shape.
        targets: probabilities in [0, 1], same shape as ``logits``.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        pos_weight: weight of the positive term, broadcast over the last dim (no gradient).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x, y = Tensor.from_host(q, np.zeros(2)), Tensor.from_host(q, np.array([0.0, 1.0]))
        >>> round(float(binary_cross_entropy_with_logits(x, y).to_host()), 4)
        0.6931
    """
    op = "binary_cross_entropy_with_logits"
    logits, targets = _check(op, logits, "logits"), _check(op, targets, "targets")
    _check_reduction(op, reduction)
    if logits.shape != targets.shape:
        raise ValueError(f"{op}: targets must have the shape of logits {logits.shape}, got "
                         f"{targets.shape}")
    per_item = _bce_with_logits(logits, targets, pos_weight)
    return _reduce(per_item, reduction, None, logits.shape)
