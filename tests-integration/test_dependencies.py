"""Each distribution declares, as bounded ranges, every netcl layer its sources import, and
imports only layers below it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ["core", "ops", "runtime", "autograd", "nn", "optim", "data", "distributed"]
BELOW = {
    "core": set(),
    "ops": {"core"},
    "runtime": {"core"},
    "autograd": {"core", "ops", "runtime"},
    "nn": {"core", "ops", "runtime", "autograd"},
    "optim": {"core", "ops", "runtime", "autograd"},
    "data": set(),
    "distributed": {"core", "ops", "runtime", "autograd", "nn", "optim", "data"},
}
IMPORT = re.compile(r"^\s*(?:from|import)\s+netcl\.(\w+)", re.MULTILINE)


def _declared(dist: str) -> dict[str, str]:
    project = tomllib.loads((ROOT / "packages" / dist / "pyproject.toml").read_text())["project"]
    out = {}
    for req in project["dependencies"]:
        m = re.match(r"netcl-(\w+)(.*)", req)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _imported(layer: str) -> set[str]:
    found: set[str] = set()
    for py in (ROOT / "packages" / f"netcl-{layer}" / "src").rglob("*.py"):
        found |= set(IMPORT.findall(py.read_text()))
    return found - {layer}


@pytest.mark.parametrize("layer", LAYERS)
def test_imports_are_declared_and_downwards(layer: str) -> None:
    declared = _declared(f"netcl-{layer}")
    imported = _imported(layer)
    assert imported <= set(declared), f"netcl-{layer} imports undeclared {imported - set(declared)}"
    upward = set(declared) - BELOW[layer]
    assert not upward, f"netcl-{layer} declares upward dependencies {upward}"
    for dep, spec in declared.items():
        assert re.fullmatch(r">=\d+\.\d+,<\d+\.\d+", spec), f"{dep}{spec} is not a bounded range"


def test_meta_package_depends_on_every_layer() -> None:
    assert set(_declared("netcl")) >= set(LAYERS)
