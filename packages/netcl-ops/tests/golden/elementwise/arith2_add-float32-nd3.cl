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
#define LIT(x) (x##f)
#define STO(p, i, v) ((p)[(i)] = (float)(v))
#define LD0(p, i) ((CT)(p)[(i)])
#define LD1(p, i) ((CT)(p)[(i)])

__kernel void ew_arith2_add(
    __global float* out,
    const IDX oo,
    __global const float* p0,
    const IDX o0,
    const CT s0,
    const int u0,
    __global const float* p1,
    const IDX o1,
    const CT s1,
    const int u1,
    const IDX n,
    const IDX d0,
    const IDX d1,
    const IDX d2,
    const IDX so0,
    const IDX so1,
    const IDX so2,
    const IDX s0_0,
    const IDX s0_1,
    const IDX s0_2,
    const IDX s1_0,
    const IDX s1_1,
    const IDX s1_2,
    const int op)
{
  const IDX i = get_global_id(0);
  if (i >= n) return;
  IDX r = i;
  IDX io = oo;
  IDX i0 = o0;
  IDX i1 = o1;
  { const IDX c = r % d2; r /= d2; io += c * so2; i0 += c * s0_2; i1 += c * s1_2; }
  { const IDX c = r % d1; r /= d1; io += c * so1; i0 += c * s0_1; i1 += c * s1_1; }
  { const IDX c = r; io += c * so0; i0 += c * s0_0; i1 += c * s1_0; }
  const CT a = u0 ? s0 : LD0(p0, i0);
  const CT b = u1 ? s1 : LD1(p1, i1);
  { STO(out, io, (a + b)); }
}
