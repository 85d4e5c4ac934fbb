"""netcl.data installs as a PEP 420 portion of netcl, typed, with a static version, and
imports its optional dependencies only when they are used."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata, resources
from pathlib import Path

import pytest

import netcl.data

SRC = Path(__file__).resolve().parent.parent / "src"


def test_version_matches_distribution() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", netcl.data.__version__)
    try:
        installed = metadata.version("netcl-data")
    except metadata.PackageNotFoundError:
        pytest.skip("running from sources, not installed")
    assert installed == netcl.data.__version__


def test_ships_py_typed_and_no_namespace_init() -> None:
    assert resources.files("netcl.data").joinpath("py.typed").is_file()
    assert not (SRC / "netcl" / "__init__.py").exists()


def test_import_needs_numpy_only() -> None:
    code = (
        "import sys, netcl.data, netcl.data.augment, netcl.data.filters, "
        "netcl.data.shared_batch; "
        "print(sorted(m for m in ('pyopencl', 'sklearn', 'PIL', 'torch') if m in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), *sys.path])}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"
