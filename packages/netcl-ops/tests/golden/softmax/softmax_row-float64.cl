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
#define VPL 16
#define MAXNAN(a, b) (((b) > (a) || isnan(b)) ? (b) : (a))
#define RESULT (take_log ? v - m - lse : exp(v - m) / sum)

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

__kernel void softmax_row(__global T* out, __global const T* x, const IDX xo,
                          const int take_log, const IDX R)
{
  __local CT bm[LMAX], bs[LMAX];
  const IDX L = get_local_size(0), l = get_local_id(0);
  const IDX base = get_group_id(0) * R;
  CT m = -INFINITY, sum = 0;
  if (R <= VPL * L) {  /* the row in registers: one read, one write */
    CT v[VPL];
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const IDX r = l + k * L;
      v[k] = r < R ? LD(x, xo + base + r) : -INFINITY;
      m = MAXNAN(m, v[k]);
    }
    group_max_sum(&m, &sum, bm, bs, l, L);  /* the max (sums are 0 yet) */
    barrier(CLK_LOCAL_MEM_FENCE);
    sum = 0;
#pragma unroll
    for (int k = 0; k < VPL; ++k) if (l + k * L < R) sum += exp(v[k] - m);
    CT lm = m;
    group_max_sum(&lm, &sum, bm, bs, l, L);
    if (m == INFINITY) sum = NAN;
    const CT lse = log(sum);
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const IDX r = l + k * L;
      const CT vk = v[k];
      if (r < R) { const CT v = vk; ST(out, base + r, RESULT); }
    }
  } else {  /* online max and sum in one read, then the write pass reads again */
    IDX r = l;
    for (; r + 3 * L < R; r += 4 * L) {  /* four loads in flight, one rescale per four */
      const CT v0 = LD(x, xo + base + r), v1 = LD(x, xo + base + r + L);
      const CT v2 = LD(x, xo + base + r + 2 * L), v3 = LD(x, xo + base + r + 3 * L);
      const CT m4 = MAXNAN(MAXNAN(v0, v1), MAXNAN(v2, v3));
      if (m4 > m || isnan(m4)) { sum = m == -INFINITY ? (CT)0 : sum * exp(m - m4); m = m4; }
      if (m != -INFINITY) sum += (exp(v0 - m) + exp(v1 - m)) + (exp(v2 - m) + exp(v3 - m));
    }
    for (; r < R; r += L) {
      const CT v = LD(x, xo + base + r);
      if (v > m || isnan(v)) { sum = m == -INFINITY ? (CT)0 : sum * exp(m - v); m = v; }
      if (m != -INFINITY) sum += exp(v - m);
    }
    group_max_sum(&m, &sum, bm, bs, l, L);
    if (m == INFINITY) sum = NAN;
    const CT lse = log(sum);
    for (IDX r = l; r < R; r += L) { const CT v = LD(x, xo + base + r); ST(out, base + r, RESULT); }
  }
}
