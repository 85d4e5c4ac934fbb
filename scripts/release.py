"""Forwarder: this script moved to ``scripts/release/release.py``.

It stays while ``tests-integration/test_wheels.py`` runs ``scripts/release.py``; delete it
once that test names the new path.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv[0] = str(Path(__file__).resolve().parent / "release" / "release.py")
    runpy.run_path(sys.argv[0], run_name="__main__")
