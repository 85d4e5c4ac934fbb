"""``manager.default`` when pyopencl is not installed: OpenCL selectors raise the ImportError
with the install hint (they used to return ``None``, and the README example then failed with
``'NoneType' object has no attribute 'queue'``); ``auto`` and ``cpu`` give the NumPy backend."""

from __future__ import annotations

import pytest

from netcl.core import device as device_module
from netcl.core.device import DeviceManager


@pytest.fixture
def no_pyopencl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(device_module, "have_pyopencl", lambda: False)
    monkeypatch.delenv("NETCL_DEVICE", raising=False)


@pytest.mark.parametrize("selector", ["cl", "gpu", "accel", "cl:0:0", "intel"])
def test_opencl_selectors_raise_import_error(no_pyopencl: None, selector: str) -> None:
    with pytest.raises(ImportError, match=rf"default\('{selector}'\): pyopencl required.*"
                                          r"pip install 'netcl-core\[cpu\]'"):
        DeviceManager().default(selector)


def test_netcl_device_naming_opencl_raises_import_error(
    no_pyopencl: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NETCL_DEVICE", "cl")
    with pytest.raises(ImportError, match=r"from NETCL_DEVICE.*pyopencl required"):
        DeviceManager().default("auto")


@pytest.mark.parametrize("selector", ["auto", "cpu", "numpy"])
def test_auto_and_cpu_give_numpy(no_pyopencl: None, selector: str) -> None:
    handle = DeviceManager().default(selector)
    assert handle is not None and handle.backend == "cpu"
