"""Loss modules, as ``torch.nn``'s: each holds its settings and calls the function of the
same name in :mod:`netcl.nn.functional` (``CrossEntropyLoss`` -> ``F.cross_entropy``).

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> criterion = CrossEntropyLoss(label_smoothing=0.1)
    >>> criterion
    CrossEntropyLoss(reduction='mean', label_smoothing=0.1)
    >>> logits = Tensor.from_host(q, np.zeros((2, 3)))
    >>> round(float(criterion(logits, Tensor.from_host(q, np.array([0, 2]))).to_host()), 4)
    1.0986
"""

from __future__ import annotations

from netcl.core.tensor import Tensor

from . import functional as F
from ._module import Module

__all__ = [
    "BCELoss",
    "BCEWithLogitsLoss",
    "CrossEntropyLoss",
    "HuberLoss",
    "KLDivLoss",
    "L1Loss",
    "MSELoss",
    "NLLLoss",
    "SmoothL1Loss",
]

_REDUCTIONS = ("mean", "sum", "none")


class _Loss(Module):
    """A loss module: ``reduction`` checked once, at construction."""

    extra_reductions: tuple[str, ...] = ()

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        allowed = _REDUCTIONS + self.extra_reductions
        if reduction not in allowed:
            raise ValueError(f"{type(self).__name__}: reduction must be one of "
                             f"{', '.join(allowed)}, got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class _WeightedLoss(_Loss):
    weight: Tensor | None

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if weight is not None and not isinstance(weight, Tensor):
            raise TypeError(f"{type(self).__name__}: weight must be a netcl Tensor, got "
                            f"{type(weight).__name__}")
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    """Mean absolute error: :func:`netcl.nn.functional.l1_loss`."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """Mean squared error: :func:`netcl.nn.functional.mse_loss`."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Squared below ``beta``, absolute above: :func:`netcl.nn.functional.smooth_l1_loss`."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        if beta < 0:
            raise ValueError(f"SmoothL1Loss: beta must be >= 0, got {beta}")
        self.beta = float(beta)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, beta={self.beta}"


class HuberLoss(_Loss):
    """Squared below ``delta``, linear above: :func:`netcl.nn.functional.huber_loss`."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        if delta <= 0:
            raise ValueError(f"HuberLoss: delta must be > 0, got {delta}")
        self.delta = float(delta)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, delta={self.delta}"


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities: :func:`netcl.nn.functional.nll_loss`."""

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean") -> None:
        super().__init__(weight, reduction)
        self.ignore_index = int(ignore_index)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy of scores against class indices or probabilities, with class ``weight``,
    ``ignore_index`` and ``label_smoothing``: :func:`netcl.nn.functional.cross_entropy`.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> loss = CrossEntropyLoss(weight=Tensor.from_host(q, np.array([1.0, 2.0])))
        >>> x = Tensor.from_host(q, np.array([[0.0, 0.0], [0.0, 0.0]]))
        >>> round(float(loss(x, Tensor.from_host(q, np.array([0, 1]))).to_host()), 4)
        0.6931
    """

    def __init__(self, weight: Tensor | None = None, ignore_index: int = -100,
                 reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got "
                             f"{label_smoothing}")
        self.ignore_index, self.label_smoothing = int(ignore_index), float(label_smoothing)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)

    def extra_repr(self) -> str:
        smoothing = f", label_smoothing={self.label_smoothing}" if self.label_smoothing else ""
        return f"reduction={self.reduction!r}{smoothing}"


class BCELoss(_WeightedLoss):
    """Binary cross entropy of probabilities: :func:`netcl.nn.functional.binary_cross_entropy`.
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss):
    """Sigmoid + binary cross entropy:
    :func:`netcl.nn.functional.binary_cross_entropy_with_logits`."""

    pos_weight: Tensor | None

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean",
                 pos_weight: Tensor | None = None) -> None:
        super().__init__(weight, reduction)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of log-probabilities ``input`` from ``target``
    (``reduction`` may also be ``"batchmean"``): :func:`netcl.nn.functional.kl_div`."""

    extra_reductions = ("batchmean",)

    def __init__(self, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction)
        self.log_target = bool(log_target)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, log_target={self.log_target}"
