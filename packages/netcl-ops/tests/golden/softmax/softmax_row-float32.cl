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
#define T float
#define CT float
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define IDX int
#define LMAX 256
#define VPL 32
#define CT4 float4
#define LD4(p, i) (((__global const float4*)(p))[(i)])
#define ST4(p, i, v) (((__global float4*)(p))[(i)] = (v))
#define MAXNAN(a, b) (((b) > (a) || isnan(b)) ? (b) : (a))
#define RESULT (take_log ? v - m - lse : exp(v - m) / sum)

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
#define EXPSUM4(v) ((exp((v).x - m) + exp((v).y - m)) + (exp((v).z - m) + exp((v).w - m)))

/* Two kernels (the registers one needs many registers, which would limit the other's
   work-group size and occupancy), the same arguments; each lane's (max, sum) pair is merged
   by one tree, the barriers outside the branches.
   softmax_row (path 0): the row in registers (R <= VPL * L): one read, one write.
   softmax_row_online: path 1, online max and sum in one read, then the write pass reads
   the row again; path 2, the same in 4-vectors (R and the row starts multiples of 4). */
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
    for (int k = 0; k < VPL; ++k) sum += exp(v[k] - m);  /* -inf pads add 0 */
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
  const IDX R4 = R >> 2;
  if (path == 1) {
    IDX r = l;
    for (; r + 3 * L < R; r += 4 * L) {  /* four loads in flight, one rescale per four */
      const CT v0 = LD(xr, r), v1 = LD(xr, r + L), v2 = LD(xr, r + 2 * L);
      const CT v3 = LD(xr, r + 3 * L);
      const CT m4 = MAXNAN(MAXNAN(v0, v1), MAXNAN(v2, v3));
      RESCALE(m4)
      if (m != -INFINITY) sum += (exp(v0 - m) + exp(v1 - m)) + (exp(v2 - m) + exp(v3 - m));
    }
    for (; r < R; r += L) {
      const CT u = LD(xr, r);
      RESCALE(u)
      if (m != -INFINITY) sum += exp(u - m);
    }
  } else {
    IDX i = l;
    for (; i + L < R4; i += 2 * L) {  /* two 4-vectors in flight */
      const CT4 a = LD4(xr, i), b = LD4(xr, i + L);
      const CT m8 = MAXNAN(MAX4(a), MAX4(b));
      RESCALE(m8)
      if (m != -INFINITY) sum += EXPSUM4(a) + EXPSUM4(b);
    }
    if (i < R4) {
      const CT4 a = LD4(xr, i);
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
    for (IDX i = l; i < R4; i += L) {
      const CT4 a = LD4(xr, i);
      ST4(yr, i, take_log ? a - m - lse : exp(a - m) / sum);
    }
  }
}
