"""Device kernels for parameter updates and gradient norms.

Every update is one elementwise kernel per parameter: parameter, gradient and state buffers in,
updated in place; hyper-parameters (including the bias corrections, computed on the host from
the step count) go in as scalars. Nothing is read back to the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netcl.core.dtypes import c_type
from netcl.core.kernels.cache import get_kernel
from netcl.core.kernels.primitives import PRIMITIVE_PREAMBLE, WorkGroupTuner, launch
from netcl.core.tensor import Tensor

__all__ = ["clip_factor", "program_source", "run_update", "scale_by_factor", "sum_squares_into"]

_TUNER = WorkGroupTuner()
REDUCE_GROUP = 256

_UPDATES = {
    # p, g, buf ; lr, momentum, dampening, weight_decay, nesterov, first
    "sgd": """
__kernel void sgd(__global T* p, __global const T* g, __global T* buf, const int n,
                  const float lr, const float momentum, const float dampening,
                  const float wd, const int nesterov, const int first) {
  int i = get_global_id(0);
  if (i >= n) return;
  T grad = g[i] + (T)wd * p[i];
  if (momentum != 0.0f) {
    T b = first ? grad : (T)momentum * buf[i] + (T)(1.0f - dampening) * grad;
    buf[i] = b;
    grad = nesterov ? grad + (T)momentum * b : b;
  }
  p[i] -= (T)lr * grad;
}
""",
    # p, g, m, v ; lr, b1, b2, eps, wd, bc1, bc2, decoupled
    "adam": """
__kernel void adam(__global T* p, __global const T* g, __global T* m, __global T* v,
                   const int n, const float lr, const float b1, const float b2,
                   const float eps, const float wd, const float bc1, const float bc2,
                   const int decoupled) {
  int i = get_global_id(0);
  if (i >= n) return;
  T param = p[i];
  T grad = g[i];
  if (decoupled) param *= (T)(1.0f - lr * wd); else grad += (T)wd * param;
  T mi = (T)b1 * m[i] + (T)(1.0f - b1) * grad;
  T vi = (T)b2 * v[i] + (T)(1.0f - b2) * grad * grad;
  m[i] = mi;
  v[i] = vi;
  p[i] = param - (T)lr * (mi / (T)bc1) / (sqrt(vi / (T)bc2) + (T)eps);
}
""",
    # p, g, sq, buf, gavg ; lr, alpha, eps, wd, momentum, centered
    "rmsprop": """
__kernel void rmsprop(__global T* p, __global const T* g, __global T* sq, __global T* buf,
                      __global T* gavg, const int n, const float lr, const float alpha,
                      const float eps, const float wd, const float momentum,
                      const int centered) {
  int i = get_global_id(0);
  if (i >= n) return;
  T grad = g[i] + (T)wd * p[i];
  T s = (T)alpha * sq[i] + (T)(1.0f - alpha) * grad * grad;
  sq[i] = s;
  T denom_sq = s;
  if (centered) {
    T ga = (T)alpha * gavg[i] + (T)(1.0f - alpha) * grad;
    gavg[i] = ga;
    denom_sq = s - ga * ga;
  }
  T step = grad / (sqrt(denom_sq) + (T)eps);
  if (momentum > 0.0f) {
    T b = (T)momentum * buf[i] + step;
    buf[i] = b;
    step = b;
  }
  p[i] -= (T)lr * step;
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
    float v = (float)x[i];
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
  if (i < n) x[i] = (T)((float)x[i] * factor[1]);
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
    """``source`` (``_UPDATES[kind]``, ``_NORM`` or ``_CLIP``) with its header for ``dtype``."""
    pragma = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" if dtype == "float64" else ""
    header = f"{pragma}{PRIMITIVE_PREAMBLE}#define T {c_type(dtype)}\n"
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
