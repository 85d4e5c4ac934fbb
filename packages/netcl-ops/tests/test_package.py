"""netcl.ops installs as a PEP 420 portion of netcl, typed, with a static version."""

from __future__ import annotations

import re
from importlib import metadata, resources

import pytest

import netcl.ops


def test_version_matches_distribution() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", netcl.ops.__version__)
    try:
        installed = metadata.version("netcl-ops")
    except metadata.PackageNotFoundError:
        pytest.skip("running from sources, not installed")
    assert installed == netcl.ops.__version__


def test_ships_py_typed() -> None:
    assert resources.files("netcl.ops").joinpath("py.typed").is_file()
