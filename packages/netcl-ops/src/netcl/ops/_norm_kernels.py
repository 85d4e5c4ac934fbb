"""The batch and layer norm kernel program (one per dtype) and the batch-norm launches.

# NOTE [ Batch norm kernels ]
# Statistics (forward: mean and 1/std; backward: sum(g) and sum(g * xhat)) of a channel's
# M = N * HW elements, HW contiguous per image, in one launch, ``bn_stats``: G work-groups
# of 64..GROUP items per channel (about 16 elements per item; G chosen so that C * G fills the
# device, about 8 groups per compute unit), group p summing the elements p * chunk ..
# (p + 1) * chunk of the channel in one pass: the forward sums (x - K) and (x - K)^2 with
# K the channel's first element (a shift that keeps the one-pass variance accurate far from
# 0), the backward g and g * (x - mean); (n, h) advance by the group size without a division
# per element; one local-memory tree for both sums, then (C, G, 2) partials. The channel's
# last group (NOTE [ Last group merges ] in ._split_sync) adds its G partials in order
# (bitwise reproducible), then writes the mean, 1/std and the running statistics, or the
# weight and bias gradients (in T: no cast launch afterwards). Until the H200 measurements
# of 2026-11-29 that merge was a second launch, ``bn_finalize`` (6-8 us of device time on an
# H100 whatever the size: BN backward of 128x512x4x4 was 0.77x PyTorch).
# Normalizing (``bn_apply``) and the input gradient (``bn_backward_dx``) are 2-D launches,
# (HW or HW / 4, N * C): the channel comes from the plane index once per item, and where HW
# and every offset are multiples of 4 each item moves a 4-vector.

# NOTE [ Layer norm on CPU devices ]
# Layer norm rows are short (64..1024 elements in transformers). On GPUs one work-group of
# GROUP items per row (``ln_forward``, ``ln_backward_dx``) reduces with a local-memory tree;
# on OpenCL CPU devices the same launch runs GROUP mostly idle items and ~2 * log2(GROUP)
# barriers per row, which is slow (Intel CPU: ~29 ms for 2048 rows of 64). There
# ``ln_forward_row`` / ``ln_backward_dx_row`` give each work-item a whole row and loop over
# it serially (:func:`ln_per_row` picks them by device type): no barriers, no local memory.

# NOTE [ Layer norm rows in warps ]
# On GPUs a row of D <= LNW_MAX (1024) elements gets one warp of 32 lanes (``ln_forward_warp``,
# ``ln_backward_dx_warp``; LNW_ROWS = 4 rows per work-group of 128), the row read once into
# registers (lane l: elements l, l + 32, ...; up to 32 each, guarded, fully unrolled), its sums
# by a butterfly of ``shfl.sync.bfly`` on NVIDIA (float32/float16; float64 and other devices
# exchange through local memory, every lane of the group reaching every exchange) and written
# once. One work-group of GROUP items per row (``ln_forward``, ``ln_backward_dx``: local-memory
# trees of 8 barriers per sum, 1.5 elements per item at D = 384) ran 29 and 32 us per launch
# at 8192 x 384 on an H200 (25-38 MB moved: ~7-11 us at copy bandwidth). Longer rows keep them.
#
# NOTE [ Layer norm parameter gradients ]
# dweight and dbias are column sums over all R rows (R = batch x sequence: 8192 rows of 384 in
# the charlm GPT). Until 2026-11-29 one work-item per column looped over the R rows: 384
# work-items on a GPU, 850 us per launch on an H200, 11 of the GPT step's 36 ms (kernel table
# of bench_gpt_step --kernels). ``ln_backward_params`` now splits the rows into P chunks
# (:func:`ln_param_splits`: about 8 work-groups per compute unit, at least 16 rows per item) and
# merges them in one launch, in a fixed order (bitwise reproducible).
"""

from __future__ import annotations

from typing import Any

from netcl.core.capabilities import device_type_name
from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.kernels.family import Geometry, KernelSource, kernel_family
from netcl.core.kernels.primitives import launch
from netcl.core.tensor import Tensor

from ._launch import view_args
from ._split_sync import fence_defines
from ._warp_shuffle import SHUFFLE_SOURCE

__all__ = ["GROUP", "LNP_COLUMNS", "LNP_ROWS", "LNW_ROWS", "bn_geometry", "bn_lanes",
           "bn_launch_2d", "bn_splits", "ln_param_splits", "ln_per_row", "ln_warp_rows",
           "normalization_family"]

GROUP = 256
_GROUPS_PER_CU = 8
LNP_COLUMNS, LNP_ROWS = 32, 8  # ln_backward_params' work-group: columns x row lanes

_SRC = """
#define GROUP 256
// Every tensor argument comes with its element offset (x, xo): each kernel first moves its
// pointers there, so views with an offset work as in every other op.
#define V4_(t) t##4
#define V4(t) V4_(t)
#define CVT4_(t) convert_##t##4
#define CVT4(t) CVT4_(t)

// Sum of LD(x, base(j)) over j < count, reduced across the work-group.
inline CT group_sum(CT v, __local CT* acc) {
  int lid = get_local_id(0);
  acc[lid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = GROUP / 2; s > 0; s >>= 1) {
    if (lid < s) acc[lid] += acc[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  CT r = acc[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

// Both sums across a work-group of L (a power of two <= GROUP) items: one tree.
inline void group_sum2(CT* a, CT* b, __local CT* acc, __local CT* acc2, const int L) {
  const int lid = get_local_id(0);
  acc[lid] = *a;
  acc2[lid] = *b;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = L / 2; s > 0; s >>= 1) {
    if (lid < s) { acc[lid] += acc[lid + s]; acc2[lid] += acc2[lid + s]; }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  *a = acc[0];
  *b = acc2[0];
}

// G work-groups of L items per channel, one pass: partial sums (forward: x - K, (x - K)^2;
// backward: g, g * (x - mean)) of elements [p * chunk, (p + 1) * chunk) of its N * HW. The
// channel's last group to finish (NOTE [ Last group merges ] in ._split_sync; G = 1: the only
// one) adds the G partials in order and finishes the channel: forward mean, 1/std and the
// running statistics; backward sum_g, sum_gx (= sum g * xhat) and the weight and bias
// gradients in T.
__kernel void bn_stats(__global const T* x, const long xo, __global const T* g, const long go,
                       __global CT* mean, const long meano, volatile __global CT* part,
                       const long parto, __global CT* invstd, const long invstdo,
                       __global T* run_mean, const long run_meano, __global T* run_var,
                       const long run_varo, __global CT* sum_g, const long sum_go,
                       __global CT* sum_gx, const long sum_gxo, __global T* dw, const long dwo,
                       __global T* db, const long dbo, volatile __global int* count,
                       const int N, const int C, const int HW, const int G, const int chunk,
                       const CT eps, const CT momentum, const int update_running,
                       const int backward) {
  __local CT acc[GROUP], acc2[GROUP];
  x += xo; g += go; mean += meano; part += parto; invstd += invstdo; run_mean += run_meano;
  run_var += run_varo; sum_g += sum_go; sum_gx += sum_gxo; dw += dwo; db += dbo;
  const int lid = get_local_id(0), L = get_local_size(0);
  const int c = get_group_id(0) / G, p = get_group_id(0) - c * G;
  const int M = N * HW;
  const int j0 = p * chunk + lid, j1 = min(M, (p + 1) * chunk);
  int n = j0 / HW, h = j0 - n * HW;
  const int dn = L / HW, dh = L - dn * HW;
  CT s1 = (CT)0, s2 = (CT)0;
  if (backward) {
    const CT mu = mean[c];
    for (int j = j0; j < j1; j += L) {
      const long i = ((long)n * C + c) * HW + h;
      const CT gv = LD(g, i);
      s1 += gv;
      s2 += gv * ((CT)LD(x, i) - mu);
      n += dn; h += dh;
      if (h >= HW) { h -= HW; ++n; }
    }
  } else {
    const CT K = LD(x, (long)c * HW);
    for (int j = j0; j < j1; j += L) {
      const CT d = (CT)LD(x, ((long)n * C + c) * HW + h) - K;
      s1 += d;
      s2 += d * d;
      n += dn; h += dh;
      if (h >= HW) { h -= HW; ++n; }
    }
  }
  group_sum2(&s1, &s2, acc, acc2, L);
  if (lid != 0) return;
  if (G > 1) {
    part[2 * get_group_id(0)] = s1;
    part[2 * get_group_id(0) + 1] = s2;
    GL_FENCE();
    if (atomic_inc(&count[c]) != G - 1) return;
    GL_FENCE();
    s1 = (CT)0;
    s2 = (CT)0;
    for (int q = 0; q < G; ++q) {
      s1 += part[2 * (c * G + q)];
      s2 += part[2 * (c * G + q) + 1];
    }
    count[c] = 0;
  }
  if (backward) {  // invstd is the forward's
    const CT inv = invstd[c];
    sum_g[c] = s1;
    sum_gx[c] = s2 * inv;
    ST(dw, c, s2 * inv);
    ST(db, c, s1);
    return;
  }
  const CT d = s1 / M;
  const CT var = max(s2 / M - d * d, (CT)0);
  const CT mu = (CT)LD(x, (long)c * HW) + d;
  mean[c] = mu;
  invstd[c] = rsqrt(var + eps);
  if (update_running) {
    CT unbiased = M > 1 ? var * M / (M - 1) : var;
    ST(run_mean, c, ((CT)1 - momentum) * LD(run_mean, c) + momentum * mu);
    ST(run_var, c, ((CT)1 - momentum) * LD(run_var, c) + momentum * unbiased);
  }
}

// y = (x - mean) * invstd * w + b (optionally ReLU); eval mode reads the running variance.
// 2-D: (HW, or HW / 4 4-vectors with vec, over N * C planes).
__kernel void bn_apply(__global const T* x, const long xo, __global T* y, const long yo,
                       __global const CT* mean, const long meano, __global const CT* invstd,
                       const long invstdo, __global const T* run_mean, const long run_meano,
                       __global const T* run_var, const long run_varo, __global const T* w,
                       const long wo, __global const T* b, const long bo, const int planes,
                       const int C, const int HW, const CT eps, const int use_running,
                       const int affine, const int relu, const int vec) {
  x += xo; y += yo; mean += meano; invstd += invstdo; run_mean += run_meano;
  run_var += run_varo; w += wo; b += bo;
  const int plane = get_global_id(1), k = get_global_id(0);
  if (plane >= planes || k >= (vec ? HW >> 2 : HW)) return;
  const int c = plane % C;
  const CT mu = use_running ? (CT)LD(run_mean, c) : mean[c];
  const CT inv = use_running ? rsqrt((CT)LD(run_var, c) + eps) : invstd[c];
  const CT sc = affine ? inv * (CT)LD(w, c) : inv;
  const CT sh = affine ? (CT)LD(b, c) : (CT)0;
  const long base = (long)plane * HW;
  if (vec) {
    V4(CT) v = (LD4(x + base, k) - mu) * sc + sh;
    if (relu) v = fmax(v, (V4(CT))0);
    ST4(y + base, k, v);
  } else {
    CT v = ((CT)LD(x, base + k) - mu) * sc + sh;
    if (relu) v = fmax(v, (CT)0);
    ST(y, base + k, v);
  }
}

// dx = w * invstd * (g - sum_g / M - xhat * sum_gx / M), 2-D as bn_apply.
__kernel void bn_backward_dx(__global const T* g, const long go, __global const T* x,
                             const long xo, __global T* dx, const long dxo,
                             __global const CT* mean, const long meano,
                             __global const CT* invstd, const long invstdo,
                             __global const CT* sum_g, const long sum_go,
                             __global const CT* sum_gx, const long sum_gxo, __global const T* w,
                             const long wo, const int planes, const int C, const int HW,
                             const int M, const int affine, const int vec) {
  g += go; x += xo; dx += dxo; mean += meano; invstd += invstdo; sum_g += sum_go;
  sum_gx += sum_gxo; w += wo;
  const int plane = get_global_id(1), k = get_global_id(0);
  if (plane >= planes || k >= (vec ? HW >> 2 : HW)) return;
  const int c = plane % C;
  const CT inv = invstd[c], mu = mean[c];
  const CT scale = affine ? (CT)LD(w, c) * inv : inv;
  const CT mg = sum_g[c] / M, mgx = sum_gx[c] / M;
  const long base = (long)plane * HW;
  if (vec) {
    const V4(CT) xhat = (LD4(x + base, k) - mu) * inv;
    ST4(dx + base, k, scale * (LD4(g + base, k) - mg - xhat * mgx));
  } else {
    const CT xhat = ((CT)LD(x, base + k) - mu) * inv;
    ST(dx, base + k, scale * ((CT)LD(g, base + k) - mg - xhat * mgx));
  }
}

// One work-group per row of D elements.
__kernel void ln_forward(__global const T* x, const long xo, __global T* y, const long yo,
                         __global CT* mean, const long meano, __global CT* rstd,
                         const long rstdo, __global const T* w, const long wo,
                         __global const T* b, const long bo, const int D, const CT eps,
                         const int affine) {
  __local CT acc[GROUP];
  x += xo; y += yo; mean += meano; rstd += rstdo; w += wo; b += bo;
  int r = get_group_id(0), lid = get_local_id(0);
  const __global T* xr = x + (long)r * D;
  CT s = (CT)0;
  for (int j = lid; j < D; j += GROUP) s += LD(xr, j);
  CT mu = group_sum(s, acc) / D;
  CT q = (CT)0;
  for (int j = lid; j < D; j += GROUP) { CT d = LD(xr, j) - mu; q += d * d; }
  CT inv = rsqrt(group_sum(q, acc) / D + eps);
  for (int j = lid; j < D; j += GROUP) {
    CT v = ((CT)LD(xr, j) - mu) * inv;
    if (affine) v = v * (CT)LD(w, j) + (CT)LD(b, j);
    ST(y, (long)r * D + j, v);
  }
  if (lid == 0) { mean[r] = mu; rstd[r] = inv; }
}

__kernel void ln_backward_dx(__global const T* g, const long go, __global const T* x,
                             const long xo, __global T* dx, const long dxo,
                             __global const CT* mean, const long meano, __global const CT* rstd,
                             const long rstdo, __global const T* w, const long wo, const int D,
                             const int affine) {
  __local CT acc[GROUP];
  g += go; x += xo; dx += dxo; mean += meano; rstd += rstdo; w += wo;
  int r = get_group_id(0), lid = get_local_id(0);
  long base = (long)r * D;
  CT mu = mean[r], inv = rstd[r];
  CT s1 = (CT)0, s2 = (CT)0;
  for (int j = lid; j < D; j += GROUP) {
    CT dxh = (CT)LD(g, base + j) * (affine ? (CT)LD(w, j) : (CT)1);
    s1 += dxh;
    s2 += dxh * ((CT)LD(x, base + j) - mu) * inv;
  }
  CT m1 = group_sum(s1, acc) / D;
  CT m2 = group_sum(s2, acc) / D;
  for (int j = lid; j < D; j += GROUP) {
    CT xhat = ((CT)LD(x, base + j) - mu) * inv;
    CT dxh = (CT)LD(g, base + j) * (affine ? (CT)LD(w, j) : (CT)1);
    ST(dx, base + j, inv * (dxh - m1 - xhat * m2));
  }
}

// CPU devices (NOTE [ Layer norm on CPU devices ]): one work-item per row, serial loops.
__kernel void ln_forward_row(__global const T* x, const long xo, __global T* y, const long yo,
                             __global CT* mean, const long meano, __global CT* rstd,
                             const long rstdo, __global const T* w, const long wo,
                             __global const T* b, const long bo, const int R, const int D,
                             const CT eps, const int affine) {
  x += xo; y += yo; mean += meano; rstd += rstdo; w += wo; b += bo;
  const int r = get_global_id(0);
  if (r >= R) return;
  const __global T* xr = x + (long)r * D;
  __global T* yr = y + (long)r * D;
  CT s = (CT)0;
  for (int j = 0; j < D; ++j) s += LD(xr, j);
  const CT mu = s / D;
  CT q = (CT)0;
  for (int j = 0; j < D; ++j) { const CT d = (CT)LD(xr, j) - mu; q += d * d; }
  const CT inv = rsqrt(q / D + eps);
  if (affine) {
    for (int j = 0; j < D; ++j) {
      ST(yr, j, ((CT)LD(xr, j) - mu) * inv * (CT)LD(w, j) + (CT)LD(b, j));
    }
  } else {
    for (int j = 0; j < D; ++j) ST(yr, j, ((CT)LD(xr, j) - mu) * inv);
  }
  mean[r] = mu;
  rstd[r] = inv;
}

__kernel void ln_backward_dx_row(__global const T* g, const long go, __global const T* x,
                                 const long xo, __global T* dx, const long dxo,
                                 __global const CT* mean, const long meano,
                                 __global const CT* rstd, const long rstdo, __global const T* w,
                                 const long wo, const int R, const int D, const int affine) {
  g += go; x += xo; dx += dxo; mean += meano; rstd += rstdo; w += wo;
  const int r = get_global_id(0);
  if (r >= R) return;
  const long base = (long)r * D;
  const CT mu = mean[r], inv = rstd[r];
  CT s1 = (CT)0, s2 = (CT)0;
  for (int j = 0; j < D; ++j) {
    const CT dxh = (CT)LD(g, base + j) * (affine ? (CT)LD(w, j) : (CT)1);
    s1 += dxh;
    s2 += dxh * ((CT)LD(x, base + j) - mu);
  }
  const CT m1 = s1 / D, m2 = s2 * inv / D;
  for (int j = 0; j < D; ++j) {
    const CT xhat = ((CT)LD(x, base + j) - mu) * inv;
    const CT dxh = (CT)LD(g, base + j) * (affine ? (CT)LD(w, j) : (CT)1);
    ST(dx, base + j, inv * (dxh - m1 - xhat * m2));
  }
}

// GPUs, rows of up to LNW_MAX elements (NOTE [ Layer norm rows in warps ]): one warp of 32
// lanes per row, LNW_ROWS rows per work-group, the row in registers (lane l holds elements
// l, l + 32, ...), sums by a butterfly (shfl.sync.bfly on NVIDIA, local memory elsewhere).
#define LNW_ROWS 4
#define LNW_NPL 32
#define XOR_SCRATCH (LNW_ROWS * 32)
""" + SHUFFLE_SOURCE + """\
#define LNW_SUM(a) \\
  do { for (int o_ = 16; o_ > 0; o_ >>= 1) (a) += XOR((a), o_); } while (0)

__kernel void ln_forward_warp(__global const T* x, const long xo, __global T* y, const long yo,
                              __global CT* mean, const long meano, __global CT* rstd,
                              const long rstdo, __global const T* w, const long wo,
                              __global const T* b, const long bo, const int R, const int D,
                              const CT eps, const int affine) {
  XOR_LOCALS
  x += xo; y += yo; mean += meano; rstd += rstdo; w += wo; b += bo;
  const int l = get_local_id(0), lane = l & 31;
  const int r = get_group_id(0) * LNW_ROWS + (l >> 5);
  const int live = r < R;
  const __global T* xr = x + (long)r * D;
  CT v[LNW_NPL];
  CT s = (CT)0;
#pragma unroll
  for (int k = 0; k < LNW_NPL; ++k) {
    const int j = lane + 32 * k;
    v[k] = live && j < D ? (CT)LD(xr, j) : (CT)0;
    s += v[k];
  }
  LNW_SUM(s);
  const CT mu = s / D;
  CT q = (CT)0;
#pragma unroll
  for (int k = 0; k < LNW_NPL; ++k) {
    const CT d = lane + 32 * k < D ? v[k] - mu : (CT)0;
    q += d * d;
  }
  LNW_SUM(q);
  const CT inv = rsqrt(q / D + eps);
  if (!live) return;
#pragma unroll
  for (int k = 0; k < LNW_NPL; ++k) {
    const int j = lane + 32 * k;
    if (j < D) {
      CT t = (v[k] - mu) * inv;
      if (affine) t = t * (CT)LD(w, j) + (CT)LD(b, j);
      ST(y, (long)r * D + j, t);
    }
  }
  if (lane == 0) { mean[r] = mu; rstd[r] = inv; }
}

__kernel void ln_backward_dx_warp(__global const T* g, const long go, __global const T* x,
                                  const long xo, __global T* dx, const long dxo,
                                  __global const CT* mean, const long meano,
                                  __global const CT* rstd, const long rstdo,
                                  __global const T* w, const long wo, const int R, const int D,
                                  const int affine) {
  XOR_LOCALS
  g += go; x += xo; dx += dxo; mean += meano; rstd += rstdo; w += wo;
  const int l = get_local_id(0), lane = l & 31;
  const int r = get_group_id(0) * LNW_ROWS + (l >> 5);
  const int live = r < R;
  const long base = (long)r * D;
  const CT mu = live ? mean[r] : (CT)0, inv = live ? rstd[r] : (CT)0;
  CT dh[LNW_NPL], xh[LNW_NPL];
  CT s1 = (CT)0, s2 = (CT)0;
#pragma unroll
  for (int k = 0; k < LNW_NPL; ++k) {
    const int j = lane + 32 * k;
    const int in = live && j < D;
    dh[k] = in ? (CT)LD(g, base + j) * (affine ? (CT)LD(w, j) : (CT)1) : (CT)0;
    xh[k] = in ? ((CT)LD(x, base + j) - mu) * inv : (CT)0;
    s1 += dh[k];
    s2 += dh[k] * xh[k];
  }
  LNW_SUM(s1);
  LNW_SUM(s2);
  if (!live) return;
  const CT m1 = s1 / D, m2 = s2 / D;
#pragma unroll
  for (int k = 0; k < LNW_NPL; ++k) {
    const int j = lane + 32 * k;
    if (j < D) ST(dx, base + j, inv * (dh[k] - m1 - xh[k] * m2));
  }
}

// Layer norm's weight and bias gradients (NOTE [ Layer norm parameter gradients ]): per column
// j, sum_r g * xhat and sum_r g. Work-groups of LNP_C columns x LNP_R row lanes; group (cx, p)
// sums rows [p * chunk, min(R, (p + 1) * chunk)) of columns cx * LNP_C.. (loads coalesced
// across the column lanes), the row lanes fold in order, and with P > 1 row chunks the column
// tile's last group adds the P partials in order (NOTE [ Last group merges ] in ._split_sync).
// No early return after the ticket's barrier: with ``if (!last) return;`` there, PoCL 3.0
// (pthread) stored a stale sum instead of the merged one (seen in the tests).
#define LNP_C 32
#define LNP_R 8
__kernel void ln_backward_params(__global const T* g, const long go, __global const T* x,
                                 const long xo, __global const CT* mean, const long meano,
                                 __global const CT* rstd, const long rstdo, __global T* gw,
                                 const long gwo, __global T* gb, const long gbo,
                                 volatile __global CT* part, const long parto,
                                 volatile __global int* count, const int R, const int D,
                                 const int P, const int chunk) {
  __local CT aw[LNP_R * LNP_C], ab[LNP_R * LNP_C];
  __local int last;
  g += go; x += xo; mean += meano; rstd += rstdo; gw += gwo; gb += gbo; part += parto;
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int cx = get_group_id(0), p = get_group_id(1);
  const int j = cx * LNP_C + tx;
  const int r1 = min(R, (p + 1) * chunk);
  CT sw = (CT)0, sb = (CT)0;
  if (j < D) {
    for (int r = p * chunk + ty; r < r1; r += LNP_R) {
      const long i = (long)r * D + j;
      const CT gv = LD(g, i);
      sb += gv;
      sw += gv * ((CT)LD(x, i) - mean[r]) * rstd[r];
    }
  }
  aw[ty * LNP_C + tx] = sw;
  ab[ty * LNP_C + tx] = sb;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (ty == 0) {
    sw = aw[tx];
    sb = ab[tx];
    for (int k = 1; k < LNP_R; ++k) { sw += aw[k * LNP_C + tx]; sb += ab[k * LNP_C + tx]; }
    if (P > 1 && j < D) {
      part[2 * ((long)p * D + j)] = sw;
      part[2 * ((long)p * D + j) + 1] = sb;
      GL_FENCE();
    }
  }
  int finish = P == 1;
  if (P > 1) {
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    if (tx == 0 && ty == 0) last = atomic_inc(&count[cx]) == P - 1;
    barrier(CLK_LOCAL_MEM_FENCE);
    finish = last;
    if (finish) {
      GL_FENCE();
      if (ty == 0 && j < D) {
        CT mw = (CT)0, mb = (CT)0;
        for (int q = 0; q < P; ++q) {
          mw += part[2 * ((long)q * D + j)];
          mb += part[2 * ((long)q * D + j) + 1];
        }
        sw = mw;
        sb = mb;
      }
      if (tx == 0 && ty == 0) count[cx] = 0;
    }
  }
  if (finish && ty == 0 && j < D) {
    ST(gw, j, sw);
    ST(gb, j, sb);
  }
}
"""

_NORM_KERNELS = ("bn_stats", "bn_apply", "bn_backward_dx", "ln_forward",
                 "ln_backward_dx", "ln_forward_row", "ln_backward_dx_row", "ln_backward_params",
                 "ln_forward_warp", "ln_backward_dx_warp")


def _vector_defines(dtype: str) -> str:
    """``LD4``/``ST4``: the 4-vector at ``p + 4 * i`` in the compute type (``p`` 4-aligned)."""
    if dtype == "float16":
        return ("#define LD4(p, i) vload_half4((i), (p))\n"
                "#define ST4(p, i, v) vstore_half4((v), (i), (p))\n")
    return ("#define LD4(p, i) CVT4(CT)(((__global const V4(T)*)(p))[(i)])\n"
            "#define ST4(p, i, v) (((__global V4(T)*)(p))[(i)] = CVT4(T)(v))\n")


def _normalization_golden() -> list[tuple[str, tuple[str]]]:
    return [(f"normalization/norm-{dt}", (dt,)) for dt in FLOAT_DTYPES]


@kernel_family("ops.normalization", golden=_normalization_golden)
def normalization_family(dtype: str, ptx: bool = False) -> KernelSource:
    """The batch and layer norm program for ``dtype``: the statistics kernels run work-groups
    of ``GROUP`` items (per channel part, or per row), the elementwise ones 2-D or 1-D;
    ``ptx``: the device-wide fence in inline PTX (NVIDIA; :func:`._split_sync.ptx_fence`)."""
    return KernelSource(_vector_defines(dtype) + fence_defines(ptx)
                        + f"#define SHFL_PTX {int(ptx and dtype != 'float64')}\n" + _SRC,
                        _NORM_KERNELS, dtype, Geometry(local=GROUP))


_units: dict[Any, int] = {}


def _compute_units(device: Any) -> int:
    """``device.max_compute_units`` (at least 1), read once per device."""
    try:
        return _units[device]
    except KeyError:
        units = _units[device] = max(1, int(device.max_compute_units))
        return units
    except TypeError:  # an unhashable stand-in
        return max(1, int(device.max_compute_units))


def bn_splits(device: Any, c: int, m: int) -> tuple[int, int]:
    """``(G, chunk)``: work-groups per channel for ``bn_stats`` and the elements each sums
    (NOTE [ Batch norm kernels ]): about 8 groups per compute unit over all channels, at
    least 16 elements per item.

    Examples:
        >>> from types import SimpleNamespace as NS
        >>> bn_splits(NS(max_compute_units=132), 64, 128 * 1024)
        (17, 7711)
    """
    units = _compute_units(device)
    groups = max(1, min(-(-_GROUPS_PER_CU * units // max(c, 1)), m // (GROUP * 16)))
    return groups, -(-m // groups)


def ln_param_splits(device: Any, rows: int, d: int) -> tuple[int, int]:
    """``(P, chunk)``: row chunks of ``ln_backward_params`` and the rows each sums (NOTE
    [ Layer norm parameter gradients ]): about 8 work-groups per compute unit over the column
    tiles, at least 16 rows per row lane.

    Examples:
        >>> from types import SimpleNamespace as NS
        >>> ln_param_splits(NS(max_compute_units=132), 8192, 384)
        (64, 128)
        >>> ln_param_splits(NS(max_compute_units=2), 7, 33)
        (1, 7)
    """
    units = _compute_units(device)
    tiles = -(-d // LNP_COLUMNS)
    most = max(1, rows // (LNP_ROWS * 16))
    p = max(1, min(-(-_GROUPS_PER_CU * units // tiles), most))
    chunk = -(-rows // p)
    return -(-rows // chunk), chunk


LNW_MAX = 1024  # the longest row the warp-per-row layer norm kernels take (32 per lane)
LNW_ROWS = 4  # their rows per work-group of 128


def ln_warp_rows(d: int) -> bool:
    """Whether a GPU runs layer norm rows of ``d`` elements one warp each (NOTE [ Layer norm
    rows in warps ]).

    Examples:
        >>> ln_warp_rows(384), ln_warp_rows(1025)
        (True, False)
    """
    return 1 <= d <= LNW_MAX


_per_row: dict[Any, bool] = {}


def ln_per_row(device: Any) -> bool:
    """Whether layer norm on ``device`` runs one work-item per row (OpenCL CPU devices; NOTE
    [ Layer norm on CPU devices ]) rather than one work-group per row.

    Examples:
        >>> from types import SimpleNamespace as NS
        >>> ln_per_row(NS(type=2)), ln_per_row(NS(type=4))
        (True, False)
    """
    try:
        return _per_row[device]
    except KeyError:
        cpu = _per_row[device] = device_type_name(int(device.type)) == "cpu"
        return cpu
    except TypeError:  # an unhashable stand-in
        return device_type_name(int(device.type)) == "cpu"


def bn_lanes(chunk: int) -> int:
    """Items per ``bn_stats`` work-group: about 16 elements each, 64 to GROUP.

    Examples:
        >>> bn_lanes(2048), bn_lanes(7711), bn_lanes(10)
        (128, 256, 64)
    """
    return min(GROUP, max(64, 1 << max(0, chunk // 16 - 1).bit_length()))


def bn_geometry(hw: int, *tensors: Tensor) -> tuple[bool, int]:
    """``(vec, items per plane)``: 4-vectors where ``hw`` and every offset are multiples of 4."""
    vec = hw % 4 == 0 and all(t.offset % 4 == 0 for t in tensors)
    return vec, hw // 4 if vec else hw


def bn_launch_2d(queue: Any, kernel: Any, items: int, planes: int, *args: Any) -> None:
    """``kernel`` over (``items`` per plane, ``planes``) in work-groups of GROUP items."""
    if items <= 0 or planes <= 0:
        return
    l0 = min(GROUP, 1 << max(0, items - 1).bit_length())
    l1 = GROUP // l0
    launch(queue, kernel, (-(-items // l0) * l0, -(-planes // l1) * l1), (l0, l1),
           *view_args(*args))

