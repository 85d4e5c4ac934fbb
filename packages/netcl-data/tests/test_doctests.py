"""The examples in the docstrings run, so they cannot rot."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "netcl.data._collate",
    "netcl.data._datasets",
    "netcl.data._loader",
    "netcl.data._samplers",
    "netcl.data._seed",
    "netcl.data.augment",
    "netcl.data.transforms",
    "netcl.data.filters",
    "netcl.data.shared_batch",
    "netcl.data.augment_gpu",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    if name.endswith("augment_gpu"):
        pytest.importorskip("pyopencl")
        from netcl.data.augment_gpu import opencl_devices

        if not opencl_devices()[0]:
            pytest.skip("no usable OpenCL device")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
    assert result.attempted > 0, f"{name} has no examples"


def test_public_api() -> None:
    import netcl.data as data

    assert sorted(data.__all__) == sorted(set(data.__all__))
    for name in data.__all__:
        assert getattr(data, name) is not None
