"""The PyTorch-style loop at the top of packages/netcl-nn/README.md runs as written (NumPy
backend, its own device line) and trains: the loss falls below its starting value."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import netcl.autograd.ops as agops

README = Path(__file__).parents[1] / "packages" / "netcl-nn" / "README.md"


def _first_block() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    return str(blocks[0])


@pytest.fixture
def restore_implicit_tape() -> Iterator[None]:
    before = agops.implicit_tape(True)  # the default: the README relies on it
    try:
        yield
    finally:
        agops.implicit_tape(before)


def test_readme_loop_runs_and_learns(restore_implicit_tape: None) -> None:
    source = _first_block()
    assert "loss.backward()" in source and "optimizer.step()" in source
    namespace: dict[str, Any] = {"__name__": "nn_readme"}
    exec(compile(source, str(README), "exec"), namespace)  # the README's program
    assert namespace["accuracy"] >= 0.5  # 30 steps on 32 fixed samples
    assert namespace["loss"].item() < 2.2  # from about log(10) = 2.3
