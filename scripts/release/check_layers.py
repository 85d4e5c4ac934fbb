"""Run import-linter on the layers, then prove it catches an upward import.

The second step copies every layer's sources to a temporary folder, plants
``import netcl.nn`` inside ``netcl.core``, and requires import-linter to fail there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def lint(cwd: Path, pythonpath: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(
        ["lint-imports", "--config", str(ROOT / ".importlinter"), "--no-cache"],
        cwd=cwd, env=env, capture_output=True, text=True,
    )


def main() -> int:
    real = lint(ROOT)
    print(real.stdout[-600:])
    if real.returncode != 0:
        print(real.stderr, file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        srcs = []
        for src in sorted((ROOT / "packages").glob("netcl-*/src")):
            dest = Path(tmp) / src.parent.name
            shutil.copytree(src, dest)
            srcs.append(str(dest))
        planted = Path(tmp) / "netcl-core" / "netcl" / "core" / "_planted.py"
        planted.write_text("import netcl.nn  # an upward import the layer check must catch\n")
        caught = lint(Path(tmp), os.pathsep.join(srcs))
    if caught.returncode == 0 or "netcl.core._planted -> netcl.nn" not in caught.stdout:
        print("layer check did NOT catch the planted netcl.core -> netcl.nn import:",
              caught.stdout[-2000:], caught.stderr[-2000:], file=sys.stderr)
        return 1
    print("planted upward import netcl.core._planted -> netcl.nn: caught (contract broken)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
