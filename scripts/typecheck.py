"""Forwarder: this script moved to ``scripts/release/typecheck.py``.

It stays while other tooling still runs ``python scripts/typecheck.py`` (the working rules
of the issue-14 round); delete it once none does.
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv[0] = str(Path(__file__).resolve().parent / "release" / "typecheck.py")
    runpy.run_path(sys.argv[0], run_name="__main__")
