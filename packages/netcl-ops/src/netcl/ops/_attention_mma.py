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
# accumulates P V with EV/8 x BN/16 more. It writes the output in float16 and the row
# log-sum-exp in float32, as attn_fwd does, so the backward kernels are shared. Dropout is
# not fused here (dropout_p > 0 runs attn_fwd). Head dims must be multiples of 16 up to 128.
# Every PTX statement has a plain-C twin (``emulate``, NOTE [ Emulated PTX ] in
# ._matmul_mma_source: mma through local memory, shuffles through a local scratch), so CPU
# OpenCL devices test the tiling, fragment maps, masking and softmax; only the GPU runs the
# instructions. The tensor cores are used where :func:`netcl.ops._matmul_mma.mma_available`
# says the device runs mma.sync (NVIDIA's driver, probed once; ``NETCL_MMA=0`` turns it off).
"""

from __future__ import annotations

from ._matmul_mma_source import emulated_ptx, hardware_ptx

__all__ = ["MMA_ROWS", "MMA_THREADS", "mma_block_keys", "mma_head_ok", "mma_source"]

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
inline uint pack_h2(const float a, const float b) {
  ushort h[2];
  vstore_half2_rte((float2)(a, b), 0, (__private half*)h);
  return (uint)h[0] | ((uint)h[1] << 16);
}

/* Rows r0 .. r0 + n - 1 (those below `rows`) of w elements as float16 bits into a local tile
   (zeros past the end). */
#define LOAD_BITS(tile, p, base, r0, n, rows, w) \\
  for (int t = tid; t < (n) * (w); t += NT) { \\
    const int rr = t / (w), e = t - rr * (w); \\
    (tile)[t] = (r0) + rr < (rows) ? (p)[(base) + (IDX)((r0) + rr) * (w) + e] : (ushort)0; \\
  }
#define WORD(tile, idx) (((__local const uint*)(tile))[(idx) >> 1])

__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_fwd_mma(__global T* out, __global float* lse, OPERAND_ARGS MASK_ARG)
{
  __local ushort qs[BM * E], ks[BN * E], vs[BN * EV];
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
    qa[s][0] = WORD(qs, wr * E + c);
    qa[s][1] = WORD(qs, (wr + 8) * E + c);
    qa[s][2] = WORD(qs, wr * E + c + 8);
    qa[s][3] = WORD(qs, (wr + 8) * E + c + 8);
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
        const int at = (n * 8 + g) * E + s * 16 + 2 * t4;
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
      alpha[r] = exp(mr[r] - ms[r]);
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
        const float p = exp(sc[n][c] - ms[c >> 1]);
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
        vf[0] = (uint)vs[key * EV + d] | ((uint)vs[(key + 1) * EV + d] << 16);
        vf[1] = (uint)vs[(key + 8) * EV + d] | ((uint)vs[(key + 9) * EV + d] << 16);
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


def mma_head_ok(E: int, Ev: int) -> bool:
    """Whether attn_fwd_mma takes head dims ``E``/``Ev`` (multiples of 16 up to 128)."""
    return all(d % 16 == 0 and 0 < d <= 128 for d in (E, Ev))


def mma_block_keys(E: int, Ev: int) -> int:
    """Keys per local tile: 64, or 32 beyond head dim 64 (48 KiB of local memory)."""
    return 64 if max(E, Ev) <= 64 else 32


def mma_source(emulate: bool) -> str:
    """The PTX (or emulated) helpers and attn_fwd_mma; the defines of the common attention
    header (``E``, ``EV``, ``BM``, ``BN``, ``MASK_KIND``, ...) come before it."""
    ptx = emulated_ptx() if emulate else hardware_ptx(0)
    return (f"#define NT {MMA_THREADS}\n{ptx}{_SHUFFLE_EMU if emulate else _SHUFFLE_HW}"
            f"{_KERNEL}")
