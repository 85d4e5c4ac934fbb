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
#define W 4

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
  const IDX base = i * W;
  if (base + W <= n) {
    const float4 v0 = u0 ? (float4)((float)s0) : ((__global const float4*)(p0 + o0))[i];
    float4 r;
    { { const CT a = (CT)v0.s0; r.s0 = (float)(exp(a)); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(exp(a)); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(exp(a)); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(exp(a)); } }
    ((__global float4*)(out + oo))[i] = r;
  } else {
    for (IDX j = base; j < n; ++j) {
      const CT a = u0 ? s0 : LD0(p0, o0 + j);
      { STO(out, oo + j, (exp(a))); }
    }
  }
}
