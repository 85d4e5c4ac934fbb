"""OpenCL sources of the fused attention kernels (FlashAttention-2 style) and their family.

# NOTE [ Fused attention kernels ]
# Three kernels, one program per (dtype, E, Ev, mask kind, tile sizes); float16 is storage
# only, everything is computed in float. The (L, S) scores are never stored.
# - attn_fwd: one work-group per (batch, block of BM query rows), one work item per row. The
#   item keeps its scaled query row and its output accumulator in registers; the group stages
#   BN rows of K and V at a time in local memory (every item then reads the same local word, a
#   broadcast) and each item folds the BN scores into an online softmax (running max m and
#   sum l, the accumulator rescaled by exp(m_old - m_new)). It writes out = acc / l and the
#   row's log-sum-exp m + log l, which is all the backward keeps. A causal group stops at the
#   last key tile its last row may attend (the tiles above the diagonal are never loaded).
# - attn_bwd_dq: the same geometry; recomputes p = exp(s - lse) per key, dp = dO . v,
#   ds = p (dp - D) with D = rowsum(dO * O) (computed before by attn_bwd_d), dq += ds k.
# - attn_bwd_dkdv: one work-group per (batch, block of BM keys), one item per key, Q and dO
#   tiles of BN rows in local memory: dv += p~ dO, dk += ds q (p~ the dropped-out p). A
#   causal group starts at the first query tile that may attend its first key.
# - attn_bwd_d: D = rowsum(dO * O) for every query row, before the two: one work-group of BM
#   items per BM / BN rows, BN lanes per row each summing every BN-th element in order, then
#   a fixed local-memory tree (the same bits on every run); dO and O read in place from their
#   offsets in the storage dtype, summed in CT (float, double for float64). It replaced two
#   float32 copies, a multiply and a row reduction (four launches, 44 us of 161 us of device
#   time of the float16 L 512 forward+backward on an H200).
# Dropout is counter-based: element (b, i, j) keeps its weight when word
# offset + (b L + i) S + j of the Philox stream (NOTE [ Philox streams ] in ._random) has its
# top 24 bits >= round(p 2^24), the test netcl.ops.dropout makes, so the backward (and the
# plain path) regenerate the same mask and nothing of size L x S is stored.
# Masks are read in place through broadcast strides: batch index (b / div) % mod times the
# mask's batch stride, then row and column strides that are 0 along broadcast axes. A fully
# masked row has l = 0: output 0, lse = -inf, and p = 0 in the backward (no NaN).
# H100 float32 (B*H 32, E 64), beside torch SDPA float32 (its memory-efficient kernel) in the
# same run: forward 7-17 TFLOP/s (0.28-0.51x), forward+backward 5-10 (0.22-0.30x), the
# backward being the weaker part (attn_bwd_dkdv holds four head-dim rows per item). The
# fused path's pool bytes for forward+backward grow linearly: 16, 32, 65, 129 MiB at
# L = 512 .. 4096 (outputs, gradients, lse and D); the plain path's 148 and 553 MiB at
# L = 512 and 1024.
"""

from __future__ import annotations

from netcl.core.kernels.family import KernelSource, kernel_family

from ._attention_mma import FUSED_BLOCK_QUERIES, mma_source
from ._launch import index_defs

__all__ = ["FUSED_HELPERS", "ROW_DOT_ITEMS", "ROW_DOT_LANES", "attention_family",
           "attention_source"]

MASK_KINDS = ("none", "bool", "float")

_COMMON = """
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
#define DROP(b, i, j) \\
  ((philox_word(doff + ((ulong)(b) * (ulong)L + (ulong)(i)) * (ulong)S + (ulong)(j), \\
                k0, k1) >> 8) >= threshold ? dscale : 0.0f)

/* The mask term of score (i, j) of batch b: 0 (take part), -inf (masked) or the float. */
#if MASK_KIND == 1
#define MASK_ARG , __global const uchar* mask, const IDX mo, const int md, const int mm, \\
  const IDX mbs, const IDX mrs, const IDX mcs
#define MASK_BASE(b) const IDX mbase = mo + (IDX)BIDX(b, md, mm) * mbs;
#define MASK_AT(i, j) (mask[mbase + (IDX)(i) * mrs + (IDX)(j) * mcs] ? 0.0f : NEG_INF)
#elif MASK_KIND == 2
#define MASK_ARG , __global const T* mask, const IDX mo, const int md, const int mm, \\
  const IDX mbs, const IDX mrs, const IDX mcs
#define MASK_BASE(b) const IDX mbase = mo + (IDX)BIDX(b, md, mm) * mbs;
#define MASK_AT(i, j) LD(mask, mbase + (IDX)(i) * mrs + (IDX)(j) * mcs)
#else
#define MASK_ARG
#define MASK_BASE(b)
#define MASK_AT(i, j) 0.0f
#endif

/* Rows of n elements in float4s (the last one zero-padded): registers and local tiles. */
#define LOAD_ROW4(r, p, base, n, ok, mul) \\
  for (int e = 0; e < ((n) + 3) / 4; ++e) { \\
    float4 x = (float4)(0.0f); \\
    if (ok) { \\
      x.x = LD(p, (base) + 4 * e); \\
      if (4 * e + 1 < (n)) x.y = LD(p, (base) + 4 * e + 1); \\
      if (4 * e + 2 < (n)) x.z = LD(p, (base) + 4 * e + 2); \\
      if (4 * e + 3 < (n)) x.w = LD(p, (base) + 4 * e + 3); \\
    } \\
    r[e] = x * (mul); \\
  }
#define STORE_ROW4(p, base, n, r, mul) \\
  for (int e = 0; e < (n); ++e) { \\
    const float4 x = r[e / 4] * (mul); \\
    const int c = e % 4; \\
    ST(p, (base) + e, c == 0 ? x.x : c == 1 ? x.y : c == 2 ? x.z : x.w); \\
  }
/* Rows r0 .. r0 + BN - 1 (those below `rows`) of n elements from base into a local tile of
   float4s, n4 = ceil(n / 4) per row, zero-padded; element by element, coalesced. */
#define LOAD_TILE4(tile, p, base, r0, rows, n, n4, mul) \\
  for (int t = lid; t < BN * (n4) * 4; t += BM) { \\
    const int rr = t / ((n4) * 4), e = t - rr * ((n4) * 4); \\
    const int r = (r0) + rr; \\
    ((__local float*)(tile))[t] = \\
        (r < (rows) && e < (n)) ? LD(p, (base) + (IDX)r * (n) + e) * (mul) : 0.0f; \\
  }

/* The operands' batch bases (batch index (b / div) % mod of each, NOTE above). */
#define OPERAND_ARGS \\
  __global const T* q, const IDX qo, const int qd, const int qm, \\
  __global const T* k, const IDX ko, const int kd, const int km, \\
  __global const T* v, const IDX vo, const int vd, const int vm, \\
  const int L, const int S, const float scale, const int causal, \\
  const uint k0, const uint k1, const ulong doff, const uint threshold, const float dscale
#define OPERAND_BASES(b) \\
  const IDX qb = qo + (IDX)BIDX(b, qd, qm) * (IDX)L * E; \\
  const IDX kb = ko + (IDX)BIDX(b, kd, km) * (IDX)S * E; \\
  const IDX vb = vo + (IDX)BIDX(b, vd, vm) * (IDX)S * EV;
"""

_FORWARD = """
__kernel __attribute__((reqd_work_group_size(BM, 1, 1)))
void attn_fwd(__global T* out, __global float* lse, OPERAND_ARGS MASK_ARG)
{
  __local float4 ks[BN * E4], vs[BN * EV4];
  const int b = get_group_id(1), lid = get_local_id(0);
  const int row0 = get_group_id(0) * BM, i = row0 + lid;
  OPERAND_BASES(b)
  MASK_BASE(b)
  float4 qr[E4], acc[EV4];
  LOAD_ROW4(qr, q, qb + (IDX)i * E, E, i < L, scale)
  for (int e = 0; e < EV4; ++e) acc[e] = (float4)(0.0f);
  float m = NEG_INF, l = 0.0f;
  const int last = causal ? min(S, row0 + BM) : S;  /* keys past it are masked for all rows */
  for (int j0 = 0; j0 < last; j0 += BN) {
    barrier(CLK_LOCAL_MEM_FENCE);
    LOAD_TILE4(ks, k, kb, j0, S, E, E4, 1.0f)
    LOAD_TILE4(vs, v, vb, j0, S, EV, EV4, 1.0f)
    barrier(CLK_LOCAL_MEM_FENCE);
    if (i >= L) continue;
    float s[BN];
    float mt = NEG_INF;
    for (int jj = 0; jj < BN; ++jj) {
      const int j = j0 + jj;
      float x = NEG_INF;
      if (j < S && (!causal || j <= i)) {
        float4 d = (float4)(0.0f);
        for (int e = 0; e < E4; ++e) d = fma(qr[e], ks[jj * E4 + e], d);
        x = (d.x + d.y) + (d.z + d.w) + MASK_AT(i, j);
      }
      s[jj] = x;
      mt = fmax(mt, x);
    }
    const float mn = fmax(m, mt);
    if (mn == NEG_INF) continue;  /* every key so far masked */
    const float alpha = exp(m - mn);  /* m = -inf: 0 */
    l *= alpha;
    for (int e = 0; e < EV4; ++e) acc[e] *= alpha;
    m = mn;
    for (int jj = 0; jj < BN; ++jj) {
      float p = exp(s[jj] - m);
      l += p;
      if (threshold && p != 0.0f) p *= DROP(b, i, j0 + jj);
      if (p != 0.0f) {
        for (int e = 0; e < EV4; ++e) acc[e] = fma((float4)(p), vs[jj * EV4 + e], acc[e]);
      }
    }
  }
  if (i >= L) return;
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  STORE_ROW4(out, ((IDX)b * L + i) * EV, EV, acc, inv)
  lse[(IDX)b * L + i] = l > 0.0f ? m + log(l) : NEG_INF;
}
"""

_BACKWARD_DQ = """
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
"""

_BACKWARD_DKDV = """
__kernel __attribute__((reqd_work_group_size(BM, 1, 1)))
void attn_bwd_dkdv(__global T* dk, __global T* dv, __global const T* dout,
                   __global const float* lse, __global const float* dd, OPERAND_ARGS MASK_ARG)
{
  __local float4 qs[BN * E4], gs[BN * EV4];
  __local float ls[BN], dl[BN];
  const int b = get_group_id(1), lid = get_local_id(0);
  const int col0 = get_group_id(0) * BM, j = col0 + lid;
  OPERAND_BASES(b)
  MASK_BASE(b)
  float4 kr[E4], vr[EV4], ak[E4], av[EV4];
  LOAD_ROW4(kr, k, kb + (IDX)j * E, E, j < S, 1.0f)
  LOAD_ROW4(vr, v, vb + (IDX)j * EV, EV, j < S, 1.0f)
  for (int e = 0; e < E4; ++e) ak[e] = (float4)(0.0f);
  for (int e = 0; e < EV4; ++e) av[e] = (float4)(0.0f);
  const int first = causal ? (min(col0, L) / BN) * BN : 0;
  const IDX gb = (IDX)b * L * EV;
  for (int i0 = first; i0 < L; i0 += BN) {
    barrier(CLK_LOCAL_MEM_FENCE);
    LOAD_TILE4(qs, q, qb, i0, L, E, E4, scale)
    LOAD_TILE4(gs, dout, gb, i0, L, EV, EV4, 1.0f)
    for (int t = lid; t < BN; t += BM) {
      const int i = i0 + t;
      const float li = i < L ? lse[(IDX)b * L + i] : NEG_INF;
      ls[t] = li == NEG_INF ? INFINITY : li;
      dl[t] = i < L ? dd[(IDX)b * L + i] : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (j >= S) continue;
    for (int ii = 0; ii < BN; ++ii) {
      const int i = i0 + ii;
      if (i >= L || (causal && j > i)) continue;
      float4 d = (float4)(0.0f);
      for (int e = 0; e < E4; ++e) d = fma(qs[ii * E4 + e], kr[e], d);
      const float p = exp((d.x + d.y) + (d.z + d.w) + MASK_AT(i, j) - ls[ii]);
      if (p == 0.0f) continue;
      const float keep = threshold ? DROP(b, i, j) : 1.0f;
      const float4 pk = (float4)(p * keep);
      float4 dp4 = (float4)(0.0f);
      for (int e = 0; e < EV4; ++e) {
        const float4 g = gs[ii * EV4 + e];
        av[e] = fma(pk, g, av[e]);
        dp4 = fma(g, vr[e], dp4);
      }
      const float dp = (dp4.x + dp4.y) + (dp4.z + dp4.w);
      const float4 ds = (float4)(p * (dp * keep - dl[ii]));
      for (int e = 0; e < E4; ++e) ak[e] = fma(ds, qs[ii * E4 + e], ak[e]);
    }
  }
  if (j >= S) return;
  const IDX cb = (IDX)b * S + j;
  STORE_ROW4(dk, cb * E, E, ak, 1.0f)
  STORE_ROW4(dv, cb * EV, EV, av, 1.0f)
}
"""

_ROW_DOT = """
__kernel __attribute__((reqd_work_group_size(BM, 1, 1)))
void attn_bwd_d(__global CT* dd, __global const T* dout, const IDX go,
                __global const T* out, const IDX oo, const IDX rows)
{
  __local CT part[BM];
  const int lid = get_local_id(0), lane = lid % BN;
  const IDX r = (IDX)get_group_id(0) * (BM / BN) + lid / BN;
  CT acc = (CT)0;
  if (r < rows) {
    const IDX base = r * EV;
    for (int e = lane; e < EV; e += BN)
      acc = fma(LD(dout, go + base + e), LD(out, oo + base + e), acc);
  }
  part[lid] = acc;
  for (int s = BN / 2; s > 0; s /= 2) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane < s) part[lid] += part[lid + s];
  }
  if (lane == 0 && r < rows) dd[r] = part[lid];
}
"""

_KERNELS = {"attn_fwd": _FORWARD, "attn_bwd_dq": _BACKWARD_DQ, "attn_bwd_dkdv": _BACKWARD_DKDV}
# the other kernels of attn_bwd_fused_mma's program: its float32 dQ workspace zeroed, converted
FUSED_HELPERS = ("attn_bwd_dq_zero", "attn_bwd_dq_convert")
ROW_DOT_ITEMS = 64  # attn_bwd_d: work items per group
ROW_DOT_LANES = 16  # attn_bwd_d: lanes per row


def attention_source(kernel: str, E: int, Ev: int, mask: str, bm: int, bn: int,
                     wide: bool) -> str:
    """The program of ``kernel`` (``attn_fwd``, ``attn_bwd_dq``, ``attn_bwd_dkdv`` or
    ``attn_bwd_d`` (``bm`` items, ``bn`` lanes per row; ``E`` and the mask unused); or a
    tensor-core kernel, ``attn_fwd_mma``, ``attn_bwd_dq_mma``, ``attn_bwd_dkdv_mma``,
    ``attn_bwd_fused_mma``, each with ``_emu`` for its emulated twin, NOTE [ Tensor-core
    attention forward ] and NOTE [ Fused attention backward ]) for head
    dims ``E``/``Ev``, a mask kind of :data:`MASK_KINDS`, work-groups of ``bm`` items (rows
    for the mma kernel) and tiles of ``bn`` rows, 64-bit indices if ``wide``; the dtype header
    comes from :func:`attention_family`."""
    defs = index_defs(2**31 if wide else 0)[0]
    if kernel == "attn_bwd_d":
        return f"{defs}#define EV {Ev}\n#define BM {bm}\n#define BN {bn}\n{_ROW_DOT}"
    if "_mma" in kernel:
        body = mma_source(kernel.removesuffix("_emu"), emulate=kernel.endswith("_emu"))
    else:
        body = _KERNELS[kernel]
    return (f"{defs}#define E {E}\n#define EV {Ev}\n#define E4 {-(-E // 4)}\n"
            f"#define EV4 {-(-Ev // 4)}\n#define BM {bm}\n#define BN {bn}\n"
            f"#define MASK_KIND {MASK_KINDS.index(mask)}\n{_COMMON}{body}")


def _attention_golden() -> list[tuple[str, tuple[str, str, int, int, str, int, int, bool]]]:
    cases = [(f"attention/{k}-{dt}-e64", (k, dt, 64, 64, "none", 64, 32, False))
             for dt in ("float32", "float16") for k in _KERNELS]
    cases += [("attention/attn_fwd-float32-e32-bool", ("attn_fwd", "float32", 32, 32, "bool",
                                                       64, 32, False)),
              ("attention/attn_bwd_dkdv-float16-e128-float",
               ("attn_bwd_dkdv", "float16", 128, 128, "float", 64, 16, False)),
              ("attention/attn_fwd_mma_emu-float16-e64",
               ("attn_fwd_mma_emu", "float16", 64, 64, "none", 64, 64, False)),
              ("attention/attn_bwd_dq_mma_emu-float16-e64-bool",
               ("attn_bwd_dq_mma_emu", "float16", 64, 64, "bool", 64, 64, False)),
              ("attention/attn_bwd_fused_mma_emu-float16-e64-bool",
               ("attn_bwd_fused_mma_emu", "float16", 64, 64, "bool", 128,
                FUSED_BLOCK_QUERIES, False))]
    cases += [(f"attention/attn_bwd_d-{dt}-e64", ("attn_bwd_d", dt, 64, 64, "none",
                                                  ROW_DOT_ITEMS, ROW_DOT_LANES, False))
              for dt in ("float16", "float32", "float64")]
    return cases


@kernel_family("ops.attention", golden=_attention_golden)
def attention_family(kernel: str, dtype: str, E: int, Ev: int, mask: str, bm: int, bn: int,
                     wide: bool) -> KernelSource:
    """One fused attention kernel (NOTE [ Fused attention kernels ])."""
    name = kernel.removesuffix("_emu")
    names = (name, *FUSED_HELPERS) if name == "attn_bwd_fused_mma" else (name,)
    return KernelSource(attention_source(kernel, E, Ev, mask, bm, bn, wide), names, dtype)
