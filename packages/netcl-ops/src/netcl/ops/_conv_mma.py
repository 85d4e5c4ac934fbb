"""Tensor-core convolutions for float16 storage on NVIDIA's OpenCL driver (``mma.sync``).

:func:`conv2d_mma_applicable` says whether a convolution direction (``"forward"``,
``"data"``, ``"weight"``) of one geometry runs here: float16 tensors, one group, index sizes
below 2**31, on a device that passed :func:`~._matmul_mma.mma_verdict`'s probe (never
raises; ``NETCL_MMA=0`` turns it off; PoCL, Intel and the NumPy backend answer False without
building anything). :func:`conv2d_mma` runs one direction into a given output tensor; its
kernels come from :mod:`._conv_mma_source` (implicit GEMM, f32 accumulation, float16 out).

Examples:
    >>> from netcl.core.device import manager
    >>> from netcl.ops._conv_geometry import conv_geometry
    >>> g = conv_geometry("conv2d", (8, 16, 8, 8), (32, 16, 3, 3), padding=1)
    >>> conv2d_mma_applicable(manager.default("cpu").queue, g, "float16")
    False
    >>> conv2d_mma_config("forward", conv_dims(g), 132).label()
    '64x128x32_w2x2'
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from netcl.core.kernels.cache import get_kernel
from netcl.core.kernels.primitives import launch
from netcl.core.tensor import Tensor

from ._conv_geometry import ConvGeometry
from ._conv_mma_source import (
    CONV_DIRECTIONS,
    ConvDims,
    ConvMmaConfig,
    conv_mma_kernel_name,
    conv_mma_source,
    gemm_dims,
)
from ._matmul_mma import mma_verdict

__all__ = [
    "ConvMmaConfig",
    "conv2d_mma",
    "conv2d_mma_applicable",
    "conv2d_mma_config",
    "conv_dims",
    "weight_split",
]

_INT_LIMIT = 2**31 - 1

# NOTE [ Tensor-core conv tiles ]
# H100, NVIDIA OpenCL 580 (benchmarks/probe_conv_mma.py, ResNet-18 CIFAR layers at batch 128,
# five tilings each): eight-warp 128x128 tiles (2x4 warps of 64x32) were fastest for every
# direction of every layer with 128+ GEMM rows that has at least half a wave of them (e.g.
# 128-128 3x3 16x16 forward 0.125 ms against 0.160 for four warps); with fewer, 64x64 tiles
# (256-512 3x3 s2 8x8 forward 0.092 against 0.118); 64-row GEMMs (64 channels) take 64x128
# tiles of four warps for the forward and data gradient, 64x64 for the weight gradient.
_WIDE = ConvMmaConfig(bm=128, bn=128, warps_m=2, warps_n=4)
_NARROW = ConvMmaConfig(bm=64, bn=128, warps_m=2, warps_n=2)
_SMALL = ConvMmaConfig(bm=64, bn=64, warps_m=2, warps_n=2)
# The weight gradient's reduction split: about this many work-groups per compute unit, each
# split at least MIN_SPLIT_TILES k-tiles, the float32 partial sums at most MAX_PARTIAL elements.
GROUPS_PER_UNIT = 2
MIN_SPLIT_TILES = 8
MAX_PARTIAL = 1 << 24


def conv_dims(g: ConvGeometry) -> ConvDims:
    """The kernel-side sizes of a one-group geometry."""
    return ConvDims(g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.oh, g.ow, *g.stride, *g.padding,
                    *g.dilation)


def conv2d_mma_applicable(queue: Any, g: ConvGeometry, dtype: str,
                          direction: str = "forward") -> bool:
    """Whether :func:`conv2d_mma` runs ``direction`` of ``g`` for ``dtype`` tensors on
    ``queue``'s device (see the module docstring). Never raises."""
    if dtype != "float16" or g.groups != 1 or direction not in CONV_DIRECTIONS or g.n < 1:
        return False
    sizes = (g.n * g.c * g.h * g.w, g.n * g.k * g.oh * g.ow, g.k * g.c * g.r * g.s)
    if max(sizes) > _INT_LIMIT:
        return False
    return mma_verdict(queue)[0]


def conv2d_mma_config(direction: str, dims: ConvDims, compute_units: int) -> ConvMmaConfig:
    """The tiles for one direction (NOTE [ Tensor-core conv tiles ]).

    Examples:
        >>> d = ConvDims(128, 64, 32, 32, 64, 3, 3, 32, 32, ph=1, pw=1)
        >>> conv2d_mma_config("forward", d, 132).label()
        '64x128x32_w2x2'
    """
    rows, cols, _ = gemm_dims(direction, dims)
    if rows <= 64:
        return _SMALL if direction == "weight" else _NARROW
    if direction == "weight" or -(-rows // 128) * -(-cols // 128) * 2 >= compute_units:
        return _WIDE
    return _SMALL


def weight_split(dims: ConvDims, config: ConvMmaConfig, compute_units: int) -> tuple[int, int]:
    """``(splits, k_tiles_per_split)`` of the weight gradient's reduction.

    Examples:
        >>> d = ConvDims(128, 64, 32, 32, 64, 3, 3, 32, 32, ph=1, pw=1)
        >>> weight_split(d, ConvMmaConfig(bm=64, bn=128), 132)
        (53, 78)
    """
    rows, cols, red = gemm_dims("weight", dims)
    tiles = -(-rows // config.bm) * -(-cols // config.bn)
    k_tiles = -(-red // config.bk)
    want = -(-GROUPS_PER_UNIT * max(1, compute_units) // tiles)
    most = max(1, min(k_tiles // MIN_SPLIT_TILES, MAX_PARTIAL // (rows * cols), 65535))
    per = -(-k_tiles // max(1, min(want, most)))
    return -(-k_tiles // per), per


@functools.lru_cache(maxsize=256)
def _source(direction: str, dims: ConvDims, config: ConvMmaConfig, partial: bool) -> str:
    return conv_mma_source(direction, dims, config, partial)


def conv2d_mma(direction: str, first: Tensor, second: Tensor, g: ConvGeometry, out: Tensor, *,
               bias: Tensor | None = None, config: ConvMmaConfig | None = None) -> None:
    """Run one direction of a float16 convolution on the tensor cores into ``out``.

    ``direction`` ``"forward"``: ``first`` the input, ``second`` the weight, ``out`` the
    output (plus ``bias``); ``"data"``: ``grad_out``, weight, the input gradient; ``"weight"``:
    the input, ``grad_out``, the weight gradient. Tensors may start at any element offset.
    ``config`` (default :func:`conv2d_mma_config`) with ``emulate=True`` runs on any OpenCL
    device (NOTE [ Emulated PTX ]); otherwise the caller checks
    :func:`conv2d_mma_applicable`.

    Raises:
        ValueError: an unknown direction, more than one group, or tiles the kernel cannot use.
        TypeError: tensors other than float16 (``out`` may be float32 for ``config`` with
            ``out_f16=False``).
    """
    if direction not in CONV_DIRECTIONS:
        raise ValueError(f"conv2d_mma: direction must be one of {CONV_DIRECTIONS}, "
                         f"got {direction!r}")
    if g.groups != 1:
        raise ValueError(f"conv2d_mma: needs one group, got groups={g.groups}")
    queue = out.queue
    units = int(getattr(queue.device, "max_compute_units", 132))
    dims = conv_dims(g)
    if config is None:
        config = conv2d_mma_config(direction, dims, units)
    want_out = "float16" if config.out_f16 else "float32"
    if first.dtype != "float16" or second.dtype != "float16" or out.dtype != want_out:
        raise TypeError(f"conv2d_mma: needs float16 operands and a {want_out} output, got "
                        f"{first.dtype}, {second.dtype} and {out.dtype}")
    a, b = second, first  # the GEMM's A and B sources in every direction
    rows, cols, red = gemm_dims(direction, dims)
    splits, per = (weight_split(dims, config, units) if direction == "weight"
                   else (1, -(-red // config.bk)))
    partial = splits > 1
    src = _source(direction, dims, config, partial)
    kernel = get_kernel(queue.context, src, conv_mma_kernel_name(direction))
    for t in (a, b) if bias is None else (a, b, bias):
        t.wait()
    tiles = -(-rows // config.bm) * -(-cols // config.bn)
    target = out
    if partial:
        target = Tensor.from_shape(queue, (splits * rows * cols,), "float32", fill=None)
    i64 = np.int64
    launch(queue, kernel, (tiles * config.threads, splits), (config.threads, 1),
           a.buffer, i64(a.offset), b.buffer, i64(b.offset),
           (a if bias is None else bias).buffer, i64(0 if bias is None else bias.offset),
           np.int32(bias is not None), target.buffer, i64(target.offset), np.int32(per))
    if partial:
        wsum = get_kernel(queue.context, src, "conv_mma_wsum")
        size = rows * cols
        launch(queue, wsum, (-(-size // 256) * 256,), (256,), target.buffer, out.buffer,
               i64(out.offset), np.int32(size), np.int32(splits))
