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
__kernel void fused_reduce_46e4d6419a85(__global const T* gout, const IDX og, __global T* g2, __global const T* p0, const IDX o0, __global const T* p1, const IDX o1, __global const T* p2, const IDX o2, const CT s3, const IDX n, const IDX d0, const IDX d1, const IDX st0_0, const IDX st0_1, const IDX st1_0, const IDX st1_1, const IDX st2_0, const IDX st2_1, const IDX so0, const IDX so1, const IDX start0, const IDX m0, const IDX w0, const IDX red0, const IDX chunk0, const IDX iters0, const IDX pbase0, const IDX cbase0, volatile __global CT* part, volatile __global int* count) {
#line 1 "body"
#define nleaves(s) ((s) == 0 ? 1 : 0)
  const IDX grp = get_group_id(0);
  const IDX lid = get_local_id(0);
  CT acc0 = (CT)0;
  IDX m = 0, w = 0, W = 1, M = 1, pbase = 0, cbase = 0;
  int sec = 0, active = 0;
  if (1) {
  sec = 0; W = w0; M = m0; pbase = pbase0; cbase = cbase0;
  const IDX u = (grp - start0) * 256 + lid;
  m = u / W; w = u % W; active = m < M;
  const IDX lo = w;
  const IDX hi = red0;
  const IDX step = W;
  IDX br = m;
  IDX b0 = o0;
  IDX b1 = o1;
  IDX b2 = o2;
  IDX bo = og;
  { const IDX c = br; b0 += c * st0_0; b1 += c * st1_0; b2 += c * st2_0; bo += c * so0; }
  IDX cr = lo;
  IDX c1 = cr;
  IDX sr = step;
  IDX s1 = sr;
  for (IDX j = 0; j < iters0; ++j) {
  if (active && lo + j * step < hi) {
  const IDX i0 = b0 + c1 * st0_1;
  const IDX i1 = b1 + c1 * st1_1;
  const IDX i2 = b2 + c1 * st2_1;
  const IDX io = bo + c1 * so1;
  const CT x0 = LD(p0, i0);
  const CT x1 = LD(p1, i1);
  const CT x2 = LD(p2, i2);
  const CT x3 = s3;
  const CT t0 = (CT)(x0 * x1);
  const CT t1 = (CT)(t0 + x2);
  const CT t2 = (CT)(t1 < (CT)0 ? (CT)0 : t1);
  const CT t3 = (CT)(t2 * x3);
  CT gx2 = (CT)0;
  CT gt1 = (CT)0;
  CT gt2 = (CT)0;
  CT gt3 = LD(gout, io);
  gt2 += (CT)(gt3 * x3);
  gt1 += (CT)(t1 > (CT)0 ? gt2 : (CT)0);
  gx2 += (CT)(gt1);
  acc0 += gx2;
  }
  IDX carry = 0;
  c1 += s1 + carry;
  }
  }
  if (!active) return;
  if (W == 1) {
    if (sec == 0) { ST(g2, m, acc0); }
    return;
  }
  if (0 < nleaves(sec)) part[pbase + (0 * M + m) * W + w] = acc0;
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  if (atomic_inc(&count[cbase + m]) != (int)(W - 1)) return;
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  acc0 = (CT)0;
  for (IDX j = 0; j < W; ++j) {
    if (0 < nleaves(sec)) acc0 += part[pbase + (0 * M + m) * W + j];
  }
  if (sec == 0) { ST(g2, m, acc0); }
}
