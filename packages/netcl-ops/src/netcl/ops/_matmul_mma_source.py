"""OpenCL C sources of tensor-core GEMM kernels for NVIDIA devices (inline PTX ``mma.sync``).

NVIDIA's OpenCL driver has no ``cl_khr_fp16`` arithmetic, but its compiler accepts inline PTX:
``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` (f16 inputs, f32 accumulation),
``ldmatrix`` (warp-wide fragment loads from local memory) and ``cp.async`` (global to local
copies that bypass registers) all build from OpenCL C. This module only renders text: it
imports nothing from netcl, so ``benchmarks/probe_mma.py`` can load it by path on the GPU
machine. :mod:`._matmul_mma` builds, probes and launches the kernels.

The GEMM computes, per batch index ``b``, ``C[b] = A[b] @ B[b]`` with ``A`` (M x K) and ``B``
(K x N) row-major float16 bit patterns (``ushort``), ``C`` (M x N) row-major float32 or float16.
It requires ``K % 8 == 0`` and ``N % 8 == 0`` (16-byte rows for ``cp.async``) and 16-byte aligned
buffers; ``M`` is free. Out-of-range rows and columns of a tile are zero-filled by ``cp.async``'s
source-size operand.

# NOTE [ mma.sync fragments ]
# For m16n8k16 a warp's lane ``l`` (``g = l / 4``, ``t = l % 4``) holds A as four .b32
# registers {A[g][2t..2t+1], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..]}, B as two
# {B[2t..2t+1][g], B[2t+8..2t+9][g]} and C as {C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]}
# (PTX ISA, "Matrix fragments for mma.m16n8k16"). ``ldmatrix.x4`` hands lane ``l`` row
# ``l / 4`` of each of four 8x8 matrices, which is exactly the A fragment when lanes 0-15 point
# at rows 0-15 of columns 0-7 and lanes 16-31 at columns 8-15; ``ldmatrix.x4.trans`` on a
# row-major (k, n) tile gives two B fragments (n 0-7 and 8-15) the same way.
#
# NOTE [ Local memory swizzle ]
# One ldmatrix phase reads eight 16-byte rows at the same column; with tile rows of 64 or
# 256 bytes they would hit the same banks. The 16-byte chunk ``c`` of row ``r`` is stored at
# chunk ``c ^ f(r)`` instead (``f(r) = r & 7`` for rows of 8+ chunks, ``(r >> 1) & 3`` for 4,
# ``(r >> 2) & 1`` for 2), so any eight consecutive rows fall in eight distinct bank groups,
# without the padding that would push three 128x128x32 stages past 48 KiB.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "LOCAL_MEMORY_LIMIT",
    "MmaConfig",
    "TILE_F16_SOURCE",
    "TILE_TF32_SOURCE",
    "hgemm_kernel_name",
    "hgemm_source",
]

# The static local memory one OpenCL work-group may use on NVIDIA devices (48 KiB).
LOCAL_MEMORY_LIMIT = 49152


@dataclass(frozen=True)
class MmaConfig:
    """Compile-time parameters of one tensor-core GEMM kernel.

    ``bm x bn`` is the work-group tile and ``bk`` its depth (a multiple of 16, the mma depth);
    ``warps_m x warps_n`` warps split the tile, each computing a ``bm / warps_m`` x
    ``bn / warps_n`` block of 16 x 8 mma tiles. ``stages`` local buffers form the copy
    pipeline. ``async_copy`` loads tiles with ``cp.async`` (else through registers),
    ``ldmatrix`` loads fragments with ``ldmatrix`` (else with 32/16-bit local loads).
    ``out_f16`` writes C as float16 (round to nearest even), else float32. ``group_m`` tile
    rows are walked column by column (L2 reuse of B). ``stub`` replaces every PTX statement by
    plain C, for compile checks on devices without PTX (the results are meaningless).

    Examples:
        >>> c = MmaConfig(bm=128, bn=128, bk=32, warps_m=2, warps_n=2, stages=3)
        >>> c.threads, c.local_bytes
        (128, 49152)
    """

    bm: int = 128
    bn: int = 128
    bk: int = 32
    warps_m: int = 2
    warps_n: int = 2
    stages: int = 3
    async_copy: bool = True
    ldmatrix: bool = True
    out_f16: bool = False
    group_m: int = 8
    stub: bool = False

    @property
    def threads(self) -> int:
        """Work-items per work-group (32 per warp)."""
        return 32 * self.warps_m * self.warps_n

    @property
    def local_bytes(self) -> int:
        """Local memory of all pipeline stages (A and B tiles in float16)."""
        return self.stages * (self.bm * self.bk + self.bk * self.bn) * 2

    def check(self) -> None:
        """Raise ``ValueError`` naming the rule when the parameters cannot form a kernel."""
        wm, wn = self.bm // max(self.warps_m, 1), self.bn // max(self.warps_n, 1)
        rules = [
            (self.warps_m >= 1 and self.warps_n >= 1, "warps_m and warps_n must be >= 1"),
            (self.bm % self.warps_m == 0 and wm % 16 == 0, "bm / warps_m must be a multiple of 16"),
            (self.bn % self.warps_n == 0 and wn % 16 == 0, "bn / warps_n must be a multiple of 16"),
            (self.bk % 16 == 0 and self.bk >= 16, "bk must be a multiple of 16"),
            (self.stages >= 2, "stages must be >= 2"),
            ((self.bm * self.bk // 8) % self.threads == 0, "bm * bk / 8 must divide by threads"),
            ((self.bk * self.bn // 8) % self.threads == 0, "bk * bn / 8 must divide by threads"),
            (self.local_bytes <= LOCAL_MEMORY_LIMIT, "local memory must fit in 48 KiB"),
            (self.group_m >= 1, "group_m must be >= 1"),
        ]
        for ok, rule in rules:
            if not ok:
                raise ValueError(f"MmaConfig: {rule}, got {self}")

    def label(self) -> str:
        """A short name: ``128x128x32_w2x2_s3`` plus ``_sync``/``_lds``/``_h`` flags."""
        flags = ("" if self.async_copy else "_sync") + ("" if self.ldmatrix else "_lds")
        flags += "_h" if self.out_f16 else ""
        return (
            f"{self.bm}x{self.bn}x{self.bk}_w{self.warps_m}x{self.warps_n}_s{self.stages}"
            f"_g{self.group_m}{flags}"
        )


def hgemm_kernel_name(config: MmaConfig) -> str:
    """The ``__kernel`` name: ``hgemm_mma_f32`` or ``hgemm_mma_f16`` (the output dtype)."""
    return "hgemm_mma_f16" if config.out_f16 else "hgemm_mma_f32"


def _swizzle(chunks_per_row: int) -> str:
    """The C expression of the swizzled chunk (NOTE [ Local memory swizzle ])."""
    if chunks_per_row >= 8:
        return "((c) ^ ((r) & 7))"
    if chunks_per_row == 4:
        return "((c) ^ (((r) >> 1) & 3))"
    return "((c) ^ (((r) >> 2) & 1))"


def hgemm_source(config: MmaConfig) -> str:
    """The OpenCL C source of the tensor-core GEMM ``config`` describes.

    Examples:
        >>> src = hgemm_source(MmaConfig(out_f16=True))
        >>> "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in src
        True
        >>> "__kernel" in hgemm_source(MmaConfig(stub=True)) and "asm" not in hgemm_source(
        ...     MmaConfig(stub=True))
        True
    """
    config.check()
    c = config
    defines = [
        f"#define BM {c.bm}",
        f"#define BN {c.bn}",
        f"#define BK {c.bk}",
        f"#define WARPS_M {c.warps_m}",
        f"#define WARPS_N {c.warps_n}",
        f"#define STAGES {c.stages}",
        f"#define GROUP_M {c.group_m}",
        f"#define SWZ_A(r, c) {_swizzle(c.bk // 8)}",
        f"#define SWZ_B(r, c) {_swizzle(c.bn // 8)}",
        f"#define KERNEL_NAME {hgemm_kernel_name(c)}",
    ]
    if c.out_f16:
        defines += [
            "#define OUT_T half",
            "#define STORE2(p, x, y) vstore_half2_rte((float2)((x), (y)), 0, (p))",
        ]
    else:
        defines += [
            "#define OUT_T float",
            "#define STORE2(p, x, y) vstore2((float2)((x), (y)), 0, (p))",
        ]
    ptx = _STUB_PTX if c.stub else _PTX.replace("WAIT_N", str(c.stages - 2))
    copy = _COPY_ASYNC if c.async_copy else _COPY_SYNC
    frags = _FRAGS_LDMATRIX if c.ldmatrix else _FRAGS_LOCAL
    body = _GEMM.replace("LOAD_FRAGS\n", frags)
    return "\n".join(defines) + "\n" + _DERIVED + ptx + copy + body


_DERIVED = """\
#define NT (32 * WARPS_M * WARPS_N)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define MI (WM / 16)
#define NI (WN / 8)
#define CWA (BK / 8)
#define CWB (BN / 8)
#define A_CHUNKS (BM * CWA)
#define B_CHUNKS (BK * CWB)
#define SHARED_ADDR(p) ((uint)(size_t)(p))
"""

# Every statement that reads or writes memory is ``volatile`` with a "memory" clobber, so the
# compiler neither merges two ldmatrix of one address in different pipeline rounds nor moves
# them across barriers; mma is pure and left to the scheduler.
_PTX = """\
#define CP_ASYNC16(dst, src, bytes) __asm__ volatile( \\
    "cp.async.cg.shared.global [%0], [%1], 16, %2;" \\
    :: "r"(dst), "l"((ulong)(src)), "r"(bytes) : "memory")
#define CP_COMMIT() __asm__ volatile("cp.async.commit_group;" ::: "memory")
#define CP_WAIT() __asm__ volatile("cp.async.wait_group WAIT_N;" ::: "memory")
#define LDSM_X4(r0, r1, r2, r3, addr) __asm__ volatile( \\
    "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" \\
    : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory")
#define LDSM_X4_T(r0, r1, r2, r3, addr) __asm__ volatile( \\
    "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];" \\
    : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory")
#define MMA_16816(d, a, b) __asm__( \\
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 " \\
    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" \\
    : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3]) \\
    : "r"((a)[0]), "r"((a)[1]), "r"((a)[2]), "r"((a)[3]), "r"((b)[0]), "r"((b)[1]))
"""

# Plain C stand-ins with the same data flow, so devices without PTX can compile the rest.
_STUB_PTX = """\
#define CP_ASYNC16(dst, src, bytes) do { (void)(dst); (void)(src); (void)(bytes); } while (0)
#define CP_COMMIT() do { } while (0)
#define CP_WAIT() do { } while (0)
#define LDSM_X4(r0, r1, r2, r3, addr) do { r0 = r1 = r2 = r3 = (addr); } while (0)
#define LDSM_X4_T(r0, r1, r2, r3, addr) do { r0 = r1 = r2 = r3 = (addr); } while (0)
#define MMA_16816(d, a, b) do { (d)[0] += (float)((a)[0] ^ (b)[0]); \\
    (d)[1] += (float)((a)[1] ^ (b)[1]); (d)[2] += (float)(a)[2]; (d)[3] += (float)(a)[3]; \\
    } while (0)
"""

# Copy one BK-deep k-tile of A and B into pipeline stage ``st``; rows or columns past the
# matrix are zero-filled (source size 0), their address clamped to the matrix start.
_COPY_ASYNC = """\
inline void load_tile(const uint sa0, const uint sb0, __global const ushort* A,
                      __global const ushort* B, const int st, const int kt, const int m0,
                      const int n0, const int M, const int N, const int K, const int tid)
{
    const int k0 = kt * BK;
    #pragma unroll
    for (int i = 0; i < A_CHUNKS / NT; ++i) {
        const int id = tid + i * NT, r = id / CWA, c = id % CWA;
        const int ok = (m0 + r < M) && (k0 + c * 8 < K);
        __global const ushort* src = A + (ok ? (long)(m0 + r) * K + k0 + c * 8 : 0);
        CP_ASYNC16(sa0 + (uint)((st * A_CHUNKS + r * CWA + SWZ_A(r, c)) * 16), src, ok ? 16 : 0);
    }
    #pragma unroll
    for (int i = 0; i < B_CHUNKS / NT; ++i) {
        const int id = tid + i * NT, r = id / CWB, c = id % CWB;
        const int ok = (k0 + r < K) && (n0 + c * 8 < N);
        __global const ushort* src = B + (ok ? (long)(k0 + r) * N + n0 + c * 8 : 0);
        CP_ASYNC16(sb0 + (uint)((st * B_CHUNKS + r * CWB + SWZ_B(r, c)) * 16), src, ok ? 16 : 0);
    }
}
"""

_COPY_SYNC = """\
inline void load_tile_sync(__local uint4* sA, __local uint4* sB, __global const ushort* A,
                           __global const ushort* B, const int st, const int kt, const int m0,
                           const int n0, const int M, const int N, const int K, const int tid)
{
    const int k0 = kt * BK;
    #pragma unroll
    for (int i = 0; i < A_CHUNKS / NT; ++i) {
        const int id = tid + i * NT, r = id / CWA, c = id % CWA;
        const int ok = (m0 + r < M) && (k0 + c * 8 < K);
        sA[st * A_CHUNKS + r * CWA + SWZ_A(r, c)] =
            ok ? *(__global const uint4*)(A + (long)(m0 + r) * K + k0 + c * 8) : (uint4)(0);
    }
    #pragma unroll
    for (int i = 0; i < B_CHUNKS / NT; ++i) {
        const int id = tid + i * NT, r = id / CWB, c = id % CWB;
        const int ok = (k0 + r < K) && (n0 + c * 8 < N);
        sB[st * B_CHUNKS + r * CWB + SWZ_B(r, c)] =
            ok ? *(__global const uint4*)(B + (long)(k0 + r) * N + n0 + c * 8) : (uint4)(0);
    }
}
#define load_tile(sa0, sb0, A, B, st, kt, m0, n0, M, N, K, tid) \\
    load_tile_sync(sA, sB, A, B, st, kt, m0, n0, M, N, K, tid)
"""

# Fragments of k-step ``ks`` of stage ``st`` (NOTE [ mma.sync fragments ]), pasted into the
# k loop.
_FRAGS_LDMATRIX = """\
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                const int r = wm * WM + mi * 16 + (lane & 15), c = ks * 2 + (lane >> 4);
                LDSM_X4(af[mi][0], af[mi][1], af[mi][2], af[mi][3],
                        sa0 + (uint)((st * A_CHUNKS + r * CWA + SWZ_A(r, c)) * 16));
            }
            #pragma unroll
            for (int nj = 0; nj < NI / 2; ++nj) {
                const int r = ks * 16 + (lane & 15), c = (wn * WN + nj * 16) / 8 + (lane >> 4);
                LDSM_X4_T(bf[2 * nj][0], bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1],
                          sb0 + (uint)((st * B_CHUNKS + r * CWB + SWZ_B(r, c)) * 16));
            }
"""

_FRAGS_LOCAL = """\
            __local const uint* la = (__local const uint*)sA;
            __local const ushort* lb = (__local const ushort*)sB;
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                #pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int r = wm * WM + mi * 16 + (lane >> 2) + (j & 1) * 8;
                    const int c = ks * 2 + (j >> 1);
                    af[mi][j] = la[(st * A_CHUNKS + r * CWA + SWZ_A(r, c)) * 4 + (lane & 3)];
                }
            }
            #pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                #pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const int r = ks * 16 + (lane & 3) * 2 + j * 8, c = (wn * WN + ni * 8) / 8;
                    const uint lo = lb[(st * B_CHUNKS + r * CWB + SWZ_B(r, c)) * 8 + (lane >> 2)];
                    const uint hi =
                        lb[(st * B_CHUNKS + (r + 1) * CWB + SWZ_B(r + 1, c)) * 8 + (lane >> 2)];
                    bf[ni][j] = lo | (hi << 16);
                }
            }
"""

_GEMM = """\
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void KERNEL_NAME(__global const ushort* restrict A, __global const ushort* restrict B,
                 __global OUT_T* restrict C, const int M, const int N, const int K,
                 const long batch_a, const long batch_b, const long batch_c)
{
    __local uint4 sA[STAGES * A_CHUNKS];
    __local uint4 sB[STAGES * B_CHUNKS];
    const int tid = (int)get_local_id(0), lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    /* Work-groups walk GROUP_M tile rows column by column, so B tiles are reused from L2. */
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int pid = (int)get_group_id(0), width = GROUP_M * tiles_n;
    const int first_m = (pid / width) * GROUP_M;
    const int rows = min(tiles_m - first_m, GROUP_M);
    const int m0 = (first_m + (pid % width) % rows) * BM, n0 = ((pid % width) / rows) * BN;
    A += (long)get_group_id(1) * batch_a;
    B += (long)get_group_id(1) * batch_b;
    C += (long)get_group_id(1) * batch_c;
    const uint sa0 = SHARED_ADDR(sA), sb0 = SHARED_ADDR(sB);

    float acc[MI][NI][4];
    #pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        #pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.0f;
        }
    }
    const int KT = (K + BK - 1) / BK;
    #pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < KT) {
            load_tile(sa0, sb0, A, B, s, s, m0, n0, M, N, K, tid);
        }
        CP_COMMIT();
    }
    for (int kt = 0; kt < KT; ++kt) {
        CP_WAIT();
        barrier(CLK_LOCAL_MEM_FENCE);
        /* The stage refilled here was read in round kt - 1, which every warp has left. */
        const int next = kt + STAGES - 1;
        if (next < KT) {
            load_tile(sa0, sb0, A, B, next % STAGES, next, m0, n0, M, N, K, tid);
        }
        CP_COMMIT();
        const int st = kt % STAGES;
        #pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) {
            uint af[MI][4];
            uint bf[NI][2];
LOAD_FRAGS
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                #pragma unroll
                for (int ni = 0; ni < NI; ++ni) {
                    MMA_16816(acc[mi][ni], af[mi], bf[ni]);
                }
            }
        }
    }
    #pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        const int r = m0 + wm * WM + mi * 16 + (lane >> 2);
        #pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            const int c = n0 + wn * WN + ni * 8 + (lane & 3) * 2;
            if (c < N) {
                if (r < M) {
                    STORE2(C + (long)r * N + c, acc[mi][ni][0], acc[mi][ni][1]);
                }
                if (r + 8 < M) {
                    STORE2(C + (long)(r + 8) * N + c, acc[mi][ni][2], acc[mi][ni][3]);
                }
            }
        }
    }
}
"""

# One warp, one m16n8k16 tile: A (16 x 16) and B (16 x 8) row-major float16 bits, C (16 x 8)
# float32. The fragments are gathered from global memory by the layout of the PTX ISA, so a
# device that computes C = A @ B here runs mma.sync with the layout the GEMM assumes.
TILE_F16_SOURCE = """\
inline uint pack2(const ushort lo, const ushort hi) { return (uint)lo | ((uint)hi << 16); }
__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void mma_tile_f16(__global const ushort* A, __global const ushort* B, __global float* C)
{
    const int l = (int)get_local_id(0), g = l >> 2, t = l & 3;
    const uint a0 = pack2(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
    const uint a1 = pack2(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
    const uint a2 = pack2(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]);
    const uint a3 = pack2(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
    const uint b0 = pack2(B[(2 * t) * 8 + g], B[(2 * t + 1) * 8 + g]);
    const uint b1 = pack2(B[(2 * t + 8) * 8 + g], B[(2 * t + 9) * 8 + g]);
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
    __asm__ volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    C[g * 8 + 2 * t] = c0;
    C[g * 8 + 2 * t + 1] = c1;
    C[(g + 8) * 8 + 2 * t] = c2;
    C[(g + 8) * 8 + 2 * t + 1] = c3;
}
"""

# One warp, one m16n8k8 TF32 tile: A (16 x 8), B (8 x 8), C (16 x 8) row-major float32; the
# inputs are rounded to TF32 (10 mantissa bits, to nearest, ties away) by ``cvt.rna.tf32.f32``.
TILE_TF32_SOURCE = """\
inline uint tf32(const float x)
{
    uint r;
    __asm__("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}
__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void mma_tile_tf32(__global const float* A, __global const float* B, __global float* C)
{
    const int l = (int)get_local_id(0), g = l >> 2, t = l & 3;
    const uint a0 = tf32(A[g * 8 + t]), a1 = tf32(A[(g + 8) * 8 + t]);
    const uint a2 = tf32(A[g * 8 + t + 4]), a3 = tf32(A[(g + 8) * 8 + t + 4]);
    const uint b0 = tf32(B[t * 8 + g]), b1 = tf32(B[(t + 4) * 8 + g]);
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
    __asm__ volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    C[g * 8 + 2 * t] = c0;
    C[g * 8 + 2 * t + 1] = c1;
    C[(g + 8) * 8 + 2 * t] = c2;
    C[(g + 8) * 8 + 2 * t + 1] = c3;
}
"""
