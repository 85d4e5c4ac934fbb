"""netcl-ops's selection rules through netcl-core's generic selector: matmul, conv2d,
elementwise, reduction and batchnorm per device profile, the environment switches, forcing,
the ``applies`` contract (a rule never picks a variant that does not apply, over many
geometries), a conv2d variant added by this test alone, and the entry points."""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import os
import subprocess
import sys
import threading
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netcl.core import kernel_selector
from netcl.core.device import DeviceHandle
from netcl.core.device_profile import ExtendedDeviceProfile, extended_profile
from netcl.core.kernel_selector import (
    KernelConfig,
    KernelSelector,
    KernelVariant,
    force_variant,
    get_kernel_selector,
    register_variant,
    select_conv2d_config,
    select_matmul_config,
)
from netcl.core.selection import ENTRY_POINT_GROUP, variant_applies, variant_names
from netcl.core.testing import available_devices
from netcl.ops import _conv, _conv_rule, _kernel_families
from netcl.ops.testing import check_op

V = KernelVariant
IMPLICIT_TILED = _conv_rule.IMPLICIT_TILED
WINOGRAD_F4 = _conv_rule.WINOGRAD_F4
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


def intel_cpu() -> ExtendedDeviceProfile:  # Intel's CPU runtime (on an AMD CPU here)
    return _profile(name="AMD EPYC", vendor="Intel(R) Corporation", type=CPU,
                    extensions="cl_khr_fp64 cl_khr_fp16", local_mem_size=262144,
                    max_work_group_size=8192, preferred_vector_width_float=1,
                    version="OpenCL 3.0 (Build 0)")


def small() -> ExtendedDeviceProfile:  # an embedded GPU: 64 work-items, 4 KiB local memory
    return _profile(name="Mali-T860", vendor="ARM", local_mem_size=4096, max_work_group_size=64)


def numpy_profile() -> ExtendedDeviceProfile:
    return extended_profile(None)


PROFILES = [hopper, ampere, volta, rdna3, rdna2, gcn, intel_xe, pocl, small, numpy_profile]
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
        # NVIDIA Hopper/Ampere (H100 sweeps, #16): 32x32 tiled below 256**3; register-tiled
        # from 256**3: 32x32x16 4x4 below one 64x64 tile per compute unit, 64x64x16 8x4 below
        # one 128x128 tile per unit, 128x128x8 16x8 from there (split K: 64x64x16 8x4); float32
        # with K >= 512 below one 128x128 tile per unit: 128x64x16 8x4 in 2 slices, or below one
        # 64x64 tile per unit 64x64x16 8x4 in 4 (H200 sweep, set 4)
        (hopper, (31, 32, 32), (V.MATMUL_NAIVE, 1, 1, 1, 1, (16, 16), 1)),
        (hopper, (128, 128, 128), (V.MATMUL_TILED, 32, 32, 16, 4, (32, 8), 1)),
        (hopper, (255, 256, 256), (V.MATMUL_TILED, 32, 32, 16, 4, (32, 8), 1)),
        (hopper, (512, 512, 512), (V.MATMUL_REGISTER_TILED, 64, 64, 16, 8, (16, 16), 4)),
        (hopper, (1000, 512, 256), (V.MATMUL_REGISTER_TILED, 32, 32, 16, 4, (16, 16), 4)),
        (hopper, (768, 768, 768), (V.MATMUL_REGISTER_TILED, 128, 64, 16, 8, (16, 16), 4)),
        (hopper, (768, 768, 384), (V.MATMUL_REGISTER_TILED, 64, 64, 16, 8, (16, 16), 4)),
        (ampere, (256, 16384, 256), (V.MATMUL_REGISTER_TILED, 128, 128, 8, 16, (16, 16), 4)),
        (hopper, (1024, 1024, 1024), (V.MATMUL_REGISTER_TILED, 128, 64, 16, 8, (16, 16), 4)),
        (hopper, (2048, 2048, 2048), (V.MATMUL_REGISTER_TILED, 128, 128, 8, 16, (16, 16), 4)),
        (hopper, (4096, 1023, 4096), (V.MATMUL_REGISTER_TILED, 128, 128, 8, 16, (16, 16), 4)),
        (hopper, (4096, 512, 4096), (V.MATMUL_REGISTER_TILED, 128, 64, 16, 8, (16, 16), 4)),
        (hopper, (128, 4096, 4096), (V.MATMUL_REGISTER_TILED, 64, 64, 16, 8, (16, 16), 4)),
        (ampere, (2048, 2048, 2048), (V.MATMUL_REGISTER_TILED, 128, 128, 8, 16, (16, 16), 4)),
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
    cfg = sel(numpy_profile()).select_matmul_kernel(1024, 1024, 1024)
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
    s = sel(hopper())
    first = s.select_matmul_kernel(300, 300, 300)
    assert s.select_matmul_kernel(300, 300, 300) is first
    assert s.select_matmul_kernel(np.int64(300), 300, 300, "float") is first  # same key
    assert s.select_matmul_kernel(300, 300, 300, "float16") is not first


# --- conv2d -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({"R": 1, "S": 1}, IMPLICIT_TILED),
        ({"R": 1, "S": 1, "stride": 2}, IMPLICIT_TILED),
        ({"R": 3, "S": 3, "padding": 1}, WINOGRAD_F4),
        ({"R": 3, "S": 3, "stride": (1, 1)}, WINOGRAD_F4),
        ({"R": 3, "S": 3, "stride": 2}, IMPLICIT_TILED),
        ({"R": 3, "S": 3, "stride": (1, 2)}, IMPLICIT_TILED),
        ({"R": 3, "S": 3, "dilation": 2}, IMPLICIT_TILED),
        ({"R": 3, "S": 3, "groups": 2}, IMPLICIT_TILED),
        ({"R": 5, "S": 5, "padding": 2}, IMPLICIT_TILED),
        ({"R": 3, "S": 1}, IMPLICIT_TILED),
    ],
)
def test_conv2d_gpu_rules(monkeypatch: pytest.MonkeyPatch, kw: dict[str, Any],
                          expected: Any) -> None:
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "0")  # the spec page's routing
    args = {"N": 32, "C": 64, "H": 32, "W": 32, "K": 64, **kw}  # Winograd from 64 channels
    assert sel(hopper()).select_conv2d_kernel(**args).variant is expected


@pytest.mark.parametrize(
    ("shape", "expected"),
    [  # (N, C, H, K, R, stride, padding): bench_conv_layers' classes (H100; F(4x4): H200)
        ((64, 1, 8, 16, 3, 1, 1), IMPLICIT_TILED),  # the digits CNN
        ((64, 16, 8, 32, 3, 1, 1), IMPLICIT_TILED),
        ((32, 64, 32, 64, 3, 1, 1), WINOGRAD_F4),  # ResNet-18, CIFAR sizes
        ((32, 64, 32, 128, 3, 2, 1), IMPLICIT_TILED),
        ((32, 64, 32, 128, 1, 2, 0), IMPLICIT_TILED),
        ((32, 128, 16, 128, 3, 1, 1), WINOGRAD_F4),
        ((32, 256, 8, 256, 3, 1, 1), WINOGRAD_F4),  # under 16x16: 512 2x2 tiles
        ((32, 512, 4, 512, 3, 1, 1), IMPLICIT_TILED),  # 128 2x2 tiles
        ((32, 64, 56, 64, 3, 1, 1), WINOGRAD_F4),  # ImageNet sizes
        ((32, 128, 28, 128, 3, 1, 1), WINOGRAD_F4),
        ((128, 3, 32, 64, 3, 1, 1), IMPLICIT_TILED),  # the stem: 3 channels
    ],
)
def test_conv2d_gpu_measured_rules(shape: tuple[int, ...], expected: Any) -> None:
    n, c, h, k, r, stride, padding = shape
    cfg = sel(hopper()).select_conv2d_kernel(n, c, h, h, k, r, r, stride, padding)
    assert cfg.variant is expected


@pytest.mark.parametrize("profile", [pocl, numpy_profile])
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
    digits = sel(pocl()).select_conv2d_kernel(64, 16, 8, 8, 32, 3, 3, padding=1)
    assert digits.variant is V.CONV2D_IM2COL  # measured: 8x8 outputs, im2col 1.6x faster
    numpy = sel(numpy_profile()).select_conv2d_kernel(1, 8, 16, 16, 8, 3, 3, padding=1)
    assert numpy.variant is V.CONV2D_IM2COL
    monkeypatch.setenv("NETCL_CONV_WINOGRAD", "0")
    assert sel(pocl()).select_conv2d_kernel(1, 8, 16, 16, 8, 3, 3, padding=1).variant is (
        V.CONV2D_IM2COL)


def test_conv2d_winograd_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "0")
    s = sel(hopper())
    assert s.select_conv2d_kernel(2, 64, 32, 32, 64, 3, 3, padding=1).variant is WINOGRAD_F4
    monkeypatch.setenv("NETCL_CONV_WINOGRAD", "0")  # read at decision time, not cached over
    assert s.select_conv2d_kernel(2, 64, 32, 32, 64, 3, 3, padding=1).variant is IMPLICIT_TILED
    monkeypatch.setenv("NETCL_CONV_WINOGRAD", "maybe")
    with pytest.raises(ValueError, match=r"NETCL_CONV_WINOGRAD must be one of 1/0, true/false, "
                                         r"yes/no, on/off, got 'maybe'"):
        s.select_conv2d_kernel(2, 16, 32, 32, 32, 3, 3)


def test_conv2d_tiled_local_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    s = sel(hopper())
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "0")
    assert s.select_conv2d_kernel(1, 8, 32, 32, 8, 5, 5).variant is IMPLICIT_TILED
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "1")
    cfg = s.select_conv2d_kernel(1, 8, 32, 32, 8, 5, 5)  # 28x28 output: small
    assert (cfg.variant, cfg.tile_m, cfg.tile_n, cfg.use_local_memory) == (
        V.CONV2D_TILED_LOCAL, 16, 16, True)
    assert s.select_conv2d_kernel(1, 8, 36, 36, 8, 5, 5).variant is (  # 32x32: still small
        V.CONV2D_TILED_LOCAL)
    assert s.select_conv2d_kernel(1, 8, 37, 37, 8, 5, 5).variant is IMPLICIT_TILED
    # =1 puts tiled-local before Winograd for every small plane (but not 1x1)
    assert s.select_conv2d_kernel(1, 8, 32, 32, 8, 3, 3).variant is V.CONV2D_TILED_LOCAL
    assert s.select_conv2d_kernel(1, 256, 8, 8, 256, 3, 3).variant is V.CONV2D_TILED_LOCAL
    assert s.select_conv2d_kernel(1, 8, 32, 32, 8, 1, 1).variant is IMPLICIT_TILED
    monkeypatch.delenv("NETCL_CONV_TILED_LOCAL")  # unset: the measured rule (no tiled-local)
    assert s.select_conv2d_kernel(1, 8, 32, 32, 8, 3, 3).variant is IMPLICIT_TILED
    assert s.select_conv2d_kernel(1, 256, 18, 18, 256, 3, 3).variant is WINOGRAD_F4
    assert s.select_conv2d_kernel(1, 256, 8, 8, 256, 3, 3).variant is IMPLICIT_TILED  # 6x6
    assert s.select_conv2d_kernel(1, 128, 8, 8, 8, 5, 5).variant is IMPLICIT_TILED
    assert s.select_conv2d_kernel(1, 128, 24, 24, 8, 3, 3, padding=1).variant is (
        IMPLICIT_TILED)  # 8 output channels: under Winograd's 64
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "yes please")
    with pytest.raises(ValueError,
                       match=r"NETCL_CONV_TILED_LOCAL must be one of 1/0.*'yes please'"):
        s.select_conv2d_kernel(1, 8, 32, 32, 8, 3, 3)


def test_conv2d_tiled_local_window_that_does_not_fit_runs_im2col(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """4 KiB local memory: a 7x7 window dilated by 2 stages a 20x28 patch (over 2 KiB)."""
    monkeypatch.setenv("NETCL_CONV_TILED_LOCAL", "1")
    s = sel(small())
    assert s.select_conv2d_kernel(1, 8, 32, 32, 8, 3, 3).variant is V.CONV2D_TILED_LOCAL
    assert s.select_conv2d_kernel(1, 8, 40, 40, 8, 7, 7, dilation=2).variant is (
        V.CONV2D_IM2COL)
    with force_variant(V.CONV2D_TILED_LOCAL):  # forced where it cannot run: the rule
        assert s.select_conv2d_kernel(1, 8, 40, 40, 8, 7, 7, dilation=2).variant is (
            V.CONV2D_IM2COL)


def test_conv2d_forced_winograd_gives_way_off_3x3() -> None:
    s = sel(hopper())
    with force_variant(V.CONV2D_WINOGRAD):
        assert s.select_conv2d_kernel(1, 8, 16, 16, 8, 3, 3).variant is V.CONV2D_WINOGRAD
        # 5x5: the rule's choice (the register-tiled implicit GEMM)
        assert s.select_conv2d_kernel(1, 8, 16, 16, 8, 5, 5).variant is IMPLICIT_TILED


def _implicit_gemm_config(*args: Any) -> KernelConfig:
    """CONV2D_IMPLICIT_GEMM's config as a tuned winner gets it (no GPU rule picks it now)."""
    return _conv_rule.conv2d_config(hopper(), V.CONV2D_IMPLICIT_GEMM,
                                    _conv_rule.parse_conv2d(*args))


def test_conv2d_implicit_gemm_takes_matmul_tiles() -> None:
    cfg = _implicit_gemm_config(32, 64, 16, 16, 128, 1, 1)
    assert cfg.extra["gemm_shape"] == (32 * 16 * 16, 128, 64)
    assert cfg.extra["gemm_variant"] == "MATMUL_REGISTER_TILED"
    assert tiles(cfg) == (V.CONV2D_IMPLICIT_GEMM, 64, 64, 16, 8, (16, 16), 4)
    big = _implicit_gemm_config(32, 512, 56, 56, 1024, 1, 1)
    assert (big.tile_m, big.work_per_thread) == (128, 16)
    tiny = _implicit_gemm_config(1, 2, 4, 4, 2, 1, 1)  # GEMM too small to tile
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
        ({"groups": 3}, ValueError,
         r"select_conv2d_kernel: groups=3 must divide input channels 16 and output channels 32"),
        ({"H": 2, "W": 2}, ValueError, r"input 2x2 is too small for a 3x3 kernel"),
        ({"padding": -1}, ValueError, r"padding must be an int >= 0 or a pair of them, got -1"),
        ({"stride": 0}, ValueError, r"stride must be an int >= 1 or a pair of them, got 0"),
        ({"stride": (1, 2, 3)}, TypeError, r"stride must be an int or a pair of ints"),
        ({"C": 0}, ValueError, r"select_conv2d_kernel: C must be >= 1, got 0"),
        ({"groups": 0}, ValueError, r"select_conv2d_kernel: groups must be >= 1, got 0"),
        ({"dtype": "uint8"}, TypeError, r"select_conv2d_kernel: dtype must be one of"),
    ],
)
def test_conv2d_bad_arguments(kw: dict[str, Any], error: type[Exception], match: str) -> None:
    args = {"N": 1, "C": 16, "H": 8, "W": 8, "K": 32, "R": 3, "S": 3, **kw}
    with pytest.raises(error, match=match):
        sel(hopper()).select_conv2d_kernel(**args)


# --- the applies contract over many geometries ---------------------------------------------


@st.composite
def conv_args(draw: st.DrawFn) -> dict[str, Any]:
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    r, s = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    h = draw(st.integers((r - 1) * dilation[0] + 1, 70))
    w = draw(st.integers((s - 1) * dilation[1] + 1, 70))
    return {"N": draw(st.integers(1, 64)), "C": groups * draw(st.integers(1, 200)),
            "H": h, "W": w, "K": groups * draw(st.integers(1, 200)), "R": r, "S": s,
            "stride": stride, "padding": padding, "dilation": dilation, "groups": groups,
            "dtype": draw(st.sampled_from(["float32", "float16", "float64"]))}


@given(kw=conv_args(), profile=st.sampled_from(PROFILES),
       winograd=st.sampled_from([None, "0", "1"]), tiled=st.sampled_from([None, "0", "1"]),
       forced=st.sampled_from([None, *(v for v in V if v.family == "conv2d")]))
@settings(max_examples=300, deadline=None)
def test_conv2d_selection_always_applies(kw: dict[str, Any], profile: Any, winograd: Any,
                                         tiled: Any, forced: Any) -> None:
    """Over random geometries, devices, switches and forced variants, the config names a
    variant that computes the convolution (the selector raises if a rule breaks this, and
    a forced one that does not apply gives way)."""
    p = profile()
    env = {"NETCL_CONV_WINOGRAD": winograd, "NETCL_CONV_TILED_LOCAL": tiled}
    with pytest.MonkeyPatch.context() as mp:
        for name, value in env.items():
            if value is None:
                mp.delenv(name, raising=False)
            else:
                mp.setenv(name, value)
        with force_variant(*([forced] if forced else [])):
            cfg = sel(p).select_conv2d_kernel(**kw)
    query = _conv_rule.parse_conv2d(**kw)
    assert variant_applies(cfg.variant, p, query)
    assert cfg.variant in _conv.RUNNERS
    if forced is not None and variant_applies(forced, p, query):
        assert cfg.variant is forced
    if cfg.variant is V.CONV2D_WINOGRAD:
        assert _conv_rule.winograd_applies(query.geometry)


@given(m=st.integers(1, 5000), n=st.integers(1, 5000), k=st.integers(1, 5000),
       profile=st.sampled_from(PROFILES), dtype=st.sampled_from(["float32", "float64"]))
@settings(max_examples=200, deadline=None)
def test_matmul_selection_fits_the_device(m: int, n: int, k: int, profile: Any,
                                          dtype: str) -> None:
    p = profile()
    cfg = sel(p).select_matmul_kernel(m, n, k, dtype)
    assert cfg.variant.family == "matmul"
    if p.local_mem_size:
        assert cfg.local_size_2d[0] * cfg.local_size_2d[1] <= p.max_work_group_size
        if cfg.use_local_memory:
            width = 8 if dtype == "float64" else 4
            assert (cfg.tile_m + cfg.tile_n) * cfg.tile_k * width <= p.local_mem_size


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
        (intel_cpu, 4096, "float32", V.ELEMENTWISE_SCALAR, 1),  # preferred float width 1
        (intel_cpu, 4096, "float16", V.ELEMENTWISE_SCALAR, 1),
        (numpy_profile, 10**6, "float32", V.ELEMENTWISE_VECTORIZED, 4),
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


def test_reduction_on_opencl_cpus_is_sequential() -> None:
    assert sel(pocl()).select_reduction_kernel(10**6).variant is V.REDUCTION_SEQUENTIAL


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


# --- forcing the built-in families ----------------------------------------------------------


def test_force_variant_per_family() -> None:
    s = sel(hopper())
    assert s.select_matmul_kernel(8, 8, 8).variant is V.MATMUL_NAIVE
    with force_variant(V.MATMUL_TILED, V.CONV2D_NAIVE):
        assert tiles(s.select_matmul_kernel(8, 8, 8)) == (
            V.MATMUL_TILED, 16, 16, 16, 1, (16, 16), 1)  # the variant's defaults
        assert s.select_conv2d_kernel(1, 3, 8, 8, 4, 3, 3).variant is V.CONV2D_NAIVE
        assert s.select_reduction_kernel(10).variant is V.REDUCTION_SEQUENTIAL  # other family
    assert s.select_matmul_kernel(8, 8, 8).variant is V.MATMUL_NAIVE  # cache not polluted
    with force_variant(V.MATMUL_REGISTER_TILED):
        assert tiles(sel(small()).select_matmul_kernel(8, 8, 8)) == (
            V.MATMUL_REGISTER_TILED, 32, 32, 16, 4, (8, 8), 4)  # still fitted to the device


def test_force_variant_is_thread_local() -> None:
    s = sel(hopper())
    seen: list[Any] = []
    with force_variant(V.MATMUL_TILED):
        t = threading.Thread(target=lambda: seen.append(s.select_matmul_kernel(8, 8, 8).variant))
        t.start()
        t.join()
    assert seen == [V.MATMUL_NAIVE]


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


def test_autotuned_winner_is_selected(tmp_path: Path) -> None:
    s = sel(hopper())
    s.autotune("matmul", (2048, 2048, 2048, "float32"), {V.MATMUL_NAIVE: lambda: None})
    fresh = sel(hopper())  # a new process: reads the device's file
    assert fresh.select_matmul_kernel(2048, 2048, 2048).variant is V.MATMUL_NAIVE
    assert fresh.select_matmul_kernel(2048, 2048, 2048, "float16").variant is (
        V.MATMUL_REGISTER_TILED)
    s.autotune("conv2d", (1, 8, 16, 16, 8, 5, 5, (1, 1), (0, 0), (1, 1), 1, "float32"),
               {V.CONV2D_WINOGRAD: lambda: None})  # a winner that cannot run this geometry
    assert sel(hopper()).select_conv2d_kernel(1, 8, 16, 16, 8, 5, 5).variant is IMPLICIT_TILED


# --- a conv2d variant that only netcl-ops (here: this test) knows ----------------------------


def test_a_new_conv2d_variant_needs_no_core_change(dev: DeviceHandle,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Register CONV2D_GATHER_TEST (one group only) with its runner: forced, it runs and
    matches the reference; on a grouped convolution it gives way to the rule."""
    ran: list[str] = []

    def runner(x: Any, w: Any, b: Any, g: Any, out: Any, cfg: KernelConfig) -> None:
        ran.append(cfg.variant.name)
        _conv.RUNNERS[V.CONV2D_NAIVE](x, w, b, g, out, cfg)

    extra = register_variant("CONV2D_GATHER_TEST", {"use_local_memory": False},
                             applies=lambda p, q: q.geometry.groups == 1)
    assert "CONV2D_GATHER_TEST" in variant_names("conv2d")
    monkeypatch.setitem(_conv.RUNNERS, extra, runner)
    rng = np.random.default_rng(3)
    x, w, w2 = rng.standard_normal((2, 4, 7, 9)), rng.standard_normal((3, 4, 3, 2)), (
        rng.standard_normal((4, 2, 3, 3)))
    with force_variant(extra):
        check_op(dev, lambda a, b: _conv.conv2d(a, b, stride=(2, 1), padding=1),
                 lambda a, b: _reference_conv(a, b, (2, 1), 1), (x, w), scale=10.0)
        check_op(dev, lambda a, b: _conv.conv2d(a, b, padding=1, groups=2),
                 lambda a, b: _reference_conv(a, b, 1, 1, 2), (x, w2), scale=10.0)
    assert ran == ([] if dev.backend == "cpu" else ["CONV2D_GATHER_TEST"])


def _reference_conv(x: Any, w: Any, stride: Any = 1, padding: Any = 0, groups: int = 1) -> Any:
    """A direct loop in float64 (output size from the windows that fit)."""
    (sh, sw), (ph, pw) = (np.broadcast_to(v, 2) for v in (stride, padding))
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    k, cg, r, s = w.shape
    rows, cols = range(0, xp.shape[2] - r + 1, sh), range(0, xp.shape[3] - s + 1, sw)
    y = np.zeros((x.shape[0], k, len(rows), len(cols)))
    for o in range(k):
        g = o // (k // groups)
        for i, h0 in enumerate(rows):
            for j, w0 in enumerate(cols):
                patch = xp[:, g * cg:(g + 1) * cg, h0:h0 + r, w0:w0 + s]
                y[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return y


# --- the spec's wrappers, real devices, entry points, core's examples ---------------------------


def test_spec_wrappers_resolve_through_the_families() -> None:
    dev = FakeDevice(name="NVIDIA H200", vendor="NVIDIA Corporation", local_mem_size=49152)
    s = get_kernel_selector(dev)
    assert s is get_kernel_selector(dev) and s.profile.architecture == "hopper"
    assert select_matmul_config(1024, 1024, 1024, device=dev).tile_m == 128
    assert select_matmul_config(1024, 1024, 1024).tile_m == 64
    assert select_conv2d_config(1, 256, 18, 18, 256, 3, 3, device=dev).variant is WINOGRAD_F4
    assert select_conv2d_config(1, 8, 8, 8, 8, 3, 3).variant is V.CONV2D_IM2COL


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
    if p.opencl_cpu and p.preferred_vector_width_float <= 1:
        width = 1  # scalar elementwise kernels (Intel's CPU runtime)
    assert configs[6].vector_width == width


def _require_installed_distribution() -> None:
    """Entry points come from an installed netcl-ops (its metadata), not from its sources."""
    try:
        distribution("netcl-ops")
    except PackageNotFoundError:
        pytest.skip("running from sources, not installed: no entry-point metadata")


def test_entry_points_name_the_families() -> None:
    """netcl-core loads a family through these when netcl.ops was not imported."""
    _require_installed_distribution()
    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    names = [f.name for f in _kernel_families.KERNEL_FAMILIES]
    assert {n: found.get(n) for n in names} == dict.fromkeys(names, "netcl.ops._kernel_families")


def test_core_alone_loads_the_families_through_the_entry_points() -> None:
    """A process that imports only netcl.core's selector still gets netcl-ops's rules."""
    _require_installed_distribution()
    code = ("import sys\n"
            "from netcl.core.kernel_selector import select_matmul_config\n"
            "assert 'netcl.ops' not in sys.modules\n"
            "print(select_matmul_config(64, 64, 64).variant.name, 'netcl.ops' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["MATMUL_TILED", "True"]


def test_core_examples_that_need_the_rules() -> None:
    """netcl.core.kernel_selector's examples marked +SKIP (they need these rules) run here."""
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = doctest.DocTestFinder().find(kernel_selector)
    for test in tests:
        for example in test.examples:
            example.options.pop(doctest.SKIP, None)
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted > 10


@pytest.mark.parametrize("module", ["_matmul_rule", "_conv_rule", "_selection_rules",
                                    "_kernel_families"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(f"netcl.ops.{module}"))
    assert result.failed == 0 and result.attempted > 0
