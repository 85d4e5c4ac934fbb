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

__kernel void ew_arith1(
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
    switch (op) {
      case 0: { { const CT a = (CT)v0.s0; r.s0 = (float)(-a); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(-a); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(-a); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(-a); } } break;
      case 1: { { const CT a = (CT)v0.s0; r.s0 = (float)(fabs(a)); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(fabs(a)); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(fabs(a)); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(fabs(a)); } } break;
      case 2: { { const CT a = (CT)v0.s0; r.s0 = (float)(isnan(a) ? a : sign(a)); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(isnan(a) ? a : sign(a)); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(isnan(a) ? a : sign(a)); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(isnan(a) ? a : sign(a)); } } break;
      case 3: { { const CT a = (CT)v0.s0; r.s0 = (float)(exp(a)); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(exp(a)); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(exp(a)); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(exp(a)); } } break;
      case 4: { { const CT a = (CT)v0.s0; r.s0 = (float)(log(a)); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(log(a)); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(log(a)); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(log(a)); } } break;
      case 5: { { const CT a = (CT)v0.s0; r.s0 = (float)(sqrt(a)); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(sqrt(a)); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(sqrt(a)); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(sqrt(a)); } } break;
      case 6: { { const CT a = (CT)v0.s0; r.s0 = (float)(rsqrt(a)); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(rsqrt(a)); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(rsqrt(a)); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(rsqrt(a)); } } break;
      case 7: { { const CT a = (CT)v0.s0; r.s0 = (float)(LIT(1.0) / a); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(LIT(1.0) / a); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(LIT(1.0) / a); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(LIT(1.0) / a); } } break;
      case 8: { { const CT a = (CT)v0.s0; r.s0 = (float)(a < (CT)0 ? (CT)0 : a); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(a < (CT)0 ? (CT)0 : a); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(a < (CT)0 ? (CT)0 : a); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(a < (CT)0 ? (CT)0 : a); } } break;
      case 9: { { const CT a = (CT)v0.s0; r.s0 = (float)(a < (CT)0 ? a * q0 : a); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(a < (CT)0 ? a * q0 : a); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(a < (CT)0 ? a * q0 : a); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(a < (CT)0 ? a * q0 : a); } } break;
      case 10: { { const CT a = (CT)v0.s0; r.s0 = (float)(LIT(1.0) / (LIT(1.0) + exp(-a))); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(LIT(1.0) / (LIT(1.0) + exp(-a))); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(LIT(1.0) / (LIT(1.0) + exp(-a))); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(LIT(1.0) / (LIT(1.0) + exp(-a))); } } break;
      case 11: { { const CT a = (CT)v0.s0; r.s0 = (float)(tanh(a)); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(tanh(a)); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(tanh(a)); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(tanh(a)); } } break;
      case 12: { { const CT a = (CT)v0.s0; r.s0 = (float)(LIT(0.5) * a * (LIT(1.0) + erf(a * LIT(0.7071067811865476)))); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(LIT(0.5) * a * (LIT(1.0) + erf(a * LIT(0.7071067811865476)))); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(LIT(0.5) * a * (LIT(1.0) + erf(a * LIT(0.7071067811865476)))); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(LIT(0.5) * a * (LIT(1.0) + erf(a * LIT(0.7071067811865476)))); } } break;
      case 13: { { const CT a = (CT)v0.s0; r.s0 = (float)(LIT(0.5) * a * (LIT(1.0) + (fabs((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) >= LIT(20.0) ? copysign(LIT(1.0), (LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) : tanh((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a)))))); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(LIT(0.5) * a * (LIT(1.0) + (fabs((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) >= LIT(20.0) ? copysign(LIT(1.0), (LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) : tanh((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a)))))); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(LIT(0.5) * a * (LIT(1.0) + (fabs((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) >= LIT(20.0) ? copysign(LIT(1.0), (LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) : tanh((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a)))))); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(LIT(0.5) * a * (LIT(1.0) + (fabs((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) >= LIT(20.0) ? copysign(LIT(1.0), (LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) : tanh((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a)))))); } } break;
      case 14: { { const CT a = (CT)v0.s0; r.s0 = (float)(a / (LIT(1.0) + exp(-a))); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(a / (LIT(1.0) + exp(-a))); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(a / (LIT(1.0) + exp(-a))); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(a / (LIT(1.0) + exp(-a))); } } break;
      case 15: { { const CT a = (CT)v0.s0; r.s0 = (float)(((a < q0 ? q0 : a) > q1 ? q1 : (a < q0 ? q0 : a))); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(((a < q0 ? q0 : a) > q1 ? q1 : (a < q0 ? q0 : a))); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(((a < q0 ? q0 : a) > q1 ? q1 : (a < q0 ? q0 : a))); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(((a < q0 ? q0 : a) > q1 ? q1 : (a < q0 ? q0 : a))); } } break;
      case 16: { { const CT a = (CT)v0.s0; r.s0 = (float)(a * a); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(a * a); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(a * a); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(a * a); } } break;
      case 17: { { const CT a = (CT)v0.s0; r.s0 = (float)(a > LIT(20.0) ? a : log1p(exp(a))); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(a > LIT(20.0) ? a : log1p(exp(a))); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(a > LIT(20.0) ? a : log1p(exp(a))); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(a > LIT(20.0) ? a : log1p(exp(a))); } } break;
      case 18: { { const CT a = (CT)v0.s0; r.s0 = (float)(erf(a)); }
        { const CT a = (CT)v0.s1; r.s1 = (float)(erf(a)); }
        { const CT a = (CT)v0.s2; r.s2 = (float)(erf(a)); }
        { const CT a = (CT)v0.s3; r.s3 = (float)(erf(a)); } } break;
    }
    ((__global float4*)(out + oo))[i] = r;
  } else {
    for (IDX j = base; j < n; ++j) {
      const CT a = u0 ? s0 : LD0(p0, o0 + j);
      switch (op) {
        case 0: { STO(out, oo + j, (-a)); } break;
        case 1: { STO(out, oo + j, (fabs(a))); } break;
        case 2: { STO(out, oo + j, (isnan(a) ? a : sign(a))); } break;
        case 3: { STO(out, oo + j, (exp(a))); } break;
        case 4: { STO(out, oo + j, (log(a))); } break;
        case 5: { STO(out, oo + j, (sqrt(a))); } break;
        case 6: { STO(out, oo + j, (rsqrt(a))); } break;
        case 7: { STO(out, oo + j, (LIT(1.0) / a)); } break;
        case 8: { STO(out, oo + j, (a < (CT)0 ? (CT)0 : a)); } break;
        case 9: { STO(out, oo + j, (a < (CT)0 ? a * q0 : a)); } break;
        case 10: { STO(out, oo + j, (LIT(1.0) / (LIT(1.0) + exp(-a)))); } break;
        case 11: { STO(out, oo + j, (tanh(a))); } break;
        case 12: { STO(out, oo + j, (LIT(0.5) * a * (LIT(1.0) + erf(a * LIT(0.7071067811865476))))); } break;
        case 13: { STO(out, oo + j, (LIT(0.5) * a * (LIT(1.0) + (fabs((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) >= LIT(20.0) ? copysign(LIT(1.0), (LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) : tanh((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))))))); } break;
        case 14: { STO(out, oo + j, (a / (LIT(1.0) + exp(-a)))); } break;
        case 15: { STO(out, oo + j, (((a < q0 ? q0 : a) > q1 ? q1 : (a < q0 ? q0 : a)))); } break;
        case 16: { STO(out, oo + j, (a * a)); } break;
        case 17: { STO(out, oo + j, (a > LIT(20.0) ? a : log1p(exp(a)))); } break;
        case 18: { STO(out, oo + j, (erf(a))); } break;
      }
    }
  }
}
