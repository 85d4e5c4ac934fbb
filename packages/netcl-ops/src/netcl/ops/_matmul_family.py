"""The GEMM kernel family: :class:`GemmParams` in, program + kernel name + launch geometry out.

:func:`gemm_params` turns a selector :class:`~netcl.core.kernel_selector.KernelConfig` into
the compile-time parameters of one kernel (tiles the kernels cannot run fall back to the
variant's defaults); :func:`gemm_family` (a :func:`~netcl.core.kernels.family.kernel_family`
keyed by the frozen, hashable ``GemmParams``) renders and builds it once per context, with a
:class:`GemmGeometry` saying how it is launched. ``run_gemm`` (``_matmul_launch``) keeps the
prepared launches in front of it. The family's golden matrix: the four variants' default
configs per dtype, the register-tiled kernel's vector forms (NVIDIA's 16 x 8 blocks among
them), its swizzled form and its split-K form, the staging transpose, the vectorized
kernel's CPU form and the implicit-GEMM form the convolution runs (B gathered by
``_conv_kernels``' loader).

Examples:
    >>> from netcl.core.kernel_selector import KernelVariant, default_config
    >>> p = gemm_params(default_config(KernelVariant.MATMUL_TILED), "float32", False, True)
    >>> src = gemm_family.source(p)
    >>> src.kernels, src.geometry.grid(100, 60, 2)
    (('gemm_tiled_nt',), ((64, 112, 2), (16, 16, 1)))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from netcl.core.capabilities import device_type_name
from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.kernel_selector import AnyVariant, KernelConfig, KernelVariant, default_config
from netcl.core.kernels.family import Geometry, KernelSource, kernel_family

from . import _conv_kernels as ck
from . import _matmul_kernels as mk
from ._matmul_blocked import warp_layout_ok
from ._matmul_params import GemmParams

__all__ = [
    "SPLIT_K_SUM",
    "TRANSPOSE",
    "VARIANT_NAMES",
    "GemmGeometry",
    "for_device",
    "gemm_family",
    "gemm_kernel",
    "gemm_launch",
    "gemm_params",
    "layout_config",
    "uses_fma",
]

VARIANT_NAMES: dict[AnyVariant, str] = {
    KernelVariant.MATMUL_NAIVE: mk.NAIVE,
    KernelVariant.MATMUL_TILED: mk.TILED,
    KernelVariant.MATMUL_REGISTER_TILED: mk.REGISTER_TILED,
    KernelVariant.MATMUL_VECTORIZED: mk.VECTORIZED,
}

SPLIT_K_SUM = "split_k_sum"
"""The ``GemmParams.variant`` of split-K's reduction (the sum of the partial products)."""
TRANSPOSE = "transpose"
"""The ``GemmParams.variant`` of the staging transpose (NOTE [ Staging for tn ])."""

def _pow2_at_most(n: int, cap: int) -> int:
    return max(1, min(cap, 1 << max(0, (max(1, n) - 1).bit_length())))


@dataclass(frozen=True)
class GemmGeometry(Geometry):
    """How a GEMM kernel is launched: ``(N, M, batch)`` covered by work-groups of ``lx x ly``
    work-items, each group a ``bn x bm`` tile of C; ``lx == 0``: the naive kernel, one
    work-item per element of C in groups of up to 16 x 16 (powers of two fitting the shape).
    """

    lx: int = 0
    ly: int = 0
    bm: int = 1
    bn: int = 1

    def grid(self, M: int, N: int, batch: int
             ) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        """``(global, local)`` of one launch over ``batch`` ``M x N`` products."""
        if self.lx == 0:
            lx, ly = _pow2_at_most(N, 16), _pow2_at_most(M, 16)
            return (-(-N // lx) * lx, -(-M // ly) * ly, batch), (lx, ly, 1)
        lx, ly = self.lx, self.ly
        return (-(-N // self.bn) * lx, -(-M // self.bm) * ly, batch), (lx, ly, 1)


def _matmul_golden() -> Iterator[tuple[str, tuple[GemmParams]]]:
    labels = {"naive": KernelVariant.MATMUL_NAIVE, "tiled": KernelVariant.MATMUL_TILED,
              "register_tiled": KernelVariant.MATMUL_REGISTER_TILED,
              "vectorized": KernelVariant.MATMUL_VECTORIZED}
    for label, variant in labels.items():  # default configs, GPU flavour (fma), no transposes
        for dt in FLOAT_DTYPES:
            yield f"matmul/{label}-{dt}", (gemm_params(default_config(variant), dt, False, False),)
    reg = default_config(KernelVariant.MATMUL_REGISTER_TILED)
    for ta, tb in ((False, True), (True, False)):  # aligned operands: vector loads and stores
        p = dataclasses.replace(gemm_params(reg, "float32", ta, tb), vec_a=True, vec_b=True,
                                vec_c=True)
        yield f"matmul/register_tiled-float32-{'tn' if ta else 'nt'}-vec", (p,)
    # NVIDIA's large-tile form (16 x 8 per work-item, BK 16 in nn: by_layout) and the
    # swizzled work-group order with explicit padding (on 16 x 8 blocks of a smaller tile)
    big = dataclasses.replace(default_config(KernelVariant.MATMUL_REGISTER_TILED), tile_m=128,
                              tile_n=128, tile_k=8, work_per_thread=16,
                              extra={"micro_n": 8, "warp_n": 8, "by_layout": {"nn": {
                                  "tile_k": 16}}})
    yield "matmul/register_tiled-float32-nn-vec-16x8", (dataclasses.replace(
        gemm_params(big, "float32", False, False), vec_a=True, vec_b=True, vec_c=True),)
    swz = dataclasses.replace(big, tile_m=64, tile_n=64, extra={
        "micro_n": 8, "warp_n": 8, "swizzle": 4, "lds_pad": 8})
    yield "matmul/register_tiled-float32-tt-swizzle", (gemm_params(swz, "float32", True, True),)
    # a split K whose last group per output tile merges the slices (NOTE [ Split-K ] in
    # ._matmul_launch), with the portable fence (NVIDIA's PTX one would not build elsewhere)
    yield "matmul/register_tiled-float32-nt-vec-split", (dataclasses.replace(
        gemm_params(big, "float32", False, True), vec_a=True, vec_b=True, vec_c=True,
        split_merge=True),)
    yield "matmul/transpose-float32", (GemmParams(TRANSPOSE, "float32"),)
    cpu = dataclasses.replace(gemm_params(_cpu_vectorized_config(), "float32", False, False),
                              vec_c=True, fma=False)
    yield "matmul/vectorized-float32-cpu", (cpu,)
    implicit = default_config(KernelVariant.CONV2D_IMPLICIT_GEMM)
    for dt in FLOAT_DTYPES:  # the convolution's implicit GEMM: B gathered from the input
        p = dataclasses.replace(gemm_params(implicit, dt, False, False),
                                b_loader=ck.IMPLICIT_B_LOADER, extra_params=ck.IMPLICIT_PARAMS)
        yield f"conv2d/implicit_gemm-{dt}", (p,)


def _cpu_vectorized_config() -> KernelConfig:
    """The shape of the vectorized config an OpenCL CPU device runs (one work-item per group,
    6 x 16 micro-tiles of 8-wide vectors), for a 96 x 128 problem."""
    return dataclasses.replace(
        default_config(KernelVariant.MATMUL_VECTORIZED), tile_m=96, tile_n=128, tile_k=256,
        work_per_thread=6, local_size_2d=(1, 1), vector_width=8, extra={"micro_n": 16},
    )


@kernel_family("ops.matmul", golden=_matmul_golden)
def gemm_family(p: GemmParams) -> KernelSource:
    """The GEMM kernel ``p`` describes, with its :class:`GemmGeometry` (``variant``
    ``SPLIT_K_SUM``: split-K's reduction, one work-item per element of C, launched by the 1-D
    rule)."""
    if p.variant == SPLIT_K_SUM:
        return KernelSource(mk.SPLIT_K_SUM, ("gemm_split_k_sum",), p.dtype, Geometry())
    if p.variant == TRANSPOSE:  # grid(R, C, batch): 32 x 32 tiles of an R x C matrix
        return KernelSource(mk.TRANSPOSE, ("gemm_transpose",), p.dtype,
                            GemmGeometry(lx=32, ly=8, bm=32, bn=32))
    geometry = (GemmGeometry() if p.variant == mk.NAIVE
                else GemmGeometry(lx=p.lx, ly=p.ly, bm=p.bm, bn=p.bn))
    return KernelSource(mk.gemm_source(p), (mk.gemm_kernel_name(p),), p.dtype, geometry)


def gemm_kernel(context: Any, p: GemmParams) -> Any:
    """The ``cl.Kernel`` for parameters ``p`` on ``context`` (built once per context)."""
    return gemm_family(context, p).kernel


def gemm_launch(context: Any, p: GemmParams) -> tuple[Any, GemmGeometry]:
    """The ``cl.Kernel`` for ``p`` on ``context`` and its :class:`GemmGeometry`.

    Raises:
        ValueError: ``p`` is split-K's reduction (a 1-D launch).
    """
    built = gemm_family(context, p)
    geometry = built.source.geometry
    if not isinstance(geometry, GemmGeometry):
        raise ValueError(f"gemm_launch: {built.source.kernels[0]} is not a 2-D GEMM launch")
    return built.kernel, geometry


# -- kernel parameters ----------------------------------------------------------------------


def uses_fma(device: Any) -> bool:
    """Whether GEMM kernels for ``device`` multiply-add with ``fma()`` (not on CPU devices)."""
    return device is None or device_type_name(int(device.type)) != "cpu"


def for_device(p: GemmParams, device: Any) -> GemmParams:
    """``p`` with the device's flags (``fma`` off on CPU devices)."""
    return dataclasses.replace(p, fma=uses_fma(device))


# NOTE [ Per-layout GEMM tiles ]
# The selector chooses from (M, N, K, dtype) alone, but the fastest register-tiled kernel
# also depends on the transposes (measured on an H100: 16x8 blocks with BK 8 ran nt and tn
# 0.80x cuBLAS at 4096^3 but nn and tt 0.67x, where BK 16 ran them 0.69-0.72x). A config's
# ``extra["by_layout"]`` maps "nn"/"nt"/"tn"/"tt" to overrides of its tile fields (tile_m,
# tile_n, tile_k, work_per_thread) and extra keys, applied when its kernel is derived.
_TILE_FIELDS = ("tile_m", "tile_n", "tile_k", "work_per_thread")


def layout_config(config: KernelConfig, trans_a: bool, trans_b: bool) -> KernelConfig:
    """``config`` with its ``extra["by_layout"]`` overrides for these transposes applied.

    Examples:
        >>> from netcl.core.kernel_selector import KernelVariant, default_config
        >>> cfg = default_config(KernelVariant.MATMUL_REGISTER_TILED)
        >>> cfg.extra["by_layout"] = {"nt": {"tile_k": 8, "micro_n": 8}}
        >>> c = layout_config(cfg, False, True)
        >>> (c.tile_k, c.extra["micro_n"]), layout_config(cfg, True, True) is cfg
        ((8, 8), True)
    """
    by_layout = config.extra.get("by_layout")
    if not by_layout:
        return config
    override = by_layout.get(("t" if trans_a else "n") + ("t" if trans_b else "n"))
    if not override:
        return config
    tiles = [int(override.get(k, getattr(config, k))) for k in _TILE_FIELDS]
    extra = {k: v for k, v in override.items() if k not in _TILE_FIELDS}
    return dataclasses.replace(config, tile_m=tiles[0], tile_n=tiles[1], tile_k=tiles[2],
                               work_per_thread=tiles[3], extra={**config.extra, **extra})


def gemm_params(
    config: KernelConfig, dtype: str, trans_a: bool, trans_b: bool, max_wg: int = 1024
) -> GemmParams:
    """Compile-time GEMM parameters for ``config`` (alignment flags unset).

    Tile shapes the kernels cannot run (work-groups above ``max_wg``, tiles that do not divide
    into the work-group) fall back to the variant's defaults.
    """
    name = VARIANT_NAMES.get(config.variant)
    if name is None:  # a conv2d config: extra["gemm_variant"] names the GEMM its tiles are for
        gemm = str(config.extra.get("gemm_variant", "MATMUL_TILED"))
        name = VARIANT_NAMES.get(KernelVariant.__members__.get(gemm, KernelVariant.MATMUL_TILED),
                                 mk.TILED)
    base = GemmParams(name, dtype, trans_a=trans_a, trans_b=trans_b)
    config = layout_config(config, trans_a, trans_b)
    bm, bn, bk = config.tile_m, config.tile_n, max(1, config.tile_k)
    if name == mk.NAIVE:
        return base
    if name == mk.TILED:
        tm = max(1, config.work_per_thread)
        if bm % tm or bn * bm // tm > max_wg:
            bm, bn, bk, tm = 16, 16, 16, 1
        return dataclasses.replace(base, bm=bm, bn=bn, bk=bk, tm=tm, tn=1, lx=bn, ly=bm // tm)
    if name == mk.REGISTER_TILED:
        # work_per_thread rows x extra["micro_n"] columns per work-item (default: square)
        tm = max(1, config.work_per_thread)
        tn = max(1, int(config.extra.get("micro_n", tm)))
        ok = bm % tm == 0 and bn % tn == 0 and (bm // tm) * (bn // tn) <= max_wg
        ok = ok and bk % 4 == 0 and bm % 4 == 0 and bn % 4 == 0
        if not ok:
            bm, bn, bk, tm, tn = 64, 64, 16, 4, 4
        warp_n = int(config.extra.get("warp_n", 0))
        if not warp_layout_ok(bn // tn, bm // tm, warp_n):
            warp_n = 0
        swizzle = max(0, int(config.extra.get("swizzle", 0)))
        pad = int(config.extra.get("lds_pad", -1))
        return dataclasses.replace(base, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, lx=bn // tn,
                                   ly=bm // tm, warp_n=warp_n, swizzle=swizzle,
                                   lds_pad=pad if pad == -2 or (pad >= 0 and pad % 4 == 0)
                                   else -1)
    # vectorized: work-group local_size_2d; micro-tiles of work_per_thread x extra["micro_n"]
    lx, ly = config.local_size_2d
    tm = max(1, config.work_per_thread)
    vw = config.vector_width if config.vector_width in (2, 4, 8, 16) else 4
    tn = int(config.extra.get("micro_n", vw))
    tiles = (bm // tm) * (bn // max(1, tn))
    ok = tn >= vw and tn % vw == 0 and bm % tm == 0 and bn % tn == 0 and lx * ly <= max_wg
    if not ok or lx * ly > tiles:
        bm, bn, bk, tm, tn, vw, lx, ly = 64, 64, 16, 4, 4, 4, 16, 16
    return dataclasses.replace(base, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, vw=vw, lx=lx, ly=ly)

