"""The netcl-data README's examples run as written and print what their comments say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def _needs(block: str) -> str | None:
    """Why a block cannot run here, or None."""
    for module in re.findall(r"^import (\w+)|^from (\w+)", block, re.M):
        name = next(m for m in module if m)
        if name != "netcl":
            try:
                __import__(name)
            except ImportError:
                return f"{name} is not installed"
    if "DigitsDataset" in block:
        try:
            __import__("sklearn")
        except ImportError:
            return "scikit-learn is not installed"
    if "augment_gpu" in block:
        try:
            from netcl.data.augment_gpu import opencl_devices
        except ImportError:
            return "pyopencl is not installed"
        if not opencl_devices()[0]:
            return "no usable OpenCL device"
    return None


def test_the_loop_comes_first() -> None:
    assert "## The PyTorch-style loop" in README.read_text().split("## DataLoader arguments")[0]


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_examples_run(index: int, tmp_path: Path) -> None:
    block = BLOCKS[index]
    why = _needs(block)
    if why:
        pytest.skip(why)
    script = tmp_path / "example.py"
    script.write_text(block)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    for printed in re.findall(r"print\(.*\)  # (.*)", block):
        assert printed.strip() in done.stdout
