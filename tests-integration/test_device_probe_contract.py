"""netcl-data reads netcl-core's device rules by itself (it imports no other layer): the probe
cache's place, format and keys, and the ICD vendors folder, must be the same in both."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from netcl.core import device_probe, icd
from netcl.core._paths import cache_dir
from netcl.core.device import DeviceManager
from netcl.data import _cl_devices

pytest.importorskip("pyopencl")
augment_gpu = pytest.importorskip("netcl.data.augment_gpu")


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("NETCL_REPROBE", raising=False)
    return tmp_path


def test_same_cache_place_and_key() -> None:
    assert _cl_devices.cache_root() / "devices" / "probe.json" == device_probe.probe_cache_path()
    assert cache_dir() == _cl_devices.cache_root()
    args = ("Intel(R) OpenCL ", "AMD EPYC", " 2026.22", "OpenCL 3.1 LINUX")
    assert _cl_devices.verdict_key(*args) == device_probe.verdict_key(*args)
    assert _cl_devices.PROBE_FORMAT == device_probe.PROBE_FORMAT


def test_data_obeys_a_verdict_core_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    m = DeviceManager()
    if not m.discover():
        pytest.skip("no OpenCL device")
    victim = m.discover()[0][1]
    monkeypatch.setattr(
        device_probe, "probe",
        lambda dev: device_probe.Verdict(dev.name != victim.name, "planted: builds fail"),
    )
    for i in range(len(m.discover())):
        m.verdict(i)  # core stores its verdicts
    usable, skipped = augment_gpu.opencl_devices()
    assert victim.name not in [d.name for d in usable]
    assert (victim.name, "planted: builds fail") in [(d.name, r) for d, r in skipped]
    assert any("planted: builds fail" in line for line in augment_gpu.device_report())
    if not usable:
        with pytest.raises(RuntimeError, match="no usable OpenCL device; skipped"):
            augment_gpu.default_queue()
    else:
        assert augment_gpu.default_queue().device.name == usable[0].name


def test_same_vendors_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = tmp_path / "env"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libintelocl.so").write_bytes(b"")
    vendors = tmp_path / "vendors"
    vendors.mkdir()
    (vendors / "other.icd").write_text("libother.so\n")
    monkeypatch.setattr(sys, "prefix", str(prefix))
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("NETCL_ICD_REGISTER", raising=False)
    folders: list[Any] = []
    contents = []
    for register in (icd.register_pip_runtimes, _cl_devices.register_pip_runtimes):
        monkeypatch.setenv("OCL_ICD_VENDORS", str(vendors))
        folders.append(register())
        contents.append({p.name: p.read_text() for p in Path(folders[-1]).glob("*.icd")})
        assert os.environ["OCL_ICD_VENDORS"] == folders[-1]
    assert folders[0] == folders[1]
    assert contents[0] == contents[1] == {
        "other.icd": "libother.so\n",
        "netcl-intel-cpu.icd": f"{prefix}/lib/libintelocl.so\n",
    }


def test_fake_device_key_matches() -> None:
    platform = SimpleNamespace(name="P", version="V")
    dev = SimpleNamespace(name="D", driver_version="1", platform=platform)
    assert _cl_devices.device_key(dev) == device_probe.verdict_key("P", "D", "1", "V")
