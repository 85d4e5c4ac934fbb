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
#define T half
#define CT float
#define LD(p, i) vload_half((i), (p))
#define ST(p, i, v) vstore_half((v), (i), (p))
#define IDX int
#define LIT(x) (x##f)
#define STO(p, i, v) vstore_half((v), (i), (p))
#define LD0(p, i) ((CT)vload_half((i), (p)))

__kernel void ew_arith1(
    __global half* out,
    const IDX oo,
    __global const half* p0,
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
  switch (op) {
    case 0: { STO(out, oo + i, (-a)); } break;
    case 1: { STO(out, oo + i, (fabs(a))); } break;
    case 2: { STO(out, oo + i, (isnan(a) ? a : sign(a))); } break;
    case 3: { STO(out, oo + i, (exp(a))); } break;
    case 4: { STO(out, oo + i, (log(a))); } break;
    case 5: { STO(out, oo + i, (sqrt(a))); } break;
    case 6: { STO(out, oo + i, (rsqrt(a))); } break;
    case 7: { STO(out, oo + i, (LIT(1.0) / a)); } break;
    case 8: { STO(out, oo + i, (a < (CT)0 ? (CT)0 : a)); } break;
    case 9: { STO(out, oo + i, (a < (CT)0 ? a * q0 : a)); } break;
    case 10: { STO(out, oo + i, (LIT(1.0) / (LIT(1.0) + exp(-a)))); } break;
    case 11: { STO(out, oo + i, (tanh(a))); } break;
    case 12: { STO(out, oo + i, (LIT(0.5) * a * (LIT(1.0) + erf(a * LIT(0.7071067811865476))))); } break;
    case 13: { STO(out, oo + i, (LIT(0.5) * a * (LIT(1.0) + (fabs((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) >= LIT(20.0) ? copysign(LIT(1.0), (LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))) : tanh((LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))))))); } break;
    case 14: { STO(out, oo + i, (a / (LIT(1.0) + exp(-a)))); } break;
    case 15: { STO(out, oo + i, (((a < q0 ? q0 : a) > q1 ? q1 : (a < q0 ? q0 : a)))); } break;
    case 16: { STO(out, oo + i, (a * a)); } break;
    case 17: { STO(out, oo + i, (a > LIT(20.0) ? a : log1p(exp(a)))); } break;
    case 18: { STO(out, oo + i, (erf(a))); } break;
  }
}
