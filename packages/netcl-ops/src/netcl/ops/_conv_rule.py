"""The conv2d family's selection policy: which convolution kernel runs which geometry.

Registered with netcl-core's generic selector as family ``"conv2d"`` (the query is a
:class:`ConvQuery`: a :class:`ConvGeometry` and a dtype); ``conv2d`` dispatches the config it
returns as ``RUNNERS[config.variant]`` with no second opinion. Two variants compute only some
geometries, and say so to the selector through their ``applies`` predicates, so neither a
rule, a forced variant nor an autotuned winner runs them elsewhere:

- :func:`winograd_applies`: F(2x2, 3x3) needs 3x3, stride 1, dilation 1, one group;
- :func:`tiled_local_fits`: the tiled-local kernel stages its input patch and weights in
  local memory, at most half of the device's.

A query's ``direction`` says which of the convolution's three computations it chooses for:
``"forward"``, or the gradients ``"data"`` and ``"weight"``. The gradients have two variants:
``CONV2D_IM2COL`` (im2col/GEMM/col2im and a batch sum: the column path) and
``CONV2D_IMPLICIT_TILED`` (:data:`IMPLICIT_TILED`, registered here: one register-tiled
implicit-GEMM kernel per computation, ``_conv_igemm``), which also computes the forward;
``CONV2D_WINOGRAD`` also computes both gradients (of its geometries; the data gradient for a
padding of at most 2), and so does ``CONV2D_WINOGRAD_F4`` (:data:`WINOGRAD_F4`, registered
here: Winograd F(4x4, 3x3), the same geometries; the rule picks it where
:data:`GPU_WINOGRAD_VARIANT` says so, else only when forced); ``CONV2D_IGEMM_PHASE``
(:data:`PHASE_DATA`, registered here) computes only the data gradient of a strided, undilated
convolution (any groups): the implicit GEMM by input phases with each phase's taps compiled in
(NOTE [ Phase-specialized data gradient ]); the other variants are forward-only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from netcl.core.device_profile import ExtendedDeviceProfile
from netcl.core.env import env_flag
from netcl.core.kernel_selector import KernelConfig, KernelVariant, default_config
from netcl.core.selection import (
    AnyVariant,
    SelectionFamily,
    Variant,
    float_dtype_arg,
    int_arg,
    register_family,
)

from . import _conv_kernels as ck
from ._conv_geometry import ConvGeometry, IntPair, conv_geometry
from ._conv_igemm_kernels import (
    DEFAULT_TILES,
    DIRECTIONS,
    TILINGS,
    IgemmTiles,
    data_phased,
    phase_slots,
)
from ._matmul_rule import (
    NO_LOCAL_PARAMS,
    SCALAR_PARAMS,
    TILE_K,
    MatmulQuery,
    matmul_config,
    matmul_rule,
)

__all__ = [
    "CONV2D_FAMILY",
    "IMPLICIT_TILED",
    "PHASE_DATA",
    "WINOGRAD_F4",
    "ConvQuery",
    "implicit_tiles",
    "conv2d_config",
    "conv2d_rule",
    "gemm_rows_columns",
    "implicit_split",
    "parse_conv2d",
    "tiled_local_fits",
    "winograd_applies",
]

V = KernelVariant
IMPLICIT_TILED = Variant("CONV2D_IMPLICIT_TILED")
"""The register-tiled implicit GEMM (``_conv_igemm``): forward and both gradients."""
WINOGRAD_F4 = Variant("CONV2D_WINOGRAD_F4")
"""Winograd F(4x4, 3x3) (``_conv_winograd`` with 6x6 tiles): forward and both gradients of the
geometries ``CONV2D_WINOGRAD`` computes, in float32 and float64 (not float16: too inexact)."""
PHASE_DATA = Variant("CONV2D_IGEMM_PHASE")
"""The data gradient of a strided, undilated convolution by input phases, each phase's taps
compiled in (``_conv_igemm.igemm_backward_data_phase``): the GPU rule's pick for those
(:func:`phase_data_applies`); dilated ones keep ``CONV2D_IMPLICIT_TILED``'s gather."""

# NOTE [ Conv2d rules ]: each threshold is where bench_selector measured the fastest variant
# change (PoCL on a 2-core EPYC VM; an H100 through NVIDIA's driver).
TILED_LOCAL_MAX_OUTPUT = 32 * 32  # output pixels per (image, channel) plane
CPU_WINOGRAD_MIN_OUTPUT = 16 * 16  # PoCL: Winograd 1.3-2x over im2col from here
GPU_WINOGRAD_MIN_CHANNELS = 64  # H100: Winograd over the implicit GEMM from 64 channels
GPU_WINOGRAD_MIN_OUTPUT = 16 * 16  # ... on output planes from 16x16 (the forward) ...
GPU_WINOGRAD_MIN_TILES = 2048  # ... or with at least this many 2x2 output tiles
GEMM_SHAPED_MAX_NARROW = 64  # 1x1: the column path (a GEMM) when one side is this narrow ...
DATA_GEMM_MAX_NARROW = 128  # ... and for the data gradient, output channels this few
PHASED_SCALAR_COLUMNS = 8192  # a phased data gradient this wide per phase: scalar tiles
# Which Winograd the GPU rules below pick where they pick one: CONV2D_WINOGRAD (F(2x2, 3x3)) or
# WINOGRAD_F4 (F(4x4, 3x3)). H200, batch 128 (bench_conv_layers --variants, 2026-11-29):
# F(4x4) is 1.4-2.2x faster than F(2x2) on every ResNet-18 3x3 stride-1 layer, forward, data
# and weight gradient (CIFAR 64 on 32x32 forward 0.166 against 0.351 ms, 256 on 8x8 0.131
# against 0.283, 512 on 4x4 0.257 against the implicit GEMM's 0.324; ImageNet 128 on 28x28
# 0.441 against 0.678). float16 keeps F(2x2) (_gpu_winograd).
GPU_WINOGRAD_VARIANT: AnyVariant = WINOGRAD_F4
GPU_WINOGRAD_WEIGHT_MIN_CHANNELS = 128  # F(4x4) weight gradient: 0.178 against 0.353 ms at 128
GPU_WINOGRAD_WEIGHT_MAX_OUTPUT = 32 * 32  # ... and at 64 channels on planes up to 32x32 (0.308
# against 0.469 ms); at 64 on 56x56 the implicit GEMM wins (1.31 against 1.47 ms)
GPU_WINOGRAD_MIN_TILES_F4 = 512  # F(4x4): with 512 2x2 tiles already (512 on 4x4, batch 128)
WEIGHT_SPLIT_COLUMNS = 512  # a 64-row weight gradient this wide: 8 work-groups per unit
DATA_MIN_CHANNELS = 9  # H100: the data gradient of fewer input channels: the column path
IMPLICIT_GEMM_TILE = 16  # the implicit GEMM's tiles when the GEMM is too small to tile

DEFAULTS: dict[AnyVariant, dict[str, Any]] = {
    V.CONV2D_NAIVE: dict(NO_LOCAL_PARAMS),
    V.CONV2D_IM2COL: {},
    V.CONV2D_IMPLICIT_GEMM: {"tile_m": IMPLICIT_GEMM_TILE, "tile_n": IMPLICIT_GEMM_TILE,
                             "tile_k": TILE_K, "work_per_thread": 1, **SCALAR_PARAMS},
    V.CONV2D_TILED_LOCAL: {"tile_m": ck.TILED_LOCAL_TX, "tile_n": ck.TILED_LOCAL_TX,
                           "work_per_thread": 1, **SCALAR_PARAMS},
    V.CONV2D_WINOGRAD: {"work_per_thread": 1, "extra": {"winograd": "F(2x2,3x3)"}},
    WINOGRAD_F4: {"work_per_thread": 1, "extra": {"winograd": "F(4x4,3x3)"}},
    IMPLICIT_TILED: {"tile_m": DEFAULT_TILES.bm, "tile_n": DEFAULT_TILES.bn,
                     "tile_k": DEFAULT_TILES.bk,
                     "local_size_2d": (DEFAULT_TILES.lx, DEFAULT_TILES.ly),
                     "work_per_thread": DEFAULT_TILES.tm, "use_vectorization": False},
}
DEFAULTS[PHASE_DATA] = dict(DEFAULTS[IMPLICIT_TILED])


@dataclass(frozen=True)
class ConvQuery:
    """One convolution to choose for: its geometry and dtype."""

    geometry: ConvGeometry
    dtype: str = "float32"
    direction: str = "forward"

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"ConvQuery: direction must be one of {', '.join(DIRECTIONS)}, "
                             f"got {self.direction!r}")

    def key(self) -> tuple[Any, ...]:
        """The tuned key: ``(N, C, H, W, K, R, S, stride, padding, dilation, groups, dtype)``,
        and the direction after it when it is a gradient's."""
        g = self.geometry
        key = (g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.stride, g.padding, g.dilation, g.groups,
               self.dtype)
        return key if self.direction == "forward" else (*key, self.direction)


def parse_conv2d(
    N: Any, C: Any, H: Any, W: Any, K: Any, R: Any, S: Any, stride: IntPair = 1,
    padding: IntPair = 0, dilation: IntPair = 1, groups: Any = 1, dtype: Any = "float32",
) -> ConvQuery:
    """Check ``select_conv2d_kernel``'s arguments: input ``(N, C, H, W)``, weight
    ``(K, C/groups, R, S)``.

    Raises:
        TypeError: non-integer sizes or arguments, a non-float dtype.
        ValueError: sizes below 1, groups that do not divide the channels, bad stride, padding
            or dilation, an empty output.

    Examples:
        >>> parse_conv2d(1, 3, 8, 8, 4, 3, 3).geometry.oh
        6
    """
    fn = "select_conv2d_kernel"
    dims = {"N": N, "C": C, "H": H, "W": W, "K": K, "R": R, "S": S}
    N, C, H, W, K, R, S = (int_arg(fn, n, v, 1) for n, v in dims.items())
    groups = int_arg(fn, "groups", groups, 1)
    dtype = float_dtype_arg(fn, dtype)
    cg = C // groups if C % groups == 0 else C  # conv_geometry names a groups mismatch
    g = conv_geometry(fn, (N, C, H, W), (K, cg, R, S), stride, padding, dilation, groups)
    return ConvQuery(g, dtype)


def winograd_applies(g: ConvGeometry) -> bool:
    """Whether F(2x2, 3x3) computes this convolution (3x3, stride 1, dilation 1, 1 group).

    Examples:
        >>> winograd_applies(parse_conv2d(1, 3, 8, 8, 4, 3, 3, padding=1).geometry)
        True
    """
    return (g.r, g.s, g.stride, g.dilation, g.groups) == (3, 3, (1, 1), (1, 1), 1)


def winograd_tiles(g: ConvGeometry) -> int:
    """The 2x2 output tiles of a Winograd F(2x2, 3x3) forward: its GEMMs' width.

    Examples:
        >>> winograd_tiles(parse_conv2d(128, 512, 7, 7, 512, 3, 3, 1, 1).geometry)
        2048
    """
    return g.n * -(-g.oh // 2) * -(-g.ow // 2)


def phase_data_applies(g: ConvGeometry) -> bool:
    """Whether ``CONV2D_IGEMM_PHASE`` computes this convolution's data gradient: a stride
    above 1 on either axis and no dilation (NOTE [ Phase-specialized data gradient ]).

    Examples:
        >>> phase_data_applies(parse_conv2d(1, 3, 8, 8, 4, 3, 3, stride=2).geometry)
        True
        >>> phase_data_applies(parse_conv2d(1, 3, 8, 8, 4, 3, 3, stride=2, dilation=2).geometry)
        False
    """
    return data_phased((g.r, g.s, *g.stride, *g.padding, *g.dilation))


def gemm_shaped(g: ConvGeometry) -> bool:
    """A 1x1, stride-1, unpadded, undilated, ungrouped convolution: a plain GEMM per image.

    Examples:
        >>> gemm_shaped(parse_conv2d(8, 64, 56, 56, 256, 1, 1).geometry)
        True
    """
    return ((g.r, g.s, g.stride, g.padding, g.dilation, g.groups)
            == (1, 1, (1, 1), (0, 0), (1, 1), 1))


def _narrow_wide(narrow: int, wide: int, limit: int) -> bool:
    return narrow <= limit < wide


def tiled_local_fits(profile: ExtendedDeviceProfile, g: ConvGeometry, dtype: str) -> bool:
    """Whether the tiled-local kernel's patch and weights fit half the device's local memory
    (always on the NumPy backend, which has no work-groups).

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> tiled_local_fits(extended_profile(None), parse_conv2d(1, 3, 8, 8, 4, 3, 3).geometry,
        ...                  "float32")
        True
    """
    if profile.local_mem_size == 0:
        return True
    width = 8 if dtype == "float64" else 4  # float16 computes in float
    need = ck.tiled_local_bytes(g.r, g.s, *g.stride, *g.dilation, width)
    return need <= profile.local_mem_size // 2


def conv2d_rule(profile: ExtendedDeviceProfile, q: ConvQuery) -> AnyVariant:
    """The conv2d kernel for ``q`` on this device; never one that does not apply.

    A gradient (``q.direction`` ``"data"`` or ``"weight"``), unless ``NETCL_CONV_WINOGRAD=0``:
    Winograd for a gradient of a Winograd geometry on an OpenCL CPU device for an input plane of
    at least 16x16, and on a GPU for the data gradient (a convolution of ``grad_out``) with at
    least 64 channels in and out and the weight gradient with at least 128 (64 on planes up to
    32x32; F(2x2) for float16: 256); else the column path
    (im2col) on CPU devices and for the data gradient of fewer than 9 input channels; else, for
    the data gradient of a strided, undilated convolution, the phase-specialized implicit GEMM
    (``CONV2D_IGEMM_PHASE``, unless ``NETCL_CONV_PHASE_DATA=0``); else the register-tiled
    implicit GEMM. The forward, first match wins (each measured fastest for its
    class: PoCL by ``benchmarks/bench_selector.py``, the H100 by
    ``benchmarks/bench_conv_layers.py``): an OpenCL CPU device (PoCL) and a Winograd geometry
    with an output plane of at least 16x16 -> Winograd F(2x2, 3x3) unless
    ``NETCL_CONV_WINOGRAD=0``; a CPU device (PoCL, the NumPy backend) -> im2col;
    ``NETCL_CONV_TILED_LOCAL=1`` and a non-1x1 convolution with an output plane of at most 32x32
    -> tiled-local (im2col where its window does not fit in local memory); a Winograd geometry
    with at least 64 input and output channels and an output plane of at least 16x16 or at
    least 512 2x2 output tiles (:func:`winograd_tiles`; 2048 for float16's F(2x2)) -> Winograd
    F(4x4) (float16: F(2x2)) unless
    ``NETCL_CONV_WINOGRAD=0``; a 1x1 stride-1 convolution (:func:`gemm_shaped`) between at
    most 64 and more than 64 channels -> im2col, which is the tuned GEMM there; otherwise (1x1,
    strided, dilated, grouped, few channels, small batches) the register-tiled implicit GEMM.

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> conv2d_rule(extended_profile(None), parse_conv2d(8, 64, 32, 32, 64, 3, 3, 1, 1)).name
        'CONV2D_IM2COL'
    """
    g = q.geometry
    if q.direction != "forward":
        return _gradient_rule(profile, q)
    winograd = env_flag("NETCL_CONV_WINOGRAD", True) and winograd_applies(g)
    tiled_local = env_flag("NETCL_CONV_TILED_LOCAL", None)  # unset: the measured rule
    if profile.opencl_cpu:
        if winograd and g.pixels >= CPU_WINOGRAD_MIN_OUTPUT:
            return V.CONV2D_WINOGRAD  # PoCL: 1.3-2x over im2col here
        return V.CONV2D_IM2COL  # small planes: im2col + packed GEMM
    if profile.device_type == "cpu":
        return V.CONV2D_IM2COL
    if tiled_local is True and g.pixels <= TILED_LOCAL_MAX_OUTPUT and (g.r, g.s) != (1, 1):
        if tiled_local_fits(profile, g, q.dtype):
            return V.CONV2D_TILED_LOCAL
        return V.CONV2D_IM2COL  # a window too large to stage
    # NOTE [ GPU conv2d rules ]: H100 through NVIDIA's OpenCL, batch 128 (bench_conv_layers,
    # four runs): Winograd is fastest for 3x3 stride 1 with at least 64 channels in and out on
    # planes from 16x16 (0.33 against the implicit GEMM's 0.37 ms at 64 channels on 32x32);
    # on smaller planes the 4-vector implicit GEMM ties or wins (256 on 8x8: 0.28 against
    # 0.29, 512 on 4x4: 0.32 against 0.36); with fewer channels (ResNet's 3-channel stem, the
    # digits CNN) and for every other geometry the implicit GEMM is fastest (1x1 stride 2:
    # 0.03 against 0.04-0.16 ms; 3x3 stride 2: 0.15-0.17 against tiled-local's 0.63-4.5 and
    # the GEMM family's 1.0-1.3 ms). ImageNet planes (ResNet-18/50, batch 128, 2025-11-25):
    # Winograd wins wherever there are at least 2048 2x2 tiles (512 channels on 7x7: 0.80
    # against 0.88 ms; 4x4 CIFAR planes, 512 tiles: 0.35 against 0.32); the 1x1 expansion
    # 64 -> 256 on 56x56 runs 0.40 ms as a GEMM against 0.59-0.76 as an implicit GEMM.
    min_tiles = (GPU_WINOGRAD_MIN_TILES_F4 if _gpu_winograd(q) == WINOGRAD_F4
                 else GPU_WINOGRAD_MIN_TILES)
    if (winograd and min(g.c, g.k) >= GPU_WINOGRAD_MIN_CHANNELS
            and (g.pixels >= GPU_WINOGRAD_MIN_OUTPUT or winograd_tiles(g) >= min_tiles)):
        return _gpu_winograd(q)
    if gemm_shaped(g) and _narrow_wide(min(g.c, g.k), max(g.c, g.k), GEMM_SHAPED_MAX_NARROW):
        return V.CONV2D_IM2COL
    return IMPLICIT_TILED


def _gpu_winograd(q: ConvQuery) -> AnyVariant:
    """:data:`GPU_WINOGRAD_VARIANT`, but F(2x2) for float16 (F(4x4) does not apply to it)."""
    return V.CONV2D_WINOGRAD if q.dtype == "float16" else GPU_WINOGRAD_VARIANT


def _winograd_weight(q: ConvQuery) -> bool:
    """Whether a GPU weight gradient of a Winograd geometry takes Winograd: F(4x4) from 128
    channels, or from 64 on planes up to 32x32; F(2x2) (float16) from 256 (its GEMMs' long
    reductions cost it below: 0.35 against 0.40 ms at 512 on an H100)."""
    g = q.geometry
    channels = min(g.c, g.k)
    if _gpu_winograd(q) != WINOGRAD_F4:
        return channels >= 256
    return channels >= GPU_WINOGRAD_WEIGHT_MIN_CHANNELS or (
        channels >= GPU_WINOGRAD_MIN_CHANNELS and g.pixels <= GPU_WINOGRAD_WEIGHT_MAX_OUTPUT)


def _gradient_rule(profile: ExtendedDeviceProfile, q: ConvQuery) -> AnyVariant:
    """A gradient's variant (:func:`conv2d_rule`): on GPUs mostly the register-tiled implicit
    GEMM (one kernel, no column buffer: the column path's im2col, col2im and batch sum were 29
    of the 78 ms of a ResNet-18 step on the H100), its phase-specialized kernel for strided,
    undilated data gradients, on CPU devices mostly the column path."""
    g = q.geometry
    winograd = env_flag("NETCL_CONV_WINOGRAD", True) and _winograd_applies(profile, q)
    if profile.device_type == "cpu":
        if profile.opencl_cpu and winograd and g.h * g.w >= CPU_WINOGRAD_MIN_OUTPUT:
            # 64 channels on 32x32, data: 2.6x (PoCL), 4.4x (Intel); weight: 1.15x, 1.5x
            return V.CONV2D_WINOGRAD
        return V.CONV2D_IM2COL
    if q.direction == "data":
        if g.cg < DATA_MIN_CHANNELS:
            return V.CONV2D_IM2COL  # 3 rows of C: 0.09 ms against the implicit GEMM's 0.28
        if winograd and min(g.c, g.k) >= GPU_WINOGRAD_MIN_CHANNELS:
            return _gpu_winograd(q)  # 0.29-0.36 ms against the implicit GEMM's 0.28-0.36
        if gemm_shaped(g) and (_narrow_wide(g.k, g.cg, DATA_GEMM_MAX_NARROW)
                               or _narrow_wide(g.cg, g.k, GEMM_SHAPED_MAX_NARROW)):
            # ResNet-50's 1x1 data gradients as a GEMM: 256 <- 64 on 56x56 0.37 against 0.56
            # ms, 256 <- 128 0.68 against 0.89, 64 <- 256 0.44 against 0.61
            return V.CONV2D_IM2COL
        if phase_data_applies(g) and env_flag("NETCL_CONV_PHASE_DATA", True):
            # strided, undilated: the phase-specialized kernel (NOTE [ Phase-specialized data
            # gradient ]; the phased IMPLICIT_TILED gather: H200 0.66x cuDNN at 128 -> 256
            # 3x3 stride 2 on 16x16, 0.265 ms against its own forward's 0.150); dilated
            # strided data gradients keep IMPLICIT_TILED
            return PHASE_DATA
    elif winograd and _winograd_weight(q):
        return _gpu_winograd(q)
    return IMPLICIT_TILED


def gemm_rows_columns(q: ConvQuery) -> tuple[int, int, int]:
    """``(M, N, KD)`` of the implicit GEMM a query computes per group (``_conv_igemm``).

    Examples:
        >>> gemm_rows_columns(ConvQuery(parse_conv2d(2, 3, 8, 8, 4, 3, 3).geometry,
        ...                             direction="data"))
        (3, 128, 36)
    """
    g = q.geometry
    if q.direction == "data":
        return g.cg, g.n * g.h * g.w, g.kg * g.r * g.s
    if q.direction == "weight":
        return g.kg, g.crs, g.n * g.pixels
    return g.kg, g.n * g.pixels, g.crs


def implicit_tiles(profile: ExtendedDeviceProfile, q: ConvQuery,
                   phase: bool = False) -> IgemmTiles:
    """The implicit GEMM's tiling for ``q``, fastest per class on the H100 (NOTE [ GPU conv2d
    rules ]; ``rows`` of C: output channels, input channels for the data gradient). The
    4-vector tilings (``IgemmTiles.vec``) ran 5-20% faster than the scalar ones except for
    the forward of 64 rows (ResNet's stem: 0.054 against 0.043 ms).

    - at most 32 rows: 32 x 64;
    - a weight gradient (its split reduction fills the device whatever the tiles): 128 x 128
      from 128 rows and 128 columns, 128 x 64 from 128 rows and 64 columns, else 64 x 64
      (scalar, more split, from 512 columns: :func:`implicit_split`);
    - a forward from 128 rows: 128 x 64 from 512 rows or for a 1x1 convolution, else the
      larger of 128 x 128 and 128 x 64 that still gives every other compute unit a tile, else
      64 x 64; scalar for a strided 1x1 of at most 256 rows;
    - a data gradient by phases (strided: NOTE [ Strided data gradient by phases ]) with at
      least 8192 columns per phase: scalar 128 x 128 from 128 rows where that gives every
      compute unit a tile, else scalar 64 x 64 (the 4-vector loads lose on strided phases;
      under 128 rows only for a 1x1);
    - any other data gradient: 128 x 128 from 128 rows where that gives every compute unit a
      tile, else 128 x 64 from 128 rows, else 64 x 64.

    ``phase`` (``CONV2D_IGEMM_PHASE``): from 128 rows the largest of 128 x 128, 128 x 64 and
    64 x 64 that gives every compute unit a tile, counting only its slots that have taps (a
    1x1 stride 2: one of four; 3x3 stride 2: two, ``phase_slots``), else 32 x 64; scalar or
    4-vector as above; under 128 rows as above. (Not yet measured on GPUs; the phased
    kernel's H200 figures: 256 -> 512 1x1 stride 2 on 8x8 best with 32 x 64, 0.062 against
    0.071-0.097 ms.)

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> q = ConvQuery(parse_conv2d(128, 128, 16, 16, 256, 3, 3, 2, 1).geometry)
        >>> implicit_tiles(extended_profile(None), q).label()
        '128x128x16/8x8v'
    """
    rows, columns, _ = gemm_rows_columns(q)
    g = q.geometry
    if rows <= 32:
        return TILINGS["32x64"]
    # NOTE [ GPU implicit-GEMM tiles ]: H100, ResNet-18/50 at batch 128 on CIFAR and ImageNet
    # planes (bench_conv_layers --set all --variants, 2025-11-25): weight gradients of 128+
    # rows by 64-256 columns (ResNet-50's 1x1s) 0.40-0.46 against 0.58-0.60 ms with 64 x 64;
    # forwards of 512+ rows or 1x1: 128 x 64 0.38-0.89 against 128 x 128's 0.40-1.09 ms;
    # strided 1x1 forwards of at most 256 rows: scalar 0.07-0.08 against 0.09-0.12 ms; phased
    # data gradients: scalar 128 x 128 1.24-1.83 against 4-vector 1.41-2.82 ms where a phase
    # is at least 8192 wide, the 4-vector tiles ahead below that (0.43 against 0.65 ms).
    strided_1x1 = (g.r, g.s) == (1, 1) and g.stride != (1, 1)
    if q.direction == "weight":
        if rows >= 128 and columns >= 128:
            return TILINGS["128x128v"]
        if rows >= 128 and columns >= 64:
            return TILINGS["128x64v"]
        return TILINGS["64x64" if columns >= WEIGHT_SPLIT_COLUMNS else "64x64v"]
    planes = g.groups
    phased = q.direction == "data" and data_phased(
        (g.r, g.s, *g.stride, *g.padding, *g.dilation))
    if phased:
        planes *= (sum(1 for slot in phase_slots(window_of_geometry(g))
                       if any(p[4] * p[5] for p in slot)) if phase
                   else g.stride[0] * g.stride[1])
        columns = -(-columns // (g.stride[0] * g.stride[1]))
    scalar = phased and columns >= PHASED_SCALAR_COLUMNS
    if rows < 128:
        return TILINGS["64x64" if q.direction == "forward" or (scalar and strided_1x1)
                       else "64x64v"]

    def count(name: str) -> int:
        t = TILINGS[name]
        return -(-rows // t.bm) * -(-columns // t.bn) * planes

    if q.direction == "data" and phase:
        for name in ("128x128", "128x64", "64x64"):  # the largest that fills the device
            if count(name) >= profile.compute_units:
                return TILINGS[name if scalar else name + "v"]
        return TILINGS["32x64"]
    if q.direction == "data":
        if count("128x128") >= profile.compute_units:
            return TILINGS["128x128" if scalar else "128x128v"]
        return TILINGS["64x64" if scalar else "128x64v"]
    suffix = "" if strided_1x1 and rows <= 256 else "v"
    order = ("128x64", "128x128") if rows >= 512 or (g.r, g.s) == (1, 1) else (
        "128x128", "128x64")
    for name in order:
        if 2 * count(name) >= profile.compute_units:
            return TILINGS[name + suffix]
    return TILINGS["64x64"]


def window_of_geometry(g: ConvGeometry) -> tuple[int, ...]:
    """``(r, s, sh, sw, ph, pw, dh, dw)`` of ``g`` (what the implicit GEMM compiles in)."""
    return (g.r, g.s, *g.stride, *g.padding, *g.dilation)


def implicit_split(q: ConvQuery, tiles: IgemmTiles) -> int | None:
    """Work-groups per compute unit for an implicit-GEMM weight gradient's split reduction
    (``config.extra["groups_per_unit"]``), or None for ``_conv_igemm``'s default: 8 for the
    scalar 64 x 64 tiles of a gradient at least ``WEIGHT_SPLIT_COLUMNS`` wide (64 channels on
    32x32: 0.47 ms against 0.58 with 4 and 0.53 with the 4-vector tiles).

    Examples:
        >>> q = ConvQuery(parse_conv2d(128, 64, 32, 32, 64, 3, 3, 1, 1).geometry, "float32",
        ...               "weight")
        >>> implicit_split(q, TILINGS["64x64"])
        8
    """
    _, columns, _ = gemm_rows_columns(q)
    wide = q.direction == "weight" and columns >= WEIGHT_SPLIT_COLUMNS
    return 8 if wide and tiles == TILINGS["64x64"] else None


def conv2d_config(profile: ExtendedDeviceProfile, variant: AnyVariant,
                  q: ConvQuery) -> KernelConfig:
    """``variant``'s config for ``q``: the implicit GEMM takes the tiles the matmul family
    chooses for the equivalent GEMM (``extra["gemm_variant"]`` names that kernel); every
    config records ``extra["output_shape"]`` ``(N, K, OH, OW)`` and ``extra["gemm_shape"]``.

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> q = parse_conv2d(1, 3, 8, 8, 4, 3, 3)
        >>> conv2d_config(extended_profile(None), KernelVariant.CONV2D_IM2COL, q).extra[
        ...     "output_shape"]
        (1, 4, 6, 6)
    """
    g = q.geometry
    gemm = (g.n * g.pixels, g.kg, g.crs) if q.direction == "forward" else gemm_rows_columns(q)
    cfg = default_config(variant)
    if variant is IMPLICIT_TILED or variant is PHASE_DATA:
        t = implicit_tiles(profile, q, phase=variant is PHASE_DATA)
        split = implicit_split(q, t)
        cfg = dataclasses.replace(cfg, tile_m=t.bm, tile_n=t.bn, tile_k=t.bk,
                                  local_size_2d=(t.lx, t.ly), work_per_thread=t.tm,
                                  use_vectorization=t.vec,
                                  extra={**cfg.extra, "tiles": t.label(),
                                         **({} if split is None else
                                            {"groups_per_unit": split})})
    if variant is V.CONV2D_IMPLICIT_GEMM:
        mq = MatmulQuery(*gemm, dtype=q.dtype)
        mm = matmul_config(profile, matmul_rule(profile, mq), mq)
        if mm.variant is not V.MATMUL_NAIVE:
            # the GEMM kernel whose tiles these are (the conv op runs that kernel)
            extra = {**mm.extra, "gemm_variant": mm.variant.name}
            cfg = dataclasses.replace(mm, variant=variant, extra=extra)
    cfg.extra.update(dtype=q.dtype, output_shape=(g.n, g.k, g.oh, g.ow), gemm_shape=gemm)
    return cfg


def _tiled_local_applies(profile: ExtendedDeviceProfile, q: ConvQuery) -> bool:
    return q.direction == "forward" and tiled_local_fits(profile, q.geometry, q.dtype)


def _winograd_applies(profile: ExtendedDeviceProfile, q: ConvQuery) -> bool:
    g = q.geometry
    if q.direction == "data":  # a convolution of grad_out with padding 2 - P
        return winograd_applies(g) and max(g.padding) <= 2
    return winograd_applies(g)  # the forward and the weight gradient


def _winograd4_applies(profile: ExtendedDeviceProfile, q: ConvQuery) -> bool:
    # float16 stores the 6x6 transformed tiles in half: errors of 1-2% of the output's largest
    # value (NOTE [ Winograd F(4x4) accuracy ]), so half precision keeps F(2x2)
    return q.dtype != "float16" and _winograd_applies(profile, q)


def _phase_data_applies(profile: ExtendedDeviceProfile, q: ConvQuery) -> bool:
    return q.direction == "data" and phase_data_applies(q.geometry)


def _forward_only(profile: ExtendedDeviceProfile, q: ConvQuery) -> bool:
    return q.direction == "forward"


CONV2D_FAMILY: SelectionFamily[ConvQuery] = register_family(
    SelectionFamily("conv2d", parse=parse_conv2d, key=ConvQuery.key, rule=conv2d_rule,
                    configure=conv2d_config,
                    switches=lambda: (env_flag("NETCL_CONV_WINOGRAD", True),
                                      env_flag("NETCL_CONV_TILED_LOCAL", None),
                                      env_flag("NETCL_CONV_PHASE_DATA", True))),
    DEFAULTS,
    applies={V.CONV2D_WINOGRAD: _winograd_applies, WINOGRAD_F4: _winograd4_applies,
             V.CONV2D_TILED_LOCAL: _tiled_local_applies,
             V.CONV2D_NAIVE: _forward_only, V.CONV2D_IMPLICIT_GEMM: _forward_only,
             PHASE_DATA: _phase_data_applies},
)
