"""The register-tiled implicit-GEMM convolution (variant ``CONV2D_IMPLICIT_TILED``): forward,
data gradient and weight gradient, each one kernel that gathers its operand straight from the
tensors (sources and layout in ``_conv_igemm_kernels``), plus, for a weight gradient whose
reduction is split over work-groups, one pass that adds the partial sums (kept in the compute
type) in a fixed order (no float atomics: results are bitwise reproducible).

Its programs are ``conv2d_family``'s ``igemm_<direction>`` kinds, keyed by (dtype, window,
tiles); the window ``(r, s, sh, sw, ph, pw, dh, dw)`` is compiled in.

Examples:
    >>> from netcl.ops._conv_igemm_kernels import DEFAULT_TILES
    >>> src = conv2d_family.source("igemm_forward", "float32", (1, 1, 1, 1, 0, 0, 1, 1),
    ...                            DEFAULT_TILES)
    >>> src.kernels
    ('conv2d_igemm_forward',)
    >>> from netcl.ops._conv_geometry import conv_geometry
    >>> weight_splits(conv_geometry("x", (128, 3, 32, 32), (64, 3, 3, 3), padding=1),
    ...               DEFAULT_TILES, 132)
    (512, 256)
"""

from __future__ import annotations

import numpy as np

from netcl.core.kernel_selector import KernelConfig
from netcl.core.kernels.primitives import launch
from netcl.core.tensor import Tensor

from ._conv_family import conv2d_family
from ._conv_geometry import ConvGeometry
from ._conv_igemm_kernels import FALLBACK_TILES, IgemmTiles, data_phased, phase_slots

__all__ = [
    "igemm_backward_data",
    "igemm_backward_data_phase",
    "igemm_backward_weight",
    "igemm_forward",
    "tiles_of",
    "weight_splits",
    "window_of",
]

# The weight gradient's split of its reduction: enough work-groups to fill the device, each
# split at least MIN_SPLIT_STEPS steps long, the partial sums at most this many elements.
GROUPS_PER_UNIT = 4
MIN_SPLIT_STEPS = 4
MAX_PARTIAL_ELEMENTS = 1 << 24
MAX_GRID_Z = 65535


def window_of(g: ConvGeometry) -> tuple[int, ...]:
    """``(r, s, sh, sw, ph, pw, dh, dw)``: what the programs compile in."""
    return (g.r, g.s, *g.stride, *g.padding, *g.dilation)


def tiles_of(config: KernelConfig) -> IgemmTiles:
    """The tiling a config names (``tile_m x tile_n`` stepping ``tile_k``, work-groups of
    ``local_size_2d``, 4-vector staging by ``use_vectorization``), or :data:`FALLBACK_TILES`
    where the device shrank it into one the loaders cannot cover.

    Examples:
        >>> from netcl.core.kernel_selector import KernelVariant
        >>> tiles_of(KernelConfig(KernelVariant.CONV2D_IM2COL, 64, 64, 16,
        ...                       local_size_2d=(16, 16), use_vectorization=False)).label()
        '64x64x16/4x4'
    """
    d0, d1 = config.local_size_2d
    tiles = IgemmTiles(config.tile_m, config.tile_n, config.tile_k, d0, d1,
                       config.use_vectorization)
    return tiles if tiles.valid() else FALLBACK_TILES


def _grid(tiles: IgemmTiles, rows: int, columns: int, planes: int
          ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """``(global, local)`` covering a ``rows x columns`` C for each of ``planes``."""
    gx, gy = -(-columns // tiles.bn), -(-rows // tiles.bm)
    return (gx * tiles.lx, gy * tiles.ly, planes), (tiles.lx, tiles.ly, 1)


def _sizes(g: ConvGeometry) -> tuple[np.int32, ...]:
    return tuple(np.int32(v) for v in (g.c, g.h, g.w, g.k, g.oh, g.ow, g.groups))


def igemm_forward(x: Tensor, weight: Tensor, bias: Tensor | None, g: ConvGeometry,
                  out: Tensor, config: KernelConfig) -> None:
    """Write ``conv2d(x, weight, bias)`` into ``out`` (tensors at offset 0)."""
    tiles = tiles_of(config)
    built = conv2d_family(x.context, "igemm_forward", x.dtype, window_of(g), tiles)
    npix = g.n * g.pixels
    gsize, lsize = _grid(tiles, g.kg, npix, g.groups)
    launch(x.queue, built.kernel, gsize, lsize, x, weight, x if bias is None else bias, out,
           *_sizes(g), np.int32(npix), np.int32(bias is not None))


def igemm_backward_data(grad_out: Tensor, weight: Tensor, g: ConvGeometry, dx: Tensor,
                        config: KernelConfig) -> None:
    """Write the data gradient into ``dx`` (tensors at offset 0)."""
    tiles, window = tiles_of(config), window_of(g)
    built = conv2d_family(dx.context, "igemm_data", dx.dtype, window, tiles)
    if data_phased(window):  # one plane per phase; the first phase has the most pixels
        sh, sw = g.stride
        npix, planes = g.n * -(-g.h // sh) * -(-g.w // sw), g.groups * sh * sw
    else:
        npix, planes = g.n * g.h * g.w, g.groups
    gsize, lsize = _grid(tiles, g.cg, npix, planes)
    launch(dx.queue, built.kernel, gsize, lsize, grad_out, weight, dx, *_sizes(g),
           np.int32(g.n))


def igemm_backward_data_phase(grad_out: Tensor, weight: Tensor, g: ConvGeometry, dx: Tensor,
                              config: KernelConfig) -> None:
    """Write the data gradient of a strided, undilated convolution into ``dx`` by the
    phase-specialized kernel (NOTE [ Phase-specialized data gradient ]; tensors at offset 0):
    its phases packed into slots unless ``config.extra["phase_pack"]`` is False.

    Raises:
        ValueError: ``g`` is not strided or is dilated.
    """
    window = window_of(g)
    if not data_phased(window):
        raise ValueError(f"conv2d phase data gradient: needs stride > 1 and dilation 1, got "
                         f"stride {g.stride}, dilation {g.dilation}")
    tiles, pack = tiles_of(config), bool(config.extra.get("phase_pack", True))
    built = conv2d_family(dx.context, "igemm_data_phase", dx.dtype, (*window, int(pack)), tiles)
    sh, sw = g.stride  # the columns of the phase with the most pixels (ih = iw = 0)
    npix, planes = g.n * -(-g.h // sh) * -(-g.w // sw), g.groups * len(phase_slots(window, pack))
    gsize, lsize = _grid(tiles, g.cg, npix, planes)
    launch(dx.queue, built.kernel, gsize, lsize, grad_out, weight, dx, *_sizes(g),
           np.int32(g.n))


def weight_splits(g: ConvGeometry, tiles: IgemmTiles, compute_units: int,
                  per_unit: int = GROUPS_PER_UNIT) -> tuple[int, int]:
    """``(splits, chunk)``: the weight gradient's reduction over ``N*OH*OW`` pixels cut into
    ``splits`` ranges of ``chunk`` pixels (a multiple of the tiling's step), enough to give
    about ``per_unit`` work-groups per compute unit (``config.extra["groups_per_unit"]``,
    default ``GROUPS_PER_UNIT``)."""
    npix = g.n * g.pixels
    tiles_c = -(-g.kg // tiles.bm) * -(-g.crs // tiles.bn) * g.groups
    want = -(-per_unit * max(1, compute_units) // tiles_c)
    most = min(-(-npix // (MIN_SPLIT_STEPS * tiles.bk)), MAX_PARTIAL_ELEMENTS // (g.k * g.crs),
               MAX_GRID_Z // g.groups)
    splits = max(1, min(want, most))
    chunk = -(-npix // (splits * tiles.bk)) * tiles.bk
    return -(-npix // chunk), chunk


def igemm_backward_weight(x: Tensor, grad_out: Tensor, g: ConvGeometry, dw: Tensor,
                          config: KernelConfig, compute_units: int) -> None:
    """Write the weight gradient into ``dw`` (tensors at offset 0)."""
    queue, dtype = x.queue, x.dtype
    tiles = tiles_of(config)
    built = conv2d_family(x.context, "igemm_weight", dtype, window_of(g), tiles)
    per_unit = int(config.extra.get("groups_per_unit", GROUPS_PER_UNIT))
    splits, chunk = weight_splits(g, tiles, compute_units, per_unit)
    size = g.k * g.crs
    compute = "float32" if dtype == "float16" else dtype  # the partial sums' type (CT)
    part = Tensor.from_shape(queue, (splits * size,), compute, fill=None)
    gsize, lsize = _grid(tiles, g.kg, g.crs, g.groups * splits)
    launch(queue, built.kernel, gsize, lsize, x, grad_out, part, *_sizes(g),
           np.int32(g.n * g.pixels), np.int32(splits), np.int32(chunk))
    built.launch(queue, size, part, dw, np.int32(size), np.int32(splits),
                 kernel="conv2d_igemm_weight_sum")
