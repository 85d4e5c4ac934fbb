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
#define W 4

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
    const int op)
{
  const IDX i = get_global_id(0);
  const IDX base = i * W;
  if (base + W <= n) {
    const float4 v0 = u0 ? (float4)((float)s0) : ((__global const float4*)(p0 + o0))[i];
    const float4 v1 = u1 ? (float4)((float)s1) : ((__global const float4*)(p1 + o1))[i];
    float4 r;
    { { const CT a = (CT)v0.s0; const CT b = (CT)v1.s0; r.s0 = (float)(a + b); }
        { const CT a = (CT)v0.s1; const CT b = (CT)v1.s1; r.s1 = (float)(a + b); }
        { const CT a = (CT)v0.s2; const CT b = (CT)v1.s2; r.s2 = (float)(a + b); }
        { const CT a = (CT)v0.s3; const CT b = (CT)v1.s3; r.s3 = (float)(a + b); } }
    ((__global float4*)(out + oo))[i] = r;
  } else {
    for (IDX j = base; j < n; ++j) {
      const CT a = u0 ? s0 : LD0(p0, o0 + j);
      const CT b = u1 ? s1 : LD1(p1, o1 + j);
      { STO(out, oo + j, (a + b)); }
    }
  }
}
