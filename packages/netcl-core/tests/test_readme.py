"""The netcl-core README's examples run as written, with and without pyopencl, and do what the
README says they do."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from netcl.core.device import manager

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
KERNEL = next(b for b in BLOCKS if "KernelSpec(" in b)
# what the interpreter sees when pyopencl is not installed
NO_PYOPENCL = "import sys\nsys.modules['pyopencl'] = None\n"


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NETCL_DEVICE"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_examples_run(index: int) -> None:
    if "manager.default(\"cl\")" in BLOCKS[index] and manager.default("cl") is None:
        pytest.skip("no usable OpenCL device here")
    done = _run(BLOCKS[index])
    assert done.returncode == 0, done.stderr
    for printed in re.findall(r"print\(.*\)  # (.*)", BLOCKS[index]):
        assert printed.strip() in done.stdout


def test_kernel_example_without_pyopencl_raises_import_error() -> None:
    done = _run(NO_PYOPENCL + KERNEL)
    assert done.returncode != 0
    assert "ImportError: DeviceManager.default('cl'): pyopencl required" in done.stderr
    assert "pip install 'netcl-core[cpu]'" in done.stderr


def test_auto_example_without_pyopencl_uses_numpy() -> None:
    auto = next(b for b in BLOCKS if 'manager.default("auto")' in b)
    done = _run(NO_PYOPENCL + auto)
    assert done.returncode == 0, done.stderr
