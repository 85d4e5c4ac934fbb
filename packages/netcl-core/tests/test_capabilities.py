"""The cl_khr_fp16 probe, DeviceProfile, kernel_strategy and ExtendedDeviceProfile.

Stand-in devices cover NVIDIA Hopper/Ampere/Ada/Turing/Volta, AMD RDNA/CDNA/GCN, Intel,
Apple and PoCL; the last tests read every real OpenCL device on this machine.
"""

from __future__ import annotations

import dataclasses
import doctest
import importlib.metadata
import os
import subprocess
import sys
from typing import Any

import pytest

from netcl.core import capabilities, device_profile
from netcl.core.capabilities import (
    DeviceProfile,
    device_type_name,
    kernel_strategy,
    numpy_profile,
    vendor_family_of,
)
from netcl.core.device_profile import ExtendedDeviceProfile, architecture_of, extended_profile
from netcl.core.testing import available_devices

GPU, CPU, ACCEL, DEFAULT = 4, 2, 8, 1


@dataclasses.dataclass(eq=False)  # hashed by identity, like one cl_device_id
class FakeDevice:
    """The attributes netcl reads from a ``pyopencl.Device``."""

    name: str = "Fake GPU"
    vendor: str = "ACME"
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
    nv_cc: tuple[int, int] | None = None
    board_name_amd: str | None = None

    def __getattr__(self, attr: str) -> Any:
        # Like pyopencl: vendor queries exist only on that vendor's driver, else raise.
        if attr == "compute_capability_major_nv" and self.nv_cc is not None:
            return self.nv_cc[0]
        if attr == "compute_capability_minor_nv" and self.nv_cc is not None:
            return self.nv_cc[1]
        raise AttributeError(attr)


def nvidia(name: str, cc: tuple[int, int] | None = None, **kw: Any) -> FakeDevice:
    return FakeDevice(name=name, vendor="NVIDIA Corporation", nv_cc=cc, local_mem_size=49152,
                      version="OpenCL 3.0 CUDA", driver_version="580.159.04", **kw)


def amd(name: str, board: str | None = None, **kw: Any) -> FakeDevice:
    return FakeDevice(name=name, vendor="Advanced Micro Devices, Inc.", board_name_amd=board,
                      extensions="cl_khr_fp16 cl_khr_subgroups", **kw)


POCL_EXTENSIONS = (
    "cl_khr_byte_addressable_store cl_khr_global_int32_base_atomics "
    "cl_khr_global_int32_extended_atomics cl_khr_int64_base_atomics cl_khr_fp64"
)


def pocl_cpu() -> FakeDevice:
    return FakeDevice(name="pthread-AMD EPYC", vendor="AuthenticAMD", type=CPU,
                      extensions=POCL_EXTENSIONS, local_mem_size=524288, max_work_group_size=4096,
                      preferred_vector_width_float=8, host_unified_memory=True,
                      version="OpenCL 3.0 PoCL HSTR: pthread-x86_64-unknown-linux-gnu-znver3")


# --- DeviceProfile and the extension probe ---------------------------------------------


@pytest.mark.parametrize(
    ("extensions", "fp16", "fp64", "subgroups", "atomics"),
    [
        ("", False, False, False, False),
        ("cl_khr_fp16", True, False, False, False),
        ("cl_amd_fp16_ext", True, False, False, False),  # "mentions fp16"
        ("cl_khr_fp64 cl_khr_subgroups", False, True, True, False),
        ("cl_intel_subgroups", False, False, True, False),
        ("cl_khr_int64_base_atomics", False, False, False, True),
        ("cl_khr_global_int32_extended_atomics", False, False, False, True),
        ("cl_khr_global_int32_base_atomics cl_khr_local_int32_base_atomics", False, False, False,
         False),
    ],
)
def test_extension_rules(
    extensions: str, fp16: bool, fp64: bool, subgroups: bool, atomics: bool
) -> None:
    p = capabilities.device_profile(FakeDevice(extensions=extensions))
    assert (p.has_fp16, p.supports_fp16, p.has_fp64, p.has_subgroups, p.fast_atomics) == (
        fp16, fp16, fp64, subgroups, atomics
    )
    assert p.extensions == tuple(extensions.split())


def test_device_profile_fields_and_memo() -> None:
    dev = FakeDevice(name=" Tiny ", vendor="ACME ", local_mem_size=32768, max_compute_units=3,
                     max_work_group_size=256)
    p = capabilities.device_profile(dev)
    assert (p.name, p.vendor, p.device_type) == ("Tiny", "ACME", "gpu")
    assert (p.local_mem_size, p.compute_units, p.max_work_group_size) == (32768, 3, 256)
    assert capabilities.device_profile(dev) is p
    assert capabilities.device_profile(cl_device=dev) is p
    assert capabilities.device_profile(FakeDevice()) is not p
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.has_fp16 = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("bits", "name"),
    [(GPU, "gpu"), (CPU, "cpu"), (ACCEL, "accel"), (DEFAULT, "other"), (GPU | DEFAULT, "gpu"),
     (16, "other")],
)
def test_device_type_name(bits: int, name: str) -> None:
    assert device_type_name(bits) == name


def test_numpy_profile() -> None:
    p = numpy_profile()
    assert (p.name, p.vendor, p.device_type) == ("numpy", "numpy", "cpu")
    assert p.has_fp16 and p.supports_fp16 and p.has_fp64
    assert not p.has_subgroups and p.extensions == ()
    assert numpy_profile() is p


# --- kernel_strategy ----------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_strategy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NETCL_KERNEL_STRATEGY", raising=False)


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        (FakeDevice(type=CPU, extensions="cl_khr_fp16 cl_khr_subgroups"), "portable"),  # CPU wins
        (FakeDevice(local_mem_size=8192, extensions="cl_khr_fp16"), "portable"),  # small local
        (FakeDevice(local_mem_size=16384), "portable"),  # 16 KiB is not small; ACME, no ext
        (FakeDevice(extensions="cl_khr_subgroups"), "optimized"),
        (FakeDevice(extensions="cl_khr_fp16"), "optimized"),
        (nvidia("NVIDIA H100 80GB HBM3"), "optimized"),  # vendor, no fp16 or subgroups
        (FakeDevice(vendor="Advanced Micro Devices, Inc."), "optimized"),
        (FakeDevice(vendor="Intel(R) Corporation", name="Intel(R) UHD Graphics 630"), "portable"),
        (pocl_cpu(), "portable"),
    ],
)
def test_kernel_strategy_auto(device: FakeDevice, expected: str) -> None:
    assert kernel_strategy(capabilities.device_profile(device)) == expected


def test_kernel_strategy_numpy_is_portable() -> None:
    assert kernel_strategy(numpy_profile()) == "portable"


@pytest.mark.parametrize(
    ("value", "cpu", "gpu"),
    [("auto", "portable", "optimized"), ("AUTO", "portable", "optimized"),
     ("", "portable", "optimized"), ("portable", "portable", "portable"),
     (" Optimized ", "optimized", "optimized")],
)
def test_kernel_strategy_env(
    monkeypatch: pytest.MonkeyPatch, value: str, cpu: str, gpu: str
) -> None:
    monkeypatch.setenv("NETCL_KERNEL_STRATEGY", value)
    assert kernel_strategy(capabilities.device_profile(pocl_cpu())) == cpu
    assert kernel_strategy(capabilities.device_profile(nvidia("NVIDIA A100"))) == gpu


def test_kernel_strategy_env_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_KERNEL_STRATEGY", "fast")
    with pytest.raises(ValueError, match=r"NETCL_KERNEL_STRATEGY.*'fast'"):
        kernel_strategy(numpy_profile())


@pytest.mark.parametrize(
    ("vendor", "name", "version", "family"),
    [
        ("NVIDIA Corporation", "NVIDIA H200", "OpenCL 3.0 CUDA", "nvidia"),
        ("Advanced Micro Devices, Inc.", "gfx1100", "OpenCL 2.0 AMD-APP", "amd"),
        ("AMD", "gfx90a", "", "amd"),
        ("Intel(R) Corporation", "Intel(R) Arc(TM) A770", "", "intel"),
        ("Apple", "Apple M2", "OpenCL 1.2", "apple"),
        ("AuthenticAMD", "pthread-AMD EPYC", "OpenCL 3.0 PoCL HSTR", "pocl"),
        ("GenuineIntel", "cpu-haswell", "OpenCL 3.0 PoCL", "pocl"),
        ("numpy", "numpy", "", "numpy"),
        ("ARM", "Mali-G78", "OpenCL 3.0", "other"),
    ],
)
def test_vendor_family_of(vendor: str, name: str, version: str, family: str) -> None:
    assert vendor_family_of(vendor, name, version) == family


# --- ExtendedDeviceProfile ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "family", "arch", "cc"),
    [
        (nvidia("NVIDIA H100 80GB HBM3", (9, 0)), "nvidia", "hopper", (9, 0)),
        (nvidia("NVIDIA H200"), "nvidia", "hopper", None),  # from the name
        (nvidia("NVIDIA GH200 480GB"), "nvidia", "hopper", None),
        (nvidia("NVIDIA Graphics Device", (9, 0)), "nvidia", "hopper", (9, 0)),
        (nvidia("NVIDIA A100-SXM4-80GB"), "nvidia", "ampere", None),
        (nvidia("NVIDIA A10G"), "nvidia", "ampere", None),
        (nvidia("NVIDIA GeForce RTX 3090", (8, 6)), "nvidia", "ampere", (8, 6)),
        (nvidia("NVIDIA GeForce RTX 4090", (8, 9)), "nvidia", "ada", (8, 9)),
        (nvidia("NVIDIA L4"), "nvidia", "ada", None),
        (nvidia("NVIDIA RTX 6000 Ada Generation"), "nvidia", "ada", None),
        (nvidia("Tesla T4"), "nvidia", "turing", None),
        (nvidia("Tesla T4", (7, 5)), "nvidia", "turing", (7, 5)),
        (nvidia("Tesla V100-SXM2-16GB"), "nvidia", "volta", None),
        (nvidia("NVIDIA A100", (9, 0)), "nvidia", "hopper", (9, 0)),  # CC wins over the name
        (nvidia("Quadro K2000"), "nvidia", "unknown", None),
        (amd("gfx1100", "AMD Radeon RX 7900 XTX"), "amd", "rdna3", None),
        (amd("gfx1030"), "amd", "rdna2", None),
        (amd("Navi 21", "AMD Radeon RX 6800 XT"), "amd", "rdna2", None),
        (amd("gfx1010:xnack-"), "amd", "rdna", None),
        (amd("gfx90a:sramecc+:xnack-"), "amd", "cdna", None),
        (amd("Ellesmere", "Radeon RX 580 Series"), "amd", "gcn", None),
        (amd("gfx803"), "amd", "gcn", None),
        (FakeDevice(vendor="Intel(R) Corporation", name="Intel(R) Iris(R) Xe Graphics"), "intel",
         "xe", None),
        (FakeDevice(vendor="Intel(R) Corporation", name="Intel(R) Arc(TM) A770 Graphics"),
         "intel", "xe", None),
        (FakeDevice(vendor="Intel(R) Corporation", name="Intel(R) UHD Graphics 630"), "intel",
         "gen", None),
        (FakeDevice(vendor="Apple", name="Apple M1 Pro"), "apple", "apple", None),
        (pocl_cpu(), "pocl", "cpu", None),
        (FakeDevice(vendor="ARM", name="Mali-G78"), "other", "unknown", None),
    ],
    ids=lambda v: v.name if isinstance(v, FakeDevice) else None,
)
def test_extended_profile_architecture(
    device: FakeDevice, family: str, arch: str, cc: tuple[int, int] | None
) -> None:
    p = extended_profile(device)
    assert (p.vendor_family, p.architecture, p.compute_capability) == (family, arch, cc)


def test_extended_profile_fields() -> None:
    dev = nvidia("NVIDIA H100 80GB HBM3", (9, 0), extensions="cl_khr_fp64 cl_khr_subgroups")
    p = extended_profile(dev)
    base = capabilities.device_profile(dev)
    assert isinstance(p, DeviceProfile)
    for f in dataclasses.fields(DeviceProfile):
        assert getattr(p, f.name) == getattr(base, f.name), f.name
    assert p.max_work_item_sizes == (1024, 1024, 64)
    assert (p.preferred_vector_width_float, p.preferred_vector_width_half) == (1, 0)
    assert (p.driver_version, p.opencl_version) == ("580.159.04", "OpenCL 3.0 CUDA")
    assert p.global_mem_size == 8 << 30
    assert p.is_integrated is False
    assert kernel_strategy(p) == "optimized"
    assert extended_profile(dev) is p
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.architecture = "ampere"  # type: ignore[misc]


def test_extended_profile_integrated() -> None:
    assert extended_profile(pocl_cpu()).is_integrated is True  # CPU devices always
    igpu = FakeDevice(vendor="Intel(R) Corporation", name="Intel(R) Iris(R) Xe Graphics",
                      host_unified_memory=True)
    assert extended_profile(igpu).is_integrated is True
    assert extended_profile(FakeDevice(host_unified_memory=False)).is_integrated is False


def test_extended_profile_tolerates_missing_queries() -> None:
    class Minimal:  # an OpenCL 1.0-era driver: only the required queries
        name, vendor, type, extensions = "NVIDIA Tesla T4", "NVIDIA Corporation", GPU, ""
        local_mem_size, max_compute_units, max_work_group_size = 49152, 40, 1024

    p = extended_profile(Minimal())
    assert (p.architecture, p.compute_capability, p.max_work_item_sizes) == ("turing", None, ())
    assert (p.driver_version, p.opencl_version, p.global_mem_size) == ("", "", 0)


def test_numpy_extended_profile() -> None:
    p = extended_profile(None)
    assert p is extended_profile()
    assert (p.vendor_family, p.architecture, p.device_type, p.is_integrated) == (
        "numpy", "cpu", "cpu", True
    )
    assert p.has_fp16 and p.has_fp64 and p.local_mem_size == 0
    assert isinstance(p, ExtendedDeviceProfile)


def test_architecture_of_cpu_device() -> None:
    assert architecture_of("intel", "cpu", "Intel(R) Xeon(R) Gold") == "cpu"


# --- real devices -------------------------------------------------------------------------


def _real_devices() -> list[Any]:
    """Every OpenCL device that passed netcl's probe (none without pyopencl or a driver)."""
    return [h.cl_device for h in available_devices() if h.backend == "cl"]


@pytest.mark.parametrize("device", _real_devices(), ids=lambda d: str(d.name))
def test_real_device_profile(device: Any) -> None:
    p = extended_profile(device)
    extensions = tuple(device.extensions.split())
    assert p.extensions == extensions
    assert p.name == device.name.strip() and p.vendor == device.vendor.strip()
    assert p.has_fp16 == any("fp16" in e for e in extensions)
    assert p.has_fp64 == any("fp64" in e for e in extensions)
    assert p.has_subgroups == any("subgroup" in e for e in extensions)
    assert p.local_mem_size == device.local_mem_size
    assert p.compute_units == device.max_compute_units
    assert p.max_work_group_size == device.max_work_group_size
    assert p.max_work_item_sizes == tuple(device.max_work_item_sizes)
    assert p.driver_version == device.driver_version
    assert p.opencl_version == device.version
    assert p.global_mem_size == device.global_mem_size
    assert p.preferred_vector_width_float == device.preferred_vector_width_float
    if "pocl" in device.version.lower():
        assert (p.vendor_family, p.architecture, p.is_integrated) == ("pocl", "cpu", True)
    if p.device_type == "cpu":
        assert kernel_strategy(p) == "portable"
    assert extended_profile(device) is p
    assert capabilities.device_profile(device) is capabilities.device_profile(device)


# --- packaging ----------------------------------------------------------------------------


def test_doctests() -> None:
    for module in (capabilities, device_profile):
        result = doctest.testmod(module)
        assert result.failed == 0 and result.attempted > 0, module.__name__


FAMILIES = "netcl.kernel_families"


def test_imports_without_pyopencl() -> None:
    # The matmul family's rule ships with netcl-ops (entry point netcl.kernel_families): with it
    # installed (its entry point, not merely its source on sys.path) the selector answers
    # without pyopencl; netcl-core alone (the core:test env, a fresh venv) gives the typed error
    # naming the package to install.
    code = (
        "import sys; sys.modules['pyopencl'] = None\n"
        "import netcl.core.capabilities, netcl.core.device_profile, netcl.core.kernel_selector\n"
        "from netcl.core.kernel_selector import select_matmul_config\n"
        "from netcl.core.selection import KernelFamilyError\n"
        "try:\n"
        "    print(select_matmul_config(64, 64, 64).variant.name)\n"
        "except KernelFamilyError as e:\n"
        "    print('KernelFamilyError', e)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    if any(ep.name == "matmul" for ep in importlib.metadata.entry_points(group=FAMILIES)):
        assert out.stdout.strip() == "MATMUL_TILED"
    else:
        assert out.stdout.startswith("KernelFamilyError") and "netcl-ops" in out.stdout, out.stdout
