"""OpenCL C sources of the register-tiled implicit-GEMM convolutions (``_conv_igemm``).

All three computations of a convolution are one GEMM ``C[M x N] = A[M x KD] @ B[KD x N]``
whose operands are gathered straight from the tensors (no im2col or col2im buffer):

========  ==================  ===================  ======================  ===================
pass      M (rows)            N (columns)          KD (reduced)            gathered operand
========  ==================  ===================  ======================  ===================
forward   out channel ``kg``  ``n*OH*OW`` pixels   ``cg*R*S`` taps         B from ``x``
data      in channel ``cg``   ``n*H*W`` pixels     ``kg*R*S`` taps         B from ``grad``
weight    out channel ``kg``  ``cg*R*S`` taps      ``n*OH*OW`` (split-K)   B from ``x``
========  ==================  ===================  ======================  ===================

The grid's third dimension is the group (times the split of the reduction for the weight
gradient, whose partial sums a deterministic ``sum_batch`` pass adds in a fixed order, so
results are reproducible run to run). A work-group of ``LX x LY`` work-items computes a
``BM x BN`` tile of C; each work-item ``TM x TN`` outputs, rows ``ty + i*LY`` and columns
``tx + j*LX`` (interleaved: conflict-free local reads, coalesced stores), stepping ``BK``
along the reduction with both operand tiles staged in local memory. Each work-item loads the
same tile column (or row) of the gathered operand on every step, so the division of its
pixel index into (image, row, column) happens once per kernel, and the window (kernel size,
stride, padding, dilation) is compile-time, so the tap index divides by constants.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

__all__ = ["DEFAULT_TILES", "DIRECTIONS", "FALLBACK_TILES", "TILINGS", "IgemmTiles",
           "Phase", "data_phased", "igemm_source", "phase_channel_fast", "phase_data_source",
           "phase_slots", "phase_table"]

DIRECTIONS = ("forward", "data", "weight")


@dataclass(frozen=True)
class IgemmTiles:
    """One tiling: a ``bm x bn`` tile of C per work-group of ``lx x ly`` work-items, stepping
    ``bk`` along the reduction.

    Examples:
        >>> t = IgemmTiles(64, 64, 16, 16, 16)
        >>> t.tm, t.tn, t.threads, t.valid()
        (4, 4, 256, True)
    """

    bm: int
    bn: int
    bk: int
    lx: int
    ly: int
    vec: bool = False
    """Stage the tiles as 4-vectors: each work-item reads its rows and columns of a step with
    ``tm / 4 + tn / 4`` vector loads from local memory instead of ``tm + tn`` scalar ones (its
    rows then go in runs of 4, ``ty * 4 + (i % 4) + (i / 4) * ly * 4``)."""

    @property
    def tm(self) -> int:
        """Rows of C per work-item."""
        return self.bm // self.ly

    @property
    def tn(self) -> int:
        """Columns of C per work-item."""
        return self.bn // self.lx

    @property
    def threads(self) -> int:
        """Work-items per work-group."""
        return self.lx * self.ly

    def valid(self) -> bool:
        """Whether the loaders' fixed thread-to-element mapping covers the tiles exactly:
        every work-item keeps one column of a ``bk x bn`` tile (and one reduction index of a
        ``bm x bk`` / ``bk x bn`` tile) on every step."""
        t = self.threads
        if self.vec and (self.tm % 4 or self.tn % 4):
            return False
        return (min(self.bm, self.bn, self.bk, self.lx, self.ly) > 0
                and self.bm % self.ly == 0 and self.bn % self.lx == 0
                and t % self.bn == 0 and self.bk % (t // self.bn) == 0
                and t % self.bk == 0 and self.bm % (t // self.bk) == 0
                and self.bn % (t // self.bk) == 0)

    def label(self) -> str:
        """``BMxBNxBK/TMxTN``, for benchmark tables and golden file names."""
        return f"{self.bm}x{self.bn}x{self.bk}/{self.tm}x{self.tn}" + ("v" if self.vec else "")


DEFAULT_TILES = IgemmTiles(64, 64, 16, 16, 16)  # 4x4 per work-item
FALLBACK_TILES = IgemmTiles(32, 32, 8, 8, 8)  # 64 work-items: fits any device's work-groups
TILINGS = {
    "64x64": DEFAULT_TILES,
    "128x128": IgemmTiles(128, 128, 16, 16, 16),  # 8x8 per work-item
    "128x64": IgemmTiles(128, 64, 16, 16, 16),  # 8x4
    "32x64": IgemmTiles(32, 64, 16, 16, 8),  # 4x4 in 128 work-items: few rows of C
    "128x128v": IgemmTiles(128, 128, 16, 16, 16, vec=True),
    "128x64v": IgemmTiles(128, 64, 16, 16, 16, vec=True),
    "64x64v": IgemmTiles(64, 64, 16, 16, 16, vec=True),
}
"""The tilings the rule picks from (``_conv_rule.implicit_tiles``) and the benchmark compares."""


def _defines(window: tuple[int, ...], t: IgemmTiles) -> str:
    r, s, sh, sw, ph, pw, dh, dw = window
    names = {"R": r, "S": s, "SH": sh, "SW": sw, "PH": ph, "PW": pw, "DH": dh, "DW": dw,
             "BM": t.bm, "BN": t.bn, "BK": t.bk, "LX": t.lx, "LY": t.ly, "TM": t.tm,
             "TN": t.tn, "VEC": int(t.vec)}
    lines = [f"#define {k} {v}" for k, v in names.items()]
    if t.vec:  # rows and columns in runs of 4 (IgemmTiles.vec)
        lines += ["#define ROW(i) (ty * 4 + ((i) & 3) + ((i) >> 2) * LY * 4)",
                  "#define COL(j) (tx * 4 + ((j) & 3) + ((j) >> 2) * LX * 4)",
                  "#define CAT4_(t) t##4", "#define CAT4(t) CAT4_(t)", "#define CT4 CAT4(CT)"]
    else:
        lines += ["#define ROW(i) (ty + (i) * LY)", "#define COL(j) (tx + (j) * LX)"]
    lines += ["#define RS (R * S)", "#define NT (LX * LY)",
              "#define APT (BM * BK / NT)  // A elements each work-item gathers per step",
              "#define BPT (BK * BN / NT)  // B elements"]
    return "\n".join(lines) + "\n"


# The shared inner product over one staged step: every work-item's TM x TN block.
_MULTIPLY = """
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            CT a[TM], b[TN];
#if VEC
            #pragma unroll
            for (int q = 0; q < TM / 4; ++q) {
                const CT4 v = As4[kk][ty + q * LY];
                a[4 * q] = v.s0; a[4 * q + 1] = v.s1; a[4 * q + 2] = v.s2; a[4 * q + 3] = v.s3;
            }
            #pragma unroll
            for (int q = 0; q < TN / 4; ++q) {
                const CT4 v = Bs4[kk][tx + q * LX];
                b[4 * q] = v.s0; b[4 * q + 1] = v.s1; b[4 * q + 2] = v.s2; b[4 * q + 3] = v.s3;
            }
#else
            #pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ROW(i)];
            #pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][COL(j)];
#endif
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = mad(a[i], b[j], acc[i][j]);
        }
"""

_PROLOGUE = """
    const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * LX + tx;
    const int n0 = get_group_id(0) * BN, m0 = get_group_id(1) * BM;
    const int kg = K / G, cg = C / G;
#if VEC
    __local CT4 As4[BK][BM / 4 + 1];
    __local CT4 Bs4[BK][BN / 4 + 1];
    #define AS(k, m) (((__local CT*)As4)[(k) * (BM + 4) + (m)])
    #define BS(k, n) (((__local CT*)Bs4)[(k) * (BN + 4) + (n)])
#else
    __local CT As[BK][BM + 1];
    __local CT Bs[BK][BN + 1];
    #define AS(k, m) As[k][m]
    #define BS(k, n) Bs[k][n]
#endif
    CT acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = (CT)0;
"""


def _loop(begin: str, end: str, load: str, store: str) -> str:
    """The reduction: each step stores the operand values gathered into registers (``ra``,
    ``rb``) in local memory, then gathers the next step's (``kt``: its first index) while it
    multiplies, so global latency overlaps the arithmetic."""
    return f"""
    CT ra[APT], rb[BPT];
    if ({begin} < {end}) {{
        const int kt = {begin};
{load}
    }}
    for (int k0 = {begin}; k0 < {end}; k0 += BK) {{
{store}
        barrier(CLK_LOCAL_MEM_FENCE);
        if (k0 + BK < {end}) {{
            const int kt = k0 + BK;
{load}
        }}
""" + _MULTIPLY + """
        barrier(CLK_LOCAL_MEM_FENCE);
    }
"""


# B tiles whose column is the work-item's (forward, data); A tiles whose reduction index is.
_STORE_COLUMNS = """
        #pragma unroll
        for (int i = 0; i < BPT; ++i) BS(tid / BN + i * (NT / BN), bn) = rb[i];
        #pragma unroll
        for (int i = 0; i < APT; ++i) AS(ak, tid / BK + i * (NT / BK)) = ra[i];"""

# y[n][g*kg + m][p] = sum over k = (c, r, s) of w[g*kg + m][k] * x[n][g*cg + c][window(p, r, s)]
_FORWARD = """
__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void conv2d_igemm_forward(__global const T* x, __global const T* w, __global const T* bias,
                          __global T* y, const int C, const int H, const int W, const int K,
                          const int OH, const int OW, const int G, const int NPIX,
                          const int has_bias) {
""" + _PROLOGUE + """
    const int g = get_group_id(2), KD = cg * RS, P = OH * OW;
    // this work-item's column of every B tile: one output pixel
    const int bn = tid % BN, col = n0 + bn, colok = col < NPIX;
    const int img = colok ? col / P : 0, pix = col - img * P;
    const int oh = pix / OW, ow = pix - oh * OW;
    const int ih0 = oh * SH - PH, iw0 = ow * SW - PW;
    const __global T* xb = x + ((long)img * C + g * cg) * H * W;
    // this work-item's reduction index of every A tile
    const int ak = tid % BK;
    const __global T* wb = w + (long)(g * kg + m0) * KD;
""" + _loop("0", "KD", """
            #pragma unroll
            for (int i = 0; i < BPT; ++i) {
                const int k = kt + tid / BN + i * (NT / BN);
                const int c = k / RS, rs = k - c * RS, r = rs / S, s = rs - r * S;
                const int ih = ih0 + r * DH, iw = iw0 + s * DW;
                rb[i] = (colok && k < KD && ih >= 0 && ih < H && iw >= 0 && iw < W)
                    ? LD(xb, (c * H + ih) * W + iw) : (CT)0;
            }
            #pragma unroll
            for (int i = 0; i < APT; ++i) {
                const int m = tid / BK + i * (NT / BK), k = kt + ak;
                ra[i] = (m0 + m < kg && k < KD) ? LD(wb, (long)m * KD + k) : (CT)0;
            }""", _STORE_COLUMNS) + """
    #pragma unroll
    for (int j = 0; j < TN; ++j) {
        const int cj = n0 + COL(j);
        if (cj >= NPIX) continue;
        const int nj = cj / P, pj = cj - nj * P;
        __global T* yp = y + ((long)nj * K + g * kg) * P + pj;
        #pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = m0 + ROW(i);
            if (m < kg)
                ST(yp, (long)m * P, acc[i][j] + (has_bias ? LD(bias, g * kg + m) : (CT)0));
        }
    }
}
"""

# dx[n][g*cg + c][q] = sum over k = (m, r, s) of w[g*kg + m][c][r][s] * gy[n][g*kg + m][o]
# where the output pixel o = ((ih + PH - r*DH) / SH, (iw + PW - s*DW) / SW) when both divide
_DATA = """
__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void conv2d_igemm_data(__global const T* gy, __global const T* w, __global T* dx,
                       const int C, const int H, const int W, const int K, const int OH,
                       const int OW, const int G, const int N) {
""" + _PROLOGUE + """
    const int g = get_group_id(2), KD = kg * RS, Q = H * W, NPIX = N * Q;
    // this work-item's column of every B tile: one input pixel
    const int bn = tid % BN, col = n0 + bn, colok = col < NPIX;
    const int img = colok ? col / Q : 0, q = col - img * Q;
    const int ih = q / W, iw = q - ih * W;
    const int th0 = ih + PH, tw0 = iw + PW;
    const __global T* gb = gy + ((long)img * K + g * kg) * OH * OW;
    // this work-item's reduction index of every A tile
    const int ak = tid % BK;
    const __global T* wb = w + (long)g * kg * cg * RS;
""" + _loop("0", "KD", """
            #pragma unroll
            for (int i = 0; i < BPT; ++i) {
                const int k = kt + tid / BN + i * (NT / BN);
                const int m = k / RS, rs = k - m * RS, r = rs / S, s = rs - r * S;
                const int th = th0 - r * DH, tw = tw0 - s * DW;
                const int oh = th / SH, ow = tw / SW;
                const int ok = colok && k < KD && th >= 0 && tw >= 0 && oh * SH == th
                    && ow * SW == tw && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = k / RS, rs = k - m * RS;
                const __global T* wk = wb + (long)m * cg * RS + rs;
                #pragma unroll
                for (int i = 0; i < APT; ++i) {
                    const int c = m0 + tid / BK + i * (NT / BK);
                    ra[i] = (c < cg && k < KD) ? LD(wk, c * RS) : (CT)0;
                }
            }""", _STORE_COLUMNS) + """
    #pragma unroll
    for (int j = 0; j < TN; ++j) {
        const int cj = n0 + COL(j);
        if (cj >= NPIX) continue;
        const int nj = cj / Q, qj = cj - nj * Q;
        __global T* dp = dx + ((long)nj * C + g * cg) * Q + qj;
        #pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int c = m0 + ROW(i);
            if (c < cg) ST(dp, (long)c * Q, acc[i][j]);
        }
    }
}
"""

# NOTE [ Strided data gradient by phases ]
# With stride (SH, SW) and no dilation, input pixel (ih, iw) receives only the taps r with
# r = (ih + PH) mod SH (mod SH), likewise s: the plain gather above would multiply zeros for
# the other (SH*SW - 1) / (SH*SW) of its reduction (3/4 at stride 2). So the input pixels go
# in SH*SW phases (ih = a mod SH, iw = b mod SW), one per grid plane beside the group; a phase
# reduces over its own NTH x NTW taps only (3x3 stride 2: 4, 2, 2 and 1 taps instead of 9 each)
# and a phase with no taps (1x1 stride 2 off the even pixels) writes zeros. Its reduction index
# k = m * TAPS + t divides by the phase's runtime tap count: through a float reciprocal,
# corrected by one step (exact for any k below 2**24).
_DATA_PHASED = """
int phased_div(const int k, const int d, const float inv) {
    int q = (int)((float)k * inv);
    if (q * d > k) --q;
    else if ((q + 1) * d <= k) ++q;
    return q;
}

__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void conv2d_igemm_data(__global const T* gy, __global const T* w, __global T* dx,
                       const int C, const int H, const int W, const int K, const int OH,
                       const int OW, const int G, const int N) {
""" + _PROLOGUE + """
    const int z = get_group_id(2), g = z / (SH * SW), phase = z - g * (SH * SW);
    const int a = phase / SW, b = phase - a * SW;  // ih = a (mod SH), iw = b (mod SW)
    const int HP = (H - a + SH - 1) / SH, WP = (W - b + SW - 1) / SW, QP = HP * WP;
    const int NPIX = N * QP;
    if (n0 >= NPIX) return;  // the whole work-group: no barrier is skipped by some items only
    const int rh = (a + PH) % SH, rw = (b + PW) % SW;  // the first tap of this phase
    const int NTH = max(0, (R - rh + SH - 1) / SH), NTW = max(0, (S - rw + SW - 1) / SW);
    const int TAPS = NTH * NTW, KD = kg * TAPS;
    const float inv_taps = 1.0f / max(TAPS, 1), inv_ntw = 1.0f / max(NTW, 1);
    // this work-item's column of every B tile: one input pixel of the phase
    const int bn = tid % BN, col = n0 + bn, colok = col < NPIX;
    const int img = colok ? col / QP : 0, qp = col - img * QP;
    const int ihp = qp / WP, iwp = qp - ihp * WP;
    const int ih = a + ihp * SH, iw = b + iwp * SW;
    const int oh0 = (ih + PH - rh) / SH, ow0 = (iw + PW - rw) / SW;  // the output of tap 0
    const __global T* gb = gy + ((long)img * K + g * kg) * OH * OW;
    // this work-item's reduction index of every A tile
    const int ak = tid % BK;
    const __global T* wb = w + (long)g * kg * cg * RS;
""" + _loop("0", "KD", """
            #pragma unroll
            for (int i = 0; i < BPT; ++i) {
                const int k = kt + tid / BN + i * (NT / BN);
                const int m = phased_div(k, TAPS, inv_taps), t = k - m * TAPS;
                const int th = phased_div(t, NTW, inv_ntw), tw = t - th * NTW;
                const int oh = oh0 - th, ow = ow0 - tw;
                const int ok = colok && k < KD && oh >= 0 && ow >= 0 && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }
            {
                const int k = kt + ak, m = phased_div(k, TAPS, inv_taps), t = k - m * TAPS;
                const int th = phased_div(t, NTW, inv_ntw), tw = t - th * NTW;
                const int rs = (rh + th * SH) * S + rw + tw * SW;
                const __global T* wk = wb + (long)m * cg * RS + rs;
                #pragma unroll
                for (int i = 0; i < APT; ++i) {
                    const int c = m0 + tid / BK + i * (NT / BK);
                    ra[i] = (c < cg && k < KD) ? LD(wk, c * RS) : (CT)0;
                }
            }""", _STORE_COLUMNS) + """
    #pragma unroll
    for (int j = 0; j < TN; ++j) {
        const int cj = n0 + COL(j);
        if (cj >= NPIX) continue;
        const int nj = cj / QP, qj = cj - nj * QP, hj = qj / WP;
        const int pix = (a + hj * SH) * W + b + (qj - hj * WP) * SW;
        __global T* dp = dx + ((long)nj * C + g * cg) * H * W + pix;
        #pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int c = m0 + ROW(i);
            if (c < cg) ST(dp, (long)c * H * W, acc[i][j]);
        }
    }
}
"""

# part[split][g*kg + m][t] (compute type) = sum over pixels j = (n, oh, ow) of the split's range of
# gy[n][g*kg + m][oh, ow] * x[n][g*cg + c][oh*SH - PH + r*DH, ow*SW - PW + s*DW], t = (c, r, s)
_WEIGHT = """
__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void conv2d_igemm_weight(__global const T* x, __global const T* gy, __global CT* part,
                         const int C, const int H, const int W, const int K, const int OH,
                         const int OW, const int G, const int NPIX, const int splits,
                         const int chunk) {
""" + _PROLOGUE + """
    const int z = get_group_id(2), g = z / splits, split = z - g * splits;
    const int KD = cg * RS, P = OH * OW;
    const int jbeg = split * chunk, jend = min(NPIX, jbeg + chunk);
    // this work-item's reduction index (pixel) of every tile, and its columns (taps) of B
    const int bk = tid % BK;
    int xoff[BPT], roff[BPT], soff[BPT];
    #pragma unroll
    for (int l = 0; l < BPT; ++l) {
        const int t = n0 + tid / BK + l * (NT / BK);
        const int c = t / RS, rs = t - c * RS, r = rs / S;
        xoff[l] = t < KD ? (g * cg + c) * H * W : -1;
        roff[l] = r * DH - PH;
        soff[l] = (rs - r * S) * DW - PW;
    }
    const __global T* gb = gy + (long)(g * kg + m0) * P;
""" + _loop("jbeg", "jend", """
            const int j = kt + bk, jok = j < jend;
            const int img = jok ? j / P : 0, p = j - img * P;
            const int oh = p / OW, ow = p - oh * OW;
            const __global T* xb = x + (long)img * C * H * W;
            #pragma unroll
            for (int l = 0; l < BPT; ++l) {
                const int ih = oh * SH + roff[l], iw = ow * SW + soff[l];
                rb[l] = (jok && xoff[l] >= 0 && ih >= 0 && ih < H && iw >= 0 && iw < W)
                    ? LD(xb, xoff[l] + ih * W + iw) : (CT)0;
            }
            const __global T* gj = gb + (long)img * K * P + p;
            #pragma unroll
            for (int i = 0; i < APT; ++i) {
                const int m = tid / BK + i * (NT / BK);
                ra[i] = (jok && m0 + m < kg) ? LD(gj, (long)m * P) : (CT)0;
            }""", """
        #pragma unroll
        for (int l = 0; l < BPT; ++l) BS(bk, tid / BK + l * (NT / BK)) = rb[l];
        #pragma unroll
        for (int i = 0; i < APT; ++i) AS(bk, tid / BK + i * (NT / BK)) = ra[i];""") + """
    __global CT* pp = part + ((long)split * K + g * kg) * KD;
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + ROW(i);
        if (m >= kg) continue;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int t = n0 + COL(j);
            if (t < KD) pp[(long)m * KD + t] = acc[i][j];
        }
    }
}

// dw[i] = the sum of the splits' partial sums (kept in the compute type: float16 storage
// does not round them), added in split order
__kernel void conv2d_igemm_weight_sum(__global const CT* part, __global T* dw, const int size,
                                      const int splits) {
    const int i = get_global_id(0);
    if (i >= size) return;
    CT acc = (CT)0;
    for (int s = 0; s < splits; ++s) acc += part[(long)s * size + i];
    ST(dw, i, acc);
}
"""

_SOURCES = {"forward": _FORWARD, "data": _DATA, "weight": _WEIGHT}


def igemm_source(direction: str, window: tuple[int, ...], tiles: IgemmTiles) -> str:
    """The program (after the dtype header) of one pass for a window ``(r, s, sh, sw, ph, pw,
    dh, dw)`` and tiling; its one kernel is ``conv2d_igemm_<direction>``.

    Raises:
        ValueError: an unknown direction, a window that is not eight ints, a tiling the
            loaders cannot cover (:meth:`IgemmTiles.valid`).

    Examples:
        >>> src = igemm_source("data", (3, 3, 2, 2, 1, 1, 1, 1), IgemmTiles(64, 64, 16, 16, 16))
        >>> "void conv2d_igemm_data" in src, "#define SH 2" in src
        (True, True)
    """
    if direction not in _SOURCES:
        raise ValueError(f"conv2d implicit GEMM: unknown direction {direction!r}; one of "
                         f"{', '.join(DIRECTIONS)}")
    if len(window) != 8:
        raise ValueError(f"conv2d implicit GEMM: a window is (r, s, sh, sw, ph, pw, dh, dw), "
                         f"got {window!r}")
    if not tiles.valid():
        raise ValueError(f"conv2d implicit GEMM: tiling {tiles} does not cover its tiles "
                         f"(see IgemmTiles.valid)")
    source = _DATA_PHASED if direction == "data" and data_phased(window) else _SOURCES[direction]
    return _defines(window, tiles) + source


def data_phased(window: tuple[int, ...]) -> bool:
    """Whether the data gradient of a window ``(r, s, sh, sw, ph, pw, dh, dw)`` goes by
    phases (NOTE [ Strided data gradient by phases ]): strided, not dilated.

    Examples:
        >>> data_phased((3, 3, 2, 2, 1, 1, 1, 1)), data_phased((3, 3, 1, 1, 1, 1, 1, 1))
        (True, False)
    """
    return window[2:4] != (1, 1) and window[6:8] == (1, 1)


# NOTE [ Phase-specialized data gradient ]
# The phased kernel above already reduces each input phase over its own taps, but it reads the
# phase's taps at run time: every gathered element divides its reduction index by the phase's
# tap count through a float reciprocal (twice), and the phases go in grid order (a, b), so at
# 3x3 stride 2 padding 1 the 1-tap phase (0, 0) is dispatched first and the 4-tap phase (1, 1)
# last (its work-groups run 4x longer and form the tail). ``conv2d_igemm_data_phase`` (variant
# CONV2D_IGEMM_PHASE) is the same decomposition with every phase's geometry compiled in:
#   - input pixels (ih, iw) with ih = a (mod SH), iw = b (mod SW) receive only the taps
#     r = rh + i * SH, rh = (a + PH) mod SH, i < NTH = ceil((R - rh) / SH) (likewise s, NTW),
#     from output rows oh = oh0 - i with oh0 = ihp + (a + PH - rh) / SH (ihp = ih div SH): a
#     dense implicit GEMM of cg rows, N * ceil((H - a) / SH) * ceil((W - b) / SW) columns and
#     kg * NTH * NTW reduction steps (3x3 stride 2 padding 1: 4, 2, 2, 1 taps; 1x1 stride 2:
#     one phase of 1 tap, a plain W^T gY written to the even pixels, and three of none);
#   - one launch: the grid's third dimension is (slot, group); a slot is one phase or several
#     run in turn by the same work-group (phase_slots: 3x3 stride 2 packs [4, 1] and [2, 2]
#     taps into two slots of even work, where four slots of 4, 2, 2, 1 leave the SMs that hold
#     a 4-tap and a 2-tap work-group running 1.5x the average), heaviest first, the phases of
#     no taps last; every phase is a block of the kernel with its constants as literals, so
#     every division by a tap count is one by a constant (a multiply and shift) and a phase of
#     no taps is a store of zeros with no reduction loop; ``config.extra["phase_pack"] =
#     False`` runs one phase per slot (bench_conv_layers' ``PHASE1`` rows);
#   - a 1x1 kernel's weight rows are contiguous in the input channel, so its A tile is
#     gathered channel-fastest (a warp reads consecutive floats) instead of reduction-fastest
#     (one float of each of 16 output channels' rows, 16 sectors per warp);
#   - deterministic (each output written once, no atomics), no scratch: dx is written whole.
# Dilated strided convolutions keep the phased kernel above (their taps do not split by the
# input's phase alone); the stride-1 data gradient is the plain gather (_DATA).
Phase = tuple[int, int, int, int, int, int]
"""``(a, b, rh, rw, nth, ntw)``: an input phase (ih = a mod SH, iw = b mod SW), its first tap
and its tap counts."""


def phase_table(window: tuple[int, ...]) -> list[Phase]:
    """``(a, b, rh, rw, nth, ntw)`` of each input phase of a strided window ``(r, s, sh, sw,
    ph, pw, dh, dw)`` (NOTE [ Phase-specialized data gradient ]), heaviest (most taps) first.

    Examples:
        >>> [t[4] * t[5] for t in phase_table((3, 3, 2, 2, 1, 1, 1, 1))]
        [4, 2, 2, 1]
        >>> phase_table((1, 1, 2, 2, 0, 0, 1, 1))[0], len(phase_table((1, 1, 2, 2, 0, 0, 1, 1)))
        ((0, 0, 0, 0, 1, 1), 4)
    """
    r, s, sh, sw, ph, pw = window[:6]
    rows = []
    for a in range(sh):
        for b in range(sw):
            rh, rw = (a + ph) % sh, (b + pw) % sw
            rows.append((a, b, rh, rw, max(0, -(-(r - rh) // sh)), max(0, -(-(s - rw) // sw))))
    return sorted(rows, key=lambda t: -t[4] * t[5])  # stable: (a, b) order among equals


@functools.lru_cache(maxsize=256)
def phase_slots(window: tuple[int, ...], pack: bool = True) -> tuple[tuple[Phase, ...], ...]:
    """The grid slots of the phase kernel: lists of :func:`phase_table` rows run in turn by a
    work-group (NOTE [ Phase-specialized data gradient ]). One phase per slot, heaviest first,
    the phases of no taps last; ``pack``: the phases with taps packed heaviest first onto the
    least loaded of ``total taps // most taps`` slots where no slot then carries more than
    5/4 of the heaviest phase's taps (3x3 stride 2 padding 1: [4, 1] and [2, 2] taps).
    Remembered per window (the launcher asks on every call).

    Examples:
        >>> [[p[4] * p[5] for p in slot] for slot in phase_slots((3, 3, 2, 2, 1, 1, 1, 1))]
        [[4, 1], [2, 2]]
        >>> [[p[4] * p[5] for p in slot] for slot in phase_slots((3, 3, 2, 2, 1, 1, 1, 1), False)]
        [[4], [2], [2], [1]]
        >>> [[p[4] * p[5] for p in slot] for slot in phase_slots((1, 1, 2, 2, 0, 0, 1, 1))]
        [[1], [0], [0], [0]]
    """
    table = phase_table(window)
    work = [p for p in table if p[4] * p[5]]
    zeros: list[tuple[Phase, ...]] = [(p,) for p in table if not p[4] * p[5]]
    slots: list[tuple[Phase, ...]] = [(p,) for p in work]
    if pack and work:
        most = work[0][4] * work[0][5]
        bins = max(1, sum(p[4] * p[5] for p in work) // most)
        if bins < len(work):
            loads = [0] * bins
            packed: list[list[Phase]] = [[] for _ in range(bins)]
            for p in work:
                i = loads.index(min(loads))
                packed[i].append(p)
                loads[i] += p[4] * p[5]
            if max(loads) * 4 <= most * 5:
                slots = [tuple(packed[i]) for i in sorted(range(bins), key=lambda i: -loads[i])]
    return (*slots, *zeros)


def phase_channel_fast(window: tuple[int, ...], t: IgemmTiles) -> bool:
    """Whether the phase kernel gathers its A tile channel-fastest: a 1x1 kernel (its weight
    rows are contiguous in the channel) and a tiling whose work-items cover ``BM`` channels
    ``NT / BM`` reduction steps at a time."""
    threads = t.threads
    return (window[0] * window[1] == 1 and threads % t.bm == 0
            and t.bk % (threads // t.bm) == 0)


_PHASE_HEAD = """
__kernel __attribute__((reqd_work_group_size(LX, LY, 1)))
void conv2d_igemm_data_phase(__global const T* gy, __global const T* w, __global T* dx,
                             const int C, const int H, const int W, const int K, const int OH,
                             const int OW, const int G, const int N) {
""" + _PROLOGUE + """
    const int z = get_group_id(2), slot = z / G, g = z - slot * G;
    const __global T* wb = w + (long)g * kg * cg * RS;
    const int bn = tid % BN, col = n0 + bn;
"""

# one phase (its own block: a slot may run several in turn): @A@, @B@, @RH@, @RW@, @NTH@, @NTW@,
# @TAPS@ and @RESET@ (a phase after another in its slot clears the accumulators) are literals
_PHASE_BODY = """
    {   // ih = @A@ mod SH, iw = @B@ mod SW: @NTH@ x @NTW@ taps
        const int pa = @A@, pb = @B@, rh = @RH@, rw = @RW@;
        const int NTH = @NTH@, NTW = @NTW@, TAPS = NTH * NTW;
        const int HP = (H - pa + SH - 1) / SH, WP = (W - pb + SW - 1) / SW, QP = HP * WP;
        const int NPIX = N * QP;
        if (n0 < NPIX) {  // the whole work-group: no barrier is skipped by some items only
#if @RESET@
        #pragma unroll
        for (int i = 0; i < TM; ++i)
            #pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = (CT)0;
#endif
#if @TAPS@
        const int KD = kg * TAPS, colok = col < NPIX;
        const int img = colok ? col / QP : 0, qp = col - img * QP;
        const int ihp = qp / WP, iwp = qp - ihp * WP;
        const int oh0 = ihp + (pa + PH - rh) / SH, ow0 = iwp + (pb + PW - rw) / SW;
        const __global T* gb = gy + ((long)img * K + g * kg) * OH * OW;
""" + "{loop}" + """
#endif
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int cj = n0 + COL(j);
            if (cj >= NPIX) continue;
            const int nj = cj / QP, qj = cj - nj * QP, hj = qj / WP;
            const int pix = (pa + hj * SH) * W + pb + (qj - hj * WP) * SW;
            __global T* dp = dx + ((long)nj * C + g * cg) * H * W + pix;
            #pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int c = m0 + ROW(i);
                if (c < cg) ST(dp, (long)c * H * W, acc[i][j]);
            }
        }
        }
    }
"""

_PHASE_LOAD_B = """
            #pragma unroll
            for (int i = 0; i < BPT; ++i) {
                const int k = kt + tid / BN + i * (NT / BN);
                const int m = k / TAPS, t = k - m * TAPS, th = t / NTW, tw = t - th * NTW;
                const int oh = oh0 - th, ow = ow0 - tw;
                const int ok = colok && k < KD && oh >= 0 && ow >= 0 && oh < OH && ow < OW;
                rb[i] = ok ? LD(gb, (m * OH + oh) * OW + ow) : (CT)0;
            }"""

# A reduction-fastest (the other kernels' mapping): a work-item keeps one reduction index
_PHASE_LOAD_A_K = """
            {
                const int k = kt + ak, m = k / TAPS, t = k - m * TAPS;
                const int th = t / NTW, tw = t - th * NTW;
                const __global T* wk = wb + (long)m * cg * RS + (rh + th * SH) * S + rw
                    + tw * SW;
                #pragma unroll
                for (int i = 0; i < APT; ++i) {
                    const int c = m0 + tid / BK + i * (NT / BK);
                    ra[i] = (c < cg && k < KD) ? LD(wk, c * RS) : (CT)0;
                }
            }"""

# A channel-fastest (1x1): a work-item keeps one channel, NT / BM reduction steps apart
_PHASE_LOAD_A_C = """
            {
                const int c = m0 + ac;
                #pragma unroll
                for (int i = 0; i < APT; ++i) {
                    const int k = kt + tid / BM + i * (NT / BM);
                    ra[i] = (c < cg && k < KD) ? LD(wb, (long)k * cg + c) : (CT)0;
                }
            }"""

_PHASE_STORE_C = """
        #pragma unroll
        for (int i = 0; i < BPT; ++i) BS(tid / BN + i * (NT / BN), bn) = rb[i];
        #pragma unroll
        for (int i = 0; i < APT; ++i) AS(tid / BM + i * (NT / BM), ac) = ra[i];"""


def phase_data_source(window: tuple[int, ...], t: IgemmTiles) -> str:
    """The program (after the dtype header) of ``conv2d_igemm_data_phase`` (NOTE
    [ Phase-specialized data gradient ]) for a strided, undilated window ``(r, s, sh, sw, ph,
    pw, dh, dw)`` and ``pack`` (1, the default: :func:`phase_slots` packs phases; 0: one per
    slot); launched over ``G * len(phase_slots(window, pack))`` planes.

    Raises:
        ValueError: a window that is not eight ints, unstrided or dilated; a tiling the
            loaders cannot cover.

    Examples:
        >>> src = phase_data_source((3, 3, 2, 2, 1, 1, 1, 1), IgemmTiles(64, 64, 16, 16, 16))
        >>> src.count("NTH = "), src.count("if (slot == "), "conv2d_igemm_data_phase" in src
        (4, 2, True)
    """
    if len(window) == 8:
        window = (*window, 1)
    if len(window) != 9 or not data_phased(window[:8]):
        raise ValueError(f"conv2d phase data gradient: needs a strided, undilated window "
                         f"(r, s, sh, sw, ph, pw, dh, dw[, pack]), got {window!r}")
    if not t.valid():
        raise ValueError(f"conv2d phase data gradient: tiling {t} does not cover its tiles "
                         f"(see IgemmTiles.valid)")
    channel_fast = phase_channel_fast(window, t)
    if channel_fast:
        loop = _loop("0", "KD", _PHASE_LOAD_B + _PHASE_LOAD_A_C, _PHASE_STORE_C)
        setup = "    const int ac = tid % BM;\n"
    else:
        loop = _loop("0", "KD", _PHASE_LOAD_B + _PHASE_LOAD_A_K, _STORE_COLUMNS)
        setup = "    const int ak = tid % BK;\n"
    branches = []
    for slot, phases in enumerate(phase_slots(window[:8], bool(window[8]))):
        bodies = []
        for turn, (a, b, rh, rw, nth, ntw) in enumerate(phases):
            body = _PHASE_BODY.replace("{loop}", loop)
            for name, value in (("@A@", a), ("@B@", b), ("@RH@", rh), ("@RW@", rw),
                                ("@NTH@", nth), ("@NTW@", ntw), ("@TAPS@", nth * ntw),
                                ("@RESET@", int(turn > 0))):
                body = body.replace(name, str(value))
            bodies.append(body)
        branches.append(f"    {'else ' if slot else ''}if (slot == {slot}) {{"
                        + "".join(bodies) + "    }\n")
    return _defines(window[:8], t) + _PHASE_HEAD + setup + "".join(branches) + "}\n"
