"""OpenCL C sources of the float16 tensor-core attention backward (inline PTX ``mma.sync``):
``attn_bwd_dq_mma`` and ``attn_bwd_dkdv_mma`` (the split kernels, one program) and
``attn_bwd_fused_mma`` with its dQ workspace kernels (NOTE [ Fused attention backward ]).
Text only: :func:`netcl.ops._attention_mma.mma_source` puts them after the common tiles,
PTX helpers and shuffles, which they use.
"""

from __future__ import annotations

import os

__all__ = ["BACKWARD", "BACKWARD_MACROS", "FUSED", "FUSED_FIX", "REDS", "SPLIT_FIX", "mma_red"]

BACKWARD_MACROS = """
/* The warp's rows of dK (scaled) and dV from the accumulators ak and av (keys past S are
   not stored) */
#define STORE_DKDV \\
  for (int r = 0; r < 2; ++r) { \\
    const int j = col0 + wr + r * 8; \\
    if (j < S) { \\
      const IDX cb = (IDX)b * S + j; \\
      for (int n = 0; n < E / 8; ++n) { \\
        const int d = n * 8 + 2 * t4; \\
        ST(dk, cb * E + d, ak[n][2 * r] * scale); \\
        ST(dk, cb * E + d + 1, ak[n][2 * r + 1] * scale); \\
      } \\
      for (int n = 0; n < EV / 8; ++n) { \\
        const int d = n * 8 + 2 * t4; \\
        ST(dv, cb * EV + d, av[n][2 * r]); \\
        ST(dv, cb * EV + d + 1, av[n][2 * r + 1]); \\
      } \\
    } \\
  }
/* The scores of a 16 x BN warp tile from A fragments a ((w)/16 of them) and the rows of the
   tile at `off` (w wide) as B: acc = a b^T. */
#define SCORES(acc, a, off, w) \\
  for (int n = 0; n < BN / 8; ++n) { \\
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f; } \\
  for (int n = 0; n < BN / 8; n += 2) { \\
    for (int s = 0; s < (w) / 16; ++s) { \\
      uint b0_[2], b1_[2]; \\
      FRAG_BK(b0_, b1_, off, CW(w), n * 8, s); \\
      MMA_16816(acc[n], a[s], b0_); \\
      MMA_16816(acc[n + 1], a[s], b1_); \\
    } \\
  }
/* acc (w/8 tiles) += P (the 16 x BN C tiles in p, packed to float16 A fragments) times the
   BN x w tile at `off`. */
#define ACCUMULATE(acc, p, off, w) \\
  for (int s = 0; s < BN / 16; ++s) { \\
    uint pa[4]; \\
    pa[0] = pack_h2(p[2 * s][0], p[2 * s][1]); \\
    pa[1] = pack_h2(p[2 * s][2], p[2 * s][3]); \\
    pa[2] = pack_h2(p[2 * s + 1][0], p[2 * s + 1][1]); \\
    pa[3] = pack_h2(p[2 * s + 1][2], p[2 * s + 1][3]); \\
    for (int n = 0; n < (w) / 8; n += 2) { \\
      uint b0_[2], b1_[2]; \\
      FRAG_BV(b0_, b1_, off, CW(w), s * 16, n * 8); \\
      MMA_16816(acc[n], pa, b0_); \\
      MMA_16816(acc[n + 1], pa, b1_); \\
    } \\
  }
#define ZERO_TILES(acc, n_) \\
  for (int n = 0; n < (n_); ++n) { \\
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f; }
/* lse (base 2) and D of query rows i0 .. i0 + BN - 1 into slot st of lt and dt (plain loads
   and stores) */
#define STAGE_ROW_STATS(st, i0) \\
  for (int t = tid; t < BN; t += NT) { \\
    const int i = (i0) + t; \\
    const float x = i < L ? lse[(IDX)b * L + i] : NEG_INF; \\
    lt[st][t] = x == NEG_INF ? INFINITY : x * LOG2E; \\
    dt[st][t] = i < L ? dd[(IDX)b * L + i] : 0.0f; \\
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
#define KEY_ROW_DS(in) { \\
    const int j = col0 + wr + (c >> 1) * 8, il = n * 8 + 2 * t4 + (c & 1), i = i0 + il; \\
    const float p = in(i, j) \\
      ? EXP2(st[n][c] * scale2 + MASK_AT(i, j) * LOG2E - lt[st_][il]) : 0.0f; \\
    st[n][c] = p; \\
    dpt[n][c] = p * (dpt[n][c] - dt[st_][il]); \\
  }
"""

# the split kernels' local array: K and V (or Q and dO) rows over both stages
SPLIT_FIX = "#define FIX_CH (BM * (CW(E) + CW(EV)))\n"

BACKWARD = """
/* One row per query (of BM) and one column per key (of BN) tile: dS = P (dP - D) with
   P = exp(S * scale + mask - lse), dQ = scale * dS K. K and V tiles stream through the two
   stages as in attn_fwd_mma; Q and dO arrive over stage 1 first. */
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_bwd_dq_mma(__global T* dq, __global const T* dout, __global const float* lse,
                     __global const float* dd, OPERAND_ARGS MASK_ARG)
{
  TILES_HEAD
  const int row0 = get_group_id(0) * BM;
  OPERAND_BASES(b)
  MASK_BASE(b)
  __global const ushort* qh = (__global const ushort*)q;
  __global const ushort* kh = (__global const ushort*)k;
  __global const ushort* vh = (__global const ushort*)v;
  __global const ushort* gh = (__global const ushort*)dout;
  const int last = causal ? min(S, row0 + BM) : S, nt = (last + BN - 1) / BN;
  STAGE_ROWS(0, qh, qb, row0, BM, L, E)
  STAGE_ROWS(BM * CW(E), gh, (IDX)b * L * EV, row0, BM, L, EV)
  CP_WAIT_ALL();
  barrier(CLK_LOCAL_MEM_FENCE);
  uint qa[E / 16][4], ga[EV / 16][4];
  for (int s = 0; s < E / 16; ++s) FRAG_A(qa[s], 0, CW(E), w0, s);
  for (int s = 0; s < EV / 16; ++s) FRAG_A(ga[s], BM * CW(E), CW(EV), w0, s);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (nt > 0) {
    STAGE_ROWS(0, kh, kb, 0, BN, S, E)
    STAGE_ROWS(BN * CW(E), vh, vb, 0, BN, S, EV)
  }
  CP_COMMIT();
  float li[2], di[2];
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + wr + r * 8;
    const float x = i < L ? lse[(IDX)b * L + i] : NEG_INF;
    li[r] = x == NEG_INF ? INFINITY : x * LOG2E;
    di[r] = i < L ? dd[(IDX)b * L + i] : 0.0f;
  }
  float acc[E / 8][4];
  ZERO_TILES(acc, E / 8)
  const float scale2 = scale * LOG2E;
  for (int jt = 0; jt < nt; ++jt) {
    const int j0 = jt * BN, koff = (jt & 1) * STAGE_CH, voff = koff + BN * CW(E);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (jt + 1 < nt) {
      const int nx = STAGE_CH - koff;
      STAGE_ROWS(nx, kh, kb, j0 + BN, BN, S, E)
      STAGE_ROWS(nx + BN * CW(E), vh, vb, j0 + BN, BN, S, EV)
    }
    CP_COMMIT();
    CP_WAIT();
    barrier(CLK_LOCAL_MEM_FENCE);
    float sc[BN / 8][4], dp[BN / 8][4];
    SCORES(sc, qa, koff, E)
    SCORES(dp, ga, voff, EV)
    if (EDGE_TILE(j0, row0 + w0)) {
      #pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        #pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int i = row0 + wr + (c >> 1) * 8, j = j0 + n * 8 + 2 * t4 + (c & 1);
          const float p = IN_EDGE(i, j)
            ? EXP2(sc[n][c] * scale2 + MASK_AT(i, j) * LOG2E - li[c >> 1]) : 0.0f;
          sc[n][c] = p * (dp[n][c] - di[c >> 1]);
        }
      }
    } else {
      #pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        #pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int i = row0 + wr + (c >> 1) * 8, j = j0 + n * 8 + 2 * t4 + (c & 1);
          const float p = IN_INNER(i, j)
            ? EXP2(sc[n][c] * scale2 + MASK_AT(i, j) * LOG2E - li[c >> 1]) : 0.0f;
          sc[n][c] = p * (dp[n][c] - di[c >> 1]);
        }
      }
    }
    ACCUMULATE(acc, sc, koff, E)
  }
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + wr + r * 8;
    if (i < L) {
      const IDX ob = ((IDX)b * L + i) * E;
      for (int n = 0; n < E / 8; ++n) {
        const int d = n * 8 + 2 * t4;
        ST(dq, ob + d, acc[n][2 * r] * scale);
        ST(dq, ob + d + 1, acc[n][2 * r + 1] * scale);
      }
    }
  }
}

/* One row per key (of BM) and one column per query (of BN) tile: dV = P^T dO,
   dK = scale * dS^T Q. Q and dO tiles (with their lse and D) stream through the two stages;
   K and V arrive over stage 1 first. */
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_bwd_dkdv_mma(__global T* dk, __global T* dv, __global const T* dout,
                       __global const float* lse, __global const float* dd,
                       OPERAND_ARGS MASK_ARG)
{
  __local float lt[2][BN], dt[2][BN];
  TILES_HEAD
  const int col0 = get_group_id(0) * BM;
  OPERAND_BASES(b)
  MASK_BASE(b)
  __global const ushort* qh = (__global const ushort*)q;
  __global const ushort* kh = (__global const ushort*)k;
  __global const ushort* vh = (__global const ushort*)v;
  __global const ushort* gh = (__global const ushort*)dout;
  const int first = causal ? (min(col0, L) / BN) * BN : 0, nt = (L - first + BN - 1) / BN;
  STAGE_ROWS(0, kh, kb, col0, BM, S, E)
  STAGE_ROWS(BM * CW(E), vh, vb, col0, BM, S, EV)
  CP_WAIT_ALL();
  barrier(CLK_LOCAL_MEM_FENCE);
  uint ka[E / 16][4], va[EV / 16][4];
  for (int s = 0; s < E / 16; ++s) FRAG_A(ka[s], 0, CW(E), w0, s);
  for (int s = 0; s < EV / 16; ++s) FRAG_A(va[s], BM * CW(E), CW(EV), w0, s);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (nt > 0) {
    STAGE_ROWS(0, qh, qb, first, BN, L, E)
    STAGE_ROWS(BN * CW(E), gh, (IDX)b * L * EV, first, BN, L, EV)
    STAGE_ROW_STATS(0, first)
  }
  CP_COMMIT();
  float ak[E / 8][4], av[EV / 8][4];
  ZERO_TILES(ak, E / 8)
  ZERO_TILES(av, EV / 8)
  const float scale2 = scale * LOG2E;
  for (int it = 0; it < nt; ++it) {
    const int i0 = first + it * BN, st_ = it & 1;
    const int qoff = st_ * STAGE_CH, goff = qoff + BN * CW(E);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (it + 1 < nt) {
      const int nx = STAGE_CH - qoff;
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
    /* the transposed tile: keys j are the warp's rows, queries i its columns; it is inner
       when every query is below L and (causal) at or past the warp's last key */
    if (i0 + BN > L || (causal && i0 < col0 + w0 + 15)) {
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
    ACCUMULATE(av, st, goff, EV)
    ACCUMULATE(ak, dpt, qoff, E)
  }
  STORE_DKDV
}
"""


# NOTE [ Fused attention backward ]
# attn_bwd_fused_mma does what attn_bwd_dkdv_mma does (a work-group of eight warps per
# (batch, BM = 128 keys), 16 keys a warp; Q and dO tiles streamed through two cp.async stages;
# P^T and dS^T recomputed per tile; dV += P^T dO and dK += dS^T Q in registers) and, from the
# same dS, the group's share of dQ: dQ[query tile] += dS K. The split kernels compute P and
# dP twice (attn_bwd_dq_mma: S, dP, dS K; attn_bwd_dkdv_mma: S^T, dP^T, P^T dO, dS^T Q: seven
# matmuls per tile pair); the fused one does FlashAttention-2's five. H200, L 4096, B*H 32,
# E 64: dkdv 1359 us + dq 959 us, each ~200 TFLOP/s, before it.
# - The transpose. A warp holds dS^T of its 16 keys as mma C fragments (keys x queries); dQ
#   needs dS (queries x keys) as the A operand and a sum over all BM keys of the group. The
#   warps store their rows of dS^T to local memory as float16 (the words they pack for dK's
#   A fragments anyway: 32-bit stores, conflict-free under the 4-chunk swizzle); after a
#   barrier they split the BN x E tile of dQ into 16 x 16 pieces (one a warp at E 64), each
#   summing over the BM keys with A from the stored dS^T by ldmatrix .trans (FRAG_BV's
#   addressing: the (key, query) rows transposed are dS's A fragment) and B from K. Each
#   element of dQ gets one atomic add per work-group, FlashAttention-2's way; per-warp
#   transposes (movmatrix) would need no local tile but 8x the atomics.
# - Local memory, within NVIDIA's 48 KiB of static local memory: K stays for the whole kernel
#   (BM x E float16: 16 KiB at E 64) beside two stages of Q and dO, the dS^T tile (BM x BN)
#   and two slots of lse and D. With 64-query tiles that is 16 + 32 + 16 + 1 = 65 KiB; with
#   BN = 32 (FUSED_BLOCK_QUERIES) 16 + 16 + 8 + 0.5 = 40.5 KiB (mma_fused_local_bytes), so
#   the fused kernel steps 32 query rows at a time where the split ones step 64. V's rows pass
#   through the stages' place into registers before the loop.
# - Work per tile and warp at E 64: 16 + 16 mma for S^T and dP^T, 16 + 16 for dV and dK, 16
#   for dQ (80; 48 ldmatrix.x4), three barriers (the other stage free, this stage landed,
#   dS^T stored). Registers: K and V fragments 32, dK and dV accumulators 64, S^T and dP^T 32
#   (half the split kernel's 64 at BN 64), packed dS^T 8, a dQ piece 8: about 150-170 a
#   work-item with addresses (attn_bwd_dkdv_mma: about 200).
# - The atomics. dQ goes to a float32 workspace (B, L, E), zeroed by attn_bwd_dq_zero before
#   and scaled by the softmax scale into float16 by attn_bwd_dq_convert after (where
#   attn_bwd_dq_mma applies the scale); each element takes S / BM adds (32 at S 4096,
#   FlashAttention-2's count with 128-key blocks). On NVIDIA: red.global.add.f32 (no value
#   returned, so the warp does not wait; the L2 adds). A lane's two adjacent floats could go
#   as one red.global.add.v2.f32 (PTX ISA 8.1, sm_90): ATTN_RED_V2, set by
#   NETCL_ATTN_MMA_RED=v2, off by default since nothing here can run it and a driver with an
#   older PTX would refuse the program (the split kernels then run, warned once). Emulated:
#   a compare-and-swap loop on the float's bits (OpenCL 1.2 atomic_cmpxchg), as PoCL runs
#   work-groups on parallel threads.
# - Order. Float adds in the order the hardware takes them make dQ's low bits vary from run
#   to run (dK and dV do not). NETCL_ATTENTION_BWD=split (or fused_backward's bwd="split")
#   runs the two kernels, the same bits every run, and is the default until the fused
#   kernel has been checked and timed on a GPU (NETCL_ATTENTION_BWD=fused opts in).
# - Edges. Keys past S are zero rows of K whose scores inner tiles do not mask (the split
#   kernels never store their results); a group whose keys cross S takes every tile as an
#   edge tile, so their dS is 0 and nothing of theirs reaches dQ.
# GPU figures are the lead's to measure: ``scripts/gpu/attn_profile.py --bwd fused split``
# times both beside torch SDPA with each kernel's device time.
FUSED_FIX = """
/* attn_bwd_fused_mma's local array (NOTE [ Fused attention backward ]): the work-group's BM
   rows of K for the whole kernel from chunk 0, the two stages of Q and dO tiles (BN query
   rows) from K_CH, the dS^T tile (BM keys x BN queries, float16) from DS_OFF; the group's
   rows of V pass through the stages' place before the loop */
#define K_CH (BM * CW(E))
#define DS_OFF (K_CH + 2 * STAGE_CH)
#define FIX_CH (DS_OFF + BM * CW(BN) > K_CH + BM * CW(EV) ? DS_OFF + BM * CW(BN) \\
                                                         : K_CH + BM * CW(EV))
/* word (r, e) of the tile at `off` (w = 8 cw elements wide) in sA as uints */
#define WORD_IX(off, cw, r, e) ((CHUNK(off, cw, r, (e) >> 3) * 8 + ((e) & 7)) >> 1)
/* the BN x E tile of dQ a work-group adds per query tile, in pieces of 16 x 16, one per warp
   (a warp may take several, or none) */
#define DQ_PIECES ((BN / 16) * (E / 16))
/* acc (w/8 tiles) += the 16 x BN A fragments already packed to float16 words (pw[n][r]: row
   g + 8 r, columns 8 n + 2 t4 and the next) times the BN x w tile at `off` */
#define ACCUMULATE_PACKED(acc, pw, off, w) \\
  for (int s = 0; s < BN / 16; ++s) { \\
    const uint pa[4] = {pw[2 * s][0], pw[2 * s][1], pw[2 * s + 1][0], pw[2 * s + 1][1]}; \\
    for (int n = 0; n < (w) / 8; n += 2) { \\
      uint b0_[2], b1_[2]; \\
      FRAG_BV(b0_, b1_, off, CW(w), s * 16, n * 8); \\
      MMA_16816(acc[n], pa, b0_); \\
      MMA_16816(acc[n + 1], pa, b1_); \\
    } \\
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
#define RED_ADD2(p, x, y) __asm__ volatile("red.global.add.v2.f32 [%0], {%1, %2};" \\
                                           :: "l"((ulong)(p)), "f"(x), "f"(y))
#else
#define RED_ADD2(p, x, y) do { \\
    __asm__ volatile("red.global.add.f32 [%0], %1;" :: "l"((ulong)(p)), "f"(x)); \\
    __asm__ volatile("red.global.add.f32 [%0], %1;" :: "l"((ulong)((p) + 1)), "f"(y)); \\
  } while (0)
#endif
"""

FUSED = """
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
"""


# NETCL_ATTN_MMA_RED: the fused backward's atomics on NVIDIA (NOTE [ Fused attention backward ])
REDS = ("f32", "v2")


def mma_red() -> str:
    """The atomic adds ``NETCL_ATTN_MMA_RED`` names for attn_bwd_fused_mma on NVIDIA (read when
    its program is first built): ``f32`` (the default: two ``red.global.add.f32``) or ``v2``
    (one ``red.global.add.v2.f32``: PTX ISA 8.1 and sm_90; never run on a GPU by the tests).

    Examples:
        >>> mma_red() in REDS
        True
    """
    name = os.environ.get("NETCL_ATTN_MMA_RED", "").strip().lower() or "f32"
    if name not in REDS:
        raise ValueError(f"scaled_dot_product_attention: NETCL_ATTN_MMA_RED must be one of "
                         f"{', '.join(REDS)}, got {name!r}")
    return name
