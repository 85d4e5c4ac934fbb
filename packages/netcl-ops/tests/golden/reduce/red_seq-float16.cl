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

#define TI half
#define TO half
#define ACC float
#define LMAX 256
#define LO -INFINITY
#define HI INFINITY
#define LDI(p, i) ((ACC)vload_half((i), (p)))
#define ACC4 float4
#define LD4(p, b, i) vload_half4((i), (p) + (b))
#define STO(p, i, v) vstore_half((v), (i), (p))
#define BIGGER(v, a) (isnan(v) || (v) > (a))
#define SMALLER(v, a) (isnan(v) || (v) < (a))
#define BETTER(v, vi, a, ai) (isnan(a) ? (isnan(v) && (vi) < (ai)) : (isnan(v) || ((v) > (a) || ((v) == (a) && (vi) < (ai)))))

inline void accumulate(const int kind, __global const TI* x, const IDX xo,
                       __global const long* xi, const IDX xio, const int in_idx,
                       const int has_aux, const ACC m, const IDX base, const IDX stride,
                       const IDX r0, const IDX r1, const IDX rs, ACC* acc, long* ai)
{
  ACC a = *acc;
  long k = *ai;
  switch (kind) {
    case 0:
      if (has_aux) {
        for (IDX r = r0; r < r1; r += rs) {
          const ACC d = LDI(x, xo + base + r * stride) - m;
          a += d * d;
        }
      } else {
        for (IDX r = r0; r < r1; r += rs) a += LDI(x, xo + base + r * stride);
      }
      break;
    case 1:
      for (IDX r = r0; r < r1; r += rs) {
        const ACC v = LDI(x, xo + base + r * stride);
        if (BIGGER(v, a)) a = v;
      }
      break;
    case 2:
      for (IDX r = r0; r < r1; r += rs) {
        const ACC v = LDI(x, xo + base + r * stride);
        if (SMALLER(v, a)) a = v;
      }
      break;
    default:
      for (IDX r = r0; r < r1; r += rs) {
        const IDX at = base + r * stride;
        const ACC v = LDI(x, xo + at);
        const long vi = in_idx ? xi[xio + at] : (long)r;
        if (BETTER(v, vi, a, k)) { a = v; k = vi; }
      }
  }
  *acc = a;
  *ai = k;
}

#define INIT(kind) ((kind) == 0 ? (ACC)0 : (kind) == 2 ? (ACC)HI : (ACC)LO)
#define RESULT(kind, a) ((kind) == 0 ? (a) * scale : (a))

__kernel void red_seq(
    __global const TI* x, const IDX xo, __global TO* out, const IDX oo,
    __global const long* xi, const IDX xio, __global long* outi, const IDX oio,
    __global const ACC* aux, const IDX auxo,
    const IDX outer, const IDX R, const IDX inner, const ACC scale,
    const int kind, const int has_aux, const int in_idx, const int write_val)
{
  const IDX gid = get_global_id(0);
  if (gid >= outer * inner) return;
  const IDX o = gid / inner;
  const ACC m = has_aux ? aux[auxo + gid] : (ACC)0;
  ACC acc = INIT(kind);
  long ai = LONG_MAX;
  accumulate(kind, x, xo, xi, xio, in_idx, has_aux, m, o * R * inner + (gid - o * inner),
             inner, 0, R, 1, &acc, &ai);
  if (kind == 3) {
    outi[oio + gid] = ai;
    if (write_val) STO(out, oo + gid, acc);
  } else {
    STO(out, oo + gid, RESULT(kind, acc));
  }
}
