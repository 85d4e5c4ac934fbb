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
#define E 64
#define EV 64
#define E4 16
#define EV4 16
#define BM 128
#define BN 32
#define MASK_KIND 1

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
#define NT 256
#define EMULATED
#define ATTN_ASYNC
#define ATTN_LDSM

#ifdef PACK_PTX
/* two floats to float16 (round to nearest even), a in the low half: one cvt */
inline uint pack_h2(const float a, const float b) {
  uint r;
  __asm__("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
}
#else
inline uint pack_h2(const float a, const float b) {
  ushort h[2];
  vstore_half2_rte((float2)(a, b), 0, (__private half*)h);
  return (uint)h[0] | ((uint)h[1] << 16);
}
#endif

/* NOTE [ Attention local tiles ]: every tile lives in sA, an array of 16-byte chunks; row r
   of a tile w elements wide is CW(w) chunks from chunk `off`, chunk c stored at SWZ (NOTE
   [ Local memory swizzle ] of ._matmul_mma_source), so the eight rows of an ldmatrix phase
   (and of a scalar fragment load) fall in eight bank groups. Stage 0 holds K (or Q) and V
   (or dO) tiles of BN rows from chunk 0, stage 1 from STAGE_CH; the rows a work-group keeps
   in registers (Q, or K and V, BM of them) arrive over both before the loop. */
#define CW(w) ((w) / 8)
#define SWZ(r, c, cw) ((c) ^ ((cw) >= 8 ? ((r) & 7) : (cw) == 4 ? (((r) >> 1) & 3) \
                                                                : (((r) >> 2) & 1)))
#define CHUNK(off, cw, r, c) ((off) + (r) * (cw) + SWZ((r), (c), (cw)))
#define HALF_AT(off, cw, r, e) ((uint)sh[CHUNK(off, cw, r, (e) >> 3) * 8 + ((e) & 7)])
#define WORD_AT(off, cw, r, e) \
  (((__local const uint*)sh)[(CHUNK(off, cw, r, (e) >> 3) * 8 + ((e) & 7)) >> 1])
#define STAGE_CH (BN * (CW(E) + CW(EV)))
#define SMEM_CHUNKS (FIX_CH > 2 * STAGE_CH ? FIX_CH : 2 * STAGE_CH)
/* the emulated PTX (NOTE [ Emulated PTX ]) addresses sA as its one stage of A */
#define STAGES 1
#define A_CHUNKS SMEM_CHUNKS
#define SHARED_ADDR(p) ((uint)(size_t)(p))
#define sB sA
#ifdef EMULATED
#define CP_WAIT_ALL() do { } while (0)
#else
#define CP_WAIT_ALL() __asm__ volatile("cp.async.wait_all;" ::: "memory")
#endif

/* One 16-byte chunk from global `src` (zeros unless ok) to chunk `ch` of sA: cp.async, or
   through registers. `p` is a valid address of the same buffer (cp.async's zero fill reads
   no byte of it). */
#ifdef ATTN_ASYNC
#define COPY16(ch, src, ok, p) CP_ASYNC16(s0 + (uint)(ch) * 16u, (ok) ? (src) : (p), (ok) ? 16 : 0)
#else
#define COPY16(ch, src, ok, p) sA[ch] = (ok) ? *(__global const uint4*)(src) : (uint4)(0u)
#endif
/* Rows r0 .. r0 + n - 1 (zeros from `rows` on) of w float16 elements into the tile at `off`. */
#define STAGE_ROWS(off, p, base, r0, n, rows, w) \
  for (int t = tid; t < (n) * CW(w); t += NT) { \
    const int rr = t / CW(w), c8 = t - rr * CW(w); \
    COPY16(CHUNK(off, CW(w), rr, c8), (p) + (base) + (IDX)((r0) + rr) * (w) + c8 * 8, \
           (r0) + rr < (rows), (p)); \
  }

/* Fragments (NOTE [ mma.sync fragments ] of ._matmul_mma_source) from the tile at `off`:
   FRAG_A the A fragment of rows r0 .. r0 + 15, k-step s; FRAG_BK the B fragments of k-step s
   for columns n0 .. n0 + 7 (b0) and n0 + 8 .. n0 + 15 (b1) of a tile stored (n, k), as K in
   Q K^T; FRAG_BV those of rows k0 .. k0 + 15, columns d0 .. d0 + 15 of a tile stored (k, n),
   as V in P V. ldmatrix .x4 (.trans for FRAG_BV), or 32- and 16-bit local loads. */
#ifdef ATTN_LDSM
#define FRAG_A(a, off, cw, r0, s) \
  LDSM_X4((a)[0], (a)[1], (a)[2], (a)[3], \
          s0 + (uint)CHUNK(off, cw, (r0) + (lane & 15), (s) * 2 + (lane >> 4)) * 16u)
#define FRAG_BK(b0, b1, off, cw, n0, s) \
  LDSM_X4((b0)[0], (b0)[1], (b1)[0], (b1)[1], \
          s0 + (uint)CHUNK(off, cw, (n0) + (lane & 7) + ((lane >> 4) << 3), \
                           (s) * 2 + ((lane >> 3) & 1)) * 16u)
#define FRAG_BV(b0, b1, off, cw, k0, d0) \
  LDSM_X4_T((b0)[0], (b0)[1], (b1)[0], (b1)[1], \
            s0 + (uint)CHUNK(off, cw, (k0) + (lane & 15), ((d0) >> 3) + (lane >> 4)) * 16u)
#else
#define FRAG_A(a, off, cw, r0, s) do { \
    const int e_ = (s) * 16 + 2 * t4; \
    (a)[0] = WORD_AT(off, cw, (r0) + g, e_); \
    (a)[1] = WORD_AT(off, cw, (r0) + g + 8, e_); \
    (a)[2] = WORD_AT(off, cw, (r0) + g, e_ + 8); \
    (a)[3] = WORD_AT(off, cw, (r0) + g + 8, e_ + 8); \
  } while (0)
#define FRAG_BK(b0, b1, off, cw, n0, s) do { \
    const int e_ = (s) * 16 + 2 * t4; \
    (b0)[0] = WORD_AT(off, cw, (n0) + g, e_); \
    (b0)[1] = WORD_AT(off, cw, (n0) + g, e_ + 8); \
    (b1)[0] = WORD_AT(off, cw, (n0) + g + 8, e_); \
    (b1)[1] = WORD_AT(off, cw, (n0) + g + 8, e_ + 8); \
  } while (0)
#define BV_WORD(off, cw, k, d) (HALF_AT(off, cw, k, d) | (HALF_AT(off, cw, (k) + 1, d) << 16))
#define FRAG_BV(b0, b1, off, cw, k0, d0) do { \
    const int k_ = (k0) + 2 * t4; \
    (b0)[0] = BV_WORD(off, cw, k_, (d0) + g); \
    (b0)[1] = BV_WORD(off, cw, k_ + 8, (d0) + g); \
    (b1)[0] = BV_WORD(off, cw, k_, (d0) + g + 8); \
    (b1)[1] = BV_WORD(off, cw, k_ + 8, (d0) + g + 8); \
  } while (0)
#endif
/* Scores go to the base-2 domain (scale and mask times log2 e) so each exponential is one
   ex2. Whether score (i, j) counts: IN_EDGE in a key tile that crosses S or (causal) the
   diagonal of the warp's rows, IN_INNER elsewhere (only rows past L, whose mask row is not
   there, are left out; their results are never stored). */
#define LOG2E 1.4426950408889634f
#ifdef EMULATED
#define EXP2(x) exp2(x)  /* PoCL's native_exp2 put lse 2e-4 off */
#else
#define EXP2(x) native_exp2(x)  /* ex2.approx: relative error ~2^-22 */
#endif
#define LN2 0.6931471805599453f
#define IN_EDGE(i, j) ((i) < L && (j) < S && (!causal || (j) <= (i)))
#if MASK_KIND == 0
#define IN_INNER(i, j) 1
#else
#define IN_INNER(i, j) ((i) < L)
#endif
#define EDGE_TILE(j0, r0) ((j0) + BN > S || (causal && (j0) + BN - 1 > (r0)))

/* The local array and its shared-window address, the lane coordinates. */
#define TILES_HEAD \
  __local uint4 sA[SMEM_CHUNKS]; \
  EMU_LOCALS \
  SHFL_LOCALS \
  __local const ushort* sh = (__local const ushort*)sA; \
  const uint s0 = SHARED_ADDR(sA); \
  const int b = get_group_id(1), tid = get_local_id(0); \
  const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3; \
  const int w0 = warp * 16, wr = w0 + g;
#define EMU_LOCALS __local uint emu_addr[NT]; __local uint emu_frag[NT * 6];
#define EMU_A_BYTES (STAGES * A_CHUNKS * 16)
#undef SHARED_ADDR
#define SHARED_ADDR(p) ((p) == sA ? 0u : (uint)EMU_A_BYTES)
#define EMU_WORD(o) ((o) < EMU_A_BYTES ? ((__local const uint*)sA)[(o) / 4] \
                                       : ((__local const uint*)sB)[((o) - EMU_A_BYTES) / 4])
#define EMU_HALF(o) ((uint)((o) < EMU_A_BYTES ? ((__local const ushort*)sA)[(o) / 2] \
                            : ((__local const ushort*)sB)[((o) - EMU_A_BYTES) / 2]))
inline float emu_h2f(const uint h)
{
    const uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        return (s ? -1.0f : 1.0f) * (float)m * 5.9604645e-8f;
    }
    return as_float(s | (e == 31 ? 0x7f800000u : (e + 112) << 23) | (m << 13));
}
#define CP_ASYNC16(dst, src, bytes) do { \
    const uint4 v_ = (bytes) ? *(__global const uint4*)(src) : (uint4)(0); \
    const uint o_ = (dst); \
    if (o_ < EMU_A_BYTES) { sA[o_ / 16] = v_; } else { sB[(o_ - EMU_A_BYTES) / 16] = v_; } \
} while (0)
#define CP_COMMIT() do { } while (0)
#define CP_WAIT() do { } while (0)
#define EMU_SHARE_ADDR(addr) do { barrier(CLK_LOCAL_MEM_FENCE); emu_addr[tid] = (addr); \
    barrier(CLK_LOCAL_MEM_FENCE); } while (0)
#define EMU_ROW(j, i) emu_addr[(tid & ~31) + (j) * 8 + (i)]
#define EMU_ROWS(j) EMU_WORD(EMU_ROW(j, lane >> 2) + (lane & 3) * 4)
#define EMU_COLS(j) (EMU_HALF(EMU_ROW(j, 2 * (lane & 3)) + (lane >> 2) * 2) \
                     | (EMU_HALF(EMU_ROW(j, 2 * (lane & 3) + 1) + (lane >> 2) * 2) << 16))
#define LDSM_X4(r0, r1, r2, r3, addr) do { EMU_SHARE_ADDR(addr); \
    r0 = EMU_ROWS(0); r1 = EMU_ROWS(1); r2 = EMU_ROWS(2); r3 = EMU_ROWS(3); } while (0)
#define LDSM_X4_T(r0, r1, r2, r3, addr) do { EMU_SHARE_ADDR(addr); \
    r0 = EMU_COLS(0); r1 = EMU_COLS(1); r2 = EMU_COLS(2); r3 = EMU_COLS(3); } while (0)
/* element (r, k) of the warp's A fragment and (k, n) of its B fragment */
#define EMU_A(r, k) emu_h2f((emu_frag[((tid & ~31) + ((r) & 7) * 4 + ((k) & 7) / 2) * 6 \
    + ((r) >> 3) + 2 * ((k) >> 3)] >> (16 * ((k) & 1))) & 0xffffu)
#define EMU_B(k, n) emu_h2f((emu_frag[((tid & ~31) + (n) * 4 + ((k) & 7) / 2) * 6 + 4 \
    + ((k) >> 3)] >> (16 * ((k) & 1))) & 0xffffu)
#define MMA_16816(d, a, b) do { \
    barrier(CLK_LOCAL_MEM_FENCE); \
    for (int j_ = 0; j_ < 4; ++j_) { emu_frag[tid * 6 + j_] = (a)[j_]; } \
    emu_frag[tid * 6 + 4] = (b)[0]; \
    emu_frag[tid * 6 + 5] = (b)[1]; \
    barrier(CLK_LOCAL_MEM_FENCE); \
    for (int i_ = 0; i_ < 4; ++i_) { \
        const int r_ = (lane >> 2) + (i_ >> 1) * 8, n_ = (lane & 3) * 2 + (i_ & 1); \
        float s_ = 0.0f; \
        for (int k_ = 0; k_ < 16; ++k_) { s_ += EMU_A(r_, k_) * EMU_B(k_, n_); } \
        (d)[i_] += s_; \
    } \
} while (0)

#define SHFL_LOCALS __local float shfl_scratch[NT];
inline float emu_shfl_xor(const float v, const int mask, __local float* sc, const int tid) {
  barrier(CLK_LOCAL_MEM_FENCE);
  sc[tid] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  const float r = sc[tid ^ mask];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}
#define SHFL_XOR(v, mask) emu_shfl_xor((v), (mask), shfl_scratch, tid)

/* attn_bwd_fused_mma's local array (NOTE [ Fused attention backward ]): the work-group's BM
   rows of K for the whole kernel from chunk 0, the two stages of Q and dO tiles (BN query
   rows) from K_CH, the dS^T tile (BM keys x BN queries, float16) from DS_OFF; the group's
   rows of V pass through the stages' place before the loop */
#define K_CH (BM * CW(E))
#define DS_OFF (K_CH + 2 * STAGE_CH)
#define FIX_CH (DS_OFF + BM * CW(BN) > K_CH + BM * CW(EV) ? DS_OFF + BM * CW(BN) \
                                                         : K_CH + BM * CW(EV))
/* word (r, e) of the tile at `off` (w = 8 cw elements wide) in sA as uints */
#define WORD_IX(off, cw, r, e) ((CHUNK(off, cw, r, (e) >> 3) * 8 + ((e) & 7)) >> 1)
/* the BN x E tile of dQ a work-group adds per query tile, in pieces of 16 x 16, one per warp
   (a warp may take several, or none) */
#define DQ_PIECES ((BN / 16) * (E / 16))
/* acc (w/8 tiles) += the 16 x BN A fragments already packed to float16 words (pw[n][r]: row
   g + 8 r, columns 8 n + 2 t4 and the next) times the BN x w tile at `off` */
#define ACCUMULATE_PACKED(acc, pw, off, w) \
  for (int s = 0; s < BN / 16; ++s) { \
    const uint pa[4] = {pw[2 * s][0], pw[2 * s][1], pw[2 * s + 1][0], pw[2 * s + 1][1]}; \
    for (int n = 0; n < (w) / 8; n += 2) { \
      uint b0_[2], b1_[2]; \
      FRAG_BV(b0_, b1_, off, CW(w), s * 16, n * 8); \
      MMA_16816(acc[n], pa, b0_); \
      MMA_16816(acc[n + 1], pa, b1_); \
    } \
  }

/* RED_ADD2(p, x, y): p[0] += x, p[1] += y in global memory, atomically, nothing returned.
   NVIDIA: red.global.add.f32, fire and forget (the L2 does the adding); with ATTN_RED_V2 one
   red.global.add.v2.f32 (PTX ISA 8.1, sm_90: off by default, never run here). Emulated: a
   compare-and-swap loop on the float's bits (OpenCL 1.2 atomic_cmpxchg). */
#ifdef EMULATED
inline void red_add_f32(__global float* p, const float v) {
  volatile __global int* ip = (volatile __global int*)p;
  int old = *ip, seen;
  do {
    seen = old;
    old = atomic_cmpxchg(ip, seen, as_int(as_float(seen) + v));
  } while (old != seen);
}
#define RED_ADD2(p, x, y) do { red_add_f32((p), (x)); red_add_f32((p) + 1, (y)); } while (0)
#elif defined(ATTN_RED_V2)
#define RED_ADD2(p, x, y) __asm__ volatile("red.global.add.v2.f32 [%0], {%1, %2};" \
                                           :: "l"((ulong)(p)), "f"(x), "f"(y))
#else
#define RED_ADD2(p, x, y) do { \
    __asm__ volatile("red.global.add.f32 [%0], %1;" :: "l"((ulong)(p)), "f"(x)); \
    __asm__ volatile("red.global.add.f32 [%0], %1;" :: "l"((ulong)((p) + 1)), "f"(y)); \
  } while (0)
#endif

/* The warp's rows of dK (scaled) and dV from the accumulators ak and av (keys past S are
   not stored) */
#define STORE_DKDV \
  for (int r = 0; r < 2; ++r) { \
    const int j = col0 + wr + r * 8; \
    if (j < S) { \
      const IDX cb = (IDX)b * S + j; \
      for (int n = 0; n < E / 8; ++n) { \
        const int d = n * 8 + 2 * t4; \
        ST(dk, cb * E + d, ak[n][2 * r] * scale); \
        ST(dk, cb * E + d + 1, ak[n][2 * r + 1] * scale); \
      } \
      for (int n = 0; n < EV / 8; ++n) { \
        const int d = n * 8 + 2 * t4; \
        ST(dv, cb * EV + d, av[n][2 * r]); \
        ST(dv, cb * EV + d + 1, av[n][2 * r + 1]); \
      } \
    } \
  }
/* The scores of a 16 x BN warp tile from A fragments a ((w)/16 of them) and the rows of the
   tile at `off` (w wide) as B: acc = a b^T. */
#define SCORES(acc, a, off, w) \
  for (int n = 0; n < BN / 8; ++n) { \
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f; } \
  for (int n = 0; n < BN / 8; n += 2) { \
    for (int s = 0; s < (w) / 16; ++s) { \
      uint b0_[2], b1_[2]; \
      FRAG_BK(b0_, b1_, off, CW(w), n * 8, s); \
      MMA_16816(acc[n], a[s], b0_); \
      MMA_16816(acc[n + 1], a[s], b1_); \
    } \
  }
/* acc (w/8 tiles) += P (the 16 x BN C tiles in p, packed to float16 A fragments) times the
   BN x w tile at `off`. */
#define ACCUMULATE(acc, p, off, w) \
  for (int s = 0; s < BN / 16; ++s) { \
    uint pa[4]; \
    pa[0] = pack_h2(p[2 * s][0], p[2 * s][1]); \
    pa[1] = pack_h2(p[2 * s][2], p[2 * s][3]); \
    pa[2] = pack_h2(p[2 * s + 1][0], p[2 * s + 1][1]); \
    pa[3] = pack_h2(p[2 * s + 1][2], p[2 * s + 1][3]); \
    for (int n = 0; n < (w) / 8; n += 2) { \
      uint b0_[2], b1_[2]; \
      FRAG_BV(b0_, b1_, off, CW(w), s * 16, n * 8); \
      MMA_16816(acc[n], pa, b0_); \
      MMA_16816(acc[n + 1], pa, b1_); \
    } \
  }
#define ZERO_TILES(acc, n_) \
  for (int n = 0; n < (n_); ++n) { \
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f; }
/* lse (base 2) and D of query rows i0 .. i0 + BN - 1 into slot st of lt and dt (plain loads
   and stores) */
#define STAGE_ROW_STATS(st, i0) \
  for (int t = tid; t < BN; t += NT) { \
    const int i = (i0) + t; \
    const float x = i < L ? lse[(IDX)b * L + i] : NEG_INF; \
    lt[st][t] = x == NEG_INF ? INFINITY : x * LOG2E; \
    dt[st][t] = i < L ? dd[(IDX)b * L + i] : 0.0f; \
  }
/* In a key-row tile (keys j the warp's rows, queries i its columns) away from every edge:
   keys past S get results that are never stored (zero K and V rows); a mask has no entry
   for them */
#if MASK_KIND == 0
#define IN_INNER_T(i, j) 1
#else
#define IN_INNER_T(i, j) ((j) < S)
#endif
/* Element (n, c) of a key-row tile (keys j the warp's rows, queries i = i0 + il its columns;
   st the scores K Q^T, dpt the products V dO^T; lse and D in slot st_): st becomes P^T,
   dpt dS^T = P^T (dP^T - D), zero where `in` says (i, j) takes no part */
#define KEY_ROW_DS(in) { \
    const int j = col0 + wr + (c >> 1) * 8, il = n * 8 + 2 * t4 + (c & 1), i = i0 + il; \
    const float p = in(i, j) \
      ? EXP2(st[n][c] * scale2 + MASK_AT(i, j) * LOG2E - lt[st_][il]) : 0.0f; \
    st[n][c] = p; \
    dpt[n][c] = p * (dpt[n][c] - dt[st_][il]); \
  }

/* One row per key (of BM) and one column per query (of BN) tile, as attn_bwd_dkdv_mma:
   dV = P^T dO, dK = scale * dS^T Q; and per query tile dS K added into the float32 dQ
   workspace dqw (scaled by attn_bwd_dq_convert). K stays in local memory from chunk 0. */
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_bwd_fused_mma(__global T* dk, __global T* dv, __global float* dqw,
                        __global const T* dout, __global const float* lse,
                        __global const float* dd, OPERAND_ARGS MASK_ARG)
{
  __local float lt[2][BN], dt[2][BN];
  TILES_HEAD
  __local uint* sw = (__local uint*)sA;
  const int col0 = get_group_id(0) * BM;
  OPERAND_BASES(b)
  MASK_BASE(b)
  __global const ushort* qh = (__global const ushort*)q;
  __global const ushort* kh = (__global const ushort*)k;
  __global const ushort* vh = (__global const ushort*)v;
  __global const ushort* gh = (__global const ushort*)dout;
  const int first = causal ? (min(col0, L) / BN) * BN : 0, nt = (L - first + BN - 1) / BN;
  STAGE_ROWS(0, kh, kb, col0, BM, S, E)
  STAGE_ROWS(K_CH, vh, vb, col0, BM, S, EV)
  CP_WAIT_ALL();
  barrier(CLK_LOCAL_MEM_FENCE);
  uint ka[E / 16][4], va[EV / 16][4];
  for (int s = 0; s < E / 16; ++s) FRAG_A(ka[s], 0, CW(E), w0, s);
  for (int s = 0; s < EV / 16; ++s) FRAG_A(va[s], K_CH, CW(EV), w0, s);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (nt > 0) {
    STAGE_ROWS(K_CH, qh, qb, first, BN, L, E)
    STAGE_ROWS(K_CH + BN * CW(E), gh, (IDX)b * L * EV, first, BN, L, EV)
    STAGE_ROW_STATS(0, first)
  }
  CP_COMMIT();
  float ak[E / 8][4], av[EV / 8][4];
  ZERO_TILES(ak, E / 8)
  ZERO_TILES(av, EV / 8)
  const float scale2 = scale * LOG2E;
  /* a group whose keys cross S takes every tile as an edge tile: the zero rows of K past S
     must get dS = 0, or dQ would take 0 * (what their scores give) */
  const int keys_edge = col0 + BM > S;
  for (int it = 0; it < nt; ++it) {
    const int i0 = first + it * BN, st_ = it & 1;
    const int qoff = K_CH + st_ * STAGE_CH, goff = qoff + BN * CW(E);
    /* every warp has left the other stage and the dS tile */
    barrier(CLK_LOCAL_MEM_FENCE);
    if (it + 1 < nt) {
      const int nx = K_CH + (st_ ^ 1) * STAGE_CH;
      STAGE_ROWS(nx, qh, qb, i0 + BN, BN, L, E)
      STAGE_ROWS(nx + BN * CW(E), gh, (IDX)b * L * EV, i0 + BN, BN, L, EV)
      STAGE_ROW_STATS(st_ ^ 1, i0 + BN)
    }
    CP_COMMIT();
    CP_WAIT();
    barrier(CLK_LOCAL_MEM_FENCE);
    float st[BN / 8][4], dpt[BN / 8][4];
    SCORES(st, ka, qoff, E)
    SCORES(dpt, va, goff, EV)
    if (keys_edge || i0 + BN > L || (causal && i0 < col0 + w0 + 15)) {
      #pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        #pragma unroll
        for (int c = 0; c < 4; ++c) {
          KEY_ROW_DS(IN_EDGE)
        }
      }
    } else {
      #pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        #pragma unroll
        for (int c = 0; c < 4; ++c) {
          KEY_ROW_DS(IN_INNER_T)
        }
      }
    }
    /* dS^T in float16, once: the A fragments of dK's mma and the warp's 16 rows of the dS^T
       tile (32-bit stores, conflict-free under the swizzle) */
    uint dsw[BN / 8][2];
    #pragma unroll
    for (int n = 0; n < BN / 8; ++n) {
      dsw[n][0] = pack_h2(dpt[n][0], dpt[n][1]);
      dsw[n][1] = pack_h2(dpt[n][2], dpt[n][3]);
      sw[WORD_IX(DS_OFF, CW(BN), wr, n * 8 + 2 * t4)] = dsw[n][0];
      sw[WORD_IX(DS_OFF, CW(BN), wr + 8, n * 8 + 2 * t4)] = dsw[n][1];
    }
    ACCUMULATE(av, st, goff, EV)
    ACCUMULATE_PACKED(ak, dsw, qoff, E)
    barrier(CLK_LOCAL_MEM_FENCE);
    /* dQ[i0 .., :] += dS K over the group's BM keys: A from the dS^T tile (ldmatrix .trans of
       the stored rows, as FRAG_BV), B from K; one red per element and work-group. Emulated,
       every warp runs the same number of pieces (the emulation's barriers), only real ones
       add. */
    for (int p0 = 0; p0 < DQ_PIECES; p0 += NT / 32) {
      const int pc = p0 + warp;
#ifndef EMULATED
      if (pc >= DQ_PIECES) break;
#endif
      const int pv = pc < DQ_PIECES ? pc : 0;
      const int qr = (pv / (E / 16)) * 16, d0 = (pv % (E / 16)) * 16;
      float dqa[2][4];
      ZERO_TILES(dqa, 2)
      #pragma unroll
      for (int ks = 0; ks < BM / 16; ++ks) {
        uint x[2], y[2], kf0[2], kf1[2];
        FRAG_BV(x, y, DS_OFF, CW(BN), ks * 16, qr);
        const uint a[4] = {x[0], y[0], x[1], y[1]};
        FRAG_BV(kf0, kf1, 0, CW(E), ks * 16, d0);
        MMA_16816(dqa[0], a, kf0);
        MMA_16816(dqa[1], a, kf1);
      }
      #pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int i = i0 + qr + g + r * 8;
        if (pc < DQ_PIECES && i < L) {
          __global float* p = dqw + ((IDX)b * L + i) * E + d0 + 2 * t4;
          RED_ADD2(p, dqa[0][2 * r], dqa[0][2 * r + 1]);
          RED_ADD2(p + 8, dqa[1][2 * r], dqa[1][2 * r + 1]);
        }
      }
    }
  }
  STORE_DKDV
}

/* The float32 dQ workspace, four floats an item (B L E is a multiple of 16): zeroed before
   attn_bwd_fused_mma, scaled into dq after it. */
__kernel void attn_bwd_dq_zero(__global float* dqw, const IDX n4)
{
  const IDX i = get_global_id(0);
  if (i < n4) vstore4((float4)(0.0f), i, dqw);
}

__kernel void attn_bwd_dq_convert(__global T* dq, __global const float* dqw, const float scale,
                                  const IDX n4)
{
  const IDX i = get_global_id(0);
  if (i < n4) vstore_half4_rte(vload4(i, dqw) * scale, i, dq);
}
