"""OpenCL C sources of tensor-core implicit-GEMM convolutions (float16 storage, inline PTX).

The three GEMMs of a convolution (NCHW input ``(n, c, h, w)``, weight ``(k, c, r, s)``, one
group) run on ``mma.sync.m16n8k16`` with f32 accumulation, each kernel gathering both of its
operands straight from the tensors (no im2col buffer):

=============  ============  ==============  ==============  ==================================
direction      GEMM rows     GEMM columns    reduction       A (rows x red.) / B (red. x cols)
=============  ============  ==============  ==============  ==================================
``forward``    k (out ch.)   n*oh*ow         c*r*s           weight / input windows
``data``       c (in ch.)    n*h*w           k*r*s           weight (transposed) / grad_out
``weight``     k (out ch.)   c*r*s           n*oh*ow         grad_out / input windows
=============  ============  ==============  ==============  ==================================

Element gathers go global -> registers (one k-tile ahead) -> swizzled local tile; fragments
come out by ``ldmatrix`` and meet in ``mma.sync`` exactly as in the GEMM of
:mod:`._matmul_mma_source` (whose fragment, mma and emulation text this module reuses, so
``emulate=True`` runs the whole kernel on any OpenCL device). The geometry is compiled in, so
every index division is by a constant. The weight gradient may split its reduction over
``grid[1]`` work-groups into float32 partial sums that ``conv_mma_wsum`` adds in a fixed order.

# NOTE [ Conv gather mapping ]
# Each work-item loads its tile elements for k-tile kt + 1 while the mma of k-tile kt run,
# and stores them to the other of two local stages before the one barrier per k-tile. The
# element-to-work-item map keeps the costly index math per work-item, not per element: A
# tiles (rows x 32 reduction) are read along the reduction (work-item ``tid % 32`` owns one
# reduction column per k-tile: one decomposition per k-tile, then a pointer stride per row);
# B tiles of ``forward``/``data`` along the GEMM columns (``tid % BN`` owns one output pixel
# for the whole kernel: its image, row and column are decomposed once), those of ``weight``
# along the reduction (one input pixel per k-tile). Consecutive work-items so read
# consecutive addresses wherever the tensor layout allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template

from ._matmul_mma_source import (
    FRAG_A_TEXT,
    FRAG_B_TEXT,
    MMAS_TEXT,
    emulated_ptx,
    hardware_ptx,
)

__all__ = [
    "CONV_DIRECTIONS",
    "ConvDims",
    "ConvMmaConfig",
    "conv_mma_kernel_name",
    "conv_mma_source",
    "gemm_dims",
]

CONV_DIRECTIONS = ("forward", "data", "weight")

_LOCAL_LIMIT = 49152


@dataclass(frozen=True)
class ConvDims:
    """A convolution's sizes: input ``(n, c, h, w)``, weight ``(k, c, r, s)``, output
    ``(n, k, oh, ow)``, stride, padding and dilation per axis (one group)."""

    n: int
    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    oh: int
    ow: int
    sh: int = 1
    sw: int = 1
    ph: int = 0
    pw: int = 0
    dh: int = 1
    dw: int = 1


def gemm_dims(direction: str, d: ConvDims) -> tuple[int, int, int]:
    """``(rows, columns, reduction)`` of ``direction``'s GEMM.

    Examples:
        >>> gemm_dims("forward", ConvDims(128, 64, 32, 32, 64, 3, 3, 32, 32, ph=1, pw=1))
        (64, 131072, 576)
        >>> gemm_dims("weight", ConvDims(128, 64, 32, 32, 64, 3, 3, 32, 32, ph=1, pw=1))
        (64, 576, 131072)
    """
    crs, krs = d.c * d.r * d.s, d.k * d.r * d.s
    if direction == "forward":
        return d.k, d.n * d.oh * d.ow, crs
    if direction == "data":
        return d.c, d.n * d.h * d.w, krs
    if direction == "weight":
        return d.k, crs, d.n * d.oh * d.ow
    raise ValueError(f"gemm_dims: direction must be one of {CONV_DIRECTIONS}, got {direction!r}")


@dataclass(frozen=True)
class ConvMmaConfig:
    """Tiles of one tensor-core convolution kernel: a ``bm x bn`` work-group tile stepping
    ``bk`` (a multiple of 32) through the reduction, ``warps_m x warps_n`` warps, output
    float16 (else float32), ``emulate`` for plain-C PTX (NOTE [ Emulated PTX ]).

    Examples:
        >>> ConvMmaConfig().label()
        '128x128x32_w2x2'
        >>> ConvMmaConfig(bm=64, bn=256).check("forward")
        Traceback (most recent call last):
        ...
        ValueError: ConvMmaConfig: forward needs bn to divide the 128 work-items, got bn=256
    """

    bm: int = 128
    bn: int = 128
    bk: int = 32
    warps_m: int = 2
    warps_n: int = 2
    out_f16: bool = True
    emulate: bool = False

    @property
    def threads(self) -> int:
        """Work-items per work-group."""
        return 32 * self.warps_m * self.warps_n

    @property
    def local_bytes(self) -> int:
        """Local memory of the two stages."""
        return 2 * (self.bm * self.bk + self.bk * self.bn) * 2

    def label(self) -> str:
        """``BMxBNxBK_wMxN`` plus ``_f32`` for float32 output, ``_emu`` when emulated."""
        flags = ("" if self.out_f16 else "_f32") + ("_emu" if self.emulate else "")
        return f"{self.bm}x{self.bn}x{self.bk}_w{self.warps_m}x{self.warps_n}{flags}"

    def check(self, direction: str) -> None:
        """Raise ``ValueError`` naming the rule the tiles break for ``direction``."""
        nt = self.threads
        rules = [
            (self.warps_m >= 1 and self.warps_n >= 1, "warps_m and warps_n must be >= 1",
             f"warps {self.warps_m}x{self.warps_n}"),
            (self.bm % self.warps_m == 0 and (self.bm // self.warps_m) % 16 == 0,
             "bm / warps_m must be a multiple of 16", f"bm={self.bm}, warps_m={self.warps_m}"),
            (self.bn % self.warps_n == 0 and (self.bn // self.warps_n) % 16 == 0,
             "bn / warps_n must be a multiple of 16", f"bn={self.bn}, warps_n={self.warps_n}"),
            (self.bk % 32 == 0 and nt % self.bk == 0,
             "bk must be a multiple of 32 that divides the work-items", f"bk={self.bk}"),
            (direction == "weight" or nt % self.bn == 0,
             f"{direction} needs bn to divide the {nt} work-items", f"bn={self.bn}"),
            (self.bn >= 16 and self.bn % 16 == 0, "bn must be a multiple of 16", f"bn={self.bn}"),
            ((self.bm * self.bk) % nt == 0 and (self.bk * self.bn) % nt == 0,
             "the tile elements must divide among the work-items", f"{nt} work-items"),
            (self.local_bytes <= _LOCAL_LIMIT, "the two stages must fit in 48 KiB",
             f"{self.local_bytes} bytes"),
        ]
        if direction not in CONV_DIRECTIONS:
            raise ValueError(f"ConvMmaConfig: direction must be one of {CONV_DIRECTIONS}, "
                             f"got {direction!r}")
        for ok, rule, got in rules:
            if not ok:
                raise ValueError(f"ConvMmaConfig: {rule}, got {got}")


def conv_mma_kernel_name(direction: str) -> str:
    """``conv_mma_<direction>`` (the weight gradient's program also has ``conv_mma_wsum``).

    Examples:
        >>> conv_mma_kernel_name("data")
        'conv_mma_data'
    """
    return f"conv_mma_{direction}"


def _swizzle(chunks_per_row: int) -> str:
    """NOTE [ Local memory swizzle ] of ``_matmul_mma_source``."""
    if chunks_per_row >= 8:
        return "((c) ^ ((r) & 7))"
    if chunks_per_row == 4:
        return "((c) ^ (((r) >> 1) & 3))"
    return "((c) ^ (((r) >> 2) & 1))"


def _store(f16: bool) -> str:
    return "vstore_half_rte((v), 0, (p))" if f16 else "(*(p) = (v))"


def conv_mma_source(direction: str, dims: ConvDims, config: ConvMmaConfig,
                    partial: bool = False) -> str:
    """The OpenCL C source of ``direction``'s kernel for ``dims`` with ``config``'s tiles;
    ``partial`` (weight gradient with a split reduction): the GEMM kernel writes float32
    partial sums per ``grid[1]`` index and ``conv_mma_wsum`` adds them into the output.

    Examples:
        >>> d = ConvDims(2, 3, 9, 9, 8, 3, 3, 9, 9, ph=1, pw=1)
        >>> src = conv_mma_source("forward", d, ConvMmaConfig())
        >>> "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in src
        True
        >>> "__asm__" in conv_mma_source("weight", d, ConvMmaConfig(emulate=True))
        False
    """
    config.check(direction)
    c = config
    rows, cols, red = gemm_dims(direction, dims)
    nt = c.threads
    cwa, cwb = c.bk // 8, c.bn // 8
    d = dims
    key = _b_variant(direction, d, c)
    chunked = key.endswith("_chunk")
    defines = {
        "BM": c.bm, "BN": c.bn, "BK": c.bk, "WARPS_M": c.warps_m, "WARPS_N": c.warps_n,
        "STAGES": 2, "CWA": cwa, "CWB": cwb, "GM": rows, "GN": cols, "GK": red,
        "NB": d.n, "CC": d.c, "HH": d.h, "WW": d.w, "OC": d.k, "KH": d.r, "KW": d.s,
        "OH": d.oh, "OW": d.ow, "SH": d.sh, "SW": d.sw, "PH": d.ph, "PW": d.pw, "DH": d.dh,
        "DW": d.dw, "KHKW": d.r * d.s, "PIX": d.oh * d.ow, "HWI": d.h * d.w,
        "A_PER": c.bm * c.bk // nt, "B_PER": c.bk * c.bn // nt, "B_CH": c.bk * cwb // nt,
        "A_STRIDE": _A_STRIDE[direction], "C_STRIDE": _C_STRIDE[direction],
    }
    lines = [f"#define {k} {v}" for k, v in defines.items()]
    lines += [
        f"#define SWZ_A(r, c) {_swizzle(cwa)}",
        f"#define SWZ_B(r, c) {_swizzle(cwb)}",
        f"#define KERNEL_NAME {conv_mma_kernel_name(direction)}",
        "#define VB_DECL " + ("uint4 vb[B_CH]" if chunked else "ushort vb[B_PER]"),
        "#define OUT_T " + ("half" if c.out_f16 and not partial else "float"),
        "#define STORE1(p, v) " + _store(c.out_f16 and not partial),
        "#define FIN_T " + ("half" if c.out_f16 else "float"),
        "#define FSTORE1(p, v) " + _store(c.out_f16),
    ]
    frags = Template(FRAG_A_TEXT + FRAG_B_TEXT)
    mmas = Template(MMAS_TEXT)
    body = Template(_KERNEL).substitute(
        b_init=_B_INIT[key],
        load_next=_loads(key, "kt + 1"),
        load_first=_loads(key, "kt_begin"),
        store_first=_stores(key, "0"),
        store_next=_stores(key, "st ^ 1"),
        frags_first=frags.substitute(fa="af[0]", fb="bf[0]", st="0", ks="0").rstrip("\n"),
        frags_next=frags.substitute(fa="af[(ks + 1) & 1]", fb="bf[(ks + 1) & 1]", st="nst",
                                    ks="((ks + 1) % (BK / 16))").rstrip("\n"),
        mmas=mmas.substitute(fa="af[ks & 1]", fb="bf[ks & 1]").rstrip("\n"),
        col_base=_COL_BASE[direction],
        bias=_BIAS if direction == "forward" else "0.0f",
    )
    ptx = emulated_ptx() if c.emulate else hardware_ptx(0)
    wsum = _WSUM if direction == "weight" else ""
    return "\n".join(lines) + "\n" + _DERIVED + ptx + body + wsum


def _b_variant(direction: str, d: ConvDims, c: ConvMmaConfig) -> str:
    """The B gather: ``<direction>_chunk`` (NOTE [ Chunked B gather ]) where eight consecutive
    GEMM columns always share an image row, else ``<direction>``."""
    cwb = c.bn // 8
    fits = c.threads % cwb == 0 and (c.bk * cwb) % c.threads == 0
    width = {"forward": d.ow, "data": d.w}.get(direction, 1)
    return f"{direction}_chunk" if fits and width % 8 == 0 else direction


def _loads(key: str, kt: str) -> str:
    """Global -> registers of k-tile ``kt`` (NOTE [ Conv gather mapping ])."""
    direction = key.removesuffix("_chunk")
    setup_b = _B_SETUP[direction] + "\n" if _B_SETUP[direction] else ""
    count = "B_CH" if key.endswith("_chunk") else "B_PER"
    return (_LOADS.replace("KT_EXPR", kt).replace("A_SETUP\n", _A_SETUP[direction] + "\n")
            .replace("B_SETUP\n", setup_b).replace("B_ELEM\n", _B_ELEM[key])
            .replace("B_COUNT", count))


def _stores(key: str, st: str) -> str:
    """Registers -> local stage ``st``, swizzled."""
    return _STORES.replace("B_STORE\n", _B_STORE[key]).replace("ST_EXPR", st)


_LOADS = """\
    {
        const int k0 = (KT_EXPR) * BK;
A_SETUP
        #pragma unroll
        for (int e = 0; e < A_PER; ++e) {
            const int m = m0 + a_row0 + e * (NT / BK);
            va[e] = (a_ok && m < GM) ? ap[m * A_STRIDE] : (ushort)0;
        }
B_SETUP
        #pragma unroll
        for (int e = 0; e < B_COUNT; ++e) {
B_ELEM
        }
    }
"""

_STORES = """\
    #pragma unroll
    for (int e = 0; e < A_PER; ++e) {
        const int r = a_row0 + e * (NT / BK);
        hA[(((ST_EXPR) * A_CHUNKS + r * CWA + SWZ_A(r, a_col >> 3)) << 3) + (a_col & 7)] = va[e];
    }
B_STORE
"""

_COLUMN_STORE = """\
    #pragma unroll
    for (int e = 0; e < B_PER; ++e) {
        const int r = b_row0 + e * (NT / BN), cc = b_col;
        hB[(((ST_EXPR) * B_CHUNKS + r * CWB + SWZ_B(r, cc >> 3)) << 3) + (cc & 7)] = vb[e];
    }
"""
_CHUNK_STORE = """\
    #pragma unroll
    for (int e = 0; e < B_CH; ++e) {
        const int r = b_row0 + e * (NT / CWB);
        sB[(ST_EXPR) * B_CHUNKS + r * CWB + SWZ_B(r, b_cc)] = vb[e];
    }
"""
_B_STORE = {
    "forward": _COLUMN_STORE,
    "data": _COLUMN_STORE,
    "weight": """\
    #pragma unroll
    for (int e = 0; e < B_PER; ++e) {
        const int r = b_row, cc = b_col0 + e * (NT / BK);
        hB[(((ST_EXPR) * B_CHUNKS + r * CWB + SWZ_B(r, cc >> 3)) << 3) + (cc & 7)] = vb[e];
    }
""",
    "forward_chunk": _CHUNK_STORE,
    "data_chunk": _CHUNK_STORE,
}

_BIAS = "has_bias ? vload_half(m, (__global const half*)bias) : 0.0f"

_A_STRIDE = {"forward": "GK", "data": "KHKW", "weight": "PIX"}
_C_STRIDE = {"forward": "PIX", "data": "HWI", "weight": "GN"}

_DERIVED = """\
#define NT (32 * WARPS_M * WARPS_N)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define MI (WM / 16)
#define NI (WN / 8)
#define A_CHUNKS (BM * BK / 8)
#define B_CHUNKS (BK * BN / 8)
#define SHARED_ADDR(p) ((uint)(size_t)(p))
/* reduction index k -> window tap (channel c, kh, kw); a step of ``step`` taps (< 2 wraps) */
#define TAP_SPLIT(c, kh, kw, k) do { c = (k) / KHKW; kw = (k) - c * KHKW; kh = kw / KW; \\
    kw -= kh * KW; } while (0)
#define TAP_STEP(c, kh, kw, step) do { kw += (step) % KW; kh += ((step) / KW) % KH; \\
    c += (step) / KHKW; if (kw >= KW) { kw -= KW; ++kh; } if (kh >= KH) { kh -= KH; ++c; } \\
} while (0)
"""

# Per k-tile: the reduction column ``ak`` of this work-item's A elements, a pointer to its
# row-0 element and the stride between rows (A_STRIDE).
_A_SETUP = {
    "forward": """\
        const int ak = k0 + a_col, a_ok = ak < GK;
        __global const ushort* const ap = AS + ak;""",
    "data": """\
        const int ak = k0 + a_col, a_ok = ak < GK;
        const int a_oc = ak / KHKW;
        __global const ushort* const ap = AS + a_oc * (CC * KHKW) + (ak - a_oc * KHKW);""",
    "weight": """\
        const int ak = k0 + a_col, a_ok = ak < GK;
        const int a_n = ak / PIX;
        __global const ushort* const ap = AS + a_n * (OC * PIX) + (ak - a_n * PIX);""",
}

# Once per kernel: the output pixel (forward) or input pixel (data) whose column this
# work-item gathers.
_B_INIT = {
    "forward": """\
    const int b_col = tid % BN, b_row0 = tid / BN;
    const int bj = n0 + b_col, b_jok = bj < GN;
    const int b_n = bj / PIX, b_p = bj - b_n * PIX, b_oh = b_p / OW;
    const int ih0 = b_oh * SH - PH, iw0 = (b_p - b_oh * OW) * SW - PW;
    __global const ushort* const bp = BS + b_n * (CC * HWI);""",
    "data": """\
    const int b_col = tid % BN, b_row0 = tid / BN;
    const int bj = n0 + b_col, b_jok = bj < GN;
    const int b_n = bj / HWI, b_q = bj - b_n * HWI, b_ih = b_q / WW;
    const int th0 = b_ih + PH, tw0 = b_q - b_ih * WW + PW;
    __global const ushort* const bp = BS + b_n * (OC * PIX);""",
    "forward_chunk": """\
    const int b_cc = tid % CWB, b_row0 = tid / CWB;
    const int bj = n0 + b_cc * 8, b_jok = bj < GN;
    const int b_n = bj / PIX, b_p = bj - b_n * PIX, b_oh = b_p / OW;
    const int ih0 = b_oh * SH - PH, iw0 = (b_p - b_oh * OW) * SW - PW;
    __global const ushort* const bp = BS + b_n * (CC * HWI);""",
    "data_chunk": """\
    const int b_cc = tid % CWB, b_row0 = tid / CWB;
    const int bj = n0 + b_cc * 8, b_jok = bj < GN;
    const int b_n = bj / HWI, b_q = bj - b_n * HWI, b_ih = b_q / WW;
    const int th0 = b_ih + PH, tw0 = b_q - b_ih * WW + PW;
    __global const ushort* const bp = BS + b_n * (OC * PIX);""",
    "weight": """\
    const int b_row = tid % BK, b_col0 = tid / BK;
    int jc0, jkh0, jkw0;
    TAP_SPLIT(jc0, jkh0, jkw0, n0 + b_col0);""",
}

# Per k-tile: the window tap (channel, kh, kw) of this work-item's first B element, stepped
# from element to element by TAP_STEP (no divisions in the element loop).
_B_SETUP = {
    "forward": """\
        int bc, bkh, bkw;
        TAP_SPLIT(bc, bkh, bkw, k0 + b_row0);""",
    "data": """\
        int boc, bkh, bkw;
        TAP_SPLIT(boc, bkh, bkw, k0 + b_row0);""",
    "weight": """\
        const int bk_ = k0 + b_row, b_kok = bk_ < GK;
        const int b_n = bk_ / PIX, b_p = bk_ - b_n * PIX, b_oh = b_p / OW;
        const int ih0 = b_oh * SH - PH, iw0 = (b_p - b_oh * OW) * SW - PW;
        __global const ushort* const bp = BS + b_n * (CC * HWI);
        int bc = jc0, bkh = jkh0, bkw = jkw0;""",
}

# NOTE [ Chunked B gather ]
# Where eight consecutive GEMM columns (output pixels of ``forward``, input pixels of
# ``data``) always lie in one image row (the row width a multiple of 8), a work-item gathers
# a whole 16-byte chunk of the B tile: one window tap and one row test for eight elements,
# eight loads from one row pointer, one 16-byte local store.
_PACK = """\
            vb[e] = (uint4)((uint)h[0] | ((uint)h[1] << 16), (uint)h[2] | ((uint)h[3] << 16),
                            (uint)h[4] | ((uint)h[5] << 16), (uint)h[6] | ((uint)h[7] << 16));
"""

_B_ELEM = {
    "forward_chunk": """\
            const int ih = ih0 + bkh * DH, iwb = iw0 + bkw * DW;
            const int rok = b_jok && bc < CC && (uint)ih < (uint)HH;
            __global const ushort* const row = bp + (bc * HH + ih) * WW + iwb;
            ushort h[8];
            #pragma unroll
            for (int i = 0; i < 8; ++i) {
                h[i] = (rok && (uint)(iwb + i * SW) < (uint)WW) ? row[i * SW] : (ushort)0;
            }
""" + _PACK + """\
            TAP_STEP(bc, bkh, bkw, NT / CWB);
""",
    "data_chunk": """\
            const int th = th0 - bkh * DH, twb = tw0 - bkw * DW, oh = th / SH;
            const int rok = b_jok && boc < OC && th >= 0 && oh * SH == th && oh < OH;
            __global const ushort* const row = bp + (boc * OH + oh) * OW;
            ushort h[8];
            #pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int tw = twb + i, ow = tw / SW;
                h[i] = (rok && tw >= 0 && ow * SW == tw && ow < OW) ? row[ow] : (ushort)0;
            }
""" + _PACK + """\
            TAP_STEP(boc, bkh, bkw, NT / CWB);
""",
    "forward": """\
            const int ih = ih0 + bkh * DH, iw = iw0 + bkw * DW;
            vb[e] = (b_jok && bc < CC && (uint)ih < (uint)HH && (uint)iw < (uint)WW)
                ? bp[(bc * HH + ih) * WW + iw] : (ushort)0;
            TAP_STEP(bc, bkh, bkw, NT / BN);
""",
    "data": """\
            const int th = th0 - bkh * DH, tw = tw0 - bkw * DW;
            const int oh = th / SH, ow = tw / SW;
            vb[e] = (b_jok && boc < OC && th >= 0 && tw >= 0 && oh * SH == th && ow * SW == tw
                     && oh < OH && ow < OW) ? bp[(boc * OH + oh) * OW + ow] : (ushort)0;
            TAP_STEP(boc, bkh, bkw, NT / BN);
""",
    "weight": """\
            const int ih = ih0 + bkh * DH, iw = iw0 + bkw * DW;
            vb[e] = (b_kok && bc < CC && (uint)ih < (uint)HH && (uint)iw < (uint)WW)
                ? bp[(bc * HH + ih) * WW + iw] : (ushort)0;
            TAP_STEP(bc, bkh, bkw, NT / BK);
""",
}

# The output offset of GEMM column j (plus row * C_STRIDE).
_COL_BASE = {
    "forward": """\
            const int jn = j / PIX;
            const long cb = (long)jn * (OC * PIX) + (j - jn * PIX);""",
    "data": """\
            const int jn = j / HWI;
            const long cb = (long)jn * (CC * HWI) + (j - jn * HWI);""",
    "weight": """\
            const long cb = (long)get_group_id(1) * (GM * GN) + j;""",
}

_KERNEL = """\
__kernel __attribute__((reqd_work_group_size(NT, 1, 1)))
void KERNEL_NAME(__global const ushort* restrict AS, const long off_a,
                 __global const ushort* restrict BS, const long off_b,
                 __global const ushort* restrict bias, const long off_bias, const int has_bias,
                 __global OUT_T* restrict out, const long off_out, const int kt_per_split)
{
    __local uint4 sA[STAGES * A_CHUNKS];
    __local uint4 sB[STAGES * B_CHUNKS];
    EMU_LOCALS
    const int tid = (int)get_local_id(0), lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int tiles_m = (GM + BM - 1) / BM, pid = (int)get_group_id(0);
    const int m0 = (pid % tiles_m) * BM, n0 = (pid / tiles_m) * BN;
    const int kt_begin = (int)get_group_id(1) * kt_per_split;
    const int kt_end = min(kt_begin + kt_per_split, (GK + BK - 1) / BK);
    AS += off_a;
    BS += off_b;
    bias += off_bias;
    out += off_out;
    const uint sa0 = SHARED_ADDR(sA), sb0 = SHARED_ADDR(sB);
    __local ushort* const hA = (__local ushort*)sA;
    __local ushort* const hB = (__local ushort*)sB;
    const int a_col = tid % BK, a_row0 = tid / BK;
$b_init
    ushort va[A_PER];
    VB_DECL;
    float acc[MI][NI][4];
    #pragma unroll
    for (int mi = 0; mi < MI; ++mi) {
        #pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.0f;
        }
    }
    uint af[2][MI][4];
    uint bf[2][NI][2];
    if (kt_begin < kt_end) {
$load_first
$store_first
    }
    barrier(CLK_LOCAL_MEM_FENCE);
$frags_first
    for (int kt = kt_begin; kt < kt_end; ++kt) {
        const int st = (kt - kt_begin) & 1, more = kt + 1 < kt_end;
        #pragma unroll
        for (int ks = 0; ks < BK / 16; ++ks) {
            if (ks == 0 && more) {
$load_next
            }
            if (ks == BK / 16 - 1) {
                if (more) {
$store_next
                }
                barrier(CLK_LOCAL_MEM_FENCE);
            }
            const int nst = ks == BK / 16 - 1 ? st ^ 1 : st;
$frags_next
$mmas
        }
    }
    #pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
        #pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int j = n0 + wn * WN + ni * 8 + (lane & 3) * 2 + q;
$col_base
            #pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                #pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int m = m0 + wm * WM + mi * 16 + (lane >> 2) + h * 8;
                    if (j < GN && m < GM) {
                        const float v = acc[mi][ni][h * 2 + q] + ($bias);
                        STORE1(out + cb + (long)m * C_STRIDE, v);
                    }
                }
            }
        }
    }
}
"""

# The weight gradient's partial sums (float32, ``splits`` blocks of ``size``) added in order.
_WSUM = """\
__kernel void conv_mma_wsum(__global const float* restrict part, __global FIN_T* restrict out,
                            const long off_out, const int size, const int splits)
{
    const int i = (int)get_global_id(0);
    if (i < size) {
        float s = 0.0f;
        for (int t = 0; t < splits; ++t) {
            s += part[(long)t * size + i];
        }
        FSTORE1(out + off_out + i, s);
    }
}
"""
