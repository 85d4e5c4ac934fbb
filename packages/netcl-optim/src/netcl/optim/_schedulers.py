"""Learning-rate schedulers: ``StepLR``, ``CosineAnnealingLR``, ``WarmupCosine``,
``ReduceLROnPlateau``. Call ``scheduler.step()`` once per epoch (or per step for WarmupCosine),
after ``optimizer.step()``.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> from netcl.optim import SGD
    >>> w = Tensor.from_host(manager.default("cpu").queue, np.ones(1))
    >>> opt = SGD([w], lr=1.0)
    >>> sched = StepLR(opt, step_size=2, gamma=0.5)
    >>> lrs = []
    >>> for _ in range(4):
    ...     sched.step()
    ...     lrs.append(sched.get_last_lr()[0])
    >>> lrs
    [1.0, 0.5, 0.5, 0.25]
"""

from __future__ import annotations

import math
from typing import Any

from ._optimizer import Optimizer

__all__ = ["CosineAnnealingLR", "LRScheduler", "ReduceLROnPlateau", "StepLR", "WarmupCosine"]


class LRScheduler:
    """Base: remembers each group's base lr and sets ``lr = base * factor(epoch)``.

    The base lr is the group's ``"initial_lr"`` (set from its lr by the first scheduler built
    on the optimizer, as PyTorch does), so schedulers chained on one optimizer
    (:class:`SequentialLR`) all start from the lr the user chose. Learning rates are set on
    the host, between steps: the update kernels take them as scalars.
    """

    def __init__(self, optimizer: Optimizer) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected an Optimizer, got "
                            f"{type(optimizer).__name__}")
        self.optimizer = optimizer
        self.base_lrs = [float(g.setdefault("initial_lr", g["lr"]))
                         for g in optimizer.param_groups]
        self.last_epoch = 0

    def lr_at(self, base_lr: float, epoch: int) -> float:
        """The learning rate for ``epoch`` given the group's base lr."""
        return base_lr

    def lrs_at(self, epoch: int) -> list[float]:
        """Every group's learning rate for ``epoch``."""
        return [self.lr_at(base, epoch) for base in self.base_lrs]

    def set_epoch(self, epoch: int) -> None:
        """Make ``epoch`` the current one and set every group's lr for it."""
        self.last_epoch = epoch
        for group, lr in zip(self.optimizer.param_groups, self.lrs_at(epoch)):
            group["lr"] = lr

    def step(self) -> None:
        """Advance one epoch and set every group's lr."""
        self.set_epoch(self.last_epoch + 1)

    def get_last_lr(self) -> list[float]:
        """The current lr of every group."""
        return [float(g["lr"]) for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (JSON-serialisable)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.__dict__.update(state)


class StepLR(LRScheduler):
    """``lr = base * gamma ** (epoch // step_size)``."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1) -> None:
        if step_size < 1:
            raise ValueError(f"StepLR: step_size must be >= 1, got {step_size}")
        super().__init__(optimizer)
        self.step_size, self.gamma = int(step_size), float(gamma)

    def lr_at(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** (epoch // self.step_size)


class CosineAnnealingLR(LRScheduler):
    """``lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2``."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:
        if T_max < 1:
            raise ValueError(f"CosineAnnealingLR: T_max must be >= 1, got {T_max}")
        super().__init__(optimizer)
        self.T_max, self.eta_min = int(T_max), float(eta_min)

    def lr_at(self, base_lr: float, epoch: int) -> float:
        t = min(epoch, self.T_max)
        cosine = (1 + math.cos(math.pi * t / self.T_max)) / 2
        return self.eta_min + (base_lr - self.eta_min) * cosine


class WarmupCosine(LRScheduler):
    """Linear warm-up from 0 over ``warmup_steps``, then cosine decay to ``min_lr`` at
    ``total_steps``."""

    def __init__(self, optimizer: Optimizer, warmup_steps: int, total_steps: int,
                 min_lr: float = 0.0) -> None:
        if not 0 <= warmup_steps < total_steps:
            raise ValueError(f"WarmupCosine: need 0 <= warmup_steps < total_steps, got "
                             f"{warmup_steps} and {total_steps}")
        super().__init__(optimizer)
        self.warmup_steps, self.total_steps, self.min_lr = warmup_steps, total_steps, min_lr
        self.set_epoch(0)

    def lr_at(self, base_lr: float, epoch: int) -> float:
        if epoch < self.warmup_steps:
            return base_lr * (epoch + 1) / self.warmup_steps
        span = self.total_steps - self.warmup_steps
        t = min(epoch - self.warmup_steps, span) / span
        return self.min_lr + (base_lr - self.min_lr) * (1 + math.cos(math.pi * t)) / 2


class ReduceLROnPlateau(LRScheduler):
    """Multiply lr by ``factor`` after ``patience`` epochs without improvement of the metric
    passed to ``step(metric)`` (PyTorch's rules: relative ``threshold``, ``cooldown``,
    ``min_lr``)."""

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, cooldown: int = 0,
                 min_lr: float = 0.0) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if not 0.0 < factor < 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be in (0, 1), got {factor}")
        super().__init__(optimizer)
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.cooldown, self.min_lr = threshold, cooldown, min_lr
        self.best = math.inf if mode == "min" else -math.inf
        self.bad_epochs = 0
        self.cooldown_left = 0

    def _better(self, metric: float) -> bool:
        if self.mode == "min":
            return metric < self.best * (1 - self.threshold)
        return metric > self.best * (1 + self.threshold)

    def step(self, metric: float | None = None) -> None:
        """Record ``metric`` for this epoch and reduce lr if it plateaued."""
        if metric is None:
            raise ValueError("ReduceLROnPlateau.step needs the metric, e.g. step(val_loss)")
        self.last_epoch += 1
        if self._better(float(metric)):
            self.best, self.bad_epochs = float(metric), 0
        else:
            self.bad_epochs += 1
        if self.cooldown_left > 0:
            self.cooldown_left -= 1
            self.bad_epochs = 0
        if self.bad_epochs > self.patience:
            for group in self.optimizer.param_groups:
                group["lr"] = max(group["lr"] * self.factor, self.min_lr)
            self.cooldown_left, self.bad_epochs = self.cooldown, 0
