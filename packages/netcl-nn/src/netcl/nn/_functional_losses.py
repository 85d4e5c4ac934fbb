"""The losses of ``torch.nn.functional``, with its signatures: ``cross_entropy`` (class
``weight``, soft targets, ``ignore_index``, ``label_smoothing``), ``nll_loss``, ``mse_loss``,
``l1_loss``, ``smooth_l1_loss``, ``huber_loss``, ``binary_cross_entropy``,
``binary_cross_entropy_with_logits`` and ``kl_div``.

Each is composed of the differentiable ops of :mod:`netcl.autograd` (device ops on every
backend: nothing is read back to the host), so its gradient comes from theirs. The common
case of ``cross_entropy`` (integer targets, no weight, no smoothing) is
:func:`netcl.autograd.cross_entropy`'s single recorded node.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> x, y = Tensor.from_host(q, np.array([0.0, 3.0])), Tensor.from_host(q, np.zeros(2))
    >>> float(l1_loss(x, y).to_host()), float(huber_loss(x, y).to_host())
    (1.5, 1.25)
"""

from __future__ import annotations

import netcl.autograd as _ag
import netcl.ops as _raw
from netcl.autograd import ops as _ops
from netcl.core.tensor import Tensor

__all__ = [
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "huber_loss",
    "kl_div",
    "l1_loss",
    "mse_loss",
    "nll_loss",
    "smooth_l1_loss",
]

_REDUCTIONS = ("mean", "sum", "none")


def _tensor(op: str, value: object, name: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{op}: {name} must be a netcl Tensor, got {type(value).__name__}")
    return value


def _reduction(op: str, reduction: str, extra: tuple[str, ...] = ()) -> None:
    allowed = _REDUCTIONS + extra
    if reduction not in allowed:
        raise ValueError(f"{op}: reduction must be one of {', '.join(allowed)}, got "
                         f"{reduction!r}")


def _same_shape(op: str, input: Tensor, target: Tensor) -> None:
    if input.shape != target.shape:
        raise ValueError(f"{op}: target must have the shape of input {input.shape}, got "
                         f"{target.shape}")


def _reduce(per_item: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return per_item
    return _ops.sum(per_item) if reduction == "sum" else _ops.mean(per_item)


def _rows(x: Tensor) -> Tensor:
    """(N, C, d1, ...) as (N * d1 * ..., C) rows (a permute and a reshape when 3-D and up)."""
    if x.ndim == 2:
        return x
    return _ops.reshape(_ops.permute(x, [0, *range(2, x.ndim), 1]), (-1, x.shape[1]))


def _class_weight(op: str, weight: Tensor | None, classes: int) -> None:
    if weight is not None and (_tensor(op, weight, "weight").shape != (classes,)):
        raise ValueError(f"{op}: weight must have shape ({classes},) (one per class), got "
                         f"{weight.shape}")


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, *,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class ``target`` under log-probabilities ``input``
    (``torch.nn.functional.nll_loss``).

    With ``weight`` (C,), row ``i`` counts ``weight[target[i]]`` times, and ``"mean"`` divides
    by the sum of the counted rows' weights (PyTorch's rule).

    Args:
        input: (N, C) or (N, C, d1, ...) log-probabilities.
        target: (N,) or (N, d1, ...) int32/int64 class indices.
        weight: optional (C,) class weights (no gradient).
        ignore_index: a target value whose rows contribute nothing.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Raises:
        TypeError: non-Tensor arguments or float targets.
        ValueError: bad ``reduction`` or shapes.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> logp = Tensor.from_host(q, np.log(np.array([[0.5, 0.5], [0.25, 0.75]])))
        >>> y, w = Tensor.from_host(q, np.array([0, 1])), Tensor.from_host(q, np.array([1., 3.]))
        >>> round(float(nll_loss(logp, y, w).to_host()), 4)
        0.389
    """
    input, target = _tensor("nll_loss", input, "input"), _tensor("nll_loss", target, "target")
    _reduction("nll_loss", reduction)
    if input.ndim >= 2:
        _class_weight("nll_loss", weight, input.shape[1])
    if weight is None:
        return _ag.nll_loss(input, target, reduction=reduction, ignore_index=ignore_index)
    return _weighted_nll("nll_loss", input, target, weight, ignore_index, reduction, 0.0)


def _weighted_nll(op: str, logp: Tensor, target: Tensor, weight: Tensor | None,
                  ignore_index: int, reduction: str, smoothing: float) -> Tensor:
    """PyTorch's weighted (and label-smoothed) NLL of integer targets, from log-probabilities
    (``aten/src/ATen/native/LossNLL.cpp``: ``cross_entropy_loss_label_smoothing``)."""
    if target.dtype not in ("int32", "int64"):
        raise TypeError(f"{op}: integer targets must be int32 or int64, got {target.dtype}")
    want = (logp.shape[0], *logp.shape[2:])
    if logp.ndim < 2 or target.shape != want:
        raise ValueError(f"{op}: target must have shape {want} for input {logp.shape}, got "
                         f"{target.shape}")
    classes = logp.shape[1]
    rows = _rows(logp)
    flat = _raw.reshape(target, (target.size,))
    keep = _raw.ne(flat, ignore_index)
    valid = _raw.cast(keep, logp.dtype)
    scaled = rows if weight is None else _ops.mul(rows, _raw.reshape(weight, (1, classes)))
    per_row = _ops.nll_gather(scaled, flat, ignore_index=ignore_index)
    if smoothing > 0.0:
        smooth = _ops.mul(_ops.neg(_ops.sum(scaled, axis=1)), valid)
        per_row = _ops.add(_ops.mul(per_row, 1.0 - smoothing),
                           _ops.mul(smooth, smoothing / classes))
    if reduction == "none":
        return _ops.reshape(per_row, target.shape)
    total = _ops.sum(per_row)
    if reduction == "sum":
        return total
    if weight is None:
        return _ops.div(total, _raw.sum(valid))
    counted = _raw.mul(_raw.index_select(weight, 0, _raw.where(keep, flat, 0)), valid)
    return _ops.div(total, _raw.sum(counted))


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, *,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy between unnormalized scores and class indices or class probabilities
    (``torch.nn.functional.cross_entropy``).

    Integer ``target`` (N,) / (N, d1, ...): ``-weight[y] * log_softmax(input)[y]`` per row,
    ``"mean"`` divided by the summed weights of the non-ignored rows. Float ``target`` of
    ``input``'s shape (soft labels): ``-sum_c weight[c] * target[c] * log_softmax(input)[c]``,
    ``"mean"`` over the rows. ``label_smoothing`` ``e`` mixes the target with the uniform
    distribution: ``(1 - e) * target + e / C``.

    Args:
        input: (N, C) or (N, C, d1, ...) scores.
        target: class indices (int32/int64) or probabilities (float, ``input``'s shape).
        weight: optional (C,) class weights (no gradient).
        ignore_index: with class indices, a value whose rows contribute nothing.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        label_smoothing: in ``[0, 1]``.

    Raises:
        TypeError: non-Tensor arguments.
        ValueError: bad ``reduction``, ``label_smoothing``, ``weight`` or shapes.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> logits = Tensor.from_host(q, np.array([[2.0, 0.0], [0.0, 0.0]]))
        >>> round(float(cross_entropy(logits, Tensor.from_host(q, np.array([0, 1]))).to_host()), 4)
        0.41
        >>> soft = Tensor.from_host(q, np.array([[1.0, 0.0], [0.0, 1.0]]))
        >>> round(float(cross_entropy(logits, soft).to_host()), 4)
        0.41
    """
    op = "cross_entropy"
    input, target = _tensor(op, input, "input"), _tensor(op, target, "target")
    _reduction(op, reduction)
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing!r}")
    if input.ndim < 2:
        raise ValueError(f"{op}: input must be (N, C) or (N, C, d1, ...), got {input.shape}")
    _class_weight(op, weight, input.shape[1])
    if target.is_floating_point:
        return _soft_cross_entropy(input, target, weight, reduction, float(label_smoothing))
    if weight is None:
        return _ag.cross_entropy(input, target, reduction=reduction, ignore_index=ignore_index,
                                 label_smoothing=label_smoothing)
    logp = _ops.log_softmax(input, 1)
    return _weighted_nll(op, logp, target, weight, ignore_index, reduction,
                         float(label_smoothing))


def _soft_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None, reduction: str,
                        smoothing: float) -> Tensor:
    _same_shape("cross_entropy", input, target)
    classes = input.shape[1]
    if smoothing > 0.0:
        target = _ops.add(_ops.mul(target, 1.0 - smoothing), smoothing / classes)
    prod = _ops.mul(_ops.log_softmax(input, 1), target)
    if weight is not None:
        prod = _ops.mul(prod, _raw.reshape(weight, (1, classes) + (1,) * (input.ndim - 2)))
    return _reduce(_ops.neg(_ops.sum(prod, axis=1)), reduction)


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """``(input - target) ** 2`` (``torch.nn.functional.mse_loss``; ``target`` broadcasts).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> a, b = Tensor.from_host(q, np.array([1.0, 2.0])), Tensor.from_host(q, np.zeros(2))
        >>> float(mse_loss(a, b, reduction="sum").to_host())
        5.0
    """
    return _ag.mse_loss(input, target, reduction=reduction)


def _diff(op: str, input: Tensor, target: Tensor, reduction: str) -> Tensor:
    input, target = _tensor(op, input, "input"), _tensor(op, target, "target")
    _reduction(op, reduction)
    return _ops.sub(input, target)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """``|input - target|`` (``torch.nn.functional.l1_loss``; gradient ``sign``, 0 at 0).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> a, b = Tensor.from_host(q, np.array([1.0, -2.0])), Tensor.from_host(q, np.zeros(2))
        >>> float(l1_loss(a, b).to_host())
        1.5
    """
    return _reduce(_ops.abs(_diff("l1_loss", input, target, reduction)), reduction)


def _quadratic_near_zero(op: str, input: Tensor, target: Tensor, reduction: str,
                         width: float, scale: float) -> Tensor:
    """``0.5 d^2 * scale / width`` where ``|d| < width``, else ``scale * (|d| - width / 2)``
    (smooth L1: ``scale = 1``, ``width = beta``; Huber: ``scale = width = delta``)."""
    if float(width) < 0.0:
        raise ValueError(f"{op}: {'beta' if op == 'smooth_l1_loss' else 'delta'} must be >= 0, "
                         f"got {width}")
    d = _diff(op, input, target, reduction)
    a = _ops.abs(d)
    if width == 0.0:
        return _reduce(a, reduction)
    quad = _ops.mul(_ops.mul(d, d), 0.5 * scale / width)
    lin = _ops.mul(_ops.sub(a, 0.5 * width), scale)
    return _reduce(_ops.where(_raw.lt(a, width), quad, lin), reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - beta / 2``, ``d = input - target``
    (``torch.nn.functional.smooth_l1_loss``; ``beta = 0`` is :func:`l1_loss`).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> a, b = Tensor.from_host(q, np.array([0.5, 3.0])), Tensor.from_host(q, np.zeros(2))
        >>> smooth_l1_loss(a, b, reduction="none").to_host().tolist()
        [0.125, 2.5]
    """
    return _quadratic_near_zero("smooth_l1_loss", input, target, reduction, beta, 1.0)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:
    """``0.5 d^2`` where ``|d| < delta``, else ``delta * (|d| - delta / 2)``
    (``torch.nn.functional.huber_loss``: ``delta`` times :func:`smooth_l1_loss` with
    ``beta = delta``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> a, b = Tensor.from_host(q, np.array([0.5, 3.0])), Tensor.from_host(q, np.zeros(2))
        >>> huber_loss(a, b, reduction="none", delta=2.0).to_host().tolist()
        [0.125, 4.0]
    """
    return _quadratic_near_zero("huber_loss", input, target, reduction, delta, delta)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean") -> Tensor:
    """``-weight * (t log p + (1 - t) log(1 - p))`` of probabilities ``input``
    (``torch.nn.functional.binary_cross_entropy``); each log is clamped at -100 as in PyTorch,
    so ``p = 0`` or ``1`` gives a finite loss.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> p, t = Tensor.from_host(q, np.array([0.5, 1.0])), Tensor.from_host(q, np.ones(2))
        >>> round(float(binary_cross_entropy(p, t).to_host()), 4)
        0.3466
    """
    op = "binary_cross_entropy"
    input, target = _tensor(op, input, "input"), _tensor(op, target, "target")
    _reduction(op, reduction)
    _same_shape(op, input, target)
    log_p = _ops.clamp(_ops.log(input), -100.0)
    log_q = _ops.clamp(_ops.log(_ops.sub(1.0, input)), -100.0)
    per = _ops.neg(_ops.add(_ops.mul(target, log_p), _ops.mul(_ops.sub(1.0, target), log_q)))
    if weight is not None:
        per = _ops.mul(per, _tensor(op, weight, "weight"))
    return _reduce(per, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, *, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Sigmoid and binary cross entropy in one stable step
    (``torch.nn.functional.binary_cross_entropy_with_logits``): ``weight`` scales each element
    (broadcast), ``pos_weight`` the positive term (broadcast over the last dim).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x, y = Tensor.from_host(q, np.zeros(2)), Tensor.from_host(q, np.array([0.0, 1.0]))
        >>> round(float(binary_cross_entropy_with_logits(x, y).to_host()), 4)
        0.6931
    """
    op = "binary_cross_entropy_with_logits"
    _reduction(op, reduction)
    if weight is None:
        return _ag.binary_cross_entropy_with_logits(input, target, reduction=reduction,
                                                    pos_weight=pos_weight)
    per = _ag.binary_cross_entropy_with_logits(input, target, reduction="none",
                                               pos_weight=pos_weight)
    return _reduce(_ops.mul(per, _tensor(op, weight, "weight")), reduction)


def kl_div(input: Tensor, target: Tensor, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence ``target * (log(target) - input)`` with ``input``
    log-probabilities (``torch.nn.functional.kl_div``; ``0 log 0 = 0``). With ``log_target``
    the target is given as log-probabilities too. ``"batchmean"`` divides the sum by the batch
    size (the mathematically correct KL; ``"mean"`` averages over every element, as PyTorch).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> logp = Tensor.from_host(q, np.log(np.array([[0.5, 0.5]])))
        >>> t = Tensor.from_host(q, np.array([[1.0, 0.0]]))
        >>> round(float(kl_div(logp, t, reduction="batchmean").to_host()), 4)
        0.6931
    """
    op = "kl_div"
    input, target = _tensor(op, input, "input"), _tensor(op, target, "target")
    _reduction(op, reduction, ("batchmean",))
    _same_shape(op, input, target)
    if log_target:
        per = _ops.mul(_ops.exp(target), _ops.sub(target, input))
    else:
        positive = _raw.gt(target, 0.0)
        log_t = _ops.log(_ops.where(positive, target, 1.0))  # log(1) = 0 where target is 0
        per = _ops.mul(target, _ops.sub(log_t, input))
    if reduction == "batchmean":
        total = _ops.sum(per)
        return _ops.div(total, float(input.shape[0])) if input.ndim else total
    return _reduce(per, reduction)
