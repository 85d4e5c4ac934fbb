"""Optimizers: the ``Optimizer`` base with param groups, and SGD, Momentum, Adam, AdamW, RMSProp.

Each update rule follows PyTorch's documented formula. On OpenCL it is one kernel launch per
parameter (state kept on the device); on the NumPy backend it is a handful of in-place array
operations. The host never reads a parameter or gradient back.

float16 parameters work on every backend and device: their update is computed in float32 and
rounded to float16 once, and their state is float32 (see NOTE [ float16 parameters ] in
``_kernels.py``).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor, copy_from_host

from ._kernels import run_update, state_dtype

__all__ = ["SGD", "Adam", "AdamW", "Momentum", "Optimizer", "RMSProp"]

ParamsArg = Iterable[Tensor] | Iterable[dict[str, Any]]


class Optimizer(abc.ABC):
    """Base class: param groups, per-parameter state, ``zero_grad``, ``state_dict``.

    Subclasses set ``defaults`` and implement :meth:`_update`. Per-parameter state tensors
    have the parameter's dtype, except for float16 parameters, whose state is float32 (more
    accurate than PyTorch's float16 state; it is also what :meth:`state_dict` holds).
    """

    #: names of per-parameter state tensors, in kernel argument order
    state_names: tuple[str, ...] = ()

    def __init__(self, params: ParamsArg, defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[int, dict[str, Any]] = {}
        items = list(params)
        if not items:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        groups = items if isinstance(items[0], dict) else [{"params": items}]
        seen: set[int] = set()
        for group in groups:
            if not isinstance(group, dict):
                raise TypeError(f"{type(self).__name__}: mix of tensors and param groups")
            self.add_param_group(group, seen)

    def add_param_group(self, group: dict[str, Any], seen: set[int] | None = None) -> None:
        """Add a group ``{"params": [...], **hyper-parameter overrides}``."""
        name = type(self).__name__
        params = list(group["params"])
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: parameters must be Tensors, got {type(p).__name__}")
            if not p.is_floating_point:
                raise TypeError(f"{name}: parameters must be floating point, got {p.dtype}")
        ids = {id(p) for p in params}
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if seen is not None:
            existing |= seen
        if ids & existing or len(ids) != len(params):
            raise ValueError(f"{name}: a parameter appears in more than one group")
        unknown = set(group) - set(self.defaults) - {"params"}
        if unknown:
            raise ValueError(f"{name}: unknown hyper-parameters {sorted(unknown)}")
        full = {**self.defaults, **group, "params": params}
        self._check_hyper(full)
        self.param_groups.append(full)

    def _check_hyper(self, group: Mapping[str, Any]) -> None:
        name = type(self).__name__
        for key in ("lr", "weight_decay", "eps", "momentum"):
            if key in group and float(group[key]) < 0:
                raise ValueError(f"{name}: {key} must be >= 0, got {group[key]}")

    def _params(self) -> list[Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear every parameter's ``.grad`` (to ``None``, or to zeros in place)."""
        for p in self._params():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                # NOTE: netcl-optim depends on netcl-core only, so it cannot call netcl.ops.fill;
                # the core's copy_from_host writes in place on every backend (one upload of
                # zeros; set_to_none=True, the default, costs nothing)
                copy_from_host(p.grad, np.zeros(p.grad.shape))

    def _state_for(self, index: int, p: Tensor) -> dict[str, Any]:
        state = self.state.get(index)
        if state is None:
            state = {"step": 0}
            for name in self.state_names:
                t = Tensor.from_shape(p.queue, p.shape, state_dtype(p.dtype), fill=0)
                t.persistent = True
                state[name] = t
            self.state[index] = state
        return state

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        index = 0
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if p.grad.shape != p.shape:
                        raise ValueError(
                            f"{type(self).__name__}: gradient shape {p.grad.shape} does not "
                            f"match parameter shape {p.shape}"
                        )
                    if p.grad.dtype != p.dtype:
                        raise TypeError(
                            f"{type(self).__name__}: gradient dtype {p.grad.dtype} does not "
                            f"match parameter dtype {p.dtype}"
                        )
                    state = self._state_for(index, p)
                    state["step"] += 1
                    self._update(p, p.grad, state, group)
                index += 1

    @abc.abstractmethod
    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        """Apply the update rule to one parameter."""

    # -- checkpoints ---------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {name: ndarray | int}}, "param_groups": [...]}`` (host copies)."""
        state = {
            i: {k: (v.to_host().copy() if isinstance(v, Tensor) else v) for k, v in s.items()}
            for i, s in self.state.items()
        }
        groups = []
        index = 0
        for g in self.param_groups:
            n = len(g["params"])
            groups.append({**{k: v for k, v in g.items() if k != "params"},
                           "params": list(range(index, index + n))})
            index += n
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned; sizes are checked before anything changes.

        Raises:
            ValueError: the group count, group sizes or state shapes differ.
        """
        name = type(self).__name__
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: {len(groups)} param groups in the state, "
                             f"{len(self.param_groups)} in the optimizer")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError(f"{name}.load_state_dict: a group has {len(theirs['params'])} "
                                 f"parameters in the state, {len(mine['params'])} here")
        params = self._params()
        for i, s in state_dict["state"].items():
            for k, v in s.items():
                if isinstance(v, np.ndarray) and v.shape != params[int(i)].shape:
                    raise ValueError(f"{name}.load_state_dict: state {k!r} of parameter {i} has "
                                     f"shape {v.shape}, parameter is {params[int(i)].shape}")
        for mine, theirs in zip(self.param_groups, groups):
            mine.update({k: v for k, v in theirs.items() if k != "params"})
        self.state = {}
        for i, s in state_dict["state"].items():
            p = params[int(i)]
            restored: dict[str, Any] = {}
            for k, v in s.items():
                if isinstance(v, np.ndarray):
                    t = Tensor.from_host(p.queue, v, dtype=state_dtype(p.dtype))
                    t.persistent = True
                    restored[k] = t
                else:
                    restored[k] = int(v) if k == "step" else v
            self.state[int(i)] = restored


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.

    PyTorch's formula: ``g += wd * p``; with momentum ``b = g`` on the first step, else
    ``b = momentum * b + (1 - dampening) * g``; ``g = g + momentum * b`` (Nesterov) or ``b``;
    ``p -= lr * g``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> w = Tensor.from_host(q, np.ones(2))
        >>> w.grad = Tensor.from_host(q, np.full(2, 0.5))
        >>> SGD([w], lr=0.1).step()
        >>> w.to_host().tolist()
        [0.949999988079071, 0.949999988079071]
    """

    state_names = ("momentum_buffer",)

    def __init__(self, params: ParamsArg, lr: float = 1e-3, momentum: float = 0.0,
                 dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False) -> None:
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening == 0, got "
                             f"momentum={momentum}, dampening={dampening}")
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov})

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        lr, mom, damp = group["lr"], group["momentum"], group["dampening"]
        wd, nesterov, first = group["weight_decay"], group["nesterov"], state["step"] == 1
        buf = state["momentum_buffer"]
        if p.array is None:
            run_update("sgd", p, g, buf, lr, mom, damp, wd, nesterov, first)
            return
        param, grad = _compute(p), _compute(g)
        if wd:
            grad = grad + wd * param
        if mom:
            if first:
                buf.array[...] = grad
            else:
                buf.array *= mom
                buf.array += (1 - damp) * grad
            grad = grad + mom * buf.array if nesterov else buf.array
        param -= lr * grad
        _store(p, param)


class Momentum(SGD):
    """SGD with momentum 0.9 by default (the classic heavy-ball optimizer)."""

    def __init__(self, params: ParamsArg, lr: float = 1e-2, momentum: float = 0.9,
                 weight_decay: float = 0.0, nesterov: bool = False) -> None:
        super().__init__(params, lr=lr, momentum=momentum, weight_decay=weight_decay,
                         nesterov=nesterov)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with PyTorch's L2 ``weight_decay``; ``AdamW`` decouples it.

    ``m = b1 m + (1 - b1) g``; ``v = b2 v + (1 - b2) g^2``;
    ``p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)``.
    """

    state_names = ("exp_avg", "exp_avg_sq")
    decoupled = False

    def __init__(self, params: ParamsArg, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"{type(self).__name__}: betas must be in [0, 1), got {betas}")
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps,
                                  "weight_decay": weight_decay})

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        t = state["step"]
        bc1, bc2 = 1 - b1**t, 1 - b2**t
        m, v = state["exp_avg"], state["exp_avg_sq"]
        if p.array is None:
            run_update("adam", p, g, m, v, lr, b1, b2, eps, wd, bc1, bc2, self.decoupled)
            return
        param, grad = _compute(p), _compute(g)
        if self.decoupled:
            param *= 1 - lr * wd
        elif wd:
            grad = grad + wd * param
        m.array *= b1
        m.array += (1 - b1) * grad
        v.array *= b2
        v.array += (1 - b2) * grad * grad
        param -= lr * (m.array / bc1) / (np.sqrt(v.array / bc2) + eps)
        _store(p, param)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * wd`` first."""

    decoupled = True

    def __init__(self, params: ParamsArg, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


class RMSProp(Optimizer):
    """RMSProp as PyTorch's ``RMSprop``: ``s = a s + (1 - a) g^2``; optional centering and
    momentum; ``p -= lr * g / (sqrt(s) + eps)``."""

    state_names = ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(self, params: ParamsArg, lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"RMSProp: alpha must be in [0, 1], got {alpha}")
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps,
                                  "weight_decay": weight_decay, "momentum": momentum,
                                  "centered": centered})

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        wd, mom, centered = group["weight_decay"], group["momentum"], group["centered"]
        sq, buf, gavg = state["square_avg"], state["momentum_buffer"], state["grad_avg"]
        if p.array is None:
            run_update("rmsprop", p, g, sq, buf, gavg, lr, alpha, eps, wd, mom, centered)
            return
        param, grad = _compute(p), _compute(g)
        if wd:
            grad = grad + wd * param
        sq.array *= alpha
        sq.array += (1 - alpha) * grad * grad
        denom = sq.array
        if centered:
            gavg.array *= alpha
            gavg.array += (1 - alpha) * grad
            denom = sq.array - gavg.array * gavg.array
        step = grad / (np.sqrt(denom) + eps)
        if mom > 0:
            buf.array *= mom
            buf.array += step
            step = buf.array
        param -= lr * step
        _store(p, param)


# -- NumPy backend ----------------------------------------------------------------------------


def _compute(t: Tensor) -> Any:
    """``t``'s array in the dtype updates are computed in: the array itself (updated in place),
    or a float32 copy of a float16 one (as the device kernels compute; see :func:`_store`)."""
    a: Any = t.array  # a NumPy-backend tensor: never None
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _store(p: Tensor, param: Any) -> None:
    """Write the updated ``param`` back into ``p`` where :func:`_compute` copied it (float16:
    rounded once, to nearest even, like ``vstore_half``)."""
    a: Any = p.array
    if param is not a:
        a[...] = param
