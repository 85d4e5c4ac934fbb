"""Run mypy strict over every package's sources, then over each package's tests separately.

Tests are checked one package at a time because several ``conftest.py`` files would collide in
one mypy run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    runs: list[list[str]] = [["--config-file", "mypy.ini"]]
    for tests in sorted((ROOT / "packages").glob("*/tests")):
        if any(tests.rglob("*.py")):
            runs.append(["--config-file", "mypy.ini", str(tests.relative_to(ROOT))])
    if any((ROOT / "tests-integration").rglob("*.py")):
        runs.append(["--config-file", "mypy.ini", "tests-integration"])
    status = 0
    for args in runs:
        print("mypy", " ".join(args[2:]) or "packages/*/src", flush=True)
        status |= subprocess.call([sys.executable, "-m", "mypy", *args], cwd=ROOT)
    return status


if __name__ == "__main__":
    sys.exit(main())
