"""Several rows per work-group: ``softmax_mrow`` and the fused cross-entropy kernels
(``xent_row``, ``xent_sum``): their OpenCL sources and :func:`mrow_plan`.

# NOTE [ Several rows per work-group ]
# softmax_row gives each row one work-group of 32..1024 lanes. With 32-lane groups (rows of up
# to 1024 elements) an NVIDIA SM runs at most 32 resident groups, 1024 threads: half its
# threads, and half the loads in flight a memory-bound kernel wants (H200: softmax 4096x1024
# at 0.53x PyTorch, 44% of copy bandwidth). softmax_mrow packs ``G / W`` rows of ``W`` lanes
# into work-groups of G = 256 items (W a power of two from 8; W = G: one row): lane l of a row
# holds the row's 4-vectors l, l + W, ... (``VPL4`` of them, 32 elements) in registers, so a
# warp's loads are whole 16-byte vectors, contiguous across its lanes. The row start need not
# be 4-aligned: up to 3 leading (head) and 3 trailing (tail) elements go to the row's first
# lanes as one scalar each, the 4-aligned middle as 4-vectors (output at the same alignment,
# so this needs the input offset a multiple of 4; else the scalar variant, element l + W k).
# The row's max and sum of exp(v - max) take one local-memory pass each (a barrier, then
# every lane reads its row's <= 32 partials; rows of more than 32 lanes fold W / 32 first):
# two or four barriers in all, no exp in the merges, the exp of each element computed once
# (kept in registers for softmax). A row longer than 32 * 1024 elements takes softmax_row's
# online path (``online4`` also in 4-vectors for unaligned lengths now).
# Cross entropy (xent_row): the same row kernel, log-softmax written only if asked (the
# backward's input), and each row's loss -(x[y] - max - lse) read from the row just loaded (0
# for ignore_index, NaN for a bad label). Each work-group writes (its rows' loss sum, rows
# kept, any bad label) and the last group merges them in group order (NOTE [ Last group
# merges ] in ._split_sync): the sum, the mean over kept rows, and the bad-label flag written
# whole -- one launch, no fill (NOTE [ Out-of-range labels ] in netcl.ops._softmax); H200
# before: log_softmax, nll_k, red_vec and a fill, 0.50x PyTorch at 4096x1000. merge=False
# runs the same sums in a second launch, xent_sum (one work-group), for comparison.
"""

from __future__ import annotations

__all__ = ["MATH_DEFINES", "MROW_LOCAL", "MROW_SOURCE", "ROW_READ", "ROW_STORE", "VPL4",
           "XENT_SOURCE", "mrow_plan"]

VPL4 = 8  # 4-vectors each lane holds (32 elements)
MROW_LOCAL = 256  # work-group size of the multi-row kernels (or W where a row needs more)
_MIN_W = 8  # the fewest lanes per row (head and tail need up to 6 lanes)

_ROW_FOLD = """
/* Max (is_max) or sum of a over the W lanes of each row of the work-group: one barrier when
   W <= 32, two beyond (lanes 0..31 of the row fold W / 32 partials each first). */
inline CT row_fold(const CT a, __local CT* b, __local CT* b2, const int l, const int lane,
                   const int g0, const int W, const int is_max)
{
  b[l] = a;
  barrier(CLK_LOCAL_MEM_FENCE);
  __local CT* p = b + g0;
  int n = W;
  if (W > 32) {
    __local CT* q = b2 + (g0 / W) * 32;
    if (lane < 32) {
      CT r = p[lane];
      for (int i = lane + 32; i < W; i += 32) r = is_max ? MAXNAN(r, p[i]) : r + p[i];
      q[lane] = r;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    p = q;
    n = 32;
  }
  /* four independent chains (n is a power of two >= 8): a quarter of the latency */
  CT r0 = p[0], r1 = p[1], r2 = p[2], r3 = p[3];
  for (int i = 4; i < n; i += 4) {
    if (is_max) {
      r0 = MAXNAN(r0, p[i]); r1 = MAXNAN(r1, p[i + 1]);
      r2 = MAXNAN(r2, p[i + 2]); r3 = MAXNAN(r3, p[i + 3]);
    } else {
      r0 += p[i]; r1 += p[i + 1]; r2 += p[i + 2]; r3 += p[i + 3];
    }
  }
  return is_max ? MAXNAN(MAXNAN(r0, r1), MAXNAN(r2, r3)) : (r0 + r1) + (r2 + r3);
}
#ifndef MAX4
#define MAX4(v) MAXNAN(MAXNAN((v).x, (v).y), MAXNAN((v).z, (v).w))
#endif
"""

# the row read into registers (lane ``lane`` of W): ``ROW_READ`` (also softmax_warp's, in
# ._softmax_warp), then the max and sum merged across the row's lanes (``_ROW_FOLDS``)
_ROW_LOCALS = """
  __local CT bm[LMAX], bs[LMAX], bm2[LMAX], bs2[LMAX];
"""

# NOTE [ Softmax arithmetic ]
# SM_EXP and SM_DIV are the exponential and the division by the row sum of every softmax row
# kernel: OpenCL's exp and / (correctly rounded to a few ulp) by default; with SM_FAST (float32
# and float16 only, NETCL_SOFTMAX_MATH=fast: :func:`netcl.ops._softmax_warp.fast_math`)
# native_exp (NVIDIA: ex2.approx of x log2 e) and a multiply by native_recip of the sum, the
# arithmetic PyTorch's persistent softmax spends per element, to measure whether the exact
# forms bound the kernels on a GPU.
MATH_DEFINES = """#ifndef SM_FAST
#define SM_FAST 0
#endif
#if SM_FAST
#define SM_EXP(a) native_exp(a)
#define SM_DIV(v, s) ((v) * native_recip(s))
#else
#define SM_EXP(a) exp(a)
#define SM_DIV(v, s) ((v) / (s))
#endif
"""

ROW_READ = """  const int l = get_local_id(0), lane = l & (W - 1), g0 = l - lane;
  const IDX row = (IDX)get_group_id(0) * (IDX)(get_local_size(0) / W) + (IDX)(l / W);
  const int live = row < nrows;
  const IDX base = row * R;
  __global const T* xr = x + xo + base;
  CT4 v[VPL4];
  CT e = -INFINITY;  /* a head or tail element (vec), else unused */
  IDX h = 0, nb = 0, t = 0, epos = 0;
  if (vec) {
    h = (IDX)((4 - (int)((xo + base) & 3)) & 3);
    if (h > R) h = R;
    nb = (R - h) >> 2;
    t = R - h - (nb << 2);
    epos = lane < h ? (IDX)lane : (nb << 2) + (IDX)lane;  /* h + 4 nb + (lane - h) */
  }
  if (live && vec) {
    __global const T* xb = xr + h;
#pragma unroll
    for (int j = 0; j < VPL4; ++j) {
      const IDX i = (IDX)lane + (IDX)j * W;
      v[j] = i < nb ? LD4(xb, i) : (CT4)(-INFINITY);
    }
    if (lane < h + t) e = LD(xr, epos);
  } else if (live) {
#pragma unroll
    for (int j = 0; j < VPL4; ++j) {
      const IDX r = (IDX)lane + (IDX)(4 * j) * W;
      v[j].x = r < R ? LD(xr, r) : -INFINITY;
      v[j].y = r + W < R ? LD(xr, r + W) : -INFINITY;
      v[j].z = r + 2 * W < R ? LD(xr, r + 2 * W) : -INFINITY;
      v[j].w = r + 3 * W < R ? LD(xr, r + 3 * W) : -INFINITY;
    }
  } else {
#pragma unroll
    for (int j = 0; j < VPL4; ++j) v[j] = (CT4)(-INFINITY);
  }
  CT m = e;
#pragma unroll
  for (int j = 0; j < VPL4; ++j) m = MAXNAN(m, MAX4(v[j]));
"""

_ROW_FOLDS = """  const CT M = row_fold(m, bm, bm2, l, lane, g0, W, 1);
  /* exp(-inf - M) pads add 0; an all -inf row (M = -inf) gets NaN, as a NaN or +inf does */
  CT s = SM_EXP(e - M);
  if (keep_exp) e = s;
#pragma unroll
  for (int j = 0; j < VPL4; ++j) {
    const CT4 z = SM_EXP(v[j] - M);
    if (keep_exp) v[j] = z;
    s += (z.x + z.y) + (z.z + z.w);
  }
  CT S = row_fold(s, bs, bs2, l, lane, g0, W, 0);
  if (M == INFINITY) S = NAN;
  const CT lse = log(S);
"""

_ROW_LOAD = _ROW_LOCALS + ROW_READ + _ROW_FOLDS

ROW_STORE = """
  if (live && vec) {
    __global T* yb = yr + h;
#pragma unroll
    for (int j = 0; j < VPL4; ++j) {
      const IDX i = (IDX)lane + (IDX)j * W;
      if (i < nb) ST4(yb, i, take_log ? v[j] - M - lse : SM_DIV(v[j], S));
    }
    if (lane < h + t) ST(yr, epos, take_log ? e - M - lse : SM_DIV(e, S));
  } else if (live) {
#pragma unroll
    for (int j = 0; j < VPL4; ++j) {
      const IDX r = (IDX)lane + (IDX)(4 * j) * W;
      if (r < R) ST(yr, r, take_log ? v[j].x - M - lse : SM_DIV(v[j].x, S));
      if (r + W < R) ST(yr, r + W, take_log ? v[j].y - M - lse : SM_DIV(v[j].y, S));
      if (r + 2 * W < R) ST(yr, r + 2 * W, take_log ? v[j].z - M - lse : SM_DIV(v[j].z, S));
      if (r + 3 * W < R) ST(yr, r + 3 * W, take_log ? v[j].w - M - lse : SM_DIV(v[j].w, S));
    }
  }
"""

MROW_SOURCE = _ROW_FOLD + """
/* W lanes per row, get_local_size(0) / W rows per work-group (NOTE [ Several rows per
   work-group ]); vec: 4-vectors with a scalar head and tail (xo a multiple of 4), else
   scalars. */
__kernel void softmax_mrow(__global T* out, __global const T* x, const IDX xo,
                           const int take_log, const IDX R, const IDX nrows, const int W,
                           const int vec)
{
  const int keep_exp = !take_log;
""" + _ROW_LOAD + """
  __global T* yr = out + base;
""" + ROW_STORE + "}\n"

XENT_SOURCE = _ROW_FOLD + """
/* Cross entropy per row: -(x[y] - max - lse), 0 for ignore_index, NaN for a label outside
   [0, R), into loss[row] (in T); the log-softmax rows into out if write_logp. merge: each
   work-group also writes (sum of its rows' losses, rows kept, any bad label) to part[3 grp..]
   and the last group to take a ticket (NOTE [ Last group merges ] in ._split_sync) merges the
   partials in order: *total = their sum (mode 1) or that over the rows kept (mode 2; mode 0
   writes no total), *bad = any bad label, written whole. Else xent_sum does that. */
__kernel void xent_row(__global T* loss, __global T* out, __global const T* x, const IDX xo,
                       __global const LT* labels, const IDX yo, const long ignore,
                       const int write_logp, const IDX R, const IDX nrows, const int W,
                       const int vec, const int merge, const int mode, __global CT* part,
                       __global int* count, __global T* total, __global int* bad)
{
  const int keep_exp = 0, take_log = 1;
""" + _ROW_LOAD + """
  if (write_logp) {
    __global T* yr = out + base;
""" + ROW_STORE + """
  }
  __local int gb[LMAX / 8];
  __local int last;
  const int rl = l / W, nr = get_local_size(0) / W;
  if (lane == 0) {
    CT r = 0;
    int valid = 0, wrong = 0;
    if (live) {
      const long y = (long)labels[yo + row];
      valid = y != ignore;
      wrong = valid && (y < 0 || y >= (long)R);
      if (valid) r = wrong ? (CT)NAN : -(LD(xr, (IDX)y) - M - lse);
      ST(loss, row, r);
    }
    /* bm, bm2 are free: every lane passed a barrier after its last read of them */
    bm[rl] = r;
    bm2[rl] = (CT)valid;
    gb[rl] = wrong;
  }
  if (!merge) return;
  barrier(CLK_LOCAL_MEM_FENCE);
  const IDX G = get_num_groups(0), grp = get_group_id(0);
  if (l == 0) {
    CT ps = 0, pc = 0;
    int pb = 0;
    for (int k = 0; k < nr; ++k) { ps += bm[k]; pc += bm2[k]; pb |= gb[k]; }
    part[3 * grp] = ps;
    part[3 * grp + 1] = pc;
    part[3 * grp + 2] = (CT)pb;
    GL_FENCE();  /* the partial is visible device-wide before the ticket is taken */
    last = atomic_inc(count) == (int)(G - 1);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!last) return;
  GL_FENCE();
  const int L = get_local_size(0);
  CT ts = 0, tc = 0, tb = 0;
  for (IDX q = l; q < G; q += L) {
    ts += part[3 * q];
    tc += part[3 * q + 1];
    tb = fmax(tb, part[3 * q + 2]);
  }
  bm[l] = ts;
  bs[l] = tc;
  bs2[l] = tb;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = L / 2; k > 0; k >>= 1) {
    if (l < k) { bm[l] += bm[l + k]; bs[l] += bs[l + k]; bs2[l] = fmax(bs2[l], bs2[l + k]); }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) {
    *bad = bs2[0] != 0;
    if (mode) ST(total, 0, mode == 2 ? bm[0] / bs[0] : bm[0]);
    *count = 0;
  }
}

/* One work-group: out[0] = the sum of loss[0..n) (mode 1) or that over the number of rows
   whose label is not ignore (mode 2; mode 0 writes no out); bad[0] = whether a label that is
   not ignore lies outside [0, C), written whole (no fill before). */
__kernel void xent_sum(__global T* out, __global const T* loss, __global const LT* labels,
                       const IDX yo, const IDX n, const IDX C, const long ignore,
                       const int mode, __global int* bad)
{
  __local CT bs[LMAX];
  __local int bc[LMAX], bb[LMAX];
  const int l = get_local_id(0), L = get_local_size(0);
  CT s = 0;
  int c = 0, b = 0;
  for (IDX i = l; i < n; i += L) {
    const long y = (long)labels[yo + i];
    const int valid = y != ignore;
    b |= valid && (y < 0 || y >= (long)C);
    c += valid;
    if (mode) s += LD(loss, i);
  }
  bs[l] = s;
  bc[l] = c;
  bb[l] = b;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int k = L / 2; k > 0; k >>= 1) {
    if (l < k) { bs[l] += bs[l + k]; bc[l] += bc[l + k]; bb[l] |= bb[l + k]; }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) {
    *bad = bb[0];
    if (mode) ST(out, 0, mode == 2 ? bs[0] / (CT)bc[0] : bs[0]);
  }
}
"""


def mrow_plan(R: int, offset: int, local: int, lanes: int | None = None,
              rows: int | None = None, vec: bool | None = None) -> tuple[int, int, bool]:
    """``(lanes per row, rows per work-group, vec)`` of ``softmax_mrow`` for rows of ``R``
    elements from element ``offset``, work-groups of at most ``local`` items (NOTE [ Several
    rows per work-group ]). By default the fewest lanes (a power of two from 8) that hold a row
    in ``4 * VPL4`` elements each, as many rows as fill ``MROW_LOCAL`` items, and 4-vectors
    where ``offset`` is a multiple of 4. ``lanes``, ``rows`` and ``vec`` force them.

    Raises:
        ValueError: a plan that cannot run (lanes not a power of two from 8, a row longer than
            ``4 * VPL4 * lanes``, more than ``local`` items, 4-vectors from an unaligned
            offset).

    Examples:
        >>> mrow_plan(1024, 0, 1024), mrow_plan(1000, 3, 1024), mrow_plan(10, 0, 1024)
        ((32, 8, True), (32, 8, False), (8, 32, True))
        >>> mrow_plan(30000, 0, 1024), mrow_plan(1024, 0, 1024, lanes=64, rows=2)
        ((1024, 1, True), (64, 2, True))
    """
    per_lane = 4 * VPL4
    if lanes is None:
        lanes = max(_MIN_W, 1 << ((R - 1) // per_lane).bit_length())
    if rows is None:
        rows = max(1, min(local, MROW_LOCAL) // lanes)
    aligned = offset % 4 == 0
    vec = aligned if vec is None else vec
    if (lanes < _MIN_W or lanes & (lanes - 1) or per_lane * lanes < R or rows < 1
            or lanes * rows > local or (vec and not aligned)):
        raise ValueError(f"softmax: multi-row plan ({lanes} lanes x {rows} rows, "
                         f"{'4-vectors' if vec else 'scalars'}) cannot run rows of {R} "
                         f"elements from offset {offset} (lanes a power of two from {_MIN_W}, "
                         f"at most {per_lane} elements each, at most {local} items)")
    return lanes, rows, vec
