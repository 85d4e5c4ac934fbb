"""Devices are probed before they are offered; unusable ones are skipped, named and explained."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from netcl.core import device_probe, icd
from netcl.core.device import DeviceManager
from netcl.core.device_probe import Verdict, probe_cache_path, verdict, verdict_key
from netcl.core.testing import available_devices


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets an empty probe cache and no NETCL_DEVICE / NETCL_REPROBE."""
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("NETCL_DEVICE", raising=False)
    monkeypatch.delenv("NETCL_REPROBE", raising=False)
    return tmp_path / "cache"


def _fake(driver: str = "1.0") -> tuple[Any, Any]:
    platform = SimpleNamespace(name="Fake Platform", version="OpenCL 3.0 fake")
    dev = SimpleNamespace(name="fake-device", driver_version=driver)
    return platform, dev


def _counting_probe(monkeypatch: pytest.MonkeyPatch, result: Verdict) -> list[Any]:
    calls: list[Any] = []

    def fake_probe(dev: Any) -> Verdict:
        calls.append(dev)
        return result

    monkeypatch.setattr(device_probe, "probe", fake_probe)
    return calls


# --- the probe itself, on every real device -----------------------------------------------


def _cl_devices() -> list[Any]:
    return [h for h in available_devices() if h.backend == "cl"]


@pytest.mark.parametrize("handle", _cl_devices(), ids=str)
def test_every_offered_device_passes_the_real_probe(handle: Any) -> None:
    assert device_probe.probe(handle.cl_device) == Verdict(True, "")


def test_probe_reports_an_exception_as_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # A device object the driver cannot use: the probe says why instead of raising.
    got = device_probe.probe(object())
    assert not got.usable and got.reason and "\n" not in got.reason


# --- the verdict cache --------------------------------------------------------------------


def test_verdict_is_cached_per_driver_and_refreshed_on_a_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _counting_probe(monkeypatch, Verdict(False, "planted: no kernel builds"))
    platform, dev = _fake("1.0")
    assert verdict(platform, dev) == Verdict(False, "planted: no kernel builds")
    assert verdict(platform, dev) == Verdict(False, "planted: no kernel builds")
    assert len(calls) == 1  # the second answer came from the file
    stored = json.loads(probe_cache_path().read_text())
    key = verdict_key("Fake Platform", "fake-device", "1.0", "OpenCL 3.0 fake")
    assert stored["format"] == 1 and stored["devices"][key]["usable"] is False
    assert stored["devices"][key]["reason"] == "planted: no kernel builds"

    new_platform, new_dev = _fake("2.0")  # a driver update: probe again
    verdict(new_platform, new_dev)
    assert len(calls) == 2
    monkeypatch.setenv("NETCL_REPROBE", "1")  # the user asks for a new probe
    verdict(platform, dev)
    assert len(calls) == 3
    assert len(json.loads(probe_cache_path().read_text())["devices"]) == 2


@pytest.mark.parametrize("content", ["{not json", '{"format": 99, "devices": {}}', "[1, 2]"])
def test_a_corrupt_or_foreign_cache_is_probed_over(
    monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    calls = _counting_probe(monkeypatch, Verdict(True))
    probe_cache_path().write_text(content)
    platform, dev = _fake()
    assert verdict(platform, dev).usable
    assert len(calls) == 1
    assert json.loads(probe_cache_path().read_text())["format"] == 1  # rewritten whole


# --- selection obeys the verdicts ---------------------------------------------------------


def _plant_unusable(monkeypatch: pytest.MonkeyPatch, victim: str) -> None:
    """Every device whose name is ``victim`` fails its probe; the others are probed for real."""
    real = device_probe.probe

    def planted(dev: Any) -> Verdict:
        if dev.name.strip() == victim:
            return Verdict(False, "clBuildProgram failed: planted failure")
        return real(dev)

    monkeypatch.setattr(device_probe, "probe", planted)
    probe_cache_path().unlink(missing_ok=True)  # verdicts stored before the plant are stale


def _first_cl() -> Any:
    """The OpenCL device ``auto`` picks here (the one whose failure auto must get around)."""
    handle = DeviceManager().default("cl")
    if handle is None:
        pytest.skip("no usable OpenCL device to plant a failure on")
    return handle


def test_auto_skips_an_unusable_device_says_why_once_and_takes_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    victim = _first_cl()
    _plant_unusable(monkeypatch, victim.device_name)
    m = DeviceManager()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chosen = m.default("auto")
        m.default("cl")
    assert chosen is not None and str(chosen) != str(victim)
    lines = [str(w.message) for w in caught if f"skipped unusable OpenCL device {victim} " in
             str(w.message)]
    assert lines == [
        f"netcl: skipped unusable OpenCL device {victim} (clBuildProgram failed: planted "
        f"failure); {device_probe.remedy(victim.platform_name, victim.device_type)}"
    ]
    assert "\n" not in lines[0]
    assert str(victim) not in [str(h) for h in m.all_handles()]
    assert (str(victim), "clBuildProgram failed: planted failure") in [
        (name, v.reason) for name, v, _ in m.unusable()
    ]


def test_naming_an_unusable_device_raises_with_the_reason_and_the_usable_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    victim = _first_cl()
    _plant_unusable(monkeypatch, victim.device_name)
    m = DeviceManager()
    platforms: list[Any] = []
    for p, _ in m.discover():
        if p not in platforms:
            platforms.append(p)
    index = next(i for i, (_, d) in enumerate(m.discover()) if d.name.strip() == victim.device_name)
    p_index = platforms.index(m.discover()[index][0])
    d_index = [i for i, (p, _) in enumerate(m.discover()) if p == platforms[p_index]].index(index)
    for selector in (f"cl:{p_index}:{d_index}", victim.device_name):
        # a name shared with a usable device picks that one; a unique name must raise
        shared = [d for _, d in m.discover() if victim.device_name.lower() in d.name.lower()]
        if selector == victim.device_name and len(shared) > 1:
            continue
        monkeypatch.setenv("NETCL_DEVICE", selector)
        with pytest.raises(RuntimeError) as err:
            DeviceManager().default("auto")
        text = str(err.value)
        assert f"OpenCL device {victim} is unusable: clBuildProgram failed: planted" in text
        assert "Usable devices: " in text and "cpu (NumPy)" in text


def test_a_real_driver_that_fails_every_build_is_skipped(own_cache: Path) -> None:
    # PoCL honours POCL_EXTRA_BUILD_FLAGS: an unknown -mcpu makes every build fail, as the
    # PyPI PoCL does on CPUs newer than its LLVM. The rest of the machine must still be offered.
    pocl = [h for h in _cl_devices() if "portable computing language" in h.platform_name.lower()]
    if not pocl:
        pytest.skip("no PoCL device")
    code = (
        "import warnings; warnings.simplefilter('always')\n"
        "from netcl.core import manager\n"
        "from netcl.core.testing import device_report\n"
        "print('\\n'.join(device_report())); print('auto:', manager.default('auto'))\n"
    )
    env = {**os.environ, "POCL_EXTRA_BUILD_FLAGS": "-mcpu=netcl-planted", "NETCL_CACHE_DIR":
           str(own_cache / "planted")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    lines = out.stdout.splitlines()
    assert f"netcl devices skipped: {pocl[0]} (" in lines[1]
    assert "-mcpu=netcl-planted" in lines[1]
    assert str(pocl[0]) not in lines[0] and lines[0].startswith("netcl devices under test: cpu")
    assert not lines[2].endswith(pocl[0].device_name)
    if lines[2] == "auto: cpu (NumPy)":  # nothing else to fall back to: said on stderr
        assert f"skipped unusable OpenCL device {pocl[0]}" in out.stderr


# --- pip runtimes registered with the ICD loader ------------------------------------------


def test_pip_runtime_is_registered_beside_the_other_vendors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "env"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "lib" / "libintelocl.so").write_bytes(b"")
    vendors = tmp_path / "vendors"
    vendors.mkdir()
    (vendors / "gpu.icd").write_text("libvendor-gpu.so\n")
    monkeypatch.setattr(icd, "_prefixes", lambda: [str(prefix)])
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv("NETCL_ICD_REGISTER", raising=False)
    monkeypatch.setenv("OCL_ICD_VENDORS", str(vendors))

    folder = icd.register_pip_runtimes()
    assert folder is not None and os.environ["OCL_ICD_VENDORS"] == folder
    files = {p.name: p.read_text() for p in Path(folder).glob("*.icd")}
    assert files == {
        "gpu.icd": "libvendor-gpu.so\n",
        "netcl-intel-cpu.icd": f"{prefix}/lib/libintelocl.so\n",
    }
    assert icd.register_pip_runtimes() == folder  # again: nothing changes

    single = vendors / "gpu.icd"
    monkeypatch.setenv("OCL_ICD_VENDORS", str(single))  # the user chose one vendor
    assert icd.register_pip_runtimes() is None
    assert os.environ["OCL_ICD_VENDORS"] == str(single)
    monkeypatch.setenv("NETCL_ICD_REGISTER", "0")
    monkeypatch.setenv("OCL_ICD_VENDORS", str(vendors))
    assert icd.register_pip_runtimes() is None


def test_no_pip_runtime_changes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(icd, "_prefixes", lambda: [str(tmp_path)])
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    assert icd.register_pip_runtimes() is None
    assert "OCL_ICD_VENDORS" not in os.environ


def test_installed_intel_runtime_is_a_platform() -> None:
    if not icd.pip_runtimes():
        pytest.skip("Intel's CPU OpenCL runtime is not installed here")
    names = [p.name for p, _ in DeviceManager().discover()]
    assert "Intel(R) OpenCL" in names, names
