"""netcl.distributed installs as a PEP 420 portion of netcl, typed, with a static version."""

from __future__ import annotations

import re
from importlib import metadata, resources

import pytest

import netcl.distributed


def test_version_matches_distribution() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", netcl.distributed.__version__)
    try:
        installed = metadata.version("netcl-distributed")
    except metadata.PackageNotFoundError:
        pytest.skip("running from sources, not installed")
    assert installed == netcl.distributed.__version__


def test_ships_py_typed() -> None:
    assert resources.files("netcl.distributed").joinpath("py.typed").is_file()
