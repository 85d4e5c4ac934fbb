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
#define E4 16
#define EV4 16
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

/* Rows of n elements in float4s (the last one zero-padded): registers and local tiles. */
#define LOAD_ROW4(r, p, base, n, ok, mul) \
  for (int e = 0; e < ((n) + 3) / 4; ++e) { \
    float4 x = (float4)(0.0f); \
    if (ok) { \
      x.x = LD(p, (base) + 4 * e); \
      if (4 * e + 1 < (n)) x.y = LD(p, (base) + 4 * e + 1); \
      if (4 * e + 2 < (n)) x.z = LD(p, (base) + 4 * e + 2); \
      if (4 * e + 3 < (n)) x.w = LD(p, (base) + 4 * e + 3); \
    } \
    r[e] = x * (mul); \
  }
#define STORE_ROW4(p, base, n, r, mul) \
  for (int e = 0; e < (n); ++e) { \
    const float4 x = r[e / 4] * (mul); \
    const int c = e % 4; \
    ST(p, (base) + e, c == 0 ? x.x : c == 1 ? x.y : c == 2 ? x.z : x.w); \
  }
/* Rows r0 .. r0 + BN - 1 (those below `rows`) of n elements from base into a local tile of
   float4s, n4 = ceil(n / 4) per row, zero-padded; element by element, coalesced. */
#define LOAD_TILE4(tile, p, base, r0, rows, n, n4, mul) \
  for (int t = lid; t < BN * (n4) * 4; t += BM) { \
    const int rr = t / ((n4) * 4), e = t - rr * ((n4) * 4); \
    const int r = (r0) + rr; \
    ((__local float*)(tile))[t] = \
        (r < (rows) && e < (n)) ? LD(p, (base) + (IDX)r * (n) + e) * (mul) : 0.0f; \
  }

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
void attn_bwd_dq(__global T* dq, __global const T* dout, __global const float* lse,
                 __global const float* dd, OPERAND_ARGS MASK_ARG)
{
  __local float4 ks[BN * E4], vs[BN * EV4];
  const int b = get_group_id(1), lid = get_local_id(0);
  const int row0 = get_group_id(0) * BM, i = row0 + lid;
  OPERAND_BASES(b)
  MASK_BASE(b)
  float4 qr[E4], go[EV4], acc[E4];
  const IDX rb = (IDX)b * L + i;
  LOAD_ROW4(qr, q, qb + (IDX)i * E, E, i < L, scale)
  LOAD_ROW4(go, dout, rb * EV, EV, i < L, 1.0f)
  for (int e = 0; e < E4; ++e) acc[e] = (float4)(0.0f);
  const float li = i < L ? lse[rb] : NEG_INF, di = i < L ? dd[rb] : 0.0f;
  const float lsafe = li == NEG_INF ? INFINITY : li;
  const int last = causal ? min(S, row0 + BM) : S;
  for (int j0 = 0; j0 < last; j0 += BN) {
    barrier(CLK_LOCAL_MEM_FENCE);
    LOAD_TILE4(ks, k, kb, j0, S, E, E4, 1.0f)
    LOAD_TILE4(vs, v, vb, j0, S, EV, EV4, 1.0f)
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i >= L) continue;
    for (int jj = 0; jj < BN; ++jj) {
      const int j = j0 + jj;
      if (j >= S || (causal && j > i)) continue;
      float4 d = (float4)(0.0f);
      for (int e = 0; e < E4; ++e) d = fma(qr[e], ks[jj * E4 + e], d);
      const float p = exp((d.x + d.y) + (d.z + d.w) + MASK_AT(i, j) - lsafe);
      if (p == 0.0f) continue;
      float4 dp4 = (float4)(0.0f);
      for (int e = 0; e < EV4; ++e) dp4 = fma(go[e], vs[jj * EV4 + e], dp4);
      float dp = (dp4.x + dp4.y) + (dp4.z + dp4.w);
      if (threshold) dp *= DROP(b, i, j);
      const float4 ds = (float4)(p * (dp - di));
      for (int e = 0; e < E4; ++e) acc[e] = fma(ds, ks[jj * E4 + e], acc[e]);
    }
  }
  if (i >= L) return;
  STORE_ROW4(dq, rb * E, E, acc, scale)
}
