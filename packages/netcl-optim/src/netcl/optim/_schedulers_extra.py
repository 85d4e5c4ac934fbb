"""More of PyTorch's schedulers: ``MultiStepLR``, ``ExponentialLR``, ``LinearLR``,
``ConstantLR``, ``LambdaLR``,
``OneCycleLR`` (per step, cycling momentum too) and ``SequentialLR`` (one after another at
milestones), closed forms of the epoch like the others in ``_schedulers.py``.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> from netcl.optim import SGD
    >>> opt = SGD([Tensor.from_host(manager.default("cpu").queue, np.ones(1))], lr=1.0)
    >>> sched = MultiStepLR(opt, milestones=[2, 3], gamma=0.5)
    >>> lrs = []
    >>> for _ in range(4):
    ...     sched.step()
    ...     lrs.append(sched.get_last_lr()[0])
    >>> lrs
    [1.0, 0.5, 0.25, 0.25]
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from typing import Any

from ._optimizer import Optimizer
from ._schedulers import LRScheduler

__all__ = ["ConstantLR", "ExponentialLR", "LambdaLR", "LinearLR", "MultiStepLR", "OneCycleLR",
           "SequentialLR"]


class MultiStepLR(LRScheduler):
    """``lr = base * gamma ** (number of milestones <= epoch)``."""

    def __init__(self, optimizer: Optimizer, milestones: Sequence[int],
                 gamma: float = 0.1) -> None:
        stones = sorted(int(m) for m in milestones)
        if any(m < 0 for m in stones):
            raise ValueError(f"MultiStepLR: milestones must be >= 0, got {list(milestones)}")
        super().__init__(optimizer)
        self.milestones, self.gamma = stones, float(gamma)

    def lr_at(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma ** bisect.bisect_right(self.milestones, epoch)


class ExponentialLR(LRScheduler):
    """``lr = base * gamma ** epoch``."""

    def __init__(self, optimizer: Optimizer, gamma: float) -> None:
        if gamma <= 0:
            raise ValueError(f"ExponentialLR: gamma must be > 0, got {gamma}")
        super().__init__(optimizer)
        self.gamma = float(gamma)

    def lr_at(self, base_lr: float, epoch: int) -> float:
        return base_lr * self.gamma**epoch


class LinearLR(LRScheduler):
    """``lr = base * f``, ``f`` going linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs, then staying (a linear warm-up); set for epoch 0 at construction.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> from netcl.optim import SGD
        >>> opt = SGD([Tensor.from_host(manager.default("cpu").queue, np.ones(1))], lr=1.0)
        >>> sched = LinearLR(opt, start_factor=0.25, total_iters=3)
        >>> lrs = [opt.param_groups[0]["lr"]]
        >>> for _ in range(4):
        ...     sched.step()
        ...     lrs.append(sched.get_last_lr()[0])
        >>> lrs
        [0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5) -> None:
        if not 0.0 < start_factor <= 1.0 or not 0.0 <= end_factor <= 1.0:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1] and end_factor in "
                             f"[0, 1], got {start_factor} and {end_factor}")
        if total_iters < 1:
            raise ValueError(f"LinearLR: total_iters must be >= 1, got {total_iters}")
        super().__init__(optimizer)
        self.start_factor, self.end_factor = float(start_factor), float(end_factor)
        self.total_iters = int(total_iters)
        self.set_epoch(0)

    def lr_at(self, base_lr: float, epoch: int) -> float:
        done = min(epoch, self.total_iters) / self.total_iters
        return base_lr * (self.start_factor + (self.end_factor - self.start_factor) * done)


class ConstantLR(LRScheduler):
    """``lr = base * factor`` for the first ``total_iters`` epochs, then ``base``; set for
    epoch 0 at construction."""

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3,
                 total_iters: int = 5) -> None:
        if not 0.0 <= factor <= 1.0:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        super().__init__(optimizer)
        self.factor, self.total_iters = float(factor), int(total_iters)
        self.set_epoch(0)

    def lr_at(self, base_lr: float, epoch: int) -> float:
        return base_lr * (self.factor if epoch < self.total_iters else 1.0)


class LambdaLR(LRScheduler):
    """``lr = base * lr_lambda(epoch)``, one function for every group or one per group; the lr
    is set for epoch 0 at construction (PyTorch). The functions are not part of
    :meth:`state_dict`.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> from netcl.optim import SGD
        >>> opt = SGD([Tensor.from_host(manager.default("cpu").queue, np.ones(1))], lr=0.1)
        >>> sched = LambdaLR(opt, lambda epoch: (epoch + 1) / 4)
        >>> lrs = [opt.param_groups[0]["lr"]]
        >>> for _ in range(2):
        ...     sched.step()
        ...     lrs.append(sched.get_last_lr()[0])
        >>> [round(lr, 3) for lr in lrs]
        [0.025, 0.05, 0.075]
    """

    def __init__(self, optimizer: Optimizer,
                 lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]]) -> None:
        super().__init__(optimizer)
        groups = len(optimizer.param_groups)
        lambdas: list[Callable[[int], float]] = (
            list(lr_lambda) if isinstance(lr_lambda, (list, tuple))
            else [lr_lambda] * groups)  # type: ignore[list-item]
        if len(lambdas) != groups or not all(callable(f) for f in lambdas):
            raise ValueError(f"LambdaLR: expected one callable or {groups} (one per param "
                             f"group), got {lr_lambda!r}")
        self.lr_lambdas = lambdas
        self.set_epoch(0)

    def lrs_at(self, epoch: int) -> list[float]:
        return [base * float(f(epoch)) for base, f in zip(self.base_lrs, self.lr_lambdas)]

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in super().state_dict().items() if k != "lr_lambdas"}


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin), PyTorch's: per *step*, lr rises from
    ``max_lr / div_factor`` to ``max_lr`` over ``pct_start`` of ``total_steps``, then anneals
    (``"cos"`` or ``"linear"``) to ``initial / final_div_factor``; ``three_phase`` comes back
    down to the initial lr before the final annealing. With ``cycle_momentum`` the momentum
    (SGD's ``momentum``, Adam's first beta) moves the opposite way between ``max_momentum``
    and ``base_momentum``: a hyperparameter change every step, so a step captured by the
    Trainer is captured again each time; pass ``cycle_momentum=False`` to keep one graph.

    Raises:
        ValueError: no ``total_steps`` (nor ``epochs`` and ``steps_per_epoch``), bad
            ``pct_start`` or ``anneal_strategy``, a ``step()`` past ``total_steps``, or
            ``cycle_momentum`` with an optimizer that has no momentum.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> from netcl.optim import SGD
        >>> opt = SGD([Tensor.from_host(manager.default("cpu").queue, np.ones(1))], lr=0.1)
        >>> sched = OneCycleLR(opt, max_lr=1.0, total_steps=5, anneal_strategy="linear")
        >>> lrs = [opt.param_groups[0]["lr"]]
        >>> for _ in range(4):
        ...     sched.step()
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        >>> lrs
        [0.04, 0.8571, 0.5714, 0.2857, 0.0]
    """

    def __init__(self, optimizer: Optimizer, max_lr: float | Sequence[float],
                 total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3,
                 anneal_strategy: str = "cos", cycle_momentum: bool = True,
                 base_momentum: float = 0.85, max_momentum: float = 0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False) -> None:
        super().__init__(optimizer)
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = int(epochs) * int(steps_per_epoch)
        if total_steps < 1:
            raise ValueError(f"OneCycleLR: total_steps must be >= 1, got {total_steps}")
        if not 0.0 <= pct_start <= 1.0:
            raise ValueError(f"OneCycleLR: pct_start must be in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        groups = optimizer.param_groups
        maxes = ([float(m) for m in max_lr] if isinstance(max_lr, (list, tuple))
                 else [float(max_lr)] * len(groups))  # type: ignore[arg-type]
        if len(maxes) != len(groups):
            raise ValueError(f"OneCycleLR: expected {len(groups)} max_lr values, got {max_lr}")
        self.total_steps, self.anneal_strategy = int(total_steps), anneal_strategy
        self.cycle_momentum = cycle_momentum
        self.momentum_key = self._momentum_key(optimizer) if cycle_momentum else ""
        self.base_momentum, self.max_momentum = float(base_momentum), float(max_momentum)
        self.base_lrs = [m / div_factor for m in maxes]  # the initial lr of each group
        self.max_lrs = maxes
        self.min_lrs = [b / final_div_factor for b in self.base_lrs]
        end = float(pct_start * self.total_steps) - 1
        if three_phase:
            # (end step, lr from, lr to, momentum from, momentum to); "i", "m", "f": initial,
            # max and final lr
            self.phases = [(end, "i", "m", "hi", "lo"),
                           (float(2 * pct_start * self.total_steps) - 2, "m", "i", "lo", "hi"),
                           (self.total_steps - 1.0, "i", "f", "hi", "hi")]
        else:
            self.phases = [(end, "i", "m", "hi", "lo"),
                           (self.total_steps - 1.0, "m", "f", "lo", "hi")]
        self.set_epoch(0)

    @staticmethod
    def _momentum_key(optimizer: Optimizer) -> str:
        if "momentum" in optimizer.defaults:
            return "momentum"
        if "betas" in optimizer.defaults:
            return "betas"
        raise ValueError(f"OneCycleLR: {type(optimizer).__name__} has no momentum or betas to "
                         f"cycle; pass cycle_momentum=False")

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def _at(self, step: int) -> tuple[list[float], float]:
        """Every group's lr and the momentum at ``step``."""
        if step > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {step} times, more than total_steps="
                             f"{self.total_steps}")
        chosen, start = len(self.phases) - 1, 0.0
        for i, phase in enumerate(self.phases[:-1]):
            if step <= phase[0]:
                chosen = i
                break
            start = phase[0]
        end, lr_from, lr_to, mom_from, mom_to = self.phases[chosen]
        pct = (step - start) / (end - start) if end != start else 1.0
        table = {"i": self.base_lrs, "m": self.max_lrs, "f": self.min_lrs}
        lrs = [self._anneal(a, b, pct) for a, b in zip(table[lr_from], table[lr_to])]
        moms = {"hi": self.max_momentum, "lo": self.base_momentum}
        return lrs, self._anneal(moms[mom_from], moms[mom_to], pct)

    def lrs_at(self, epoch: int) -> list[float]:
        return self._at(epoch)[0]

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        if not self.cycle_momentum:
            return
        momentum = self._at(epoch)[1]
        for group in self.optimizer.param_groups:
            if self.momentum_key == "betas":
                group["betas"] = (momentum, group["betas"][1])
            else:
                group["momentum"] = momentum


class SequentialLR(LRScheduler):
    """``schedulers[i]`` from ``milestones[i - 1]`` on (each restarted at its epoch 0 when
    its turn comes), PyTorch's chaining: e.g. a linear warm-up then a cosine decay.

    Raises:
        ValueError: ``len(milestones) != len(schedulers) - 1``, or a scheduler of another
            optimizer.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> from netcl.optim import SGD
        >>> opt = SGD([Tensor.from_host(manager.default("cpu").queue, np.ones(1))], lr=1.0)
        >>> warm = LambdaLR(opt, lambda e: (e + 1) / 2)
        >>> decay = ExponentialLR(opt, gamma=0.5)
        >>> sched = SequentialLR(opt, [warm, decay], milestones=[2])
        >>> lrs = [opt.param_groups[0]["lr"]]
        >>> for _ in range(4):
        ...     sched.step()
        ...     lrs.append(sched.get_last_lr()[0])
        >>> lrs
        [0.5, 1.0, 1.0, 0.5, 0.25]
    """

    def __init__(self, optimizer: Optimizer, schedulers: Sequence[LRScheduler],
                 milestones: Sequence[int]) -> None:
        super().__init__(optimizer)
        if len(schedulers) < 1 or len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expected {max(len(schedulers) - 1, 0)} milestones "
                             f"for {len(schedulers)} schedulers, got {list(milestones)}")
        if any(s.optimizer is not optimizer for s in schedulers):
            raise ValueError("SequentialLR: every scheduler must drive the same optimizer")
        self.schedulers, self.milestones = list(schedulers), [int(m) for m in milestones]
        for s in self.schedulers:
            s.last_epoch = 0
        self.schedulers[0].set_epoch(0)

    def step(self) -> None:
        self.last_epoch += 1
        idx = bisect.bisect_right(self.milestones, self.last_epoch)
        current = self.schedulers[idx]
        if idx > 0 and self.milestones[idx - 1] == self.last_epoch:
            current.set_epoch(0)
        else:
            current.step()

    def state_dict(self) -> dict[str, Any]:
        return {"last_epoch": self.last_epoch, "milestones": list(self.milestones),
                "schedulers": [s.state_dict() for s in self.schedulers]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.last_epoch, self.milestones = state["last_epoch"], list(state["milestones"])
        for s, saved in zip(self.schedulers, state["schedulers"]):
            s.load_state_dict(saved)
