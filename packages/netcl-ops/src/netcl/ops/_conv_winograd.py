"""Winograd F(2x2, 3x3) convolution on OpenCL (3x3 kernels, stride 1, dilation 1, one group).

Each 2x2 output tile comes from a 4x4 input tile: ``Y = A^T [ (G g G^T) * (B^T d B) ] A``. The
elementwise product summed over input channels is 16 independent GEMMs
``M[xi] = U[xi] (K x C) @ V[xi] (C x tiles)``, run as one batched launch of the GEMM family:
2.25x fewer multiplies than a direct 3x3 convolution. Three small kernels transform the
weights (``U``), the input tiles (``V``) and the products back (``Y``, plus bias); ``V`` and
``M`` live in pooled scratch buffers, filled a chunk of images at a time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netcl.core.kernel_selector import get_kernel_selector
from netcl.core.kernels.primitives import launch
from netcl.core.tensor import Tensor

from ._common import cl_kernel, launch_1d
from ._conv_geometry import ConvGeometry
from ._matmul import Operand, run_gemm

__all__ = ["conv2d_winograd"]

_SCRATCH_ELEMENTS = 1 << 25
_MAX_GRID_Z = 65535  # some drivers cap the grid's third dimension

_SRC = """
// U[xi][k][c] = (G g G^T)[xi] for the 3x3 filter g = w[k][c]
__kernel void winograd_weights(__global const T* w, __global T* U, const int K, const int C) {
    const int i = get_global_id(0);
    if (i >= K * C) return;
    const __global T* g = w + (long)i * 9;
    CT t[4][3], u[4][4];
    #pragma unroll
    for (int j = 0; j < 3; ++j) {
        const CT g0 = LD(g, j), g1 = LD(g, 3 + j), g2 = LD(g, 6 + j);
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
    for (int xi = 0; xi < 16; ++xi) ST(U, (long)xi * K * C + i, u[xi / 4][xi % 4]);
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


def conv2d_winograd(x: Tensor, weight: Tensor, bias: Tensor | None, g: ConvGeometry,
                    out: Tensor) -> None:
    """Write ``conv2d(x, weight, bias)`` into ``out`` with Winograd F(2x2, 3x3) (only where
    ``_conv_rule.winograd_applies``: the selector never picks it elsewhere)."""
    queue, dtype = x.queue, x.dtype
    th, tw = -(-g.oh // 2), -(-g.ow // 2)
    tiles = th * tw
    step = max(1, min(g.n, _SCRATCH_ELEMENTS // (16 * (g.c + g.k) * tiles),
                      _MAX_GRID_Z // max(g.c, g.k)))
    u = Tensor.from_shape(queue, (16 * g.k * g.c,), dtype, fill=None)
    v = Tensor.from_shape(queue, (16 * g.c * step * tiles,), dtype, fill=None)
    m = Tensor.from_shape(queue, (16 * g.k * step * tiles,), dtype, fill=None)
    wk = cl_kernel(x.context, "winograd_weights", _SRC, dtype)
    ik = cl_kernel(x.context, "winograd_input", _SRC, dtype)
    ok = cl_kernel(x.context, "winograd_output", _SRC, dtype)
    launch_1d(queue, wk, g.k * g.c, weight, u, np.int32(g.k), np.int32(g.c))
    x.wait()
    out.wait()
    b: Any = x.buffer if bias is None else bias
    for n0 in range(0, g.n, step):
        images = min(step, g.n - n0)
        count = images * tiles
        launch(queue, ik, (tw, th, images * g.c), None, x.buffer, v,
               np.int32(x.offset + n0 * g.c * g.h * g.w),
               *(np.int32(a) for a in (g.c, g.h, g.w, th, tw, *g.padding, count)))
        config = get_kernel_selector(queue.device).select_matmul_kernel(g.k, count, g.c, dtype)
        run_gemm(queue, config, dtype,
                 Operand(u.buffer, 0, g.c, g.k * g.c), Operand(v.buffer, 0, count, g.c * count),
                 Operand(m.buffer, 0, count, g.k * count), g.k, count, g.c, batch=(16, 1))
        launch(queue, ok, (tw, th, images * g.k), None, m, out.buffer, b,
               np.int32(out.offset + n0 * g.k * g.oh * g.ow),
               *(np.int32(a) for a in (g.k, g.oh, g.ow, th, tw, count, bias is not None)))
