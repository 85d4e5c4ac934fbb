"""Device kernels for parameter updates and gradient norms.

Every update is an elementwise kernel: parameter, gradient and state buffers in, updated in
place; hyper-parameters that only change when the user changes them (lr, betas, momentum) go
in as scalars. Nothing is read back to the host. One launch updates one parameter
(:func:`run_update`) or, in foreach launches, up to 16 (:func:`run_updates`: NOTE [ Foreach
updates ] in ``_update_sources.py``, where the per-element formulas are generated into both).

# NOTE [ Step counts on the device ]
# An optimizer keeps, per parameter, ``(t, 1 - b1**t, 1 - b2**t)`` in one float32 device buffer
# (``steps``, three floats per parameter; float32 as PyTorch's ``state["step"]`` tensor: exact
# up to 2**24 steps). One tiny ``optim_tick`` launch per ``step()`` adds 1 to the count of each
# parameter that has a gradient and computes its two bias corrections from the ``1 - beta``
# pair the optimizer keeps for it (``hyper``: Adam's betas, 0 for the others); the update
# kernels read their parameter's entries (SGD's first momentum step, Adam's corrections). A
# count or correction passed as a kernel scalar would change on every call, so a graph capture
# (``netcl.runtime.capture``) could not replay the step. Every kernel also reads a skip flag
# (an int32 buffer: ``GradScaler``'s found-inf flag, or the optimizer's own zero flag) and does
# nothing when it is set, so a skipped AMP step needs no host decision either.
#
# The corrections are ``-expm1(t * log1p(-(1 - beta)))`` with ``1 - beta`` rounded on the host
# from the float64 beta: ``1.0f - 0.999f`` would lose four digits to cancellation before the
# first step. They are computed once per parameter in the tick, not per element in the update:
# on PoCL's CPU device, where ``expm1``/``log1p`` do not vectorize, per-element corrections made
# a 4M-element Adam update 18x slower (838 ms against 47 ms).

# NOTE [ float16 parameters ]
# The kernels never do arithmetic in ``half``: that needs ``cl_khr_fp16``, which many devices
# (PoCL's CPU device among them) lack. Parameters and gradients are *stored* as ``T`` and read
# and written through ``LD``/``ST`` (``vload_half``/``vstore_half`` for float16), arithmetic
# runs in ``CT`` (``float``; ``double`` for float64 parameters), and the optimizer state is
# stored as ``S`` (see :func:`state_dtype`): float32 for a float16 parameter. PyTorch keeps
# the state in the parameter's dtype; float32 state costs twice the memory, but in float16
# Adam's ``(1 - b2) * g * g`` is 0 for |g| below about 5e-3 (default b2), so ``v`` underflows
# and ``m / (sqrt(v) + eps)`` explodes, and small increments of the running averages round
# away. The update is rounded to float16 once, when the parameter is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, c_type
from netcl.core.env import env_choice, env_flag
from netcl.core.kernels.family import (
    LOCAL_1D,
    Geometry,
    KernelSource,
    grid_1d,
    kernel_family,
    local_size_1d,
)
from netcl.core.kernels.primitives import launch
from netcl.core.tensor import Tensor

from ._update_sources import UPDATES, Formula, update_program

__all__ = ["EXTENSIONS", "FOREACH_ENV", "FOREACH_WIDTH_ENV", "WIDTHS", "DeviceUpdate",
           "clamp_values", "clip_factor", "foreach_width", "optim_family", "program_source",
           "run_tick", "run_update", "run_updates", "scale_by_factor", "state_dtype",
           "sum_squares_into"]

REDUCE_GROUP = 256


def state_dtype(dtype: str) -> str:
    """The dtype of optimizer state for a ``dtype`` parameter: float32 for float16, else
    ``dtype`` itself (see NOTE [ float16 parameters ]).

    Examples:
        >>> state_dtype("float16"), state_dtype("float64")
        ('float32', 'float64')
    """
    return "float32" if dtype == "float16" else dtype


_UPDATES = {
    # p, g, buf, steps, skip ; n, index ; lr, momentum, dampening, weight_decay, nesterov
    "sgd": Formula(
        ("__global S* buf",),
        ("const float lr", "const float momentum", "const float dampening", "const float wd",
         "const int nesterov"), """\
  const int first = steps[3 * index] == 1.0f;
  const CT param = LD(p, i);
  CT grad = LD(g, i) + (CT)wd * param;
  if (momentum != 0.0f) {
    const CT b = first ? grad : (CT)momentum * buf[i] + (CT)(1.0f - dampening) * grad;
    buf[i] = (S)b;
    grad = nesterov ? grad + (CT)momentum * b : b;
  }
  ST(p, i, param - (CT)lr * grad);
"""),
    # p, g, m, v, steps, skip ; n, index ; lr, b1, b2, eps, wd, decoupled
    "adam": Formula(
        ("__global S* m", "__global S* v"),
        ("const float lr", "const float b1", "const float b2", "const float eps",
         "const float wd", "const int decoupled"), """\
  const CT bc1 = (CT)steps[3 * index + 1], bc2 = (CT)steps[3 * index + 2];  // 1 - b^t
  CT param = LD(p, i);
  CT grad = LD(g, i);
  if (decoupled) param *= (CT)(1.0f - lr * wd); else grad += (CT)wd * param;
  const CT mi = (CT)b1 * m[i] + (CT)(1.0f - b1) * grad;
  const CT vi = (CT)b2 * v[i] + (CT)(1.0f - b2) * grad * grad;
  m[i] = (S)mi;
  v[i] = (S)vi;
  ST(p, i, param - (CT)lr * (mi / bc1) / (sqrt(vi / bc2) + (CT)eps));
"""),
    # p, g, sq, buf, gavg, steps, skip ; n, index ; lr, alpha, eps, wd, momentum, centered
    "rmsprop": Formula(
        ("__global S* sq", "__global S* buf", "__global S* gavg"),
        ("const float lr", "const float alpha", "const float eps", "const float wd",
         "const float momentum", "const int centered"), """\
  const CT param = LD(p, i);
  const CT grad = LD(g, i) + (CT)wd * param;
  const CT s = (CT)alpha * sq[i] + (CT)(1.0f - alpha) * grad * grad;
  sq[i] = (S)s;
  CT denom_sq = s;
  if (centered) {
    const CT ga = (CT)alpha * gavg[i] + (CT)(1.0f - alpha) * grad;
    gavg[i] = (S)ga;
    denom_sq = s - ga * ga;
  }
  CT step = grad / (sqrt(denom_sq) + (CT)eps);
  if (momentum > 0.0f) {
    const CT b = (CT)momentum * buf[i] + step;
    buf[i] = (S)b;
    step = b;
  }
  ST(p, i, param - (CT)lr * step);
"""),
    **UPDATES,
}

_TICK = """
__kernel void optim_tick(__global float* steps, __global const float* hyper,
                         __global const int* index, const int count,
                         __global const int* skip) {
  // one work item per parameter with a gradient: (t, 1 - b1^t, 1 - b2^t) for its next update
  int i = get_global_id(0);
  if (i >= count || skip[0]) return;
  const int k = index[i];
  const float t = steps[3 * k] + 1.0f;
  steps[3 * k] = t;
  steps[3 * k + 1] = -expm1(t * log1p(-hyper[2 * k]));
  steps[3 * k + 2] = -expm1(t * log1p(-hyper[2 * k + 1]));
}
"""

_NORM = """
__kernel void sum_squares(__global const T* x, const int n, __global float* partial,
                          const int slot) {
  __local float acc[REDUCE_GROUP];
  int lid = get_local_id(0);
  float s = 0.0f;
  for (int i = get_global_id(0); i < n; i += get_global_size(0)) {
    float v = (float)LD(x, i);
    s += v * v;
  }
  acc[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int half_ = REDUCE_GROUP / 2; half_ > 0; half_ >>= 1) {
    if (lid < half_) acc[lid] += acc[lid + half_];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) partial[slot + get_group_id(0)] = acc[0];
}

__kernel void scale_by(__global T* x, const int n, __global const float* factor) {
  int i = get_global_id(0);
  if (i < n) ST(x, i, LD(x, i) * (CT)factor[1]);
}

__kernel void clamp_by(__global T* x, const int n, const float limit) {
  int i = get_global_id(0);
  if (i >= n) return;
  const CT v = LD(x, i), lim = (CT)limit;
  ST(x, i, v < -lim ? -lim : (v > lim ? lim : v));  // NaN stays NaN, as PyTorch's clamp
}
"""

_CLIP = """
__kernel void clip_factor(__global const float* partial, const int count,
                          __global float* out, const float max_norm) {
  // one work-group: out[0] = total norm, out[1] = min(1, max_norm / (norm + 1e-6))
  __local float acc[REDUCE_GROUP];
  int lid = get_local_id(0);
  float s = 0.0f;
  for (int i = lid; i < count; i += REDUCE_GROUP) s += partial[i];
  acc[lid] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int half_ = REDUCE_GROUP / 2; half_ > 0; half_ >>= 1) {
    if (lid < half_) acc[lid] += acc[lid + half_];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) {
    float norm = sqrt(acc[0]);
    out[0] = norm;
    out[1] = fmin(1.0f, max_norm / (norm + 1e-6f));
  }
}
"""

NORM_GROUPS = 64  # work-groups per parameter in sum_squares: partial slots per parameter


def program_source(program: str, dtype: str, width: int = 1) -> str:
    """Program ``program`` (an update kind, ``"norm"``, ``"clip"`` or ``"tick"``) with its
    header for ``dtype``: ``T`` (storage), ``CT`` (arithmetic), ``S`` (state), ``LD``/``ST``
    (see NOTE [ float16 parameters ]); an update's foreach program for ``width > 1`` (NOTE
    [ Foreach updates ] in ``_update_sources.py``). No header needs ``cl_khr_fp16``; float64
    ones enable ``cl_khr_fp64``.

    Examples:
        >>> program_source("sgd", "float16").count("#pragma")
        0
        >>> "__kernel void adam_x16(" in program_source("adam", "float32", 16)
        True
    """
    return _source(program, dtype, width).render(EXTENSIONS)


EXTENSIONS = "cl_khr_fp64"
"""The extensions the golden headers are rendered for: fp64 pragmas for float64, never fp16."""


_PROGRAMS = {"norm": (_NORM, ("sum_squares", "scale_by", "clamp_by")),
             "clip": (_CLIP, ("clip_factor",)), "tick": (_TICK, ("optim_tick",))}


def _source(program: str, dtype: str, width: int = 1) -> KernelSource:
    if program in _UPDATES:
        text = update_program(program, _UPDATES[program], width)
        kernels: tuple[str, ...] = (program if width == 1 else f"{program}_x{width}",)
    else:
        text, kernels = _PROGRAMS[program]
    return KernelSource(f"#define REDUCE_GROUP {REDUCE_GROUP}\n{text}", kernels, dtype,
                        Geometry() if program in _UPDATES else Geometry(local=REDUCE_GROUP),
                        defines=f"#define S {c_type(state_dtype(dtype))}\n")


def _optim_golden() -> list[tuple[str, tuple[str, str, int]]]:
    cases = []
    for dtype in FLOAT_DTYPES:
        cases += [(f"update/{kind}-{dtype}", (kind, dtype, 1)) for kind in _UPDATES]
        cases += [(f"foreach/{kind}_x{GOLDEN_WIDTH}-{dtype}", (kind, dtype, GOLDEN_WIDTH))
                  for kind in _UPDATES]
        cases.append((f"norm/sum_squares-{dtype}", ("norm", dtype, 1)))
    return [*cases, ("clip/clip_factor-float32", ("clip", "float32", 1)),
            ("tick/optim_tick-float32", ("tick", "float32", 1))]


@kernel_family("optim.kernels", golden=_optim_golden)
def optim_family(program: str, dtype: str, width: int = 1) -> KernelSource:
    """An update program (``program`` = ``"sgd"``, ``"adam"``, ...; one work item per element
    of one parameter, or for ``width > 1`` of up to ``width`` parameters: NOTE [ Foreach
    updates ] in ``_update_sources.py``), the gradient-norm program (``"norm"``:
    ``sum_squares`` in ``NORM_GROUPS`` work-groups of ``REDUCE_GROUP``, ``scale_by`` per
    element), ``"clip"`` (one work-group) or ``"tick"`` (one work item per parameter: NOTE
    [ Step counts on the device ])."""
    return _source(program, dtype, width)


def _kernel(context: Any, name: str, program: str, dtype: str) -> Any:
    return optim_family(context, program, dtype, 1).kernels[name]


def _scalar_values(scalars: Sequence[float | bool]) -> list[Any]:
    """The kernels' hyper-parameters: bools as int, numbers as float (all ``float``)."""
    return [np.int32(a) if isinstance(a, bool) else np.float32(a) for a in scalars]


def run_update(kind: str, param: Tensor, buffers: Sequence[Tensor], steps: Tensor, index: int,
               skip: Tensor, *scalars: float | bool) -> None:
    """Launch the ``kind`` update kernel over ``param``: its gradient and state ``buffers``,
    the ``steps`` counts and corrections (``param``'s at ``3 * index``), the ``skip`` flag,
    then ``scalars`` (bools as int, numbers as float: the kernels' hyper-parameters are all
    ``float``)."""
    built = optim_family(param.context, kind, param.dtype, 1)
    built.launch(param.queue, param.size, param, *buffers, steps, skip, np.int32(param.size),
                 np.int32(index), *_scalar_values(scalars))


# -- foreach updates: NOTE [ Foreach updates ] in _update_sources.py ---------------------------

FOREACH_ENV = "NETCL_FOREACH"
"""``0`` forces one update launch per parameter (the path the foreach launches are tested and
timed against); unset or ``1``: foreach launches."""
FOREACH_WIDTH_ENV = "NETCL_FOREACH_WIDTH"
"""Forces the foreach width (one of :data:`WIDTHS`, or ``1``: per parameter); unset: the
widest that :func:`foreach_width` finds fits the device's kernel-argument space."""
WIDTHS = (16, 8, 4, 2)
GOLDEN_WIDTH = 16
_INT_MAX = 2**31 - 1  # the kernels index with int: a launch covers fewer elements

_widths: dict[tuple[Any, str], int] = {}  # (device, kind) -> width: devices live on


class DeviceUpdate(NamedTuple):
    """One parameter's update on an OpenCL device: the kernel ``kind``, the gradient and state
    ``buffers`` after the parameter, and the ``scalars`` (hyper-parameters, in the kernel's
    order; parameters whose kind, dtype and scalars match share foreach launches)."""

    kind: str
    buffers: Sequence[Tensor]
    scalars: tuple[float | bool, ...]


def foreach_width(device: Any, kind: str) -> int:
    """How many parameters one ``kind`` update launch takes on ``device``: 1 under
    ``NETCL_FOREACH=0``, the forced ``NETCL_FOREACH_WIDTH``, else the largest of
    :data:`WIDTHS` whose arguments fit the device's ``max_parameter_size`` (1024 bytes at
    least by the OpenCL spec: 16 slots of every update kind fit in it with 64-bit pointers).

    Raises:
        ValueError: ``NETCL_FOREACH`` or ``NETCL_FOREACH_WIDTH`` holds another value.

    Examples:
        >>> from types import SimpleNamespace as NS
        >>> foreach_width(NS(max_parameter_size=1024, address_bits=64), "rmsprop")
        16
        >>> foreach_width(NS(max_parameter_size=512, address_bits=64), "rmsprop")
        8
    """
    if not env_flag(FOREACH_ENV, True):
        return 1
    forced = env_choice(FOREACH_WIDTH_ENV, ("1", *map(str, WIDTHS)))
    if forced is not None:
        return int(forced)
    try:
        return _widths[device, kind]
    except (KeyError, TypeError):
        pass
    formula = _UPDATES[kind]
    pointer = int(device.address_bits) // 8
    limit = int(device.max_parameter_size)
    fixed = 2 * pointer + 4 * len(formula.scalars)
    per_slot = pointer * len(formula.buffers) + 12  # the buffers, index_k, n_k, end_k
    width = next((w for w in WIDTHS if fixed + w * per_slot <= limit), 1)
    try:
        _widths[device, kind] = width
    except TypeError:  # an unhashable stand-in
        pass
    return width


def run_updates(updates: Sequence[tuple[DeviceUpdate, Tensor, int]], steps: Tensor,
                skip: Tensor) -> None:
    """Launch the ``(update, param, index)`` updates of one queue's parameters, in foreach
    launches of up to :func:`foreach_width` parameters each (grouped by kind, dtype and
    scalars; a lone parameter, or every one under ``NETCL_FOREACH=0``, gets
    :func:`run_update`). Each computes bit for bit what :func:`run_update` computes."""
    if not updates:
        return
    queue = updates[0][1].queue
    groups: dict[tuple[Any, ...], list[tuple[DeviceUpdate, Tensor, int]]] = {}
    for item in updates:
        update, param = item[0], item[1]
        if foreach_width(queue.device, update.kind) == 1:
            run_update(update.kind, param, update.buffers, steps, item[2], skip, *update.scalars)
        elif param.size:
            groups.setdefault((update.kind, param.dtype, update.scalars), []).append(item)
    for (kind, dtype, scalars), members in groups.items():
        width = foreach_width(queue.device, kind)
        chunk: list[tuple[DeviceUpdate, Tensor, int]] = []
        total = 0
        for item in members:
            if len(chunk) == width or total + item[1].size + LOCAL_1D > _INT_MAX:
                _launch_chunk(kind, dtype, width, chunk, scalars, steps, skip)
                chunk, total = [], 0
            chunk.append(item)
            total += item[1].size + LOCAL_1D  # each rounded up to whole work-groups
        _launch_chunk(kind, dtype, width, chunk, scalars, steps, skip)


def _launch_chunk(kind: str, dtype: str, width: int,
                  chunk: Sequence[tuple[DeviceUpdate, Tensor, int]],
                  scalars: tuple[float | bool, ...], steps: Tensor, skip: Tensor) -> None:
    """One ``<kind>_x<width>`` launch over ``chunk``, each parameter from a work-group's start
    (empty slots repeat the last parameter's buffers over an empty range); a chunk of one gets
    the per-parameter kernel."""
    if len(chunk) == 1:
        update, param, index = chunk[0]
        run_update(kind, param, update.buffers, steps, index, skip, *scalars)
        return
    param = chunk[0][1]
    local = local_size_1d(param.queue.device)
    args: list[Any] = [steps, skip, *_scalar_values(scalars)]
    end = 0
    for update, param, index in chunk:
        end += -(-param.size // local) * local
        args += [param, *update.buffers, np.int32(index), np.int32(param.size), np.int32(end)]
    args += [*args[-(len(chunk[-1][0].buffers) + 4):-2], np.int32(0), np.int32(end)] * (
        width - len(chunk))
    built = optim_family(param.context, kind, dtype, width)
    built.launch(param.queue, end, *args)


def run_tick(steps: Tensor, hyper: Tensor, index: Tensor, skip: Tensor) -> None:
    """For every parameter ``k`` in ``index``, unless ``skip[0]`` is set: its count
    ``steps[3k]`` += 1 and ``steps[3k+1:3k+3]`` = the bias corrections for the ``1 - beta``
    pair ``hyper[2k:2k+2]`` (one launch; NOTE [ Step counts on the device ])."""
    built = optim_family(steps.context, "tick", "float32")
    built.launch(steps.queue, index.size, steps, hyper, index, np.int32(index.size), skip)


def sum_squares_into(x: Tensor, partial: Tensor, slot: int) -> None:
    """Write ``NORM_GROUPS`` partial sums of ``x**2`` into ``partial[slot:slot+NORM_GROUPS]``."""
    kernel = _kernel(x.context, "sum_squares", "norm", x.dtype)
    launch(x.queue, kernel, (NORM_GROUPS * REDUCE_GROUP,), (REDUCE_GROUP,), x, np.int32(x.size),
           partial, np.int32(slot))


def clip_factor(partial: Tensor, out: Tensor, max_norm: float) -> None:
    """``out[0]`` = sqrt(sum(partial)), ``out[1]`` = min(1, max_norm / (norm + 1e-6))."""
    kernel = _kernel(partial.context, "clip_factor", "clip", "float32")
    launch(partial.queue, kernel, (REDUCE_GROUP,), (REDUCE_GROUP,), partial,
           np.int32(partial.size), out, np.float32(max_norm))


def clamp_values(x: Tensor, limit: float) -> None:
    """``x = clamp(x, -limit, limit)`` in place, on the device (NaN stays NaN)."""
    if x.size == 0:
        return
    built = optim_family(x.context, "norm", x.dtype)
    gsize, lsize = grid_1d(x.size, local_size_1d(x.queue.device))
    launch(x.queue, built.kernels["clamp_by"], gsize, lsize, x, np.int32(x.size),
           np.float32(limit))


def scale_by_factor(x: Tensor, factor: Tensor) -> None:
    """``x *= factor[1]`` on the device."""
    if x.size == 0:
        return
    built = optim_family(x.context, "norm", x.dtype)
    gsize, lsize = grid_1d(x.size, local_size_1d(x.queue.device))
    launch(x.queue, built.kernels["scale_by"], gsize, lsize, x, np.int32(x.size), factor)
