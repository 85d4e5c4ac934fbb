"""Refresh hatch envs whose editable netcl installs carry stale metadata, before `hatch run check`.

hatch installs the workspace members editable and never reinstalls them: after a pull that
changes a member's pyproject (a new entry point, dependency or version), an env made before it
keeps the old metadata, and code that reads it (netcl-core finding netcl-ops's kernel families
through entry points) fails there although a fresh env passes. This compares each env's installed
netcl metadata with the checkout's pyproject files and reinstalls the members that differ with
hatch's uv (HATCH_UV), bypassing uv's cached build of them, then checks again.

    python scripts/release/sync_envs.py          # inside `hatch run`, as check's first step
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import Distribution, distributions
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # hatch.toml gives the default env tomli on Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
#: The envs `hatch run check` uses besides the one it runs in (hatch.toml).
ENVS = ("layers", "core", "ops", "runtime", "autograd", "nn", "optim", "data", "distributed",
        "meta")

Fingerprint = tuple[str, frozenset[tuple[str, str, str]], frozenset[str]]


def _requirement_name(requirement: str) -> str:
    """`numpy>=1.24; extra == "x"` -> `numpy[extra=x]` (marker text differs between tools)."""
    name = re.split(r"[\s<>=!~;\[(@]", requirement.strip(), maxsplit=1)[0]
    extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", requirement)
    key = name.lower().replace("_", "-")
    return f"{key}[extra={extra.group(1)}]" if extra else key


def expected(package: Path) -> tuple[str, Fingerprint]:
    """The name and fingerprint a fresh install of the package directory would have."""
    project = tomllib.loads((package / "pyproject.toml").read_text())["project"]
    about = next((package / "src").rglob("__about__.py"))
    found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)['\"]", about.read_text())
    version = found.group(1) if found else ""
    points = {("console_scripts", k, v) for k, v in project.get("scripts", {}).items()}
    for group, table in project.get("entry-points", {}).items():
        points |= {(group, k, v) for k, v in table.items()}
    requires = {_requirement_name(r) for r in project.get("dependencies", [])}
    for extra, reqs in project.get("optional-dependencies", {}).items():
        requires |= {_requirement_name(f'{r}; extra == "{extra}"') for r in reqs}
    return project["name"], (version, frozenset(points), frozenset(requires))


def installed(dist: Distribution) -> Fingerprint:
    """The same fingerprint read back from an installed distribution's metadata."""
    points = frozenset((ep.group, ep.name, ep.value) for ep in dist.entry_points)
    requires = frozenset(_requirement_name(r) for r in dist.requires or [])
    return dist.version, points, requires


def stale(site_packages: list[str], wanted: dict[str, Fingerprint]) -> list[str]:
    """Workspace members installed under these paths whose metadata differs from the checkout."""
    out = []
    for dist in distributions(path=site_packages):
        name = dist.metadata["Name"]
        if name in wanted and installed(dist) != wanted[name]:
            out.append(name)
    return sorted(out)


def _hatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["hatch", *args], cwd=ROOT, capture_output=True, text=True, check=False)


def _site_packages(env_dir: Path) -> list[str]:
    return [str(p) for p in [*env_dir.glob("lib/python*/site-packages"),
                             env_dir / "Lib" / "site-packages"] if p.is_dir()]


def _python(env_dir: Path) -> Path:
    unix = env_dir / "bin" / "python"
    return unix if unix.exists() else env_dir / "Scripts" / "python.exe"


def reinstall(uv: str, python: str, names: list[str], paths: list[Path]) -> int:
    """Reinstall the members editable, bypassing uv's cached build of them."""
    flags = [f for name in names for f in ("--reinstall-package", name, "--refresh-package", name)]
    editable = [arg for path in paths for arg in ("-e", str(path))]
    return subprocess.run([uv, "pip", "install", "-q", "--no-deps", "--python", python, *flags,
                           *editable], check=False).returncode


def main() -> int:
    packages = {p.parent: expected(p.parent) for p in ROOT.glob("packages/*/pyproject.toml")}
    wanted = dict(packages.values())
    uv = os.environ.get("HATCH_UV") or shutil.which("uv")
    targets: list[tuple[str, Path | None]] = [("this env", None)]
    for env in ENVS:
        found = _hatch("env", "find", env)
        env_dir = Path(found.stdout.strip())
        if found.returncode == 0 and env_dir.is_dir():
            targets.append((f"env {env!r}", env_dir))
    status = 0
    for label, env_dir in targets:
        site = (_site_packages(env_dir) if env_dir is not None
                else [p for p in sys.path if p.endswith("site-packages")])
        names = stale(site, wanted)
        if not names:
            continue
        print(f"sync_envs: {label} has stale metadata for {', '.join(names)}; reinstalling")
        python = sys.executable if env_dir is None else str(_python(env_dir))
        paths = [path for path, (name, _) in packages.items() if name in names]
        if uv is None or reinstall(uv, python, names, paths) != 0 or stale(site, wanted):
            print(f"sync_envs: could not refresh {label}; run `hatch env prune` and try again",
                  file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
