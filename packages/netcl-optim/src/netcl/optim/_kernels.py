"""Device kernels for parameter updates and gradient norms.

Every update is one elementwise kernel per parameter: parameter, gradient and state buffers in,
updated in place; hyper-parameters (including the bias corrections, computed on the host from
the step count) go in as scalars. Nothing is read back to the host.

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

from typing import Any

import numpy as np

from netcl.core.dtypes import c_type
from netcl.core.kernels.cache import get_kernel
from netcl.core.kernels.primitives import PRIMITIVE_PREAMBLE, WorkGroupTuner, launch
from netcl.core.tensor import Tensor

__all__ = ["clip_factor", "program_source", "run_update", "scale_by_factor", "state_dtype",
           "sum_squares_into"]

_TUNER = WorkGroupTuner()
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
    # p, g, buf ; lr, momentum, dampening, weight_decay, nesterov, first
    "sgd": """
__kernel void sgd(__global T* p, __global const T* g, __global S* buf, const int n,
                  const float lr, const float momentum, const float dampening,
                  const float wd, const int nesterov, const int first) {
  int i = get_global_id(0);
  if (i >= n) return;
  const CT param = LD(p, i);
  CT grad = LD(g, i) + (CT)wd * param;
  if (momentum != 0.0f) {
    const CT b = first ? grad : (CT)momentum * buf[i] + (CT)(1.0f - dampening) * grad;
    buf[i] = (S)b;
    grad = nesterov ? grad + (CT)momentum * b : b;
  }
  ST(p, i, param - (CT)lr * grad);
}
""",
    # p, g, m, v ; lr, b1, b2, eps, wd, bc1, bc2, decoupled
    "adam": """
__kernel void adam(__global T* p, __global const T* g, __global S* m, __global S* v,
                   const int n, const float lr, const float b1, const float b2,
                   const float eps, const float wd, const float bc1, const float bc2,
                   const int decoupled) {
  int i = get_global_id(0);
  if (i >= n) return;
  CT param = LD(p, i);
  CT grad = LD(g, i);
  if (decoupled) param *= (CT)(1.0f - lr * wd); else grad += (CT)wd * param;
  const CT mi = (CT)b1 * m[i] + (CT)(1.0f - b1) * grad;
  const CT vi = (CT)b2 * v[i] + (CT)(1.0f - b2) * grad * grad;
  m[i] = (S)mi;
  v[i] = (S)vi;
  ST(p, i, param - (CT)lr * (mi / (CT)bc1) / (sqrt(vi / (CT)bc2) + (CT)eps));
}
""",
    # p, g, sq, buf, gavg ; lr, alpha, eps, wd, momentum, centered
    "rmsprop": """
__kernel void rmsprop(__global T* p, __global const T* g, __global S* sq, __global S* buf,
                      __global S* gavg, const int n, const float lr, const float alpha,
                      const float eps, const float wd, const float momentum,
                      const int centered) {
  int i = get_global_id(0);
  if (i >= n) return;
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
}
""",
}

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


def program_source(source: str, dtype: str) -> str:
    """``source`` (``_UPDATES[kind]``, ``_NORM`` or ``_CLIP``) with its header for ``dtype``:
    ``T`` (storage), ``CT`` (arithmetic), ``S`` (state), ``LD``/``ST`` (see NOTE [ float16
    parameters ]). No header needs ``cl_khr_fp16``.
    """
    pragma = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if dtype == "float64" else ""
    if dtype == "float16":
        access = ("#define LD(p, i) vload_half((i), (p))\n"
                  "#define ST(p, i, v) vstore_half((v), (i), (p))\n")
    else:
        access = "#define LD(p, i) ((CT)(p)[(i)])\n#define ST(p, i, v) ((p)[(i)] = (T)(v))\n"
    compute = "double" if dtype == "float64" else "float"
    header = (f"{pragma}{PRIMITIVE_PREAMBLE}#define T {c_type(dtype)}\n#define CT {compute}\n"
              f"#define S {c_type(state_dtype(dtype))}\n{access}")
    header += f"#define REDUCE_GROUP {REDUCE_GROUP}\n"
    return header + source


def _kernel(context: Any, name: str, source: str, dtype: str) -> Any:
    return get_kernel(context, program_source(source, dtype), name)


def run_update(kind: str, param: Tensor, *buffers_and_scalars: Any) -> None:
    """Launch the ``kind`` update kernel over ``param`` (the other arguments follow it)."""
    kernel = _kernel(param.context, kind, _UPDATES[kind], param.dtype)
    n = param.size
    if n == 0:
        return
    gsize, lsize = _TUNER.launch_1d(n)
    tensors = [a for a in buffers_and_scalars if isinstance(a, Tensor)]
    scalars = [_scalar(a) for a in buffers_and_scalars if not isinstance(a, Tensor)]
    launch(param.queue, kernel, gsize, lsize, param, *tensors, np.int32(n), *scalars)


def _scalar(value: Any) -> Any:
    if isinstance(value, bool):
        return np.int32(value)
    if isinstance(value, int):
        return np.int32(value)
    return np.float32(value)


def sum_squares_into(x: Tensor, partial: Tensor, slot: int) -> None:
    """Write ``NORM_GROUPS`` partial sums of ``x**2`` into ``partial[slot:slot+NORM_GROUPS]``."""
    kernel = _kernel(x.context, "sum_squares", _NORM, x.dtype)
    launch(x.queue, kernel, (NORM_GROUPS * REDUCE_GROUP,), (REDUCE_GROUP,), x, np.int32(x.size),
           partial, np.int32(slot))


def clip_factor(partial: Tensor, out: Tensor, max_norm: float) -> None:
    """``out[0]`` = sqrt(sum(partial)), ``out[1]`` = min(1, max_norm / (norm + 1e-6))."""
    kernel = _kernel(partial.context, "clip_factor", _CLIP, "float32")
    launch(partial.queue, kernel, (REDUCE_GROUP,), (REDUCE_GROUP,), partial,
           np.int32(partial.size), out, np.float32(max_norm))


def scale_by_factor(x: Tensor, factor: Tensor) -> None:
    """``x *= factor[1]`` on the device."""
    if x.size == 0:
        return
    kernel = _kernel(x.context, "scale_by", _NORM, x.dtype)
    gsize, lsize = _TUNER.launch_1d(x.size)
    launch(x.queue, kernel, gsize, lsize, x, np.int32(x.size), factor)
