"""The PyTorch-style digits loop at the top of packages/netcl/README.md runs as written (NumPy
backend, its own device line) and learns."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).parents[1] / "packages" / "netcl" / "README.md"


def test_readme_digits_loop_runs_and_learns() -> None:
    source = str(re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)[0])
    assert "loss.backward()" in source and "from netcl.utils.data import" in source
    namespace: dict[str, Any] = {"__name__": "netcl_readme"}
    exec(compile(source, str(README), "exec"), namespace)  # the README's program
    assert namespace["accuracy"] >= 0.85  # 5 epochs of a small CNN on 1,500 digits
