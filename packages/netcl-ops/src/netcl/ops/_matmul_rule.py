"""The matmul family's selection policy: which GEMM kernel, with which tiles, per device.

Registered with netcl-core's generic selector as family ``"matmul"`` (the query is a
:class:`MatmulQuery`); ``KernelSelector.select_matmul_kernel`` and
``select_matmul_config`` resolve through it. The conv2d family reuses :func:`matmul_rule` and
:func:`matmul_config` for the GEMM its implicit-GEMM kernel runs.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from netcl.core.capabilities import kernel_strategy
from netcl.core.device_profile import ExtendedDeviceProfile
from netcl.core.kernel_selector import KernelConfig, KernelVariant, default_config
from netcl.core.selection import (
    AnyVariant,
    SelectionFamily,
    float_dtype_arg,
    int_arg,
    register_family,
)

__all__ = [
    "MATMUL_FAMILY",
    "MatmulQuery",
    "matmul_config",
    "matmul_rule",
    "parse_matmul",
    "split_k",
    "tuned_vendor",
]

V = KernelVariant

# Parameters shared by the families' defaults: scalar code, and no local memory either.
SCALAR_PARAMS: dict[str, Any] = {"use_vectorization": False, "vector_width": 1}
NO_LOCAL_PARAMS: dict[str, Any] = {"use_local_memory": False, **SCALAR_PARAMS}

NAIVE_MAX_WORK = 32**3  # M*N*K below this: launch overhead dominates, no tiling
LARGE_WORK = 512**3  # M*N*K from here: register tiling pays off
LARGE_WORK_TUNED = 256**3  # ... earlier on the vendor-tuned GPUs
REGISTER_MIN_DIM = 64  # min(M, N) below this: too few register tiles, stay tiled
NVIDIA_TUNED_ARCHS = ("turing", "ampere", "ada", "hopper", "blackwell")
AMD_TUNED_ARCHS = ("rdna2", "rdna3")

# Tiles (outputs per work-group side) and the reduction step of each kernel.
TILED_TILE = 16  # the portable tiled kernel: 16x16 outputs, one per work-item
TILE_K = 16
REGISTER_TILE = 64  # register-tiled and vectorized: 64x64 outputs, 4x4 per work-item
BIG_REGISTER_TILE = 128  # NVIDIA, once there are enough of them: 8x8 per work-item
# NVIDIA's register-tiled configs, measured on an H100 with benchmarks/sweep_gemm.py (kernel
# times against cuBLAS, TF32 off; benchmarks/results/h100/sweep_gemm.txt):
# - at least one 128x128 tile per compute unit: 128x128x8 tiles, 16x8 outputs per work-item
#   (128 work-items); unpadded local tiles in nn and tt, a swizzle of 8 tile rows in tn
#   (2048-8192^3: 0.86-0.93x; 8x8 blocks ran 0.72-0.80x); unaligned sizes run nn, nt and tt
#   as tn through a transposed copy (4095^3: tn 0.78x, the others 0.67x);
# - else 64x64x16 tiles with 8x4 per work-item, swizzled in bands of 4 (1024^3: 0.71-0.83x,
#   4x4 blocks 0.62-0.67x);
# - below one 64x64 tile per compute unit (no split K): 32x32x16 with 4x4 (512^3 and a
#   classifier's 256x1000x512: 0.68-0.70x; the 32x32 tiled kernel ran 0.28x);
# - a split K (see split_k): 64x64x16 tiles with 8x4 (128x4096x4096 and 4096x128x4096:
#   nn and tt 0.76-0.87x; 128x64x16 with 8x4 ran 0.64-0.80x), nt and tn on 128x128x8 tiles
#   with 16x8 and twice the slices (0.81-0.85x).
# Warps of 8x4 work-items in all of them.
NVIDIA_BIG = {"tile_m": 128, "tile_n": 128, "tile_k": 8, "work_per_thread": 16,
              "micro_n": 8}
NVIDIA_BIG_EXTRA: dict[str, Any] = {
    "by_layout": {"nn": {"lds_pad": -2}, "tt": {"lds_pad": -2},
                  "tn": {"lds_pad": 0, "swizzle": 8}},
    "stage_tn": ("nn", "nt", "tt"), "stage_unaligned_only": True,
}
# float64: 16x8 doubles per work-item would need 256 registers for the accumulators alone
NVIDIA_BIG_FLOAT64 = {"tile_m": 128, "tile_n": 128, "tile_k": 8, "work_per_thread": 8,
                      "micro_n": 8}
NVIDIA_MID = {"tile_m": 64, "tile_n": 64, "tile_k": 16, "work_per_thread": 8,
              "micro_n": 4}
NVIDIA_MID_EXTRA: dict[str, Any] = {"swizzle": 4}
NVIDIA_SMALL = {"tile_m": 32, "tile_n": 32, "tile_k": 16, "work_per_thread": 4,
                "micro_n": 4}
# H200, sweep_gemm --set 4 (2026-11-29, split K merged in one launch, "k2m"/"k4m"): with
# K >= SPLIT_DEEP_K float32 products below one 128x128 tile per compute unit run 128x64x16
# tiles with 8x4 in 2 slices (1024^3: 0.79-0.85x cuBLAS, 64x64 unsplit 0.71-0.83x; 1000^3:
# 0.73-0.79x, 0.63-0.74x), and below one 64x64 tile per unit 64x64x16 with 8x4 in 4 slices
# (512^3: 0.72-0.78x, 32x32 unsplit 0.67-0.68x; 256x1000x512: 0.73-0.77x, 0.67-0.69x);
# with K = 256 the unsplit tiles stayed ahead (1000x512x256: 0.63-0.74x, split 0.61-0.67x).
NVIDIA_MID_SPLIT = {"tile_m": 128, "tile_n": 64, "tile_k": 16, "work_per_thread": 8,
                    "micro_n": 4}
SPLIT_DEEP_K = 512
NVIDIA_SPLIT = {"tile_m": 64, "tile_n": 64, "tile_k": 16, "work_per_thread": 8,
                "micro_n": 4}
# ... but nt and tn with 128x128x8 tiles, 16x8 blocks and twice the slices (sweep 3,
# 128x4096x4096 and 4096x128x4096: nt 0.81-0.83x, tn 0.85x; 64x64 8x4 ran them 0.70-0.71x)
NVIDIA_SPLIT_WIDE = {"tile_m": 128, "tile_n": 128, "tile_k": 8, "work_per_thread": 16,
                     "micro_n": 8}
SPLIT_WIDE_MAX = 16
SPLIT_TILE = (128, 64)  # the tiles split_k counts (its thresholds were set with them)
NVIDIA_WARP_N = 8
# Split-K (NVIDIA): fewer 128x64 tiles than compute units and K from SPLIT_MIN_K
# (128x4096x4096: 64 tiles on 132 units) -> K in 2 x compute units / tiles slices (2..8).
# Up to 2026-11-29 only below half the units: a transformer's weight gradients 1536x384x8192
# (72 tiles) ran unsplit on 144 64x64 tiles at 0.49x cuBLAS on an H200 (gemm_shapes.py).
SPLIT_MIN_K = 2048
SPLIT_MAX = 8
NVIDIA_TILED_TILE = 32  # NVIDIA's tiled kernel: 4 outputs per work-item down a column
RDNA_VECTOR = 4  # RDNA's float4 kernel needs N and K multiples of this
RDNA_WAVE = 32
# OpenCL CPU devices: packed panels of up to CPU_PANEL_ROWS rows in micro-tiles of
# CPU_MICRO_ROWS x CPU_MICRO_COLS (half as many columns in float64), one work-item per group.
CPU_PANEL_ROWS = 96
CPU_MICRO_ROWS = 6
CPU_MICRO_COLS = 16
CPU_TILE_K = 256
CPU_PANEL_COLS = 128  # for N >= 2 * CPU_PANEL_COLS; 64 for N > 32; else 16

# NOTE [ Default parameters per variant ]
# What each variant runs with before any device override; also what force_variant returns.
DEFAULTS: dict[AnyVariant, dict[str, Any]] = {
    V.MATMUL_NAIVE: {"tile_m": 1, "tile_n": 1, "tile_k": 1, "work_per_thread": 1,
                     **NO_LOCAL_PARAMS},
    V.MATMUL_TILED: {"tile_m": TILED_TILE, "tile_n": TILED_TILE, "tile_k": TILE_K,
                     "work_per_thread": 1, **SCALAR_PARAMS},
    V.MATMUL_REGISTER_TILED: {"tile_m": REGISTER_TILE, "tile_n": REGISTER_TILE, "tile_k": TILE_K},
    V.MATMUL_VECTORIZED: {"tile_m": REGISTER_TILE, "tile_n": REGISTER_TILE, "tile_k": TILE_K},
}


@dataclass(frozen=True)
class MatmulQuery:
    """One GEMM to choose for: ``(M, K) @ (K, N)`` in ``dtype``."""

    M: int
    N: int
    K: int
    dtype: str = "float32"


def parse_matmul(M: Any, N: Any, K: Any, dtype: Any = "float32") -> MatmulQuery:
    """Check ``select_matmul_kernel``'s arguments.

    Raises:
        TypeError: non-integer sizes, a non-float dtype.
        ValueError: a size below 1, an unknown dtype.

    Examples:
        >>> parse_matmul(2, 3, 4, "half")
        MatmulQuery(M=2, N=3, K=4, dtype='float16')
    """
    fn = "select_matmul_kernel"
    M, N, K = (int_arg(fn, n, v, 1) for n, v in (("M", M), ("N", N), ("K", K)))
    return MatmulQuery(M, N, K, float_dtype_arg(fn, dtype))


def tuned_vendor(profile: ExtendedDeviceProfile) -> Literal["nvidia", "rdna", None]:
    """Which vendor overrides apply: none under the portable strategy.

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> tuned_vendor(extended_profile(None)) is None
        True
    """
    if kernel_strategy(profile) == "portable":
        return None
    if profile.vendor_family == "nvidia" and profile.architecture in NVIDIA_TUNED_ARCHS:
        return "nvidia"
    if profile.vendor_family == "amd" and profile.architecture in AMD_TUNED_ARCHS:
        return "rdna"
    return None


def matmul_rule(profile: ExtendedDeviceProfile, q: MatmulQuery) -> KernelVariant:
    """The GEMM kernel for ``q`` on this device; every matmul variant computes every GEMM.

    Rules: ``M*N*K < 32**3`` -> naive; an OpenCL CPU device -> vectorized (packed panels);
    ``M*N*K >= 512**3`` (``256**3`` on NVIDIA Turing/Ampere/Ada/Hopper/Blackwell and AMD
    RDNA2/3) with ``min(M, N) >= 64`` -> register-tiled (on RDNA2/3 the float4 vectorized
    kernel when ``N`` and ``K`` are multiples of 4); otherwise tiled.

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> matmul_rule(extended_profile(None), MatmulQuery(256, 256, 256)).name
        'MATMUL_TILED'
    """
    M, N, K = q.M, q.N, q.K
    work = M * N * K
    if work < NAIVE_MAX_WORK:
        return V.MATMUL_NAIVE
    if profile.opencl_cpu:  # measured on PoCL: packed panels beat local-memory tiling 2-5x
        return V.MATMUL_VECTORIZED
    vendor = tuned_vendor(profile)
    large = LARGE_WORK_TUNED if vendor else LARGE_WORK
    if work < large or min(M, N) < REGISTER_MIN_DIM:
        return V.MATMUL_TILED
    if vendor == "rdna" and N % RDNA_VECTOR == 0 and K % RDNA_VECTOR == 0:
        return V.MATMUL_VECTORIZED
    return V.MATMUL_REGISTER_TILED


def split_k(profile: ExtendedDeviceProfile, q: MatmulQuery) -> int:
    """K slices for NVIDIA's register-tiled GEMM (0: none): see SPLIT_MIN_K.

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> split_k(extended_profile(None), MatmulQuery(128, 4096, 4096))
        0
    """
    if tuned_vendor(profile) != "nvidia" or q.K < SPLIT_MIN_K or q.dtype == "float16":
        return 0
    tiles = -(-q.M // SPLIT_TILE[0]) * -(-q.N // SPLIT_TILE[1])
    units = max(profile.compute_units, 1)
    if tiles >= units:
        return 0
    return max(2, min(SPLIT_MAX, 2 * units // tiles))


def _nvidia_tiles(profile: ExtendedDeviceProfile, q: MatmulQuery,
                  split: int) -> tuple[dict[str, int], dict[str, Any]]:
    """NVIDIA's register-tiled tiles for ``q`` and their extra knobs (copies)."""
    units = max(profile.compute_units, 1)
    if split:
        wide = {**NVIDIA_SPLIT_WIDE, "split_k": min(SPLIT_WIDE_MAX, 2 * split)}
        return dict(NVIDIA_SPLIT), {"by_layout": {"nt": dict(wide), "tn": dict(wide)}}
    # 128x128 tiles only once there is one per compute unit: at 1024^3 an H100 (132 units)
    # got 64 of them and ran 64x64 tiles 1.3x faster (bench_selector)
    if units <= (q.M // BIG_REGISTER_TILE) * (q.N // BIG_REGISTER_TILE):
        if q.dtype == "float64":
            return dict(NVIDIA_BIG_FLOAT64), {}
        return dict(NVIDIA_BIG), copy.deepcopy(NVIDIA_BIG_EXTRA)
    deep = q.dtype == "float32" and q.K >= SPLIT_DEEP_K
    if units <= (q.M // REGISTER_TILE) * (q.N // REGISTER_TILE):
        if deep:
            return dict(NVIDIA_MID_SPLIT), {"split_k": 2}
        return dict(NVIDIA_MID), dict(NVIDIA_MID_EXTRA)
    if deep:
        return dict(NVIDIA_SPLIT), {"split_k": 4}
    return dict(NVIDIA_SMALL), {}


def _cpu_panels(M: int, N: int, dtype: str) -> dict[str, Any]:
    """The OpenCL CPU device's blocking of the vectorized kernel (a CPU GEMM block)."""
    wide = dtype != "float64"
    # rows per panel: at most CPU_PANEL_ROWS, a multiple of the micro-tile, few rows wasted
    panels = -(-M // CPU_PANEL_ROWS)
    rows = -(-M // panels)
    tile_m = CPU_MICRO_ROWS * -(-rows // CPU_MICRO_ROWS)
    tile_n = CPU_PANEL_COLS if N >= 2 * CPU_PANEL_COLS else 64 if N > 32 else 16
    return {"tile_m": tile_m, "tile_n": tile_n, "tile_k": CPU_TILE_K,
            "work_per_thread": CPU_MICRO_ROWS, "local_size_2d": (1, 1),
            "vector_width": 8 if wide else 4,
            "micro_n": CPU_MICRO_COLS if wide else CPU_MICRO_COLS // 2}


def matmul_config(profile: ExtendedDeviceProfile, variant: AnyVariant,
                  q: MatmulQuery) -> KernelConfig:
    """``variant``'s config for ``q``: its defaults with this device's tile overrides.

    OpenCL CPU devices: vectorized with panels of up to 96 rows (a multiple of 6) and 128
    columns, 6 x 16 micro-tiles (6 x 8 in float64), one work-item per work-group. Under the
    ``optimized`` strategy NVIDIA uses 32x32 tiles (tiled) and, register-tiled, 128x128x8
    tiles with 16x8 per work-item (8x8 in float64) when there are at least as many 128x128
    output tiles as compute units (per-layout padding and swizzle in ``extra["by_layout"]``;
    unaligned nn, nt and tt staged as tn, ``extra["stage_tn"]``), else 64x64x16 tiles with
    8x4 per work-item (``extra["swizzle"]`` 4), or 32x32x16 with 4x4 below one 64x64 tile
    per compute unit, in warps of 8x4 work-items (``extra["warp_n"]``); where :func:`split_k`
    splits K (``extra["split_k"]`` slices), 64x64x16 tiles with 8x4 per work-item (nt and
    tn: 128x128x8 with 16x8 and twice the slices);
    RDNA2/3 record ``extra["wave_size"] = 32``.

    Examples:
        >>> from netcl.core.device_profile import extended_profile
        >>> q = MatmulQuery(64, 64, 64)
        >>> matmul_config(extended_profile(None), KernelVariant.MATMUL_TILED, q).tile_m
        16
    """
    cfg = default_config(variant)
    cfg.extra["dtype"] = q.dtype
    vendor = tuned_vendor(profile)
    if profile.opencl_cpu and variant is V.MATMUL_VECTORIZED:
        panel = _cpu_panels(q.M, q.N, q.dtype)
        micro_n = panel.pop("micro_n")
        return dataclasses.replace(cfg, **panel, extra={**cfg.extra, "micro_n": micro_n})
    if vendor == "nvidia":
        if variant is V.MATMUL_TILED:  # 4 outputs per item down a column
            return dataclasses.replace(
                cfg, tile_m=NVIDIA_TILED_TILE, tile_n=NVIDIA_TILED_TILE, tile_k=TILE_K,
                work_per_thread=4, local_size_2d=(NVIDIA_TILED_TILE, 8))
        if variant is V.MATMUL_REGISTER_TILED:
            split = split_k(profile, q)
            tiles, more = _nvidia_tiles(profile, q, split)
            extra = {**cfg.extra, "micro_n": tiles.pop("micro_n"), "warp_n": NVIDIA_WARP_N,
                     "split_k": split, **more}
            return dataclasses.replace(cfg, tile_m=tiles["tile_m"], tile_n=tiles["tile_n"],
                                       tile_k=tiles["tile_k"],
                                       work_per_thread=tiles["work_per_thread"], extra=extra)
    if vendor == "rdna" and variant is V.MATMUL_VECTORIZED:
        cfg.extra["wave_size"] = RDNA_WAVE
    return cfg


MATMUL_FAMILY: SelectionFamily[MatmulQuery] = register_family(
    SelectionFamily("matmul", parse=parse_matmul, key=lambda q: (q.M, q.N, q.K, q.dtype),
                    rule=matmul_rule, configure=matmul_config),
    DEFAULTS,
)
