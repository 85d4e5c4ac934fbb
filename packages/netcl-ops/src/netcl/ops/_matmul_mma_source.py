"""OpenCL C sources of tensor-core GEMM kernels for NVIDIA devices (inline PTX ``mma.sync``).

NVIDIA's OpenCL driver has no ``cl_khr_fp16`` arithmetic, but its compiler accepts inline PTX:
``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`` (f16 inputs, f32 accumulation),
``ldmatrix`` (warp-wide fragment loads from local memory) and ``cp.async`` (global to local
copies that bypass registers) all build from OpenCL C. This module only renders text: it
imports nothing from netcl, so ``benchmarks/probe_mma.py`` can load it by path on the GPU
machine. :mod:`._matmul_mma` builds, probes and launches the kernels.

The GEMM computes, per batch index ``b``, ``C[b] = op(A[b]) @ op(B[b])`` (M x N, K deep) with
A and B float16 bit patterns (``ushort``) and C float32 or float16, every matrix row-major
with its own leading dimension and element offset; ``op`` transposes (A stored K x M, B
stored N x K) where the config says so. Tiles move in 16-byte rows (``cp.async``), so the
contiguous dimension of A and B, their leading dimensions, offsets and batch strides must be
multiples of 8 elements (:func:`hgemm_alignment_ok`); out-of-range rows and columns of a
tile are zero-filled by ``cp.async``'s source-size operand.

# NOTE [ mma.sync fragments ]
# For m16n8k16 a warp's lane ``l`` (``g = l / 4``, ``t = l % 4``) holds A as four .b32
# registers {A[g][2t..2t+1], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..]}, B as two
# {B[2t..2t+1][g], B[2t+8..2t+9][g]} and C as {C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]}
# (PTX ISA, "Matrix fragments for mma.m16n8k16"). ``ldmatrix.x4`` hands lane ``l`` row
# ``l / 4``, elements ``2t, 2t+1``, of each of four 8x8 matrices whose rows lanes 8j..8j+7
# point at; ``.trans`` hands it column ``l / 4``, rows ``2t, 2t+1``, instead. So a row-major
# (m, k) A tile gives the A fragment with lanes 0-15 at rows 0-15 of k 0-7 and lanes 16-31 at
# k 8-15; a (k, n) B tile gives two B fragments (n 0-7 and 8-15) through ``.trans``; the
# transposed layouts swap ``.trans`` and the lane-to-row map.
#
# NOTE [ Local memory swizzle ]
# One ldmatrix phase reads eight 16-byte rows at the same column; with tile rows of 64 or
# 256 bytes they would hit the same banks. The 16-byte chunk ``c`` of row ``r`` is stored at
# chunk ``c ^ f(r)`` instead (``f(r) = r & 7`` for rows of 8+ chunks, ``(r >> 1) & 3`` for 4,
# ``(r >> 2) & 1`` for 2), so any eight consecutive rows fall in eight distinct bank groups,
# without the padding that would push three 128x128x32 stages past 48 KiB.
#
# NOTE [ What bounds the tensor-core GEMM ]
# H100, NVIDIA OpenCL (benchmarks/probe_mma.py, third run): back-to-back mma.sync from
# registers peaks at 470-514 TFLOP/s (one to four 4-warp work-groups per SM); the 128x128x32
# GEMM runs 231 at 4096^3, 458 with its global-to-local tile copies removed, and 230 with its
# ldmatrix loads removed instead. So the k loop itself reaches 90% of the mma.sync ceiling and
# the copies bound it: the times of 64x64, 64x128 and 128x128 tiles scale with their L2
# traffic per FLOP (2x, 1.5x, 1x), pipelined fragments, an L2 prefetch hint and 128-register
# 8-warp tiles (16 warps per SM) change nothing, and tiles that would cut the traffic further
# (128x256, 256x128) fit only 2 stages in the 48 KiB of local memory an OpenCL work-group may
# have, so their copies wait. cuBLAS reaches 651 with wgmma and TMA multicast, which OpenCL's
# sm_90 (not sm_90a) target cannot express.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template

__all__ = [
    "FRAG_A_TEXT",
    "FRAG_B_TEXT",
    "LOCAL_MEMORY_LIMIT",
    "MMAS_TEXT",
    "PROBE_SOURCE",
    "TILE_F16_SOURCE",
    "TILE_TF32_SOURCE",
    "MmaConfig",
    "emulated_ptx",
    "hardware_ptx",
    "hgemm_alignment_ok",
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
    ``ldmatrix`` loads fragments with ``ldmatrix`` (else with 16-bit local loads).
    ``pipeline`` double-buffers the fragments (NOTE [ Software-pipelined fragments ]).
    ``l2_prefetch`` asks ``cp.async`` to pull whole 128-byte lines into L2.
    ``trans_a``/``trans_b`` read A as K x M / B as N x K. ``out_f16`` writes C as float16
    (round to nearest even), else float32. ``group_m`` tile rows are walked column by column
    (L2 reuse of B). ``emulate`` replaces every PTX statement by plain C with its semantics
    (NOTE [ Emulated PTX ]): slow, but it runs, correctly, on any OpenCL device.

    Examples:
        >>> c = MmaConfig(bm=128, bn=128, bk=32, warps_m=2, warps_n=2, stages=3)
        >>> c.threads, c.local_bytes, c.label()
        (128, 49152, '128x128x32_w2x2_s3_g8')
        >>> MmaConfig(bk=24).check()
        Traceback (most recent call last):
        ...
        ValueError: MmaConfig: bk must be a multiple of 16, got bk=24
    """

    bm: int = 128
    bn: int = 128
    bk: int = 32
    warps_m: int = 2
    warps_n: int = 2
    stages: int = 3
    async_copy: bool = True
    ldmatrix: bool = True
    trans_a: bool = False
    trans_b: bool = False
    out_f16: bool = False
    group_m: int = 8
    pipeline: bool = True
    l2_prefetch: bool = False
    emulate: bool = False

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
        chunks = self.bk // 8 * (self.bm + self.bn)
        rules = [
            (
                self.warps_m >= 1 and self.warps_n >= 1,
                "warps_m and warps_n must be >= 1",
                f"warps {self.warps_m}x{self.warps_n}",
            ),
            (
                self.bm % self.warps_m == 0 and wm % 16 == 0,
                "bm / warps_m must be a multiple of 16",
                f"bm={self.bm}, warps_m={self.warps_m}",
            ),
            (
                self.bn % self.warps_n == 0 and wn % 16 == 0,
                "bn / warps_n must be a multiple of 16",
                f"bn={self.bn}, warps_n={self.warps_n}",
            ),
            (self.bk % 16 == 0 and self.bk >= 16, "bk must be a multiple of 16", f"bk={self.bk}"),
            (self.stages >= 2, "stages must be >= 2", f"stages={self.stages}"),
            (
                not self.pipeline or self.bk % 32 == 0,
                "bk must be a multiple of 32 for pipelined fragments",
                f"bk={self.bk}",
            ),
            (
                (self.bm * self.bk // 8) % self.threads == 0
                and (self.bk * self.bn // 8) % self.threads == 0,
                "the 16-byte chunks of each tile must divide among the work-items",
                f"{chunks} chunks, {self.threads} work-items",
            ),
            (
                self.threads % (self.bm // 8) == 0
                and self.threads % (self.bn // 8) == 0
                and self.threads % (self.bk // 8) == 0,
                "the work-items must cover whole tile rows of 16-byte chunks",
                f"{self.threads} work-items, tile {self.bm}x{self.bn}x{self.bk}",
            ),
            (
                self.local_bytes <= LOCAL_MEMORY_LIMIT,
                "the stages must fit in 48 KiB",
                f"{self.local_bytes} bytes",
            ),
            (self.group_m >= 1, "group_m must be >= 1", f"group_m={self.group_m}"),
        ]
        for ok, rule, got in rules:
            if not ok:
                raise ValueError(f"MmaConfig: {rule}, got {got}")

    def label(self) -> str:
        """A short name: ``128x128x32_w2x2_s3_g8`` plus flags (``_sync``, ``_lds``, ``_tn``...)."""
        flags = ("" if self.async_copy else "_sync") + ("" if self.ldmatrix else "_lds")
        flags += ("" if self.pipeline else "_plain") + ("_l2" if self.l2_prefetch else "")
        if self.trans_a or self.trans_b:
            flags += f"_{'t' if self.trans_a else 'n'}{'t' if self.trans_b else 'n'}"
        flags += "_h" if self.out_f16 else ""
        return (
            f"{self.bm}x{self.bn}x{self.bk}_w{self.warps_m}x{self.warps_n}_s{self.stages}"
            f"_g{self.group_m}{flags}"
        )


def hgemm_kernel_name(config: MmaConfig) -> str:
    """The ``__kernel`` name: ``hgemm_mma_<transposes>_<output dtype>``.

    Examples:
        >>> hgemm_kernel_name(MmaConfig(trans_b=True, out_f16=True))
        'hgemm_mma_nt_f16'
    """
    ops = f"{'t' if config.trans_a else 'n'}{'t' if config.trans_b else 'n'}"
    return f"hgemm_mma_{ops}_{'f16' if config.out_f16 else 'f32'}"


def hgemm_alignment_ok(
    config: MmaConfig,
    M: int,
    N: int,
    K: int,
    offsets: tuple[int, int, int],
    lds: tuple[int, int, int],
    batch_strides: tuple[int, int, int],
) -> bool:
    """Whether the kernel can read A and B in 16-byte rows and write C in pairs.

    The contiguous dimension of A (K, or M transposed) and of B (N, or K transposed) and every
    leading dimension, offset and batch stride of A and B must be multiples of 8 elements;
    C's and N must be even. (Buffers themselves start 16-byte aligned.)

    Examples:
        >>> c = MmaConfig()
        >>> hgemm_alignment_ok(c, 7, 16, 8, (0, 0, 0), (8, 16, 16), (0, 0, 0))
        True
        >>> hgemm_alignment_ok(c, 7, 16, 12, (0, 0, 0), (12, 16, 16), (0, 0, 0))
        False
    """
    inner_a = M if config.trans_a else K
    inner_b = K if config.trans_b else N
    eight = (inner_a, inner_b, offsets[0], offsets[1], lds[0], lds[1], *batch_strides[:2])
    two = (N, offsets[2], lds[2], batch_strides[2])
    return all(v % 8 == 0 for v in eight) and all(v % 2 == 0 for v in two)


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
        >>> "__asm__" in hgemm_source(MmaConfig(emulate=True))
        False
    """
    config.check()
    c = config
    cwa = c.bm // 8 if c.trans_a else c.bk // 8
    cwb = c.bk // 8 if c.trans_b else c.bn // 8
    defines = [
        f"#define BM {c.bm}",
        f"#define BN {c.bn}",
        f"#define BK {c.bk}",
        f"#define WARPS_M {c.warps_m}",
        f"#define WARPS_N {c.warps_n}",
        f"#define STAGES {c.stages}",
        f"#define GROUP_M {c.group_m}",
        f"#define CWA {cwa}",
        f"#define CWB {cwb}",
        f"#define SWZ_A(r, c) {_swizzle(cwa)}",
        f"#define SWZ_B(r, c) {_swizzle(cwb)}",
        f"#define KERNEL_NAME {hgemm_kernel_name(c)}",
        # bounds of stored tile element (r, c), its offset at k0 = 0 and the offset of k0
        "#define A_IN(r, c) "
        + ("(k0 + (r) < K && m0 + (c) < M)" if c.trans_a else "(m0 + (r) < M && k0 + (c) < K)"),
        "#define B_IN(r, c) "
        + ("(n0 + (r) < N && k0 + (c) < K)" if c.trans_b else "(k0 + (r) < K && n0 + (c) < N)"),
        "#define A_BASE(r, c) "
        + ("((long)(r) * lda + m0 + (c))" if c.trans_a else "((long)(m0 + (r)) * lda + (c))"),
        "#define B_BASE(r, c) "
        + ("((long)(n0 + (r)) * ldb + (c))" if c.trans_b else "((long)(r) * ldb + n0 + (c))"),
        "#define A_KOFF(k0) " + ("((long)(k0) * lda)" if c.trans_a else "(k0)"),
        "#define B_KOFF(k0) " + ("(k0)" if c.trans_b else "((long)(k0) * ldb)"),
        "#define A_LOCAL(st, m, k) TILE_AT(sA, A_CHUNKS, CWA, SWZ_A, st, "
        + ("k, m)" if c.trans_a else "m, k)"),
        "#define B_LOCAL(st, k, n) TILE_AT(sB, B_CHUNKS, CWB, SWZ_B, st, "
        + ("n, k)" if c.trans_b else "k, n)"),
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
    ptx = hardware_ptx(c.stages - 2)
    ptx = ptx.replace(".global [", ".global.L2::128B [") if c.l2_prefetch else ptx
    ptx = emulated_ptx() if c.emulate else ptx
    copy = _COPY_ASYNC if c.async_copy else _COPY_SYNC
    if c.ldmatrix:
        frags = (_FRAG_A_T if c.trans_a else _FRAG_A) + (_FRAG_B_T if c.trans_b else _FRAG_B)
    else:
        frags = _FRAGS_LOCAL
    return (
        "\n".join(defines)
        + "\n"
        + _DERIVED
        + ptx
        + copy
        + _GEMM_HEAD
        + _mainloop(c, Template(frags))
        + _EPILOGUE
    )


def emulated_mma(name: str, depth: int) -> str:
    """The macro ``name(d, a, b)``: one warp's ``m16n8k<depth>`` mma in plain C through local
    memory (NOTE [ Emulated PTX ]): the fragments go to ``emu_frag`` and every lane sums its
    four outputs from them with ``EMU_A``/``EMU_B`` (defined by the caller for its types)."""
    return f"""\
#define {name}(d, a, b) do {{ \\
    barrier(CLK_LOCAL_MEM_FENCE); \\
    for (int j_ = 0; j_ < 4; ++j_) {{ emu_frag[tid * 6 + j_] = (a)[j_]; }} \\
    emu_frag[tid * 6 + 4] = (b)[0]; \\
    emu_frag[tid * 6 + 5] = (b)[1]; \\
    barrier(CLK_LOCAL_MEM_FENCE); \\
    for (int i_ = 0; i_ < 4; ++i_) {{ \\
        const int r_ = (lane >> 2) + (i_ >> 1) * 8, n_ = (lane & 3) * 2 + (i_ & 1); \\
        float s_ = 0.0f; \\
        for (int k_ = 0; k_ < {depth}; ++k_) {{ s_ += EMU_A(r_, k_) * EMU_B(k_, n_); }} \\
        (d)[i_] += s_; \\
    }} \\
}} while (0)
"""


def hardware_ptx(wait_groups: int) -> str:
    """The PTX macros (``CP_ASYNC16``, ``CP_COMMIT``, ``CP_WAIT`` leaving ``wait_groups``
    groups in flight, ``LDSM_X4``, ``LDSM_X4_T``, ``MMA_16816``) as inline assembly."""
    return _PTX.replace("WAIT_N", str(wait_groups))


def emulated_ptx() -> str:
    """The same macros in plain C (NOTE [ Emulated PTX ]); needs ``STAGES``, ``A_CHUNKS``,
    ``NT``, ``sA``, ``sB``, ``tid`` and ``lane`` where they expand."""
    return _EMULATED_PTX


def _mainloop(c: MmaConfig, frags: Template) -> str:
    """The k loop, with the fragment loads and mma of ``frags`` / ``_MMAS`` filled in."""
    mmas = Template(_MMAS)
    if c.pipeline:
        a, b = "af[(ks + 1) & 1]", "bf[(ks + 1) & 1]"
        parts = {
            "frags_first": frags.substitute(fa="af[0]", fb="bf[0]", st="0", ks="0"),
            "frags_next": frags.substitute(fa=a, fb=b, st="rs", ks="((ks + 1) % (BK / 16))"),
            "mmas": mmas.substitute(fa="af[ks & 1]", fb="bf[ks & 1]"),
        }
        template = _MAINLOOP_PIPELINED
    else:
        parts = {
            "frags_next": frags.substitute(fa="af", fb="bf", st="st", ks="ks"),
            "mmas": mmas.substitute(fa="af", fb="bf"),
        }
        template = _MAINLOOP_PLAIN
    return Template(template).substitute({k: v.rstrip("\n") for k, v in parts.items()})


_DERIVED = """\
#define NT (32 * WARPS_M * WARPS_N)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define MI (WM / 16)
#define NI (WN / 8)
#define A_CHUNKS (BM * BK / 8)
#define B_CHUNKS (BK * BN / 8)
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
#define EMU_LOCALS
#define MMA_16816(d, a, b) __asm__( \\
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 " \\
    "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};" \\
    : "+f"((d)[0]), "+f"((d)[1]), "+f"((d)[2]), "+f"((d)[3]) \\
    : "r"((a)[0]), "r"((a)[1]), "r"((a)[2]), "r"((a)[3]), "r"((b)[0]), "r"((b)[1]))
"""

# NOTE [ Emulated PTX ]
# ``emulate=True`` replaces each PTX statement by plain C with the instruction's semantics,
# exchanging registers between the lanes of a warp through local memory and work-group
# barriers (every statement sits in work-group-uniform control flow). The emulated kernel
# keeps the real one's tiles, swizzle, lane-to-address maps and epilogue, so PoCL and Intel's
# CPU runtime check all of that against NumPy; only the instructions themselves need the GPU
# (the probe kernel checks those). Local addresses become byte offsets into sA then sB.
_EMULATED_PTX = """\
#define EMU_LOCALS __local uint emu_addr[NT]; __local uint emu_frag[NT * 6];
#define EMU_A_BYTES (STAGES * A_CHUNKS * 16)
#undef SHARED_ADDR
#define SHARED_ADDR(p) ((p) == sA ? 0u : (uint)EMU_A_BYTES)
#define EMU_WORD(o) ((o) < EMU_A_BYTES ? ((__local const uint*)sA)[(o) / 4] \\
                                       : ((__local const uint*)sB)[((o) - EMU_A_BYTES) / 4])
#define EMU_HALF(o) ((uint)((o) < EMU_A_BYTES ? ((__local const ushort*)sA)[(o) / 2] \\
                            : ((__local const ushort*)sB)[((o) - EMU_A_BYTES) / 2]))
inline float emu_h2f(const uint h)
{
    const uint s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        return (s ? -1.0f : 1.0f) * (float)m * 5.9604645e-8f;
    }
    return as_float(s | (e == 31 ? 0x7f800000u : (e + 112) << 23) | (m << 13));
}
#define CP_ASYNC16(dst, src, bytes) do { \\
    const uint4 v_ = (bytes) ? *(__global const uint4*)(src) : (uint4)(0); \\
    const uint o_ = (dst); \\
    if (o_ < EMU_A_BYTES) { sA[o_ / 16] = v_; } else { sB[(o_ - EMU_A_BYTES) / 16] = v_; } \\
} while (0)
#define CP_COMMIT() do { } while (0)
#define CP_WAIT() do { } while (0)
#define EMU_SHARE_ADDR(addr) do { barrier(CLK_LOCAL_MEM_FENCE); emu_addr[tid] = (addr); \\
    barrier(CLK_LOCAL_MEM_FENCE); } while (0)
#define EMU_ROW(j, i) emu_addr[(tid & ~31) + (j) * 8 + (i)]
#define EMU_ROWS(j) EMU_WORD(EMU_ROW(j, lane >> 2) + (lane & 3) * 4)
#define EMU_COLS(j) (EMU_HALF(EMU_ROW(j, 2 * (lane & 3)) + (lane >> 2) * 2) \\
                     | (EMU_HALF(EMU_ROW(j, 2 * (lane & 3) + 1) + (lane >> 2) * 2) << 16))
#define LDSM_X4(r0, r1, r2, r3, addr) do { EMU_SHARE_ADDR(addr); \\
    r0 = EMU_ROWS(0); r1 = EMU_ROWS(1); r2 = EMU_ROWS(2); r3 = EMU_ROWS(3); } while (0)
#define LDSM_X4_T(r0, r1, r2, r3, addr) do { EMU_SHARE_ADDR(addr); \\
    r0 = EMU_COLS(0); r1 = EMU_COLS(1); r2 = EMU_COLS(2); r3 = EMU_COLS(3); } while (0)
/* element (r, k) of the warp's A fragment and (k, n) of its B fragment */
#define EMU_A(r, k) emu_h2f((emu_frag[((tid & ~31) + ((r) & 7) * 4 + ((k) & 7) / 2) * 6 \\
    + ((r) >> 3) + 2 * ((k) >> 3)] >> (16 * ((k) & 1))) & 0xffffu)
#define EMU_B(k, n) emu_h2f((emu_frag[((tid & ~31) + (n) * 4 + ((k) & 7) / 2) * 6 + 4 \\
    + ((k) >> 3)] >> (16 * ((k) & 1))) & 0xffffu)
""" + emulated_mma("MMA_16816", 16)

# Copy k-tile ``kt`` of A and B into pipeline stage ``st``. Work-item ``tid`` copies the
# 16-byte chunks ``tid + i * NT`` of each tile: stored row ``ra + i * NT / CWA``, chunk ``ca``
# (so one base offset and one row step per operand, set up once); chunks past the matrix are
# zero-filled (source size 0, address clamped to the matrix start).
_COPY_ASYNC = """\
#define LOAD_TILE(st, kt) do { \\
    const int k0 = (kt) * BK; \\
    __global const ushort* pa = A + ga + A_KOFF(k0); \\
    __global const ushort* pb = B + gb + B_KOFF(k0); \\
    for (int i = 0; i < A_CHUNKS / NT; ++i) { \\
        const int r = ra + i * (NT / CWA), ok = A_IN(r, ca * 8); \\
        CP_ASYNC16(sa0 + (uint)(((st) * A_CHUNKS + r * CWA + SWZ_A(r, ca)) * 16), \\
                   ok ? pa + i * a_step : A, ok ? 16 : 0); \\
    } \\
    for (int i = 0; i < B_CHUNKS / NT; ++i) { \\
        const int r = rb + i * (NT / CWB), ok = B_IN(r, cb * 8); \\
        CP_ASYNC16(sb0 + (uint)(((st) * B_CHUNKS + r * CWB + SWZ_B(r, cb)) * 16), \\
                   ok ? pb + i * b_step : B, ok ? 16 : 0); \\
    } \\
} while (0)
"""

_COPY_SYNC = """\
#define LOAD_TILE(st, kt) do { \\
    const int k0 = (kt) * BK; \\
    __global const ushort* pa = A + ga + A_KOFF(k0); \\
    __global const ushort* pb = B + gb + B_KOFF(k0); \\
    for (int i = 0; i < A_CHUNKS / NT; ++i) { \\
        const int r = ra + i * (NT / CWA); \\
        sA[(st) * A_CHUNKS + r * CWA + SWZ_A(r, ca)] = A_IN(r, ca * 8) \\
            ? *(__global const uint4*)(pa + i * a_step) : (uint4)(0); \\
    } \\
    for (int i = 0; i < B_CHUNKS / NT; ++i) { \\
        const int r = rb + i * (NT / CWB); \\
        sB[(st) * B_CHUNKS + r * CWB + SWZ_B(r, cb)] = B_IN(r, cb * 8) \\
            ? *(__global const uint4*)(pb + i * b_step) : (uint4)(0); \\
    } \\
} while (0)
"""

# The fragments of k-step $ks of stage $st into $fa (MI x 4 registers) and $fb (NI x 2)
# (NOTE [ mma.sync fragments ]), substituted into the k loop (string.Template). Lane l points
# at row (l & 7) of matrix l >> 3.
_FRAG_A = """\
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                const int r = wm * WM + mi * 16 + (lane & 15), c = $ks * 2 + (lane >> 4);
                LDSM_X4($fa[mi][0], $fa[mi][1], $fa[mi][2], $fa[mi][3],
                        sa0 + (uint)(($st * A_CHUNKS + r * CWA + SWZ_A(r, c)) * 16));
            }
"""

_FRAG_A_T = """\
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                const int r = $ks * 16 + (lane & 7) + ((lane >> 4) << 3);
                const int c = (wm * WM + mi * 16) / 8 + ((lane >> 3) & 1);
                LDSM_X4_T($fa[mi][0], $fa[mi][1], $fa[mi][2], $fa[mi][3],
                          sa0 + (uint)(($st * A_CHUNKS + r * CWA + SWZ_A(r, c)) * 16));
            }
"""

_FRAG_B = """\
            #pragma unroll
            for (int nj = 0; nj < NI / 2; ++nj) {
                const int r = $ks * 16 + (lane & 15), c = (wn * WN + nj * 16) / 8 + (lane >> 4);
                LDSM_X4_T($fb[2 * nj][0], $fb[2 * nj][1], $fb[2 * nj + 1][0], $fb[2 * nj + 1][1],
                          sb0 + (uint)(($st * B_CHUNKS + r * CWB + SWZ_B(r, c)) * 16));
            }
"""

_FRAG_B_T = """\
            #pragma unroll
            for (int nj = 0; nj < NI / 2; ++nj) {
                const int r = wn * WN + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
                const int c = $ks * 2 + ((lane >> 3) & 1);
                LDSM_X4($fb[2 * nj][0], $fb[2 * nj][1], $fb[2 * nj + 1][0], $fb[2 * nj + 1][1],
                        sb0 + (uint)(($st * B_CHUNKS + r * CWB + SWZ_B(r, c)) * 16));
            }
"""

# Without ldmatrix: each lane gathers its fragment elements (m, k) / (k, n) one by one.
_FRAGS_LOCAL = """\
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                #pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int m = wm * WM + mi * 16 + (lane >> 2) + (j & 1) * 8;
                    const int k = $ks * 16 + (lane & 3) * 2 + (j >> 1) * 8;
                    $fa[mi][j] = (uint)A_LOCAL($st, m, k) | ((uint)A_LOCAL($st, m, k + 1) << 16);
                }
            }
            #pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
                #pragma unroll
                for (int j = 0; j < 2; ++j) {
                    const int k = $ks * 16 + (lane & 3) * 2 + j * 8;
                    const int n = wn * WN + ni * 8 + (lane >> 2);
                    $fb[ni][j] = (uint)B_LOCAL($st, k, n) | ((uint)B_LOCAL($st, k + 1, n) << 16);
                }
            }
"""

_MMAS = """\
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                #pragma unroll
                for (int ni = 0; ni < NI; ++ni) {
                    MMA_16816(acc[mi][ni], $fa[mi], $fb[ni]);
                }
            }
"""

_GEMM_HEAD = """\
#define TILE_AT(base, chunks, cw, swz, st, r, c) \\
    ((__local const ushort*)(base))[((st) * (chunks) + (r) * (cw) + swz((r), (c) >> 3)) * 8 \\
                                    + ((c) & 7)]
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void KERNEL_NAME(__global const ushort* restrict A, const long off_a, const int lda,
                 const long batch_a, __global const ushort* restrict B, const long off_b,
                 const int ldb, const long batch_b, __global OUT_T* restrict C,
                 const long off_c, const int ldc, const long batch_c,
                 const int M, const int N, const int K)
{
    __local uint4 sA[STAGES * A_CHUNKS];
    __local uint4 sB[STAGES * B_CHUNKS];
    EMU_LOCALS
    const int tid = (int)get_local_id(0), lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    /* Work-groups walk GROUP_M tile rows column by column, so B tiles are reused from L2. */
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int pid = (int)get_group_id(0), width = GROUP_M * tiles_n;
    const int first_m = (pid / width) * GROUP_M;
    const int rows = min(tiles_m - first_m, GROUP_M);
    const int m0 = (first_m + (pid % width) % rows) * BM, n0 = ((pid % width) / rows) * BN;
    A += off_a + (long)get_group_id(1) * batch_a;
    B += off_b + (long)get_group_id(1) * batch_b;
    C += off_c + (long)get_group_id(1) * batch_c;
    const uint sa0 = SHARED_ADDR(sA), sb0 = SHARED_ADDR(sB);
    const int ra = tid / CWA, ca = tid % CWA, rb = tid / CWB, cb = tid % CWB;
    const long ga = A_BASE(ra, ca * 8), gb = B_BASE(rb, cb * 8);
    const long a_step = (long)(NT / CWA) * lda, b_step = (long)(NT / CWB) * ldb;

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
            LOAD_TILE(s, s);
        }
        CP_COMMIT();
    }
"""

# NOTE [ Software-pipelined fragments ]
# Fragments are double-buffered: k-step ks + 1's are loaded (from the next stage, past its
# wait and barrier, when ks is a tile's last) before k-step ks's mma run, so ldmatrix latency
# hides behind tensor-core work instead of stalling a warp after every barrier. The stage
# refilled at a tile's first k-step was last read before the previous barrier. Two k-steps
# per tile at least (bk % 32 == 0) keep each buffer's parity fixed.
_MAINLOOP_PIPELINED = """\
    uint af[2][MI][4];
    uint bf[2][NI][2];
    CP_WAIT();
    barrier(CLK_LOCAL_MEM_FENCE);
$frags_first
    int rs = 0, ws = STAGES - 1;
    for (int kt = 0; kt < KT; ++kt) {
        #pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) {
            if (ks == BK / 16 - 1) {
                CP_WAIT();
                barrier(CLK_LOCAL_MEM_FENCE);
                rs = rs == STAGES - 1 ? 0 : rs + 1;
            }
$frags_next
            if (ks == 0) {
                if (kt + STAGES - 1 < KT) {
                    LOAD_TILE(ws, kt + STAGES - 1);
                }
                CP_COMMIT();
                ws = ws == STAGES - 1 ? 0 : ws + 1;
            }
$mmas
        }
    }
"""

_MAINLOOP_PLAIN = """\
    for (int kt = 0; kt < KT; ++kt) {
        CP_WAIT();
        barrier(CLK_LOCAL_MEM_FENCE);
        /* The stage refilled here was read in round kt - 1, which every warp has left. */
        const int next = kt + STAGES - 1;
        if (next < KT) {
            LOAD_TILE(next % STAGES, next);
        }
        CP_COMMIT();
        const int st = kt % STAGES;
        #pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) {
            uint af[MI][4];
            uint bf[NI][2];
$frags_next
$mmas
        }
    }
"""

_EPILOGUE = """\
    #pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        const int r = m0 + wm * WM + mi * 16 + (lane >> 2);
        #pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            const int c = n0 + wn * WN + ni * 8 + (lane & 3) * 2;
            if (c < N) {
                if (r < M) {
                    STORE2(C + (long)r * ldc + c, acc[mi][ni][0], acc[mi][ni][1]);
                }
                if (r + 8 < M) {
                    STORE2(C + (long)(r + 8) * ldc + c, acc[mi][ni][2], acc[mi][ni][3]);
                }
            }
        }
    }
}
"""


# One warp, one m16n8k16 tile with the fragments filled the way the GEMM fills them: A
# (16 x 16) and B (16 x 8) row-major float16 bits go to local memory by ``cp.async``, come
# back by ``ldmatrix`` (``.x2.trans`` for B) and meet in one ``mma.sync``; C (16 x 8) is
# float32. A device that computes C = A @ B here runs every instruction the GEMM needs, with
# the layouts it assumes; ``info`` gets the two local addresses (for diagnostics).
PROBE_SOURCE = """\
__kernel __attribute__((reqd_work_group_size(32, 1, 1)))
void mma_probe(__global const ushort* A, __global const ushort* B, __global float* C,
               __global uint* info)
{
    __local uint4 sA[32];   /* A 16 x 16: row r = chunks 2r, 2r + 1 */
    __local uint4 sB[16];   /* B 16 x 8: row k = chunk k */
    const int l = (int)get_local_id(0), g = l >> 2, t = l & 3;
    const uint sa = (uint)(size_t)sA, sb = (uint)(size_t)sB;
    __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16, 16;"
                     :: "r"(sa + (uint)l * 16u), "l"((ulong)(A + l * 8)) : "memory");
    if (l < 16) {
        __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16, 16;"
                         :: "r"(sb + (uint)l * 16u), "l"((ulong)(B + l * 8)) : "memory");
    }
    __asm__ volatile("cp.async.commit_group;" ::: "memory");
    __asm__ volatile("cp.async.wait_group 0;" ::: "memory");
    barrier(CLK_LOCAL_MEM_FENCE);
    uint a0, a1, a2, a3, b0, b1;
    __asm__ volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
                     : "r"(sa + (uint)(((l & 15) * 2 + (l >> 4)) * 16)) : "memory");
    __asm__ volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                     : "=r"(b0), "=r"(b1) : "r"(sb + (uint)((l & 15) * 16)) : "memory");
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
    __asm__ volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    C[g * 8 + 2 * t] = c0;
    C[g * 8 + 2 * t + 1] = c1;
    C[(g + 8) * 8 + 2 * t] = c2;
    C[(g + 8) * 8 + 2 * t + 1] = c3;
    if (l == 0) {
        info[0] = sa;
        info[1] = sb;
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


# The fragment loads and the mma of one k-step, as ``string.Template`` text with fields
# ``$fa``, ``$fb`` (fragment arrays), ``$st`` (stage) and ``$ks`` (k-step), for kernels that
# keep this module's tile layout (``_conv_mma_source``).
FRAG_A_TEXT = _FRAG_A
FRAG_B_TEXT = _FRAG_B
MMAS_TEXT = _MMAS
