"""2-D pooling over NCHW tensors: max (with indices), average, adaptive average; and the
backward computations autograd needs. One work-item per output (or, for backward, per input)
element; the backward kernels gather instead of scattering, so they need no atomics.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.kernels.family import KernelSource, grid_1d, kernel_family
from netcl.core.kernels.primitives import launch_values
from netcl.core.tensor import Tensor

from ._common import check_tensor, empty, launch_1d
from ._elementwise_dispatch import np_result, np_results
from ._launch import launch_key, queue_facts, remember, remembered, run_remembered, view_args

__all__ = [
    "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward",
    "avg_pool2d",
    "avg_pool2d_backward",
    "global_avg_pool2d",
    "max_pool2d",
    "max_pool2d_backward",
]

IntPair = int | tuple[int, int]


def _pair(op: str, name: str, v: Any, minimum: int) -> tuple[int, int]:
    pair = (v, v) if isinstance(v, (int, np.integer)) else tuple(v)
    if len(pair) != 2 or any(isinstance(p, bool) or not isinstance(p, (int, np.integer))
                             or p < minimum for p in pair):
        raise ValueError(f"{op}: {name} must be an int >= {minimum} or a pair of them, got {v!r}")
    return int(pair[0]), int(pair[1])


def _check_input(op: str, x: Tensor) -> None:
    check_tensor(op, x)
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be 4-D (N, C, H, W), got shape {x.shape}")
    if not x.is_floating_point:
        raise TypeError(f"{op}: input must be floating point, got {x.dtype}")


def _geometry(op: str, shape: tuple[int, ...], kernel_size: IntPair, stride: IntPair | None,
              padding: IntPair, dilation: IntPair = 1, ceil_mode: bool = False
              ) -> tuple[tuple[int, int], ...]:
    """``(kernel, stride, padding, dilation, output size)`` of pooling an NCHW ``shape``,
    PyTorch's output size rule (``ceil_mode``: the last window must start inside the input or
    its left padding)."""
    k = _pair(op, "kernel_size", kernel_size, 1)
    s = k if stride is None else _pair(op, "stride", stride, 1)
    p = _pair(op, "padding", padding, 0)
    d = _pair(op, "dilation", dilation, 1)
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"{op}: padding {p} must be at most half the kernel size {k}")
    out = []
    for i in range(2):
        span = shape[2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1
        n = (-(-span // s[i]) if ceil_mode else span // s[i]) + 1
        if ceil_mode and (n - 1) * s[i] >= shape[2 + i] + p[i]:
            n -= 1
        if n < 1:
            raise ValueError(f"{op}: input {tuple(shape[2:])} is too small for kernel {k} with "
                             f"padding {p} and dilation {d}")
        out.append(n)
    return k, s, p, d, (out[0], out[1])


def _avg_divisors(size: int, k: int, s: int, p: int, out: int, include_pad: bool
                  ) -> np.ndarray[Any, Any]:
    """The divisor of each of ``out`` windows along one axis, PyTorch's rule: the window's
    part inside the padded input ``[-p, size + p)`` with ``include_pad`` (a ``ceil_mode`` window
    may overhang it), else its part inside the input ``[0, size)``. The 2-D divisor is the
    product of the two axes' divisors (see ``avg_divisor`` in the kernels)."""
    start = np.arange(out) * s - p
    counts: np.ndarray[Any, Any]
    if include_pad:
        counts = np.minimum(start + k, size + p) - start
    else:
        counts = np.maximum(np.minimum(start + k, size) - np.maximum(start, 0), 1)
    return counts


# NOTE [ Pooling kernel arguments ]
# Every tensor argument is a buffer and its element offset (``__global T* x, const long xo``,
# the kernel starts with ``x += xo``), so views with an offset work as in every other op.

_MAX_SRC = """
__kernel void max_pool(__global const T* x, const long xo, __global T* y, const long yo,
                       __global long* idx, const long io, const int total, const int H,
                       const int W, const int OH, const int OW, const int KH, const int KW,
                       const int SH, const int SW, const int PH, const int PW, const int DH,
                       const int DW) {
  int o = get_global_id(0);
  if (o >= total) return;
  x += xo; y += yo; idx += io;
  int ow = o % OW, oh = (o / OW) % OH, plane = o / (OW * OH);
  const __global T* xp = x + (long)plane * H * W;
  CT best = -INFINITY; long best_i = -1;
  for (int kh = 0; kh < KH; ++kh) {
    int ih = oh * SH - PH + kh * DH;
    if (ih < 0 || ih >= H) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int iw = ow * SW - PW + kw * DW;
      if (iw < 0 || iw >= W) continue;
      CT v = LD(xp, ih * W + iw);
      if (best_i < 0 || v > best || (isnan(v) && !isnan(best))) { best = v; best_i = ih * W + iw; }
    }
  }
  ST(y, o, best);
  idx[o] = best_i;
}

__kernel void max_pool_backward(__global const T* g, const long go, __global const long* idx,
                                const long io, __global T* dx, const long dxo,
                                const int total, const int H, const int W, const int OH,
                                const int OW, const int KH, const int KW, const int SH,
                                const int SW, const int PH, const int PW, const int DH,
                                const int DW) {
  int i = get_global_id(0);
  if (i >= total) return;
  g += go; idx += io; dx += dxo;
  int iw = i % W, ih = (i / W) % H, plane = i / (W * H);
  long self_i = ih * W + iw;
  CT acc = 0;
  for (int kh = 0; kh < KH; ++kh) {
    int th = ih + PH - kh * DH;
    if (th < 0 || th % SH) continue;
    int oh = th / SH;
    if (oh >= OH) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int tw = iw + PW - kw * DW;
      if (tw < 0 || tw % SW) continue;
      int ow = tw / SW;
      if (ow >= OW) continue;
      long o = ((long)plane * OH + oh) * OW + ow;
      if (idx[o] == self_i) acc += LD(g, o);
    }
  }
  ST(dx, i, acc);
}
"""

_AVG_SRC = """
/* PyTorch's divisor of the window starting at (h0, w0): its part inside the padded input
   with count_include_pad (a ceil_mode window may overhang it), else its part inside the
   input. */
inline int avg_divisor(const int h0, const int w0, const int H, const int W, const int KH,
                       const int KW, const int PH, const int PW, const int include_pad) {
  const int h1 = min(h0 + KH, include_pad ? H + PH : H);
  const int w1 = min(w0 + KW, include_pad ? W + PW : W);
  const int hs = include_pad ? h0 : max(h0, 0), ws = include_pad ? w0 : max(w0, 0);
  return max((h1 - hs) * (w1 - ws), 1);
}

__kernel void avg_pool(__global const T* x, const long xo, __global T* y, const long yo,
                       const int total, const int H, const int W, const int OH, const int OW,
                       const int KH, const int KW, const int SH, const int SW, const int PH,
                       const int PW, const int include_pad) {
  int o = get_global_id(0);
  if (o >= total) return;
  x += xo; y += yo;
  int ow = o % OW, oh = (o / OW) % OH, plane = o / (OW * OH);
  int h0 = oh * SH - PH, w0 = ow * SW - PW;
  const __global T* xp = x + (long)plane * H * W;
  CT acc = 0;
  for (int ih = max(h0, 0); ih < min(h0 + KH, H); ++ih)
    for (int iw = max(w0, 0); iw < min(w0 + KW, W); ++iw) acc += LD(xp, ih * W + iw);
  ST(y, o, acc / (CT)avg_divisor(h0, w0, H, W, KH, KW, PH, PW, include_pad));
}

__kernel void avg_pool_backward(__global const T* g, const long go, __global T* dx,
                                const long dxo, const int total, const int H, const int W,
                                const int OH, const int OW, const int KH, const int KW,
                                const int SH, const int SW, const int PH, const int PW,
                                const int include_pad) {
  int i = get_global_id(0);
  if (i >= total) return;
  g += go; dx += dxo;
  int iw = i % W, ih = (i / W) % H, plane = i / (W * H);
  CT acc = 0;
  for (int kh = 0; kh < KH; ++kh) {
    int th = ih + PH - kh;
    if (th < 0 || th % SH) continue;
    int oh = th / SH;
    if (oh >= OH) continue;
    for (int kw = 0; kw < KW; ++kw) {
      int tw = iw + PW - kw;
      if (tw < 0 || tw % SW) continue;
      int ow = tw / SW;
      if (ow >= OW) continue;
      int count = avg_divisor(oh * SH - PH, ow * SW - PW, H, W, KH, KW, PH, PW, include_pad);
      acc += LD(g, ((long)plane * OH + oh) * OW + ow) / (CT)count;
    }
  }
  ST(dx, i, acc);
}

__kernel void adaptive_avg(__global const T* x, const long xo, __global T* y, const long yo,
                           const int total, const int H, const int W, const int OH,
                           const int OW) {
  int o = get_global_id(0);
  if (o >= total) return;
  x += xo; y += yo;
  int ow = o % OW, oh = (o / OW) % OH, plane = o / (OW * OH);
  int h0 = (oh * H) / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
  int w0 = (ow * W) / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
  const __global T* xp = x + (long)plane * H * W;
  CT acc = 0;
  for (int ih = h0; ih < h1; ++ih)
    for (int iw = w0; iw < w1; ++iw) acc += LD(xp, ih * W + iw);
  ST(y, o, acc / (CT)((h1 - h0) * (w1 - w0)));
}

__kernel void adaptive_avg_backward(__global const T* g, const long go, __global T* dx,
                                    const long dxo, const int total, const int H, const int W,
                                    const int OH, const int OW) {
  int i = get_global_id(0);
  if (i >= total) return;
  g += go; dx += dxo;
  int iw = i % W, ih = (i / W) % H, plane = i / (W * H);
  CT acc = 0;
  for (int oh = (ih * OH) / H; oh < OH && (oh * H) / OH <= ih; ++oh) {
    int h0 = (oh * H) / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
    if (ih < h0 || ih >= h1) continue;
    for (int ow = (iw * OW) / W; ow < OW && (ow * W) / OW <= iw; ++ow) {
      int w0 = (ow * W) / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
      if (iw < w0 || iw >= w1) continue;
      acc += LD(g, ((long)plane * OH + oh) * OW + ow) / (CT)((h1 - h0) * (w1 - w0));
    }
  }
  ST(dx, i, acc);
}
"""


_POOL_KERNELS = {
    "max": ("max_pool", "max_pool_backward"),
    "avg": ("avg_pool", "avg_pool_backward", "adaptive_avg", "adaptive_avg_backward"),
}


def _pooling_golden() -> list[tuple[str, tuple[str, str]]]:
    return [(f"pooling/{kind}-{dt}", (kind, dt)) for dt in FLOAT_DTYPES for kind in ("max", "avg")]


@kernel_family("ops.pooling", golden=_pooling_golden)
def pooling_family(kind: str, dtype: str) -> KernelSource:
    """The max (``kind="max"``) or average pooling program for ``dtype``: one work item per
    output (forward) or input (backward) element, launched with ``launch_1d``."""
    return KernelSource(_MAX_SRC if kind == "max" else _AVG_SRC, _POOL_KERNELS[kind], dtype)


def _windows(x: np.ndarray[Any, Any], k: tuple[int, int], s: tuple[int, int],
             p: tuple[int, int], d: tuple[int, int], out: tuple[int, int], fill: float
             ) -> np.ndarray[Any, Any]:
    """(N, C, OH, OW, KH, KW) strided view of the padded input (no copy but the pad)."""
    n, c, h, w = x.shape
    need_h = (out[0] - 1) * s[0] + d[0] * (k[0] - 1) + 1
    need_w = (out[1] - 1) * s[1] + d[1] * (k[1] - 1) + 1
    padded = np.full((n, c, max(need_h, h + p[0]), max(need_w, w + p[1])), fill, x.dtype)
    padded[:, :, p[0]:p[0] + h, p[1]:p[1] + w] = x
    st = padded.strides
    return np.lib.stride_tricks.as_strided(
        padded, (n, c, out[0], out[1], k[0], k[1]),
        (st[0], st[1], st[2] * s[0], st[3] * s[1], st[2] * d[0], st[3] * d[1]), writeable=False)


# NOTE [ Max pooling tiles on NumPy ]
# Windows that tile the input (stride = kernel, no padding or dilation: the usual 2x2 pool)
# are a reshape of the input, so the forward is one copy into (..., KH*KW) rows, an argmax and
# a max, and the flat indices come from a per-geometry table; their backward is a plain scatter
# (no input is in two windows), where the general path needs ``np.add.at``.


def _tiles(k: tuple[int, int], s: tuple[int, int], p: tuple[int, int], d: tuple[int, int],
           out: tuple[int, int], size: tuple[int, int]) -> bool:
    return (k == s and p == (0, 0) and d == (1, 1) and out[0] * k[0] <= size[0]
            and out[1] * k[1] <= size[1])


def _disjoint(k: tuple[int, int], s: tuple[int, int], p: tuple[int, int],
              d: tuple[int, int]) -> bool:
    """No two windows share an input and none holds padding only (no index -1)."""
    return p == (0, 0) and all(s[i] >= d[i] * (k[i] - 1) + 1 for i in range(2))


@functools.lru_cache(maxsize=32)
def _tile_index(k: tuple[int, int], out: tuple[int, int], w: int
                ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(each window's first flat index (OH, OW), each tap's offset from it (KH*KW,))."""
    rows, cols = np.arange(out[0], dtype=np.int64), np.arange(out[1], dtype=np.int64)
    first = rows[:, None] * k[0] * w + cols[None, :] * k[1]
    taps = (np.arange(k[0], dtype=np.int64)[:, None] * w + np.arange(k[1])[None, :]).reshape(-1)
    first.flags.writeable = taps.flags.writeable = False  # shared by every call (cached)
    return first, taps


def _max_pool_tiles(x: np.ndarray[Any, Any], k: tuple[int, int], out: tuple[int, int]
                    ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Running max and first argmax over the window's taps, elementwise over all windows at
    once (``argmax`` along a last axis of 4 costs a call per window, 3x slower)."""
    n, c, _, w = x.shape
    (kh, kw), (oh, ow) = k, out
    tiles = x[:, :, :oh * kh, :ow * kw].reshape(n, c, oh, kh, ow, kw)
    taps = np.ascontiguousarray(tiles.transpose(3, 5, 0, 1, 2, 4)).reshape(kh * kw, n, c, oh, ow)
    best = taps[0].copy()
    arg = np.zeros(best.shape, np.uint8 if kh * kw < 256 else np.int64)
    take = np.empty(best.shape, bool)
    for tap in range(1, kh * kw):
        # taps come in increasing order, so "the latest strictly larger tap" is a maximum
        np.greater(taps[tap], best, out=take)
        np.maximum(arg, take * arg.dtype.type(tap), out=arg)
        np.maximum(best, taps[tap], out=best)  # NaN propagates into best
    nan = np.isnan(best)
    if nan.any():  # the first NaN of a window wins, as np.argmax and the kernel
        arg[nan] = np.argmax(np.isnan(taps[:, nan]), axis=0)
    first, offsets = _tile_index(k, out, w)
    return best, first + offsets[arg]


def max_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, dilation: IntPair = 1, return_indices: bool = False,
               ceil_mode: bool = False) -> Any:
    """Max over windows; with ``return_indices`` also the flat ``h * W + w`` index (int64) of
    each maximum in its plane (the first one on ties, as PyTorch).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(16.0).reshape(1, 1, 4, 4))
        >>> max_pool2d(x, 2).to_host().reshape(-1).tolist()
        [5.0, 7.0, 13.0, 15.0]
    """
    op = "max_pool2d"
    key = None
    if isinstance(x, Tensor) and x.array is None:  # NOTE [ Remembered launches ] in ._launch
        key = launch_key(op, x.shape, x.dtype, x.offset, x.queue, kernel_size, stride,
                         padding, dilation, ceil_mode)
        entry = remembered(key)
        if entry is not None:
            y_t, idx_t = run_remembered(entry, x.queue, x)
            return (y_t, idx_t) if return_indices else y_t
    _check_input(op, x)
    k, s, p, d, out = _geometry(op, x.shape, kernel_size, stride, padding, dilation, ceil_mode)
    n, c, h, w = x.shape
    shape = (n, c, *out)
    if x.array is not None:
        if _tiles(k, s, p, d, out, (h, w)):
            y, idx = np_results(x, (x.dtype, "int64"), _max_pool_tiles, x.array, k, out)
        elif not return_indices:
            return np_result(x, x.dtype, _max_pool_values_np, x.array, k, s, p, d, out)
        else:
            y, idx = np_results(x, (x.dtype, "int64"), _max_pool_np, x.array, k, s, p, d, out)
        return (y, idx) if return_indices else y
    y_t = empty(x.queue, shape, x.dtype)
    idx_t = empty(x.queue, shape, "int64")
    kernel = pooling_family(x.context, "max", x.dtype).kernels["max_pool"]
    args = [*view_args(x, y_t, idx_t), *_ints(y_t.size, h, w, *out, *k, *s, *p, *d)]
    if y_t.size:
        grid, local = grid_1d(y_t.size, queue_facts(x.queue)[2])
        launch_values(x.queue, kernel, grid, local, args)
        remember(key, kernel, grid, local, args, [(2, y_t), (4, idx_t)], [0])
    return (y_t, idx_t) if return_indices else y_t


def max_pool2d_backward(grad: Tensor, indices: Tensor, input_shape: tuple[int, ...],
                        kernel_size: IntPair, stride: IntPair | None = None,
                        padding: IntPair = 0, dilation: IntPair = 1) -> Tensor:
    """The input gradient of :func:`max_pool2d`: each output's gradient goes to its maximum.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> g, idx = Tensor.from_host(q, np.ones((1, 1, 1, 1))), Tensor.from_host(q, np.array(
        ...     [[[[3]]]]))
        >>> max_pool2d_backward(g, idx, (1, 1, 2, 2), 2).to_host().reshape(-1).tolist()
        [0.0, 0.0, 0.0, 1.0]
    """
    op = "max_pool2d_backward"
    key = None
    if isinstance(grad, Tensor) and grad.array is None and isinstance(indices, Tensor):
        key = launch_key(op, grad.shape, grad.dtype, grad.offset, grad.queue, indices.shape,
                         indices.dtype, indices.offset, indices.queue, input_shape,
                         kernel_size, stride, padding, dilation)
        entry = remembered(key)
        if entry is not None:
            return run_remembered(entry, grad.queue, grad, indices)[0]
    _, _, h, w = input_shape
    k = _pair(op, "kernel_size", kernel_size, 1)
    s = k if stride is None else _pair(op, "stride", stride, 1)
    p, d = _pair(op, "padding", padding, 0), _pair(op, "dilation", dilation, 1)
    oh, ow = grad.shape[2:]
    if grad.array is not None and indices.array is not None:
        return np_result(grad, grad.dtype, _max_pool_backward_np, grad.array, indices.array,
                         tuple(input_shape), _disjoint(k, s, p, d))
    dx_t = empty(grad.queue, input_shape, grad.dtype)
    kernel = pooling_family(grad.context, "max", grad.dtype).kernels["max_pool_backward"]
    args = [*view_args(grad, indices, dx_t), *_ints(dx_t.size, h, w, oh, ow, *k, *s, *p, *d)]
    if dx_t.size:
        grid, local = grid_1d(dx_t.size, queue_facts(grad.queue)[2])
        launch_values(grad.queue, kernel, grid, local, args)
        remember(key, kernel, grid, local, args, [(4, dx_t)], [0, 2])
    return dx_t


def _ints(*values: int) -> list[Any]:
    """Integer kernel arguments in kernel form (``int`` parameters: ``np.int32``), as
    ``launch`` would pass them."""
    return [np.int32(v) for v in values]


def avg_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, count_include_pad: bool = True,
               ceil_mode: bool = False) -> Tensor:
    """Mean over windows, PyTorch's divisor: with ``count_include_pad`` the window's part
    inside the padded input (the whole window, except a ``ceil_mode`` window overhanging the
    padding), else its part inside the input.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(9.0).reshape(1, 1, 3, 3))
        >>> avg_pool2d(x, 2).to_host().reshape(-1).tolist()
        [2.0]
        >>> avg_pool2d(x, 2, ceil_mode=True).to_host().reshape(-1).tolist()  # 2 + 2, 1 + 1 wide
        [2.0, 3.5, 6.5, 8.0]
    """
    op = "avg_pool2d"
    _check_input(op, x)
    k, s, p, _, out = _geometry(op, x.shape, kernel_size, stride, padding, 1, ceil_mode)
    n, c, h, w = x.shape
    if x.array is not None:
        return np_result(x, x.dtype, _avg_pool_np, x.array, k, s, p, out,
                         bool(count_include_pad))
    y_t = empty(x.queue, (n, c, *out), x.dtype)
    kernel = pooling_family(x.context, "avg", x.dtype).kernels["avg_pool"]
    launch_1d(x.queue, kernel, y_t.size, *view_args(x, y_t),
              y_t.size, h, w, *out, *k, *s, *p, int(count_include_pad))
    return y_t


def _divisor(h: int, w: int, k: tuple[int, int], s: tuple[int, int], p: tuple[int, int],
             out: tuple[int, int], include_pad: bool) -> np.ndarray[Any, Any]:
    """(OH, OW) float64 divisors of :func:`avg_pool2d`'s windows."""
    rows = _avg_divisors(h, k[0], s[0], p[0], out[0], include_pad)
    cols = _avg_divisors(w, k[1], s[1], p[1], out[1], include_pad)
    return np.outer(rows, cols).astype(np.float64)


def avg_pool2d_backward(grad: Tensor, input_shape: tuple[int, ...], kernel_size: IntPair,
                        stride: IntPair | None = None, padding: IntPair = 0,
                        count_include_pad: bool = True, ceil_mode: bool = False) -> Tensor:
    """The input gradient of :func:`avg_pool2d` (the same arguments): each output's gradient
    divided by its window's divisor, added to every input of the window.

    Raises:
        ValueError: ``grad`` does not have the shape :func:`avg_pool2d` gives ``input_shape``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> g = Tensor.from_host(manager.default("cpu").queue, np.ones((1, 1, 2, 2)))
        >>> avg_pool2d_backward(g, (1, 1, 3, 3), 2, ceil_mode=True).to_host()[0, 0].tolist()
        [[0.25, 0.25, 0.5], [0.25, 0.25, 0.5], [0.5, 0.5, 1.0]]
    """
    op = "avg_pool2d_backward"
    check_tensor(op, grad, "grad")
    k, s, p, _, out = _geometry(op, tuple(input_shape), kernel_size, stride, padding, 1,
                                ceil_mode)
    n, c, h, w = input_shape
    if grad.shape != (n, c, *out):
        raise ValueError(f"{op}: grad must have shape {(n, c, *out)} (avg_pool2d of input "
                         f"{tuple(input_shape)} with ceil_mode={ceil_mode}), got {grad.shape}")
    oh, ow = out
    if grad.array is not None:
        return np_result(grad, grad.dtype, _avg_pool_backward_np, grad.array,
                         tuple(input_shape), k, s, p, out, bool(count_include_pad))
    dx_t = empty(grad.queue, input_shape, grad.dtype)
    kernel = pooling_family(grad.context, "avg", grad.dtype).kernels["avg_pool_backward"]
    launch_1d(grad.queue, kernel, dx_t.size, *view_args(grad, dx_t),
              dx_t.size, h, w, oh, ow, *k, *s, *p, int(count_include_pad))
    return dx_t


def _adaptive_bounds(size: int, out: int) -> list[tuple[int, int]]:
    return [((i * size) // out, -(-((i + 1) * size) // out)) for i in range(out)]


def adaptive_avg_pool2d(x: Tensor, output_size: IntPair) -> Tensor:
    """Mean pooling to ``output_size`` with PyTorch's window bounds (1 = global pooling).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(8.0).reshape(1, 2, 2, 2))
        >>> adaptive_avg_pool2d(x, 1).to_host().reshape(-1).tolist()
        [1.5, 5.5]
    """
    op = "adaptive_avg_pool2d"
    check_tensor(op, x)
    if x.ndim != 4:
        raise ValueError(f"{op}: input must be 4-D (N, C, H, W), got shape {x.shape}")
    oh, ow = _pair(op, "output_size", output_size, 1)
    n, c, h, w = x.shape
    if x.array is not None:
        return np_result(x, x.dtype, _adaptive_avg_np, x.array, oh, ow)
    y_t = empty(x.queue, (n, c, oh, ow), x.dtype)
    kernel = pooling_family(x.context, "avg", x.dtype).kernels["adaptive_avg"]
    launch_1d(x.queue, kernel, y_t.size, *view_args(x, y_t),
              y_t.size, h, w, oh, ow)
    return y_t


def adaptive_avg_pool2d_backward(grad: Tensor, input_shape: tuple[int, ...]) -> Tensor:
    """The input gradient of :func:`adaptive_avg_pool2d`."""
    _, _, h, w = input_shape
    oh, ow = grad.shape[2:]
    if grad.array is not None:
        return np_result(grad, grad.dtype, _adaptive_avg_backward_np, grad.array,
                         tuple(input_shape))
    dx_t = empty(grad.queue, input_shape, grad.dtype)
    kernel = pooling_family(grad.context, "avg", grad.dtype).kernels["adaptive_avg_backward"]
    launch_1d(grad.queue, kernel, dx_t.size, *view_args(grad, dx_t),
              dx_t.size, h, w, oh, ow)
    return dx_t


def global_avg_pool2d(x: Tensor) -> Tensor:
    """Mean over H and W, keeping them as size 1: ``(N, C, 1, 1)``."""
    return adaptive_avg_pool2d(x, 1)


# -- NumPy backend: each op's work is one function of its arrays (NOTE [ NumPy work under a
# recorder ] in netcl.core.recording) ---------------------------------------------------------

Pair = tuple[int, int]


def _max_pool_values_np(x: Any, k: Pair, s: Pair, p: Pair, d: Pair, out: Pair) -> Any:
    win = _windows(x, k, s, p, d, out, -np.inf)
    flat = win.reshape(*win.shape[:4], k[0] * k[1])  # not -1: an empty batch has no size
    arg = np.argmax(flat, axis=-1)
    return np.take_along_axis(flat, arg[..., None], -1)[..., 0]


def _max_pool_np(x: Any, k: Pair, s: Pair, p: Pair, d: Pair, out: Pair) -> tuple[Any, Any]:
    h, w = x.shape[2:]
    win = _windows(x, k, s, p, d, out, -np.inf)
    flat = win.reshape(*win.shape[:4], k[0] * k[1])
    arg = np.argmax(flat, axis=-1)
    y = np.take_along_axis(flat, arg[..., None], -1)[..., 0]
    # As the kernel: the first in-range element wins a tie with padding (both -inf), and a
    # window of padding only gets index -1 (its gradient goes nowhere).
    inside = _windows(np.ones((1, 1, h, w), np.int8), k, s, p, d, out, 0)
    valid = inside.reshape(*inside.shape[:4], k[0] * k[1]).astype(bool)
    chosen = np.take_along_axis(valid, arg[..., None], -1)[..., 0]
    arg = np.where(chosen, arg, np.argmax(valid, axis=-1))
    kh, kw = np.divmod(arg, k[1])
    oh = np.arange(out[0])[:, None] * s[0] - p[0]
    ow = np.arange(out[1])[None, :] * s[1] - p[1]
    idx = np.where(valid.any(axis=-1), (oh + kh * d[0]) * w + (ow + kw * d[1]), -1)
    return y, idx


def _max_pool_backward_np(g: Any, indices: Any, input_shape: tuple[int, ...],
                          disjoint: bool) -> Any:
    n, c, h, w = input_shape
    oh, ow = g.shape[2:]
    if disjoint and (indices.size == 0 or indices.min() >= 0):
        # every input is in at most one window and none is padding: a plain scatter
        dx = np.zeros(n * c * h * w, g.dtype)
        planes = np.arange(0, n * c * h * w, h * w).reshape(n, c, 1, 1)
        dx[indices + planes] = g
        return dx.reshape(input_shape)
    dx = np.zeros((n * c, h * w), g.dtype)
    rows = np.repeat(np.arange(n * c), oh * ow)
    flat = indices.reshape(-1)
    hit = flat >= 0  # -1: a window of padding only, whose gradient goes nowhere
    np.add.at(dx, (rows[hit], flat[hit]), g.reshape(-1)[hit])
    return dx.reshape(input_shape)


def _avg_pool_np(x: Any, k: Pair, s: Pair, p: Pair, out: Pair, include_pad: bool) -> Any:
    h, w = x.shape[2:]
    win = _windows(x, k, s, p, (1, 1), out, 0.0)
    total = win.sum(axis=(-1, -2), dtype=np.float64)
    return total / _divisor(h, w, k, s, p, out, include_pad)


def _avg_pool_backward_np(g: Any, input_shape: tuple[int, ...], k: Pair, s: Pair, p: Pair,
                          out: Pair, include_pad: bool) -> Any:
    n, c, h, w = input_shape
    oh, ow = out
    dx = np.zeros((n, c, h + 2 * p[0] + k[0], w + 2 * p[1] + k[1]), np.float64)
    gs = g.astype(np.float64) / _divisor(h, w, k, s, p, out, include_pad)
    for kh in range(k[0]):
        for kw in range(k[1]):
            dx[:, :, kh:kh + oh * s[0]:s[0], kw:kw + ow * s[1]:s[1]] += gs
    return dx[:, :, p[0]:p[0] + h, p[1]:p[1] + w]


def _adaptive_avg_np(x: Any, oh: int, ow: int) -> Any:
    h, w = x.shape[2:]
    xa = x.astype(np.float64)
    rows = np.stack([xa[:, :, a:b].mean(axis=2) for a, b in _adaptive_bounds(h, oh)], 2)
    return np.stack([rows[..., a:b].mean(axis=3) for a, b in _adaptive_bounds(w, ow)], 3)


def _adaptive_avg_backward_np(g: Any, input_shape: tuple[int, ...]) -> Any:
    _, _, h, w = input_shape
    oh, ow = g.shape[2:]
    dx = np.zeros(input_shape, np.float64)
    ga = g.astype(np.float64)
    for i, (h0, h1) in enumerate(_adaptive_bounds(h, oh)):
        for j, (w0, w1) in enumerate(_adaptive_bounds(w, ow)):
            dx[:, :, h0:h1, w0:w1] += (ga[:, :, i, j] / ((h1 - h0) * (w1 - w0)))[..., None, None]
    return dx
