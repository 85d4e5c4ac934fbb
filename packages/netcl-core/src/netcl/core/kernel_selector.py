"""Choose a kernel variant and its launch parameters by shape, dtype and device.

:class:`KernelSelector` is a policy over an :class:`ExtendedDeviceProfile`. Each ``select_*``
decision is cached per (op, shape, dtype, flags, environment switches), so a shape is decided
once per process. The order of precedence for a decision is:

1. :func:`force_variant` (thread-local) or ``NETCL_FORCE_<FAMILY>=<VARIANT_NAME>``: the
   variant with its default parameters (for tests and benchmarks);
2. a winner recorded by :meth:`KernelSelector.autotune` (in memory, and persisted per device);
3. the rules documented on each ``select_*`` method.

Examples:
    >>> sel = get_kernel_selector()          # the NumPy backend's selector
    >>> sel.select_conv2d_kernel(8, 64, 32, 32, 64, 3, 3, padding=1).variant.name
    'CONV2D_IM2COL'
    >>> with force_variant(KernelVariant.MATMUL_TILED):
    ...     sel.select_matmul_kernel(4, 4, 4).variant.name
    'MATMUL_TILED'
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import json
import os
import threading
import time
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from netcl.core._paths import (
    CacheEntryError,
    cache_dir,
    discard_entry,
    read_entry,
    write_entry,
)
from netcl.core._selector_args import (
    _bool_arg,
    _float_dtype,
    _int_arg,
    _json_key,
    _pair_arg,
    _tuple_key,
)
from netcl.core.capabilities import kernel_strategy
from netcl.core.device_profile import ExtendedDeviceProfile, extended_profile
from netcl.core.dtypes import canonical_dtype, itemsize
from netcl.core.env import env_choice, env_flag
from netcl.core.kernels.primitives import KernelSpec as KernelSpec

__all__ = [
    "KernelConfig",
    "KernelSelector",
    "KernelSpec",
    "KernelVariant",
    "force_variant",
    "get_kernel_selector",
    "select_conv2d_config",
    "select_matmul_config",
]

IntPair = int | tuple[int, int]
Family = Literal["matmul", "conv2d", "elementwise", "reduction", "batchnorm"]
FAMILIES: tuple[Family, ...] = ("matmul", "conv2d", "elementwise", "reduction", "batchnorm")
REDUCTION_KINDS = ("sum", "mean", "max", "min", "prod", "argmax", "argmin")

_MATMUL_NAIVE_MAX_WORK = 32**3  # M*N*K below this: launch overhead dominates, no tiling
_MATMUL_LARGE_WORK = 512**3  # M*N*K from here: register tiling pays off
_MATMUL_LARGE_WORK_TUNED = 256**3  # ... earlier on the vendor-tuned GPUs
_ELEMENTWISE_VECTOR_MIN = 1024
_REDUCTION_SEQUENTIAL_MAX = 256
_REDUCTION_PARALLEL_MAX = 64 * 1024
_TILED_LOCAL_MAX_OUTPUT = 32 * 32  # output pixels per (image, channel) plane
_TILED_LOCAL_MAX_CHANNELS = 128  # per group, input and output
_CPU_WINOGRAD_MIN_OUTPUT = 16 * 16
_NVIDIA_TUNED_ARCHS = ("turing", "ampere", "ada", "hopper", "blackwell")
_AMD_TUNED_ARCHS = ("rdna2", "rdna3")
_TUNE_FORMAT = 2  # 1: plain JSON; 2: a checksummed entry holding JSON


class KernelVariant(enum.Enum):
    """Every kernel implementation the selector knows; :attr:`family` groups them by op."""

    MATMUL_NAIVE = "matmul_naive"
    MATMUL_TILED = "matmul_tiled"
    MATMUL_REGISTER_TILED = "matmul_register_tiled"
    MATMUL_VECTORIZED = "matmul_vectorized"
    CONV2D_NAIVE = "conv2d_naive"
    CONV2D_IM2COL = "conv2d_im2col"
    CONV2D_IMPLICIT_GEMM = "conv2d_implicit_gemm"
    CONV2D_TILED_LOCAL = "conv2d_tiled_local"
    CONV2D_WINOGRAD = "conv2d_winograd"
    ELEMENTWISE_SCALAR = "elementwise_scalar"
    ELEMENTWISE_VECTORIZED = "elementwise_vectorized"
    REDUCTION_SEQUENTIAL = "reduction_sequential"
    REDUCTION_PARALLEL = "reduction_parallel"
    REDUCTION_WORKGROUP = "reduction_workgroup"
    BATCHNORM_NAIVE = "batchnorm_naive"
    BATCHNORM_FUSED = "batchnorm_fused"

    @property
    def family(self) -> Family:
        """The op family: ``"matmul"``, ``"conv2d"``, ``"elementwise"``, ``"reduction"``, ...

        Examples:
            >>> KernelVariant.CONV2D_WINOGRAD.family
            'conv2d'
        """
        return cast(Family, self.value.split("_", 1)[0])


@dataclass
class KernelConfig:
    """Tile and launch parameters of one decision.

    A work-group computes a ``tile_m`` x ``tile_n`` output tile, stepping ``tile_k`` along the
    reduced dimension; ``local_size_2d`` is its (dim 0, dim 1) shape and each work-item
    computes ``work_per_thread`` outputs per tiled dimension. Configs returned by
    :class:`KernelSelector` are shared through its cache: treat them as read-only.

    Examples:
        >>> KernelConfig(KernelVariant.MATMUL_TILED).tile_m
        32
    """

    variant: KernelVariant
    tile_m: int = 32
    tile_n: int = 32
    tile_k: int = 8
    work_per_thread: int = 4
    local_size_1d: int = 256
    local_size_2d: tuple[int, int] = (16, 16)
    use_local_memory: bool = True
    use_vectorization: bool = True
    vector_width: int = 4
    extra: dict[str, Any] = field(default_factory=dict)


_SCALAR: dict[str, Any] = {"use_vectorization": False, "vector_width": 1}
_NO_LOCAL: dict[str, Any] = {"use_local_memory": False, **_SCALAR}

# NOTE [ Default parameters per variant ]
# What each variant runs with before any device override; also what force_variant returns.
_DEFAULTS: dict[KernelVariant, dict[str, Any]] = {
    KernelVariant.MATMUL_NAIVE: {"tile_m": 1, "tile_n": 1, "tile_k": 1, "work_per_thread": 1,
                                 **_NO_LOCAL},
    KernelVariant.MATMUL_TILED: {"tile_m": 16, "tile_n": 16, "tile_k": 16, "work_per_thread": 1,
                                 **_SCALAR},
    KernelVariant.MATMUL_REGISTER_TILED: {"tile_m": 64, "tile_n": 64, "tile_k": 16},
    KernelVariant.MATMUL_VECTORIZED: {"tile_m": 64, "tile_n": 64, "tile_k": 16},
    KernelVariant.CONV2D_NAIVE: dict(_NO_LOCAL),
    KernelVariant.CONV2D_IM2COL: {},
    KernelVariant.CONV2D_IMPLICIT_GEMM: {"tile_m": 16, "tile_n": 16, "tile_k": 16,
                                         "work_per_thread": 1, **_SCALAR},
    KernelVariant.CONV2D_TILED_LOCAL: {"tile_m": 16, "tile_n": 16, "work_per_thread": 1,
                                       **_SCALAR},
    KernelVariant.CONV2D_WINOGRAD: {"work_per_thread": 1, "extra": {"winograd": "F(2x2,3x3)"}},
    KernelVariant.ELEMENTWISE_SCALAR: {"work_per_thread": 1, **_NO_LOCAL},
    KernelVariant.ELEMENTWISE_VECTORIZED: {"use_local_memory": False},
    KernelVariant.REDUCTION_SEQUENTIAL: {"local_size_1d": 1, "work_per_thread": 1, **_NO_LOCAL},
    KernelVariant.REDUCTION_PARALLEL: {},
    KernelVariant.REDUCTION_WORKGROUP: {"extra": {"stages": 2}},
    KernelVariant.BATCHNORM_NAIVE: {"work_per_thread": 1, **_NO_LOCAL},
    KernelVariant.BATCHNORM_FUSED: {"work_per_thread": 1, **_NO_LOCAL},
}


def default_config(variant: KernelVariant) -> KernelConfig:
    """A fresh config of ``variant`` with its default parameters (no device overrides).

    Examples:
        >>> default_config(KernelVariant.MATMUL_NAIVE).use_local_memory
        False
    """
    params = dict(_DEFAULTS[variant])
    params["extra"] = dict(params.get("extra", {}))
    return KernelConfig(variant, **params)


# --- forcing ----------------------------------------------------------------------------

_forced = threading.local()


@contextlib.contextmanager
def force_variant(*variants: KernelVariant) -> Iterator[None]:
    """Make ``select_*`` return these variants (one per family) in this thread while active.

    The forced config carries the variant's default parameters (see :func:`default_config`).
    It wins over autotuned winners and rules, and over ``NETCL_FORCE_<FAMILY>``.

    Raises:
        TypeError: an argument is not a :class:`KernelVariant`.
        ValueError: two variants of one family.

    Examples:
        >>> with force_variant(KernelVariant.REDUCTION_WORKGROUP):
        ...     get_kernel_selector().select_reduction_kernel(10).variant.name
        'REDUCTION_WORKGROUP'
    """
    chosen: dict[Family, KernelVariant] = {}
    for v in variants:
        if not isinstance(v, KernelVariant):
            raise TypeError(f"force_variant: expected KernelVariant members, got {v!r}")
        if v.family in chosen:
            raise ValueError(
                f"force_variant: one variant per family, got {chosen[v.family].name} and {v.name}"
            )
        chosen[v.family] = v
    previous: dict[Family, KernelVariant] = getattr(_forced, "variants", {})
    _forced.variants = {**previous, **chosen}
    try:
        yield
    finally:
        _forced.variants = previous


def _forced_variant(family: Family) -> KernelVariant | None:
    variants: dict[Family, KernelVariant] = getattr(_forced, "variants", {})
    if family in variants:
        return variants[family]
    env = f"NETCL_FORCE_{family.upper()}"
    valid = [v.name for v in KernelVariant if v.family == family]
    try:
        choice = env_choice(env, valid)
    except ValueError:
        raw = os.environ[env]
        raise ValueError(
            f"{env}={raw!r} names no {family} kernel; valid: {', '.join(valid)}"
        ) from None
    return None if choice is None else KernelVariant[choice.upper()]


# --- the selector -----------------------------------------------------------------------

_TunedKey = tuple[str, Hashable]


class KernelSelector:
    """Decide kernel variants and launch parameters for one device.

    Args:
        profile: the device's :class:`ExtendedDeviceProfile` (``extended_profile(device)``).

    Examples:
        >>> sel = KernelSelector(extended_profile(None))
        >>> sel.select_matmul_kernel(8, 8, 8).variant.name
        'MATMUL_NAIVE'
        >>> sel.select_elementwise_kernel(4096).vector_width
        4
    """

    def __init__(self, profile: ExtendedDeviceProfile) -> None:
        if not isinstance(profile, ExtendedDeviceProfile):
            raise TypeError(
                f"KernelSelector: profile must be an ExtendedDeviceProfile, got {profile!r}"
            )
        self.profile = profile
        self._decisions: dict[tuple[Any, ...], KernelConfig] = {}
        self._tuned: dict[_TunedKey, KernelVariant] = {}
        self._tuned_loaded = False
        self._lock = threading.Lock()
        self._generation = 0

    def clear_cache(self) -> None:
        """Drop every cached decision and in-memory tuned winner (the JSON file stays).

        Examples:
            >>> sel = KernelSelector(extended_profile(None))
            >>> sel.select_reduction_kernel(10).variant.name
            'REDUCTION_SEQUENTIAL'
            >>> sel.clear_cache()
        """
        with self._lock:
            self._decisions.clear()
            self._tuned.clear()
            self._tuned_loaded = False
            self._generation += 1

    def epoch(self, family: Family) -> tuple[KernelVariant | None, int]:
        """A token that changes whenever ``family``'s decisions may change.

        Forcing (:func:`force_variant`, ``NETCL_FORCE_<FAMILY>``), a new autotune winner and
        :meth:`clear_cache` each change it: callers that cache work derived from a
        ``select_*`` answer (the elementwise ops' launch plans) key on it.

        Examples:
            >>> sel = KernelSelector(extended_profile(None))
            >>> before = sel.epoch("elementwise")
            >>> with force_variant(KernelVariant.ELEMENTWISE_SCALAR):
            ...     sel.epoch("elementwise") != before
            True
        """
        return _forced_variant(family), self._generation

    # -- the shared decision path --

    def _decide(
        self, family: Family, shape_key: tuple[Any, ...], env_key: tuple[Any, ...],
        rules: Callable[[], KernelVariant], configure: Callable[[KernelVariant], KernelConfig],
    ) -> KernelConfig:
        forced = _forced_variant(family)
        if forced is not None:
            return self._fit_device(default_config(forced))
        tuned = self.lookup_tuned(family, shape_key)
        key = (family, shape_key, env_key, kernel_strategy(self.profile), tuned)
        config = self._decisions.get(key)
        if config is None:
            config = self._fit_device(configure(tuned if tuned is not None else rules()))
            self._decisions[key] = config
        return config

    def _fit_device(self, cfg: KernelConfig) -> KernelConfig:
        """Shrink work-groups and ``tile_k`` to what the device accepts."""
        if self.profile.local_mem_size == 0:  # the NumPy backend: no work-groups to fit
            return cfg
        max_wg = max(1, self.profile.max_work_group_size)
        d0, d1 = cfg.local_size_2d
        tile_m, tile_n = cfg.tile_m, cfg.tile_n
        while d0 * d1 > max_wg:  # halve the larger side and the tile it covers
            if d0 >= d1:
                d0, tile_n = d0 // 2, max(1, tile_n // 2)
            else:
                d1, tile_m = d1 // 2, max(1, tile_m // 2)
        tile_k = cfg.tile_k
        if cfg.use_local_memory:
            width = itemsize(cfg.extra.get("dtype", "float32"))
            while tile_k > 1 and (tile_m + tile_n) * tile_k * width > self.profile.local_mem_size:
                tile_k //= 2
        return dataclasses.replace(cfg, tile_m=tile_m, tile_n=tile_n, tile_k=tile_k,
                                   local_size_1d=min(cfg.local_size_1d, max_wg),
                                   local_size_2d=(d0, d1))

    def _tuned_vendor(self) -> Literal["nvidia", "rdna", None]:
        """Which vendor overrides apply: none under the portable strategy."""
        p = self.profile
        if kernel_strategy(p) == "portable":
            return None
        if p.vendor_family == "nvidia" and p.architecture in _NVIDIA_TUNED_ARCHS:
            return "nvidia"
        if p.vendor_family == "amd" and p.architecture in _AMD_TUNED_ARCHS:
            return "rdna"
        return None

    # -- matmul --

    def select_matmul_kernel(self, M: int, N: int, K: int, dtype: Any = "float32") -> KernelConfig:
        """Choose the matmul kernel for ``(M, K) @ (K, N)``.

        Rules: ``M*N*K < 32**3`` -> naive; an OpenCL CPU device -> vectorized, with CPU
        blocking (panels of up to 96 rows, a multiple of 6, and 128 columns; 6 x 16
        micro-tiles; one work-item per work-group); ``M*N*K >= 512**3`` (``256**3`` on NVIDIA
        Turing/Ampere/Ada/Hopper and AMD RDNA2/3) with ``min(M, N) >= 64`` -> register-tiled
        (on those NVIDIA GPUs only with at least one 64x64 output tile per compute unit);
        otherwise tiled. Under the ``optimized`` strategy NVIDIA uses 32x32 tiles (tiled) and
        128x128 tiles, 8x8 per work-item, when there are at least as many 128x128 output
        tiles as compute units (register-tiled); AMD
        RDNA2/3 uses the float4 vectorized kernel when ``N`` and ``K`` are multiples of 4.
        The tuned winner for key ``(M, N, K, dtype)`` wins over the rules.

        Examples:
            >>> get_kernel_selector().select_matmul_kernel(256, 256, 256).variant.name
            'MATMUL_TILED'
        """
        fn = "select_matmul_kernel"
        M, N, K = (_int_arg(fn, n, v, 1) for n, v in (("M", M), ("N", N), ("K", K)))
        dt = _float_dtype(fn, dtype)
        return self._decide("matmul", (M, N, K, dt), (), lambda: self._matmul_rule(M, N, K),
                            lambda v: self._matmul_config(v, M, N, dt))

    def _matmul_rule(self, M: int, N: int, K: int) -> KernelVariant:
        work = M * N * K
        if work < _MATMUL_NAIVE_MAX_WORK:
            return KernelVariant.MATMUL_NAIVE
        if self._opencl_cpu():  # measured on PoCL: packed panels beat local-memory tiling 2-5x
            return KernelVariant.MATMUL_VECTORIZED
        vendor = self._tuned_vendor()
        large = _MATMUL_LARGE_WORK_TUNED if vendor else _MATMUL_LARGE_WORK
        if work < large or min(M, N) < 64:
            return KernelVariant.MATMUL_TILED
        tiles64 = (M // 64) * (N // 64)
        if vendor == "nvidia" and tiles64 < self.profile.compute_units:
            # fewer 64x64 register tiles than compute units leaves the GPU part idle: at
            # 512^3 an H100 (132 units, 64 such tiles) ran the 32x32 tiled kernel faster
            return KernelVariant.MATMUL_TILED
        if vendor == "rdna" and N % 4 == 0 and K % 4 == 0:
            return KernelVariant.MATMUL_VECTORIZED
        return KernelVariant.MATMUL_REGISTER_TILED

    def _opencl_cpu(self) -> bool:
        """An OpenCL CPU device (PoCL, Intel's CPU runtime); not the NumPy backend."""
        p = self.profile
        return p.device_type == "cpu" and p.vendor_family != "numpy"

    def _matmul_config(self, variant: KernelVariant, M: int, N: int, dtype: str) -> KernelConfig:
        cfg = default_config(variant)
        cfg.extra["dtype"] = dtype
        if self._opencl_cpu() and variant is KernelVariant.MATMUL_VECTORIZED:
            # one work-item per work-group runs 6 x 16 micro-tiles (6 x 8 in float64) of
            # 8-wide (4-wide) vectors over panels packed in local memory: a CPU GEMM block
            wide = dtype != "float64"
            micro_n = 16 if wide else 8
            # rows per panel: at most 96, a multiple of the 6-row micro-tile, few rows wasted
            panels = -(-M // 96)
            rows = -(-M // panels)
            tile_m = 6 * -(-rows // 6)
            return dataclasses.replace(
                cfg, tile_m=tile_m,
                tile_n=128 if N >= 256 else 64 if N > 32 else 16, tile_k=256,
                work_per_thread=6, local_size_2d=(1, 1), vector_width=8 if wide else 4,
                extra={**cfg.extra, "micro_n": micro_n},
            )
        if self._tuned_vendor() == "nvidia":
            if variant is KernelVariant.MATMUL_TILED:  # 4 outputs per item down a column
                return dataclasses.replace(
                    cfg, tile_m=32, tile_n=32, tile_k=16, work_per_thread=4, local_size_2d=(32, 8)
                )
            big_tiles = (M // 128) * (N // 128)
            if variant is KernelVariant.MATMUL_REGISTER_TILED and big_tiles >= max(
                    self.profile.compute_units, 1):
                # 128x128 tiles only once there is one per compute unit: at 1024^3 an H100
                # (132 units) got 64 of them and ran 64x64 tiles 1.3x faster (bench_selector)
                return dataclasses.replace(cfg, tile_m=128, tile_n=128, work_per_thread=8)
        if self._tuned_vendor() == "rdna" and variant is KernelVariant.MATMUL_VECTORIZED:
            cfg.extra["wave_size"] = 32
        return cfg

    # -- conv2d --

    def select_conv2d_kernel(
        self, N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: IntPair = 1,
        padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1, dtype: Any = "float32",
    ) -> KernelConfig:
        """Choose the conv2d kernel for input ``(N, C, H, W)`` and weight ``(K, C/groups, R, S)``.

        Rules, first match wins (each measured fastest for its class by
        ``benchmarks/bench_selector.py``): an OpenCL CPU device (PoCL) and a 3x3, stride 1,
        dilation 1, one-group convolution with an output plane of at least 16x16 ->
        Winograd F(2x2, 3x3) unless ``NETCL_CONV_WINOGRAD=0``; a CPU device (PoCL, the
        NumPy backend) -> im2col; 1x1 -> implicit GEMM; an output plane of at most 32x32 and
        at most 128 input and output channels per group, and channels x pixels at most 64 Ki ->
        tiled-local; 3x3, stride 1,
        dilation 1, groups 1 -> Winograd unless ``NETCL_CONV_WINOGRAD=0``; otherwise implicit
        GEMM, with the matmul tiles of the equivalent GEMM.
        ``NETCL_CONV_TILED_LOCAL=1`` makes every non-1x1 convolution with an output plane of at
        most 32x32 tiled-local; ``NETCL_CONV_TILED_LOCAL=0`` never picks it (the routing of
        the spec page, whose default for the variable is 0; unset, the measured rule above
        applies).
        ``extra["output_shape"]`` is ``(N, K, OH, OW)``. The tuned key is
        ``(N, C, H, W, K, R, S, stride, padding, dilation, groups, dtype)`` with pairs.

        Examples:
            >>> sel = KernelSelector(extended_profile(None))
            >>> sel.select_conv2d_kernel(1, 3, 8, 8, 4, 3, 3).extra["output_shape"]
            (1, 4, 6, 6)
        """
        fn = "select_conv2d_kernel"
        dims = {"N": N, "C": C, "H": H, "W": W, "K": K, "R": R, "S": S}
        N, C, H, W, K, R, S = (_int_arg(fn, n, v, 1) for n, v in dims.items())
        st = _pair_arg(fn, "stride", stride, 1)
        pad = _pair_arg(fn, "padding", padding, 0)
        dil = _pair_arg(fn, "dilation", dilation, 1)
        groups = _int_arg(fn, "groups", groups, 1)
        dt = _float_dtype(fn, dtype)
        if C % groups or K % groups:
            raise ValueError(f"{fn}: groups must divide C and K, got C={C}, K={K}, groups={groups}")
        oh = (H + 2 * pad[0] - dil[0] * (R - 1) - 1) // st[0] + 1
        ow = (W + 2 * pad[1] - dil[1] * (S - 1) - 1) // st[1] + 1
        if oh < 1 or ow < 1:
            raise ValueError(
                f"{fn}: empty output {oh}x{ow} for input {H}x{W}, kernel {R}x{S}, stride {st}, "
                f"padding {pad}, dilation {dil}"
            )
        winograd = env_flag("NETCL_CONV_WINOGRAD", True)
        tiled_local = env_flag("NETCL_CONV_TILED_LOCAL", None)  # unset: the measured rule
        gemm = (N * oh * ow, K // groups, C // groups * R * S)

        def rules() -> KernelVariant:
            # NOTE [ Conv2d rules ]: each branch is the fastest variant bench_selector measured
            # for that size class (PoCL on a 2-core EPYC VM; an H100 through NVIDIA's driver).
            winograd_shape = (R, S, st, dil, groups) == (3, 3, (1, 1), (1, 1), 1) and winograd
            small_plane = oh * ow <= _TILED_LOCAL_MAX_OUTPUT
            if self._opencl_cpu():
                if winograd_shape and oh * ow >= _CPU_WINOGRAD_MIN_OUTPUT:
                    return KernelVariant.CONV2D_WINOGRAD  # PoCL: 1.3-2x over im2col here
                return KernelVariant.CONV2D_IM2COL  # small planes: im2col + packed GEMM
            if self.profile.device_type == "cpu":
                return KernelVariant.CONV2D_IM2COL
            if R == 1 and S == 1:
                return KernelVariant.CONV2D_IMPLICIT_GEMM
            if tiled_local is True and small_plane:  # NETCL_CONV_TILED_LOCAL=1
                return KernelVariant.CONV2D_TILED_LOCAL
            # H100: tiled-local 1.2-3x over Winograd and implicit GEMM for up to 128 channels
            # on planes up to 32x32 with at most 64 Ki channel-pixels (the digits CNN, ResNet's
            # 32x32 and 16x16 stages); with more channels or pixels Winograd wins (its GEMMs
            # fill the GPU: 128 channels on 28x28 ran 2.5x faster). NETCL_CONV_TILED_LOCAL=0
            # restores the spec's routing (Winograd, else implicit GEMM).
            width = max(C, K) // groups
            narrow = width <= _TILED_LOCAL_MAX_CHANNELS and width * oh * ow <= 64 * 1024
            if tiled_local is None and small_plane and narrow:
                return KernelVariant.CONV2D_TILED_LOCAL
            if winograd_shape:
                return KernelVariant.CONV2D_WINOGRAD
            return KernelVariant.CONV2D_IMPLICIT_GEMM

        def configure(variant: KernelVariant) -> KernelConfig:
            cfg = default_config(variant)
            if variant is KernelVariant.CONV2D_IMPLICIT_GEMM:
                mm = self._matmul_config(self._matmul_rule(*gemm), gemm[0], gemm[1], dt)
                if mm.variant is not KernelVariant.MATMUL_NAIVE:
                    # the GEMM kernel whose tiles these are (the conv op runs that kernel)
                    extra = {**mm.extra, "gemm_variant": mm.variant.name}
                    cfg = dataclasses.replace(mm, variant=variant, extra=extra)
            cfg.extra.update(dtype=dt, output_shape=(N, K, oh, ow), gemm_shape=gemm)
            return cfg

        shape_key = (N, C, H, W, K, R, S, st, pad, dil, groups, dt)
        return self._decide("conv2d", shape_key, (winograd, tiled_local), rules, configure)

    # -- elementwise, reduction, batchnorm --

    def select_elementwise_kernel(self, n: int, dtype: Any = "float32") -> KernelConfig:
        """Choose the elementwise kernel for ``n`` elements.

        Above 1024 elements: vectorized, width 8 where the device's preferred vector width
        for the dtype (half for float16, float otherwise) is 8 or more, else 4. Otherwise
        scalar. Tuned key: ``(n, dtype)``.

        Examples:
            >>> get_kernel_selector().select_elementwise_kernel(100).variant.name
            'ELEMENTWISE_SCALAR'
        """
        fn = "select_elementwise_kernel"
        n = _int_arg(fn, "n", n, 0)
        dt = canonical_dtype(dtype, op=fn)
        p = self.profile
        preferred = (
            p.preferred_vector_width_half if dt == "float16" else p.preferred_vector_width_float
        )

        def configure(variant: KernelVariant) -> KernelConfig:
            cfg = default_config(variant)
            if variant is KernelVariant.ELEMENTWISE_VECTORIZED:
                cfg.vector_width = 8 if preferred >= 8 else 4
            cfg.extra["dtype"] = dt
            return cfg

        def rules() -> KernelVariant:
            if n > _ELEMENTWISE_VECTOR_MIN:
                return KernelVariant.ELEMENTWISE_VECTORIZED
            return KernelVariant.ELEMENTWISE_SCALAR

        return self._decide("elementwise", (n, dt), (), rules, configure)

    def select_reduction_kernel(self, n: int, kind: str = "sum") -> KernelConfig:
        """Choose the reduction kernel for ``n`` elements and ``kind`` (sum, mean, max, ...).

        Sequential below 256 elements, and always on an OpenCL CPU device; one parallel
        work-group below 64 Ki, multi-stage work-group reduction above.
        ``extra["use_subgroups"]`` is set where the device has subgroups. Tuned key: ``(n, kind)``.

        Examples:
            >>> get_kernel_selector().select_reduction_kernel(1000, "max").variant.name
            'REDUCTION_PARALLEL'
        """
        fn = "select_reduction_kernel"
        n = _int_arg(fn, "n", n, 0)
        if kind not in REDUCTION_KINDS:
            valid = ", ".join(REDUCTION_KINDS)
            raise ValueError(f"{fn}: kind must be one of {valid}, got {kind!r}")

        def rules() -> KernelVariant:
            if n < _REDUCTION_SEQUENTIAL_MAX or self._opencl_cpu():
                # PoCL: one work item per output looping over its elements beat the
                # work-group kernels at every size measured, 1.2-17x (bench_selector)
                return KernelVariant.REDUCTION_SEQUENTIAL
            if n < _REDUCTION_PARALLEL_MAX:
                return KernelVariant.REDUCTION_PARALLEL
            return KernelVariant.REDUCTION_WORKGROUP

        def configure(variant: KernelVariant) -> KernelConfig:
            cfg = default_config(variant)
            if variant is not KernelVariant.REDUCTION_SEQUENTIAL and self.profile.has_subgroups:
                cfg.extra["use_subgroups"] = True
            return cfg

        return self._decide("reduction", (n, kind), (), rules, configure)

    def select_batchnorm_kernel(
        self, N: int, C: int, HW: int, training: bool, fuse_relu: bool = False,
        dtype: Any = "float32",
    ) -> KernelConfig:
        """Choose the batch-norm kernel: fused BN+ReLU when ``fuse_relu`` and not ``training``.

        Tuned key: ``(N, C, HW, training, fuse_relu, dtype)``.

        Examples:
            >>> get_kernel_selector().select_batchnorm_kernel(8, 16, 64, False, True).variant.name
            'BATCHNORM_FUSED'
        """
        fn = "select_batchnorm_kernel"
        N, C, HW = (_int_arg(fn, n, v, 1) for n, v in (("N", N), ("C", C), ("HW", HW)))
        training = _bool_arg(fn, "training", training)
        fuse_relu = _bool_arg(fn, "fuse_relu", fuse_relu)
        dt = _float_dtype(fn, dtype)

        def rules() -> KernelVariant:
            if fuse_relu and not training:
                return KernelVariant.BATCHNORM_FUSED
            return KernelVariant.BATCHNORM_NAIVE

        def configure(variant: KernelVariant) -> KernelConfig:
            cfg = default_config(variant)
            cfg.extra["dtype"] = dt
            return cfg

        shape_key = (N, C, HW, training, fuse_relu, dt)
        return self._decide("batchnorm", shape_key, (), rules, configure)

    # -- autotuning --

    def _tuned_key(self) -> dict[str, str]:
        """What the winners file is for; stored in it and checked when it is read."""
        p = self.profile
        return {"store": "autotune", "format": str(_TUNE_FORMAT), "vendor": p.vendor,
                "name": p.name, "driver_version": p.driver_version}

    def tuned_path(self) -> Path:
        """The file holding this device's winners (named from vendor, name and driver).

        A checksummed cache entry (``netcl.core._paths.write_entry``) whose content is JSON:
        ``{"winners": [{"op": ..., "key": [...], "variant": ...}, ...]}``.

        Raises:
            OSError: the cache folder cannot be created.
        """
        p = self.profile
        ident = f"{p.vendor}\0{p.name}\0{p.driver_version}".encode()
        return cache_dir("autotune") / f"{hashlib.sha256(ident).hexdigest()[:20]}.winners"

    def _read_tuned(self) -> dict[_TunedKey, KernelVariant]:
        """The stored winners; a missing file gives none, a bad one is deleted with a warning."""
        try:
            path = self.tuned_path()
            content = read_entry(path, self._tuned_key())
        except FileNotFoundError:
            return {}
        except CacheEntryError as exc:  # truncated, corrupt, or another device's file
            discard_entry(exc.path, exc.reason, "its winners will be tuned again", stacklevel=5)
            return {}
        except OSError as exc:
            warnings.warn(f"KernelSelector: ignoring unreadable autotune cache: {exc!r}",
                          RuntimeWarning, stacklevel=4)
            return {}
        try:
            data = json.loads(content)
            entries = [(str(e["op"]), e["key"], KernelVariant[e["variant"]])
                       for e in data["winners"]]
            if not all(isinstance(key, list) for _, key, _ in entries):
                raise TypeError("a key is not a list")
            return {(op, _tuple_key(key)): variant for op, key, variant in entries}
        except (ValueError, KeyError, TypeError, RecursionError) as exc:  # a sound file whose
            # winners this netcl does not know (a variant renamed since): tune them again
            discard_entry(path, f"unknown winners ({exc!r})", "its winners will be tuned again",
                          stacklevel=5)
            return {}

    def _ensure_tuned_loaded(self) -> None:
        if self._tuned_loaded:
            return
        with self._lock:
            if not self._tuned_loaded:
                self._tuned = {**self._read_tuned(), **self._tuned}
                self._tuned_loaded = True

    def lookup_tuned(self, op: str, key: Hashable) -> KernelVariant | None:
        """The autotuned winner for ``(op, key)``, from memory or this device's JSON file.

        Examples:
            >>> KernelSelector(extended_profile(None)).lookup_tuned("no-such-op", (1,)) is None
            True
        """
        self._ensure_tuned_loaded()
        return self._tuned.get((op, key))

    def autotune(
        self,
        op: str,
        key: tuple[Any, ...],
        candidates: Mapping[KernelVariant, Callable[[], None]],
        repeats: int = 3,
        retune: bool = False,
    ) -> KernelVariant:
        """Time each candidate, keep the fastest for ``(op, key)`` and persist it per device.

        Each callable runs once to warm up (build, first-launch costs), then ``repeats``
        times under ``time.perf_counter``; it must block until its work is done. The best
        time of each decides. A candidate that raises is skipped with a warning. When
        ``op`` is a family name (``"matmul"``, ``"conv2d"``, ...), ``select_*`` returns the
        winner for the key documented there. Unless ``retune``, a known winner that is
        among the candidates is returned without timing anything.

        Raises:
            TypeError: bad ``op``, ``key`` or candidate types.
            ValueError: no candidates, ``repeats < 1``, or a candidate of another family.
            RuntimeError: every candidate raised.

        Examples:
            >>> import os, tempfile
            >>> with tempfile.TemporaryDirectory() as d:
            ...     os.environ["NETCL_CACHE_DIR"] = d
            ...     sel = KernelSelector(extended_profile(None))
            ...     won = sel.autotune("matmul", (2, 2, 2, "float32"),
            ...                        {KernelVariant.MATMUL_TILED: lambda: None})
            ...     print(won.name, sel.select_matmul_kernel(2, 2, 2).variant.name)
            ...     del os.environ["NETCL_CACHE_DIR"]
            MATMUL_TILED MATMUL_TILED
        """
        fn = "KernelSelector.autotune"
        if not isinstance(op, str) or not op:
            raise TypeError(f"{fn}: op must be a non-empty str, got {op!r}")
        _json_key(fn, key)
        repeats = _int_arg(fn, "repeats", repeats, 1)
        if not candidates:
            raise ValueError(f"{fn}: no candidates for op {op!r}, key {key!r}")
        for v, call in candidates.items():
            if not isinstance(v, KernelVariant) or not callable(call):
                raise TypeError(f"{fn}: candidates must map KernelVariant to a callable, got {v!r}")
            if op in FAMILIES and v.family != op:
                raise ValueError(f"{fn}: candidate {v.name} is not a {op} kernel")
        known = self.lookup_tuned(op, key)
        if known is not None and known in candidates and not retune:
            return known
        best: tuple[float, KernelVariant] | None = None
        for variant, call in candidates.items():
            try:
                call()
                elapsed = min(_timed(call) for _ in range(repeats))
            except Exception as exc:  # a kernel that fails to build or run here loses
                warnings.warn(f"{fn}: {op} candidate {variant.name} failed: {exc!r}",
                              RuntimeWarning, stacklevel=2)
                continue
            if best is None or elapsed < best[0]:
                best = (elapsed, variant)
        if best is None:
            raise RuntimeError(f"{fn}: every candidate for op {op!r}, key {key!r} raised")
        with self._lock:
            self._tuned[(op, key)] = best[1]
            self._generation += 1
            self._persist()
        return best[1]

    def _persist(self) -> None:
        """Merge the winners into the device's file, atomically; never a crash."""
        try:
            path = self.tuned_path()
            self._tuned = merged = {**self._read_tuned(), **self._tuned}  # other processes' too
            winners = [{"op": op, "key": _json_key("autotune", k), "variant": v.name}
                       for (op, k), v in merged.items()]
            content = json.dumps({"winners": winners}, indent=1).encode("utf-8")
            write_entry(path, self._tuned_key(), content)
        except (OSError, TypeError) as exc:
            warnings.warn(f"KernelSelector: could not save autotune winners: {exc!r}",
                          RuntimeWarning, stacklevel=3)


def _timed(call: Callable[[], None]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


# --- per-device selectors and the ops-facing shortcuts ---------------------------------


def get_kernel_selector(cl_device: Any | None = None) -> KernelSelector:
    """The process-wide selector of a PyOpenCL device; None gives the NumPy backend's.

    Examples:
        >>> get_kernel_selector() is get_kernel_selector(None)
        True
    """
    return _selector_for(cl_device)


@functools.cache
def _selector_for(cl_device: Any | None) -> KernelSelector:
    return KernelSelector(extended_profile(cl_device))


def select_matmul_config(
    M: int, N: int, K: int, dtype: Any = "float32", device: Any | None = None
) -> KernelConfig:
    """``get_kernel_selector(device).select_matmul_kernel(M, N, K, dtype)``.

    Examples:
        >>> select_matmul_config(2048, 2048, 2048).variant.name
        'MATMUL_REGISTER_TILED'
    """
    return get_kernel_selector(device).select_matmul_kernel(M, N, K, dtype)


def select_conv2d_config(
    N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: IntPair = 1,
    padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1, dtype: Any = "float32",
    device: Any | None = None,
) -> KernelConfig:
    """``get_kernel_selector(device).select_conv2d_kernel(...)``.

    Examples:
        >>> select_conv2d_config(1, 16, 8, 8, 16, 1, 1).variant.name
        'CONV2D_IM2COL'
    """
    return get_kernel_selector(device).select_conv2d_kernel(
        N, C, H, W, K, R, S, stride, padding, dilation, groups, dtype
    )
