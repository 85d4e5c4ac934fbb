"""Adagrad, RAdam and NAdam, PyTorch's formulas, as the optimizers of ``_optimizer.py``: device
kernels generated from one formula each (``_update_sources.py``; foreach launches), step
counts and bias corrections on the device, a skip flag for ``GradScaler``, float32 state for
float16 parameters; on the NumPy backend a few in-place array operations.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> w = Tensor.from_host(manager.default("cpu").queue, np.ones(2))
    >>> w.grad = Tensor.from_host(manager.default("cpu").queue, np.full(2, 0.5))
    >>> Adagrad([w], lr=0.1).step()
    >>> [round(float(v), 4) for v in w.to_host()]
    [0.9, 0.9]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from netcl.core.recording import numpy_update
from netcl.core.tensor import Tensor

from ._kernels import DeviceUpdate
from ._optimizer import Optimizer, ParamsArg, _compute, _store
from ._steps import STRIDE, StepRef

__all__ = ["Adagrad", "NAdam", "RAdam"]


def _check_betas(name: str, betas: tuple[float, float]) -> tuple[float, float]:
    if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
        raise ValueError(f"{name}: betas must be two values in [0, 1), got {betas}")
    return float(betas[0]), float(betas[1])


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.) as PyTorch's: ``g += wd * p``; ``clr = lr / (1 + (t - 1) *
    lr_decay)``; ``s += g^2``; ``p -= clr * g / (sqrt(s) + eps)``; ``s`` starts at
    ``initial_accumulator_value``."""

    state_names = ("sum",)

    def __init__(self, params: ParamsArg, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10) -> None:
        for key, value in (("lr_decay", lr_decay),
                           ("initial_accumulator_value", initial_accumulator_value)):
            if value < 0:
                raise ValueError(f"Adagrad: {key} must be >= 0, got {value}")
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value,
                                  "eps": eps})

    def _state_fill(self, name: str, group: Mapping[str, Any]) -> float:
        return float(group["initial_accumulator_value"])

    def _device_update(self, p: Tensor, g: Tensor, state: dict[str, Any],
                       group: dict[str, Any]) -> DeviceUpdate:
        return DeviceUpdate("adagrad", (g, state["sum"]), (
            group["lr"], group["lr_decay"], group["eps"], group["weight_decay"]))

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any],
                step: StepRef) -> None:
        lr, decay, eps, wd = group["lr"], group["lr_decay"], group["eps"], group["weight_decay"]
        numpy_update(_adagrad_np, p.array, g.array, state["sum"].array, step.steps.array,
                     STRIDE * step.index, step.skip.array, lr, decay, eps, wd)


class RAdam(Optimizer):
    """Rectified Adam (Liu et al.) as PyTorch's: Adam's moments; while the variance of the
    adaptive rate is intractable (``rho_t <= 5``) the step is ``lr * m_hat``, after it
    ``lr * m_hat * r_t * sqrt(1 - b2^t) / (sqrt(v) + eps)``. ``decoupled_weight_decay``
    shrinks the parameter (AdamW style) instead of adding ``wd * p`` to the gradient."""

    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params: ParamsArg, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False) -> None:
        super().__init__(params, {"lr": lr, "betas": _check_betas("RAdam", betas), "eps": eps,
                                  "weight_decay": weight_decay,
                                  "decoupled_weight_decay": bool(decoupled_weight_decay)})

    def _bias_betas(self, group: Mapping[str, Any]) -> tuple[float, float]:
        b1, b2 = group["betas"]
        return (1.0 - float(b1), 1.0 - float(b2))

    def _device_update(self, p: Tensor, g: Tensor, state: dict[str, Any],
                       group: dict[str, Any]) -> DeviceUpdate:
        b1, b2 = group["betas"]
        return DeviceUpdate("radam", (g, state["exp_avg"], state["exp_avg_sq"]), (
            group["lr"], b1, b2, 1.0 - float(b2), group["eps"], group["weight_decay"],
            bool(group["decoupled_weight_decay"])))

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any],
                step: StepRef) -> None:
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        decoupled = bool(group["decoupled_weight_decay"])
        m, v = state["exp_avg"], state["exp_avg_sq"]
        numpy_update(_radam_np, p.array, g.array, m.array, v.array, step.steps.array,
                     STRIDE * step.index, step.skip.array, lr, b1, b2, eps, wd, decoupled)


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat) as PyTorch's, with its momentum schedule
    ``mu_t = b1 (1 - 0.96^(t psi) / 2)`` (``psi = momentum_decay``): ``p -= lr (1 - mu_t) /
    (1 - prod mu) * g / d + lr mu_{t+1} / (1 - prod mu * mu_{t+1}) * m / d``, ``d =
    sqrt(v / (1 - b2^t)) + eps``. The running product is device state (NOTE [ NAdam's momentum
    product ] in ``_update_sources.py``)."""

    state_names = ("exp_avg", "exp_avg_sq", "mu_product")

    def __init__(self, params: ParamsArg, lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False) -> None:
        if momentum_decay < 0:
            raise ValueError(f"NAdam: momentum_decay must be >= 0, got {momentum_decay}")
        super().__init__(params, {"lr": lr, "betas": _check_betas("NAdam", betas), "eps": eps,
                                  "weight_decay": weight_decay,
                                  "momentum_decay": momentum_decay,
                                  "decoupled_weight_decay": bool(decoupled_weight_decay)})

    def _state_shape(self, name: str, p: Tensor) -> tuple[int, ...]:
        return (2,) if name == "mu_product" else p.shape

    def _state_fill(self, name: str, group: Mapping[str, Any]) -> float:
        return 1.0 if name == "mu_product" else 0.0

    def _bias_betas(self, group: Mapping[str, Any]) -> tuple[float, float]:
        b1, b2 = group["betas"]
        return (1.0 - float(b1), 1.0 - float(b2))

    def _device_update(self, p: Tensor, g: Tensor, state: dict[str, Any],
                       group: dict[str, Any]) -> DeviceUpdate:
        b1, b2 = group["betas"]
        buffers = (g, state["exp_avg"], state["exp_avg_sq"], state["mu_product"])
        return DeviceUpdate("nadam", buffers, (
            group["lr"], b1, b2, group["eps"], group["weight_decay"],
            group["momentum_decay"] * math.log(0.96), bool(group["decoupled_weight_decay"])))

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any],
                step: StepRef) -> None:
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        psi, decoupled = group["momentum_decay"], bool(group["decoupled_weight_decay"])
        m, v, mu = state["exp_avg"], state["exp_avg_sq"], state["mu_product"]
        numpy_update(_nadam_np, p.array, g.array, m.array, v.array, mu.array, step.steps.array,
                     STRIDE * step.index, step.skip.array, lr, b1, b2, eps, wd, psi, decoupled)


# -- NumPy backend (NOTE [ NumPy work under a recorder ] in netcl.core.recording) -------------


def _adagrad_np(p: Any, g: Any, acc: Any, steps: Any, at: int, skip: Any, lr: float,
                decay: float, eps: float, wd: float) -> None:
    if skip[0]:
        return
    t = float(steps[at])
    param, grad = _compute(p), _compute(g)
    if wd:
        grad = grad + wd * param
    acc += grad * grad
    param -= lr / (1 + (t - 1) * decay) * grad / (np.sqrt(acc) + eps)
    _store(p, param)


def _moments(param: Any, grad: Any, m: Any, v: Any, lr: float, b1: float, b2: float, wd: float,
             decoupled: bool) -> Any:
    """Weight decay (into ``param`` in place when decoupled, else the returned gradient) and
    the Adam moments ``m``, ``v`` updated in place; returns the gradient."""
    if decoupled:
        param *= 1 - lr * wd
    elif wd:
        grad = grad + wd * param
    m *= b1
    m += (1 - b1) * grad
    v *= b2
    v += (1 - b2) * grad * grad
    return grad


def _radam_np(p: Any, g: Any, m: Any, v: Any, steps: Any, at: int, skip: Any, lr: float,
              b1: float, b2: float, eps: float, wd: float, decoupled: bool) -> None:
    if skip[0]:
        return
    t = float(steps[at])
    param = _compute(p)
    _moments(param, _compute(g), m, v, lr, b1, b2, wd, decoupled)
    bc1, bc2 = 1 - b1**t, 1 - b2**t
    rho_inf = 2 / (1 - b2) - 1
    rho_t = rho_inf - 2 * t * b2**t / bc2
    step = m / bc1
    if rho_t > 5:
        rect = np.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                       / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        step = step * np.sqrt(bc2) / (np.sqrt(v) + eps) * rect
    param -= lr * step
    _store(p, param)


def _nadam_np(p: Any, g: Any, m: Any, v: Any, mu_product: Any, steps: Any, at: int, skip: Any,
              lr: float, b1: float, b2: float, eps: float, wd: float, psi: float,
              decoupled: bool) -> None:
    if skip[0]:
        return
    t = int(steps[at])
    param = _compute(p)
    grad = _moments(param, _compute(g), m, v, lr, b1, b2, wd, decoupled)
    mu = b1 * (1 - 0.5 * 0.96 ** (t * psi))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
    prod = float(mu_product[(t - 1) & 1]) * mu
    mu_product[t & 1] = prod
    denom = np.sqrt(v / (1 - b2**t)) + eps
    param -= lr * (1 - mu) / (1 - prod) * grad / denom
    param -= lr * mu_next / (1 - prod * mu_next) * m / denom
    _store(p, param)
