"""OpenCL C source of the register-tiled GEMM kernel (the one that must run fast on GPUs).

# NOTE [ Register-tiled GEMM ]
# A work-group of NT = (BM/TM) x (BN/TN) work-items computes a BM x BN tile of C, each
# work-item a TM x TN register block. A and B tiles of depth BK go through local memory,
# double-buffered: the next tile's global loads are issued into registers before the current
# tile's multiply-adds and stored to the other buffer after them, so there is one barrier per
# BK step. Both tiles are stored k-major (A transposed while storing, rows padded by 4 so
# those scalar stores do not conflict on banks) and read as 4-vectors: a work-item's rows are
# ty*4 + j*(BM/TM)*4 + i (i < 4), so the 4-vector local reads of a warp are contiguous.
# Global loads are 4-vectors where the operand's contiguous dimension, leading dimension and
# offsets are multiples of 4 (VEC_A / VEC_B), else scalar.
#
# The main loop has no bounds checks: row and column indices are clamped into the matrix (a
# clamped row of A or column of B only feeds outputs outside C, which are not stored), and
# a k index past K loads a clamped address and selects zero, so the tail of K adds nothing.
# Only an implicit-GEMM B loader (``b_loader``) keeps its checks (its own gather decides).
#
# ``warp_n`` > 0 maps the 32 work-items of a warp onto a warp_n x (32 / warp_n) block of
# work-items (warp tiling): a warp then reads 32/warp_n distinct A vectors and warp_n
# distinct B vectors per k step instead of 2 and 16 (fewer local-memory wavefronts).
#
# ``swizzle`` = S > 0 renumbers the work-groups (Triton's grouped order): consecutive groups
# walk down a column of S tile rows before moving one tile column right, so the groups
# running at the same time share S rows of A and few columns of B in L2 instead of one row
# of A and every column of B. The last band of rows may be shorter; the map stays one to one.
"""

from __future__ import annotations

from ._matmul_params import GemmParams

__all__ = ["register_tiled_source", "warp_layout_ok"]

UNROLL = "#pragma unroll"
WARP = 32


def warp_layout_ok(rn: int, rm: int, warp_n: int) -> bool:
    """Whether a ``rn`` x ``rm`` work-group splits into warps of ``warp_n`` x ``32/warp_n``."""
    return (warp_n > 0 and WARP % warp_n == 0 and rn % warp_n == 0
            and rm % (WARP // warp_n) == 0)


def _defines(**values: int) -> str:
    return "".join(f"#define {k} {v}\n" for k, v in values.items())


def _block_offset(t: int, i: str, lane: str, threads: str) -> str:
    """Offset in the tile of a work-item's ``i``-th row or column (``lane`` = ty or tx)."""
    if t % 4 == 0:
        return f"(({i}) >> 2) * ({threads} * 4) + {lane} * 4 + (({i}) & 3)"
    return f"{lane} + ({i}) * {threads}"


def _copy(
    p: GemmParams, count: int, index: str, load: str, store: str, reg: str
) -> tuple[str, str, str]:
    """Declaration, global->register and register->local loops moving ``count`` items
    (a bounds check on the item index only where ``count`` is not a multiple of NT)."""
    nt = p.lx * p.ly
    n = -(-count // nt)
    ctype, name = reg.split(" ")
    guard_open, guard_close = (f"if (l < {count}) {{", "}") if count % nt else ("", "")
    decl = f"{ctype} {name}[{n}];"
    load_code = f"""{UNROLL}
        for (int i = 0; i < {n}; ++i) {{
            const int l = tid + i * NT; {index}
            {guard_open} {name}[i] = {load}; {guard_close}
        }}"""
    store_code = f"""{UNROLL}
        for (int i = 0; i < {n}; ++i) {{
            const int l = tid + i * NT; {index}
            {guard_open} {store} {guard_close}
        }}"""
    return decl, load_code, store_code


def _a_tile(p: GemmParams) -> tuple[str, str, str]:
    if p.vec_a and not p.trans_a:  # rows of A: 4-vectors along k, stored transposed
        return _copy(
            p, p.bm * p.bk // 4,
            "const int r = l / (BK / 4), kq = (l - r * (BK / 4)) * 4;",
            "KSEL(k0 + kq, LDV(A, min(m0 + r, M - 1) * lda + min(k0 + kq, K - 4)), (CTV)0)",
            "As_[kq * LDA_S + r] = ra[i].s0; As_[(kq + 1) * LDA_S + r] = ra[i].s1; "
            "As_[(kq + 2) * LDA_S + r] = ra[i].s2; As_[(kq + 3) * LDA_S + r] = ra[i].s3;",
            "CTV ra",
        )
    if p.vec_a:  # A^T stored K x M: 4-vectors along m, stored as they are
        return _copy(
            p, p.bm * p.bk // 4, "const int kk = l / (BM / 4), mq = (l - kk * (BM / 4)) * 4;",
            "KSEL(k0 + kk, LDV(A, min(k0 + kk, K - 1) * lda + min(m0 + mq, M - 4)), (CTV)0)",
            "*(__local CTV*)(As_ + kk * LDA_S + mq) = ra[i];", "CTV ra",
        )
    idx = ("const int kk = l / BM, r = l - kk * BM;" if p.trans_a
           else "const int r = l / BK, kk = l - r * BK;")
    return _copy(
        p, p.bm * p.bk, idx,
        "KSEL(k0 + kk, A_AT(min(m0 + r, M - 1), min(k0 + kk, K - 1)), (CT)0)",
        "As_[kk * LDA_S + r] = ra[i];", "CT ra",
    )


def _b_tile(p: GemmParams) -> tuple[str, str, str]:
    if p.vec_b and not p.trans_b and not p.b_loader:  # rows of B: 4-vectors along n
        return _copy(
            p, p.bk * p.bn // 4, "const int kk = l / (BN / 4), nq = (l - kk * (BN / 4)) * 4;",
            "KSEL(k0 + kk, LDV(B, min(k0 + kk, K - 1) * ldb + min(n0 + nq, N - 4)), (CTV)0)",
            "*(__local CTV*)(Bs_ + kk * LDB_S + nq) = rb[i];", "CTV rb",
        )
    if p.vec_b and not p.b_loader:  # B^T stored N x K: 4-vectors along k, stored transposed
        return _copy(
            p, p.bk * p.bn // 4,
            "const int c = l / (BK / 4), kq = (l - c * (BK / 4)) * 4;",
            "KSEL(k0 + kq, LDV(B, min(n0 + c, N - 1) * ldb + min(k0 + kq, K - 4)), (CTV)0)",
            "Bs_[kq * LDB_S + c] = rb[i].s0; Bs_[(kq + 1) * LDB_S + c] = rb[i].s1; "
            "Bs_[(kq + 2) * LDB_S + c] = rb[i].s2; Bs_[(kq + 3) * LDB_S + c] = rb[i].s3;",
            "CTV rb",
        )
    if p.b_loader:  # an implicit-GEMM gather: its checks stay
        load = "(k0 + kk < K && n0 + c < N) ? B_AT(k0 + kk, n0 + c) : (CT)0"
    else:
        load = "KSEL(k0 + kk, B_AT(min(k0 + kk, K - 1), min(n0 + c, N - 1)), (CT)0)"
    idx = ("const int c = l / BK, kk = l - c * BK;" if p.trans_b and not p.b_loader
           else "const int kk = l / BN, c = l - kk * BN;")
    return _copy(p, p.bk * p.bn, idx, load, "Bs_[kk * LDB_S + c] = rb[i];", "CT rb")


def _fragment(t: int, dst: str, src: str, lane: str, threads: str) -> str:
    """Read a work-item's ``t`` values of one local tile row into ``dst``."""
    if t % 4 == 0:
        return f"""{UNROLL}
            for (int j = 0; j < {t} / 4; ++j) {{
                const CTV v = *(const __local CTV*)({src} + j * ({threads} * 4) + {lane} * 4);
                {dst}[4 * j] = v.s0; {dst}[4 * j + 1] = v.s1;
                {dst}[4 * j + 2] = v.s2; {dst}[4 * j + 3] = v.s3;
            }}"""
    return f"""{UNROLL}
            for (int j = 0; j < {t}; ++j) {dst}[j] = ({src})[{lane} + j * {threads}];"""


def _store_c(p: GemmParams) -> str:
    row = _block_offset(p.tm, "i", "ty", "RM")
    col = _block_offset(p.tn, "j", "tx", "RN")
    if p.vec_c and p.tn % 4 == 0:
        return f"""{UNROLL}
    for (int i = 0; i < TM; ++i) {{
        const int m = m0 + {row};
        {UNROLL}
        for (int j = 0; j < TN; j += 4) {{
            const int n = n0 + {col};
            if (m < M && n < N) {{
                CTV v = (CTV)(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
                if (bias_mode == 1) v += (CTV)(LD(bias, m));
                else if (bias_mode == 2) v += LDV(bias, n);
                STV(C, m * ldc + n, v);
            }}
        }}
    }}"""
    return f"""{UNROLL}
    for (int i = 0; i < TM; ++i) {{
        const int m = m0 + {row};
        {UNROLL}
        for (int j = 0; j < TN; ++j) {{
            const int n = n0 + {col};
            if (m < M && n < N) ST(C, m * ldc + n, acc[i][j] + BIAS_OF(m, n));
        }}
    }}"""


def _thread_map(p: GemmParams) -> str:
    if warp_layout_ok(p.lx, p.ly, p.warp_n):
        wn, wr = p.warp_n, WARP // p.warp_n
        return (f"const int lane = tid & {WARP - 1}, warp = tid >> 5;\n"
                f"    const int tx = (warp % (RN / {wn})) * {wn} + lane % {wn};\n"
                f"    const int ty = (warp / (RN / {wn})) * {wr} + lane / {wn};")
    return "const int tx = get_local_id(0), ty = get_local_id(1);"


def _tile_origin(p: GemmParams) -> str:
    """``m0``/``n0``: the first row and column of the work-group's tile (NOTE: swizzle)."""
    if p.swizzle <= 0:
        return "const int m0 = get_group_id(1) * BM, n0 = get_group_id(0) * BN;"
    return (f"const int gx = get_num_groups(0), gy = get_num_groups(1);\n"
            f"    const int pid = get_group_id(1) * gx + get_group_id(0);\n"
            f"    const int band = pid / ({p.swizzle} * gx), r0 = band * {p.swizzle};\n"
            f"    const int rows = min(gy - r0, {p.swizzle}), rest = pid - band * "
            f"({p.swizzle} * gx);\n"
            f"    const int m0 = (r0 + rest % rows) * BM, n0 = (rest / rows) * BN;")


def _merge_slices(p: GemmParams) -> str:
    """Split K (``split_merge``): write this slice's partial tile, take the tile's ticket, and
    in the last group to take one, sum every slice's partial in slice order into ``acc``.

    The partials of output tile ``tile`` lie in W as ``nb2`` slots (slice order) of
    TM * TN * NT values; with TN a multiple of 4, 4-vector ``q = i * TN / 4 + j / 4`` of
    work-item ``tid`` (values (i, j..j+3)) at vector ``q * NT + tid`` (else value (i, j) at
    ``(i * TN + j) * NT + tid``): each work-item reads back exactly what it and its twins in
    the other slices wrote (no local memory, coalesced, no bounds checks: a whole tile is
    stored; the slots start 4-vector aligned, NOTE [ Split-K ] in ._matmul_launch)."""
    if p.tn % 4 == 0:
        vt, w, at = "CTV", 4, "(i * (TN / 4) + j / 4) * NT"
        store = "wb[AT] = (CTV)(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);"
        add = ("{ const CTV v = wz[AT]; acc[i][j] += v.s0; acc[i][j + 1] += v.s1; "
               "acc[i][j + 2] += v.s2; acc[i][j + 3] += v.s3; }")
    else:
        vt, w, at = "CT", 1, "(i * TN + j) * NT"
        store, add = "wb[AT] = acc[i][j];", "acc[i][j] += wz[AT];"
    slot = f"(NT * TM * TN / {w})" if w > 1 else "(NT * TM * TN)"
    store, add = store.replace("AT", at), add.replace("AT", at)
    return f"""{{
        const int tile = get_group_id(1) * get_num_groups(0) + get_group_id(0);
        __global {vt}* w = (__global {vt}*)(W + (long)tile * nb2 * (NT * TM * TN)) + tid;
        __global {vt}* wb = w + (long)b2 * {slot};
        {UNROLL}
        for (int i = 0; i < TM; ++i)
            {UNROLL}
            for (int j = 0; j < TN; j += {w}) {store}
        GL_FENCE();  // this work-item's partial is visible device-wide before the ticket
        barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
        if (tid == 0) last_group = atomic_inc(&tickets[tile]) == nb2 - 1;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!last_group) return;
        GL_FENCE();
        if (tid == 0) tickets[tile] = 0;  // every slice has taken its ticket: ready to reuse
        {UNROLL}
        for (int i = 0; i < TM; ++i)
            {UNROLL}
            for (int j = 0; j < TN; ++j) acc[i][j] = 0;
        for (int z = 0; z < nb2; ++z) {{  // in slice order: the same bits whoever is last
            const __global {vt}* wz = w + (long)z * {slot};
            {UNROLL}
            for (int i = 0; i < TM; ++i)
                {UNROLL}
                for (int j = 0; j < TN; j += {w}) {add}
        }}
    }}"""


def register_tiled_source(p: GemmParams, signature: str) -> str:
    """The register-tiled kernel's body after its ``#define``s; ``signature`` opens it."""
    # both tiles get the same padding: 0 when both are stored as they are loaded (A^T and B
    # as 4-vectors), else 4 (measured on an H100: a padded and an unpadded tile side by side
    # ran nn 1.5x slower than both padded, with the same registers and local memory)
    direct = p.trans_a and p.vec_a and p.vec_b and not p.trans_b and not p.b_loader
    # (an H100 ran 16x8 blocks in nn and tt 0.90x cuBLAS unpadded, 0.76x padded, but nt
    # 0.82x vs 0.89x, and unaligned operands padded: lds_pad -2 picks per alignment)
    vec0 = p.lds_pad == -2 and p.vec_a and p.vec_b
    pad_a = pad_b = p.lds_pad if p.lds_pad >= 0 else 0 if direct or vec0 else 4
    ad, al, ast = _a_tile(p)
    bd, bl, bst = _b_tile(p)
    defines = _defines(BM=p.bm, BN=p.bn, BK=p.bk, TM=p.tm, TN=p.tn, RM=p.ly, RN=p.lx,
                       NT=p.lx * p.ly, LDA_S=p.bm + pad_a, LDB_S=p.bn + pad_b)
    defines += "#define KSEL(k, v, zero) ((k) < K ? (v) : (zero))\n"
    merge = _merge_slices(p) + "\n    " if p.split_merge else ""
    local_flag = "\n    __local int last_group;" if p.split_merge else ""
    return defines + signature + f"""\
    __local CTV As4[2 * BK * LDA_S / 4];
    __local CTV Bs4[2 * BK * LDB_S / 4];{local_flag}
    const int tid = get_local_id(1) * RN + get_local_id(0);
    {_thread_map(p)}
    {_tile_origin(p)}
    CT acc[TM][TN];
    {UNROLL}
    for (int i = 0; i < TM; ++i)
        {UNROLL}
        for (int j = 0; j < TN; ++j) acc[i][j] = 0;
    {ad}
    {bd}
    const int ntiles = (K + BK - 1) / BK;
    int k0 = 0;
    if (ntiles > 0) {{
        __local CT* As_ = (__local CT*)As4;
        __local CT* Bs_ = (__local CT*)Bs4;
        {al}
        {bl}
        {ast}
        {bst}
    }}
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < ntiles; ++t) {{
        const int cur = t & 1;
        const __local CT* Ac = (const __local CT*)As4 + cur * BK * LDA_S;
        const __local CT* Bc = (const __local CT*)Bs4 + cur * BK * LDB_S;
        k0 = (t + 1) * BK;
        if (t + 1 < ntiles) {{
            {al}
            {bl}
        }}
        {UNROLL}
        for (int kk = 0; kk < BK; ++kk) {{
            CT a[TM], b[TN];
            {_fragment(p.tm, "a", "Ac + kk * LDA_S", "ty", "RM")}
            {_fragment(p.tn, "b", "Bc + kk * LDB_S", "tx", "RN")}
            {UNROLL}
            for (int i = 0; i < TM; ++i)
                {UNROLL}
                for (int j = 0; j < TN; ++j) acc[i][j] = MADD(a[i], b[j], acc[i][j]);
        }}
        if (t + 1 < ntiles) {{
            __local CT* As_ = (__local CT*)As4 + (cur ^ 1) * BK * LDA_S;
            __local CT* Bs_ = (__local CT*)Bs4 + (cur ^ 1) * BK * LDB_S;
            {ast}
            {bst}
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    {merge}{_store_c(p)}
}}
"""
