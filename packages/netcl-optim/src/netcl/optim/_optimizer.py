"""Optimizers: the ``Optimizer`` base with param groups, and SGD, Momentum, Adam, AdamW, RMSprop
(``RMSProp``: its deprecated old name).

Each update rule follows PyTorch's documented formula. On OpenCL it is one kernel launch per
up to 16 parameters that share a dtype and hyper-parameters (foreach launches: NOTE [ Foreach
updates ] in ``_update_sources.py``; ``NETCL_FOREACH=0`` launches one per parameter) plus one
per step for the step counts (state and step counts kept on the device: NOTE [ Step counts on
the device ] in ``_kernels.py``); on the NumPy backend it is a handful of in-place array
operations. The host never reads a parameter, gradient or step count back, so a
step can be captured by ``netcl.runtime.capture``; ``step(found_inf=flag)`` makes the whole
update a no-op on the device when ``flag`` is set (what ``netcl.nn.amp.GradScaler`` passes).

float16 parameters work on every backend and device: their update is computed in float32 and
rounded to float16 once, and their state is float32 (see NOTE [ float16 parameters ] in
``_kernels.py``).
"""

from __future__ import annotations

import abc
import warnings
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import numpy as np

from netcl.core.recording import numpy_update
from netcl.core.recording import state as recording_state
from netcl.core.tensor import Tensor, copy_from_host

from ._kernels import DeviceUpdate, run_updates, state_dtype
from ._steps import STRIDE, ParamState, StepCounts, StepRef, check_found_inf

__all__ = ["SGD", "Adam", "AdamW", "Momentum", "Optimizer", "RMSProp", "RMSprop"]

ParamsArg = Iterable[Tensor] | Iterable[dict[str, Any]]


class Optimizer(abc.ABC):
    """Base class: param groups, per-parameter state, ``zero_grad``, ``state_dict``.

    Subclasses set ``defaults`` and implement :meth:`_update` (the NumPy backend) and
    :meth:`_device_update` (the kernel of an OpenCL device; without it :meth:`_update` is
    called there too). Per-parameter state tensors
    have the parameter's dtype, except for float16 parameters, whose state is float32 (more
    accurate than PyTorch's float16 state; it is also what :meth:`state_dict` holds).

    Step counts live on the device, one float32 per parameter (NOTE [ Step counts on the
    device ] in ``_kernels.py``): ``state[i]["step"]`` and :meth:`state_dict` read them back
    (host queries), :meth:`step` never does.
    """

    #: names of per-parameter state tensors, in kernel argument order
    state_names: tuple[str, ...] = ()
    #: :meth:`step` takes a device-side skip flag (``GradScaler`` looks for this)
    supports_found_inf: ClassVar[bool] = True

    def __init__(self, params: ParamsArg, defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state: dict[int, dict[str, Any]] = {}
        self._counts: dict[int, StepCounts] = {}  # by id(queue)
        self._size = 0  # parameters in all groups
        self._hyper: tuple[Any, np.ndarray[Any, Any]] = ((), np.zeros(0, np.float32))
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
        self._size += len(params)

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
            elif p.grad.array is not None:  # in place, recordable by a NumPy capture
                numpy_update(_zero_np, p.grad.array)
            else:
                # NOTE: netcl-optim depends on netcl-core only, so it cannot call netcl.ops.fill;
                # the core's copy_from_host writes in place on every backend (one upload of
                # zeros; set_to_none=True, the default, costs nothing)
                copy_from_host(p.grad, np.zeros(p.grad.shape))

    def _new_state(self, index: int) -> ParamState:
        me = weakref.ref(self)

        def read_step() -> int:
            opt = me()
            return 0 if opt is None else opt._step_counts().get(index, 0)

        return ParamState(read_step)

    def _state_shape(self, name: str, p: Tensor) -> tuple[int, ...]:
        """The shape of state tensor ``name`` of parameter ``p`` (``p``'s by default)."""
        return p.shape

    def _state_fill(self, name: str, group: Mapping[str, Any]) -> float:
        """The initial value of state tensor ``name`` (0 by default)."""
        return 0.0

    def _state_for(self, index: int, p: Tensor, group: Mapping[str, Any] | None = None
                   ) -> dict[str, Any]:
        state = self.state.get(index)
        if state is None:
            state = self._new_state(index)
            for name in self.state_names:
                fill = self._state_fill(name, group if group is not None else self.defaults)
                t = Tensor.from_shape(p.queue, self._state_shape(name, p),
                                      state_dtype(p.dtype), fill=fill)
                t.persistent = True
                state[name] = t
            self.state[index] = state
        return state

    def _counts_on(self, queue: Any) -> StepCounts:
        counts = self._counts.get(id(queue))
        if counts is None or counts.queue is not queue:
            counts = self._counts[id(queue)] = StepCounts(queue, self._size)
        elif counts.size < self._size:
            counts.grow(self._size)
        return counts

    def step(self, found_inf: Tensor | None = None) -> None:
        """Apply one update to every parameter that has a gradient.

        Args:
            found_inf: a one-element int32 flag on the parameters' device: when it is nonzero
                the whole step is a no-op (parameters, state and step counts unchanged),
                decided on the device (``GradScaler.step`` passes its found-inf flag).

        Raises:
            ValueError: a gradient's shape differs from its parameter's, or ``found_inf`` is
                not one element on the parameters' device.
            TypeError: a gradient's dtype differs from its parameter's, or ``found_inf`` is
                not an int32 Tensor.
        """
        work: dict[int, list[tuple[int, Tensor, Tensor, dict[str, Any]]]] = {}  # by id(queue)
        index = 0
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is not None:
                    self._check_grad(p, g)
                    work.setdefault(id(p.queue), []).append((index, p, g, group))
                index += 1
        for items in work.values():
            counts = self._counts_on(items[0][1].queue)
            skip = counts.never
            if found_inf is not None:
                check_found_inf(f"{type(self).__name__}.step", found_inf, counts.queue)
                skip = found_inf
            flag: Any = skip.array
            # the NumPy backend decides on the host; under a NumPy capture each update reads
            # the flag itself (NOTE [ NumPy work under a recorder ] in netcl.core.recording)
            if flag is not None and recording_state.recorder is None and flag[0]:
                continue
            if counts.steps.array is None:
                counts.set_hyper(self._hyper_pairs())
            counts.tick(tuple(item[0] for item in items), skip)
            launches: list[tuple[DeviceUpdate, Tensor, int]] = []
            for i, p, g, group in items:
                state = self._state_for(i, p, group)
                update = None if p.array is not None else self._device_update(p, g, state, group)
                if update is None:
                    self._update(p, g, state, group, StepRef(counts.steps, i, skip))
                else:
                    launches.append((update, p, i))
            run_updates(launches, counts.steps, skip)

    def _bias_betas(self, group: Mapping[str, Any]) -> tuple[float, float]:
        """The ``(1 - b1, 1 - b2)`` whose bias corrections the tick computes for ``group``'s
        parameters (NOTE [ Step counts on the device ]); none by default."""
        return (0.0, 0.0)

    def _hyper_pairs(self) -> np.ndarray[Any, Any]:
        """:meth:`_bias_betas` of every parameter, the same array until a group's change."""
        key = (self._size, tuple(self._bias_betas(g) for g in self.param_groups))
        if key != self._hyper[0]:
            pairs = np.concatenate([np.zeros((0, 2))] + [
                np.tile(self._bias_betas(g), (len(g["params"]), 1)) for g in self.param_groups])
            self._hyper = (key, pairs.reshape(-1).astype(np.float32))
        return self._hyper[1]

    def _check_grad(self, p: Tensor, g: Tensor) -> None:
        if g.shape != p.shape:
            raise ValueError(f"{type(self).__name__}: gradient shape {g.shape} does not "
                             f"match parameter shape {p.shape}")
        if g.dtype != p.dtype:
            raise TypeError(f"{type(self).__name__}: gradient dtype {g.dtype} does not "
                            f"match parameter dtype {p.dtype}")

    @abc.abstractmethod
    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any],
                step: StepRef) -> None:
        """Apply the update rule to one parameter (``step``: its count, already ticked): on the
        NumPy backend, and on OpenCL when :meth:`_device_update` gives no kernel."""

    def _device_update(self, p: Tensor, g: Tensor, state: dict[str, Any],
                       group: dict[str, Any]) -> DeviceUpdate | None:
        """The update kernel of OpenCL parameter ``p``: its kind, gradient and state buffers
        and hyper-parameters, launched by :meth:`step` with the others' (foreach launches);
        ``None`` (the default): :meth:`_update` launches it."""
        return None

    def _step_counts(self) -> dict[int, int]:
        """Every parameter's step count by index (one read per device)."""
        params = self._params()
        counts: dict[int, int] = {}
        for on in self._counts.values():
            host = on.read()
            for i, p in enumerate(params):
                if p.queue is on.queue and i < host.size:
                    counts[i] = int(host[i])
        return counts

    # -- checkpoints ---------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {"step": int, name: ndarray}}, "param_groups": [...]}`` (host
        copies; the step counts are read from the device here)."""
        steps = self._step_counts()
        state = {
            i: {"step": steps.get(i, 0),
                **{k: (v.to_host().copy() if isinstance(v, Tensor) else v) for k, v in s.items()}}
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
                if k == "step" or not isinstance(v, np.ndarray):
                    continue
                want = self._state_shape(k, params[int(i)])
                if v.shape != want:
                    raise ValueError(f"{name}.load_state_dict: state {k!r} of parameter {i} has "
                                     f"shape {v.shape}, expected {want} (parameter "
                                     f"{params[int(i)].shape})")
        for mine, theirs in zip(self.param_groups, groups):
            mine.update({k: v for k, v in theirs.items() if k != "params"})
        self.state = {}
        steps = np.zeros(len(params), np.int64)
        for i, s in state_dict["state"].items():
            p = params[int(i)]
            restored = self._new_state(int(i))
            for k, v in s.items():
                if k == "step":  # an int, or PyTorch's one-element tensor as an array
                    steps[int(i)] = int(np.asarray(v).reshape(-1)[0])
                elif isinstance(v, np.ndarray):
                    t = Tensor.from_host(p.queue, v, dtype=state_dtype(p.dtype))
                    t.persistent = True
                    restored[k] = t
                else:
                    restored[k] = v
            self.state[int(i)] = restored
        for queue in {id(p.queue): p.queue for p in params}.values():
            on_queue = np.array([p.queue is queue for p in params])
            self._counts_on(queue).write(np.where(on_queue, steps, 0))


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

    def _device_update(self, p: Tensor, g: Tensor, state: dict[str, Any],
                       group: dict[str, Any]) -> DeviceUpdate:
        return DeviceUpdate("sgd", (g, state["momentum_buffer"]), (
            group["lr"], group["momentum"], group["dampening"], group["weight_decay"],
            bool(group["nesterov"])))

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any],
                step: StepRef) -> None:
        lr, mom, damp = group["lr"], group["momentum"], group["dampening"]
        wd, nesterov = group["weight_decay"], group["nesterov"]
        numpy_update(_sgd_np, p.array, g.array, state["momentum_buffer"].array,
                     step.steps.array, STRIDE * step.index, step.skip.array, lr, mom, damp, wd,
                     bool(nesterov))


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

    def _device_update(self, p: Tensor, g: Tensor, state: dict[str, Any],
                       group: dict[str, Any]) -> DeviceUpdate:
        # the bias corrections are computed on the device from the count
        b1, b2 = group["betas"]
        return DeviceUpdate("adam", (g, state["exp_avg"], state["exp_avg_sq"]), (
            group["lr"], b1, b2, group["eps"], group["weight_decay"], self.decoupled))

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any],
                step: StepRef) -> None:
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        numpy_update(_adam_np, p.array, g.array, m.array, v.array, step.steps.array,
                     STRIDE * step.index, step.skip.array, lr, b1, b2, eps, wd, self.decoupled)

    def _bias_betas(self, group: Mapping[str, Any]) -> tuple[float, float]:
        b1, b2 = group["betas"]
        return (1.0 - float(b1), 1.0 - float(b2))  # rounded once, from float64


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * wd`` first."""

    decoupled = True

    def __init__(self, params: ParamsArg, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


class RMSprop(Optimizer):
    """RMSprop (PyTorch's name and formula): ``s = a s + (1 - a) g^2``; optional centering and
    momentum; ``p -= lr * g / (sqrt(s) + eps)``."""

    state_names = ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(self, params: ParamsArg, lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"{type(self).__name__}: alpha must be in [0, 1], got {alpha}")
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps,
                                  "weight_decay": weight_decay, "momentum": momentum,
                                  "centered": centered})

    def _device_update(self, p: Tensor, g: Tensor, state: dict[str, Any],
                       group: dict[str, Any]) -> DeviceUpdate:
        return DeviceUpdate("rmsprop", (
            g, state["square_avg"], state["momentum_buffer"], state["grad_avg"]), (
            group["lr"], group["alpha"], group["eps"], group["weight_decay"], group["momentum"],
            bool(group["centered"])))

    def _update(self, p: Tensor, g: Tensor, state: dict[str, Any], group: dict[str, Any],
                step: StepRef) -> None:
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        wd, mom, centered = group["weight_decay"], group["momentum"], group["centered"]
        sq, buf, gavg = state["square_avg"], state["momentum_buffer"], state["grad_avg"]
        numpy_update(_rmsprop_np, p.array, g.array, sq.array, buf.array, gavg.array,
                     step.skip.array, lr, alpha, eps, wd, mom, bool(centered))


class RMSProp(RMSprop):
    """Deprecated: the old name of :class:`RMSprop` (PyTorch's spelling); it warns once per
    optimizer built and behaves the same.

    Examples:
        >>> import warnings
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> w = Tensor.from_host(manager.default("cpu").queue, np.ones(2))
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     _ = RMSProp([w])
        >>> caught[0].category.__name__
        'DeprecationWarning'
    """

    def __init__(self, params: ParamsArg, lr: float = 1e-2, alpha: float = 0.99,
                 eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False) -> None:
        warnings.warn("netcl.optim.RMSProp is deprecated: use netcl.optim.RMSprop "
                      "(PyTorch's name)", DeprecationWarning, stacklevel=2)
        super().__init__(params, lr, alpha, eps, weight_decay, momentum, centered)


# -- NumPy backend ----------------------------------------------------------------------------


# Each update is one function of the arrays it reads and writes, called through numpy_update
# (NOTE [ NumPy work under a recorder ] in netcl.core.recording): it reads the step count and
# the skip flag (GradScaler's found-inf) from their arrays, so a replayed step follows both.

def _compute(a: Any) -> Any:
    """``a`` in the dtype updates are computed in: the array itself (updated in place), or a
    float32 copy of a float16 one (as the device kernels compute; see :func:`_store`)."""
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _store(a: Any, param: Any) -> None:
    """Write the updated ``param`` back into ``a`` where :func:`_compute` copied it (float16:
    rounded once, to nearest even, like ``vstore_half``)."""
    if param is not a:
        a[...] = param


def _zero_np(a: Any) -> None:
    a[...] = 0


def _sgd_np(p: Any, g: Any, buf: Any, steps: Any, at: int, skip: Any, lr: float, mom: float,
            damp: float, wd: float, nesterov: bool) -> None:
    if skip[0]:
        return
    param, grad = _compute(p), _compute(g)
    if wd:
        grad = grad + wd * param
    if mom:
        if float(steps[at]) == 1:
            buf[...] = grad
        else:
            buf *= mom
            buf += (1 - damp) * grad
        grad = grad + mom * buf if nesterov else buf
    param -= lr * grad
    _store(p, param)


def _adam_np(p: Any, g: Any, m: Any, v: Any, steps: Any, at: int, skip: Any, lr: float,
             b1: float, b2: float, eps: float, wd: float, decoupled: bool) -> None:
    if skip[0]:
        return
    t = float(steps[at])
    bc1, bc2 = 1 - b1**t, 1 - b2**t
    param, grad = _compute(p), _compute(g)
    if decoupled:
        param *= 1 - lr * wd
    elif wd:
        grad = grad + wd * param
    m *= b1
    m += (1 - b1) * grad
    v *= b2
    v += (1 - b2) * grad * grad
    param -= lr * (m / bc1) / (np.sqrt(v / bc2) + eps)
    _store(p, param)


def _rmsprop_np(p: Any, g: Any, sq: Any, buf: Any, gavg: Any, skip: Any, lr: float,
                alpha: float, eps: float, wd: float, mom: float, centered: bool) -> None:
    if skip[0]:
        return
    param, grad = _compute(p), _compute(g)
    if wd:
        grad = grad + wd * param
    sq *= alpha
    sq += (1 - alpha) * grad * grad
    denom = sq
    if centered:
        gavg *= alpha
        gavg += (1 - alpha) * grad
        denom = sq - gavg * gavg
    step = grad / (np.sqrt(denom) + eps)
    if mom > 0:
        buf *= mom
        buf += step
        step = buf
    param -= lr * step
    _store(p, param)
