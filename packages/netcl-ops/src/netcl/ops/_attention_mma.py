"""The float16 attention forward on NVIDIA tensor cores (inline PTX ``mma.sync.m16n8k16``).

# NOTE [ Tensor-core attention forward ]
# attn_fwd_mma: one work-group of eight warps per (batch, 128 query rows), 16 rows a warp.
# The warp keeps its rows of Q as mma A fragments for the whole kernel; per tile of BN keys
# (64, or 32 for head dims over 64) K and V are staged in local memory as float16 bits, the
# warp computes its 16 x BN scores with BN/8 x E/16 mma.sync (f16 in, f32 out), scales and
# masks them, folds them into the online softmax (row max over the four lanes that hold a
# row by two butterfly shuffles; the row sums stay per lane and are added up once at the end,
# as in FlashAttention-2), packs the probabilities into float16 A fragments in registers (the
# C layout of m16n8 is the A layout of m16n8k16, so nothing goes through local memory) and
# accumulates P V with EV/8 x BN/16 more. Exponentials are native_exp (ex2.approx, relative
# error ~2^-22: far below the float16 rounding the probabilities get anyway). It writes the
# output in float16 and the row log-sum-exp in float32, as attn_fwd does. Dropout is not
# fused here (dropout_p > 0 runs attn_fwd). Head dims must be multiples of 16 up to 128.
# Every PTX statement has a plain-C twin (``emulate``, NOTE [ Emulated PTX ] in
# ._matmul_mma_source: mma, ldmatrix and cp.async through local memory, shuffles through a
# local scratch), so CPU OpenCL devices test the tiling, swizzle, fragment maps, staging
# order, masking and softmax; only the GPU runs the instructions. H100, B*H 32, E 64, beside
# torch SDPA float16 (FlashAttention-2) in the same run: the first version (2-byte global
# loads, unpadded local rows: the K fragment loads were 8-way bank conflicts) ran the forward
# at 18-28 TFLOP/s (0.05-0.13x); 16-byte loads into rows padded by 16 bytes, cvt.rn.f16x2
# packing and native_exp gave 72-94 (0.20-0.26x), forward+backward 50-79 at L 1024-4096
# (0.18-0.45x; 0.53x at L 512, where launches dominate both). Staging V transposed (16-bit
# scattered local stores for half the P V fragment loads) measured slower, 58-77 TFLOP/s.
# Since then the tiles follow the tensor-core GEMM (NOTE [ Attention local tiles ]): K and V
# (Q and dO in attn_bwd_dkdv_mma) stream through two stages by cp.async, tile j + 1's copies
# issued before tile j's mma work (one wait_group and two barriers per tile), rows
# XOR-swizzled instead of padded, two B fragments (or one A) per ldmatrix.x4 (Q, K rows:
# plain; V, dO, K as the B of P V / dS K: .trans) instead of two 32-bit or four 16-bit local
# loads each; the rows a work-group keeps in registers (Q; Q and dO; K and V) arrive over both
# stages before the loop. Work-groups are 8 warps (MMA_ROWS 128 query rows, or keys in
# attn_bwd_dkdv_mma), so every K/V tile copied serves twice the rows: per byte copied the
# forward does 128 FLOP at E 64, where the 64-row groups did 64, the intensity of the GEMM's
# 128 x 128 tile that NOTE [ What bounds the tensor-core GEMM ] found copy-bound at 231
# TFLOP/s. Local memory per work-group: forward 32 KiB at every head dim (E 64: 64-key stages
# of 16 KiB, Q 16 KiB over them; E 128: 32-key stages, Q 32 KiB), backward 33 KiB at E 64 (Q
# and dO, or K and V, 32 KiB; lse and D 1 KiB), against 27-34 KiB forward and 36 KiB backward
# before (:func:`mma_local_bytes`). Registers per work-item as before (about 110 forward at E
# 64, 160-200 backward); 256-item groups may use 255. Expected: the copies no longer stall the
# warps between tiles, fragment loads take a quarter of the instructions, and the copy traffic
# per FLOP halves; the GPU figures are the lead's to measure. For that comparison
# ``NETCL_ATTN_MMA_LOADS`` (:func:`mma_loads`: ``fast``, ``sync``, ``scalar``, ``legacy``)
# forces register copies and/or scalar fragment loads and ``NETCL_ATTN_MMA_WARPS=4`` the
# 64-row groups (both read once per process). Scores are kept in base 2 (scale and mask times
# log2 e, one ex2 per exponential, no multiply), and key tiles that cross neither S nor the
# causal diagonal of the warp's rows skip the per-score bounds tests (left: the row test where
# a mask is read). Not done: 128-key tiles (two stages of 128 x 64 K and V need 64 KiB of the
# 48). The tensor cores are used where :func:`netcl.ops._matmul_mma.mma_available` says the
# device runs mma.sync (NVIDIA's driver, probed once; ``NETCL_MMA=0`` turns it off).
"""

from __future__ import annotations

import os

from ._attention_mma_backward import (
    BACKWARD,
    BACKWARD_MACROS,
    FUSED,
    FUSED_FIX,
    SPLIT_FIX,
    mma_red,
)
from ._matmul_mma_source import emulated_ptx, hardware_ptx

__all__ = [
    "FUSED_BLOCK_QUERIES",
    "LOADS",
    "MMA_ROWS",
    "MMA_THREADS",
    "mma_backward_ok",
    "mma_block_keys",
    "mma_fused_local_bytes",
    "mma_head_ok",
    "mma_loads",
    "mma_local_bytes",
    "mma_source",
]



def _warps() -> int:
    """Warps per work-group, ``NETCL_ATTN_MMA_WARPS`` (4 or 8, default 8), read at import."""
    text = os.environ.get("NETCL_ATTN_MMA_WARPS", "").strip() or "8"
    if text not in ("4", "8"):
        raise ValueError(f"scaled_dot_product_attention: NETCL_ATTN_MMA_WARPS must be 4 or 8, "
                         f"got {text!r}")
    return int(text)


_WARPS = _warps()
MMA_THREADS = 32 * _WARPS
MMA_ROWS = 16 * _WARPS  # query rows (or keys) per work-group, 16 per warp

_SHUFFLE_HW = """
inline float shfl_xor(const float v, const int mask) {
  float r;
  __asm__ volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;"
                   : "=f"(r) : "f"(v), "r"(mask));
  return r;
}
#define SHFL_XOR(v, mask) shfl_xor((v), (mask))
#define SHFL_LOCALS
"""

_SHUFFLE_EMU = """
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
"""

_TILES = """
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
#define SWZ(r, c, cw) ((c) ^ ((cw) >= 8 ? ((r) & 7) : (cw) == 4 ? (((r) >> 1) & 3) \\
                                                                : (((r) >> 2) & 1)))
#define CHUNK(off, cw, r, c) ((off) + (r) * (cw) + SWZ((r), (c), (cw)))
#define HALF_AT(off, cw, r, e) ((uint)sh[CHUNK(off, cw, r, (e) >> 3) * 8 + ((e) & 7)])
#define WORD_AT(off, cw, r, e) \\
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
#define STAGE_ROWS(off, p, base, r0, n, rows, w) \\
  for (int t = tid; t < (n) * CW(w); t += NT) { \\
    const int rr = t / CW(w), c8 = t - rr * CW(w); \\
    COPY16(CHUNK(off, CW(w), rr, c8), (p) + (base) + (IDX)((r0) + rr) * (w) + c8 * 8, \\
           (r0) + rr < (rows), (p)); \\
  }

/* Fragments (NOTE [ mma.sync fragments ] of ._matmul_mma_source) from the tile at `off`:
   FRAG_A the A fragment of rows r0 .. r0 + 15, k-step s; FRAG_BK the B fragments of k-step s
   for columns n0 .. n0 + 7 (b0) and n0 + 8 .. n0 + 15 (b1) of a tile stored (n, k), as K in
   Q K^T; FRAG_BV those of rows k0 .. k0 + 15, columns d0 .. d0 + 15 of a tile stored (k, n),
   as V in P V. ldmatrix .x4 (.trans for FRAG_BV), or 32- and 16-bit local loads. */
#ifdef ATTN_LDSM
#define FRAG_A(a, off, cw, r0, s) \\
  LDSM_X4((a)[0], (a)[1], (a)[2], (a)[3], \\
          s0 + (uint)CHUNK(off, cw, (r0) + (lane & 15), (s) * 2 + (lane >> 4)) * 16u)
#define FRAG_BK(b0, b1, off, cw, n0, s) \\
  LDSM_X4((b0)[0], (b0)[1], (b1)[0], (b1)[1], \\
          s0 + (uint)CHUNK(off, cw, (n0) + (lane & 7) + ((lane >> 4) << 3), \\
                           (s) * 2 + ((lane >> 3) & 1)) * 16u)
#define FRAG_BV(b0, b1, off, cw, k0, d0) \\
  LDSM_X4_T((b0)[0], (b0)[1], (b1)[0], (b1)[1], \\
            s0 + (uint)CHUNK(off, cw, (k0) + (lane & 15), ((d0) >> 3) + (lane >> 4)) * 16u)
#else
#define FRAG_A(a, off, cw, r0, s) do { \\
    const int e_ = (s) * 16 + 2 * t4; \\
    (a)[0] = WORD_AT(off, cw, (r0) + g, e_); \\
    (a)[1] = WORD_AT(off, cw, (r0) + g + 8, e_); \\
    (a)[2] = WORD_AT(off, cw, (r0) + g, e_ + 8); \\
    (a)[3] = WORD_AT(off, cw, (r0) + g + 8, e_ + 8); \\
  } while (0)
#define FRAG_BK(b0, b1, off, cw, n0, s) do { \\
    const int e_ = (s) * 16 + 2 * t4; \\
    (b0)[0] = WORD_AT(off, cw, (n0) + g, e_); \\
    (b0)[1] = WORD_AT(off, cw, (n0) + g, e_ + 8); \\
    (b1)[0] = WORD_AT(off, cw, (n0) + g + 8, e_); \\
    (b1)[1] = WORD_AT(off, cw, (n0) + g + 8, e_ + 8); \\
  } while (0)
#define BV_WORD(off, cw, k, d) (HALF_AT(off, cw, k, d) | (HALF_AT(off, cw, (k) + 1, d) << 16))
#define FRAG_BV(b0, b1, off, cw, k0, d0) do { \\
    const int k_ = (k0) + 2 * t4; \\
    (b0)[0] = BV_WORD(off, cw, k_, (d0) + g); \\
    (b0)[1] = BV_WORD(off, cw, k_ + 8, (d0) + g); \\
    (b1)[0] = BV_WORD(off, cw, k_, (d0) + g + 8); \\
    (b1)[1] = BV_WORD(off, cw, k_ + 8, (d0) + g + 8); \\
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
#define TILES_HEAD \\
  __local uint4 sA[SMEM_CHUNKS]; \\
  EMU_LOCALS \\
  SHFL_LOCALS \\
  __local const ushort* sh = (__local const ushort*)sA; \\
  const uint s0 = SHARED_ADDR(sA); \\
  const int b = get_group_id(1), tid = get_local_id(0); \\
  const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3; \\
  const int w0 = warp * 16, wr = w0 + g;
"""

_KERNEL = """
#define FIX_CH (BM * CW(E))
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_fwd_mma(__global T* out, __global float* lse, OPERAND_ARGS MASK_ARG)
{
  TILES_HEAD
  const int row0 = get_group_id(0) * BM;
  OPERAND_BASES(b)
  MASK_BASE(b)
  __global const ushort* qh = (__global const ushort*)q;
  __global const ushort* kh = (__global const ushort*)k;
  __global const ushort* vh = (__global const ushort*)v;
  const int last = causal ? min(S, row0 + BM) : S, nt = (last + BN - 1) / BN;
  /* Q over both stages, into registers; then key tile 0 into stage 0. Tile jt + 1 goes into
     the other stage before tile jt's mma work, which waits for all but the newest group. */
  STAGE_ROWS(0, qh, qb, row0, BM, L, E)
  CP_WAIT_ALL();
  barrier(CLK_LOCAL_MEM_FENCE);
  uint qa[E / 16][4];
  #pragma unroll
  for (int s = 0; s < E / 16; ++s) FRAG_A(qa[s], 0, CW(E), w0, s);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (nt > 0) {
    STAGE_ROWS(0, kh, kb, 0, BN, S, E)
    STAGE_ROWS(BN * CW(E), vh, vb, 0, BN, S, EV)
  }
  CP_COMMIT();
  float o[EV / 8][4];
  #pragma unroll
  for (int n = 0; n < EV / 8; ++n) { o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f; }
  float mr[2] = {NEG_INF, NEG_INF}, lr[2] = {0.0f, 0.0f};
  const float scale2 = scale * LOG2E;
  for (int jt = 0; jt < nt; ++jt) {
    const int j0 = jt * BN, koff = (jt & 1) * STAGE_CH, voff = koff + BN * CW(E);
    /* every warp has left the other stage: refill it */
    barrier(CLK_LOCAL_MEM_FENCE);
    if (jt + 1 < nt) {
      const int nx = STAGE_CH - koff;
      STAGE_ROWS(nx, kh, kb, j0 + BN, BN, S, E)
      STAGE_ROWS(nx + BN * CW(E), vh, vb, j0 + BN, BN, S, EV)
    }
    CP_COMMIT();
    CP_WAIT();
    barrier(CLK_LOCAL_MEM_FENCE);
    float sc[BN / 8][4];
    #pragma unroll
    for (int n = 0; n < BN / 8; ++n) { sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f; }
    #pragma unroll
    for (int n = 0; n < BN / 8; n += 2) {
      #pragma unroll
      for (int s = 0; s < E / 16; ++s) {
        uint kf0[2], kf1[2];
        FRAG_BK(kf0, kf1, koff, CW(E), n * 8, s);
        MMA_16816(sc[n], qa[s], kf0);
        MMA_16816(sc[n + 1], qa[s], kf1);
      }
    }
    float mx[2] = {NEG_INF, NEG_INF};
    if (EDGE_TILE(j0, row0 + w0)) {
      #pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        #pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int i = row0 + wr + (c >> 1) * 8, j = j0 + n * 8 + 2 * t4 + (c & 1);
          const float x = IN_EDGE(i, j) ? sc[n][c] * scale2 + MASK_AT(i, j) * LOG2E : NEG_INF;
          sc[n][c] = x;
          mx[c >> 1] = fmax(mx[c >> 1], x);
        }
      }
    } else {
      #pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        #pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int i = row0 + wr + (c >> 1) * 8, j = j0 + n * 8 + 2 * t4 + (c & 1);
          const float x = IN_INNER(i, j) ? sc[n][c] * scale2 + MASK_AT(i, j) * LOG2E : NEG_INF;
          sc[n][c] = x;
          mx[c >> 1] = fmax(mx[c >> 1], x);
        }
      }
    }
    float alpha[2], ms[2];
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmax(mx[r], SHFL_XOR(mx[r], 1));
      mx[r] = fmax(mx[r], SHFL_XOR(mx[r], 2));
      const float mn = fmax(mr[r], mx[r]);
      ms[r] = mn == NEG_INF ? 0.0f : mn;
      alpha[r] = EXP2(mr[r] - ms[r]);
      mr[r] = mn;
      lr[r] *= alpha[r];
    }
    #pragma unroll
    for (int n = 0; n < EV / 8; ++n) {
      o[n][0] *= alpha[0]; o[n][1] *= alpha[0]; o[n][2] *= alpha[1]; o[n][3] *= alpha[1];
    }
    #pragma unroll
    for (int n = 0; n < BN / 8; ++n) {
      #pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float p = EXP2(sc[n][c] - ms[c >> 1]);
        lr[c >> 1] += p;
        sc[n][c] = p;
      }
    }
    #pragma unroll
    for (int s = 0; s < BN / 16; ++s) {
      uint pa[4];
      pa[0] = pack_h2(sc[2 * s][0], sc[2 * s][1]);
      pa[1] = pack_h2(sc[2 * s][2], sc[2 * s][3]);
      pa[2] = pack_h2(sc[2 * s + 1][0], sc[2 * s + 1][1]);
      pa[3] = pack_h2(sc[2 * s + 1][2], sc[2 * s + 1][3]);
      #pragma unroll
      for (int n = 0; n < EV / 8; n += 2) {
        uint vf0[2], vf1[2];
        FRAG_BV(vf0, vf1, voff, CW(EV), s * 16, n * 8);
        MMA_16816(o[n], pa, vf0);
        MMA_16816(o[n + 1], pa, vf1);
      }
    }
  }
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    lr[r] += SHFL_XOR(lr[r], 1);
    lr[r] += SHFL_XOR(lr[r], 2);
  }
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + wr + r * 8;
    if (i < L) {
      const float inv = lr[r] > 0.0f ? 1.0f / lr[r] : 0.0f;
      const IDX ob = ((IDX)b * L + i) * EV;
      for (int n = 0; n < EV / 8; ++n) {
        const int d = n * 8 + 2 * t4;
        ST(out, ob + d, o[n][2 * r] * inv);
        ST(out, ob + d + 1, o[n][2 * r + 1] * inv);
      }
      if (t4 == 0) lse[(IDX)b * L + i] = lr[r] > 0.0f ? mr[r] * LN2 + log(lr[r]) : NEG_INF;
    }
  }
}
"""



def mma_backward_ok(E: int, Ev: int) -> bool:
    """Whether the tensor-core backward kernels take head dims ``E``/``Ev`` (multiples of 16
    up to 64: at 128 the kept rows of 128-row work-groups need 64 KiB of local memory, and
    attn_bwd_dkdv_mma's fragments and two accumulators alone 192 registers)."""
    return all(d % 16 == 0 and 0 < d <= 64 for d in (E, Ev))


def mma_head_ok(E: int, Ev: int) -> bool:
    """Whether attn_fwd_mma takes head dims ``E``/``Ev`` (multiples of 16 up to 128)."""
    return all(d % 16 == 0 and 0 < d <= 128 for d in (E, Ev))


def mma_block_keys(E: int, Ev: int) -> int:
    """Keys per local tile: 64, or 32 beyond head dim 64 (48 KiB of local memory)."""
    return 64 if max(E, Ev) <= 64 else 32


def mma_local_bytes(E: int, Ev: int, backward: bool) -> int:
    """Static local memory of one work-group on the GPU (NOTE [ Attention local tiles ]): two
    stages of K and V (or Q and dO) tiles, the kept rows over both, and the backward's two
    slots of lse and D.

    Examples:
        >>> mma_local_bytes(64, 64, False), mma_local_bytes(64, 64, True)
        (32768, 33792)
    """
    bn = mma_block_keys(E, Ev)
    stage = bn * (E + Ev) * 2
    kept = MMA_ROWS * ((E + Ev) if backward else E) * 2
    return max(2 * stage, kept) + (4 * bn * 4 if backward else 0)


FUSED_BLOCK_QUERIES = 32  # attn_bwd_fused_mma: query rows per tile (BN)


def mma_fused_local_bytes(E: int, Ev: int) -> int:
    """Static local memory of one attn_bwd_fused_mma work-group on the GPU (NOTE [ Fused
    attention backward ]): the group's K rows, two stages of Q and dO tiles of
    :data:`FUSED_BLOCK_QUERIES` rows, the float16 dS^T tile and two slots of lse and D (the
    group's V rows pass through the stages' place first).

    Examples:
        >>> mma_fused_local_bytes(64, 64), mma_fused_local_bytes(16, 64)
        (41472, 23040)
    """
    bn = FUSED_BLOCK_QUERIES
    kept = MMA_ROWS * E * 2
    tiles = max(2 * bn * (E + Ev) * 2 + MMA_ROWS * bn * 2, MMA_ROWS * Ev * 2)
    return kept + tiles + 4 * bn * 4


# NETCL_ATTN_MMA_LOADS: how the kernels fill local tiles and fragments (the GPU comparison
# of NOTE [ Tensor-core attention forward ]): cp.async copies and/or ldmatrix fragments.
LOADS = {"fast": (True, True), "sync": (False, True), "scalar": (True, False),
         "legacy": (False, False)}


def mma_loads() -> str:
    """The load variant ``NETCL_ATTN_MMA_LOADS`` names (read when a program is first built):
    ``fast`` (the default: ``cp.async`` tile copies and ``ldmatrix`` fragments), ``sync``
    (copies through registers), ``scalar`` (32/16-bit local fragment loads) or ``legacy``
    (neither, as the first versions loaded).

    Examples:
        >>> mma_loads() in LOADS
        True
    """
    name = os.environ.get("NETCL_ATTN_MMA_LOADS", "").strip().lower() or "fast"
    if name not in LOADS:
        raise ValueError(f"scaled_dot_product_attention: NETCL_ATTN_MMA_LOADS must be one of "
                         f"{', '.join(LOADS)}, got {name!r}")
    return name


def mma_source(kernel: str, emulate: bool, loads: str | None = None) -> str:
    """The PTX (or emulated) helpers and ``kernel`` (``attn_fwd_mma``; the backward
    ``attn_bwd_dq_mma`` and ``attn_bwd_dkdv_mma``, which share one program; or
    ``attn_bwd_fused_mma``, whose program also holds ``attn_bwd_dq_zero`` and
    ``attn_bwd_dq_convert``: NOTE [ Fused attention backward ]); the defines of the common
    attention header (``E``, ``EV``, ``BM``, ``BN``, ``MASK_KIND``, ...) come before it.
    ``loads`` is a key of :data:`LOADS` (default :func:`mma_loads`).

    Examples:
        >>> src = mma_source("attn_fwd_mma", emulate=False, loads="fast")
        >>> "ldmatrix" in src and "#define ATTN_ASYNC" in src and "#define ATTN_LDSM" in src
        True
        >>> "#define ATTN_LDSM" in mma_source("attn_bwd_dq_mma", emulate=True, loads="legacy")
        False
        >>> "red.global.add.f32" in mma_source("attn_bwd_fused_mma", emulate=False)
        True
    """
    async_copy, ldmatrix = LOADS[loads or mma_loads()]
    # one copy group may stay in flight: the next tile's, issued before this tile's work
    ptx = emulated_ptx() if emulate else hardware_ptx(1)
    flags = "#define EMULATED\n" if emulate else "#define PACK_PTX\n"
    flags += "#define ATTN_ASYNC\n" if async_copy else ""
    flags += "#define ATTN_LDSM\n" if ldmatrix else ""
    if kernel == "attn_fwd_mma":
        body = _KERNEL
    elif kernel == "attn_bwd_fused_mma":
        red = "#define ATTN_RED_V2\n" if not emulate and mma_red() == "v2" else ""
        body = red + FUSED_FIX + BACKWARD_MACROS + FUSED
    else:
        body = SPLIT_FIX + BACKWARD_MACROS + BACKWARD
    return (f"#define NT {MMA_THREADS}\n{flags}{_TILES}{ptx}"
            f"{_SHUFFLE_EMU if emulate else _SHUFFLE_HW}{body}")
