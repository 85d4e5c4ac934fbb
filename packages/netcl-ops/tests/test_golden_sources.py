"""Golden kernel sources (CONVENTIONS.md 11): every kernel family of netcl.ops rendered for a
fixed matrix of dtypes and variants (``netcl.ops._golden``), compared with the checked-in files
under ``golden/``, and built on every OpenCL device present.

A mismatch fails with a unified diff from the checked-in file to what the templates render
now; a golden file missing for a rendered source, or one that nothing renders any more, fails
too. When the change to the kernels is intended, regenerate the files (this writes new and
changed ones and deletes stale ones) and commit them with the change, so its review shows the
kernels' diff::

    NETCL_UPDATE_GOLDEN=1 hatch run pytest packages/netcl-ops/tests/test_golden_sources.py
"""

from __future__ import annotations

import doctest
import functools
from pathlib import Path

import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernels.family import families
from netcl.core.kernels.golden import (
    GoldenSource,
    build_golden,
    check_golden,
    check_no_stale_golden,
    golden_families,
    missing_extensions,
)
from netcl.ops import _golden

GOLDEN = Path(__file__).parent / "golden"
REGENERATE = (
    "NETCL_UPDATE_GOLDEN=1 hatch run pytest packages/netcl-ops/tests/test_golden_sources.py"
)
SOURCES = _golden.golden_sources()


@pytest.mark.parametrize("name", list(SOURCES))
def test_golden_source(name: str) -> None:
    check_golden(GOLDEN, name, SOURCES[name].source, REGENERATE)


def test_no_stale_golden_files() -> None:
    check_no_stale_golden(GOLDEN, SOURCES, REGENERATE)


def test_matrix_covers_every_family_and_dtype() -> None:
    families = {name.split("/")[0] for name in SOURCES}
    assert families == {"elementwise", "matmul", "conv2d", "reduce", "softmax", "pooling",
                        "normalization", "bias", "creation", "movement", "random",
                        "attention", "rnn"}
    for family in ("elementwise", "matmul", "conv2d", "reduce", "softmax", "pooling"):
        for dtype in _golden.FLOATS:
            assert any(n.startswith(f"{family}/") and f"-{dtype}" in n for n in SOURCES), (
                family, dtype)


def test_every_kernel_family_registers_its_golden_sources() -> None:
    """The matrix is the registry's: each ``kernel_family`` of netcl.ops (and the matmul and
    conv2d programs) registered golden programs, and each registered family renders some."""
    registered = golden_families("ops")
    assert {f.name.partition(".")[2] for f in families("ops.")} <= set(registered)
    assert {"matmul", "conv2d"} <= set(registered)
    assert len(SOURCES) == 162


@functools.cache
def _rendered_for(extensions: str) -> dict[str, GoldenSource]:
    """The same matrix with the dtype headers a device with ``extensions`` gets."""
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
