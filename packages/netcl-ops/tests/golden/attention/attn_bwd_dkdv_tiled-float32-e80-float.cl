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
#define E 80
#define EV 48
#define E4 20
#define EV4 12
#define RM 2
#define CN 2
#define MASK_KIND 2

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

#define UNROLL _Pragma("unroll")  /* register blocks: indices known at compile time */
#define TY 8
#define TX 16
#define NT (TY * TX)
#define GR (TY * RM)
#define GC (TX * CN)
#define ES (E4 | 1)
#define EVS (EV4 | 1)
#define PS4 (GC / 4 + 1)
#define OE ((E4 + TX - 1) / TX)
#define OEV ((EV4 + TX - 1) / TX)

/* Rows r0 .. r0 + cnt - 1 (those below `rows`) of n elements from base into a local tile of
   float4 rows (stride st float4s), zero-padded, times mul; element by element, coalesced. */
#define TILE(tile, p, base, r0, rows, cnt, n, n4, st, mul) \
  for (int t = lid; t < (cnt) * (n4) * 4; t += NT) { \
    const int rr = t / ((n4) * 4), e = t - rr * ((n4) * 4); \
    const int r = (r0) + rr; \
    ((__local float*)(tile))[rr * (st) * 4 + e] = \
        (r < (rows) && e < (n)) ? LD(p, (base) + (IDX)r * (n) + e) * (mul) : 0.0f; \
  }

/* The RM x CN block s[r][c] = A row (ty + TY r) . B row (tx + TX c) over n4 float4s. */
#define SCORES(s, A, sa, B, sb, n4) \
  UNROLL for (int r = 0; r < RM; ++r) \
    UNROLL for (int c = 0; c < CN; ++c) s[r][c] = 0.0f; \
  for (int e = 0; e < (n4); ++e) { \
    float4 a_[RM], b_[CN]; \
    UNROLL for (int r = 0; r < RM; ++r) a_[r] = A[(ty + TY * r) * (sa) + e]; \
    UNROLL for (int c = 0; c < CN; ++c) b_[c] = B[(tx + TX * c) * (sb) + e]; \
    UNROLL for (int r = 0; r < RM; ++r) \
      UNROLL for (int c = 0; c < CN; ++c) { \
        float x = fma(a_[r].x, b_[c].x, s[r][c]); \
        x = fma(a_[r].y, b_[c].y, x); \
        x = fma(a_[r].z, b_[c].z, x); \
        s[r][c] = fma(a_[r].w, b_[c].w, x); \
      } \
  }

/* acc[r][cc] += sum over k < GC of P[ty + TY r][k] B[k][tx + TX cc] (float4 columns below
   n4): P a score tile (PS4 float4s a row), B a tile of float4 rows of stride sb. */
#define ACCUM(acc, P, B, sb, n4, oc) \
  for (int k4 = 0; k4 < GC / 4; ++k4) { \
    float4 p_[RM]; \
    UNROLL for (int r = 0; r < RM; ++r) p_[r] = P[(ty + TY * r) * PS4 + k4]; \
    UNROLL for (int cc = 0; cc < (oc); ++cc) { \
      const int c4 = tx + TX * cc; \
      if (c4 < (n4)) { \
        const float4 b0 = B[(4 * k4) * (sb) + c4], b1 = B[(4 * k4 + 1) * (sb) + c4]; \
        const float4 b2 = B[(4 * k4 + 2) * (sb) + c4], b3 = B[(4 * k4 + 3) * (sb) + c4]; \
        UNROLL for (int r = 0; r < RM; ++r) { \
          float4 x = fma((float4)(p_[r].x), b0, acc[r][cc]); \
          x = fma((float4)(p_[r].y), b1, x); \
          x = fma((float4)(p_[r].z), b2, x); \
          acc[r][cc] = fma((float4)(p_[r].w), b3, x); \
        } \
      } \
    } \
  }
#define ZERO(acc, oc) \
  UNROLL for (int r = 0; r < RM; ++r) \
    UNROLL for (int cc = 0; cc < (oc); ++cc) acc[r][cc] = (float4)(0.0f);
/* Row (first + ty + TY r) of n elements at base + row * n from acc[r][.] times mul. */
#define STORE_ROWS(p, base, first, rows, n, n4, acc, oc, mul) \
  UNROLL for (int r = 0; r < RM; ++r) { \
    const int i = (first) + ty + TY * r; \
    if (i >= (rows)) continue; \
    UNROLL for (int cc = 0; cc < (oc); ++cc) { \
      const int c4 = tx + TX * cc; \
      if (c4 >= (n4)) continue; \
      const float4 x = acc[r][cc] * (mul); \
      const IDX o = (base) + (IDX)i * (n) + 4 * c4; \
      ST(p, o, x.x); \
      if (4 * c4 + 1 < (n)) ST(p, o + 1, x.y); \
      if (4 * c4 + 2 < (n)) ST(p, o + 2, x.z); \
      if (4 * c4 + 3 < (n)) ST(p, o + 3, x.w); \
    } \
  }
#define PAT(P, r, c) ((__local float*)(P))[(r) * PS4 * 4 + (c)]

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_bwd_dkdv_tiled(__global T* dk, __global T* dv, __global const T* dout,
                         __global const float* lse, __global const float* dd,
                         OPERAND_ARGS MASK_ARG)
{
  __local float4 ks[GR * ES], vs[GR * EVS], qs[GC * ES], gs[GC * EVS];
  __local float4 pt[GR * PS4], dst[GR * PS4];
  __local float ls[GC], dl[GC];
  const int b = get_group_id(1), lid = get_local_id(0), ty = lid / TX, tx = lid % TX;
  const int col0 = get_group_id(0) * GR;
  OPERAND_BASES(b)
  MASK_BASE(b)
  TILE(ks, k, kb, col0, S, GR, E, E4, ES, 1.0f)
  TILE(vs, v, vb, col0, S, GR, EV, EV4, EVS, 1.0f)
  float4 ak[RM][OE], av[RM][OEV];
  ZERO(ak, OE)
  ZERO(av, OEV)
  const int first = causal ? (min(col0, L) / GC) * GC : 0;
  const IDX gb = (IDX)b * L * EV;
  for (int i0 = first; i0 < L; i0 += GC) {
    barrier(CLK_LOCAL_MEM_FENCE);
    TILE(qs, q, qb, i0, L, GC, E, E4, ES, scale)
    TILE(gs, dout, gb, i0, L, GC, EV, EV4, EVS, 1.0f)
    for (int t = lid; t < GC; t += NT) {
      const int i = i0 + t;
      const float li = i < L ? lse[(IDX)b * L + i] : NEG_INF;
      ls[t] = li == NEG_INF ? INFINITY : li;
      dl[t] = i < L ? dd[(IDX)b * L + i] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float s[RM][CN], dp[RM][CN];
    SCORES(s, ks, ES, qs, ES, E4)
    SCORES(dp, vs, EVS, gs, EVS, EV4)
    UNROLL for (int r = 0; r < RM; ++r) {
      const int jj = ty + TY * r, j = col0 + jj;
      UNROLL for (int c = 0; c < CN; ++c) {
        const int ii = tx + TX * c, i = i0 + ii;
        float pk = 0.0f, ds = 0.0f;
        if (i < L && j < S && (!causal || j <= i)) {
          const float p = exp(s[r][c] + MASK_AT(i, j) - ls[ii]);
          if (p != 0.0f) {
            const float keep = threshold ? DROP(b, i, j) : 1.0f;
            pk = p * keep;
            ds = p * (dp[r][c] * keep - dl[ii]);
          }
        }
        PAT(pt, jj, ii) = pk;
        PAT(dst, jj, ii) = ds;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    ACCUM(av, pt, gs, EVS, EV4, OEV)
    ACCUM(ak, dst, qs, ES, E4, OE)
  }
  STORE_ROWS(dk, (IDX)b * S * E, col0, S, E, E4, ak, OE, 1.0f)
  STORE_ROWS(dv, (IDX)b * S * EV, col0, S, EV, EV4, av, OEV, 1.0f)
}
