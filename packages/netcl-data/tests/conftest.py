"""Shared fixtures: a shared-memory leak check around every test, and every OpenCL device."""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netcl.data.shared_batch import segment_prefix

SHM_DIR = Path("/dev/shm")


def netcl_segments() -> set[str]:
    """Names of the shared-memory segments that this process owns now."""
    if not SHM_DIR.is_dir():
        return set()
    prefix = segment_prefix()
    return {p.name for p in SHM_DIR.iterdir() if p.name.startswith(prefix)}


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """Every test must leave no segment in /dev/shm and no live worker process behind."""
    before = netcl_segments()
    yield
    leaked = netcl_segments() - before
    children = mp.active_children()
    assert not leaked, f"shared-memory segments left behind: {sorted(leaked)}"
    assert not children, f"worker processes left behind: {children}"


def _opencl_devices() -> list[Any]:
    """Usable OpenCL devices by netcl-core's probe verdicts (the same cache file)."""
    try:
        from netcl.data.augment_gpu import opencl_devices
    except ImportError:  # no pyopencl
        return []
    wanted = os.environ.get("NETCL_DEVICE", "")
    if wanted == "cpu":  # NumPy only: no OpenCL device tests
        return []
    devices, _ = opencl_devices()
    if wanted and wanted not in ("cl", "auto") and not wanted.startswith("cl:"):
        devices = [d for d in devices if wanted.lower() in d.name.lower()]
    return devices


OPENCL_DEVICES = _opencl_devices()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``cl_device`` over every OpenCL device found (none: the test is skipped)."""
    if "cl_device" in metafunc.fixturenames:
        ids = [f"{d.platform.name}:{d.name}".replace(" ", "_") for d in OPENCL_DEVICES]
        params: list[Any] = OPENCL_DEVICES or [
            pytest.param(None, marks=pytest.mark.skip(reason="no OpenCL device or no pyopencl"))
        ]
        metafunc.parametrize("cl_device", params, ids=ids or ["no-opencl"], scope="module")


@pytest.fixture(scope="module")
def cl_context(cl_device: Any) -> Any:
    """A context of its own for ``cl_device``."""
    import pyopencl as cl

    return cl.Context([cl_device])


@pytest.fixture(scope="module")
def cl_queue(cl_context: Any) -> Any:
    """An in-order command queue on ``cl_context`` (the fixture keeps the context alive: Intel's
    CPU runtime frees a context that Python dropped even while a queue on it lives)."""
    import pyopencl as cl

    return cl.CommandQueue(cl_context)
