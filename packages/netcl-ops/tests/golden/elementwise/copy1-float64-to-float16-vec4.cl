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
#define LIT(x) (x)
#define STO(p, i, v) vstore_half((v), (i), (p))
#define LD0(p, i) ((CT)(p)[(i)])
#define W 4

__kernel void ew_copy1(
    __global half* out,
    const IDX oo,
    __global const double* p0,
    const IDX o0,
    const CT s0,
    const int u0,
    const IDX n,
    const int op)
{
  const IDX i = get_global_id(0);
  const IDX base = i * W;
  if (base + W <= n) {
    const double4 v0 = u0 ? (double4)((double)s0) : ((__global const double4*)(p0 + o0))[i];
    double4 r;
    switch (op) {
      case 0: { { const CT a = (CT)v0.s0; r.s0 = (double)(a); }
        { const CT a = (CT)v0.s1; r.s1 = (double)(a); }
        { const CT a = (CT)v0.s2; r.s2 = (double)(a); }
        { const CT a = (CT)v0.s3; r.s3 = (double)(a); } } break;
    }
    vstorea_half4(r, i, out + oo);
  } else {
    for (IDX j = base; j < n; ++j) {
      const CT a = u0 ? s0 : LD0(p0, o0 + j);
      switch (op) {
        case 0: { STO(out, oo + j, (a)); } break;
      }
    }
  }
}
