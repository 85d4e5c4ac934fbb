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

#define TI float
#define TO float
#define ACC float
#define LMAX 256
#define LO -INFINITY
#define HI INFINITY
#define LDI(p, i) ((ACC)(p)[(i)])
#define ACC4 float4
#define LD4(p, b, i) convert_float4(((__global const float4*)((p) + (b)))[(i)])
#define STO(p, i, v) ((p)[(i)] = (TO)(v))
#define BIGGER(v, a) (isnan(v) || (v) > (a))
#define SMALLER(v, a) (isnan(v) || (v) < (a))
#define BETTER(v, vi, a, ai) (isnan(a) ? (isnan(v) && (vi) < (ai)) : (isnan(v) || ((v) > (a) || ((v) == (a) && (vi) < (ai)))))
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

__kernel void red_grp(
    __global const TI* x, const IDX xo, __global TO* out, const IDX oo,
    __global const long* xi, const IDX xio, __global long* outi, const IDX oio,
    __global const ACC* aux, const IDX auxo,
    const IDX outer, const IDX R, const IDX inner, const ACC scale,
    const int kind, const int has_aux, const int in_idx, const int write_val,
    const IDX G, const IDX chunk, volatile __global ACC* part, volatile __global int* count)
{
  __local ACC sv[LMAX];
  __local long si[LMAX];
  __local int last;
  const IDX LJ = get_local_size(0), LR = get_local_size(1);
  const IDX lj = get_local_id(0), lr = get_local_id(1);
  const IDX j = get_group_id(0) * LJ + lj;
  const IDX og = get_group_id(1);
  const IDX o = og / G;
  const IDX r0 = (og - o * G) * chunk;
  ACC acc = INIT(kind);
  long ai = LONG_MAX;
  if (j < inner) {
    const ACC m = has_aux ? aux[auxo + o * inner + j] : (ACC)0;
    accumulate(kind, x, xo, xi, xio, in_idx, has_aux, m, o * R * inner + j, inner,
               r0 + lr, min(R, r0 + chunk), LR, &acc, &ai);
  }
  const IDX slot = lr * LJ + lj;
  sv[slot] = acc;
  si[slot] = ai;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (IDX s = LR / 2; s > 0; s >>= 1) {
    if (lr < s) {
      const ACC v = sv[slot + s * LJ];
      const long vi = si[slot + s * LJ];
      const ACC a = sv[slot];
      if (kind == 0) sv[slot] = a + v;
      else if (kind == 1 ? BIGGER(v, a) : kind == 2 ? SMALLER(v, a) : BETTER(v, vi, a, si[slot])) {
        sv[slot] = v;
        si[slot] = vi;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (G > 1 && kind != 3) {  // split columns: the last group of (o, column tile) merges
    if (lr == 0 && j < inner) {
      part[og * inner + j] = sv[lj];
      GL_FENCE();
    }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    const IDX ticket = o * get_num_groups(0) + get_group_id(0);
    if (slot == 0) last = atomic_inc(&count[ticket]) == (int)(G - 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!last) return;
    GL_FENCE();
    ACC a = INIT(kind);
    if (j < inner)
      for (IDX g = lr; g < G; g += LR) a = MERGE(kind, a, part[(o * G + g) * inner + j]);
    sv[slot] = a;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (IDX s = LR / 2; s > 0; s >>= 1) {
      if (lr < s) sv[slot] = MERGE(kind, sv[slot], sv[slot + s * LJ]);
      barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lr == 0 && j < inner) STO(out, oo + o * inner + j, RESULT(kind, sv[lj]));
    if (slot == 0) count[ticket] = 0;
    return;
  }
  if (lr == 0 && j < inner) {
    const IDX dst = og * inner + j;
    if (kind == 3) {
      outi[oio + dst] = si[lj];
      if (write_val) STO(out, oo + dst, sv[lj]);
    } else {
      STO(out, oo + dst, RESULT(kind, sv[lj]));
    }
  }
}

// red_vec (in red_grp's program: both synchronize through local memory). One row of R
// contiguous elements per G work-groups (inner == 1; sum, max, min; var's squared
// deviations). Lanes stride over the row's 4-aligned body in 4-vectors, group p of the row
// taking vectors p * L + l, p * L + l + G * L, ... (two per step: two loads in flight); group
// 0 also takes the < 4 elements before the body (head) and after it (tail). Four
// accumulators (one per vector component), merged in a fixed order, then a local-memory
// tree: the result depends only on the shape, the offset and G, never on timing (bitwise
// reproducible). G > 1: each group writes its partial to part[grp] and takes a ticket from
// count[o]; the row's last group to arrive (ticket G - 1) merges the row's G partials in
// index order (lane l takes l, l + L, ...; then the tree), writes the result and resets
// count[o] to 0 for the next launch (NOTE [ Last group merges ]: one launch, same bits whichever
// group finishes last).
#define VEC_STEP(STEP, v) { STEP(a0, (v).x); STEP(a1, (v).y); STEP(a2, (v).z); STEP(a3, (v).w); }
#define VEC_LOOP(STEP) \
  IDX i = p * L + l; \
  for (; i + GL < nvec; i += 2 * GL) { \
    const ACC4 v = LD4(x, body, i), w = LD4(x, body, i + GL); \
    VEC_STEP(STEP, v) VEC_STEP(STEP, w) \
  } \
  if (i < nvec) { const ACC4 v = LD4(x, body, i); VEC_STEP(STEP, v) } \
  if (p == 0) { \
    if (l < head) STEP(a0, LDI(x, start + l)); \
    const IDX t = head + 4 * nvec + l; \
    if (l < 4 && t < R) STEP(a1, LDI(x, start + t)); \
  }
__kernel void red_vec(
    __global const TI* x, const IDX xo, __global TO* out, const IDX oo,
    __global const ACC* aux, const IDX auxo,
    const IDX R, const ACC scale, const int kind, const int has_aux, const IDX G,
    volatile __global ACC* part, volatile __global int* count)
{
  __local ACC sv[LMAX];
  __local int last;
  const IDX L = get_local_size(0), l = get_local_id(0);
  const IDX grp = get_group_id(0);
  const IDX o = grp / G, p = grp - o * G;
  const IDX start = xo + o * R;
  const IDX head = min((IDX)((4 - (start & 3)) & 3), R);
  const IDX nvec = (R - head) >> 2;
  const IDX body = start + head, GL = G * L;
  const ACC m = has_aux ? aux[auxo + o] : (ACC)0;
  ACC a0 = INIT(kind), a1 = a0, a2 = a0, a3 = a0;
  if (kind == 0) {
    if (has_aux) { VEC_LOOP(STEP_SQ) } else { VEC_LOOP(STEP_SUM) }
  } else if (kind == 1) {
    VEC_LOOP(STEP_MAX)
  } else {
    VEC_LOOP(STEP_MIN)
  }
  sv[l] = MERGE(kind, MERGE(kind, a0, a1), MERGE(kind, a2, a3));
  barrier(CLK_LOCAL_MEM_FENCE);
  for (IDX s = L / 2; s > 0; s >>= 1) {
    if (l < s) sv[l] = MERGE(kind, sv[l], sv[l + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (G == 1) {
    if (l == 0) STO(out, oo + o, RESULT(kind, sv[0]));
    return;
  }
  if (l == 0) {
    part[grp] = sv[0];
    GL_FENCE();  // the partial is visible device-wide before the ticket is taken
    last = atomic_inc(&count[o]) == (int)(G - 1);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (!last) return;
  GL_FENCE();
  ACC a = INIT(kind);
  for (IDX q = l; q < G; q += L) a = MERGE(kind, a, part[o * G + q]);
  sv[l] = a;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (IDX s = L / 2; s > 0; s >>= 1) {
    if (l < s) sv[l] = MERGE(kind, sv[l], sv[l + s]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) {
    STO(out, oo + o, RESULT(kind, sv[0]));
    count[o] = 0;
  }
}
