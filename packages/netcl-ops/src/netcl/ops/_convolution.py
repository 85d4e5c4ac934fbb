"""``conv2d`` over NCHW with stride, padding, dilation and groups, and the two backward
computations autograd needs (``conv2d_backward_data``: the transposed convolution;
``conv2d_backward_weight``).

NumPy: im2col through a strided window view, then one BLAS contraction per group. OpenCL: direct
kernels (the CONV2D_NAIVE family), one work-item per output, input-gradient or weight-gradient
element, each a gather, so no atomics are needed.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor

from ._common import check_tensor, cl_kernel, empty, launch_1d, result, same_device

__all__ = ["conv2d", "conv2d_backward_data", "conv2d_backward_weight", "conv2d_output_shape"]

IntPair = int | tuple[int, int]

_SRC = """
__kernel void conv_fwd(__global const T* x, __global const T* w, __global const T* bias,
                       __global T* y, const int total, const int C, const int H, const int W,
                       const int K, const int R, const int S, const int OH, const int OW,
                       const int SH, const int SW, const int PH, const int PW, const int DH,
                       const int DW, const int G, const int has_bias) {
  int o = get_global_id(0);
  if (o >= total) return;
  int ow = o % OW, oh = (o / OW) % OH, k = (o / (OW * OH)) % K, n = o / (OW * OH * K);
  int cg = C / G, kg = K / G, g = k / kg;
  CT acc = has_bias ? LD(bias, k) : (CT)0;
  for (int c = 0; c < cg; ++c) {
    const __global T* xp = x + ((long)n * C + g * cg + c) * H * W;
    const __global T* wp = w + ((long)k * cg + c) * R * S;
    for (int r = 0; r < R; ++r) {
      int ih = oh * SH - PH + r * DH;
      if (ih < 0 || ih >= H) continue;
      for (int s = 0; s < S; ++s) {
        int iw = ow * SW - PW + s * DW;
        if (iw < 0 || iw >= W) continue;
        acc += LD(xp, ih * W + iw) * LD(wp, r * S + s);
      }
    }
  }
  ST(y, o, acc);
}

// dx[n, c, ih, iw] = sum over k in c's group, r, s with (ih + PH - r*DH) = oh*SH in range.
__kernel void conv_bwd_data(__global const T* gy, __global const T* w, __global T* dx,
                            const int total, const int C, const int H, const int W, const int K,
                            const int R, const int S, const int OH, const int OW, const int SH,
                            const int SW, const int PH, const int PW, const int DH,
                            const int DW, const int G) {
  int i = get_global_id(0);
  if (i >= total) return;
  int iw = i % W, ih = (i / W) % H, c = (i / (W * H)) % C, n = i / (W * H * C);
  int cg = C / G, kg = K / G, g = c / cg, cl = c % cg;
  CT acc = 0;
  for (int r = 0; r < R; ++r) {
    int th = ih + PH - r * DH;
    if (th < 0 || th % SH) continue;
    int oh = th / SH;
    if (oh >= OH) continue;
    for (int s = 0; s < S; ++s) {
      int tw = iw + PW - s * DW;
      if (tw < 0 || tw % SW) continue;
      int ow = tw / SW;
      if (ow >= OW) continue;
      for (int kk = 0; kk < kg; ++kk) {
        int k = g * kg + kk;
        acc += LD(gy, (((long)n * K + k) * OH + oh) * OW + ow)
               * LD(w, ((k * cg + cl) * R + r) * S + s);
      }
    }
  }
  ST(dx, i, acc);
}

// dw[k, c, r, s] = sum over n, oh, ow of gy[n, k, oh, ow] * x[n, g*cg + c, ih, iw].
__kernel void conv_bwd_weight(__global const T* x, __global const T* gy, __global T* dw,
                              const int total, const int N, const int C, const int H,
                              const int W, const int K, const int R, const int S, const int OH,
                              const int OW, const int SH, const int SW, const int PH,
                              const int PW, const int DH, const int DW, const int G) {
  int i = get_global_id(0);
  if (i >= total) return;
  int cg = C / G, kg = K / G;
  int s = i % S, r = (i / S) % R, c = (i / (S * R)) % cg, k = i / (S * R * cg);
  int xc = (k / kg) * cg + c;
  CT acc = 0;
  for (int n = 0; n < N; ++n) {
    const __global T* xp = x + ((long)n * C + xc) * H * W;
    const __global T* gp = gy + ((long)n * K + k) * OH * OW;
    for (int oh = 0; oh < OH; ++oh) {
      int ih = oh * SH - PH + r * DH;
      if (ih < 0 || ih >= H) continue;
      for (int ow = 0; ow < OW; ++ow) {
        int iw = ow * SW - PW + s * DW;
        if (iw < 0 || iw >= W) continue;
        acc += LD(gp, oh * OW + ow) * LD(xp, ih * W + iw);
      }
    }
  }
  ST(dw, i, acc);
}
"""


def _pair(op: str, name: str, v: Any, minimum: int) -> tuple[int, int]:
    pair = (v, v) if isinstance(v, (int, np.integer)) else tuple(v)
    if len(pair) != 2 or any(isinstance(p, bool) or not isinstance(p, (int, np.integer))
                             or p < minimum for p in pair):
        raise ValueError(f"{op}: {name} must be an int >= {minimum} or a pair of them, got {v!r}")
    return int(pair[0]), int(pair[1])


def conv2d_output_shape(x_shape: tuple[int, ...], w_shape: tuple[int, ...], stride: IntPair = 1,
                        padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1,
                        op: str = "conv2d") -> tuple[int, int, int, int]:
    """``(N, K, OH, OW)`` for input ``x_shape`` and weight ``w_shape``, checking every rule."""
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ValueError(f"{op}: input and weight must be 4-D, got input {x_shape} and weight "
                         f"{w_shape}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    n, c, h, w = x_shape
    k, cg, r, s = w_shape
    if c % groups or k % groups:
        raise ValueError(f"{op}: groups={groups} must divide input channels {c} and output "
                         f"channels {k}")
    if cg * groups != c:
        raise ValueError(f"{op} requires input channels to match weight, got input {x_shape} "
                         f"and weight {w_shape} with groups={groups}")
    (sh, sw), (ph, pw) = _pair(op, "stride", stride, 1), _pair(op, "padding", padding, 0)
    dh, dw = _pair(op, "dilation", dilation, 1)
    oh = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (s - 1) - 1) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"{op}: input {h}x{w} is too small for a {r}x{s} kernel with padding "
                         f"{(ph, pw)} and dilation {(dh, dw)}")
    return n, k, oh, ow


def _cols(xa: np.ndarray[Any, Any], r: int, s: int, oh: int, ow: int, st: tuple[int, int],
          pad: tuple[int, int], dil: tuple[int, int]) -> np.ndarray[Any, Any]:
    """(N, C, OH, OW, R, S) window view of the zero-padded input."""
    n, c, h, w = xa.shape
    need_h = max(h + 2 * pad[0], (oh - 1) * st[0] + dil[0] * (r - 1) + 1)
    need_w = max(w + 2 * pad[1], (ow - 1) * st[1] + dil[1] * (s - 1) + 1)
    padded = np.zeros((n, c, need_h, need_w), xa.dtype)
    padded[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w] = xa
    b = padded.strides
    return np.lib.stride_tricks.as_strided(
        padded, (n, c, oh, ow, r, s),
        (b[0], b[1], b[2] * st[0], b[3] * st[1], b[2] * dil[0], b[3] * dil[1]), writeable=False)


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,
           padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation, as PyTorch) of NCHW ``x`` with (K, C/groups, R, S)
    ``weight``.

    Raises:
        ValueError: channel/group/shape rules broken, naming the shapes.
        TypeError: non-float input.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((1, 1, 3, 3)))
        >>> conv2d(x, Tensor.from_host(q, np.ones((1, 1, 2, 2)))).to_host().reshape(-1).tolist()
        [4.0, 4.0, 4.0, 4.0]
    """
    op = "conv2d"
    check_tensor(op, x)
    check_tensor(op, weight, "weight")
    same_device(op, x, weight)
    if not x.is_floating_point or weight.dtype != x.dtype:
        raise TypeError(f"{op}: input and weight must share a float dtype, got {x.dtype} and "
                        f"{weight.dtype}")
    n, k, oh, ow = conv2d_output_shape(x.shape, weight.shape, stride, padding, dilation, groups)
    if bias is not None:
        same_device(op, x, bias)
        if bias.shape != (k,):
            raise ValueError(f"{op}: bias must have shape ({k},), got {bias.shape}")
    st, pad = _pair(op, "stride", stride, 1), _pair(op, "padding", padding, 0)
    dil = _pair(op, "dilation", dilation, 1)
    _, c, h, w = x.shape
    _, cg, r, s = weight.shape
    if x.array is not None and weight.array is not None:
        cols = _cols(x.array, r, s, oh, ow, st, pad, dil)
        kg = k // groups
        outs = []
        for g in range(groups):
            cg_cols = cols[:, g * cg:(g + 1) * cg]
            wg = weight.array[g * kg:(g + 1) * kg]
            outs.append(np.einsum("ncijrs,kcrs->nkij", cg_cols, wg, optimize=True))
        y = np.concatenate(outs, axis=1) if groups > 1 else outs[0]
        if bias is not None and bias.array is not None:
            y = y + bias.array.reshape(1, k, 1, 1)
        return result(x, y, x.dtype)
    y_t = empty(x.queue, (n, k, oh, ow), x.dtype)
    kernel = cl_kernel(x.context, "conv_fwd", _SRC, x.dtype)
    launch_1d(x.queue, kernel, y_t.size, x, weight, x if bias is None else bias, y_t, y_t.size,
              c, h, w, k, r, s, oh, ow, *st, *pad, *dil, groups, int(bias is not None))
    return y_t


def conv2d_backward_data(grad_out: Tensor, weight: Tensor, input_shape: tuple[int, ...],
                         stride: IntPair = 1, padding: IntPair = 0, dilation: IntPair = 1,
                         groups: int = 1) -> Tensor:
    """The gradient of :func:`conv2d` with respect to its input (a transposed convolution)."""
    op = "conv2d_backward_data"
    n, k, oh, ow = conv2d_output_shape(tuple(input_shape), weight.shape, stride, padding,
                                       dilation, groups, op)
    if grad_out.shape != (n, k, oh, ow):
        raise ValueError(f"{op}: grad_out must have shape {(n, k, oh, ow)}, got "
                         f"{grad_out.shape}")
    st, pad = _pair(op, "stride", stride, 1), _pair(op, "padding", padding, 0)
    dil = _pair(op, "dilation", dilation, 1)
    _, c, h, w = input_shape
    _, cg, r, s = weight.shape
    if grad_out.array is not None and weight.array is not None:
        kg = k // groups
        need_h = max(h + 2 * pad[0], (oh - 1) * st[0] + dil[0] * (r - 1) + 1)
        need_w = max(w + 2 * pad[1], (ow - 1) * st[1] + dil[1] * (s - 1) + 1)
        dxp = np.zeros((n, c, need_h, need_w), np.float64)
        for g in range(groups):
            gy = grad_out.array[:, g * kg:(g + 1) * kg].astype(np.float64)
            wg = weight.array[g * kg:(g + 1) * kg].astype(np.float64)
            cols = np.einsum("nkij,kcrs->ncrsij", gy, wg, optimize=True)
            for ri in range(r):
                for si in range(s):
                    h0, w0 = ri * dil[0], si * dil[1]
                    dxp[:, g * cg:(g + 1) * cg, h0:h0 + oh * st[0]:st[0],
                        w0:w0 + ow * st[1]:st[1]] += cols[:, :, ri, si]
        return result(grad_out, dxp[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w], grad_out.dtype)
    dx_t = empty(grad_out.queue, tuple(input_shape), grad_out.dtype)
    kernel = cl_kernel(grad_out.context, "conv_bwd_data", _SRC, grad_out.dtype)
    launch_1d(grad_out.queue, kernel, dx_t.size, grad_out, weight, dx_t, dx_t.size, c, h, w, k,
              r, s, oh, ow, *st, *pad, *dil, groups)
    return dx_t


def conv2d_backward_weight(x: Tensor, grad_out: Tensor, weight_shape: tuple[int, ...],
                           stride: IntPair = 1, padding: IntPair = 0, dilation: IntPair = 1,
                           groups: int = 1) -> Tensor:
    """The gradient of :func:`conv2d` with respect to its weight."""
    op = "conv2d_backward_weight"
    n, k, oh, ow = conv2d_output_shape(x.shape, tuple(weight_shape), stride, padding, dilation,
                                       groups, op)
    if grad_out.shape != (n, k, oh, ow):
        raise ValueError(f"{op}: grad_out must have shape {(n, k, oh, ow)}, got "
                         f"{grad_out.shape}")
    st, pad = _pair(op, "stride", stride, 1), _pair(op, "padding", padding, 0)
    dil = _pair(op, "dilation", dilation, 1)
    _, c, h, w = x.shape
    _, cg, r, s = weight_shape
    if x.array is not None and grad_out.array is not None:
        cols = _cols(x.array, r, s, oh, ow, st, pad, dil)
        kg = k // groups
        parts = [np.einsum("nkij,ncijrs->kcrs", grad_out.array[:, g * kg:(g + 1) * kg],
                           cols[:, g * cg:(g + 1) * cg], optimize=True) for g in range(groups)]
        return result(x, np.concatenate(parts, axis=0), x.dtype)
    dw_t = empty(x.queue, tuple(weight_shape), x.dtype)
    kernel = cl_kernel(x.context, "conv_bwd_weight", _SRC, x.dtype)
    launch_1d(x.queue, kernel, math.prod(weight_shape), x, grad_out, dw_t, dw_t.size, n, c, h, w,
              k, r, s, oh, ow, *st, *pad, *dil, groups)
    return dw_t
