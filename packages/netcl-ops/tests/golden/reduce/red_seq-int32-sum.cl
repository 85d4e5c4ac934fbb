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
#define T long
#define CT long
#define LD(p, i) ((CT)(p)[(i)])
#define ST(p, i, v) ((p)[(i)] = (T)(v))
#define IDX int

#define TI int
#define TO long
#define ACC long
#define LMAX 256
#define LO LONG_MIN
#define HI LONG_MAX
#define LDI(p, i) ((ACC)(p)[(i)])
#define ACC4 long4
#define LD4(p, b, i) convert_long4(((__global const int4*)((p) + (b)))[(i)])
#define STO(p, i, v) ((p)[(i)] = (TO)(v))
#define BIGGER(v, a) ((v) > (a))
#define SMALLER(v, a) ((v) < (a))
#define BETTER(v, vi, a, ai) ((v) > (a) || ((v) == (a) && (vi) < (ai)))
#define GL_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)

#define STEP_SUM(a, v) ((a) += (v))
#define STEP_SQ(a, v) { const ACC d_ = (v) - m; (a) += d_ * d_; }
#define STEP_MAX(a, v) { const ACC w_ = (v); if (BIGGER(w_, a)) (a) = w_; }
#define STEP_MIN(a, v) { const ACC w_ = (v); if (SMALLER(w_, a)) (a) = w_; }
#define MERGE(kind, a, b) \
  ((kind) == 0 ? (a) + (b) : ((kind) == 1 ? BIGGER(b, a) : SMALLER(b, a)) ? (b) : (a))
// Elements r0, r0 + rs, ... < r1 of a column (stride apart): four loads in flight per step
// into four accumulators, merged in a fixed order (the same bits on every run). The three
// extra accumulators start from a: accumulate is always entered with the kind's identity.
#define UNROLLED4(STEP) { \
    ACC b1 = a, b2 = a, b3 = a; \
    IDX r = r0; \
    for (; r + 3 * rs < r1; r += 4 * rs) { \
      const ACC v0 = LDI(x, xo + base + r * stride); \
      const ACC v1 = LDI(x, xo + base + (r + rs) * stride); \
      const ACC v2 = LDI(x, xo + base + (r + 2 * rs) * stride); \
      const ACC v3 = LDI(x, xo + base + (r + 3 * rs) * stride); \
      STEP(a, v0); STEP(b1, v1); STEP(b2, v2); STEP(b3, v3); \
    } \
    for (; r < r1; r += rs) STEP(a, LDI(x, xo + base + r * stride)); \
    a = MERGE(kind, MERGE(kind, a, b1), MERGE(kind, b2, b3)); \
  }

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
        UNROLLED4(STEP_SQ)
      } else {
        UNROLLED4(STEP_SUM)
      }
      break;
    case 1:
      UNROLLED4(STEP_MAX)
      break;
    case 2:
      UNROLLED4(STEP_MIN)
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
