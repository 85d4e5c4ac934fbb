#pragma OPENCL EXTENSION cl_khr_fp16 : enable
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
#define T half
#define CT float
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half((v), (i), (p))
#define IDX int
#define LMAX 1024
#define VPL4 8
#define SHFL_PTX 0
#define CT4 float4
#define LD4(p, i) vload_half4((i), (p))
#define ST4(p, i, v) vstore_half4((v), (i), (p))
#ifdef cl_khr_fp16
#undef LD4
#undef ST4
#define LD4(p, i) convert_float4(((__global const half4*)(p))[(i)])
#define ST4(p, i, v) (((__global half4*)(p))[(i)] = convert_half4_rte(v))
#endif
#define XOR_SCRATCH LMAX
#if SHFL_PTX
/* the value of lane (this lane ^ mask) of the warp: every lane of the warp calls it */
inline CT warp_xor(const CT v, const int mask)
{
  CT r;
  __asm__ volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                   : "=f"(r) : "f"(v), "r"(mask));
  return r;
}
#define XOR(v, mask) warp_xor((v), (mask))
#define XOR_LOCALS
#else
/* the same through local memory: every lane of the work-group calls it (barriers) */
inline CT emu_xor(const CT v, const int mask, __local CT* sc, const int l)
{
  barrier(CLK_LOCAL_MEM_FENCE);
  sc[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  return sc[l ^ mask];
}
#define XOR(v, mask) emu_xor((v), (mask), sc, l)
#define XOR_LOCALS __local CT sc[XOR_SCRATCH];
#endif
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
#define MAX4(v) MAXNAN(MAXNAN((v).x, (v).y), MAXNAN((v).z, (v).w))
#define ROW_REDUCE(a, is_max, part) \
  row_reduce((a), (is_max), W, l, (part) XOR_ARG)
#if SHFL_PTX
#define XOR_ARG
#define XOR_PARAM
#else
#define XOR_ARG , sc
#define XOR_PARAM , __local CT* sc
#endif

/* Max (is_max) or sum of a over the W lanes of each row: a butterfly over min(W, 32) lanes,
   then for W > 32 the row's W / 32 warp values through part (one barrier; W is a kernel
   argument, so every lane takes the branch). */
inline CT row_reduce(CT a, const int is_max, const int W, const int l, __local CT* part
                     XOR_PARAM)
{
  for (int o = (W < 32 ? W : 32) >> 1; o > 0; o >>= 1) {
    const CT b = XOR(a, o);
    a = is_max ? MAXNAN(a, b) : a + b;
  }
  if (W > 32) {
    if ((l & 31) == 0) part[l >> 5] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    __local const CT* p = part + ((l & ~(W - 1)) >> 5);
    a = p[0];
    for (int i = 1; i < (W >> 5); ++i) a = is_max ? MAXNAN(a, p[i]) : a + p[i];
  }
  return a;
}

/* W lanes per row (a power of two from 8), get_local_size(0) / W rows per work-group (a
   multiple of 32 items), VPL4 4-vectors per lane (NOTE [ Warp-per-row softmax ]); vec:
   4-vectors with a scalar head and tail (xo a multiple of 4), else scalars. */
__kernel void softmax_warp(__global T* out, __global const T* x, const IDX xo,
                           const int take_log, const IDX R, const IDX nrows, const int W,
                           const int vec)
{
  __local CT pm[LMAX / 32], ps[LMAX / 32];
  XOR_LOCALS
  const int keep_exp = !take_log;
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

  const CT M = ROW_REDUCE(m, 1, pm);
  /* exp(-inf - M) pads add 0; an all -inf row (M = -inf) gets NaN, as a NaN or +inf does */
  CT s = SM_EXP(e - M);
  if (keep_exp) e = s;
#pragma unroll
  for (int j = 0; j < VPL4; ++j) {
    const CT4 z = SM_EXP(v[j] - M);
    if (keep_exp) v[j] = z;
    s += (z.x + z.y) + (z.z + z.w);
  }
  CT S = ROW_REDUCE(s, 0, ps);
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
