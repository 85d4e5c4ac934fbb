"""OpenCL C sources of the GEMM kernel family (naive, tiled, register-tiled, vectorized).

Every variant computes, for each batch index ``b = b1 * nb2 + b2``,
``C[b] = op(A[b]) @ op(B[b]) (+ bias)`` where ``op`` is an optional transpose and the batch
offsets are ``off + b1 * s1 + b2 * s2`` elements. Shapes, leading dimensions and strides are
scalar kernel arguments; tile sizes, transposes and alignment are compile-time ``#define``s,
so one built program serves every shape.

Scalar element access goes through ``A_AT(m, k)`` / ``B_AT(k, n)``. The convolution ops
replace ``B_AT`` with an im2col gather (``GemmParams.b_loader``): that is the implicit GEMM.

# NOTE [ GEMM kernels and compilers ]
# Loops over register blocks carry ``#pragma unroll``: fully unrolled, the accumulators stay
# in registers (PoCL's LLVM does not unroll them on its own and spills every accumulator).
# Multiply-adds go through MADD: ``fma()`` on GPUs (one FFMA for sure), ``a * b + c`` on CPU
# devices (contracted to FMA by LLVM), whose hot loops also use pointer casts, not ``vloadN``:
# the PoCL build shipped on PyPI calls those builtins out of line.
"""

from __future__ import annotations

from ._matmul_blocked import register_tiled_source
from ._matmul_params import GemmParams as GemmParams
from ._split_sync import fence_defines

__all__ = ["GemmParams", "gemm_kernel_name", "gemm_source", "local_size"]

NAIVE, TILED, REGISTER_TILED, VECTORIZED = "naive", "tiled", "register_tiled", "vectorized"
UNROLL = "#pragma unroll"


def local_size(p: GemmParams) -> tuple[int, int]:
    """The work-group shape ``(columns, rows)`` of a kernel."""
    return (p.lx, p.ly)


def gemm_kernel_name(p: GemmParams) -> str:
    """The ``__kernel`` name: variant and transposes (``gemm_register_tiled_nt``; a split K
    merged in the launch adds ``_split``)."""
    split = "_split" if p.split_merge else ""
    return f"gemm_{p.variant}_{'t' if p.trans_a else 'n'}{'t' if p.trans_b else 'n'}{split}"


def gemm_source(p: GemmParams) -> str:
    """The OpenCL C source (without the dtype header) of the kernel ``p`` describes."""
    if p.split_merge and p.variant != REGISTER_TILED:
        raise ValueError(f"gemm_source: a split K merged in the launch needs the "
                         f"register-tiled kernel, got variant {p.variant!r}")
    madd = "fma((a), (b), (c))" if p.fma else "((a) * (b) + (c))"
    head = _access_macros(p) + _BIAS + f"#define MADD(a, b, c) {madd}\n"
    if p.variant == NAIVE:
        return head + _naive(p)
    if p.variant == TILED:
        return head + _tiled(p)
    if p.variant == REGISTER_TILED:
        signature = _signature(p, _reqd(p))
        if p.split_merge:
            head += fence_defines(p.ptx_fence)
        return head + _vector_macros(p.dtype, 4) + register_tiled_source(p, signature)
    if p.variant == VECTORIZED:
        return head + _vector_macros(p.dtype, p.vw) + _vectorized(p)
    raise ValueError(f"gemm_source: unknown GEMM variant {p.variant!r}")


# Split-K: C = bias + the sum of the ``S`` partial products in the workspace W (S x M x N).
SPLIT_K_SUM = """\
#define BIAS_OF(m, n) (bias_mode == 1 ? LD(bias, (m)) : bias_mode == 2 ? LD(bias, (n)) : (CT)0)
__kernel void gemm_split_k_sum(
    __global const T* restrict W, const int offW, const int S, const int N, const int MN,
    __global T* restrict C, const int offC, const int ldc,
    __global const T* restrict bias, const int bias_mode)
{
    const int i = get_global_id(0);
    if (i >= MN) return;
    const int m = i / N, n = i - m * N;
    W += offW;
    CT s = 0;
    for (int z = 0; z < S; ++z) s += LD(W, (long)z * MN + i);
    ST(C, offC + m * ldc + n, s + BIAS_OF(m, n));
}
"""


# Staging for the tn kernel: Y[b] = X[b]^T for an R x C matrix X (leading dimension ldx,
# batch offsets as the GEMM's) into a contiguous C x R matrix per batch entry, through a
# 32 x 33 local tile (both global sides coalesced, no bank conflicts).
TRANSPOSE = """\
__kernel __attribute__((reqd_work_group_size(32, 8, 1))) void gemm_transpose(
    __global const T* restrict X, const int offX, const int ldx, const int s1, const int s2,
    const int nb2, __global T* restrict Y, const int offY, const int R, const int C)
{
    __local CT tile[32][33];
    const int bz = get_global_id(2);
    const int b1 = bz / nb2, b2 = bz - b1 * nb2;
    X += offX + (long)b1 * s1 + (long)b2 * s2;
    Y += offY + (long)bz * R * C;
    const int c0 = get_group_id(0) * 32, r0 = get_group_id(1) * 32;
    const int tx = get_local_id(0), ty = get_local_id(1);
    for (int j = ty; j < 32; j += 8) {
        const int r = r0 + j, c = c0 + tx;
        tile[j][tx] = (r < R && c < C) ? LD(X, r * ldx + c) : (CT)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int j = ty; j < 32; j += 8) {
        const int c = c0 + j, r = r0 + tx;
        if (c < C && r < R) ST(Y, (long)c * R + r, tile[tx][j]);
    }
}
"""


# -- shared pieces ----------------------------------------------------------------------------


def _vector_macros(dtype: str, w: int) -> str:
    """``CTV`` (compute vector of width ``w``), ``LDV``/``STV`` (aligned global access).

    Zero-copy host buffers (CPU devices) are only 16-byte aligned, so vectors wider than that
    go through ``vloadN``/``vstoreN``, which need element alignment only.
    """
    if dtype == "float16":
        return (
            f"#define CTV float{w}\n"
            f"#define LDV(p, i) vloada_half{w}(0, (p) + (i))\n"
            f"#define STV(p, i, v) vstorea_half{w}((v), 0, (p) + (i))\n"
        )
    base = "double" if dtype == "float64" else "float"
    if w * (8 if dtype == "float64" else 4) > 16:
        return (
            f"#define CTV {base}{w}\n"
            f"#define LDV(p, i) vload{w}(0, (p) + (i))\n"
            f"#define STV(p, i, v) vstore{w}((v), 0, (p) + (i))\n"
        )
    return (
        f"#define CTV {base}{w}\n"
        f"#define LDV(p, i) (*(const __global CTV*)((p) + (i)))\n"
        f"#define STV(p, i, v) (*(__global CTV*)((p) + (i)) = (v))\n"
    )


def _access_macros(p: GemmParams) -> str:
    a = "LD(A, (k) * lda + (m))" if p.trans_a else "LD(A, (m) * lda + (k))"
    lines = [f"#define A_AT(m, k) {a}"]
    if p.b_loader:
        lines.append(p.b_loader.rstrip())
    else:
        b = "LD(B, (n) * ldb + (k))" if p.trans_b else "LD(B, (k) * ldb + (n))"
        lines.append(f"#define B_AT(k, n) {b}")
    return "\n".join(lines) + "\n"


_BIAS = """\
#define BIAS_OF(m, n) (bias_mode == 1 ? LD(bias, (m)) : bias_mode == 2 ? LD(bias, (n)) : (CT)0)
"""


# A split K merged in the launch (``split_merge``; NOTE [ Split-K ] in ._matmul_launch): batch
# entry b2 is K slice b2 of ``ks`` columns of A (rows of B), the last one shorter, so the
# kernel's K is that slice's length; W holds every slice's partial tiles (not ``restrict``:
# other work-groups write it), ``tickets`` one counter per output tile.
_SPLIT_PARAMS = (",\n    const int ks, __global CT* W, const int offW,"
                 " volatile __global int* restrict tickets")
_SPLIT_K = """    const int K = min(ks, Kall - b2 * ks);
    W += offW;
"""


def _signature(p: GemmParams, attrs: str = "") -> str:
    extra = f",\n    {p.extra_params}" if p.extra_params else ""
    extra += _SPLIT_PARAMS if p.split_merge else ""
    k_name, k_slice = ("Kall", _SPLIT_K) if p.split_merge else ("K", "")
    return f"""__kernel {attrs}void {gemm_kernel_name(p)}(
    __global const T* restrict A, const int offA, const int lda, const int sA1, const int sA2,
    __global const T* restrict B, const int offB, const int ldb, const int sB1, const int sB2,
    __global T* restrict C, const int offC, const int ldc, const int sC1, const int sC2,
    const int M, const int N, const int {k_name}, const int nb2,
    __global const T* restrict bias, const int bias_mode, const int sbias{extra})
{{
    const int bz = get_global_id(2);
    const int b1 = bz / nb2, b2 = bz - b1 * nb2;
    A += offA + (long)b1 * sA1 + (long)b2 * sA2;
    B += offB + (long)b1 * sB1 + (long)b2 * sB2;
    C += offC + (long)b1 * sC1 + (long)b2 * sC2;
    bias += (long)b2 * sbias;
{k_slice}"""


def _defines(**values: int) -> str:
    return "".join(f"#define {k} {v}\n" for k, v in values.items())


def _reqd(p: GemmParams) -> str:
    return f"__attribute__((reqd_work_group_size({p.lx}, {p.ly}, 1))) "


# -- naive: one work-item per output element -------------------------------------------------


def _naive(p: GemmParams) -> str:
    return _signature(p) + """\
    const int n = get_global_id(0), m = get_global_id(1);
    if (m >= M || n >= N) return;
    CT acc = 0;
    for (int k = 0; k < K; ++k) acc = MADD(A_AT(m, k), B_AT(k, n), acc);
    ST(C, m * ldc + n, acc + BIAS_OF(m, n));
}
"""


# -- tiled: local-memory tiles, each work-item a column strip of TM outputs -------------------


def _tiled(p: GemmParams) -> str:
    if p.trans_a:
        load_a = "const int kk = l / BM, r = l - kk * BM;"
    else:
        load_a = "const int r = l / BK, kk = l - r * BK;"
    if p.trans_b and not p.b_loader:
        load_b = "const int c = l / BK, kk = l - c * BK;"
    else:
        load_b = "const int kk = l / BN, c = l - kk * BN;"
    return _defines(BM=p.bm, BN=p.bn, BK=p.bk, TM=p.tm, RM=p.ly, NT=p.lx * p.ly) + _signature(
        p, _reqd(p)
    ) + f"""\
    __local CT As[BK][BM + 1];
    __local CT Bs[BK][BN];
    const int tx = get_local_id(0), ty = get_local_id(1), tid = ty * BN + tx;
    const int m0 = get_group_id(1) * BM, n0 = get_group_id(0) * BN;
    CT acc[TM];
    {UNROLL}
    for (int i = 0; i < TM; ++i) acc[i] = 0;
    for (int k0 = 0; k0 < K; k0 += BK) {{
        for (int l = tid; l < BM * BK; l += NT) {{
            {load_a}
            As[kk][r] = (m0 + r < M && k0 + kk < K) ? A_AT(m0 + r, k0 + kk) : (CT)0;
        }}
        for (int l = tid; l < BK * BN; l += NT) {{
            {load_b}
            Bs[kk][c] = (k0 + kk < K && n0 + c < N) ? B_AT(k0 + kk, n0 + c) : (CT)0;
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < BK; ++kk) {{
            const CT b = Bs[kk][tx];
            {UNROLL}
            for (int i = 0; i < TM; ++i) acc[i] = MADD(As[kk][ty + i * RM], b, acc[i]);
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    const int n = n0 + tx;
    {UNROLL}
    for (int i = 0; i < TM; ++i) {{
        const int m = m0 + ty + i * RM;
        if (m < M && n < N) ST(C, m * ldc + n, acc[i] + BIAS_OF(m, n));
    }}
}}
"""


# -- vectorized: packed panels in local memory, a vector micro-kernel per work-item ---------

# NOTE [ Vectorized GEMM and CPU devices ]
# A work-group packs a BM x BK panel of A and a BK x BN panel of B into local memory
# (micro-panel major, so the micro-kernel reads both contiguously), then its work-items run
# TM x TN micro-tiles: per k, TN/VW vector loads of B, TM broadcasts of A, TM*TN/VW vector
# multiply-adds. Packing is what makes this fast on CPUs (PoCL): it removes the power-of-two
# strides that thrash the L1 cache. With as many work-items as micro-tiles (GPUs) the
# accumulators stay in registers for the whole K loop; with fewer (a CPU work-group of one
# work-item) each K block is added into C, and packing uses division-free nested loops.


def _vectorized(p: GemmParams) -> str:
    nt = p.lx * p.ly
    registers = nt == (p.bm // p.tm) * (p.bn // p.tn)
    pack = _gpu_pack(p) if registers else _cpu_pack(p)
    micro = f"""for (int kk = 0; kk < kb; ++kk) {{
                CTV b[NV];
                {UNROLL}
                for (int j = 0; j < NV; ++j) b[j] = *(const __local CTV*)(bp + kk * TN + j * VW);
                {UNROLL}
                for (int i = 0; i < TM; ++i) {{
                    const CTV a = (CTV)(ap[kk * TM + i]);
                    {UNROLL}
                    for (int j = 0; j < NV; ++j) acc[i][j] = MADD(a, b[j], acc[i][j]);
                }}
            }}"""
    store = _vectorized_store(p)
    zero = f"""CTV acc[TM][NV];
            {UNROLL}
            for (int i = 0; i < TM; ++i)
                {UNROLL}
                for (int j = 0; j < NV; ++j) acc[i][j] = (CTV)0;"""
    tile = """const int i0 = (t % (BM / TM)) * TM, j0 = (t / (BM / TM)) * TN;
            const __local CT* ap = Ap + (i0 / TM) * (BK * TM);
            const __local CT* bp = Bp + (j0 / TN) * (BK * TN);"""
    if registers:
        body = f"""
    const int t = lid;
    {tile}
    {zero}
    for (int k0 = 0; k0 < K; k0 += BK) {{
        const int kb = K - k0 < BK ? K - k0 : BK;
        {pack}
        barrier(CLK_LOCAL_MEM_FENCE);
        {micro}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    const int first = 1;
    {store}
"""
    else:
        body = f"""
    for (int k0 = 0; k0 < max(K, 1); k0 += BK) {{
        const int kb = K - k0 < BK ? K - k0 : BK;
        const int first = k0 == 0;
        {pack}
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = lid; t < (BM / TM) * (BN / TN); t += NT) {{
            {tile}
            {zero}
            {micro}
            {store}
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
"""
    defines = _defines(BM=p.bm, BN=p.bn, BK=p.bk, TM=p.tm, TN=p.tn, VW=p.vw, NV=p.tn // p.vw,
                       NT=nt, VEC_C=int(p.vec_c))
    return defines + _signature(p, _reqd(p)) + f"""\
    __local CTV Ap4[BM * BK / VW + 1];
    __local CTV Bp4[BK * BN / VW + 1];
    __local CT* Ap = (__local CT*)Ap4;
    __local CT* Bp = (__local CT*)Bp4;
    const int lid = get_local_id(1) * {p.lx} + get_local_id(0);
    const int m0 = get_group_id(1) * BM, n0 = get_group_id(0) * BN;
{body}}}
"""


def _vectorized_store(p: GemmParams) -> str:
    """Add a micro-tile into C: unrolled vector stores when whole, a scalar loop at edges."""
    comps = [f"s{q:x}" for q in range(p.vw)]
    spill = "\n".join(
        f"                    tile[i][j * VW + {q}] = acc[i][j].{c};" for q, c in enumerate(comps)
    )
    return f"""if (VEC_C && m0 + i0 + TM <= M && n0 + j0 + TN <= N) {{
                {UNROLL}
                for (int i = 0; i < TM; ++i) {{
                    const int m = m0 + i0 + i;
                    {UNROLL}
                    for (int j = 0; j < NV; ++j) {{
                        const int n = n0 + j0 + j * VW;
                        CTV v = acc[i][j];
                        if (first && bias_mode == 1) v += (CTV)(LD(bias, m));
                        else if (first && bias_mode == 2) v += LDV(bias, n);
                        if (!first) v += LDV(C, m * ldc + n);
                        STV(C, m * ldc + n, v);
                    }}
                }}
            }} else {{
                CT tile[TM][TN];
                {UNROLL}
                for (int i = 0; i < TM; ++i)
                    {UNROLL}
                    for (int j = 0; j < NV; ++j) {{
{spill}
                    }}
                for (int i = 0; i < TM && m0 + i0 + i < M; ++i) {{
                    const int m = m0 + i0 + i;
                    for (int c = 0; c < TN && n0 + j0 + c < N; ++c) {{
                        const int n = n0 + j0 + c;
                        const CT prior = first ? BIAS_OF(m, n) : LD(C, m * ldc + n);
                        ST(C, m * ldc + n, prior + tile[i][c]);
                    }}
                }}
            }}"""


def _gpu_pack(p: GemmParams) -> str:
    """Packing with flattened loops: consecutive work-items read consecutive elements."""
    a_idx = ("const int kk = l / BM, r = l - kk * BM;" if p.trans_a
             else "const int r = l / BK, kk = l - r * BK;")
    b_idx = ("const int c = l / BK, kk = l - c * BK;" if p.trans_b and not p.b_loader
             else "const int kk = l / BN, c = l - kk * BN;")
    return f"""for (int l = lid; l < BM * BK; l += NT) {{
            {a_idx}
            Ap[(r / TM) * (BK * TM) + kk * TM + r % TM] =
                (m0 + r < M && kk < kb) ? A_AT(m0 + r, k0 + kk) : (CT)0;
        }}
        for (int l = lid; l < BK * BN; l += NT) {{
            {b_idx}
            Bp[(c / TN) * (BK * TN) + kk * TN + c % TN] =
                (kk < kb && n0 + c < N) ? B_AT(k0 + kk, n0 + c) : (CT)0;
        }}"""


def _cpu_pack(p: GemmParams) -> str:
    """Packing with nested loops and no division in the inner loop (it must be cheap)."""
    if p.trans_a:
        pack_a = """for (int kk = lid; kk < BK; kk += NT)
            for (int rb = 0; rb < BM / TM; ++rb)
                #pragma unroll
                for (int q = 0; q < TM; ++q) {
                    const int r = rb * TM + q;
                    Ap[rb * (BK * TM) + kk * TM + q] =
                        (kk < kb && m0 + r < M) ? A_AT(m0 + r, k0 + kk) : (CT)0;
                }"""
    else:
        pack_a = """for (int r = lid; r < BM; r += NT) {
            const int rb = r / TM, q = r - rb * TM, ok = m0 + r < M;
            __local CT* dst = Ap + rb * (BK * TM) + q;
            for (int kk = 0; kk < BK; ++kk)
                dst[kk * TM] = (ok && kk < kb) ? A_AT(m0 + r, k0 + kk) : (CT)0;
        }"""
    if p.trans_b and not p.b_loader:
        pack_b = """for (int c = lid; c < BN; c += NT) {
            const int cb = c / TN, q = c - cb * TN, ok = n0 + c < N;
            __local CT* dst = Bp + cb * (BK * TN) + q;
            for (int kk = 0; kk < BK; ++kk)
                dst[kk * TN] = (ok && kk < kb) ? B_AT(k0 + kk, n0 + c) : (CT)0;
        }"""
    else:
        pack_b = """for (int kk = lid; kk < BK; kk += NT)
            for (int cb = 0; cb < BN / TN; ++cb)
                #pragma unroll
                for (int q = 0; q < TN; ++q) {
                    const int c = cb * TN + q;
                    Bp[cb * (BK * TN) + kk * TN + q] =
                        (kk < kb && n0 + c < N) ? B_AT(k0 + kk, n0 + c) : (CT)0;
                }"""
    return pack_a + "\n        " + pack_b
