"""OpenCL C sources of the convolution kernels (the GEMM-based ones reuse ``_matmul_kernels``).

Geometry (channels, sizes, stride, padding, dilation) goes in as scalar arguments, except in
the tiled-local kernel, which bakes the kernel window, stride and dilation in as ``#define``s
so its local-memory patch has a compile-time size.
"""

from __future__ import annotations

from fractions import Fraction

__all__ = [
    "COL2IM",
    "MAX_GRID_ROWS",
    "IM2COL",
    "IMPLICIT_B_LOADER",
    "IMPLICIT_PARAMS",
    "NAIVE",
    "SUM_BATCH",
    "TILED_LOCAL_KB",
    "TILED_LOCAL_TX",
    "TILED_LOCAL_TY",
    "WINOGRAD",
    "WINOGRAD_GROUP",
    "WINOGRAD_MATRICES",
    "tiled_local_bytes",
    "tiled_local_patch",
    "tiled_local_source",
    "winograd_source",
]

MAX_GRID_ROWS = 65535

# The tiled-local kernel's blocking: a work-group of TILED_LOCAL_TX x TILED_LOCAL_TY work-items
# computes that block of output pixels for TILED_LOCAL_KB output channels of one image.
TILED_LOCAL_TX = 16
TILED_LOCAL_TY = 8
TILED_LOCAL_KB = 4


def tiled_local_patch(r: int, s: int, sh: int, sw: int, dh: int, dw: int) -> tuple[int, int]:
    """(rows, columns) of the input patch one tiled-local work-group stages per channel."""
    return ((TILED_LOCAL_TY - 1) * sh + (r - 1) * dh + 1,
            (TILED_LOCAL_TX - 1) * sw + (s - 1) * dw + 1)


def tiled_local_bytes(r: int, s: int, sh: int, sw: int, dh: int, dw: int, width: int) -> int:
    """Local memory of one tiled-local work-group: the patch and the weights, ``width``-byte
    compute values."""
    ph, pw = tiled_local_patch(r, s, sh, sw, dh, dw)
    return width * (ph * pw + TILED_LOCAL_KB * r * s)

# One work-item per output element, a gather over the window: correct for every geometry.
NAIVE = """
__kernel void conv2d_naive(__global const T* x, __global const T* w, __global const T* bias,
                           __global T* y, const int total, const int C, const int H, const int W,
                           const int K, const int R, const int S, const int OH, const int OW,
                           const int SH, const int SW, const int PH, const int PW, const int DH,
                           const int DW, const int G, const int has_bias) {
    const int o = get_global_id(0);
    if (o >= total) return;
    const int ow = o % OW, oh = (o / OW) % OH, k = (o / (OW * OH)) % K, n = o / (OW * OH * K);
    const int cg = C / G, g = k / (K / G);
    CT acc = has_bias ? LD(bias, k) : (CT)0;
    for (int c = 0; c < cg; ++c) {
        const __global T* xp = x + ((long)n * C + g * cg + c) * H * W;
        const __global T* wp = w + ((long)k * cg + c) * R * S;
        for (int r = 0; r < R; ++r) {
            const int ih = oh * SH - PH + r * DH;
            if (ih < 0 || ih >= H) continue;
            for (int s = 0; s < S; ++s) {
                const int iw = ow * SW - PW + s * DW;
                if (iw >= 0 && iw < W) acc += LD(xp, ih * W + iw) * LD(wp, r * S + s);
            }
        }
    }
    ST(y, o, acc);
}
"""

# cols[n][c * R * S + r * S + s][oh * OW + ow] for the images of one chunk (x offset by offx):
# the B operand of the per-image GEMM W (K x C*R*S) @ cols (C*R*S x OH*OW). Launched over
# (OW, OH, rows): the divisions happen once per row, not per element (they dominate on CPUs),
# and consecutive work-items write consecutive columns. Rows go in blocks of at most
# MAX_GRID_ROWS launches (some drivers cap the grid's third dimension at 65535). Chunks keep the
# scratch (and so every index here) well below 2**31 elements.
IM2COL = """
__kernel void conv2d_im2col(__global const T* x, __global T* cols, const int offx,
                            const int row0, const int C, const int H, const int W, const int R,
                            const int S, const int OH, const int OW, const int SH, const int SW,
                            const int PH, const int PW, const int DH, const int DW) {
    const int ow = get_global_id(0), oh = get_global_id(1), row = row0 + get_global_id(2);
    const int RS = R * S, n = row / (C * RS), crs = row - n * (C * RS);
    const int c = crs / RS, rs = crs - c * RS, r = rs / S, s = rs - r * S;
    const int ih = oh * SH - PH + r * DH, iw = ow * SW - PW + s * DW;
    const __global T* xp = x + offx + ((long)n * C + c) * H * W;
    ST(cols, (long)row * OH * OW + oh * OW + ow,
       (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LD(xp, ih * W + iw) : (CT)0);
}
"""

# dx[n][c][ih][iw] = sum over (r, s) that land on an output pixel of dcols[n][c*RS + r*S + s][p]:
# the scatter of col2im turned into a gather, so no atomics. Launched over (W, H, images *
# channels) like im2col.
COL2IM = """
__kernel void conv2d_col2im(__global const T* dcols, __global T* dx, const int offdx,
                            const int row0, const int C, const int H, const int W, const int R,
                            const int S, const int OH, const int OW, const int SH, const int SW,
                            const int PH, const int PW, const int DH, const int DW) {
    const int iw = get_global_id(0), ih = get_global_id(1), nc = row0 + get_global_id(2);
    const int P = OH * OW;
    const __global T* dc = dcols + (long)nc * R * S * P;
    CT acc = 0;
    for (int r = 0; r < R; ++r) {
        const int th = ih + PH - r * DH;
        if (th < 0 || th % SH) continue;
        const int oh = th / SH;
        if (oh >= OH) continue;
        for (int s = 0; s < S; ++s) {
            const int tw = iw + PW - s * DW;
            if (tw < 0 || tw % SW) continue;
            const int ow = tw / SW;
            if (ow < OW) acc += LD(dc, (long)(r * S + s) * P + oh * OW + ow);
        }
    }
    ST(dx, (long)offdx + ((long)nc * H + ih) * W + iw, acc);
}
"""

# out[i] = (accumulate ? out[i] : 0) + sum over b < nb of parts[b * size + i]
SUM_BATCH = """
__kernel void conv2d_sum_batch(__global const T* parts, __global T* out, const int size,
                               const int nb, const int accumulate) {
    const int i = get_global_id(0);
    if (i >= size) return;
    CT acc = accumulate ? LD(out, i) : (CT)0;
    for (int b = 0; b < nb; ++b) acc += LD(parts, (long)b * size + i);
    ST(out, i, acc);
}
"""

# The implicit GEMM: B(k, p) of image n, group g is read straight from the input.
IMPLICIT_PARAMS = (
    "const int H, const int W, const int OW, const int R, const int S, const int SH, "
    "const int SW, const int PH, const int PW, const int DH, const int DW"
)

IMPLICIT_B_LOADER = """
CT conv2d_input_at(const __global T* x, const int k, const int p, const int H, const int W,
                   const int OW, const int R, const int S, const int SH, const int SW,
                   const int PH, const int PW, const int DH, const int DW) {
    const int RS = R * S, c = k / RS, rs = k - c * RS, r = rs / S, s = rs - r * S;
    const int oh = p / OW, ow = p - oh * OW;
    const int ih = oh * SH - PH + r * DH, iw = ow * SW - PW + s * DW;
    return (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LD(x, (c * H + ih) * W + iw) : (CT)0;
}
#define B_AT(k, n) conv2d_input_at(B, (k), (n), H, W, OW, R, S, SH, SW, PH, PW, DH, DW)
"""


# Winograd F(2x2, 3x3) (see ``_conv_winograd``): the weight, input and output transforms.
WINOGRAD = """
// U[xi][k][c] = (G g G^T)[xi] for the 3x3 filter g at i = k * C + c (rotated by 180 degrees
// when flip: the data gradient's filters)
void winograd_filter(const __global T* g, const int flip, __global T* U, const long i,
                     const long KC) {
    CT t[4][3], u[4][4];
    #pragma unroll
    for (int j = 0; j < 3; ++j) {
        const CT g0 = LD(g, flip ? 8 - j : j), g1 = LD(g, flip ? 5 - j : 3 + j);
        const CT g2 = LD(g, flip ? 2 - j : 6 + j);
        t[0][j] = g0;
        t[1][j] = (CT)0.5 * (g0 + g1 + g2);
        t[2][j] = (CT)0.5 * (g0 - g1 + g2);
        t[3][j] = g2;
    }
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
        u[r][0] = t[r][0];
        u[r][1] = (CT)0.5 * (t[r][0] + t[r][1] + t[r][2]);
        u[r][2] = (CT)0.5 * (t[r][0] - t[r][1] + t[r][2]);
        u[r][3] = t[r][2];
    }
    #pragma unroll
    for (int xi = 0; xi < 16; ++xi) ST(U, xi * KC + i, u[xi / 4][xi % 4]);
}

// the forward's filters: g = w[k][c]
__kernel void winograd_weights(__global const T* w, __global T* U, const int K, const int C) {
    const int i = get_global_id(0);
    if (i >= K * C) return;
    winograd_filter(w + (long)i * 9, 0, U, i, (long)K * C);
}

// the data gradient's (a convolution of grad_out, K here the forward's input channels and C
// its output channels): g = w[c][k] rotated by 180 degrees
__kernel void winograd_weights_flipped(__global const T* w, __global T* U, const int K,
                                       const int C) {
    const int i = get_global_id(0);
    if (i >= K * C) return;
    const int k = i / C, c = i - k * C;
    winograd_filter(w + ((long)c * K + k) * 9, 1, U, i, (long)K * C);
}

// V[xi][c][t] = (B^T d B)[xi] for the 4x4 input tile d of tile t = (image, tile row, tile
// column); launched over (TW, TH, images * C) so no work-item divides more than once
__kernel void winograd_input(__global const T* x, __global T* V, const int offx, const int C,
                             const int H, const int W, const int TH, const int TW,
                             const int PH, const int PW, const int ntiles) {
    const int tw = get_global_id(0), th = get_global_id(1), z = get_global_id(2);
    const int n = z / C, c = z - n * C;
    const int i = c * ntiles + (n * TH + th) * TW + tw;
    const __global T* xp = x + offx + (long)z * H * W;
    const int h0 = 2 * th - PH, w0 = 2 * tw - PW;
    CT d[4][4], b[4][4];
    #pragma unroll
    for (int r = 0; r < 4; ++r)
        #pragma unroll
        for (int s = 0; s < 4; ++s) {
            const int ih = h0 + r, iw = w0 + s;
            d[r][s] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LD(xp, ih * W + iw) : (CT)0;
        }
    #pragma unroll
    for (int s = 0; s < 4; ++s) {
        b[0][s] = d[0][s] - d[2][s];
        b[1][s] = d[1][s] + d[2][s];
        b[2][s] = d[2][s] - d[1][s];
        b[3][s] = d[1][s] - d[3][s];
    }
    const long plane = (long)C * ntiles;
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
        ST(V, (4 * r + 0) * plane + i, b[r][0] - b[r][2]);
        ST(V, (4 * r + 1) * plane + i, b[r][1] + b[r][2]);
        ST(V, (4 * r + 2) * plane + i, b[r][2] - b[r][1]);
        ST(V, (4 * r + 3) * plane + i, b[r][1] - b[r][3]);
    }
}

// The weight gradient (conv2d_winograd_weight): Z[xi][k][t] = (A dY A^T)[xi] for the 2x2
// tile dY of grad_out at tile t (zero past the output); launched over (TW, TH, images * K)
__kernel void winograd_grad(__global const T* gy, __global T* Z, const int offgy, const int K,
                            const int OH, const int OW, const int TH, const int TW,
                            const int ntiles) {
    const int tw = get_global_id(0), th = get_global_id(1), z = get_global_id(2);
    const int n = z / K, k = z - n * K;
    const int i = k * ntiles + (n * TH + th) * TW + tw;
    const __global T* gp = gy + offgy + (long)z * OH * OW;
    const int oh = 2 * th, ow = 2 * tw;
    CT d[2][2], e[4][2];
    #pragma unroll
    for (int r = 0; r < 2; ++r)
        #pragma unroll
        for (int s = 0; s < 2; ++s)
            d[r][s] = (oh + r < OH && ow + s < OW) ? LD(gp, (oh + r) * OW + ow + s) : (CT)0;
    #pragma unroll
    for (int s = 0; s < 2; ++s) {
        e[0][s] = d[0][s];
        e[1][s] = d[0][s] + d[1][s];
        e[2][s] = d[0][s] - d[1][s];
        e[3][s] = -d[1][s];
    }
    const long plane = (long)K * ntiles;
    #pragma unroll
    for (int r = 0; r < 4; ++r) {
        ST(Z, (4 * r + 0) * plane + i, e[r][0]);
        ST(Z, (4 * r + 1) * plane + i, e[r][0] + e[r][1]);
        ST(Z, (4 * r + 2) * plane + i, e[r][0] - e[r][1]);
        ST(Z, (4 * r + 3) * plane + i, -e[r][1]);
    }
}

// dw[k][c] (+)= G^T M[.][k][c] G, the 3x3 gradient of filter (k, c) from its 4x4 product sums
// M[xi][k][c] (one chunk of images; accumulate adds the chunk to the earlier ones)
__kernel void winograd_weight_grad(__global const T* M, __global T* dw, const int K,
                                   const int C, const int accumulate) {
    const int i = get_global_id(0);
    if (i >= K * C) return;
    const long plane = (long)K * C;
    CT m[4][4], t[3][4];
    #pragma unroll
    for (int xi = 0; xi < 16; ++xi) m[xi / 4][xi % 4] = LD(M, xi * plane + i);
    #pragma unroll
    for (int s = 0; s < 4; ++s) {
        t[0][s] = m[0][s] + (CT)0.5 * (m[1][s] + m[2][s]);
        t[1][s] = (CT)0.5 * (m[1][s] - m[2][s]);
        t[2][s] = (CT)0.5 * (m[1][s] + m[2][s]) + m[3][s];
    }
    __global T* dp = dw + (long)i * 9;
    #pragma unroll
    for (int r = 0; r < 3; ++r) {
        const CT v0 = t[r][0] + (CT)0.5 * (t[r][1] + t[r][2]);
        const CT v1 = (CT)0.5 * (t[r][1] - t[r][2]);
        const CT v2 = (CT)0.5 * (t[r][1] + t[r][2]) + t[r][3];
        ST(dp, 3 * r, v0 + (accumulate ? LD(dp, 3 * r) : (CT)0));
        ST(dp, 3 * r + 1, v1 + (accumulate ? LD(dp, 3 * r + 1) : (CT)0));
        ST(dp, 3 * r + 2, v2 + (accumulate ? LD(dp, 3 * r + 2) : (CT)0));
    }
}

// y[n][k][2 th + a][2 tw + b] = (A^T m A)[a][b] (+ bias[k]) for m[xi] = M[xi][k][t];
// launched over (TW, TH, images * K)
__kernel void winograd_output(__global const T* M, __global T* y, __global const T* bias,
                              const int offy, const int K, const int OH, const int OW,
                              const int TH, const int TW, const int ntiles,
                              const int has_bias) {
    const int tw = get_global_id(0), th = get_global_id(1), z = get_global_id(2);
    const int n = z / K, k = z - n * K;
    const int i = k * ntiles + (n * TH + th) * TW + tw;
    const long plane = (long)K * ntiles;
    CT m[4][4], a[2][4];
    #pragma unroll
    for (int xi = 0; xi < 16; ++xi) m[xi / 4][xi % 4] = LD(M, xi * plane + i);
    #pragma unroll
    for (int s = 0; s < 4; ++s) {
        a[0][s] = m[0][s] + m[1][s] + m[2][s];
        a[1][s] = m[1][s] - m[2][s] - m[3][s];
    }
    const CT b = has_bias ? LD(bias, k) : (CT)0;
    __global T* yp = y + offy + (long)z * OH * OW;
    #pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int oh = 2 * th + r;
        if (oh >= OH) continue;
        const CT y0 = a[r][0] + a[r][1] + a[r][2], y1 = a[r][1] - a[r][2] - a[r][3];
        const int ow = 2 * tw;
        if (ow < OW) ST(yp, oh * OW + ow, y0 + b);
        if (ow + 1 < OW) ST(yp, oh * OW + ow + 1, y1 + b);
    }
}
"""

Matrix = tuple[tuple[Fraction, ...], ...]

WINOGRAD_GROUP = 128  # work-items per group of winograd_source's tile transforms


def _matrix(rows: list[list[int | str]]) -> Matrix:
    return tuple(tuple(Fraction(v) for v in row) for row in rows)


# Lavin and Gray's transforms of F(m x m, 3x3) (interpolation points 0, +-1, +-2, infinity for
# m = 4): Y = A^T [ (G g G^T) * (B^T d B) ] A, by tile size m -> (B^T, G, A^T).
WINOGRAD_MATRICES: dict[int, tuple[Matrix, Matrix, Matrix]] = {
    2: (_matrix([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
        _matrix([[1, 0, 0], ["1/2", "1/2", "1/2"], ["1/2", "-1/2", "1/2"], [0, 0, 1]]),
        _matrix([[1, 1, 1, 0], [0, 1, -1, -1]])),
    4: (_matrix([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                 [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]),
        _matrix([["1/4", 0, 0], ["-1/6", "-1/6", "-1/6"], ["-1/6", "1/6", "-1/6"],
                 ["1/24", "1/12", "1/6"], ["1/24", "-1/12", "1/6"], [0, 0, 1]]),
        _matrix([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                 [0, 1, -1, 8, -8, 1]])),
}


def _combination(row: tuple[Fraction, ...], terms: list[str]) -> str:
    """``sum_j row[j] * terms[j]`` as OpenCL C, zero terms left out, fractions folded in the
    compute type (``(CT)1 / (CT)6``)."""
    out = []
    for c, t in zip(row, terms, strict=True):
        if c == 0:
            continue
        sign = "-" if c < 0 else "+"
        c = abs(c)
        if c == 1:
            factor = t
        elif c.denominator == 1:
            factor = f"(CT){c.numerator} * {t}"
        else:
            factor = f"((CT){c.numerator} / (CT){c.denominator}) * {t}"
        out.append(f"{sign} {factor}")
    if not out:
        return "(CT)0"
    text = " ".join(out)
    return text[2:] if text.startswith("+ ") else "-" + text[2:]


def _left(mat: Matrix, src: str, dst: str, cols: int) -> list[str]:
    """``dst = mat @ src`` (``src`` has ``len(mat[0])`` rows and ``cols`` columns)."""
    inner = len(mat[0])
    return [f"{dst}[{i}][{j}] = {_combination(row, [f'{src}[{k}][{j}]' for k in range(inner)])};"
            for i, row in enumerate(mat) for j in range(cols)]


def _right(mat: Matrix, src: str, rows: int) -> list[tuple[int, int, str]]:
    """``src @ mat^T`` as ``(row, column, expression)``."""
    inner = len(mat[0])
    return [(i, j, _combination(row, [f"{src}[{i}][{k}]" for k in range(inner)]))
            for i in range(rows) for j, row in enumerate(mat)]


def _transpose(mat: Matrix) -> Matrix:
    return tuple(zip(*mat, strict=True))


def winograd_source(m: int) -> str:
    """The weight, input and output transforms of Winograd F(m x m, 3x3) (``_conv_winograd``),
    straight-line code from :data:`WINOGRAD_MATRICES`: each work-item one filter or one tile of
    one channel, in registers. The kernels have the names and arguments of :data:`WINOGRAD`'s
    (F(2x2), written out by hand); the tiles hold ``(m + 2)**2`` values. All kernels are 1-D,
    one work-item per filter or per tile of every channel (:data:`WINOGRAD_GROUP`-item groups,
    where :data:`WINOGRAD`'s input, output and gradient transforms are launched over
    ``(TW, TH, planes)``: 4x4 tiles leave planes of 2x2 tiles on 7x7).

    Examples:
        >>> src = winograd_source(4)
        >>> "CT d[6][6]" in src, src.count("__kernel")
        (True, 6)
    """
    bt, g, at = WINOGRAD_MATRICES[m]
    a = m + 2
    # (channel c, image n, tile row th, tile column tw) of work-item i; i is also the index of
    # the tile's values in each plane of V, Z or M
    tile_of = ("const int c = i / ntiles, q = i - c * ntiles, n = q / (TH * TW);\n"
               "    const int tr = q - n * (TH * TW), th = tr / TW, tw = tr - th * TW;")
    ind = "\n    "

    def body(lines: list[str]) -> str:
        return ind.join(lines)

    u = _right(g, "t", a)
    store_u = [f"ST(U, {a * i + j} * KC + i, {e});" for i, j, e in u]
    v = _right(bt, "b", a)
    store_v = [f"ST(V, {a * i + j} * plane + i, {e});" for i, j, e in v]
    z = _right(_transpose(at), "e", a)
    store_z = [f"ST(Z, {a * i + j} * plane + i, {e});" for i, j, e in z]
    dw = _right(_transpose(g), "t", 3)
    store_dw = [f"ST(dp, {3 * i + j}, {e} + (accumulate ? LD(dp, {3 * i + j}) : (CT)0));"
                for i, j, e in dw]
    y = _right(at, "t", m)
    store_y = []
    for i in range(m):
        row = [f"if (oh + {i} < OH) {{"]
        for j in range(m):
            e = next(e for r, c, e in y if (r, c) == (i, j))
            row.append(f"    if (ow + {j} < OW) ST(yp, (oh + {i}) * OW + ow + {j}, {e} + b);")
        store_y += [*row, "}"]
    return f"""
// Winograd F({m}x{m}, 3x3), generated from its transform matrices (_conv_kernels.winograd_source)
// U[xi][k][c] = (G g G^T)[xi] for the 3x3 filter g at i = k * C + c (rotated by 180 degrees
// when flip: the data gradient's filters)
void winograd_filter(const __global T* w, const int flip, __global T* U, const long i,
                     const long KC) {{
    CT g[3][3], t[{a}][3];
    #pragma unroll
    for (int j = 0; j < 9; ++j) g[j / 3][j % 3] = LD(w, flip ? 8 - j : j);
    {body(_left(g, "g", "t", 3))}
    {body(store_u)}
}}

// the forward's filters: g = w[k][c]
__kernel void winograd_weights(__global const T* w, __global T* U, const int K, const int C) {{
    const int i = get_global_id(0);
    if (i >= K * C) return;
    winograd_filter(w + (long)i * 9, 0, U, i, (long)K * C);
}}

// the data gradient's (a convolution of grad_out, K here the forward's input channels and C
// its output channels): g = w[c][k] rotated by 180 degrees
__kernel void winograd_weights_flipped(__global const T* w, __global T* U, const int K,
                                       const int C) {{
    const int i = get_global_id(0);
    if (i >= K * C) return;
    const int k = i / C, c = i - k * C;
    winograd_filter(w + ((long)c * K + k) * 9, 1, U, i, (long)K * C);
}}

// The tile transforms are 1-D, one work-item per tile of every channel (small planes have few
// tiles: 2x2 on 7x7): work-item i = c * ntiles + t, also the index of the tile's values in each
// plane of V, Z and M.

// V[xi][c][t] = (B^T d B)[xi] for the {a}x{a} input tile d of tile t = (image, tile row, tile
// column), zero outside the input
__kernel void winograd_input(__global const T* x, __global T* V, const int offx, const int C,
                             const int H, const int W, const int TH, const int TW,
                             const int PH, const int PW, const int ntiles) {{
    const int i = get_global_id(0);
    if (i >= C * ntiles) return;
    {tile_of}
    const __global T* xp = x + offx + ((long)n * C + c) * H * W;
    const int h0 = {m} * th - PH, w0 = {m} * tw - PW;
    CT d[{a}][{a}], b[{a}][{a}];
    #pragma unroll
    for (int r = 0; r < {a}; ++r) {{
        const int ih = h0 + r;
        const bool row = ih >= 0 && ih < H;
        #pragma unroll
        for (int s = 0; s < {a}; ++s) {{
            const int iw = w0 + s;
            d[r][s] = (row && iw >= 0 && iw < W) ? LD(xp, ih * W + iw) : (CT)0;
        }}
    }}
    {body(_left(bt, "d", "b", a))}
    const long plane = (long)C * ntiles;
    {body(store_v)}
}}

// The weight gradient (conv2d_winograd_weight): Z[xi][k][t] = (A dY A^T)[xi] for the {m}x{m}
// tile dY of grad_out at tile t (zero past the output), k = c here
__kernel void winograd_grad(__global const T* gy, __global T* Z, const int offgy, const int K,
                            const int OH, const int OW, const int TH, const int TW,
                            const int ntiles) {{
    const int i = get_global_id(0);
    if (i >= K * ntiles) return;
    {tile_of}
    const __global T* gp = gy + offgy + ((long)n * K + c) * OH * OW;
    const int oh = {m} * th, ow = {m} * tw;
    CT d[{m}][{m}], e[{a}][{m}];
    #pragma unroll
    for (int r = 0; r < {m}; ++r)
        #pragma unroll
        for (int s = 0; s < {m}; ++s)
            d[r][s] = (oh + r < OH && ow + s < OW) ? LD(gp, (oh + r) * OW + ow + s) : (CT)0;
    {body(_left(_transpose(at), "d", "e", m))}
    const long plane = (long)K * ntiles;
    {body(store_z)}
}}

// dw[k][c] (+)= G^T M[.][k][c] G, the 3x3 gradient of filter (k, c) from its {a}x{a} product
// sums M[xi][k][c] (one chunk of images; accumulate adds the chunk to the earlier ones)
__kernel void winograd_weight_grad(__global const T* M, __global T* dw, const int K,
                                   const int C, const int accumulate) {{
    const int i = get_global_id(0);
    if (i >= K * C) return;
    const long plane = (long)K * C;
    CT mm[{a}][{a}], t[3][{a}];
    #pragma unroll
    for (int xi = 0; xi < {a * a}; ++xi) mm[xi / {a}][xi % {a}] = LD(M, xi * plane + i);
    {body(_left(_transpose(g), "mm", "t", a))}
    __global T* dp = dw + (long)i * 9;
    {body(store_dw)}
}}

// y[n][k][{m} th + a][{m} tw + b] = (A^T m A)[a][b] (+ bias[k]) for m[xi] = M[xi][k][t], the
// writes past the output left out (k = c here)
__kernel void winograd_output(__global const T* M, __global T* y, __global const T* bias,
                              const int offy, const int K, const int OH, const int OW,
                              const int TH, const int TW, const int ntiles,
                              const int has_bias) {{
    const int i = get_global_id(0);
    if (i >= K * ntiles) return;
    {tile_of}
    const long plane = (long)K * ntiles;
    CT mm[{a}][{a}], t[{m}][{a}];
    #pragma unroll
    for (int xi = 0; xi < {a * a}; ++xi) mm[xi / {a}][xi % {a}] = LD(M, xi * plane + i);
    {body(_left(at, "mm", "t", a))}
    const CT b = has_bias ? LD(bias, c) : (CT)0;
    __global T* yp = y + offy + ((long)n * K + c) * OH * OW;
    const int oh = {m} * th, ow = {m} * tw;
    {body(store_y)}
}}
"""


def tiled_local_source(r: int, s: int, sh: int, sw: int, dh: int, dw: int) -> str:
    """Direct convolution over an input patch in local memory.

    A work-group of TX x TY work-items computes a TX x TY block of output pixels for KB output
    channels of one image; per input channel it stages the input patch the block reads and the
    KB x R x S weights in local memory.
    """
    tx, ty, kb = TILED_LOCAL_TX, TILED_LOCAL_TY, TILED_LOCAL_KB
    ph_, pw_ = tiled_local_patch(r, s, sh, sw, dh, dw)
    return f"""
#define R {r}
#define S {s}
#define SH {sh}
#define SW {sw}
#define DH {dh}
#define DW {dw}
#define TX {tx}
#define TY {ty}
#define KB {kb}
#define PATCH_H {ph_}
#define PATCH_W {pw_}
__kernel __attribute__((reqd_work_group_size(TX, TY, 1)))
void conv2d_tiled_local(__global const T* x, __global const T* w, __global const T* bias,
                        __global T* y, const int C, const int H, const int W, const int K,
                        const int OH, const int OW, const int PH, const int PW, const int G,
                        const int has_bias) {{
    __local CT patch[PATCH_H * PATCH_W];
    __local CT wt[KB * R * S];
    const int lx = get_local_id(0), ly = get_local_id(1), lid = ly * TX + lx;
    const int ow = get_global_id(0), oh = get_global_id(1);
    const int kg = K / G, cg = C / G, kblocks = (kg + KB - 1) / KB;
    const int z = get_global_id(2);
    const int n = z / (G * kblocks), g = (z / kblocks) % G, k0 = g * kg + (z % kblocks) * KB;
    const int ih0 = get_group_id(1) * TY * SH - PH, iw0 = get_group_id(0) * TX * SW - PW;
    CT acc[KB];
    #pragma unroll
    for (int q = 0; q < KB; ++q) acc[q] = 0;
    for (int c = 0; c < cg; ++c) {{
        const __global T* xp = x + ((long)n * C + g * cg + c) * H * W;
        for (int l = lid; l < PATCH_H * PATCH_W; l += TX * TY) {{
            const int py = l / PATCH_W, px = l - py * PATCH_W;
            const int ih = ih0 + py, iw = iw0 + px;
            patch[l] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? LD(xp, ih * W + iw) : (CT)0;
        }}
        for (int l = lid; l < KB * R * S; l += TX * TY) {{
            const int q = l / (R * S), rs = l - q * (R * S);
            const int k = k0 + q;
            wt[l] = (k < (g + 1) * kg) ? LD(w, ((long)k * cg + c) * R * S + rs) : (CT)0;
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
        #pragma unroll
        for (int r = 0; r < R; ++r)
            #pragma unroll
            for (int s = 0; s < S; ++s) {{
                const CT v = patch[(ly * SH + r * DH) * PATCH_W + lx * SW + s * DW];
                #pragma unroll
                for (int q = 0; q < KB; ++q) acc[q] += v * wt[(q * R + r) * S + s];
            }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    if (oh >= OH || ow >= OW) return;
    #pragma unroll
    for (int q = 0; q < KB; ++q) {{
        const int k = k0 + q;
        if (k < (g + 1) * kg)
            ST(y, (((long)n * K + k) * OH + oh) * OW + ow, acc[q] + (has_bias ? LD(bias, k) : 0));
    }}
}}
"""
