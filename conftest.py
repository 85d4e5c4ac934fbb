"""Root pytest hooks shared by every package's tests: the ``dev`` fixture runs a test on each
backend present (NumPy and every OpenCL device), or on the one ``--netcl-device`` /
``NETCL_DEVICE`` names."""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--netcl-device",
        default=None,
        help="run device tests on this device only (same syntax as NETCL_DEVICE)",
    )


def pytest_configure(config: pytest.Config) -> None:
    choice = config.getoption("--netcl-device")
    if choice:
        os.environ["NETCL_DEVICE"] = choice


def pytest_report_header(config: pytest.Config) -> list[str]:
    """``netcl devices under test: ...`` and, where a device failed its probe, ``skipped``."""
    try:
        from netcl.core.testing import device_report
    except ImportError:  # netcl-data's env holds no other netcl layer
        try:
            from netcl.data.augment_gpu import device_report
        except ImportError:
            return []
    return device_report()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "dev" in metafunc.fixturenames:
        from netcl.core.testing import available_devices, device_id

        metafunc.parametrize("dev", available_devices(), ids=device_id)
