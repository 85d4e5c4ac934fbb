"""``GradScaler``: dynamic loss scaling for float16 training, with steps skipped on inf/NaN.

# NOTE [ Loss scaling ]
# float16 gradients of small magnitude flush to zero; multiplying the loss by ``scale`` before
# backward lifts every gradient by the same factor, and dividing the float32 master gradients
# by it before the optimizer step undoes that. Too large a scale overflows some float16
# gradient to inf: that step is skipped and the scale halved; after ``growth_interval`` clean
# steps in a row it doubles again (PyTorch's ``torch.amp.GradScaler`` semantics).
#
# NOTE [ One flag, one read ]
# ``unscale_`` runs one kernel per gradient that multiplies it by 1/scale in place and sets a
# shared int flag when any result is not finite; no gradient comes back to the host. ``step``
# reads that flag once (4 bytes) to decide whether to call ``optimizer.step()``: the decision
# has to be on the host, since the optimizers' update kernels take no skip flag. The scale
# itself stays a host float, so ``update`` costs no device work at all.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from netcl.autograd import ops as _ag
from netcl.core.dtypes import c_type
from netcl.core.kernels.cache import get_kernel
from netcl.core.kernels.primitives import PRIMITIVE_PREAMBLE, WorkGroupTuner, launch
from netcl.core.tensor import Tensor

__all__ = ["GradScaler"]

_TUNER = WorkGroupTuner()

_SRC = """
__kernel void amp_unscale(__global T* g, const int n, const float inv_scale,
                          __global int* found_inf) {
  int i = get_global_id(0);
  if (i >= n) return;
  T v = g[i] * (T)inv_scale;
  if (!isfinite(v)) found_inf[0] = 1;  // every writer stores the same value: no atomics
  g[i] = v;
}

__kernel void amp_clear_flag(__global int* found_inf) { found_inf[0] = 0; }
"""

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"
_STATE_KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")


class _Optimizer(Protocol):
    """What GradScaler needs of an optimizer (``netcl.optim.Optimizer`` has it)."""

    param_groups: list[dict[str, Any]]

    def step(self) -> Any: ...


class _PerOptimizer:
    """Where one optimizer is in the current iteration, and its device flag (kept across
    iterations: cleared, not reallocated)."""

    def __init__(self) -> None:
        self.stage = _READY
        self.flag: Tensor | None = None  # int32 (1,): 1 when some unscaled gradient is inf/NaN
        self.found_inf: bool | None = None  # this iteration's answer, once known


def _kernel(context: Any, name: str, dtype: str) -> Any:
    pragma = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if dtype == "float64" else ""
    return get_kernel(context, f"{pragma}{PRIMITIVE_PREAMBLE}#define T {c_type(dtype)}\n{_SRC}",
                      name)


class GradScaler:
    """Dynamic loss scaling for mixed-precision training (see :func:`netcl.nn.amp.autocast`).

    The loop: ``scaler.scale(loss)`` before backward, ``scaler.step(optimizer)`` (which
    unscales the gradients and skips the update when one is inf or NaN), then
    ``scaler.update()``. Call ``scaler.unscale_(optimizer)`` yourself before ``step`` to clip
    or inspect the true gradients. With ``enabled=False`` every method passes through (scale
    1), so one loop serves both precisions.

    Args:
        init_scale: the first scale.
        growth_factor: multiplies the scale after ``growth_interval`` clean steps in a row.
        backoff_factor: multiplies the scale after a step with inf/NaN gradients.
        growth_interval: how many clean steps in a row make the scale grow.
        enabled: ``False`` makes the scaler a no-op.

    Raises:
        ValueError: a factor or interval is out of range (named with its value).

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> from netcl.nn import Linear
        >>> from netcl.nn.amp import autocast
        >>> from netcl.optim import SGD
        >>> q = manager.default("cpu").queue
        >>> model = Linear(3, 1, queue=q, rng=np.random.default_rng(0))
        >>> opt = SGD(model.parameters(), lr=0.1)
        >>> scaler = GradScaler(init_scale=1024.0)
        >>> x, y = Tensor.from_host(q, np.ones((4, 3))), Tensor.from_host(q, np.zeros((4, 1)))
        >>> with ag.Tape() as tape:
        ...     with autocast():
        ...         loss = ag.mse_loss(model(x), y)
        ...     scaled = scaler.scale(loss)
        >>> tape.backward(scaled)
        >>> scaler.step(opt)
        >>> scaler.update()
        >>> scaler.get_scale(), model.weight.grad.dtype
        (1024.0, 'float32')
    """

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000,
                 enabled: bool = True) -> None:
        _check_config(float(init_scale), float(growth_factor), float(backoff_factor),
                      growth_interval)
        self._enabled = bool(enabled)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer: weakref.WeakKeyDictionary[Any, _PerOptimizer] = (
            weakref.WeakKeyDictionary())

    # -- the loop ------------------------------------------------------------------------

    def is_enabled(self) -> bool:
        """Whether the scaler scales (``enabled`` at construction)."""
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def scale(self, loss: Tensor) -> Tensor:
        """``loss * scale``, recorded on the active tape: call it inside the ``with Tape()``
        block and run ``tape.backward`` on the result. A float16 loss is cast to float32 first
        (``65536 * loss`` overflows float16).

        Raises:
            TypeError: ``loss`` is not a floating-point Tensor.
        """
        if not isinstance(loss, Tensor) or not loss.is_floating_point:
            what = loss.dtype if isinstance(loss, Tensor) else type(loss).__name__
            raise TypeError(f"GradScaler.scale: loss must be a floating-point Tensor, got {what}")
        if not self._enabled:
            return loss
        if loss.dtype == "float16":
            loss = _ag.cast(loss, "float32")
        return _ag.mul(loss, self._scale)

    def unscale_(self, optimizer: _Optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place, on the device, and record
        (on the device) whether any of them is inf or NaN. At most once per iteration.

        Raises:
            RuntimeError: ``unscale_`` or ``step`` already ran for this optimizer since the
                last :meth:`update`.
            TypeError: a gradient is float16 (keep float32 master weights).
            ValueError: the gradients live on different devices.
        """
        if not self._enabled:
            return
        state = self._per_optimizer.setdefault(optimizer, _PerOptimizer())
        if state.stage != _READY:
            raise RuntimeError(f"GradScaler.unscale_: already called on this optimizer since "
                               f"the last update() (stage: {state.stage})")
        params = _params_with_grads(optimizer)
        if params:
            state.flag = _cleared_flag(state.flag, params[0].queue)
            self._unscale_grads(params, state.flag)
        else:
            state.found_inf = False
        state.stage = _UNSCALED

    def step(self, optimizer: _Optimizer) -> Any:
        """Unscale (unless :meth:`unscale_` ran), then ``optimizer.step()`` unless a gradient
        is inf or NaN; returns what ``optimizer.step()`` returned, or ``None`` when skipped.
        Reads one flag from the device.

        Raises:
            RuntimeError: ``step`` already ran for this optimizer since the last
                :meth:`update`.
        """
        if not self._enabled:
            return optimizer.step()
        state = self._per_optimizer.setdefault(optimizer, _PerOptimizer())
        if state.stage == _STEPPED:
            raise RuntimeError("GradScaler.step: already called on this optimizer since the "
                               "last update()")
        if state.stage == _READY:
            self.unscale_(optimizer)
        found_inf = _read_flag(state)
        state.stage = _STEPPED
        return None if found_inf else optimizer.step()

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """End the iteration: back the scale off if any optimizer saw inf/NaN gradients, grow
        it after ``growth_interval`` clean steps, or set it to ``new_scale``.

        Raises:
            RuntimeError: no optimizer was unscaled or stepped since the last update (and no
                ``new_scale`` was given).
            ValueError: ``new_scale`` is not a positive finite number.
        """
        if not self._enabled:
            return
        if new_scale is not None:
            value = float(new_scale.to_host().reshape(-1)[0]) if isinstance(
                new_scale, Tensor) else float(new_scale)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"GradScaler.update: new_scale must be a positive finite "
                                 f"number, got {new_scale!r}")
            self._scale = value
        else:
            self._update_scale()
        for state in self._per_optimizer.values():
            state.stage, state.found_inf = _READY, None

    def _update_scale(self) -> None:
        checked = [s for s in self._per_optimizer.values() if s.stage != _READY]
        if not checked:
            raise RuntimeError("GradScaler.update: no gradients were unscaled since the last "
                               "update(); call step(optimizer) (or unscale_) first")
        if any(_read_flag(s) for s in checked):
            self._scale *= self._backoff_factor
            self._growth_tracker = 0
            return
        self._growth_tracker += 1
        if self._growth_tracker == self._growth_interval:
            self._scale *= self._growth_factor
            self._growth_tracker = 0

    # -- checkpoints ---------------------------------------------------------------------

    def state_dict(self) -> dict[str, float | int]:
        """The scale, the factors, the interval and the clean-step count as plain numbers
        (JSON-able); ``{}`` when disabled.

        Examples:
            >>> GradScaler(init_scale=8.0, growth_interval=3).state_dict()["scale"]
            8.0
        """
        if not self._enabled:
            return {}
        return {"scale": self._scale, "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (a no-op when disabled).

        Raises:
            RuntimeError: ``state`` is empty (saved from a disabled scaler).
            KeyError: keys are missing or unexpected (listed).
            ValueError: a value is out of range.
        """
        if not self._enabled:
            return
        if not state:
            raise RuntimeError("GradScaler.load_state_dict: the state is empty (saved from a "
                               "disabled GradScaler?)")
        missing = sorted(set(_STATE_KEYS) - set(state))
        unexpected = sorted(set(state) - set(_STATE_KEYS))
        if missing or unexpected:
            raise KeyError(f"GradScaler.load_state_dict: missing keys {missing}, unexpected "
                           f"keys {unexpected}")
        scale, growth, backoff = (float(state[k]) for k in _STATE_KEYS[:3])
        interval, tracker = int(state["growth_interval"]), int(state["_growth_tracker"])
        _check_config(scale, growth, backoff, interval)
        if not 0 <= tracker < interval:
            raise ValueError(f"GradScaler.load_state_dict: _growth_tracker must be in "
                             f"[0, growth_interval={interval}), got {tracker}")
        self._scale, self._growth_factor, self._backoff_factor = scale, growth, backoff
        self._growth_interval, self._growth_tracker = interval, tracker

    def __repr__(self) -> str:
        if not self._enabled:
            return "GradScaler(enabled=False)"
        return (f"GradScaler(scale={self._scale}, growth_factor={self._growth_factor}, "
                f"backoff_factor={self._backoff_factor}, "
                f"growth_interval={self._growth_interval})")

    # -- device work ---------------------------------------------------------------------

    def _unscale_grads(self, params: list[Tensor], flag: Tensor) -> None:
        """``p.grad *= 1/scale`` in place for every parameter; ``flag`` set to 1 on inf/NaN."""
        inv_scale = 1.0 / self._scale
        for p in params:
            g: Any = p.grad
            if g.array is None:
                if g.size:
                    kernel = _kernel(g.context, "amp_unscale", g.dtype)
                    gsize, lsize = _TUNER.launch_1d(g.size)
                    launch(g.queue, kernel, gsize, lsize, g, np.int32(g.size),
                           np.float32(inv_scale), flag)
                continue
            with np.errstate(over="ignore", invalid="ignore"):  # overflow is what we look for
                if g.array.flags.writeable:
                    g.array *= inv_scale
                else:  # NumPy elementwise results can be read-only views: a grad of its own
                    p.grad = g = Tensor.from_host(g.queue, g.array * inv_scale, dtype=g.dtype)
            if not np.isfinite(g.array).all():
                flag.array[0] = 1  # type: ignore[index]


def _check_config(scale: float, growth: float, backoff: float, interval: int) -> None:
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"GradScaler: init_scale must be a positive finite number, got {scale}")
    if not growth > 1.0:
        raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth}")
    if not 0.0 < backoff < 1.0:
        raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff}")
    if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
        raise ValueError(f"GradScaler: growth_interval must be a positive int, got {interval!r}")


def _params_with_grads(optimizer: _Optimizer) -> list[Tensor]:
    """``optimizer``'s parameters that have a gradient (checked: float32/64, one device)."""
    out: list[Tensor] = []
    for i, p in enumerate(p for group in optimizer.param_groups for p in group["params"]):
        g = p.grad
        if g is None:
            continue
        if g.dtype not in ("float32", "float64"):
            raise TypeError(f"GradScaler.unscale_: parameter {i} has a {g.dtype} gradient; keep "
                            "the master weights in float32 (autocast casts them per op)")
        if out and g.queue is not out[0].grad.queue:  # type: ignore[union-attr]
            raise ValueError(f"GradScaler.unscale_: parameter {i}'s gradient is on another "
                             "device than the first one's; use one GradScaler per device")
        out.append(p)
    return out


def _cleared_flag(flag: Tensor | None, queue: Any) -> Tensor:
    """``flag`` (a new one when there is none on ``queue``) set to 0."""
    if flag is None or flag.queue is not queue:
        flag = Tensor.from_shape(queue, (1,), "int32", fill=0)
        flag.persistent = True
    elif flag.array is not None:
        flag.array[0] = 0
    else:
        launch(queue, _kernel(flag.context, "amp_clear_flag", "float32"), (1,), (1,), flag)
    return flag


def _read_flag(state: _PerOptimizer) -> bool:
    """Whether the optimizer saw inf/NaN gradients (reads its flag once)."""
    if state.found_inf is None:
        state.found_inf = state.flag is not None and bool(state.flag.to_host()[0])
    return state.found_inf
