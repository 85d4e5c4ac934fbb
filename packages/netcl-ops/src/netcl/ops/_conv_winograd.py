"""Winograd F(m x m, 3x3) convolution on OpenCL, m = 2 or 4 (3x3 kernels, stride 1, dilation 1,
one group).

Each m x m output tile comes from an (m + 2) x (m + 2) input tile:
``Y = A^T [ (G g G^T) * (B^T d B) ] A``. The elementwise product summed over input channels is
``(m + 2)**2`` independent GEMMs ``M[xi] = U[xi] (K x C) @ V[xi] (C x tiles)``, run as one
batched launch of the GEMM family: 16 GEMMs and 2.25x fewer multiplies than a direct 3x3
convolution for F(2x2, 3x3), 36 and 4x fewer for F(4x4, 3x3) (Lavin and Gray's points 0, +-1,
+-2, infinity), whose tiles are also a quarter as many. Three small kernels transform the
weights (``U``), the input tiles (``V``) and the products back (``Y``, plus bias; partial tiles
at the edges read zeros and write only inside the output); ``V`` and ``M`` live in pooled
scratch buffers, filled a chunk of images at a time. The transforms' program is
``conv2d_family``'s ``winograd`` kind for m = 2 (written by hand) and ``winograd4`` for m = 4
(generated from the matrices, ``_conv_kernels.winograd_source``); variants ``CONV2D_WINOGRAD``
and ``CONV2D_WINOGRAD_F4`` (``_conv_rule``) pick m.

NOTE [ Winograd F(4x4) accuracy ]: F(4x4)'s transforms have entries up to 8 and 1/24, so its
rounding error is about 10x F(2x2)'s. float32 against a float64 reference, max abs error over
max abs value (PoCL and Intel's CPU runtime, same figures): 2-4e-6 at 7-16 channels, 2-5e-6 at
64 on 14x14, 1.1e-5 (forward), 1.4e-5 (data), 3.4e-6 (weight) at 256 on 14x14, against F(2x2)'s
1.5-7.4e-7 (``tests/test_conv_winograd4.py`` checks below 3e-5 at 64 channels); float64 ~1e-15.
float16, which stores the transformed tiles in half, is off by 1-2% of the largest output:
``CONV2D_WINOGRAD_F4`` does not apply to float16 (forced, it gives way to the rule).

The data gradient is the same convolution of ``grad_out`` with the transposed, rotated filters
(:func:`data_geometry`). The weight gradient, :func:`conv2d_winograd_weight`, runs the forward
backwards: ``dU = sum over tiles of (A dY A^T) * V``, ``(m + 2)**2`` GEMMs
``(K x tiles) @ (tiles x C)``, then ``dg = G^T dU G`` per filter, a chunk of images at a time
added in a fixed order. NOTE [ Split Winograd weight gradient ] says how those GEMMs fill the
device.
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
from ._conv_kernels import WINOGRAD_GROUP
from ._matmul_family import SPLIT_K_SUM, gemm_family
from ._matmul_launch import Operand, run_gemm, select_gemm
from ._matmul_params import GemmParams

__all__ = ["TILE_SIZES", "conv2d_winograd", "conv2d_winograd_weight", "data_geometry"]

_SCRATCH_ELEMENTS = 1 << 25
_MAX_GRID_Z = 65535  # some drivers cap the grid's third dimension
_MIN_SLICE = 256  # tiles per slice of a split weight-gradient reduction
_SPLIT_PER_UNIT = 2  # work-groups per compute unit a split aims for

# NOTE [ Split Winograd weight gradient ]
# The weight gradient's 16 (F(2x2)) or 36 (F(4x4)) GEMMs are (K x tiles) @ (tiles x C): few
# output tiles (one 128 x 128 tile per GEMM at 128 channels: 16 work-groups for an H100's 132
# compute units) and a long reduction over every output tile of a chunk of images. So the
# reduction is cut into S slices of at least _MIN_SLICE tiles, S chosen to give every compute
# unit _SPLIT_PER_UNIT work-groups:
# one batched launch writes the S partial products of every GEMM into a workspace, the GEMM
# family's split-K kernel adds them in slice order (deterministic) into M.


TILE_SIZES = (2, 4)
"""The output tile sizes m of the Winograd F(m x m, 3x3) programs."""


def _program(context: Any, dtype: str, tile: int) -> Any:
    if tile not in TILE_SIZES:
        raise ValueError(f"conv2d_winograd: tile must be one of {TILE_SIZES} (F(m x m, 3x3)), "
                         f"got {tile!r}")
    return conv2d_family(context, "winograd" if tile == 2 else f"winograd{tile}", dtype)


def _chunk(g: ConvGeometry, planes: int, tiles: int) -> int:
    """Images per chunk: the scratch bounds it, and for F(2x2) (``planes`` 16) the grid's
    third dimension (F(4x4)'s tile transforms are 1-D: 512 channels on 7x7 at batch 128 go in
    one chunk, not 127 images and 1)."""
    grid = _MAX_GRID_Z // max(g.c, g.k) if planes == 16 else g.n
    return max(1, min(g.n, _SCRATCH_ELEMENTS // (planes * (g.c + g.k) * tiles), grid))


def _tiles(queue: Any, kernel: Any, tile: int, tw: int, th: int, planes: int, items: int,
           *args: Any) -> None:
    """Launch a tile transform: F(2x2)'s over ``(TW, TH, planes)``, F(4x4)'s 1-D over the
    ``items`` tiles of every plane in groups of ``WINOGRAD_GROUP`` (``winograd_source``)."""
    if tile == 2:
        launch(queue, kernel, (tw, th, planes), None, *args)
    else:
        group = WINOGRAD_GROUP
        launch(queue, kernel, (-(-items // group) * group,), (group,), *args)


def conv2d_winograd(x: Tensor, weight: Tensor, bias: Tensor | None, g: ConvGeometry,
                    out: Tensor, flipped: bool = False, tile: int = 2) -> None:
    """Write ``conv2d(x, weight, bias)`` into ``out`` with Winograd F(tile x tile, 3x3),
    ``tile`` 2 or 4 (only where ``_conv_rule.winograd_applies``: the selector never picks it
    elsewhere).

    ``flipped``: ``weight`` is ``(g.c, g.k, 3, 3)`` and the filters are its transposed and
    rotated ones (the data gradient as a convolution of ``grad_out``, :func:`data_geometry`).

    Raises:
        ValueError: a ``tile`` other than 2 or 4.
    """
    queue, dtype = x.queue, x.dtype
    built = _program(x.context, dtype, tile)
    planes = (tile + 2) ** 2
    th, tw = -(-g.oh // tile), -(-g.ow // tile)
    tiles = th * tw
    step = _chunk(g, planes, tiles)
    u = Tensor.from_shape(queue, (planes * g.k * g.c,), dtype, fill=None)
    v = Tensor.from_shape(queue, (planes * g.c * step * tiles,), dtype, fill=None)
    m = Tensor.from_shape(queue, (planes * g.k * step * tiles,), dtype, fill=None)
    ik, ok = built.kernels["winograd_input"], built.kernels["winograd_output"]
    built.launch(queue, g.k * g.c, weight, u, np.int32(g.k), np.int32(g.c),
                 kernel="winograd_weights_flipped" if flipped else "winograd_weights")
    x.wait()
    out.wait()
    b: Any = x.buffer if bias is None else bias
    for n0 in range(0, g.n, step):
        images = min(step, g.n - n0)
        count = images * tiles
        _tiles(queue, ik, tile, tw, th, images * g.c, g.c * count, x.buffer, v,
               np.int32(x.offset + n0 * g.c * g.h * g.w),
               *(np.int32(a) for a in (g.c, g.h, g.w, th, tw, *g.padding, count)))
        config = select_gemm(queue.device, g.k, count, g.c, dtype, planes)
        run_gemm(queue, config, dtype,
                 Operand(u.buffer, 0, g.c, g.k * g.c), Operand(v.buffer, 0, count, g.c * count),
                 Operand(m.buffer, 0, count, g.k * count), g.k, count, g.c, batch=(planes, 1))
        _tiles(queue, ok, tile, tw, th, images * g.k, g.k * count, m, out.buffer, b,
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


def conv2d_winograd_weight(x: Tensor, grad_out: Tensor, g: ConvGeometry, dw: Tensor,
                           tile: int = 2) -> None:
    """Write the weight gradient of a Winograd geometry into ``dw`` (at offset 0), with
    F(tile x tile, 3x3)'s transforms, ``tile`` 2 or 4.

    Raises:
        ValueError: a ``tile`` other than 2 or 4.
    """
    queue, dtype = x.queue, x.dtype
    built = _program(x.context, dtype, tile)
    planes = (tile + 2) ** 2
    th, tw = -(-g.oh // tile), -(-g.ow // tile)
    tiles = th * tw
    step = _chunk(g, planes, tiles)
    v = Tensor.from_shape(queue, (planes * g.c * step * tiles,), dtype, fill=None)
    z = Tensor.from_shape(queue, (planes * g.k * step * tiles,), dtype, fill=None)
    m = Tensor.from_shape(queue, (planes * g.k * g.c,), dtype, fill=None)
    ik, gk = built.kernels["winograd_input"], built.kernels["winograd_grad"]
    x.wait()
    grad_out.wait()
    for n0 in range(0, g.n, step):
        images = min(step, g.n - n0)
        count = images * tiles
        _tiles(queue, ik, tile, tw, th, images * g.c, g.c * count, x.buffer, v,
               np.int32(x.offset + n0 * g.c * g.h * g.w),
               *(np.int32(a) for a in (g.c, g.h, g.w, th, tw, *g.padding, count)))
        _tiles(queue, gk, tile, tw, th, images * g.k, g.k * count, grad_out.buffer, z,
               np.int32(grad_out.offset + n0 * g.k * g.oh * g.ow),
               *(np.int32(a) for a in (g.k, g.oh, g.ow, th, tw, count)))
        config = select_gemm(queue.device, g.k, g.c, count, dtype, planes)
        _weight_gemms(queue, config, dtype, z, v, m, g.k, g.c, count, planes)
        built.launch(queue, g.k * g.c, m, dw, np.int32(g.k), np.int32(g.c), np.int32(n0 > 0),
                     kernel="winograd_weight_grad")


def weight_split(gemm_tiles: int, count: int, compute_units: int) -> int:
    """The slices of a Winograd weight gradient's reduction over ``count`` tiles whose 16 (or
    36) GEMMs have ``gemm_tiles`` output tiles in all (NOTE [ Split Winograd weight gradient ]).

    Examples:
        >>> weight_split(16, 25088, 132), weight_split(256, 25088, 132), weight_split(16, 300, 132)
        (17, 2, 1)
    """
    want = -(-_SPLIT_PER_UNIT * compute_units // max(1, gemm_tiles))
    return max(1, min(want, count // _MIN_SLICE))


def _weight_gemms(queue: Any, config: KernelConfig, dtype: str, z: Tensor, v: Tensor,
                  m: Tensor, K: int, C: int, count: int, planes: int) -> None:
    """``M[xi] = Z[xi] (K x count) @ V[xi]^T (count x C)`` for the ``planes`` ``xi``, the
    reduction split where the GEMMs alone would leave the device idle."""
    tiles = planes * -(-K // max(1, config.tile_m)) * -(-C // max(1, config.tile_n))
    split = weight_split(tiles, count, int(queue.device.max_compute_units))
    size = K * C
    if split < 2 or dtype == "float16":  # float16 partial sums would round to half
        run_gemm(queue, config, dtype, Operand(z.buffer, 0, count, K * count),
                 Operand(v.buffer, 0, count, C * count), Operand(m.buffer, 0, C, size), K, C,
                 count, trans_b=True, batch=(planes, 1))
        return
    step = max(4, config.tile_k)
    per_slice = -(-count // split)
    ks = -(-per_slice // step) * step  # whole k tiles per slice
    full, rest = divmod(count, ks)
    slices = full + (1 if rest else 0)
    work = Tensor.from_shape(queue, (slices * planes * size,), dtype, fill=None)  # [S][xi][K*C]
    run_gemm(queue, config, dtype, Operand(z.buffer, 0, count, K * count, ks),
             Operand(v.buffer, 0, count, C * count, ks),
             Operand(work.buffer, 0, C, size, planes * size), K, C, ks, trans_b=True,
             batch=(planes, full))
    if rest:
        run_gemm(queue, config, dtype, Operand(z.buffer, full * ks, count, K * count),
                 Operand(v.buffer, full * ks, count, C * count),
                 Operand(work.buffer, full * planes * size, C, size), K, C, rest,
                 trans_b=True, batch=(planes, 1))
    total = planes * size  # the slices summed in order into M, as one K*C*planes-long row
    gemm_family(queue.context, GemmParams(SPLIT_K_SUM, dtype)).launch(
        queue, total, work.buffer, np.int32(0), np.int32(slices), np.int32(total),
        np.int32(total), m.buffer, np.int32(0), np.int32(total), m.buffer, np.int32(0))
