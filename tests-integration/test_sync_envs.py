"""scripts/release/sync_envs.py: a stale editable install is found, a fresh one is left alone."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sync() -> ModuleType:
    path = ROOT / "scripts/release/sync_envs.py"
    spec = importlib.util.spec_from_file_location("sync_envs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sync_envs"] = module
    spec.loader.exec_module(module)
    return module


def _install(site: Path, name: str, version: str, requires: list[str], points: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = [f"Name: {name}", f"Version: {version}", *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("Metadata-Version: 2.4\n" + "\n".join(lines) + "\n")
    if points:
        (info / "entry_points.txt").write_text(points)


OPS_POINTS = "".join(["[netcl.kernel_families]\n",
                      *(f"{n} = netcl.ops._kernel_families\n"
                        for n in ("matmul", "conv2d", "elementwise", "reduction", "batchnorm"))])


def test_every_member_has_a_fingerprint(sync: ModuleType) -> None:
    names = {sync.expected(p.parent)[0] for p in ROOT.glob("packages/*/pyproject.toml")}
    assert {"netcl", "netcl-core", "netcl-ops", "netcl-runtime"} <= names


def test_missing_entry_points_are_stale_and_a_fresh_install_is_not(
        sync: ModuleType, tmp_path: Path) -> None:
    name, (version, _, _) = sync.expected(ROOT / "packages/netcl-ops")
    wanted = {name: sync.expected(ROOT / "packages/netcl-ops")[1]}
    requires = ["numpy>=1.24", "netcl-core<0.2,>=0.1"]
    _install(tmp_path / "old", name, version, requires, "")
    _install(tmp_path / "new", name, version, requires, OPS_POINTS)
    assert sync.stale([str(tmp_path / "old")], wanted) == ["netcl-ops"]
    assert sync.stale([str(tmp_path / "new")], wanted) == []


@pytest.mark.parametrize("change", ["version", "requires"])
def test_a_changed_version_or_dependency_is_stale(
        sync: ModuleType, tmp_path: Path, change: str) -> None:
    name, fingerprint = sync.expected(ROOT / "packages/netcl-ops")
    version = "0.0.0" if change == "version" else fingerprint[0]
    requires = ["numpy>=1.24"] if change == "requires" else ["numpy>=1.24", "netcl-core>=0.1"]
    _install(tmp_path, name, version, requires, OPS_POINTS)
    assert sync.stale([str(tmp_path)], {name: fingerprint}) == [name]


def test_extras_keep_their_marker(sync: ModuleType) -> None:
    assert sync._requirement_name('pocl-binary-distribution>=3.0; extra == "cpu"') == \
        "pocl-binary-distribution[extra=cpu]"
    assert sync._requirement_name("Netcl_Core >=0.1") == "netcl-core"
