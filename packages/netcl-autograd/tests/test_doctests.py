"""The examples in the docstrings run (NumPy backend), so they cannot rot; the public API is
what ``__all__`` says."""

from __future__ import annotations

import doctest
import importlib

import pytest

import netcl.autograd as ag

MODULES = [
    "netcl.autograd",
    "netcl.autograd._cexpr",
    "netcl.autograd._gradcheck",
    "netcl.autograd._losses",
    "netcl.autograd._ops_elementwise",
    "netcl.autograd._ops_movement",
    "netcl.autograd._ops_nn",
    "netcl.autograd._ops_reduce",
    "netcl.autograd._primitives",
    "netcl.autograd._tape",
    "netcl.autograd.compiler",
    "netcl.autograd.ops",
    "netcl.autograd.testing",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
    assert result.attempted > 0, f"{name} has no examples"


@pytest.mark.parametrize("module", [ag, ag.ops, ag.compiler], ids=lambda m: m.__name__)
def test_public_names_exist_once(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(module, name), name


def test_spec_names() -> None:
    assert ag.cross_entropy is ag._losses.cross_entropy
    assert ag.register_primitive is ag.compiler.register_primitive
    assert callable(ag.Tape().backward)
