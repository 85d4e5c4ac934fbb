"""Every docstring example in every netcl module runs and prints what it says (CONVENTIONS 9)."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import inspect
import pkgutil
import re
from types import ModuleType

import pytest

import netcl


def _modules() -> list[str]:
    names = ["netcl"]
    for info in pkgutil.walk_packages(netcl.__path__, prefix="netcl."):
        names.append(info.name)
    return sorted(names)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_DEVICE", "cpu")  # examples use the NumPy backend
    try:
        module: ModuleType = importlib.import_module(name)
    except ImportError as err:  # an optional dependency (e.g. torch in a benchmark helper)
        pytest.skip(f"{name}: {err}")
    imported = re.findall(r">>> (?:import|from) (\w+)", inspect.getsource(module))
    missing = sorted({top for top in imported if importlib.util.find_spec(top) is None})
    if missing:  # examples of an optional extra (netcl[torch]) run where it is installed
        pytest.skip(f"{name}: its examples import {', '.join(missing)}, not installed here")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
                             verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
