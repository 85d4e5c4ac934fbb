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
__kernel void fused_full_25eca3c7bb9e(__global const T* gout, const IDX og, __global T* g1, const CT s0, __global const T* p1, const IDX o1, __global const T* p2, const IDX o2, const IDX n, const IDX d0, const IDX d1, const IDX st1_0, const IDX st1_1, const IDX st2_0, const IDX st2_1) {
#line 1 "body"
  const IDX c0 = get_global_id(0);
  const IDX row = get_global_id(1);
  const IDX gid = row * d1 + c0;
  if (c0 >= d1 || gid >= n) return;
  const IDX e1 = o1 + c0 * st1_1;
  const IDX e2 = o2 + c0 * st2_1;
  IDX ir = row;
  IDX i1 = e1;
  IDX i2 = e2;
  { const IDX c = ir; i1 += c * st1_0; i2 += c * st2_0; }
  const CT x0 = s0;
  const CT x1 = LD(p1, i1);
  const CT x2 = LD(p2, i2);
  const CT t0 = (CT)(x0 * x1);
  const CT t1 = (CT)(t0 + x2);
  CT gx1 = (CT)0;
  CT gt0 = (CT)0;
  CT gt1 = LD(gout, og + gid);
  gt0 += (CT)(gt1);
  gx1 += (CT)(gt0 * x0);
  ST(g1, gid, gx1);
}
