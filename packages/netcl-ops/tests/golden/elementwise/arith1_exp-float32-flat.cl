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

__kernel void ew_arith1_exp(
    __global float* out,
    const IDX oo,
    __global const float* p0,
    const IDX o0,
    const CT s0,
    const int u0,
    const CT q0,
    const CT q1,
    const IDX n,
    const int op)
{
  const IDX i = get_global_id(0);
  if (i >= n) return;
  const CT a = u0 ? s0 : LD0(p0, o0 + i);
  { STO(out, oo + i, (exp(a))); }
}
