"""Golden kernel sources (CONVENTIONS.md 11): the optimizer update and gradient-norm programs
(``netcl.optim._golden``), compared with the checked-in files under ``golden/``, and built on
every OpenCL device present.

A mismatch fails with a unified diff from the checked-in file to what renders now; a missing
or stale golden file fails too. When the change is intended, regenerate the files (new and
changed ones written, stale ones deleted) and commit them with the change::

    NETCL_UPDATE_GOLDEN=1 hatch run pytest packages/netcl-optim/tests/test_golden_sources.py
"""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernels.family import families
from netcl.core.kernels.golden import (
    build_golden,
    check_golden,
    check_no_stale_golden,
    missing_extensions,
)
from netcl.optim import _golden

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = (
    "NETCL_UPDATE_GOLDEN=1 hatch run pytest packages/netcl-optim/tests/test_golden_sources.py"
)
SOURCES = _golden.golden_sources()


@pytest.mark.parametrize("name", list(SOURCES))
def test_golden_source(name: str) -> None:
    check_golden(GOLDEN, name, SOURCES[name].source, REGENERATE)


def test_the_matrix_is_the_optimizer_family_s() -> None:
    assert [f.name for f in families("optim.")] == ["optim.kernels"]
    # (6 updates, their 6 foreach programs, norm) x 3 dtypes + clip, tick
    assert len(SOURCES) == 3 * (2 * 6 + 1) + 2


def test_no_stale_golden_files() -> None:
    check_no_stale_golden(GOLDEN, SOURCES, REGENERATE)


@pytest.mark.parametrize("name", list(SOURCES))
def test_golden_source_builds(dev: DeviceHandle, name: str) -> None:
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend builds no OpenCL programs")
    missing = missing_extensions(dev.cl_device, SOURCES[name])
    if missing:
        pytest.skip(f"{dev.device_name} has no {', '.join(missing)}")
    build_golden(dev.context, SOURCES[name], name)


def test_doctests() -> None:
    assert doctest.testmod(_golden).failed == 0
