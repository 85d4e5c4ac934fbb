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
#define E 64
#define EV 64
#define BM 64
#define BN 32
#define MASK_KIND 0

#define NEG_INF (-INFINITY)
#define BIDX(b, d, m) (((b) / (d)) % (m))

/* Philox4x32-10, as netcl.ops.random's generator: word w of stream (k0, k1) is lane w % 4
   of the block w / 4. */
inline uint philox_word(const ulong w, uint k0, uint k1) {
  uint c0 = (uint)(w >> 2), c1 = (uint)(w >> 34), c2 = 0u, c3 = 0u;
  for (int r = 0; r < 10; ++r) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const uint hi0 = mul_hi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint hi1 = mul_hi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
  }
  const uint lane = (uint)(w & 3);
  return lane == 0 ? c0 : lane == 1 ? c1 : lane == 2 ? c2 : c3;
}

/* The dropout factor of element (b, i, j): 0 or 1 / (1 - p). */
#define DROP(b, i, j) \
  ((philox_word(doff + ((ulong)(b) * (ulong)L + (ulong)(i)) * (ulong)S + (ulong)(j), \
                k0, k1) >> 8) >= threshold ? dscale : 0.0f)

/* The mask term of score (i, j) of batch b: 0 (take part), -inf (masked) or the float. */
#if MASK_KIND == 1
#define MASK_ARG , __global const uchar* mask, const IDX mo, const int md, const int mm, \
  const IDX mbs, const IDX mrs, const IDX mcs
#define MASK_BASE(b) const IDX mbase = mo + (IDX)BIDX(b, md, mm) * mbs;
#define MASK_AT(i, j) (mask[mbase + (IDX)(i) * mrs + (IDX)(j) * mcs] ? 0.0f : NEG_INF)
#elif MASK_KIND == 2
#define MASK_ARG , __global const T* mask, const IDX mo, const int md, const int mm, \
  const IDX mbs, const IDX mrs, const IDX mcs
#define MASK_BASE(b) const IDX mbase = mo + (IDX)BIDX(b, md, mm) * mbs;
#define MASK_AT(i, j) LD(mask, mbase + (IDX)(i) * mrs + (IDX)(j) * mcs)
#else
#define MASK_ARG
#define MASK_BASE(b)
#define MASK_AT(i, j) 0.0f
#endif

/* The operands' batch bases (batch index (b / div) % mod of each, NOTE above). */
#define OPERAND_ARGS \
  __global const T* q, const IDX qo, const int qd, const int qm, \
  __global const T* k, const IDX ko, const int kd, const int km, \
  __global const T* v, const IDX vo, const int vd, const int vm, \
  const int L, const int S, const float scale, const int causal, \
  const uint k0, const uint k1, const ulong doff, const uint threshold, const float dscale
#define OPERAND_BASES(b) \
  const IDX qb = qo + (IDX)BIDX(b, qd, qm) * (IDX)L * E; \
  const IDX kb = ko + (IDX)BIDX(b, kd, km) * (IDX)S * E; \
  const IDX vb = vo + (IDX)BIDX(b, vd, vm) * (IDX)S * EV;

__kernel __attribute__((reqd_work_group_size(BM, 1, 1)))
void attn_bwd_dkdv(__global T* dk, __global T* dv, __global const T* dout,
                   __global const float* lse, __global const float* dd, OPERAND_ARGS MASK_ARG)
{
  __local float qs[BN * E], gs[BN * EV], ls[BN], ds_[BN];
  const int b = get_group_id(1), lid = get_local_id(0);
  const int col0 = get_group_id(0) * BM, j = col0 + lid;
  OPERAND_BASES(b)
  MASK_BASE(b)
  float kr[E], vr[EV], ak[E], av[EV];
  for (int e = 0; e < E; ++e) { kr[e] = j < S ? LD(k, kb + (IDX)j * E + e) : 0.0f;
                                ak[e] = 0.0f; }
  for (int e = 0; e < EV; ++e) { vr[e] = j < S ? LD(v, vb + (IDX)j * EV + e) : 0.0f;
                                 av[e] = 0.0f; }
  const int first = causal ? (min(col0, L) / BN) * BN : 0;
  for (int i0 = first; i0 < L; i0 += BN) {
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = lid; t < BN * E; t += BM) {
      const int i = i0 + t / E;
      qs[t] = i < L ? LD(q, qb + (IDX)i0 * E + t) * scale : 0.0f;
    }
    for (int t = lid; t < BN * EV; t += BM) {
      const int i = i0 + t / EV;
      gs[t] = i < L ? LD(dout, ((IDX)b * L + i0) * EV + t) : 0.0f;
    }
    for (int t = lid; t < BN; t += BM) {
      const int i = i0 + t;
      const float li = i < L ? lse[(IDX)b * L + i] : NEG_INF;
      ls[t] = li == NEG_INF ? INFINITY : li;
      ds_[t] = i < L ? dd[(IDX)b * L + i] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (j >= S) continue;
    for (int ii = 0; ii < BN; ++ii) {
      const int i = i0 + ii;
      if (i >= L || (causal && j > i)) continue;
      float d = 0.0f;
      for (int e = 0; e < E; ++e) d += qs[ii * E + e] * kr[e];
      const float p = exp(d + MASK_AT(i, j) - ls[ii]);
      if (p == 0.0f) continue;
      const float keep = threshold ? DROP(b, i, j) : 1.0f;
      float dp = 0.0f;
      for (int e = 0; e < EV; ++e) {
        const float g = gs[ii * EV + e];
        av[e] += p * keep * g;
        dp += g * vr[e];
      }
      const float ds = p * (dp * keep - ds_[ii]);
      for (int e = 0; e < E; ++e) ak[e] += ds * qs[ii * E + e];
    }
  }
  if (j >= S) return;
  const IDX cb = (IDX)b * S + j;
  for (int e = 0; e < E; ++e) ST(dk, cb * E + e, ak[e]);
  for (int e = 0; e < EV; ++e) ST(dv, cb * EV + e, av[e]);
}
