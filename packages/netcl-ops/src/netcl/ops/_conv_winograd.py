"""Winograd F(2x2, 3x3) convolution on OpenCL (3x3 kernels, stride 1, dilation 1, one group).

Each 2x2 output tile comes from a 4x4 input tile: ``Y = A^T [ (G g G^T) * (B^T d B) ] A``. The
elementwise product summed over input channels is 16 independent GEMMs
``M[xi] = U[xi] (K x C) @ V[xi] (C x tiles)``, run as one batched launch of the GEMM family:
2.25x fewer multiplies than a direct 3x3 convolution. Three small kernels transform the
weights (``U``), the input tiles (``V``) and the products back (``Y``, plus bias); ``V`` and
``M`` live in pooled scratch buffers, filled a chunk of images at a time. The transforms'
program is ``conv2d_family``'s ``winograd`` kind (source in ``_conv_kernels``).

The data gradient is the same convolution of ``grad_out`` with the transposed, rotated filters
(:func:`data_geometry`). The weight gradient, :func:`conv2d_winograd_weight`, runs the forward
backwards: ``dU = sum over tiles of (A dY A^T) * V``, 16 GEMMs ``(K x tiles) @ (tiles x C)``,
then ``dg = G^T dU G`` per filter, a chunk of images at a time added in a fixed order.
NOTE [ Split Winograd weight gradient ] says how those GEMMs fill the device.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from netcl.core.kernel_selector import KernelConfig
from netcl.core.kernels.primitives import launch
from netcl.core.tensor import Tensor

from ._conv_family import conv2d_family
from ._conv_geometry import ConvGeometry
from ._matmul_family import SPLIT_K_SUM, gemm_family
from ._matmul_launch import Operand, run_gemm, select_gemm
from ._matmul_params import GemmParams

__all__ = ["conv2d_winograd", "conv2d_winograd_weight", "data_geometry"]

_SCRATCH_ELEMENTS = 1 << 25
_MAX_GRID_Z = 65535  # some drivers cap the grid's third dimension
_MIN_SLICE = 256  # tiles per slice of a split weight-gradient reduction
_SPLIT_PER_UNIT = 2  # work-groups per compute unit a split aims for

# NOTE [ Split Winograd weight gradient ]
# The weight gradient's 16 GEMMs are (K x tiles) @ (tiles x C): few output tiles (one 128 x 128
# tile per GEMM at 128 channels: 16 work-groups for an H100's 132 compute units) and a long
# reduction over every 2x2 tile of a chunk of images. So the reduction is cut into S slices of
# at least _MIN_SLICE tiles, S chosen to give every compute unit _SPLIT_PER_UNIT work-groups:
# one batched launch writes the S partial products of every GEMM into a workspace, the GEMM
# family's split-K kernel adds them in slice order (deterministic) into M.



def conv2d_winograd(x: Tensor, weight: Tensor, bias: Tensor | None, g: ConvGeometry,
                    out: Tensor, flipped: bool = False) -> None:
    """Write ``conv2d(x, weight, bias)`` into ``out`` with Winograd F(2x2, 3x3) (only where
    ``_conv_rule.winograd_applies``: the selector never picks it elsewhere).

    ``flipped``: ``weight`` is ``(g.c, g.k, 3, 3)`` and the filters are its transposed and
    rotated ones (the data gradient as a convolution of ``grad_out``, :func:`data_geometry`).
    """
    queue, dtype = x.queue, x.dtype
    th, tw = -(-g.oh // 2), -(-g.ow // 2)
    tiles = th * tw
    step = max(1, min(g.n, _SCRATCH_ELEMENTS // (16 * (g.c + g.k) * tiles),
                      _MAX_GRID_Z // max(g.c, g.k)))
    u = Tensor.from_shape(queue, (16 * g.k * g.c,), dtype, fill=None)
    v = Tensor.from_shape(queue, (16 * g.c * step * tiles,), dtype, fill=None)
    m = Tensor.from_shape(queue, (16 * g.k * step * tiles,), dtype, fill=None)
    built = conv2d_family(x.context, "winograd", dtype)
    ik, ok = built.kernels["winograd_input"], built.kernels["winograd_output"]
    built.launch(queue, g.k * g.c, weight, u, np.int32(g.k), np.int32(g.c),
                 kernel="winograd_weights_flipped" if flipped else "winograd_weights")
    x.wait()
    out.wait()
    b: Any = x.buffer if bias is None else bias
    for n0 in range(0, g.n, step):
        images = min(step, g.n - n0)
        count = images * tiles
        launch(queue, ik, (tw, th, images * g.c), None, x.buffer, v,
               np.int32(x.offset + n0 * g.c * g.h * g.w),
               *(np.int32(a) for a in (g.c, g.h, g.w, th, tw, *g.padding, count)))
        config = select_gemm(queue.device, g.k, count, g.c, dtype, 16)
        run_gemm(queue, config, dtype,
                 Operand(u.buffer, 0, g.c, g.k * g.c), Operand(v.buffer, 0, count, g.c * count),
                 Operand(m.buffer, 0, count, g.k * count), g.k, count, g.c, batch=(16, 1))
        launch(queue, ok, (tw, th, images * g.k), None, m, out.buffer, b,
               np.int32(out.offset + n0 * g.k * g.oh * g.ow),
               *(np.int32(a) for a in (g.k, g.oh, g.ow, th, tw, count, bias is not None)))


def data_geometry(g: ConvGeometry) -> ConvGeometry:
    """The data gradient of a stride-1, one-group convolution ``g`` as a convolution of
    ``grad_out`` (``g.k`` channels, ``OH x OW``) with the transposed, rotated filters and
    padding ``R - 1 - P``, giving the ``g.c`` channels of ``H x W``.

    Examples:
        >>> from netcl.ops._conv_geometry import conv_geometry
        >>> d = data_geometry(conv_geometry("x", (2, 3, 8, 8), (5, 3, 3, 3), padding=1))
        >>> (d.c, d.k, d.h, d.oh, d.padding)
        (5, 3, 8, 8, (1, 1))
    """
    return dataclasses.replace(g, c=g.k, k=g.c, cg=g.k, h=g.oh, w=g.ow, oh=g.h, ow=g.w,
                               padding=(g.r - 1 - g.padding[0], g.s - 1 - g.padding[1]))


def conv2d_winograd_weight(x: Tensor, grad_out: Tensor, g: ConvGeometry, dw: Tensor) -> None:
    """Write the weight gradient of a Winograd geometry into ``dw`` (at offset 0)."""
    queue, dtype = x.queue, x.dtype
    th, tw = -(-g.oh // 2), -(-g.ow // 2)
    tiles = th * tw
    step = max(1, min(g.n, _SCRATCH_ELEMENTS // (16 * (g.c + g.k) * tiles),
                      _MAX_GRID_Z // max(g.c, g.k)))
    v = Tensor.from_shape(queue, (16 * g.c * step * tiles,), dtype, fill=None)
    z = Tensor.from_shape(queue, (16 * g.k * step * tiles,), dtype, fill=None)
    m = Tensor.from_shape(queue, (16 * g.k * g.c,), dtype, fill=None)
    built = conv2d_family(x.context, "winograd", dtype)
    ik, gk = built.kernels["winograd_input"], built.kernels["winograd_grad"]
    x.wait()
    grad_out.wait()
    for n0 in range(0, g.n, step):
        images = min(step, g.n - n0)
        count = images * tiles
        launch(queue, ik, (tw, th, images * g.c), None, x.buffer, v,
               np.int32(x.offset + n0 * g.c * g.h * g.w),
               *(np.int32(a) for a in (g.c, g.h, g.w, th, tw, *g.padding, count)))
        launch(queue, gk, (tw, th, images * g.k), None, grad_out.buffer, z,
               np.int32(grad_out.offset + n0 * g.k * g.oh * g.ow),
               *(np.int32(a) for a in (g.k, g.oh, g.ow, th, tw, count)))
        config = select_gemm(queue.device, g.k, g.c, count, dtype, 16)
        _weight_gemms(queue, config, dtype, z, v, m, g.k, g.c, count)
        built.launch(queue, g.k * g.c, m, dw, np.int32(g.k), np.int32(g.c), np.int32(n0 > 0),
                     kernel="winograd_weight_grad")


def weight_split(gemm_tiles: int, count: int, compute_units: int) -> int:
    """The slices of a Winograd weight gradient's reduction over ``count`` tiles whose 16
    GEMMs have ``gemm_tiles`` output tiles in all (NOTE [ Split Winograd weight gradient ]).

    Examples:
        >>> weight_split(16, 25088, 132), weight_split(256, 25088, 132), weight_split(16, 300, 132)
        (17, 2, 1)
    """
    want = -(-_SPLIT_PER_UNIT * compute_units // max(1, gemm_tiles))
    return max(1, min(want, count // _MIN_SLICE))


def _weight_gemms(queue: Any, config: KernelConfig, dtype: str, z: Tensor, v: Tensor,
                  m: Tensor, K: int, C: int, count: int) -> None:
    """``M[xi] = Z[xi] (K x count) @ V[xi]^T (count x C)`` for the 16 ``xi``, the reduction
    split where the GEMMs alone would leave the device idle."""
    tiles = 16 * -(-K // max(1, config.tile_m)) * -(-C // max(1, config.tile_n))
    split = weight_split(tiles, count, int(queue.device.max_compute_units))
    size = K * C
    if split < 2 or dtype == "float16":  # float16 partial sums would round to half
        run_gemm(queue, config, dtype, Operand(z.buffer, 0, count, K * count),
                 Operand(v.buffer, 0, count, C * count), Operand(m.buffer, 0, C, size), K, C,
                 count, trans_b=True, batch=(16, 1))
        return
    step = max(4, config.tile_k)
    per_slice = -(-count // split)
    ks = -(-per_slice // step) * step  # whole k tiles per slice
    full, rest = divmod(count, ks)
    slices = full + (1 if rest else 0)
    work = Tensor.from_shape(queue, (slices * 16 * size,), dtype, fill=None)  # [S][16][K*C]
    run_gemm(queue, config, dtype, Operand(z.buffer, 0, count, K * count, ks),
             Operand(v.buffer, 0, count, C * count, ks),
             Operand(work.buffer, 0, C, size, 16 * size), K, C, ks, trans_b=True,
             batch=(16, full))
    if rest:
        run_gemm(queue, config, dtype, Operand(z.buffer, full * ks, count, K * count),
                 Operand(v.buffer, full * ks, count, C * count),
                 Operand(work.buffer, full * 16 * size, C, size), K, C, rest,
                 trans_b=True, batch=(16, 1))
    total = 16 * size  # the slices summed in order into M, as one K*C*16-long row
    gemm_family(queue.context, GemmParams(SPLIT_K_SUM, dtype)).launch(
        queue, total, work.buffer, np.int32(0), np.int32(slices), np.int32(total),
        np.int32(total), m.buffer, np.int32(0), np.int32(total), m.buffer, np.int32(0))
