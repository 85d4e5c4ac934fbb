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
#define LMAX 256
#define VPL 32
#ifndef SM_FAST
#define SM_FAST 0
#endif
#if SM_FAST
#define SM_EXP(a) native_exp(a)
#define SM_DIV(v, s) ((v) * native_recip(s))
#else
#define SM_EXP(a) exp(a)
#define SM_DIV(v, s) ((v) / (s))
#endif
#define MAXNAN(a, b) (((b) > (a) || isnan(b)) ? (b) : (a))
#define RESULT (take_log ? v - m - lse : SM_DIV(SM_EXP(v - m), sum))

__kernel void softmax_col(__global T* out, __global const T* x, const IDX xo,
                          const int take_log, const IDX outer, const IDX R, const IDX inner)
{
  const IDX gid = get_global_id(0);
  if (gid >= outer * inner) return;
  const IDX o = gid / inner;
  const IDX base = o * R * inner + (gid - o * inner);
  CT m = -INFINITY;
  for (IDX r = 0; r < R; ++r) { const CT v = LD(x, xo + base + r * inner); m = MAXNAN(m, v); }
  CT sum = 0;
  for (IDX r = 0; r < R; ++r) sum += exp(LD(x, xo + base + r * inner) - m);
  const CT lse = log(sum);
  for (IDX r = 0; r < R; ++r) {
    const CT v = LD(x, xo + base + r * inner);
    ST(out, base + r * inner, RESULT);
  }
}
