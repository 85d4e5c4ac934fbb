"""The conv2d kernel family: one builder for the convolution's own programs, keyed by
(kind, dtype, window), returning program, kernel names and launch geometry together.

Kinds (sources in ``_conv_kernels``):

- ``naive``: one work-item per output (1-D, :meth:`BuiltFamily.launch`);
- ``im2col`` / ``col2im``: the column buffer of the GEMM paths and its gather back, launched
  over ``(columns, rows, planes)`` (:class:`PlaneGeometry`);
- ``sum_batch``: the weight gradient's sum over images (1-D);
- ``winograd``: F(2x2, 3x3)'s weight (1-D), input and output (planes) transforms;
- ``winograd4``: F(4x4, 3x3)'s, the same kernels generated from its transform matrices
  (``_conv_kernels.winograd_source``);
- ``tiled_local``: direct convolution through local memory, the ``window``
  ``(r, s, stride_h, stride_w, dilation_h, dilation_w)`` baked in (:class:`TileGeometry`);
- ``igemm_forward`` / ``igemm_data`` / ``igemm_weight``: the register-tiled implicit GEMM's
  three computations (``_conv_igemm``), the ``window`` ``(r, s, stride_h, stride_w, pad_h,
  pad_w, dilation_h, dilation_w)`` and the ``tiles`` baked in (launched by ``_conv_igemm``);
- ``igemm_data_phase``: the strided data gradient with each input phase's taps compiled in
  (NOTE [ Phase-specialized data gradient ]), the same window (and a ninth element, ``pack``:
  1 packs phases into slots, 0 one per slot) and tiles.

The implicit GEMM is a GEMM-family program (``_matmul_family``, with ``_conv_kernels``' B
loader): ``run_gemm`` builds it, and the GEMM family's golden matrix holds its form.

Examples:
    >>> src = conv2d_family.source("tiled_local", "float32", (3, 3, 1, 1, 1, 1))
    >>> src.kernels, "#define R 3" in src.program
    (('conv2d_tiled_local',), True)
    >>> list(PlaneGeometry().blocks(4, 3, 70000))
    [(0, (4, 3, 65535)), (65535, (4, 3, 4465))]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.kernels.family import BuiltFamily, Geometry, KernelSource, kernel_family

from . import _conv_kernels as ck
from ._conv_geometry import ConvGeometry
from ._conv_igemm_kernels import (
    DEFAULT_TILES,
    DIRECTIONS,
    TILINGS,
    IgemmTiles,
    igemm_source,
    phase_data_source,
)

__all__ = ["KINDS", "PlaneGeometry", "TileGeometry", "Window", "conv2d_family", "geometry_of"]

Window = tuple[int, ...]
"""``(r, s, stride_h, stride_w, dilation_h, dilation_w)`` of a ``tiled_local`` program,
``(r, s, stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w)`` of an ``igemm_*`` one;
``()`` for the other kinds."""

IGEMM = "igemm_"
PHASE_KIND = "igemm_data_phase"
IGEMM_KINDS = (*(IGEMM + d for d in DIRECTIONS), PHASE_KIND)

G = TypeVar("G", bound=Geometry)


@dataclass(frozen=True)
class PlaneGeometry(Geometry):
    """3-D launches over ``(columns, rows, planes)``, the local size left to the driver; the
    planes go in blocks of at most ``ck.MAX_GRID_ROWS`` (some drivers cap the grid's third
    dimension at 65535). A 1-D kernel of the same program launches one work-item per element
    (:meth:`BuiltFamily.launch`)."""

    def blocks(self, columns: int, rows: int, planes: int
               ) -> Iterator[tuple[int, tuple[int, int, int]]]:
        """``(first plane, global size)`` of each launch."""
        for p0 in range(0, planes, ck.MAX_GRID_ROWS):
            yield p0, (columns, rows, min(ck.MAX_GRID_ROWS, planes - p0))


@dataclass(frozen=True)
class TileGeometry(Geometry):
    """The tiled-local kernel's launch: work-groups of ``tx x ty`` work-items, each a block of
    that many output pixels for ``kb`` output channels of one image and group."""

    tx: int = ck.TILED_LOCAL_TX
    ty: int = ck.TILED_LOCAL_TY
    kb: int = ck.TILED_LOCAL_KB

    def grid(self, g: ConvGeometry) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """``(global, local)`` covering the output of ``g``."""
        kblocks = -(-g.kg // self.kb)
        gsize = (-(-g.ow // self.tx) * self.tx, -(-g.oh // self.ty) * self.ty,
                 g.n * g.groups * kblocks)
        return gsize, (self.tx, self.ty, 1)


WINOGRAD_KERNELS = ("winograd_weights", "winograd_weights_flipped", "winograd_input",
                    "winograd_output", "winograd_grad", "winograd_weight_grad")

PLANES = PlaneGeometry()
ONE_PER_ITEM = Geometry()

KINDS: dict[str, tuple[str, tuple[str, ...], Geometry]] = {
    "naive": (ck.NAIVE, ("conv2d_naive",), ONE_PER_ITEM),
    "im2col": (ck.IM2COL, ("conv2d_im2col",), PLANES),
    "col2im": (ck.COL2IM, ("conv2d_col2im",), PLANES),
    "sum_batch": (ck.SUM_BATCH, ("conv2d_sum_batch",), ONE_PER_ITEM),
    "winograd": (ck.WINOGRAD, WINOGRAD_KERNELS, PLANES),
    "winograd4": (ck.winograd_source(4), WINOGRAD_KERNELS, PLANES),
}
"""The fixed programs: kind -> (source, kernels, geometry)."""


def _conv_golden() -> Iterator[tuple[str, tuple[str, str] | tuple[str, str, Window]
                                      | tuple[str, str, Window, IgemmTiles]]]:
    for dt in FLOAT_DTYPES:
        yield f"conv2d/naive-{dt}", ("naive", dt)
        yield f"conv2d/winograd-{dt}", ("winograd", dt)
        yield f"conv2d/winograd4-{dt}", ("winograd4", dt)
    for kind in ("im2col", "col2im", "sum_batch"):
        yield f"conv2d/{kind}-float32", (kind, "float32")
    yield "conv2d/tiled_local-float32-3x3", ("tiled_local", "float32", (3, 3, 1, 1, 1, 1))
    yield "conv2d/tiled_local-float16-5x5-s2-d2", ("tiled_local", "float16", (5, 5, 2, 2, 2, 2))
    three = (3, 3, 1, 1, 1, 1, 1, 1)
    for direction in DIRECTIONS:
        yield f"conv2d/igemm_{direction}-float32-3x3", (f"{IGEMM}{direction}", "float32", three,
                                                       DEFAULT_TILES)
    yield "conv2d/igemm_forward-float16-1x1-s2", ("igemm_forward", "float16",
                                                  (1, 1, 2, 2, 0, 0, 1, 1), DEFAULT_TILES)
    yield "conv2d/igemm_data-float64-3x3-s2", ("igemm_data", "float64",
                                               (3, 3, 2, 2, 1, 1, 1, 1), DEFAULT_TILES)
    yield "conv2d/igemm_weight-float32-5x5-d2-128x128", (
        "igemm_weight", "float32", (5, 5, 1, 1, 2, 2, 2, 2), TILINGS["128x128"])
    yield "conv2d/igemm_data_phase-float32-3x3-s2-128x128", (
        PHASE_KIND, "float32", (3, 3, 2, 2, 1, 1, 1, 1), TILINGS["128x128"])
    yield "conv2d/igemm_data_phase-float16-1x1-s2-64x64v", (
        PHASE_KIND, "float16", (1, 1, 2, 2, 0, 0, 1, 1), TILINGS["64x64v"])


@kernel_family("ops.conv2d", golden=_conv_golden)
def conv2d_family(kind: str, dtype: str, window: Window = (),
                  tiles: IgemmTiles = DEFAULT_TILES) -> KernelSource:
    """The conv2d program of ``kind`` for ``dtype`` (``window`` for ``tiled_local`` and the
    ``igemm_*`` kinds, ``tiles`` for the latter only).

    Raises:
        ValueError: an unknown kind; a ``tiled_local`` window that is not six ints; an
            ``igemm_*`` window that is not eight ints or tiles its loaders cannot cover; an
            ``igemm_data_phase`` window that is not strided or is dilated.
    """
    if kind == PHASE_KIND:
        return KernelSource(phase_data_source(window, tiles), ("conv2d_igemm_data_phase",),
                            dtype)
    if kind.startswith(IGEMM):
        direction = kind[len(IGEMM):]
        kernels = (f"conv2d_{kind}", *(("conv2d_igemm_weight_sum",) if direction == "weight"
                                        else ()))
        return KernelSource(igemm_source(direction, window, tiles), kernels, dtype)
    if kind == "tiled_local":
        if len(window) != 6:
            raise ValueError(f"conv2d_family: tiled_local needs a window (r, s, sh, sw, dh, "
                             f"dw), got {window!r}")
        return KernelSource(ck.tiled_local_source(*window), ("conv2d_tiled_local",), dtype,
                            TileGeometry())
    try:
        source, kernels, geometry = KINDS[kind]
    except KeyError:
        raise ValueError(f"conv2d_family: unknown kind {kind!r}; one of "
                         f"{', '.join([*KINDS, 'tiled_local', *IGEMM_KINDS])}") from None
    return KernelSource(source, kernels, dtype, geometry)


def geometry_of(built: BuiltFamily, kind: type[G]) -> G:
    """``built``'s geometry as the ``kind`` of geometry its launch needs.

    Raises:
        TypeError: it is another kind.
    """
    geometry = built.source.geometry
    if not isinstance(geometry, kind):
        raise TypeError(f"conv2d_family: {built.source.kernels[0]} launches with "
                        f"{type(geometry).__name__}, not {kind.__name__}")
    return geometry
