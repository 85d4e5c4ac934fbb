"""Golden kernel sources (CONVENTIONS.md 11): the fused kernels ``jit`` generates, rendered for
fixed expressions (``netcl.autograd._golden``), compared with the checked-in files under
``golden/``, and built on every OpenCL device present.

A mismatch fails with a unified diff from the checked-in file to what the code generator
renders now; a missing or stale golden file fails too. When the change is intended,
regenerate the files (new and changed ones written, stale ones deleted) and commit them with
the change::

    NETCL_UPDATE_GOLDEN=1 hatch run pytest packages/netcl-autograd/tests/test_golden_sources.py
"""

from __future__ import annotations

import doctest
import functools
from pathlib import Path

import pytest

from netcl.autograd import _golden
from netcl.core.device import DeviceHandle
from netcl.core.kernels.golden import (
    GoldenSource,
    build_golden,
    check_golden,
    check_no_stale_golden,
    golden_families,
    missing_extensions,
)

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = (
    "NETCL_UPDATE_GOLDEN=1 hatch run pytest packages/netcl-autograd/tests/test_golden_sources.py"
)
SOURCES = _golden.golden_sources()


@pytest.mark.parametrize("name", list(SOURCES))
def test_golden_source(name: str) -> None:
    check_golden(GOLDEN, name, SOURCES[name].source, REGENERATE)


def test_the_matrix_is_the_registry_s() -> None:
    assert golden_families("autograd") == ["fused"] and len(SOURCES) == 10


def test_no_stale_golden_files() -> None:
    check_no_stale_golden(GOLDEN, SOURCES, REGENERATE)


@functools.cache
def _rendered_for(extensions: str) -> dict[str, GoldenSource]:
    """The same kernels with the pragmas a device with ``extensions`` gets."""
    return _golden.golden_sources(extensions)


@pytest.mark.parametrize("name", list(SOURCES))
def test_golden_source_builds(dev: DeviceHandle, name: str) -> None:
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend builds no OpenCL programs")
    golden = _rendered_for(str(dev.cl_device.extensions))[name]
    missing = missing_extensions(dev.cl_device, golden)
    if missing:
        pytest.skip(f"{dev.device_name} has no {', '.join(missing)}")
    build_golden(dev.context, golden, name)


def test_doctests() -> None:
    assert doctest.testmod(_golden).failed == 0
