"""OpenCL C source of the TF32 tensor-core GEMM for float32 (inline PTX ``mma.sync`` m16n8k8).

``C[b] = op(A[b]) @ op(B[b])`` with A, B and C float32, every matrix row-major with its own
leading dimension, element offset and batch stride. Each work-item loads its tile elements
(coalesced along the stored rows, any alignment) one k-tile ahead into registers, rounds them
to TF32 (``cvt.rna.tf32.f32``: 10 mantissa bits, to nearest, ties away) and stores them to
one of two local stages as ``sA[m][k]`` and ``sB[n][k]`` (rows padded by 4 words, so the
fragment loads of a warp hit 32 distinct banks); the warps run
``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`` with float32 accumulation.
``emulate=True`` renders the two PTX statements in plain C (the rounding, and the mma's
lane exchange through local memory), so CPU devices check everything else.

# NOTE [ TF32 fragments ]
# For m16n8k8 .tf32 lane ``l`` (``g = l / 4``, ``t = l % 4``) holds A as
# {A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]}, B as {B[t][g], B[t+4][g]} and C as
# {C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]} (PTX ISA, "Matrix fragments for
# mma.m16n8k8" with .tf32). With tile rows of ``BK + 4`` words, lane (g, t) reads bank
# ``(g * (BK + 4) + t) % 32``: distinct for BK = 16 (20g + t) and BK = 32 (36g + t).
"""

from __future__ import annotations

from dataclasses import dataclass

from ._matmul_mma_source import emulated_mma

__all__ = ["Tf32Config", "tf32_gemm_source", "tf32_kernel_name"]

_LOCAL_LIMIT = 49152


@dataclass(frozen=True)
class Tf32Config:
    """Compile-time parameters of one TF32 GEMM kernel: a ``bm x bn`` work-group tile
    stepping ``bk`` (a multiple of 8), ``warps_m x warps_n`` warps, the transposes
    (``trans_a``: A stored K x M; ``trans_b``: B stored N x K), ``emulate`` for plain-C PTX.

    Examples:
        >>> Tf32Config().label()
        '128x128x16_w2x4'
        >>> Tf32Config(bk=12).check()
        Traceback (most recent call last):
        ...
        ValueError: Tf32Config: bk must be a multiple of 8, got bk=12
    """

    bm: int = 128
    bn: int = 128
    bk: int = 16
    warps_m: int = 2
    warps_n: int = 4
    trans_a: bool = False
    trans_b: bool = False
    emulate: bool = False

    @property
    def threads(self) -> int:
        """Work-items per work-group."""
        return 32 * self.warps_m * self.warps_n

    @property
    def local_bytes(self) -> int:
        """Local memory of the two stages (padded rows)."""
        return 2 * (self.bm + self.bn) * (self.bk + 4) * 4

    def label(self) -> str:
        """``BMxBNxBK_wMxN`` plus ``_tn``-style transposes and ``_emu``."""
        flags = ""
        if self.trans_a or self.trans_b:
            flags += f"_{'t' if self.trans_a else 'n'}{'t' if self.trans_b else 'n'}"
        flags += "_emu" if self.emulate else ""
        return f"{self.bm}x{self.bn}x{self.bk}_w{self.warps_m}x{self.warps_n}{flags}"

    def check(self) -> None:
        """Raise ``ValueError`` naming the rule the parameters break."""
        nt = self.threads
        a_cols = self.bm if self.trans_a else self.bk
        b_cols = self.bk if self.trans_b else self.bn
        rules = [
            (self.warps_m >= 1 and self.warps_n >= 1, "warps_m and warps_n must be >= 1",
             f"warps {self.warps_m}x{self.warps_n}"),
            (self.bk % 8 == 0 and self.bk >= 8, "bk must be a multiple of 8", f"bk={self.bk}"),
            (self.bm % self.warps_m == 0 and (self.bm // self.warps_m) % 16 == 0,
             "bm / warps_m must be a multiple of 16", f"bm={self.bm}, warps_m={self.warps_m}"),
            (self.bn % self.warps_n == 0 and (self.bn // self.warps_n) % 8 == 0,
             "bn / warps_n must be a multiple of 8", f"bn={self.bn}, warps_n={self.warps_n}"),
            (nt % a_cols == 0 and nt % b_cols == 0,
             "the tiles' stored rows must divide the work-items",
             f"{nt} work-items, rows of {a_cols} and {b_cols}"),
            ((self.bm * self.bk) % nt == 0 and (self.bn * self.bk) % nt == 0,
             "the tile elements must divide among the work-items", f"{nt} work-items"),
            (self.local_bytes <= _LOCAL_LIMIT, "the two stages must fit in 48 KiB",
             f"{self.local_bytes} bytes"),
        ]
        for ok, rule, got in rules:
            if not ok:
                raise ValueError(f"Tf32Config: {rule}, got {got}")


def tf32_kernel_name(config: Tf32Config) -> str:
    """``sgemm_tf32_<transposes>``.

    Examples:
        >>> tf32_kernel_name(Tf32Config(trans_b=True))
        'sgemm_tf32_nt'
    """
    return f"sgemm_tf32_{'t' if config.trans_a else 'n'}{'t' if config.trans_b else 'n'}"


def tf32_gemm_source(config: Tf32Config) -> str:
    """The OpenCL C source of the TF32 GEMM ``config`` describes.

    Examples:
        >>> src = tf32_gemm_source(Tf32Config())
        >>> "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in src
        True
        >>> "__asm__" in tf32_gemm_source(Tf32Config(emulate=True))
        False
    """
    config.check()
    c = config
    nt = c.threads
    # (row, column) of element e of each tile as stored in global memory, coalesced along
    # the stored rows: A_R/A_C are (m, k) offsets in the tile, B_R/B_C (k, n).
    if c.trans_a:  # A stored K x M: work-items along m
        a_map = [f"#define A_M(e) (tid % {c.bm})", f"#define A_K(e) (tid / {c.bm} + (e) * "
                 f"{nt // c.bm})", "#define A_AT(m, k) ((long)(k) * lda + (m))"]
    else:
        a_map = [f"#define A_M(e) (tid / {c.bk} + (e) * {nt // c.bk})",
                 f"#define A_K(e) (tid % {c.bk})", "#define A_AT(m, k) ((long)(m) * lda + (k))"]
    if c.trans_b:  # B stored N x K: work-items along k
        b_map = [f"#define B_N(e) (tid / {c.bk} + (e) * {nt // c.bk})",
                 f"#define B_K(e) (tid % {c.bk})", "#define B_AT(k, n) ((long)(n) * ldb + (k))"]
    else:
        b_map = [f"#define B_N(e) (tid % {c.bn})",
                 f"#define B_K(e) (tid / {c.bn} + (e) * {nt // c.bn})",
                 "#define B_AT(k, n) ((long)(k) * ldb + (n))"]
    defines = [
        f"#define BM {c.bm}", f"#define BN {c.bn}", f"#define BK {c.bk}",
        f"#define WARPS_M {c.warps_m}", f"#define WARPS_N {c.warps_n}",
        f"#define KERNEL_NAME {tf32_kernel_name(c)}", *a_map, *b_map,
    ]
    ptx = _EMULATED if c.emulate else _PTX
    return "\n".join(defines) + "\n" + _DERIVED + ptx + _KERNEL


_DERIVED = """\
#define NT (32 * WARPS_M * WARPS_N)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define MI (WM / 16)
#define NI (WN / 8)
#define LDT (BK + 4)
#define A_PER (BM * BK / NT)
#define B_PER (BN * BK / NT)
"""

_PTX = """\
#define EMU_LOCALS
inline uint tf32_rna(const float x)
{
    uint r;
    __asm__("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
#define TF32(x) tf32_rna(x)
#define MMA_1688(d, a, b) __asm__( \\
    "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 " \\
    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" \\
    : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3]) \\
    : "r"((a)[0]), "r"((a)[1]), "r"((a)[2]), "r"((a)[3]), "r"((b)[0]), "r"((b)[1]))
"""

# Rounding as cvt.rna (finite values: add half an ulp of TF32 to the magnitude, drop 13 bits;
# infinities and NaNs pass); the mma through local memory, one warp's fragments at a time
# (NOTE [ Emulated PTX ] of _matmul_mma_source).
_EMULATED = """\
#define EMU_LOCALS __local uint emu_frag[NT * 6];
inline uint tf32_rna(const float x)
{
    const uint u = as_uint(x);
    return ((u >> 23) & 0xffu) == 0xffu ? u : ((u + 0x1000u) & 0xffffe000u);
}
#define TF32(x) tf32_rna(x)
#define EMU_A(r, k) as_float(emu_frag[((tid & ~31) + ((r) & 7) * 4 + ((k) & 3)) * 6 \\
                                      + ((r) >> 3) + 2 * ((k) >> 2)])
#define EMU_B(k, n) as_float(emu_frag[((tid & ~31) + (n) * 4 + ((k) & 3)) * 6 + 4 + ((k) >> 2)])
""" + emulated_mma("MMA_1688", 8)

_KERNEL = """\
#define LOAD_TILES(kt) do { \\
    const int k0 = (kt) * BK; \\
    for (int e = 0; e < A_PER; ++e) { \\
        const int m = m0 + A_M(e), k = k0 + A_K(e); \\
        va[e] = (m < M && k < K) ? A[A_AT(m, k)] : 0.0f; \\
    } \\
    for (int e = 0; e < B_PER; ++e) { \\
        const int n = n0 + B_N(e), k = k0 + B_K(e); \\
        vb[e] = (n < N && k < K) ? B[B_AT(k, n)] : 0.0f; \\
    } \\
} while (0)
#define STORE_TILES(st) do { \\
    for (int e = 0; e < A_PER; ++e) { \\
        sA[((st) * BM + A_M(e)) * LDT + A_K(e)] = TF32(va[e]); \\
    } \\
    for (int e = 0; e < B_PER; ++e) { \\
        sB[((st) * BN + B_N(e)) * LDT + B_K(e)] = TF32(vb[e]); \\
    } \\
} while (0)
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void KERNEL_NAME(__global const float* restrict A, const long off_a, const int lda,
                 const long batch_a, __global const float* restrict B, const long off_b,
                 const int ldb, const long batch_b, __global float* restrict C,
                 const long off_c, const int ldc, const long batch_c,
                 const int M, const int N, const int K)
{
    __local uint sA[2 * BM * LDT];
    __local uint sB[2 * BN * LDT];
    EMU_LOCALS
    const int tid = (int)get_local_id(0), lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int tiles_m = (M + BM - 1) / BM, pid = (int)get_group_id(0);
    const int m0 = (pid % tiles_m) * BM, n0 = (pid / tiles_m) * BN;
    A += off_a + (long)get_group_id(1) * batch_a;
    B += off_b + (long)get_group_id(1) * batch_b;
    C += off_c + (long)get_group_id(1) * batch_c;
    float va[A_PER], vb[B_PER];
    float acc[MI][NI][4];
    #pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        #pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.0f;
        }
    }
    const int KT = (K + BK - 1) / BK;
    LOAD_TILES(0);
    STORE_TILES(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kt = 0; kt < KT; ++kt) {
        const int st = kt & 1, more = kt + 1 < KT;
        if (more) {
            LOAD_TILES(kt + 1);
        }
        #pragma unroll
        for (int ks = 0; ks < BK / 8; ++ks) {
            uint af[MI][4];
            uint bf[NI][2];
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                const int r = (st * BM + wm * WM + mi * 16 + g) * LDT + ks * 8 + t;
                af[mi][0] = sA[r];
                af[mi][1] = sA[r + 8 * LDT];
                af[mi][2] = sA[r + 4];
                af[mi][3] = sA[r + 8 * LDT + 4];
            }
            #pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                const int r = (st * BN + wn * WN + ni * 8 + g) * LDT + ks * 8 + t;
                bf[ni][0] = sB[r];
                bf[ni][1] = sB[r + 4];
            }
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                #pragma unroll
                for (int ni = 0; ni < NI; ++ni) {
                    MMA_1688(acc[mi][ni], af[mi], bf[ni]);
                }
            }
        }
        if (more) {
            STORE_TILES(st ^ 1);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    #pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + wm * WM + mi * 16 + g + h * 8;
            #pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                const int n = n0 + wn * WN + ni * 8 + 2 * t;
                if (m < M && n < N) {
                    C[(long)m * ldc + n] = acc[mi][ni][2 * h];
                }
                if (m < M && n + 1 < N) {
                    C[(long)m * ldc + n + 1] = acc[mi][ni][2 * h + 1];
                }
            }
        }
    }
}
"""
