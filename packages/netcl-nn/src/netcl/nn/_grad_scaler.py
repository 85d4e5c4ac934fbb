"""``GradScaler``: dynamic loss scaling for float16 training, with steps skipped on inf/NaN.

# NOTE [ Loss scaling ]
# float16 gradients of small magnitude flush to zero; multiplying the loss by ``scale`` before
# backward lifts every gradient by the same factor, and dividing the float32 master gradients
# by it before the optimizer step undoes that. Too large a scale overflows some float16
# gradient to inf: that step is skipped and the scale halved; after ``growth_interval`` clean
# steps in a row it doubles again (PyTorch's ``torch.amp.GradScaler`` semantics).
#
# NOTE [ Nothing read back ]
# The scale (float32) and the growth tracker (int32) live on the device, next to the gradients.
# ``scale(loss)`` multiplies by the scale tensor; ``unscale_`` runs a kernel per 16 gradients
# (NOTE [ Foreach unscaling ]) that multiplies them by 1/scale in place and sets the
# optimizer's int32 found-inf flag when a result is not finite; ``step`` hands that flag to
# ``optimizer.step(found_inf=flag)``, whose kernels
# do nothing when it is set; ``update`` is one kernel that backs the scale off or grows it and
# writes ``found_inf`` (did this iteration skip). No step needs a host read, so an AMP training
# step can be captured by ``netcl.runtime.capture``. An optimizer without ``supports_found_inf``
# (one that is not a ``netcl.optim.Optimizer``) still gets the old host decision: ``step`` reads
# its flag (4 bytes) and calls ``optimizer.step()`` only when it is clear. ``get_scale`` and
# ``state_dict`` read the device: host queries, for outside the step.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from typing import Any, Protocol, cast

import numpy as np

from netcl.autograd import ops as _ag
from netcl.core.dtypes import c_type
from netcl.core.env import env_flag
from netcl.core.kernels.cache import get_kernel
from netcl.core.kernels.primitives import PRIMITIVE_PREAMBLE, WorkGroupTuner, launch
from netcl.core.recording import numpy_update
from netcl.core.tensor import Tensor, copy_from_host, reshape

__all__ = ["GradScaler"]

_TUNER = WorkGroupTuner()

# NOTE [ Foreach unscaling ]
# A model's gradients are mostly small (biases, norms), so one ``amp_unscale`` launch per
# gradient costs its launch overhead, not its work: 77 launches, 0.54 ms of device time per step
# of a GPT of 6 layers x 384 on an H200. ``amp_unscale_x16`` unscales up to 16 gradients in one
# launch (OpenCL has no arrays of buffers: 16 buffer arguments ``g_k``, their sizes ``n_k``
# and the ends ``end_k`` of their ranges in the launch, each range rounded up to whole
# work-groups so that a group's slot is found by a chain of ``base >= end_k`` selects on its
# first item, uniform in the group; empty slots repeat the last gradient over an empty range).
# Both kernels call ``amp_unscale_item``, the formula written once, so they compute the same
# bits; ``NETCL_FOREACH=0`` forces one launch per gradient (as the optimizers' foreach
# updates, NOTE [ Foreach updates ] in netcl.optim).
_UNSCALE_WIDTH = 16
_INT_MAX = 2**31 - 1  # the kernels index with int: a launch covers fewer elements


def _unscale_source(width: int) -> str:
    """``amp_unscale_item`` (the formula), ``amp_unscale`` (one gradient per launch) and
    ``amp_unscale_x<width>`` (up to ``width``: NOTE [ Foreach unscaling ])."""
    slots = ",\n".join(f"    __global T* g_{k}, const int n_{k}, const int end_{k}"
                       for k in range(width))
    picks = "".join(f"  if (base >= end_{k - 1}) "
                    f"{{ g = g_{k}; n = n_{k}; start = end_{k - 1}; }}\n"
                    for k in range(1, width))
    return f"""
void amp_unscale_item(__global T* g, const int i, __global const float* scale,
                      __global int* found_inf) {{
  T v = g[i] * (T)(1.0f / scale[0]);
  if (!isfinite(v)) found_inf[0] = 1;  // every writer stores the same value: no atomics
  g[i] = v;
}}

__kernel void amp_unscale(__global T* g, const int n, __global const float* scale,
                          __global int* found_inf) {{
  const int i = get_global_id(0);
  if (i >= n) return;
  amp_unscale_item(g, i, scale, found_inf);
}}

__kernel void amp_unscale_x{width}(__global const float* scale, __global int* found_inf,
{slots}) {{
  const int base = get_group_id(0) * get_local_size(0);  // one slot per work-group
  __global T* g = g_0;
  int n = n_0, start = 0;
{picks}  const int i = get_global_id(0) - start;
  if (i >= n) return;
  amp_unscale_item(g, i, scale, found_inf);
}}
"""


_SRC = _unscale_source(_UNSCALE_WIDTH) + """
__kernel void amp_clear_flag(__global int* found_inf) { found_inf[0] = 0; }

// out = flag, or out | flag (accumulate): the found-inf flags of several optimizers in one
__kernel void amp_found(__global int* out, __global const int* flag, const int accumulate) {
  out[0] = (accumulate && out[0]) || flag[0];
}

// PyTorch's _amp_update_scale_: back off on inf/NaN, grow after `interval` clean steps
__kernel void amp_update(__global float* scale, __global int* tracker, __global int* out,
                         __global const int* flag, const int accumulate, const float growth,
                         const float backoff, const int interval) {
  const int found = (accumulate && out[0]) || flag[0];
  out[0] = found;
  if (found) {
    scale[0] *= backoff;
    tracker[0] = 0;
    return;
  }
  const int clean = tracker[0] + 1;
  if (clean >= interval) {
    const float grown = scale[0] * growth;
    if (isfinite(grown)) scale[0] = grown;
    tracker[0] = 0;
  } else {
    tracker[0] = clean;
  }
}

__kernel void amp_set_scale(__global float* scale, __global const float* value) {
  scale[0] = value[0];
}
"""

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"
_STATE_KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")


class _Optimizer(Protocol):
    """What GradScaler needs of an optimizer (``netcl.optim.Optimizer`` has it)."""

    param_groups: list[dict[str, Any]]

    def step(self) -> Any: ...


class _Device:
    """The scaler's tensors on one device: ``scale`` (float32, shape ``()``), ``tracker``
    (int32 (1,): clean steps in a row) and ``found_inf`` (int32 (1,): the last update's
    iteration skipped a step)."""

    def __init__(self, queue: Any, scale: float, tracker: int) -> None:
        self.queue = queue
        self.flat = _persistent(Tensor.from_shape(queue, (1,), "float32", fill=scale))
        self.scale = reshape(self.flat, ())  # what the loss is multiplied by
        self.tracker = _persistent(Tensor.from_shape(queue, (1,), "int32", fill=tracker))
        self.found_inf = _persistent(Tensor.from_shape(queue, (1,), "int32", fill=0))
        self.clean = _persistent(Tensor.from_shape(queue, (1,), "int32", fill=0))  # stays 0


class _PerOptimizer:
    """Where one optimizer is in the current iteration, and its device flag (kept across
    iterations: cleared, not reallocated)."""

    def __init__(self) -> None:
        self.stage = _READY
        self.flag: Tensor | None = None  # int32 (1,): 1 when some unscaled gradient is inf/NaN
        self.checked = False  # this iteration unscaled gradients into ``flag``


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
        # the scale and tracker until the first call puts them on a device (then: _device)
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._device: _Device | None = None
        self._per_optimizer: weakref.WeakKeyDictionary[Any, _PerOptimizer] = (
            weakref.WeakKeyDictionary())

    # -- the loop ------------------------------------------------------------------------

    def is_enabled(self) -> bool:
        """Whether the scaler scales (``enabled`` at construction)."""
        return self._enabled

    def get_scale(self) -> float:
        """The current scale (1.0 when disabled); reads it from the device (a host query,
        for outside a captured step)."""
        if not self._enabled:
            return 1.0
        if self._device is None:
            return self._scale
        return float(self._device.scale.to_host())

    @property
    def scale_tensor(self) -> Tensor | None:
        """The scale on the device (float32, shape ``()``), ``None`` before the first call."""
        return None if self._device is None else self._device.scale

    @property
    def found_inf(self) -> Tensor | None:
        """A one-element int32 device tensor: 1 when the iteration that the last
        :meth:`update` ended skipped its step (inf/NaN gradients), else 0; ``None`` before the
        scaler touched a device or when disabled. The same tensor every iteration (add it
        into a device counter, or read it, before the next ``update``)."""
        return None if self._device is None or not self._enabled else self._device.found_inf

    def scale(self, loss: Tensor) -> Tensor:
        """``loss * scale``, recorded on the active tape: call it inside the ``with Tape()``
        block and run ``tape.backward`` on the result. A float16 loss is cast to float32 first
        (``65536 * loss`` overflows float16). The scale stays on the device.

        Raises:
            TypeError: ``loss`` is not a floating-point Tensor.
            ValueError: ``loss`` is on another device than the scaler's tensors.
        """
        if not isinstance(loss, Tensor) or not loss.is_floating_point:
            what = loss.dtype if isinstance(loss, Tensor) else type(loss).__name__
            raise TypeError(f"GradScaler.scale: loss must be a floating-point Tensor, got {what}")
        if not self._enabled:
            return loss
        if loss.dtype == "float16":
            loss = _ag.cast(loss, "float32")
        scale = self._on(loss.queue, "scale").scale
        if loss.dtype != scale.dtype:
            scale = _ag.cast(scale, loss.dtype)
        return _ag.mul(loss, scale)

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
            queue = params[0].queue
            state.flag = _cleared_flag(state.flag, queue)
            self._unscale_grads(params, self._on(queue, "unscale_").scale, state.flag)
        state.stage, state.checked = _UNSCALED, bool(params)

    def step(self, optimizer: _Optimizer) -> Any:
        """Unscale (unless :meth:`unscale_` ran), then ``optimizer.step()``, an update that
        does nothing when a gradient is inf or NaN; returns what ``optimizer.step()``
        returned. A ``netcl.optim`` optimizer gets the found-inf flag
        (``step(found_inf=flag)``) and skips on the device, nothing read back; another
        optimizer is called only when the flag, read once, is clear (``None`` otherwise).

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
        state.stage = _STEPPED
        if not state.checked or state.flag is None:  # no gradients: nothing to check
            return optimizer.step()
        if getattr(optimizer, "supports_found_inf", False):
            return cast(Any, optimizer).step(found_inf=state.flag)
        return None if bool(state.flag.to_host()[0]) else optimizer.step()

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """End the iteration on the device: back the scale off if any optimizer saw inf/NaN
        gradients, grow it after ``growth_interval`` clean steps, or set it to ``new_scale``
        (a number, checked, or a one-element float32 Tensor, copied on the device unchecked).
        :attr:`found_inf` tells whether this iteration skipped its step.

        Raises:
            RuntimeError: no optimizer was unscaled or stepped since the last update (and no
                ``new_scale`` was given).
            ValueError: ``new_scale`` is not a positive finite number, or not one element.
            TypeError: a ``new_scale`` Tensor is not float32.
        """
        if not self._enabled:
            return
        flags = [s.flag for s in self._per_optimizer.values()
                 if s.stage != _READY and s.checked and s.flag is not None]
        if new_scale is None:
            if not any(s.stage != _READY for s in self._per_optimizer.values()):
                raise RuntimeError("GradScaler.update: no gradients were unscaled since the "
                                   "last update(); call step(optimizer) (or unscale_) first")
            if flags:
                self._update_scale(flags)
            elif self._device is not None:  # no gradient anywhere: a clean step
                self._update_scale([self._device.clean])
            else:
                self._growth_tracker += 1
                if self._growth_tracker >= self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
        else:
            self._set_scale(new_scale, flags)
        for state in self._per_optimizer.values():
            state.stage = _READY

    def _update_scale(self, flags: list[Tensor]) -> None:
        """One ``amp_update`` launch (and an ``amp_found`` per extra optimizer)."""
        device = self._on(flags[0].queue, "update")
        if device.scale.array is not None:
            self._update_on_host(device, flags)
            return
        for i, flag in enumerate(flags[:-1]):
            launch(device.queue, _kernel(device.queue.context, "amp_found", "float32"), (1,),
                   (1,), device.found_inf, flag, np.int32(i > 0))
        launch(device.queue, _kernel(device.queue.context, "amp_update", "float32"), (1,), (1,),
               device.scale, device.tracker, device.found_inf, flags[-1],
               np.int32(len(flags) > 1), np.float32(self._growth_factor),
               np.float32(self._backoff_factor), np.int32(self._growth_interval))

    def _update_on_host(self, device: _Device, flags: list[Tensor]) -> None:
        """``amp_update`` on the NumPy backend, in float32 as on the device (one recordable
        update: NOTE [ NumPy work under a recorder ] in netcl.core.recording)."""
        numpy_update(_amp_update_np, _host(device.scale), _host(device.tracker),
                     _host(device.found_inf), [_host(f) for f in flags], self._backoff_factor,
                     self._growth_factor, self._growth_interval)

    def _set_scale(self, new_scale: float | Tensor, flags: list[Tensor]) -> None:
        if isinstance(new_scale, Tensor):
            if new_scale.dtype != "float32":
                raise TypeError(f"GradScaler.update: a new_scale Tensor must be float32, got "
                                f"{new_scale.dtype}")
            if new_scale.size != 1:
                raise ValueError(f"GradScaler.update: new_scale must have one element, got "
                                 f"shape {new_scale.shape}")
            device = self._on(new_scale.queue, "update")
            if new_scale.array is not None:
                _host(device.scale)[...] = new_scale.array.reshape(())
            else:
                launch(device.queue, _kernel(device.queue.context, "amp_set_scale", "float32"),
                       (1,), (1,), device.scale, new_scale)
        else:
            value = float(new_scale)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"GradScaler.update: new_scale must be a positive finite "
                                 f"number, got {new_scale!r}")
            self._scale = value
            if self._device is not None:
                copy_from_host(self._device.flat, np.array([value], np.float32))
        if self._device is not None:  # this iteration's flags still say whether it skipped
            found = self._device.found_inf
            if not flags:
                copy_from_host(found, np.zeros(1, np.int32))
            elif found.array is not None:
                numpy_update(_any_found_np, _host(found), [_host(f) for f in flags])
            else:
                for i, flag in enumerate(flags):
                    launch(found.queue, _kernel(found.context, "amp_found", "float32"), (1,),
                           (1,), found, flag, np.int32(i > 0))

    def _on(self, queue: Any, op: str) -> _Device:
        """The scaler's tensors, put on ``queue``'s device by the first call."""
        device = self._device
        if device is None:
            device = self._device = _Device(queue, self._scale, self._growth_tracker)
        elif device.queue is not queue:
            raise ValueError(f"GradScaler.{op}: the tensors are on another device than the "
                             "scaler's; use one GradScaler per device")
        return device

    # -- checkpoints ---------------------------------------------------------------------

    def state_dict(self) -> dict[str, float | int]:
        """The scale, the factors, the interval and the clean-step count as plain numbers
        (JSON-able; read from the device); ``{}`` when disabled.

        Examples:
            >>> GradScaler(init_scale=8.0, growth_interval=3).state_dict()["scale"]
            8.0
        """
        if not self._enabled:
            return {}
        tracker = self._growth_tracker
        if self._device is not None:
            tracker = int(self._device.tracker.to_host()[0])
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": tracker}

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
        if self._device is not None:
            copy_from_host(self._device.flat, np.array([scale], np.float32))
            copy_from_host(self._device.tracker, np.array([tracker], np.int32))

    def __repr__(self) -> str:
        if not self._enabled:
            return "GradScaler(enabled=False)"
        return (f"GradScaler(scale={self.get_scale()}, growth_factor={self._growth_factor}, "
                f"backoff_factor={self._backoff_factor}, "
                f"growth_interval={self._growth_interval})")

    # -- device work ---------------------------------------------------------------------

    def _unscale_grads(self, params: list[Tensor], scale: Tensor, flag: Tensor) -> None:
        """``p.grad *= 1/scale`` in place for every parameter; ``flag`` set to 1 on inf/NaN
        (on OpenCL in launches of up to 16 gradients: NOTE [ Foreach unscaling ])."""
        foreach = env_flag("NETCL_FOREACH", True)
        chunks: dict[str, list[Tensor]] = {}  # by dtype: the gradients of the next launch
        for p in params:
            g: Any = p.grad
            if g.array is None:
                if not g.size:
                    continue
                if not foreach:
                    _unscale_launch([g], scale, flag)
                    continue
                chunk = chunks.setdefault(g.dtype, [])
                if (len(chunk) == _UNSCALE_WIDTH
                        or sum(_padded(c.size) for c in chunk) + _padded(g.size) > _INT_MAX):
                    _unscale_launch(chunk, scale, flag)
                    chunk.clear()
                chunk.append(g)
                continue
            if not g.array.flags.writeable:  # a read-only view: a grad of its own
                p.grad = g = Tensor.from_host(g.queue, g.array, dtype=g.dtype)
            numpy_update(_unscale_np, g.array, _host(scale), _host(flag))
        for chunk in chunks.values():
            _unscale_launch(chunk, scale, flag)


def _padded(size: int) -> int:
    """``size`` rounded up to whole work-groups of the tuner's 1-D launches: the range of one
    gradient in an ``amp_unscale_x16`` launch (NOTE [ Foreach unscaling ])."""
    return _TUNER.launch_1d(size)[0][0]


def _unscale_launch(grads: list[Tensor], scale: Tensor, flag: Tensor) -> None:
    """One ``amp_unscale`` launch for one gradient, else one ``amp_unscale_x16`` (NOTE
    [ Foreach unscaling ]; empty slots repeat the last gradient over an empty range)."""
    g = grads[0]
    if len(grads) == 1:
        gsize, lsize = _TUNER.launch_1d(g.size)
        launch(g.queue, _kernel(g.context, "amp_unscale", g.dtype), gsize, lsize, g,
               np.int32(g.size), scale, flag)
        return
    args: list[Any] = [scale, flag]
    end = 0
    for grad in grads:
        end += _padded(grad.size)
        args += [grad, np.int32(grad.size), np.int32(end)]
    args += [grads[-1], np.int32(0), np.int32(end)] * (_UNSCALE_WIDTH - len(grads))
    gsize, lsize = _TUNER.launch_1d(end)
    launch(g.queue, _kernel(g.context, f"amp_unscale_x{_UNSCALE_WIDTH}", g.dtype), gsize, lsize,
           *args)


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
        numpy_update(_clear_np, flag.array)
    else:
        launch(queue, _kernel(flag.context, "amp_clear_flag", "float32"), (1,), (1,), flag)
    return flag


def _host(t: Tensor) -> Any:
    """A NumPy-backend tensor's array (updated in place)."""
    return t.array


def _persistent(t: Tensor) -> Tensor:
    t.persistent = True
    return t


# -- NumPy backend: in-place updates of the scaler's arrays, each one recordable call that reads
# its flags itself (NOTE [ NumPy work under a recorder ] in netcl.core.recording) ---------------

def _unscale_np(g: Any, scale: Any, flag: Any) -> None:
    g *= np.float32(1.0) / scale  # overflow is what we look for (warnings are silenced)
    if not np.isfinite(g).all():
        flag[0] = 1


def _clear_np(flag: Any) -> None:
    flag[0] = 0


def _any_found_np(found: Any, flags: list[Any]) -> None:
    found[0] = int(any(bool(f[0]) for f in flags))


def _amp_update_np(scale: Any, tracker: Any, found_inf: Any, flags: list[Any], backoff: float,
                   growth: float, interval: int) -> None:
    found = int(any(bool(f[0]) for f in flags))
    found_inf[0] = found
    if found:
        scale *= np.float32(backoff)
        tracker[0] = 0
    elif tracker[0] + 1 >= interval:
        grown = scale * np.float32(growth)  # inf: the scale is kept (PyTorch)
        if np.isfinite(grown):
            scale[...] = grown
        tracker[0] = 0
    else:
        tracker[0] += 1
