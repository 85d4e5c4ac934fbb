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
#define LMAX 256
#define VPL 32
#define CT4 double4
#define LD4(p, i) (((__global const double4*)(p))[(i)])
#define ST4(p, i, v) (((__global double4*)(p))[(i)] = (v))
#define VPL4 8
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

/* (max, sum of exp(v - max)) pairs merged across the work-group. */
inline void group_max_sum(CT* m, CT* s, __local CT* bm, __local CT* bs, const IDX l,
                          const IDX L)
{
  bm[l] = *m;
  bs[l] = *s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (IDX h = L / 2; h > 0; h >>= 1) {
    if (l < h) {
      const CT m1 = bm[l], m2 = bm[l + h];
      const CT M = MAXNAN(m1, m2);
      bs[l] = (m1 == -INFINITY ? (CT)0 : bs[l] * exp(m1 - M))
            + (m2 == -INFINITY ? (CT)0 : bs[l + h] * exp(m2 - M));
      bm[l] = M;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  *m = bm[0];
  *s = bs[0];
}

/* Fold v into the running (m, sum) of exp(. - m); m4 is the max of the elements folded. */
#define RESCALE(m4) \
  if ((m4) > m || isnan(m4)) { sum = m == -INFINITY ? (CT)0 : sum * exp(m - (m4)); m = (m4); }
#define MAX4(v) MAXNAN(MAXNAN((v).x, (v).y), MAXNAN((v).z, (v).w))
#define EXPSUM4(v) ((SM_EXP((v).x - m) + SM_EXP((v).y - m)) + \
                    (SM_EXP((v).z - m) + SM_EXP((v).w - m)))

/* Two kernels (the registers one needs many registers, which would limit the other's
   work-group size and occupancy), the same arguments; each lane's (max, sum) pair is merged
   by one tree, the barriers outside the branches.
   softmax_row (path 0): the row in registers (R <= VPL * L): one read, one write.
   softmax_row_online: path 1, online max and sum in one read, then the write pass reads
   the row again; path 2, the same in 4-vectors (xo a multiple of 4; a scalar head and tail around
   each row's 4-aligned middle). */
#define ROW_PROLOGUE \
  __local CT bm[LMAX], bs[LMAX]; \
  const IDX L = get_local_size(0), l = get_local_id(0); \
  const IDX base = get_group_id(0) * R; \
  __global const T* xr = x + xo + base; \
  __global T* yr = out + base; \
  CT m = -INFINITY, sum = 0;

__kernel void softmax_row(__global T* out, __global const T* x, const IDX xo,
                          const int take_log, const IDX R, const int path)
{
  ROW_PROLOGUE
  CT v[VPL];
#pragma unroll
  for (int k = 0; k < VPL; ++k) {
    const IDX r = l + k * L;
    v[k] = r < R ? LD(xr, r) : -INFINITY;
    m = MAXNAN(m, v[k]);
  }
  if (m != -INFINITY) {
#pragma unroll
    for (int k = 0; k < VPL; ++k) sum += SM_EXP(v[k] - m);  /* -inf pads add 0 */
  }
  group_max_sum(&m, &sum, bm, bs, l, L);
  if (m == INFINITY) sum = NAN;
  const CT lse = log(sum);
#pragma unroll
  for (int k = 0; k < VPL; ++k) {
    const IDX r = l + k * L;
    const CT vk = v[k];
    if (r < R) { const CT v = vk; ST(yr, r, RESULT); }
  }
}

__kernel void softmax_row_online(__global T* out, __global const T* x, const IDX xo,
                                 const int take_log, const IDX R, const int path)
{
  ROW_PROLOGUE
  /* path 2: the row from its first 4-aligned element (h of them before, t after the R4
     4-vectors; the output at the same alignment: xo a multiple of 4) */
  IDX h = (IDX)((4 - (int)((xo + base) & 3)) & 3);
  if (path != 2) h = 0;
  if (h > R) h = R;
  const IDX R4 = (R - h) >> 2, t = path == 2 ? R - h - (R4 << 2) : 0;
  __global const T* xb = xr + h;
  __global T* yb = yr + h;
  if (path == 1) {
    IDX r = l;
    for (; r + 3 * L < R; r += 4 * L) {  /* four loads in flight, one rescale per four */
      const CT v0 = LD(xr, r), v1 = LD(xr, r + L), v2 = LD(xr, r + 2 * L);
      const CT v3 = LD(xr, r + 3 * L);
      const CT m4 = MAXNAN(MAXNAN(v0, v1), MAXNAN(v2, v3));
      RESCALE(m4)
      if (m != -INFINITY)
        sum += (SM_EXP(v0 - m) + SM_EXP(v1 - m)) + (SM_EXP(v2 - m) + SM_EXP(v3 - m));
    }
    for (; r < R; r += L) {
      const CT u = LD(xr, r);
      RESCALE(u)
      if (m != -INFINITY) sum += SM_EXP(u - m);
    }
  } else {
    IDX i = l;
    for (IDX k = l; k < h + t; k += L) {  /* the scalar head and tail around the middle */
      const CT u = LD(xr, k < h ? k : (R4 << 2) + k);
      RESCALE(u)
      if (m != -INFINITY) sum += SM_EXP(u - m);
    }
    for (; i + L < R4; i += 2 * L) {  /* two 4-vectors in flight */
      const CT4 a = LD4(xb, i), b = LD4(xb, i + L);
      const CT m8 = MAXNAN(MAX4(a), MAX4(b));
      RESCALE(m8)
      if (m != -INFINITY) sum += EXPSUM4(a) + EXPSUM4(b);
    }
    if (i < R4) {
      const CT4 a = LD4(xb, i);
      const CT m4 = MAX4(a);
      RESCALE(m4)
      if (m != -INFINITY) sum += EXPSUM4(a);
    }
  }
  group_max_sum(&m, &sum, bm, bs, l, L);
  if (m == INFINITY) sum = NAN;
  const CT lse = log(sum);
  if (path == 1) {
    for (IDX r = l; r < R; r += L) { const CT v = LD(xr, r); ST(yr, r, RESULT); }
  } else {
    for (IDX k = l; k < h + t; k += L) {
      const IDX r = k < h ? k : (R4 << 2) + k;
      const CT v = LD(xr, r);
      ST(yr, r, RESULT);
    }
    for (IDX i = l; i < R4; i += L) {
      const CT4 a = LD4(xb, i);
      ST4(yb, i, take_log ? a - m - lse : SM_DIV(SM_EXP(a - m), sum));
    }
  }
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

/* W lanes per row, get_local_size(0) / W rows per work-group (NOTE [ Several rows per
   work-group ]); vec: 4-vectors with a scalar head and tail (xo a multiple of 4), else
   scalars. */
__kernel void softmax_mrow(__global T* out, __global const T* x, const IDX xo,
                           const int take_log, const IDX R, const IDX nrows, const int W,
                           const int vec)
{
  const int keep_exp = !take_log;

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
