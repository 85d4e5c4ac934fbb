"""Build and check one netcl distribution for release, from its tag.

    python scripts/release/release.py netcl-core-v0.1.0   # build, check, smoke-install
    python scripts/release/release.py --all --out dist    # every package (no tag check)

For a tag ``<distribution>-v<version>`` it checks the version against the package's
``__about__.py``, builds that package's sdist and wheel alone, refuses a layer wheel that
contains ``netcl/__init__.py`` (only the meta-package ``netcl`` may ship it), installs the wheel
into a fresh virtual environment (sibling wheels from ``--find-links`` satisfy in-repo
dependencies) and imports it there.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "packages"
TAG = re.compile(r"^(?P<dist>netcl(?:-[a-z]+)?)-v(?P<version>\d+\.\d+\.\d+(?:[a-z0-9.]*)?)$")


class ReleaseError(RuntimeError):
    """A release check failed."""


def package_version(dist: str) -> str:
    """The static version in the distribution's ``__about__.py``."""
    layer = dist.removeprefix("netcl-") if dist != "netcl" else ""
    about = PACKAGES / dist / "src" / "netcl" / layer / "__about__.py"
    match = re.search(r'__version__\s*=\s*"([^"]+)"', about.read_text())
    if match is None:
        raise ReleaseError(f"{about}: no __version__ found")
    return match.group(1)


def parse_tag(tag: str) -> tuple[str, str]:
    """``netcl-core-v0.2.0`` -> ``("netcl-core", "0.2.0")``, checked against the sources."""
    match = TAG.match(tag)
    if match is None:
        raise ReleaseError(f"tag {tag!r} does not look like netcl-<layer>-vX.Y.Z")
    dist, version = match.group("dist"), match.group("version")
    if not (PACKAGES / dist / "pyproject.toml").exists():
        raise ReleaseError(f"tag {tag!r} names {dist!r}, which is not a package under packages/")
    have = package_version(dist)
    if have != version:
        raise ReleaseError(f"tag {tag!r} says version {version} but {dist} is at {have}")
    return dist, version


def uv_binary() -> str | None:
    """hatch's uv (``HATCH_UV`` inside ``hatch run``) or one on PATH; None without."""
    return os.environ.get("HATCH_UV") or shutil.which("uv")


def build(dist: str, out: Path) -> Path:
    """Build sdist and wheel of one package into ``out``; return the wheel.

    The isolated build environments are made with uv where there is one (2.7 s instead of
    18 s per package on a 2-core VM), else with pip.
    """
    out.mkdir(parents=True, exist_ok=True)
    uv = uv_binary()
    installer = ["--installer", "uv"] if uv else []
    env = dict(os.environ)
    if uv:  # build looks for uv on PATH
        env["PATH"] = os.pathsep.join([str(Path(uv).parent), env.get("PATH", "")])
    subprocess.run(
        [sys.executable, "-m", "build", *installer, "--sdist", "--wheel", "--outdir", str(out),
         str(PACKAGES / dist)],
        check=True, stdout=subprocess.DEVNULL, env=env,
    )
    version = package_version(dist)
    wheels = sorted(out.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))
    if not wheels:
        raise ReleaseError(f"no wheel for {dist} {version} in {out}")
    return wheels[-1]


def check_wheel(dist: str, wheel: Path) -> None:
    """Only the meta-package may ship ``netcl/__init__.py``; every layer ships its portion."""
    names = zipfile.ZipFile(wheel).namelist()
    has_init = "netcl/__init__.py" in names
    if dist != "netcl" and has_init:
        raise ReleaseError(f"{wheel.name}: a layer wheel must not contain netcl/__init__.py")
    if dist == "netcl" and not has_init:
        raise ReleaseError(f"{wheel.name}: the meta-package must contain netcl/__init__.py")
    if dist != "netcl":
        layer = dist.removeprefix("netcl-")
        for required in (f"netcl/{layer}/__init__.py", f"netcl/{layer}/py.typed"):
            if required not in names:
                raise ReleaseError(f"{wheel.name}: missing {required}")


def smoke_install(dist: str, wheel: Path, find_links: Path | None) -> None:
    """Install the wheel into a fresh venv and import it."""
    module = "netcl" if dist == "netcl" else f"netcl.{dist.removeprefix('netcl-')}"
    with tempfile.TemporaryDirectory() as tmp:
        venv.create(tmp, with_pip=True)
        py = str(Path(tmp) / "bin" / "python")
        cmd = [py, "-m", "pip", "install", "-q", str(wheel)]
        if find_links is not None:
            cmd += ["--find-links", str(find_links)]
        subprocess.run(cmd, check=True)
        subprocess.run([py, "-c", f"import {module}; print({module}.__version__)"], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("tag", nargs="?", help="netcl-<layer>-vX.Y.Z")
    parser.add_argument("--all", action="store_true", help="build and check every package")
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    parser.add_argument("--find-links", type=Path, default=None,
                        help="folder of sibling wheels for in-repo dependencies")
    parser.add_argument("--no-install", action="store_true", help="skip the fresh-venv import")
    args = parser.parse_args(argv)
    try:
        if args.all:
            for pyproject in sorted(PACKAGES.glob("*/pyproject.toml")):
                dist = pyproject.parent.name
                check_wheel(dist, build(dist, args.out))
                print(f"built {dist} {package_version(dist)}")
            return 0
        if not args.tag:
            parser.error("give a tag or --all")
        dist, version = parse_tag(args.tag)
        wheel = build(dist, args.out)
        check_wheel(dist, wheel)
        if not args.no_install:
            smoke_install(dist, wheel, args.find_links or args.out)
        print(f"{dist} {version}: {wheel.name} ok")
        return 0
    except (ReleaseError, subprocess.CalledProcessError) as err:
        print(f"release: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
