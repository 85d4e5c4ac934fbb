"""The float16 attention forward on NVIDIA tensor cores (inline PTX ``mma.sync.m16n8k16``).

# NOTE [ Tensor-core attention forward ]
# attn_fwd_mma: one work-group of four warps per (batch, 64 query rows), each warp 16 rows.
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
# ._matmul_mma_source: mma through local memory, shuffles through a local scratch), so CPU
# OpenCL devices test the tiling, fragment maps, masking and softmax; only the GPU runs the
# instructions. H100, B*H 32, E 64, beside torch SDPA float16 (FlashAttention-2) in the same
# run: the first version (2-byte global loads, unpadded local rows: the K fragment loads
# were 8-way bank conflicts) ran the forward at 18-28 TFLOP/s (0.05-0.13x); 16-byte loads into
# rows padded by 16 bytes, cvt.rn.f16x2 packing and native_exp gave 72-94 (0.20-0.26x),
# forward+backward 50-79 at L 1024-4096 (0.18-0.45x; 0.53x at L 512, where launches
# dominate both). Staging V transposed (16-bit scattered local stores for half the P V
# fragment loads) measured slower, 58-77 TFLOP/s, and was reverted. What is left on the
# table: ldmatrix fragment loads (the P V B fragment is four 16-bit local loads), cp.async
# double buffering of the K/V tiles, and 128-key tiles. The tensor cores are used where
# :func:`netcl.ops._matmul_mma.mma_available` says the device runs mma.sync (NVIDIA's
# driver, probed once; ``NETCL_MMA=0`` turns it off).
"""

from __future__ import annotations

from ._matmul_mma_source import emulated_ptx, hardware_ptx

__all__ = [
    "MMA_ROWS",
    "MMA_THREADS",
    "mma_backward_ok",
    "mma_block_keys",
    "mma_head_ok",
    "mma_source",
]

MMA_THREADS = 128  # four warps
MMA_ROWS = 64  # query rows per work-group

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

_KERNEL = """
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

/* Local tiles keep rows of w float16 bits at a stride of w + 8 (16 bytes more): the eight rows
   a fragment load touches then start in eight different bank groups. */
#define PW(w) ((w) + 8)
/* Rows r0 .. r0 + n - 1 (those below `rows`) of w elements as float16 bits into a local tile,
   16 bytes per load (zeros past the end; base and w are multiples of 8 elements). */
#define LOAD_BITS(tile, p, base, r0, n, rows, w) \\
  for (int t = tid; t < (n) * ((w) / 8); t += NT) { \\
    const int rr = t / ((w) / 8), c8 = t - rr * ((w) / 8); \\
    uint4 x = (uint4)(0u); \\
    if ((r0) + rr < (rows)) \\
      x = *(__global const uint4*)((p) + (base) + (IDX)((r0) + rr) * (w) + c8 * 8); \\
    *(__local uint4*)((tile) + rr * PW(w) + c8 * 8) = x; \\
  }
/* A local tile of rows x w float16 bits, 16-byte aligned, named `name` (ushort*). */
#define LOCAL_TILE(name, rows, w) \\
  __local uint4 name##_v[(rows) * PW(w) / 8]; \\
  __local ushort* name = (__local ushort*)name##_v;
#define WORD(tile, idx) (((__local const uint*)(tile))[(idx) >> 1])

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_fwd_mma(__global T* out, __global float* lse, OPERAND_ARGS MASK_ARG)
{
  LOCAL_TILE(qs, BM, E)
  LOCAL_TILE(ks, BN, E)
  LOCAL_TILE(vs, BN, EV)
  EMU_LOCALS
  SHFL_LOCALS
  const int b = get_group_id(1), tid = get_local_id(0);
  const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
  const int row0 = get_group_id(0) * BM, wr = warp * 16 + g;
  OPERAND_BASES(b)
  MASK_BASE(b)
  __global const ushort* qh = (__global const ushort*)q;
  __global const ushort* kh = (__global const ushort*)k;
  __global const ushort* vh = (__global const ushort*)v;
  LOAD_BITS(qs, qh, qb, row0, BM, L, E)
  barrier(CLK_LOCAL_MEM_FENCE);
  uint qa[E / 16][4];
  #pragma unroll
  for (int s = 0; s < E / 16; ++s) {
    const int c = s * 16 + 2 * t4;
    qa[s][0] = WORD(qs, wr * PW(E) + c);
    qa[s][1] = WORD(qs, (wr + 8) * PW(E) + c);
    qa[s][2] = WORD(qs, wr * PW(E) + c + 8);
    qa[s][3] = WORD(qs, (wr + 8) * PW(E) + c + 8);
  }
  float o[EV / 8][4];
  #pragma unroll
  for (int n = 0; n < EV / 8; ++n) { o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f; }
  float mr[2] = {NEG_INF, NEG_INF}, lr[2] = {0.0f, 0.0f};
  const int last = causal ? min(S, row0 + BM) : S;
  for (int j0 = 0; j0 < last; j0 += BN) {
    barrier(CLK_LOCAL_MEM_FENCE);
    LOAD_BITS(ks, kh, kb, j0, BN, S, E)
    LOAD_BITS(vs, vh, vb, j0, BN, S, EV)
    barrier(CLK_LOCAL_MEM_FENCE);
    float sc[BN / 8][4];
    #pragma unroll
    for (int n = 0; n < BN / 8; ++n) {
      sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
      #pragma unroll
      for (int s = 0; s < E / 16; ++s) {
        uint kf[2];
        const int at = (n * 8 + g) * PW(E) + s * 16 + 2 * t4;
        kf[0] = WORD(ks, at);
        kf[1] = WORD(ks, at + 8);
        MMA_16816(sc[n], qa[s], kf);
      }
    }
    float mx[2] = {NEG_INF, NEG_INF};
    #pragma unroll
    for (int n = 0; n < BN / 8; ++n) {
      #pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = row0 + wr + (c >> 1) * 8, j = j0 + n * 8 + 2 * t4 + (c & 1);
        float x = NEG_INF;
        if (i < L && j < S && (!causal || j <= i)) x = sc[n][c] * scale + MASK_AT(i, j);
        sc[n][c] = x;
        mx[c >> 1] = fmax(mx[c >> 1], x);
      }
    }
    float alpha[2], ms[2];
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmax(mx[r], SHFL_XOR(mx[r], 1));
      mx[r] = fmax(mx[r], SHFL_XOR(mx[r], 2));
      const float mn = fmax(mr[r], mx[r]);
      ms[r] = mn == NEG_INF ? 0.0f : mn;
      alpha[r] = native_exp(mr[r] - ms[r]);
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
        const float p = native_exp(sc[n][c] - ms[c >> 1]);
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
      const int key = s * 16 + 2 * t4;
      #pragma unroll
      for (int n = 0; n < EV / 8; ++n) {
        const int d = n * 8 + g;
        uint vf[2];
        vf[0] = (uint)vs[key * PW(EV) + d] | ((uint)vs[(key + 1) * PW(EV) + d] << 16);
        vf[1] = (uint)vs[(key + 8) * PW(EV) + d] | ((uint)vs[(key + 9) * PW(EV) + d] << 16);
        MMA_16816(o[n], pa, vf);
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
      if (t4 == 0) lse[(IDX)b * L + i] = lr[r] > 0.0f ? mr[r] + log(lr[r]) : NEG_INF;
    }
  }
}
"""


_BACKWARD = """
/* The scores of a 16 x BN warp tile from A fragments a (E/16 of them) and B words in tile
   tb (row n*8+g, E wide): c += a b^T. */
#define SCORES(acc, a, tb, w) \\
  for (int n = 0; n < BN / 8; ++n) { \\
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f; \\
    for (int s = 0; s < (w) / 16; ++s) { \\
      uint bf[2]; \\
      const int at = (n * 8 + g) * PW(w) + s * 16 + 2 * t4; \\
      bf[0] = WORD(tb, at); bf[1] = WORD(tb, at + 8); \\
      MMA_16816(acc[n], a[s], bf); \\
    } \\
  }
/* acc (w/8 tiles) += P (the 16 x BN C tiles in p, packed to float16 A fragments) times the
   BN x w rows of tile tb. */
#define ACCUMULATE(acc, p, tb, w) \\
  for (int s = 0; s < BN / 16; ++s) { \\
    uint pa[4]; \\
    pa[0] = pack_h2(p[2 * s][0], p[2 * s][1]); \\
    pa[1] = pack_h2(p[2 * s][2], p[2 * s][3]); \\
    pa[2] = pack_h2(p[2 * s + 1][0], p[2 * s + 1][1]); \\
    pa[3] = pack_h2(p[2 * s + 1][2], p[2 * s + 1][3]); \\
    const int r_ = s * 16 + 2 * t4; \\
    for (int n = 0; n < (w) / 8; ++n) { \\
      const int d = n * 8 + g; \\
      uint bf[2]; \\
      bf[0] = (uint)tb[r_ * PW(w) + d] | ((uint)tb[(r_ + 1) * PW(w) + d] << 16); \\
      bf[1] = (uint)tb[(r_ + 8) * PW(w) + d] | ((uint)tb[(r_ + 9) * PW(w) + d] << 16); \\
      MMA_16816(acc[n], pa, bf); \\
    } \\
  }
#define FRAGS(a, tile, w) \\
  for (int s = 0; s < (w) / 16; ++s) { \\
    const int c = s * 16 + 2 * t4; \\
    a[s][0] = WORD(tile, wr * PW(w) + c); \\
    a[s][1] = WORD(tile, (wr + 8) * PW(w) + c); \\
    a[s][2] = WORD(tile, wr * PW(w) + c + 8); \\
    a[s][3] = WORD(tile, (wr + 8) * PW(w) + c + 8); \\
  }
#define ZERO_TILES(acc, n_) \\
  for (int n = 0; n < (n_); ++n) { \\
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f; }

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_bwd_dq_mma(__global T* dq, __global const T* dout, __global const float* lse,
                     __global const float* dd, OPERAND_ARGS MASK_ARG)
{
  LOCAL_TILE(qs, BM, E)
  LOCAL_TILE(gs, BM, EV)
  LOCAL_TILE(ks, BN, E)
  LOCAL_TILE(vs, BN, EV)
  EMU_LOCALS
  SHFL_LOCALS
  const int b = get_group_id(1), tid = get_local_id(0);
  const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
  const int row0 = get_group_id(0) * BM, wr = warp * 16 + g;
  OPERAND_BASES(b)
  MASK_BASE(b)
  __global const ushort* qh = (__global const ushort*)q;
  __global const ushort* kh = (__global const ushort*)k;
  __global const ushort* vh = (__global const ushort*)v;
  __global const ushort* gh = (__global const ushort*)dout;
  LOAD_BITS(qs, qh, qb, row0, BM, L, E)
  LOAD_BITS(gs, gh, (IDX)b * L * EV, row0, BM, L, EV)
  barrier(CLK_LOCAL_MEM_FENCE);
  uint qa[E / 16][4], ga[EV / 16][4];
  FRAGS(qa, qs, E)
  FRAGS(ga, gs, EV)
  float li[2], di[2];
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + wr + r * 8;
    const float x = i < L ? lse[(IDX)b * L + i] : NEG_INF;
    li[r] = x == NEG_INF ? INFINITY : x;
    di[r] = i < L ? dd[(IDX)b * L + i] : 0.0f;
  }
  float acc[E / 8][4];
  ZERO_TILES(acc, E / 8)
  const int last = causal ? min(S, row0 + BM) : S;
  for (int j0 = 0; j0 < last; j0 += BN) {
    barrier(CLK_LOCAL_MEM_FENCE);
    LOAD_BITS(ks, kh, kb, j0, BN, S, E)
    LOAD_BITS(vs, vh, vb, j0, BN, S, EV)
    barrier(CLK_LOCAL_MEM_FENCE);
    float sc[BN / 8][4], dp[BN / 8][4];
    SCORES(sc, qa, ks, E)
    SCORES(dp, ga, vs, EV)
    #pragma unroll
    for (int n = 0; n < BN / 8; ++n) {
      #pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = row0 + wr + (c >> 1) * 8, j = j0 + n * 8 + 2 * t4 + (c & 1);
        float p = 0.0f;
        if (i < L && j < S && (!causal || j <= i))
          p = native_exp(sc[n][c] * scale + MASK_AT(i, j) - li[c >> 1]);
        sc[n][c] = p * (dp[n][c] - di[c >> 1]);
      }
    }
    ACCUMULATE(acc, sc, ks, E)
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

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_bwd_dkdv_mma(__global T* dk, __global T* dv, __global const T* dout,
                       __global const float* lse, __global const float* dd,
                       OPERAND_ARGS MASK_ARG)
{
  LOCAL_TILE(kt, BM, E)
  LOCAL_TILE(vt, BM, EV)
  LOCAL_TILE(qs, BN, E)
  LOCAL_TILE(gs, BN, EV)
  __local float lt[BN], dt[BN];
  EMU_LOCALS
  SHFL_LOCALS
  const int b = get_group_id(1), tid = get_local_id(0);
  const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
  const int col0 = get_group_id(0) * BM, wr = warp * 16 + g;
  OPERAND_BASES(b)
  MASK_BASE(b)
  __global const ushort* qh = (__global const ushort*)q;
  __global const ushort* kh = (__global const ushort*)k;
  __global const ushort* vh = (__global const ushort*)v;
  __global const ushort* gh = (__global const ushort*)dout;
  LOAD_BITS(kt, kh, kb, col0, BM, S, E)
  LOAD_BITS(vt, vh, vb, col0, BM, S, EV)
  barrier(CLK_LOCAL_MEM_FENCE);
  uint ka[E / 16][4], va[EV / 16][4];
  FRAGS(ka, kt, E)
  FRAGS(va, vt, EV)
  float ak[E / 8][4], av[EV / 8][4];
  ZERO_TILES(ak, E / 8)
  ZERO_TILES(av, EV / 8)
  const int first = causal ? (min(col0, L) / BN) * BN : 0;
  for (int i0 = first; i0 < L; i0 += BN) {
    barrier(CLK_LOCAL_MEM_FENCE);
    LOAD_BITS(qs, qh, qb, i0, BN, L, E)
    LOAD_BITS(gs, gh, (IDX)b * L * EV, i0, BN, L, EV)
    for (int t = tid; t < BN; t += NT) {
      const int i = i0 + t;
      const float x = i < L ? lse[(IDX)b * L + i] : NEG_INF;
      lt[t] = x == NEG_INF ? INFINITY : x;
      dt[t] = i < L ? dd[(IDX)b * L + i] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float st[BN / 8][4], dpt[BN / 8][4];
    SCORES(st, ka, qs, E)
    SCORES(dpt, va, gs, EV)
    #pragma unroll
    for (int n = 0; n < BN / 8; ++n) {
      #pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int j = col0 + wr + (c >> 1) * 8, il = n * 8 + 2 * t4 + (c & 1), i = i0 + il;
        float p = 0.0f;
        if (i < L && j < S && (!causal || j <= i))
          p = native_exp(st[n][c] * scale + MASK_AT(i, j) - lt[il]);
        st[n][c] = p;
        dpt[n][c] = p * (dpt[n][c] - dt[il]);
      }
    }
    ACCUMULATE(av, st, gs, EV)
    ACCUMULATE(ak, dpt, qs, E)
  }
  #pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int j = col0 + wr + r * 8;
    if (j < S) {
      const IDX cb = (IDX)b * S + j;
      for (int n = 0; n < E / 8; ++n) {
        const int d = n * 8 + 2 * t4;
        ST(dk, cb * E + d, ak[n][2 * r] * scale);
        ST(dk, cb * E + d + 1, ak[n][2 * r + 1] * scale);
      }
      for (int n = 0; n < EV / 8; ++n) {
        const int d = n * 8 + 2 * t4;
        ST(dv, cb * EV + d, av[n][2 * r]);
        ST(dv, cb * EV + d + 1, av[n][2 * r + 1]);
      }
    }
  }
}
"""


def mma_backward_ok(E: int, Ev: int) -> bool:
    """Whether the tensor-core backward kernels take head dims ``E``/``Ev`` (multiples of 16
    up to 64: their four local tiles must fit in 48 KiB)."""
    return all(d % 16 == 0 and 0 < d <= 64 for d in (E, Ev))


def mma_head_ok(E: int, Ev: int) -> bool:
    """Whether attn_fwd_mma takes head dims ``E``/``Ev`` (multiples of 16 up to 128)."""
    return all(d % 16 == 0 and 0 < d <= 128 for d in (E, Ev))


def mma_block_keys(E: int, Ev: int) -> int:
    """Keys per local tile: 64, or 32 beyond head dim 64 (48 KiB of local memory)."""
    return 64 if max(E, Ev) <= 64 else 32


def mma_source(kernel: str, emulate: bool) -> str:
    """The PTX (or emulated) helpers and ``kernel`` (``attn_fwd_mma``, or the backward
    ``attn_bwd_dq_mma`` and ``attn_bwd_dkdv_mma``, which share one program); the defines of
    the common attention header (``E``, ``EV``, ``BM``, ``BN``, ``MASK_KIND``, ...) come
    before it."""
    ptx = emulated_ptx() if emulate else hardware_ptx(0)
    body = _KERNEL if kernel == "attn_fwd_mma" else _KERNEL.split("__kernel")[0] + _BACKWARD
    pack = "" if emulate else "#define PACK_PTX\n"
    return (f"#define NT {MMA_THREADS}\n{pack}{ptx}{_SHUFFLE_EMU if emulate else _SHUFFLE_HW}"
            f"{body}")
