"""KernelSelector rules per device, forcing, caching, autotune and its per-device JSON file."""

from __future__ import annotations

import dataclasses
import doctest
import json
import re
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from netcl.core import kernel_selector
from netcl.core._paths import write_entry
from netcl.core.device_profile import ExtendedDeviceProfile, extended_profile
from netcl.core.kernel_selector import (
    KernelConfig,
    KernelSelector,
    KernelVariant,
    force_variant,
    get_kernel_selector,
    select_conv2d_config,
    select_matmul_config,
)
from netcl.core.testing import available_devices

V = KernelVariant
GPU, CPU = 4, 2


@dataclasses.dataclass(eq=False)  # hashed by identity, like one cl_device_id
class FakeDevice:
    """The attributes netcl reads from a ``pyopencl.Device``."""

    name: str
    vendor: str
    type: int = GPU
    extensions: str = ""
    local_mem_size: int = 65536
    max_compute_units: int = 16
    max_work_group_size: int = 1024
    max_work_item_sizes: tuple[int, ...] = (1024, 1024, 64)
    preferred_vector_width_float: int = 1
    preferred_vector_width_half: int = 0
    driver_version: str = "1.0"
    version: str = "OpenCL 3.0"
    global_mem_size: int = 8 << 30
    host_unified_memory: bool = False
    compute_capability_major_nv: int | None = None
    compute_capability_minor_nv: int | None = None


def _profile(**kw: Any) -> ExtendedDeviceProfile:
    return extended_profile(FakeDevice(**kw))


def hopper() -> ExtendedDeviceProfile:
    return _profile(name="NVIDIA H100 80GB HBM3", vendor="NVIDIA Corporation", local_mem_size=49152,
                    compute_capability_major_nv=9, compute_capability_minor_nv=0,
                    driver_version="580.159.04", max_compute_units=132)


def ampere() -> ExtendedDeviceProfile:
    return _profile(name="NVIDIA A100-SXM4-80GB", vendor="NVIDIA Corporation",
                    local_mem_size=49152, compute_capability_major_nv=8,
                    compute_capability_minor_nv=0, max_compute_units=108)


def volta() -> ExtendedDeviceProfile:
    return _profile(name="Tesla V100-SXM2-16GB", vendor="NVIDIA Corporation", local_mem_size=49152)


def rdna3() -> ExtendedDeviceProfile:
    return _profile(name="gfx1100", vendor="Advanced Micro Devices, Inc.",
                    extensions="cl_khr_fp16 cl_khr_subgroups", max_work_group_size=256,
                    preferred_vector_width_half=2)


def rdna2() -> ExtendedDeviceProfile:
    return _profile(name="gfx1030", vendor="Advanced Micro Devices, Inc.",
                    extensions="cl_khr_fp16", max_work_group_size=256)


def gcn() -> ExtendedDeviceProfile:
    return _profile(name="gfx803", vendor="Advanced Micro Devices, Inc.", max_work_group_size=256)


def intel_xe() -> ExtendedDeviceProfile:
    return _profile(name="Intel(R) Iris(R) Xe Graphics", vendor="Intel(R) Corporation",
                    extensions="cl_khr_fp16 cl_intel_subgroups", max_work_group_size=512,
                    preferred_vector_width_half=8, host_unified_memory=True)


def pocl() -> ExtendedDeviceProfile:
    return _profile(name="pthread-AMD EPYC", vendor="AuthenticAMD", type=CPU,
                    extensions="cl_khr_fp64 cl_khr_int64_base_atomics", local_mem_size=524288,
                    max_work_group_size=4096, preferred_vector_width_float=8,
                    version="OpenCL 3.0 PoCL HSTR: pthread-x86_64")


def small() -> ExtendedDeviceProfile:  # an embedded GPU: 64 work-items, 4 KiB local memory
    return _profile(name="Mali-T860", vendor="ARM", local_mem_size=4096, max_work_group_size=64)


ENV = ["NETCL_KERNEL_STRATEGY", "NETCL_CONV_WINOGRAD", "NETCL_CONV_TILED_LOCAL"] + [
    f"NETCL_FORCE_{f.upper()}" for f in kernel_selector.FAMILIES
]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path / "cache"))


def sel(profile: ExtendedDeviceProfile) -> KernelSelector:
    return KernelSelector(profile)


def tiles(cfg: KernelConfig) -> tuple[Any, ...]:
    return (cfg.variant, cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.work_per_thread,
            cfg.local_size_2d, cfg.vector_width)


# --- KernelVariant and KernelConfig -------------------------------------------------------


def test_variants_and_families() -> None:
    assert [v.name for v in KernelVariant] == [
        "MATMUL_NAIVE", "MATMUL_TILED", "MATMUL_REGISTER_TILED", "MATMUL_VECTORIZED",
        "CONV2D_NAIVE", "CONV2D_IM2COL", "CONV2D_IMPLICIT_GEMM", "CONV2D_TILED_LOCAL",
        "CONV2D_WINOGRAD", "ELEMENTWISE_SCALAR", "ELEMENTWISE_VECTORIZED",
        "REDUCTION_SEQUENTIAL", "REDUCTION_PARALLEL", "REDUCTION_WORKGROUP",
        "BATCHNORM_NAIVE", "BATCHNORM_FUSED",
    ]
    assert [v.family for v in (V.MATMUL_VECTORIZED, V.CONV2D_IM2COL, V.ELEMENTWISE_SCALAR,
                               V.REDUCTION_WORKGROUP, V.BATCHNORM_FUSED)] == [
        "matmul", "conv2d", "elementwise", "reduction", "batchnorm"]


def test_kernel_config_defaults_match_the_page() -> None:
    cfg = KernelConfig(V.MATMUL_TILED)
    assert (cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.work_per_thread, cfg.local_size_1d,
            cfg.local_size_2d, cfg.use_local_memory, cfg.use_vectorization, cfg.vector_width,
            cfg.extra) == (32, 32, 8, 4, 256, (16, 16), True, True, 4, {})
    assert KernelConfig(V.MATMUL_TILED).extra is not cfg.extra


def test_kernelspec_reexport() -> None:
    from netcl.core.kernels.primitives import KernelSpec

    assert kernel_selector.KernelSpec is KernelSpec


# --- matmul -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "mnk", "expected"),
    [
        # generic: naive below 32**3, tiled 16x16, register-tiled 64x64 from 512**3
        (intel_xe, (31, 32, 32), (V.MATMUL_NAIVE, 1, 1, 1, 1, (16, 16), 1)),
        (intel_xe, (32, 32, 32), (V.MATMUL_TILED, 16, 16, 16, 1, (16, 16), 1)),
        (intel_xe, (511, 512, 512), (V.MATMUL_TILED, 16, 16, 16, 1, (16, 16), 1)),
        (intel_xe, (512, 512, 512), (V.MATMUL_REGISTER_TILED, 64, 64, 16, 4, (16, 16), 4)),
        (intel_xe, (65536, 32, 65536), (V.MATMUL_TILED, 16, 16, 16, 1, (16, 16), 1)),
        (volta, (256, 256, 256), (V.MATMUL_TILED, 16, 16, 16, 1, (16, 16), 1)),
        (gcn, (512, 512, 512), (V.MATMUL_REGISTER_TILED, 64, 64, 16, 4, (16, 16), 4)),
        # OpenCL CPU devices: packed-panel vectorized GEMM, one work-item per work-group
        (pocl, (31, 32, 32), (V.MATMUL_NAIVE, 1, 1, 1, 1, (16, 16), 1)),
        (pocl, (32, 32, 32), (V.MATMUL_VECTORIZED, 36, 16, 256, 6, (1, 1), 8)),
        (pocl, (512, 512, 512), (V.MATMUL_VECTORIZED, 90, 128, 256, 6, (1, 1), 8)),
        (pocl, (1024, 1024, 64), (V.MATMUL_VECTORIZED, 96, 128, 256, 6, (1, 1), 8)),
        (pocl, (100, 100, 7000), (V.MATMUL_VECTORIZED, 54, 64, 256, 6, (1, 1), 8)),
        # NVIDIA Hopper/Ampere: 32x32 tiled, register tiling from 256**3 once there is a
        # 64x64 tile per compute unit (H100: 132; 512^2 has 64), 128x128 tiles once there
        # are as many of those as compute units (1024^3 has 64)
        (hopper, (31, 32, 32), (V.MATMUL_NAIVE, 1, 1, 1, 1, (16, 16), 1)),
        (hopper, (128, 128, 128), (V.MATMUL_TILED, 32, 32, 16, 4, (32, 8), 1)),
        (hopper, (255, 256, 256), (V.MATMUL_TILED, 32, 32, 16, 4, (32, 8), 1)),
        (hopper, (512, 512, 512), (V.MATMUL_TILED, 32, 32, 16, 4, (32, 8), 1)),
        (hopper, (768, 768, 768), (V.MATMUL_REGISTER_TILED, 64, 64, 16, 4, (16, 16), 4)),
        (ampere, (256, 16384, 256), (V.MATMUL_REGISTER_TILED, 128, 128, 16, 8, (16, 16), 4)),
        (hopper, (1024, 1024, 1024), (V.MATMUL_REGISTER_TILED, 64, 64, 16, 4, (16, 16), 4)),
        (hopper, (2048, 2048, 2048), (V.MATMUL_REGISTER_TILED, 128, 128, 16, 8, (16, 16), 4)),
        (hopper, (4096, 1023, 4096), (V.MATMUL_REGISTER_TILED, 128, 128, 16, 8, (16, 16), 4)),
        (hopper, (4096, 512, 4096), (V.MATMUL_REGISTER_TILED, 64, 64, 16, 4, (16, 16), 4)),
        (ampere, (2048, 2048, 2048), (V.MATMUL_REGISTER_TILED, 128, 128, 16, 8, (16, 16), 4)),
        # AMD RDNA2/3: float4 vectorized when N and K are multiples of 4
        (rdna3, (512, 512, 512), (V.MATMUL_VECTORIZED, 64, 64, 16, 4, (16, 16), 4)),
        (rdna2, (256, 256, 256), (V.MATMUL_VECTORIZED, 64, 64, 16, 4, (16, 16), 4)),
        (rdna3, (512, 510, 512), (V.MATMUL_REGISTER_TILED, 64, 64, 16, 4, (16, 16), 4)),
        (rdna3, (100, 100, 100), (V.MATMUL_TILED, 16, 16, 16, 1, (16, 16), 1)),
        # a 64-work-item device: work-groups (and the tiles they cover) shrink to fit
        (small, (64, 64, 64), (V.MATMUL_TILED, 8, 8, 16, 1, (8, 8), 1)),
        (small, (512, 512, 512), (V.MATMUL_REGISTER_TILED, 32, 32, 16, 4, (8, 8), 4)),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_matmul_rules(profile: Any, mnk: tuple[int, int, int], expected: tuple[Any, ...]) -> None:
    assert tiles(sel(profile()).select_matmul_kernel(*mnk)) == expected


def test_matmul_opencl_cpu_micro_tiles_follow_the_dtype() -> None:
    assert sel(pocl()).select_matmul_kernel(512, 512, 512).extra == {
        "dtype": "float32", "micro_n": 16}
    cfg = sel(pocl()).select_matmul_kernel(512, 512, 512, "float64")
    assert (cfg.vector_width, cfg.extra["micro_n"]) == (4, 8)


def test_matmul_rdna_wave_size_and_dtype() -> None:
    cfg = sel(rdna3()).select_matmul_kernel(512, 512, 512, "half")
    assert cfg.extra == {"dtype": "float16", "wave_size": 32}


def test_matmul_portable_strategy_drops_vendor_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    s = sel(hopper())
    assert s.select_matmul_kernel(2048, 2048, 2048).tile_m == 128
    monkeypatch.setenv("NETCL_KERNEL_STRATEGY", "portable")
    assert tiles(s.select_matmul_kernel(2048, 2048, 2048)) == (
        V.MATMUL_REGISTER_TILED, 64, 64, 16, 4, (16, 16), 4)
    assert s.select_matmul_kernel(256, 256, 256).variant is V.MATMUL_TILED


def test_matmul_tile_k_shrinks_to_local_memory() -> None:
    p = dataclasses.replace(intel_xe(), local_mem_size=8192)
    cfg = sel(p).select_matmul_kernel(512, 512, 512, "float64")  # 128 * 16 * 8 = 16 KiB
    assert (cfg.tile_m, cfg.tile_k, cfg.extra["dtype"]) == (64, 8, "float64")
    cfg = sel(p).select_matmul_kernel(512, 512, 512, "float32")  # 128 * 16 * 4 = 8 KiB fits
    assert cfg.tile_k == 16
    tiny = dataclasses.replace(small(), local_mem_size=1024)  # 64 * 16 * 4 = 4 KiB
    assert sel(tiny).select_matmul_kernel(512, 512, 512).tile_k == 4


def test_matmul_numpy_profile_keeps_parameters() -> None:
    cfg = sel(extended_profile(None)).select_matmul_kernel(1024, 1024, 1024)
    assert tiles(cfg) == (V.MATMUL_REGISTER_TILED, 64, 64, 16, 4, (16, 16), 4)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((-1, 4, 4), ValueError, r"select_matmul_kernel: M must be >= 1, got -1"),
        ((4, 0, 4), ValueError, r"select_matmul_kernel: N must be >= 1, got 0"),
        ((4, 4, 2.5), TypeError, r"select_matmul_kernel: K must be an integer, got 2.5"),
        ((True, 4, 4), TypeError, r"M must be an integer"),
        ((4, 4, 4, "int32"), TypeError, r"select_matmul_kernel: dtype must be one of"),
        ((4, 4, 4, "bogus"), ValueError, r"select_matmul_kernel: unsupported dtype 'bogus'"),
    ],
)
def test_matmul_bad_arguments(args: tuple[Any, ...], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        sel(hopper()).select_matmul_kernel(*args)


def test_decisions_are_cached() -> None:
    import numpy as np

    s = sel(hopper())
    first = s.select_matmul_kernel(300, 300, 300)
    assert s.select_matmul_kernel(300, 300, 300) is first
    assert s.select_matmul_kernel(np.int64(300), 300, 300, "float") is first  # same key
    assert s.select_matmul_kernel(300, 300, 300, "float16") is not first
    s.clear_cache()
    again = s.select_matmul_kernel(300, 300, 300)
    assert again is not first and again == first


# --- conv2d -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"R": 1, "S": 1}, V.CONV2D_IMPLICIT_GEMM),
        ({"R": 1, "S": 1, "stride": 2}, V.CONV2D_IMPLICIT_GEMM),
        ({"R": 3, "S": 3, "padding": 1}, V.CONV2D_WINOGRAD),
        ({"R": 3, "S": 3, "stride": (1, 1)}, V.CONV2D_WINOGRAD),
        ({"R": 3, "S": 3, "stride": 2}, V.CONV2D_IMPLICIT_GEMM),
        ({"R": 3, "S": 3, "stride": (1, 2)}, V.CONV2D_IMPLICIT_GEMM),
        ({"R": 3, "S": 3, "dilation": 2}, V.CONV2D_IMPLICIT_GEMM),
        ({"R": 3, "S": 3, "groups": 2}, V.CONV2D_IMPLICIT_GEMM),
        ({"R": 5, "S": 5, "padding": 2}, V.CONV2D_IMPLICIT_GEMM),
        ({"R": 3, "S": 1}, V.CONV2D_IMPLICIT_GEMM),
    ],
)
def test_conv2d_gpu_rules(monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any],
                          expected: KernelVariant) -> None:
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "0")  # the spec page's routing
    args = {"N": 2, "C": 16, "H": 32, "W": 32, "K": 32, **kw}
    assert sel(hopper()).select_conv2d_kernel(**args).variant is expected


@pytest.mark.parametrize(
    ("shape", "expected"),
    [  # (N, C, H, K, R, stride, padding): bench_selector's classes, fastest on an H100
        ((64, 1, 8, 16, 3, 1, 1), V.CONV2D_TILED_LOCAL),  # the digits CNN
        ((64, 16, 8, 32, 3, 1, 1), V.CONV2D_TILED_LOCAL),
        ((32, 64, 32, 64, 3, 1, 1), V.CONV2D_TILED_LOCAL),  # ResNet-18, CIFAR sizes
        ((32, 64, 32, 128, 3, 2, 1), V.CONV2D_TILED_LOCAL),
        ((32, 64, 32, 128, 1, 2, 0), V.CONV2D_IMPLICIT_GEMM),
        ((32, 128, 16, 128, 3, 1, 1), V.CONV2D_TILED_LOCAL),
        ((32, 256, 8, 256, 3, 1, 1), V.CONV2D_WINOGRAD),
        ((32, 512, 4, 512, 3, 1, 1), V.CONV2D_WINOGRAD),
        ((32, 64, 56, 64, 3, 1, 1), V.CONV2D_WINOGRAD),  # ImageNet sizes
        ((32, 128, 28, 128, 3, 1, 1), V.CONV2D_WINOGRAD),
    ],
)
def test_conv2d_gpu_measured_rules(shape: tuple[int, ...], expected: KernelVariant) -> None:
    n, c, h, k, r, stride, padding = shape
    cfg = sel(hopper()).select_conv2d_kernel(n, c, h, h, k, r, r, stride, padding)
    assert cfg.variant is expected


@pytest.mark.parametrize("profile", [pocl, lambda: extended_profile(None)])
@pytest.mark.parametrize("rs", [1, 3, 7])
def test_conv2d_cpu_is_im2col(monkeypatch: pytest.MonkeyPatch, profile: Any, rs: int) -> None:
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "1")
    cfg = sel(profile()).select_conv2d_kernel(1, 8, 16, 16, 8, rs, rs, stride=2,
                                              padding=rs // 2)
    assert cfg.variant is V.CONV2D_IM2COL
    assert cfg.extra["gemm_shape"] == (64, 8, 8 * rs * rs)


def test_conv2d_opencl_cpu_winograd_for_3x3(monkeypatch: pytest.MonkeyPatch) -> None:
    # measured on PoCL: Winograd beats im2col + GEMM on 3x3 stride-1 convolutions
    assert sel(pocl()).select_conv2d_kernel(1, 8, 16, 16, 8, 3, 3, padding=1).variant is (
        V.CONV2D_WINOGRAD)
    small = sel(pocl()).select_conv2d_kernel(64, 16, 8, 8, 32, 3, 3, padding=1)  # digits layer
    assert small.variant is V.CONV2D_IM2COL  # measured: 8x8 outputs, im2col 1.6x faster
    numpy = sel(extended_profile(None)).select_conv2d_kernel(1, 8, 16, 16, 8, 3, 3, padding=1)
    assert numpy.variant is V.CONV2D_IM2COL
    monkeypatch.setenv("NETCL_CONV_WINOGRAD", "0")
    assert sel(pocl()).select_conv2d_kernel(1, 8, 16, 16, 8, 3, 3, padding=1).variant is (
        V.CONV2D_IM2COL)


def test_conv2d_winograd_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "0")
    s = sel(hopper())
    assert s.select_conv2d_kernel(2, 16, 32, 32, 32, 3, 3, padding=1).variant is V.CONV2D_WINOGRAD
    monkeypatch.setenv("NETCL_CONV_WINOGRAD", "0")  # read at decision time, not cached over
    assert s.select_conv2d_kernel(2, 16, 32, 32, 32, 3, 3, padding=1).variant is (
        V.CONV2D_IMPLICIT_GEMM)
    monkeypatch.setenv("NETCL_CONV_WINOGRAD", "maybe")
    with pytest.raises(ValueError, match=r"NETCL_CONV_WINOGRAD must be one of 1/0, true/false, "
                                         r"yes/no, on/off, got 'maybe'"):
        s.select_conv2d_kernel(2, 16, 32, 32, 32, 3, 3)


def test_conv2d_tiled_local_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    s = sel(hopper())
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "0")
    assert s.select_conv2d_kernel(1, 8, 32, 32, 8, 5, 5).variant is V.CONV2D_IMPLICIT_GEMM
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "1")
    cfg = s.select_conv2d_kernel(1, 8, 32, 32, 8, 5, 5)  # 28x28 output: small
    assert (cfg.variant, cfg.tile_m, cfg.tile_n, cfg.use_local_memory) == (
        V.CONV2D_TILED_LOCAL, 16, 16, True)
    assert s.select_conv2d_kernel(1, 8, 36, 36, 8, 5, 5).variant is (  # 32x32: still small
        V.CONV2D_TILED_LOCAL)
    assert s.select_conv2d_kernel(1, 8, 37, 37, 8, 5, 5).variant is V.CONV2D_IMPLICIT_GEMM
    # =1 puts tiled-local before Winograd for every small plane (but not 1x1)
    assert s.select_conv2d_kernel(1, 8, 32, 32, 8, 3, 3).variant is V.CONV2D_TILED_LOCAL
    assert s.select_conv2d_kernel(1, 256, 8, 8, 256, 3, 3).variant is V.CONV2D_TILED_LOCAL
    assert s.select_conv2d_kernel(1, 8, 32, 32, 8, 1, 1).variant is V.CONV2D_IMPLICIT_GEMM
    monkeypatch.delenv("NETCL_CONV_TILED_LOCAL")  # unset: the measured rule
    assert s.select_conv2d_kernel(1, 8, 32, 32, 8, 3, 3).variant is V.CONV2D_TILED_LOCAL
    assert s.select_conv2d_kernel(1, 256, 8, 8, 256, 3, 3).variant is V.CONV2D_WINOGRAD
    assert s.select_conv2d_kernel(1, 129, 8, 8, 8, 5, 5).variant is V.CONV2D_IMPLICIT_GEMM
    assert s.select_conv2d_kernel(1, 128, 8, 8, 8, 5, 5).variant is V.CONV2D_TILED_LOCAL
    assert s.select_conv2d_kernel(1, 128, 24, 24, 8, 3, 3, padding=1).variant is (
        V.CONV2D_WINOGRAD)  # 128 x 576 channel-pixels: over 64 Ki
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "yes please")
    with pytest.raises(ValueError,
                       match=r"NETCL_CONV_TILED_LOCAL must be one of 1/0.*'yes please'"):
        s.select_conv2d_kernel(1, 8, 32, 32, 8, 3, 3)


def test_conv2d_implicit_gemm_takes_matmul_tiles() -> None:
    cfg = sel(hopper()).select_conv2d_kernel(32, 64, 16, 16, 128, 1, 1)
    assert cfg.extra["gemm_shape"] == (32 * 16 * 16, 128, 64)
    assert tiles(cfg) == (V.CONV2D_IMPLICIT_GEMM, 64, 64, 16, 4, (16, 16), 4)
    big = sel(hopper()).select_conv2d_kernel(32, 512, 56, 56, 1024, 1, 1)
    assert (big.tile_m, big.work_per_thread) == (128, 8)
    tiny = sel(hopper()).select_conv2d_kernel(1, 2, 4, 4, 2, 1, 1)  # GEMM too small to tile
    assert tiles(tiny) == (V.CONV2D_IMPLICIT_GEMM, 16, 16, 16, 1, (16, 16), 1)


def test_conv2d_output_shape() -> None:
    s = sel(hopper())
    assert s.select_conv2d_kernel(2, 3, 32, 32, 8, 3, 3, padding=1).extra["output_shape"] == (
        2, 8, 32, 32)
    assert s.select_conv2d_kernel(2, 3, 32, 31, 8, 3, 3, stride=2, padding=1).extra[
        "output_shape"] == (2, 8, 16, 16)
    assert s.select_conv2d_kernel(1, 3, 9, 9, 8, 3, 3, dilation=2).extra["output_shape"] == (
        1, 8, 5, 5)


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"groups": 3}, ValueError, r"groups must divide C and K, got C=16, K=32, groups=3"),
        ({"H": 2, "W": 2}, ValueError, r"empty output 0x0 for input 2x2, kernel 3x3"),
        ({"padding": -1}, ValueError, r"padding must be >= 0, got -1"),
        ({"stride": 0}, ValueError, r"stride must be >= 1, got 0"),
        ({"stride": (1, 2, 3)}, ValueError, r"stride must be an int or a pair"),
        ({"C": 0}, ValueError, r"select_conv2d_kernel: C must be >= 1, got 0"),
        ({"dtype": "uint8"}, TypeError, r"select_conv2d_kernel: dtype must be one of"),
    ],
)
def test_conv2d_bad_arguments(kw: dict[str, Any], error: type[Exception], match: str) -> None:
    args = {"N": 1, "C": 16, "H": 8, "W": 8, "K": 32, "R": 3, "S": 3, **kw}
    with pytest.raises(error, match=match):
        sel(hopper()).select_conv2d_kernel(**args)


# --- elementwise, reduction, batchnorm ----------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "n", "dtype", "variant", "width"),
    [
        (hopper, 0, "float32", V.ELEMENTWISE_SCALAR, 1),
        (hopper, 1024, "float32", V.ELEMENTWISE_SCALAR, 1),
        (hopper, 1025, "float32", V.ELEMENTWISE_VECTORIZED, 4),
        (pocl, 1025, "float32", V.ELEMENTWISE_VECTORIZED, 8),  # preferred float width 8
        (pocl, 4096, "float16", V.ELEMENTWISE_VECTORIZED, 4),  # preferred half width 0
        (intel_xe, 4096, "half", V.ELEMENTWISE_VECTORIZED, 8),  # preferred half width 8
        (intel_xe, 4096, "float32", V.ELEMENTWISE_VECTORIZED, 4),
        (pocl, 4096, "int32", V.ELEMENTWISE_VECTORIZED, 8),
        (lambda: extended_profile(None), 10**6, "float32", V.ELEMENTWISE_VECTORIZED, 4),
    ],
)
def test_elementwise_rules(
    profile: Any, n: int, dtype: str, variant: KernelVariant, width: int
) -> None:
    cfg = sel(profile()).select_elementwise_kernel(n, dtype)
    assert (cfg.variant, cfg.vector_width, cfg.use_vectorization) == (variant, width, width > 1)


def test_elementwise_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"select_elementwise_kernel: n must be >= 0, got -1"):
        sel(hopper()).select_elementwise_kernel(-1)
    with pytest.raises(ValueError, match=r"select_elementwise_kernel: unsupported dtype"):
        sel(hopper()).select_elementwise_kernel(8, "complex64")


@pytest.mark.parametrize(
    ("n", "variant", "local"),
    [(0, V.REDUCTION_SEQUENTIAL, 1), (255, V.REDUCTION_SEQUENTIAL, 1),
     (256, V.REDUCTION_PARALLEL, 256), (65535, V.REDUCTION_PARALLEL, 256),
     (65536, V.REDUCTION_WORKGROUP, 256), (10**8, V.REDUCTION_WORKGROUP, 256)],
)
def test_reduction_rules(n: int, variant: KernelVariant, local: int) -> None:
    cfg = sel(hopper()).select_reduction_kernel(n, "max")
    assert (cfg.variant, cfg.local_size_1d) == (variant, local)
    assert "use_subgroups" not in cfg.extra


def test_reduction_subgroups_and_stages() -> None:
    cfg = sel(rdna3()).select_reduction_kernel(1 << 20)
    assert cfg.extra == {"stages": 2, "use_subgroups": True}
    assert sel(rdna3()).select_reduction_kernel(10).extra == {}


def test_reduction_bad_kind() -> None:
    with pytest.raises(ValueError, match=r"select_reduction_kernel: kind must be one of.*'median'"):
        sel(hopper()).select_reduction_kernel(100, "median")


@pytest.mark.parametrize(
    ("training", "fuse", "variant"),
    [(False, True, V.BATCHNORM_FUSED), (True, True, V.BATCHNORM_NAIVE),
     (False, False, V.BATCHNORM_NAIVE), (True, False, V.BATCHNORM_NAIVE)],
)
def test_batchnorm_rules(training: bool, fuse: bool, variant: KernelVariant) -> None:
    assert sel(hopper()).select_batchnorm_kernel(8, 64, 1024, training, fuse).variant is variant


def test_batchnorm_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"select_batchnorm_kernel: training must be a bool"):
        sel(hopper()).select_batchnorm_kernel(8, 64, 1024, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"select_batchnorm_kernel: HW must be >= 1, got 0"):
        sel(hopper()).select_batchnorm_kernel(8, 64, 0, False)


# --- forcing ------------------------------------------------------------------------------


def test_force_variant_context() -> None:
    s = sel(hopper())
    assert s.select_matmul_kernel(8, 8, 8).variant is V.MATMUL_NAIVE
    with force_variant(V.MATMUL_TILED, V.CONV2D_NAIVE):
        assert tiles(s.select_matmul_kernel(8, 8, 8)) == (
            V.MATMUL_TILED, 16, 16, 16, 1, (16, 16), 1)  # the variant's defaults
        assert s.select_conv2d_kernel(1, 3, 8, 8, 4, 3, 3).variant is V.CONV2D_NAIVE
        assert s.select_reduction_kernel(10).variant is V.REDUCTION_SEQUENTIAL  # other family
        with force_variant(V.MATMUL_VECTORIZED):
            assert s.select_matmul_kernel(8, 8, 8).variant is V.MATMUL_VECTORIZED
            assert s.select_conv2d_kernel(1, 3, 8, 8, 4, 3, 3).variant is V.CONV2D_NAIVE
        assert s.select_matmul_kernel(8, 8, 8).variant is V.MATMUL_TILED
    assert s.select_matmul_kernel(8, 8, 8).variant is V.MATMUL_NAIVE  # cache not polluted


def test_forced_config_still_fits_the_device() -> None:
    with force_variant(V.MATMUL_REGISTER_TILED):
        cfg = sel(small()).select_matmul_kernel(8, 8, 8)
    assert tiles(cfg) == (V.MATMUL_REGISTER_TILED, 32, 32, 16, 4, (8, 8), 4)


def test_force_variant_is_thread_local() -> None:
    s = sel(hopper())
    seen: list[KernelVariant] = []
    with force_variant(V.MATMUL_TILED):
        t = threading.Thread(target=lambda: seen.append(s.select_matmul_kernel(8, 8, 8).variant))
        t.start()
        t.join()
    assert seen == [V.MATMUL_NAIVE]


def test_force_variant_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"one variant per family, got MATMUL_TILED and"):
        with force_variant(V.MATMUL_TILED, V.MATMUL_NAIVE):
            pass
    with pytest.raises(TypeError, match=r"force_variant: expected KernelVariant"):
        with force_variant("MATMUL_TILED"):  # type: ignore[arg-type]
            pass


def test_force_env(monkeypatch: pytest.MonkeyPatch) -> None:
    s = sel(hopper())
    monkeypatch.setenv("NETCL_FORCE_MATMUL", "MATMUL_VECTORIZED")
    monkeypatch.setenv("NETCL_FORCE_REDUCTION", "reduction_workgroup")
    assert s.select_matmul_kernel(8, 8, 8).variant is V.MATMUL_VECTORIZED
    assert s.select_reduction_kernel(3).variant is V.REDUCTION_WORKGROUP
    with force_variant(V.MATMUL_NAIVE):  # the context manager wins over the environment
        assert s.select_matmul_kernel(8, 8, 8).variant is V.MATMUL_NAIVE
    monkeypatch.setenv("NETCL_FORCE_CONV2D", "MATMUL_TILED")
    with pytest.raises(ValueError, match=r"NETCL_FORCE_CONV2D='MATMUL_TILED' names no conv2d "
                       r"kernel; valid: CONV2D_NAIVE, CONV2D_IM2COL, CONV2D_IMPLICIT_GEMM"):
        s.select_conv2d_kernel(1, 3, 8, 8, 4, 3, 3)


# --- autotune -----------------------------------------------------------------------------


# 30 ms against nothing: a loaded machine (two cores, many jobs) can stall a call for a few ms
def _candidates(calls: dict[str, int], slow: float = 0.03) -> dict[KernelVariant, Any]:
    def make(name: str, seconds: float) -> Any:
        def run() -> None:
            calls[name] = calls.get(name, 0) + 1
            time.sleep(seconds)
        return run

    return {V.MATMUL_TILED: make("tiled", slow), V.MATMUL_NAIVE: make("naive", 0.0),
            V.MATMUL_REGISTER_TILED: make("register", slow)}


def _tune_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "autotune").glob("*"))


def _read_tune_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, winners document) of a winners file: a cache entry whose content is JSON."""
    magic, header, content = path.read_bytes().split(b"\n", 2)
    assert magic == b"netcl-cache-entry 1"
    return json.loads(header), json.loads(content)


def test_autotune_picks_fastest_and_persists(tmp_path: Path) -> None:
    p = hopper()
    calls: dict[str, int] = {}
    winner = sel(p).autotune("matmul", (2048, 2048, 2048, "float32"), _candidates(calls),
                             repeats=2)
    assert winner is V.MATMUL_NAIVE
    assert calls == {"tiled": 3, "naive": 3, "register": 3}  # one warm-up + repeats each
    [path] = _tune_files(tmp_path)  # written atomically: no temp file left behind
    header, data = _read_tune_file(path)
    assert data["winners"] == [
        {"op": "matmul", "key": [2048, 2048, 2048, "float32"], "variant": "MATMUL_NAIVE"}]
    assert header["key"] == {"store": "autotune", "format": "2", "vendor": "NVIDIA Corporation",
                             "name": "NVIDIA H100 80GB HBM3", "driver_version": "580.159.04"}
    fresh = sel(p)  # a new process: reads the device's file
    assert fresh.lookup_tuned("matmul", (2048, 2048, 2048, "float32")) is V.MATMUL_NAIVE
    assert fresh.select_matmul_kernel(2048, 2048, 2048).variant is V.MATMUL_NAIVE
    assert fresh.select_matmul_kernel(2048, 2048, 2048, "float16").variant is (
        V.MATMUL_REGISTER_TILED)
    assert sel(ampere()).lookup_tuned("matmul", (2048, 2048, 2048, "float32")) is None


def test_autotune_overrides_cached_decision() -> None:
    s = sel(hopper())
    assert s.select_elementwise_kernel(4096).variant is V.ELEMENTWISE_VECTORIZED
    s.autotune("elementwise", (4096, "float32"), {V.ELEMENTWISE_SCALAR: lambda: None})
    assert s.select_elementwise_kernel(4096).variant is V.ELEMENTWISE_SCALAR
    with force_variant(V.ELEMENTWISE_VECTORIZED):  # forcing beats a tuned winner
        assert s.select_elementwise_kernel(4096).variant is V.ELEMENTWISE_VECTORIZED


def test_autotune_reuses_known_winner_unless_retune() -> None:
    s = sel(hopper())
    calls: dict[str, int] = {}
    s.autotune("custom-op", ("k", 1, 2.5, None, True, (3, 4)), _candidates(calls), repeats=1)
    calls.clear()
    again = sel(hopper()).autotune("custom-op", ("k", 1, 2.5, None, True, (3, 4)),
                                   _candidates(calls))
    assert (again, calls) == (V.MATMUL_NAIVE, {})
    assert sel(hopper()).autotune("custom-op", ("k", 1, 2.5, None, True, (3, 4)),
                                  _candidates(calls), repeats=1, retune=True) is V.MATMUL_NAIVE
    assert calls == {"tiled": 2, "naive": 2, "register": 2}


def test_autotune_merges_winners_of_other_selectors(tmp_path: Path) -> None:
    a, b = sel(hopper()), sel(hopper())  # two processes on one device
    a.lookup_tuned("matmul", ())
    b.lookup_tuned("matmul", ())
    a.autotune("matmul", (1, 1, 1, "float32"), {V.MATMUL_TILED: lambda: None})
    b.autotune("matmul", (2, 2, 2, "float32"), {V.MATMUL_NAIVE: lambda: None})
    fresh = sel(hopper())
    assert fresh.lookup_tuned("matmul", (1, 1, 1, "float32")) is V.MATMUL_TILED
    assert fresh.lookup_tuned("matmul", (2, 2, 2, "float32")) is V.MATMUL_NAIVE


def test_autotune_skips_failing_candidates() -> None:
    def broken() -> None:
        raise RuntimeError("build failed")

    s = sel(hopper())
    with pytest.warns(RuntimeWarning, match=r"candidate MATMUL_TILED failed: .*build failed"):
        assert s.autotune("matmul", (9, 9, 9, "float32"),
                          {V.MATMUL_TILED: broken, V.MATMUL_NAIVE: lambda: None}) is V.MATMUL_NAIVE
    with pytest.raises(RuntimeError, match=r"every candidate for op 'matmul'"), \
            pytest.warns(RuntimeWarning):
        s.autotune("matmul", (8, 9, 9, "float32"), {V.MATMUL_TILED: broken})


def _plant(path: Path, how: str) -> None:
    """Damage a sound winners file the way a crash, a disk or a careless copy would."""
    data = path.read_bytes()
    if how == "truncate-half":
        path.write_bytes(data[: len(data) // 2])
    elif how == "truncate-10":
        path.write_bytes(data[:-10])
    elif how == "flip-byte":
        path.write_bytes(data[:-20] + bytes([data[-20] ^ 0x01]) + data[-19:])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "zeros":  # what a power cut after an unsynced write can leave
        path.write_bytes(bytes(len(data)))
    elif how == "plain-json":  # netcl 0.1's format, or any hand-made file
        path.write_text('{"winners": [{"op": "matmul", "key": [1, 1, 1, "float32"], '
                        '"variant": "MATMUL_TILED"}]}')
    elif how == "swap":  # another device's sound file copied over this one
        other = sel(ampere())
        other.autotune("matmul", (1, 1, 1, "float32"), {V.MATMUL_REGISTER_TILED: lambda: None})
        path.write_bytes(other.tuned_path().read_bytes())
    elif how == "wrong-key":  # a sound entry written for another driver version
        key = {**json.loads(data.split(b"\n")[1])["key"], "driver_version": "1.0"}
        write_entry(path, key, data.split(b"\n", 2)[2])
    elif how == "unknown-variant":  # sound framing, a variant this netcl does not know
        header = json.loads(data.split(b"\n")[1])
        write_entry(path, header["key"], json.dumps(
            {"winners": [{"op": "matmul", "key": [1], "variant": "NOPE"}]}).encode())
    else:
        raise ValueError(how)


@pytest.mark.parametrize(("how", "reason"), [
    ("truncate-half", r"truncated inside the header|truncated: \d+ bytes of content"),
    ("truncate-10", r"truncated: \d+ bytes of content, the header says \d+"),
    ("flip-byte", r"checksum mismatch"),
    ("empty", r"empty file"),
    ("zeros", r"not a netcl cache entry"),
    ("plain-json", r"not a netcl cache entry"),
    ("swap", r"built for another key: \w+ is '[^']+', expected '[^']+'"),
    ("wrong-key", r"built for another key: driver_version is '1.0', expected '580.159.04'"),
    ("unknown-variant", r"unknown winners \(KeyError\('NOPE'\)\)"),
])
def test_bad_tune_file_is_discarded_with_one_warning(how: str, reason: str) -> None:
    s = sel(hopper())
    s.autotune("matmul", (1, 1, 1, "float32"), {V.MATMUL_TILED: lambda: None})
    path = s.tuned_path()
    _plant(path, how)
    fresh = sel(hopper())  # a new process on this device
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fresh.lookup_tuned("matmul", (1, 1, 1, "float32")) is None
        assert fresh.select_matmul_kernel(1, 1, 1).variant is V.MATMUL_NAIVE  # the rule
        fresh.autotune("matmul", (2, 2, 2, "float32"), {V.MATMUL_TILED: lambda: None})
    assert [w.category for w in caught] == [RuntimeWarning]
    message = str(caught[0].message)
    assert message.startswith(f"netcl: discarded cache file {path}: ")
    assert re.search(reason, message), message
    assert message.endswith("; its winners will be tuned again")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten file is sound
        again = sel(hopper())
        assert again.lookup_tuned("matmul", (2, 2, 2, "float32")) is V.MATMUL_TILED
        assert again.lookup_tuned("matmul", (1, 1, 1, "float32")) is None


def test_unwritable_cache_keeps_winner_in_memory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("NETCL_CACHE_DIR", str(blocker))  # a file: no directory can be made
    s = sel(hopper())
    with pytest.warns(RuntimeWarning):
        s.autotune("matmul", (1, 1, 1, "float32"), {V.MATMUL_TILED: lambda: None})
    assert s.lookup_tuned("matmul", (1, 1, 1, "float32")) is V.MATMUL_TILED


@pytest.mark.parametrize(
    ("op", "key", "candidates", "repeats", "error", "match"),
    [
        ("matmul", (1,), {}, 3, ValueError, r"autotune: no candidates for op 'matmul'"),
        ("matmul", (1,), {V.CONV2D_NAIVE: lambda: None}, 3, ValueError,
         r"candidate CONV2D_NAIVE is not a matmul kernel"),
        ("matmul", (1,), {V.MATMUL_NAIVE: lambda: None}, 0, ValueError,
         r"repeats must be >= 1, got 0"),
        ("matmul", [1], {V.MATMUL_NAIVE: lambda: None}, 3, TypeError, r"key must be a tuple"),
        ("matmul", (object(),), {V.MATMUL_NAIVE: lambda: None}, 3, TypeError, r"key items must"),
        ("", (1,), {V.MATMUL_NAIVE: lambda: None}, 3, TypeError, r"op must be a non-empty str"),
        ("matmul", (1,), {"MATMUL_NAIVE": lambda: None}, 3, TypeError, r"candidates must map"),
    ],
)
def test_autotune_bad_arguments(
    op: str, key: Any, candidates: Any, repeats: int, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        sel(hopper()).autotune(op, key, candidates, repeats=repeats)


def test_tune_file_is_per_device_and_driver() -> None:
    names = {sel(p).tuned_path().name for p in (hopper(), ampere(), rdna3())}
    newer = dataclasses.replace(hopper(), driver_version="590.1")
    names.add(sel(newer).tuned_path().name)
    assert len(names) == 4


# --- per-device selectors -----------------------------------------------------------------


def test_get_kernel_selector_memoized() -> None:
    dev = FakeDevice(name="NVIDIA H200", vendor="NVIDIA Corporation", local_mem_size=49152)
    s = get_kernel_selector(dev)
    assert s is get_kernel_selector(dev) and s.profile.architecture == "hopper"
    assert get_kernel_selector() is get_kernel_selector(None)
    assert get_kernel_selector().profile.vendor_family == "numpy"
    assert select_matmul_config(1024, 1024, 1024, device=dev).tile_m == 128
    assert select_matmul_config(1024, 1024, 1024).tile_m == 64
    assert select_conv2d_config(1, 256, 8, 8, 256, 3, 3, device=dev).variant is (
        V.CONV2D_WINOGRAD)
    assert select_conv2d_config(1, 8, 8, 8, 8, 3, 3).variant is V.CONV2D_IM2COL


def test_selector_rejects_plain_profile() -> None:
    from netcl.core.capabilities import numpy_profile

    with pytest.raises(TypeError, match=r"KernelSelector: profile must be an ExtendedDevice"):
        KernelSelector(numpy_profile())  # type: ignore[arg-type]


def _real_devices() -> list[Any]:
    """Every OpenCL device that passed netcl's probe (none without pyopencl or a driver)."""
    return [h.cl_device for h in available_devices() if h.backend == "cl"]


@pytest.mark.parametrize("device", _real_devices(), ids=lambda d: str(d.name))
def test_real_device_decisions_fit_the_device(device: Any) -> None:
    s = get_kernel_selector(device)
    p = s.profile
    configs = [
        s.select_matmul_kernel(*mnk) for mnk in ((7, 33, 257), (256, 256, 256), (2048,) * 3)
    ] + [s.select_conv2d_kernel(2, 64, 56, 56, 64, r, r, padding=r // 2) for r in (1, 3, 5)]
    configs.append(s.select_elementwise_kernel(1 << 20))
    configs.append(s.select_reduction_kernel(1 << 20))
    for cfg in configs:
        assert cfg.local_size_2d[0] * cfg.local_size_2d[1] <= p.max_work_group_size
        assert cfg.local_size_1d <= p.max_work_group_size
        itemsize = 8 if cfg.extra.get("dtype") == "float64" else 4
        if cfg.use_local_memory and cfg.variant.family == "matmul":
            assert (cfg.tile_m + cfg.tile_n) * cfg.tile_k * itemsize <= p.local_mem_size
    if p.device_type == "cpu":
        assert [c.variant for c in configs[3:6]] == [V.CONV2D_IM2COL, V.CONV2D_WINOGRAD,
                                                     V.CONV2D_IM2COL]
    width = 8 if p.preferred_vector_width_float >= 8 else 4
    assert configs[6].vector_width == width


def test_doctests() -> None:
    result = doctest.testmod(kernel_selector)
    assert result.failed == 0 and result.attempted > 0
