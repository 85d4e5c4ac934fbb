"""OpenCL sources of the register-tiled fused attention kernels (GPUs) and their family.

# NOTE [ Register-tiled attention kernels ]
# The GEMM-like twins of NOTE [ Fused attention kernels ] (._attention_kernels), for GPUs,
# where the row kernels' one item per query row leaves too few items at L = 512 (32 x 512)
# and attn_bwd_dkdv's four head-dim rows per item spill. Same outputs, same lse convention,
# same masks, causal rule, Philox dropout decisions and batch broadcasting: the _COMMON macros
# of the row kernels are reused as they are (DROP, MASK_AT, BIDX, OPERAND_BASES), so both
# families keep or drop exactly the same elements; only the order of the float sums differs.
# Geometry: 128 work items per group as a TY x TX = 8 x 16 grid (ty = lid / 16, tx = lid % 16).
# A score tile has GR = 8 RM rows and GC = 16 CN columns; item (ty, tx) computes the RM x CN
# register block of rows ty + 8 r and columns tx + 16 c (strided, so that the 16 items sharing
# a row read 16 different local rows of the column operand at once, and the items of a warp
# read at most two rows of the row operand: broadcasts). Operand tiles sit in local memory as
# rows of float4s with an odd float4 stride (E4 | 1: consecutive rows start 4 banks apart,
# a quarter-warp's 128-bit reads hit distinct banks); scores are read back as float4s along
# a row. The products into head-dim accumulators (O = P V, dV = P~^T dO, dK = dS^T Q,
# dQ = dS K) give item (ty, tx) rows ty + 8 r and float4 columns tx + 16 cc of the result,
# ceil(E4 / 16) of them (one at head dim 64): RM x 4 floats per 16 columns of head dim.
# - attn_fwd_tiled: a group per (batch, GR query rows). Q (scaled) stays in local memory; per
#   tile of GC keys: K into the shared K/V tile, S block in registers, masked (-inf) and its
#   row maxima reduced over the 16 items of a row through local memory (each item writes one
#   partial per row, reads the row's 16); every item of a row then holds the same running max
#   m, rescales its part of O and its partial row sum by exp(m_old - m_new), writes
#   p (times the dropout factor) into the P tile while V replaces K in the K/V tile; O += P V.
#   Four barriers per key tile. The row sums l are reduced once, at the end: out = O / l,
#   lse = m + log l (l = 0: out 0, lse -inf, as the row kernel).
# - attn_bwd_dkdv_tiled: a group per (batch, GR keys), K and V tiles resident; per tile of GC
#   query rows (Q scaled, dO, lse, D): the transposed block S^T = K Q^T and dP^T = V dO^T in
#   registers, p = exp(s - lse), P~^T (p times the dropout factor) and
#   dS^T = p (dp keep - D) into two local tiles, then dV += P~^T dO and dK += dS^T Q
#   (three barriers per query tile). No atomics: dQ has its own kernel.
# - attn_bwd_dq_tiled: a group per (batch, GR query rows), Q, dO, lse and D resident; per key
#   tile: S and dP blocks, dS into local memory, dQ += dS K; dq = scale dQ.
# Causal groups skip the key tiles above the diagonal (forward, dq) and the query tiles before
# it (dkdv), as the row kernels. The tile shape (RM, CN) is the first of a short list whose
# local tiles fit the device (:func:`tiled_config`): 32 x 64 forward tiles and 32 x 32
# backward tiles at head dims up to 64 (37 and 44 KiB, under the 48 KiB of NVIDIA's OpenCL),
# smaller ones up to the largest head dim the kernels are built for (128); beyond, the row
# kernels run.
"""

from __future__ import annotations

from netcl.core.kernels.family import KernelSource, kernel_family

from ._attention_kernels import _COMMON, MASK_KINDS
from ._launch import index_defs

__all__ = ["BLOCK_CHOICES", "TILED_ITEMS", "TILED_KERNELS", "tiled_config", "tiled_family",
           "tiled_source"]

TILED_ITEMS = 128  # work items per group: TY x TX = 8 x 16
TILED_MAX_HEAD = 128  # the largest E and Ev the tiled kernels are built for
TILED_KERNELS = ("attn_fwd_tiled", "attn_bwd_dq_tiled", "attn_bwd_dkdv_tiled")
_TY, _TX = 8, 16
# register blocks (RM, CN) tried in order: the first whose local tiles fit the device
_FORWARD_BLOCKS = ((4, 4), (4, 2), (2, 2), (2, 1))
_BACKWARD_BLOCKS = ((4, 2), (2, 2), (2, 1))
BLOCK_CHOICES = ("8x4", "8x2", "4x4", "4x2", "2x4", "2x2", "2x1")
"""Register blocks ``RMxCN`` a caller may prefer (``NETCL_ATTENTION_TILED_BLOCK``: GPU trials)."""

_TILED_COMMON = """
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
#define TILE(tile, p, base, r0, rows, cnt, n, n4, st, mul) \\
  for (int t = lid; t < (cnt) * (n4) * 4; t += NT) { \\
    const int rr = t / ((n4) * 4), e = t - rr * ((n4) * 4); \\
    const int r = (r0) + rr; \\
    ((__local float*)(tile))[rr * (st) * 4 + e] = \\
        (r < (rows) && e < (n)) ? LD(p, (base) + (IDX)r * (n) + e) * (mul) : 0.0f; \\
  }

/* The RM x CN block s[r][c] = A row (ty + TY r) . B row (tx + TX c) over n4 float4s. */
#define SCORES(s, A, sa, B, sb, n4) \\
  UNROLL for (int r = 0; r < RM; ++r) \\
    UNROLL for (int c = 0; c < CN; ++c) s[r][c] = 0.0f; \\
  for (int e = 0; e < (n4); ++e) { \\
    float4 a_[RM], b_[CN]; \\
    UNROLL for (int r = 0; r < RM; ++r) a_[r] = A[(ty + TY * r) * (sa) + e]; \\
    UNROLL for (int c = 0; c < CN; ++c) b_[c] = B[(tx + TX * c) * (sb) + e]; \\
    UNROLL for (int r = 0; r < RM; ++r) \\
      UNROLL for (int c = 0; c < CN; ++c) { \\
        float x = fma(a_[r].x, b_[c].x, s[r][c]); \\
        x = fma(a_[r].y, b_[c].y, x); \\
        x = fma(a_[r].z, b_[c].z, x); \\
        s[r][c] = fma(a_[r].w, b_[c].w, x); \\
      } \\
  }

/* acc[r][cc] += sum over k < GC of P[ty + TY r][k] B[k][tx + TX cc] (float4 columns below
   n4): P a score tile (PS4 float4s a row), B a tile of float4 rows of stride sb. */
#define ACCUM(acc, P, B, sb, n4, oc) \\
  for (int k4 = 0; k4 < GC / 4; ++k4) { \\
    float4 p_[RM]; \\
    UNROLL for (int r = 0; r < RM; ++r) p_[r] = P[(ty + TY * r) * PS4 + k4]; \\
    UNROLL for (int cc = 0; cc < (oc); ++cc) { \\
      const int c4 = tx + TX * cc; \\
      if (c4 < (n4)) { \\
        const float4 b0 = B[(4 * k4) * (sb) + c4], b1 = B[(4 * k4 + 1) * (sb) + c4]; \\
        const float4 b2 = B[(4 * k4 + 2) * (sb) + c4], b3 = B[(4 * k4 + 3) * (sb) + c4]; \\
        UNROLL for (int r = 0; r < RM; ++r) { \\
          float4 x = fma((float4)(p_[r].x), b0, acc[r][cc]); \\
          x = fma((float4)(p_[r].y), b1, x); \\
          x = fma((float4)(p_[r].z), b2, x); \\
          acc[r][cc] = fma((float4)(p_[r].w), b3, x); \\
        } \\
      } \\
    } \\
  }
#define ZERO(acc, oc) \\
  UNROLL for (int r = 0; r < RM; ++r) \\
    UNROLL for (int cc = 0; cc < (oc); ++cc) acc[r][cc] = (float4)(0.0f);
/* Row (first + ty + TY r) of n elements at base + row * n from acc[r][.] times mul. */
#define STORE_ROWS(p, base, first, rows, n, n4, acc, oc, mul) \\
  UNROLL for (int r = 0; r < RM; ++r) { \\
    const int i = (first) + ty + TY * r; \\
    if (i >= (rows)) continue; \\
    UNROLL for (int cc = 0; cc < (oc); ++cc) { \\
      const int c4 = tx + TX * cc; \\
      if (c4 >= (n4)) continue; \\
      const float4 x = acc[r][cc] * (mul); \\
      const IDX o = (base) + (IDX)i * (n) + 4 * c4; \\
      ST(p, o, x.x); \\
      if (4 * c4 + 1 < (n)) ST(p, o + 1, x.y); \\
      if (4 * c4 + 2 < (n)) ST(p, o + 2, x.z); \\
      if (4 * c4 + 3 < (n)) ST(p, o + 3, x.w); \\
    } \\
  }
#define PAT(P, r, c) ((__local float*)(P))[(r) * PS4 * 4 + (c)]
"""

_FORWARD = """
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_fwd_tiled(__global T* out, __global float* lse, OPERAND_ARGS MASK_ARG)
{
  __local float4 qs[GR * ES], kv[GC * (ES > EVS ? ES : EVS)], ps[GR * PS4], red[GR * TX / 4];
  const int b = get_group_id(1), lid = get_local_id(0), ty = lid / TX, tx = lid % TX;
  const int row0 = get_group_id(0) * GR;
  OPERAND_BASES(b)
  MASK_BASE(b)
  TILE(qs, q, qb, row0, L, GR, E, E4, ES, scale)
  float4 acc[RM][OEV];
  ZERO(acc, OEV)
  float m[RM], lp[RM];
  UNROLL for (int r = 0; r < RM; ++r) { m[r] = NEG_INF; lp[r] = 0.0f; }
  const int last = causal ? min(S, row0 + GR) : S;  /* keys past it are masked for all rows */
  for (int j0 = 0; j0 < last; j0 += GC) {
    barrier(CLK_LOCAL_MEM_FENCE);
    TILE(kv, k, kb, j0, S, GC, E, E4, (ES > EVS ? ES : EVS), 1.0f)
    barrier(CLK_LOCAL_MEM_FENCE);
    float s[RM][CN];
    SCORES(s, qs, ES, kv, (ES > EVS ? ES : EVS), E4)
    UNROLL for (int r = 0; r < RM; ++r) {
      const int i = row0 + ty + TY * r;
      float pm = NEG_INF;
      UNROLL for (int c = 0; c < CN; ++c) {
        const int j = j0 + tx + TX * c;
        float x = NEG_INF;
        if (i < L && j < S && (!causal || j <= i)) x = s[r][c] + MASK_AT(i, j);
        s[r][c] = x;
        pm = fmax(pm, x);
      }
      ((__local float*)red)[(ty + TY * r) * TX + tx] = pm;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    UNROLL for (int r = 0; r < RM; ++r) {
      const int i = row0 + ty + TY * r;
      float mt = m[r];
      UNROLL for (int t = 0; t < TX / 4; ++t) {
        const float4 x = red[(ty + TY * r) * (TX / 4) + t];
        mt = fmax(mt, fmax(fmax(x.x, x.y), fmax(x.z, x.w)));
      }
      const float alpha = mt == NEG_INF ? 1.0f : exp(m[r] - mt);  /* m = -inf: 0 */
      m[r] = mt;
      lp[r] *= alpha;
      UNROLL for (int cc = 0; cc < OEV; ++cc) acc[r][cc] *= alpha;
      UNROLL for (int c = 0; c < CN; ++c) {
        float p = mt == NEG_INF ? 0.0f : exp(s[r][c] - mt);
        lp[r] += p;
        if (threshold && p != 0.0f) p *= DROP(b, i, j0 + tx + TX * c);
        PAT(ps, ty + TY * r, tx + TX * c) = p;
      }
    }
    TILE(kv, v, vb, j0, S, GC, EV, EV4, (ES > EVS ? ES : EVS), 1.0f)
    barrier(CLK_LOCAL_MEM_FENCE);
    ACCUM(acc, ps, kv, (ES > EVS ? ES : EVS), EV4, OEV)
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  UNROLL for (int r = 0; r < RM; ++r) ((__local float*)red)[(ty + TY * r) * TX + tx] = lp[r];
  barrier(CLK_LOCAL_MEM_FENCE);
  float inv[RM];
  UNROLL for (int r = 0; r < RM; ++r) {
    float4 x = (float4)(0.0f);
    UNROLL for (int t = 0; t < TX / 4; ++t) x += red[(ty + TY * r) * (TX / 4) + t];
    const float l = (x.x + x.y) + (x.z + x.w);
    const int i = row0 + ty + TY * r;
    inv[r] = l > 0.0f ? 1.0f / l : 0.0f;
    UNROLL for (int cc = 0; cc < OEV; ++cc) acc[r][cc] *= inv[r];
    if (tx == 0 && i < L) lse[(IDX)b * L + i] = l > 0.0f ? m[r] + log(l) : NEG_INF;
  }
  STORE_ROWS(out, (IDX)b * L * EV, row0, L, EV, EV4, acc, OEV, 1.0f)
}
"""

_BACKWARD_DQ = """
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void attn_bwd_dq_tiled(__global T* dq, __global const T* dout, __global const float* lse,
                       __global const float* dd, OPERAND_ARGS MASK_ARG)
{
  __local float4 qs[GR * ES], gs[GR * EVS], ks[GC * ES], vs[GC * EVS], dss[GR * PS4];
  __local float ls[GR], dl[GR];
  const int b = get_group_id(1), lid = get_local_id(0), ty = lid / TX, tx = lid % TX;
  const int row0 = get_group_id(0) * GR;
  OPERAND_BASES(b)
  MASK_BASE(b)
  TILE(qs, q, qb, row0, L, GR, E, E4, ES, scale)
  TILE(gs, dout, (IDX)b * L * EV, row0, L, GR, EV, EV4, EVS, 1.0f)
  for (int t = lid; t < GR; t += NT) {
    const int i = row0 + t;
    const float li = i < L ? lse[(IDX)b * L + i] : NEG_INF;
    ls[t] = li == NEG_INF ? INFINITY : li;
    dl[t] = i < L ? dd[(IDX)b * L + i] : 0.0f;
  }
  float4 acc[RM][OE];
  ZERO(acc, OE)
  const int last = causal ? min(S, row0 + GR) : S;
  for (int j0 = 0; j0 < last; j0 += GC) {
    barrier(CLK_LOCAL_MEM_FENCE);
    TILE(ks, k, kb, j0, S, GC, E, E4, ES, 1.0f)
    TILE(vs, v, vb, j0, S, GC, EV, EV4, EVS, 1.0f)
    barrier(CLK_LOCAL_MEM_FENCE);
    float s[RM][CN], dp[RM][CN];
    SCORES(s, qs, ES, ks, ES, E4)
    SCORES(dp, gs, EVS, vs, EVS, EV4)
    UNROLL for (int r = 0; r < RM; ++r) {
      const int ii = ty + TY * r, i = row0 + ii;
      UNROLL for (int c = 0; c < CN; ++c) {
        const int j = j0 + tx + TX * c;
        float ds = 0.0f;
        if (i < L && j < S && (!causal || j <= i)) {
          const float p = exp(s[r][c] + MASK_AT(i, j) - ls[ii]);
          if (p != 0.0f) {
            float d = dp[r][c];
            if (threshold) d *= DROP(b, i, j);
            ds = p * (d - dl[ii]);
          }
        }
        PAT(dss, ii, tx + TX * c) = ds;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    ACCUM(acc, dss, ks, ES, E4, OE)
  }
  STORE_ROWS(dq, (IDX)b * L * E, row0, L, E, E4, acc, OE, scale)
}
"""

_BACKWARD_DKDV = """
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
"""

_KERNELS = {"attn_fwd_tiled": _FORWARD, "attn_bwd_dq_tiled": _BACKWARD_DQ,
            "attn_bwd_dkdv_tiled": _BACKWARD_DKDV}


def _odd(n: int) -> int:
    return n | 1


def tiled_local_bytes(kernel: str, E: int, Ev: int, rm: int, cn: int) -> int:
    """Local memory of ``kernel`` for head dims ``E``/``Ev`` and register block ``rm`` x
    ``cn`` (GR = 8 rm rows by GC = 16 cn columns of scores).

    Examples:
        >>> tiled_local_bytes("attn_fwd_tiled", 64, 64, 4, 4)
        36864
        >>> tiled_local_bytes("attn_bwd_dkdv_tiled", 64, 64, 4, 2)
        44288
    """
    es, evs = _odd(-(-E // 4)), _odd(-(-Ev // 4))
    gr, gc = _TY * rm, _TX * cn
    scores = gr * (gc // 4 + 1)  # float4s
    if kernel == "attn_fwd_tiled":
        f4 = gr * es + gc * max(es, evs) + scores + gr * _TX // 4
        return 16 * f4
    if kernel == "attn_bwd_dq_tiled":
        return 16 * ((gr + gc) * (es + evs) + scores) + 8 * gr
    return 16 * ((gr + gc) * (es + evs) + 2 * scores) + 8 * gc


def tiled_config(kernel: str, E: int, Ev: int, local_mem: int,
                 prefer: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """The register block ``(rm, cn)`` of ``kernel`` (NOTE [ Register-tiled attention
    kernels ]): ``prefer`` where its local tiles fit ``local_mem`` bytes, else the first of a
    short list that fits, or ``None`` (head dims beyond :data:`TILED_MAX_HEAD`, or too little
    local memory).

    Examples:
        >>> tiled_config("attn_fwd_tiled", 64, 64, 49152)
        (4, 4)
        >>> tiled_config("attn_fwd_tiled", 128, 128, 49152), tiled_config(
        ...     "attn_bwd_dq_tiled", 128, 128, 49152)
        ((4, 2), (2, 1))
        >>> tiled_config("attn_bwd_dkdv_tiled", 256, 64, 65536) is None
        True
        >>> tiled_config("attn_bwd_dq_tiled", 64, 64, 49152, prefer=(2, 4))
        (2, 4)
    """
    if not (0 < E <= TILED_MAX_HEAD and 0 < Ev <= TILED_MAX_HEAD):
        return None
    blocks = _FORWARD_BLOCKS if kernel == "attn_fwd_tiled" else _BACKWARD_BLOCKS
    if prefer is not None:
        blocks = (prefer, *blocks)
    for rm, cn in blocks:
        if tiled_local_bytes(kernel, E, Ev, rm, cn) <= local_mem:
            return rm, cn
    return None


def tiled_source(kernel: str, E: int, Ev: int, mask: str, rm: int, cn: int,
                 wide: bool) -> str:
    """The program of ``kernel`` (one of :data:`TILED_KERNELS`) for head dims ``E``/``Ev``, a
    mask kind of :data:`~._attention_kernels.MASK_KINDS`, register blocks of ``rm`` x ``cn``
    scores and 64-bit indices if ``wide``; the dtype header comes from :func:`tiled_family`."""
    defs = index_defs(2**31 if wide else 0)[0]
    return (f"{defs}#define E {E}\n#define EV {Ev}\n#define E4 {-(-E // 4)}\n"
            f"#define EV4 {-(-Ev // 4)}\n#define RM {rm}\n#define CN {cn}\n"
            f"#define MASK_KIND {MASK_KINDS.index(mask)}\n{_COMMON}{_TILED_COMMON}"
            f"{_KERNELS[kernel]}")


def _tiled_golden() -> list[tuple[str, tuple[str, str, int, int, str, int, int, bool]]]:
    cases = [(f"attention/{k}-float32-e64", (k, "float32", 64, 64, "none", 4,
                                             4 if k == "attn_fwd_tiled" else 2, False))
             for k in _KERNELS]
    cases += [("attention/attn_fwd_tiled-float16-e128-bool",
               ("attn_fwd_tiled", "float16", 128, 128, "bool", 4, 2, False)),
              ("attention/attn_bwd_dkdv_tiled-float32-e80-float",
               ("attn_bwd_dkdv_tiled", "float32", 80, 48, "float", 2, 2, False))]
    return cases


@kernel_family("ops.attention_tiled", golden=_tiled_golden)
def tiled_family(kernel: str, dtype: str, E: int, Ev: int, mask: str, rm: int, cn: int,
                 wide: bool) -> KernelSource:
    """One register-tiled attention kernel (NOTE [ Register-tiled attention kernels ])."""
    return KernelSource(tiled_source(kernel, E, Ev, mask, rm, cn, wide), (kernel,), dtype)
