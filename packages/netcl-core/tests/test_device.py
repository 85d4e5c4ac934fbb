"""Device discovery, selectors, NETCL_DEVICE and the thread-local active device."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from netcl.core.device import (
    CPUQueue,
    DeviceHandle,
    DeviceManager,
    device,
    get_active_device,
    manager,
)


def test_cpu_selector_is_numpy() -> None:
    h = manager.default("cpu")
    assert h is not None and h.backend == "cpu" and isinstance(h.queue, CPUQueue)
    assert h.context is None
    assert manager.default("cpu") is h  # cached


def test_auto_prefers_opencl_when_present(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NETCL_DEVICE", raising=False)
    m = DeviceManager()
    found = [d for i, (_, d) in enumerate(m.discover()) if m.verdict(i).usable]
    h = m.default("auto")
    assert h is not None
    if found:
        kinds = [m._device_type(d) for d in found]
        order = ["gpu", "accel", "cpu", "other"]
        best = min(kinds, key=order.index)
        assert h.backend == "cl" and h.device_type == best
    else:
        assert h.backend == "cpu"


def test_netcl_device_overrides_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_DEVICE", "cpu")
    assert DeviceManager().default("auto").backend == "cpu"  # type: ignore[union-attr]


def test_index_and_name_selectors() -> None:
    m = DeviceManager()
    found = m.discover()
    usable = [i for i in range(len(found)) if m.verdict(i).usable]
    if not usable:
        pytest.skip("no usable OpenCL device")
    platforms = list(dict.fromkeys(p.int_ptr for p, _ in found))
    platform = found[usable[0]][0]
    on_platform = [i for i, (p, _) in enumerate(found) if p.int_ptr == platform.int_ptr]
    selector = f"cl:{platforms.index(platform.int_ptr)}:{on_platform.index(usable[0])}"
    h = m.default(selector)
    assert h is not None and h.backend == "cl" and h.cl_device == found[usable[0]][1]
    frag = found[usable[0]][1].name.split()[0].lower()
    assert m.default(frag) is not None
    with pytest.raises(ValueError, match=r"platform index 9 in 'cl:9:0' is out of range"):
        m.default("cl:9:0")
    with pytest.raises(ValueError, match="must look like cl:PLATFORM:DEVICE"):
        m.default("cl:x")


def test_unknown_selector_lists_devices() -> None:
    with pytest.raises(ValueError, match=r"unknown device selector 'no-such-device-xyz'"):
        DeviceManager().default("no-such-device-xyz")
    with pytest.raises(TypeError, match="selector must be a str"):
        DeviceManager().default(3)  # type: ignore[arg-type]


def test_device_type_mapping() -> None:
    m = DeviceManager()
    for _, d in m.discover():
        assert m._device_type(d) in ("gpu", "cpu", "accel", "other")


def test_handle_is_frozen() -> None:
    h = manager.default("cpu")
    with pytest.raises(AttributeError):
        h.backend = "cl"  # type: ignore[misc, union-attr]


def test_device_context_is_thread_local() -> None:
    cpu = manager.default("cpu")
    seen: list[DeviceHandle] = []
    with device("cpu") as d:
        assert d is cpu and get_active_device() is cpu
        t = threading.Thread(target=lambda: seen.append(get_active_device()))
        t.start()
        t.join()
    assert seen[0] is manager.default("auto")
    with pytest.raises(RuntimeError, match="no device matches"):
        with device("accel") if manager.default("accel") is None else device("nope-xyz"):
            pass


def test_import_touches_no_driver() -> None:
    code = (
        "import sys; import netcl.core, netcl.core.device, netcl.core.tensor; "
        "print('pyopencl' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_netcl_device_errors_name_the_value_and_its_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NETCL_DEVICE", "garbage-device")
    named = r"unknown device selector 'garbage-device' \(from NETCL_DEVICE\)"
    with pytest.raises(ValueError, match=named):
        DeviceManager().default("auto")
    monkeypatch.setenv("NETCL_DEVICE", "cl:9:0")
    with pytest.raises(ValueError, match=r"platform index 9 in 'cl:9:0' \(from NETCL_DEVICE\)|"
                                         r"unknown device selector"):
        DeviceManager().default("auto")


def test_netcl_device_naming_an_absent_kind_is_an_error_not_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    m = DeviceManager()
    if any(m._device_type(d) == "accel" for _, d in m.discover()):
        pytest.skip("this machine has an accelerator")
    monkeypatch.setenv("NETCL_DEVICE", "accel")
    assert m.default("accel") is None  # asked for directly: None, as documented
    with pytest.raises(RuntimeError, match=r"'accel' \(from NETCL_DEVICE\) matches no device on "
                                           r"this machine; devices: .*cpu \(NumPy\)"):
        m.default("auto")
