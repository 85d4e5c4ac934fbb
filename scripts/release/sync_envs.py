"""Drop hatch envs whose editable netcl installs carry stale metadata, before `hatch run check`.

hatch installs the workspace members editable and never reinstalls them: after a pull that
changes a member's pyproject (a new entry point, dependency or version), an env made before it
keeps the old metadata, and code that reads it (netcl-core finding netcl-ops's kernel families
through entry points) fails there although a fresh env passes. This compares each env's installed
netcl metadata with the checkout's pyproject files and removes the envs that differ, so the
`hatch run <env>:...` steps after it rebuild them. The env running this script cannot remove
itself; it is reinstalled in place with uv (hatch's installer) when it is stale.

    python scripts/release/sync_envs.py          # inside `hatch run`, as check's first step
"""

from __future__ import annotations

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


def main() -> int:
    packages = {p.parent: expected(p.parent) for p in ROOT.glob("packages/*/pyproject.toml")}
    wanted = dict(packages.values())
    for env in ENVS:
        found = _hatch("env", "find", env)
        env_dir = Path(found.stdout.strip())
        if found.returncode != 0 or not env_dir.is_dir():
            continue
        names = stale(_site_packages(env_dir), wanted)
        if names:
            print(f"sync_envs: env {env!r} has stale metadata for {', '.join(names)}; removing it")
            _hatch("env", "remove", env)
    names = stale([p for p in sys.path if p.endswith("site-packages")], wanted)
    if not names:
        return 0
    uv = shutil.which("uv")
    if uv is None:
        print(f"sync_envs: this env has stale metadata for {', '.join(names)} and no uv is on PATH "
              "to reinstall it; run `hatch env prune` and try again", file=sys.stderr)
        return 1
    paths = [str(path) for path, (name, _) in packages.items() if name in names]
    print(f"sync_envs: reinstalling {', '.join(names)} in this env")
    editable = [arg for path in paths for arg in ("-e", path)]
    return subprocess.run([uv, "pip", "install", "-q", "--no-deps", "--python", sys.executable,
                           *editable], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
