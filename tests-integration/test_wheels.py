"""Every distribution builds alone; only the meta-package ships ``netcl/__init__.py``; and
installing only the ``netcl-core[cpu,intel-cpu]`` wheel in a fresh venv gives a working
netcl.core whose own test suite passes there (on x86-64 Linux, with Intel's CPU runtime
registered and usable, whatever the CPU)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "scripts" / "release" / "release.py"
DISTS = sorted(p.parent.name for p in (ROOT / "packages").glob("*/pyproject.toml"))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run([sys.executable, str(RELEASE), "--all", "--out", str(out)], check=True)
    return out


def test_nine_wheels_and_only_meta_has_root_init(wheels: Path) -> None:
    built = sorted(wheels.glob("*.whl"))
    assert len(DISTS) == 9 and len(built) == 9, [w.name for w in built]
    with_init = [w.name.split("-")[0] for w in built
                 if "netcl/__init__.py" in zipfile.ZipFile(w).namelist()]
    assert with_init == ["netcl"]


def test_release_script_rejects_wrong_tag_version() -> None:
    out = subprocess.run([sys.executable, str(RELEASE),
                          "netcl-core-v9.9.9", "--no-install"], capture_output=True, text=True)
    assert out.returncode == 1 and "says version 9.9.9 but netcl-core is at" in out.stderr


def _fresh_env(env_dir: Path, requirements: list[str]) -> tuple[str, str]:
    """A fresh venv holding only ``requirements``: (its python, what it lists as installed).
    Made with uv where there is one (hatch's, inside ``hatch run``), else venv + pip."""
    py = str(env_dir / "bin" / "python")
    uv = os.environ.get("HATCH_UV") or shutil.which("uv")
    if uv:
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(env_dir)], check=True)
        subprocess.run([uv, "pip", "install", "-q", "--python", py, *requirements], check=True)
        listing = [uv, "pip", "list", "--python", py]
    else:
        venv.create(env_dir, with_pip=True)
        subprocess.run([py, "-m", "pip", "install", "-q", *requirements], check=True)
        listing = [py, "-m", "pip", "list"]
    return py, subprocess.run(listing, capture_output=True, text=True, check=True).stdout


def test_core_alone_in_fresh_venv(wheels: Path, tmp_path: Path) -> None:
    core = next(wheels.glob("netcl_core-*.whl"))
    py, listed = _fresh_env(tmp_path / "venv", [f"{core}[cpu,intel-cpu]", "pytest"])
    assert "netcl-core" in listed and "netcl-ops" not in listed and "netcl " not in listed
    if sys.platform.startswith("linux") and platform.machine() == "x86_64":
        # the [intel-cpu] extra alone, from the wheel, gives a registered, usable OpenCL device
        report = subprocess.run(
            [py, "-c", "from netcl.core.testing import device_report as r; print(r()[0])"],
            capture_output=True, text=True, check=True,
        ).stdout
        assert "cl:Intel(R) OpenCL:" in report, report
    result = subprocess.run(
        [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "packages/netcl-core/tests"],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
