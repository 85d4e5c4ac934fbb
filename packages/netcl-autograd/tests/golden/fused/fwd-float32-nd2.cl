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
__kernel void fused_fwd_01ea72653081(__global T* out, __global const T* p0, const IDX o0, __global const T* p1, const IDX o1, __global const T* p2, const IDX o2, const CT s3, const IDX n, const IDX d0, const IDX d1, const IDX st0_0, const IDX st0_1, const IDX st1_0, const IDX st1_1, const IDX st2_0, const IDX st2_1) {
#line 1 "body"
  const IDX c0 = get_global_id(0);
  const IDX row = get_global_id(1);
  const IDX gid = row * d1 + c0;
  if (c0 >= d1 || gid >= n) return;
  const IDX e0 = o0 + c0 * st0_1;
  const IDX e1 = o1 + c0 * st1_1;
  const IDX e2 = o2 + c0 * st2_1;
  IDX ir = row;
  IDX i0 = e0;
  IDX i1 = e1;
  IDX i2 = e2;
  { const IDX c = ir; i0 += c * st0_0; i1 += c * st1_0; i2 += c * st2_0; }
  const CT x0 = LD(p0, i0);
  const CT x1 = LD(p1, i1);
  const CT x2 = LD(p2, i2);
  const CT x3 = s3;
  const CT t0 = (CT)(x0 * x1);
  const CT t1 = (CT)(t0 + x2);
  const CT t2 = (CT)(t1 < (CT)0 ? (CT)0 : t1);
  const CT t3 = (CT)(t2 * x3);
  ST(out, gid, t3);
}
