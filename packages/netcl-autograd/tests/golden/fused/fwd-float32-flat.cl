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

#line 1 "preamble"
#ifndef NETCL_EXPRESSION_MACROS
#define NETCL_EXPRESSION_MACROS
#define ADD(a, b) NETCL_ADD(a, b)
#define SUB(a, b) NETCL_SUB(a, b)
#define MUL(a, b) NETCL_MUL(a, b)
#define DIV(a, b) NETCL_DIV(a, b)
#define NEG(a) NETCL_NEG(a)
#define SQR(a) NETCL_SQR(a)
#define RELU(x) NETCL_RELU(x)
#define MAX(a, b) NETCL_MAX(a, b)
#define MIN(a, b) NETCL_MIN(a, b)
#define SIGMOID(x) NETCL_SIGMOID(x)
#endif
#define T float
#define CT float
#define IDX int
#define LIT(x) (x##f)
#define LD(p, i) ((p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (v))

#line 1 "params"
__kernel void fused_fwd_58af80b89f15(__global T* out, __global const T* p0, const IDX o0, __global const T* p1, const IDX o1, const IDX n, const IDX d0, const IDX st0_0, const IDX st1_0) {
#line 1 "body"
  const IDX gid = get_global_id(0);
  if (gid >= n) return;
  const IDX i0 = o0 + gid;
  const IDX i1 = o1 + gid;
  const CT x0 = LD(p0, i0);
  const CT x1 = LD(p1, i1);
  const CT t0 = (CT)(LIT(1.0) / (LIT(1.0) + exp(-x0)));
  const CT t1 = (CT)(t0 * x1);
  ST(out, gid, t1);
}
