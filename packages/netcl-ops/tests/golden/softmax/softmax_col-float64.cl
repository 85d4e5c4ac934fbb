#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#ifndef NETCL_PRIMITIVES
#define NETCL_PRIMITIVES
#define LOAD(p, i) ((p)[(i)])
#define STORE(p, i, v) ((p)[(i)] = (v))
#define LOAD_HALF(p, i) vload_half((i), (p))
#define STORE_HALF(p, i, v) vstore_half((v), (i), (p))
#define ADD(a, b) ((a) + (b))
#define SUB(a, b) ((a) - (b))
#define MUL(a, b) ((a) * (b))
#define DIV(a, b) ((a) / (b))
#define NEG(a) (-(a))
#define SQR(a) ((a) * (a))
#define RELU(x) ((x) > 0 ? (x) : 0)
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define SIGMOID(x) (1.0f / (1.0f + exp(-(x))))
#endif
#define T double
#define CT double
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define IDX int
#define LMAX 256
#define MAXNAN(a, b) (((b) > (a) || isnan(b)) ? (b) : (a))
#define RESULT (take_log ? v - m - lse : exp(v - m) / sum)

__kernel void softmax_col(__global T* out, __global const T* x, const IDX xo,
                          const int take_log, const IDX outer, const IDX R, const IDX inner)
{
  const IDX gid = get_global_id(0);
  if (gid >= outer * inner) return;
  const IDX o = gid / inner;
  const IDX base = o * R * inner + (gid - o * inner);
  CT m = -INFINITY;
  for (IDX r = 0; r < R; ++r) { const CT v = LD(x, xo + base + r * inner); m = MAXNAN(m, v); }
  CT sum = 0;
  for (IDX r = 0; r < R; ++r) sum += exp(LD(x, xo + base + r * inner) - m);
  const CT lse = log(sum);
  for (IDX r = 0; r < R; ++r) {
    const CT v = LD(x, xo + base + r * inner);
    ST(out, base + r * inner, RESULT);
  }
}
