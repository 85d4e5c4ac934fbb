#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#ifndef NETCL_PRIMITIVES
#define NETCL_PRIMITIVES
#define NETCL_LOAD(p, i) ((p)[(i)])
#define NETCL_STORE(p, i, v) ((p)[(i)] = (v))
#define NETCL_LOAD_HALF(p, i) vload_half((i), (p))
#define NETCL_STORE_HALF(p, i, v) vstore_half((v), (i), (p))
#define NETCL_ADD(a, b) ((a) + (b))
#define NETCL_SUB(a, b) ((a) - (b))
#define NETCL_MUL(a, b) ((a) * (b))
#define NETCL_DIV(a, b) ((a) / (b))
#define NETCL_NEG(a) (-(a))
#define NETCL_SQR(a) ((a) * (a))
#define NETCL_RELU(x) ((x) > 0 ? (x) : 0)
#define NETCL_MAX(a, b) ((a) > (b) ? (a) : (b))
#define NETCL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define NETCL_SIGMOID(x) (1.0f / (1.0f + exp(-(x))))
#endif
#define T double
#define CT double
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define IDX int
#define LT long
#define LMAX 1024
#define VPL4 8
#define GL_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
#define CT4 double4
#define LD4(p, i) (((__global const double4*)(p))[(i)])
#define ST4(p, i, v) (((__global double4*)(p))[(i)] = (v))
#ifndef SM_FAST
#define SM_FAST 0
#endif
#if SM_FAST
#define SM_EXP(a) native_exp(a)
#define SM_DIV(v, s) ((v) * native_recip(s))
#else
#define SM_EXP(a) exp(a)
#define SM_DIV(v, s) ((v) / (s))
#endif
#define MAXNAN(a, b) (((b) > (a) || isnan(b)) ? (b) : (a))
#define RESULT (take_log ? v - m - lse : SM_DIV(SM_EXP(v - m), sum))

__kernel void nll_k(__global T* out, __global const T* logp, const IDX lo,
                    __global const LT* labels, const IDX yo,
                    const IDX C, const long ignore, const IDX n, __global int* bad)
{
  const IDX i = get_global_id(0);
  if (i >= n) return;
  const long y = (long)labels[yo + i];
  if (y == ignore) ST(out, i, (CT)0);
  else if (y < 0 || y >= (long)C) { ST(out, i, (CT)NAN); *bad = 1; }  /* no read; see NOTE */
  else ST(out, i, -LD(logp, lo + i * C + (IDX)y));
}

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

  __local CT bm[LMAX], bs[LMAX], bm2[LMAX], bs2[LMAX];
  const int l = get_local_id(0), lane = l & (W - 1), g0 = l - lane;
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
  const CT M = row_fold(m, bm, bm2, l, lane, g0, W, 1);
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

  if (write_logp) {
    __global T* yr = out + base;

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
