"""The PyTorch-style blocks at the top of the netcl-core, netcl-ops, netcl-autograd,
netcl-runtime and netcl-distributed READMEs run as written and do what their text says.

Each block names its device in one line, ``device = get_device("cpu")``; the tests run it as
written on the NumPy backend and with that argument swapped for each OpenCL device under test
(the conftest's ``dev``: GPUs where present, and one OpenCL CPU device). The netcl-core block
also runs with netcl-ops and netcl-autograd hidden (a fresh interpreter that cannot import
them), as after ``pip install netcl-core`` alone, where the math raises the error the README
quotes. The netcl-distributed script runs under ``netcl launch -n 2`` (shared memory), with
``NETCL_DEVICE`` naming the device.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import textwrap
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.testing import available_devices
from netcl.ops.testing import one_opencl_cpu_device

PACKAGES = Path(__file__).parents[1] / "packages"
DEVICE_LINE = 'device = get_device("cpu")'


def blocks(package: str) -> list[str]:
    """The ```python (and ```py: needs more than the package itself) blocks of ``package``'s
    README, in order."""
    text = (PACKAGES / package / "README.md").read_text()
    return [str(b) for b in re.findall(r"```py(?:thon)?\n(.*?)```", text, flags=re.S)]


def first_block(package: str) -> str:
    """The block of the README's "PyTorch-style" section (the first one)."""
    text = (PACKAGES / package / "README.md").read_text()
    assert text.index("## PyTorch-style") < text.index("```python"), package
    return blocks(package)[0]


def readme_devices() -> list[DeviceHandle]:
    """The NumPy backend and the OpenCL devices under test (one OpenCL CPU device)."""
    return [d for d in available_devices()
            if d.backend == "cpu" or one_opencl_cpu_device(d) is None]


def run_block(source: str, dev: DeviceHandle, name: str) -> tuple[dict[str, Any], str]:
    """Run ``source`` on ``dev`` (its device line rewritten); its namespace and output.
    Skips the OpenCL CPU devices other than the one these tests use."""
    why = one_opencl_cpu_device(dev) if dev.backend == "cl" else None
    if why is not None:
        pytest.skip(why)
    assert source.count(DEVICE_LINE) == 1, f"{name}: expected one line {DEVICE_LINE!r}"
    source = source.replace(DEVICE_LINE, "device = get_device(_README_DEVICE)")
    namespace: dict[str, Any] = {"__name__": name, "_README_DEVICE": dev}
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(source, f"{name} README", "exec"), namespace)  # the README's program
    return namespace, out.getvalue()


def opencl_cpu_selector() -> str | None:
    """A NETCL_DEVICE selector for the one OpenCL CPU device under test, or None."""
    for d in readme_devices():
        if d.backend == "cl" and d.device_type.lower() == "cpu":
            return str(d.platform_name)
    return None


# -- netcl-core ------------------------------------------------------------------------------

HIDE_UPPER_LAYERS = """
import sys


class _Hide:  # as if only netcl-core were installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[:2] in (["netcl", "ops"], ["netcl", "autograd"]):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Hide())
"""


def test_core_blocks(dev: DeviceHandle) -> None:
    first, second = blocks("netcl-core")[:2]
    assert first == first_block("netcl-core")
    ns, out = run_block(first, dev, "core_readme")
    x, y, h = ns["x"], ns["y"], ns["h"]
    assert (x.shape, x.dtype, y.dtype, h.dtype) == ((2, 3), "float32", "int64", "float16")
    assert (x.device is None) == (dev.backend == "cpu")
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(h.numpy(), np.zeros((2, 3)))
    assert out.splitlines()[0] == "(2, 3) float32 int64 float16 2 6"
    assert out.splitlines()[2] == "15.0 2.5 [3, 1]"
    ns, out = run_block(first + second, dev, "core_readme_to")  # the second needs the first
    x16, back = ns["x16"], ns["back"]
    assert out.splitlines()[-1] == "[6.0, 15.0] float16 float32"
    assert (x16.dtype, back.dtype, back.device == x.device) == ("float16", "float32", True)
    np.testing.assert_array_equal(back.numpy(), np.arange(6.0).reshape(2, 3))


def test_core_block_alone_and_its_error_message(tmp_path: Path) -> None:
    """With netcl-ops and netcl-autograd hidden, the first block runs, ``x + 1`` raises the
    MissingOpError the README quotes, and nothing imported the upper layers."""
    script = tmp_path / "core_alone.py"
    script.write_text(HIDE_UPPER_LAYERS + first_block("netcl-core") + textwrap.dedent("""
        from netcl.core.tensor_methods import MissingOpError
        try:
            x + 1
        except MissingOpError as err:
            print("ERROR", isinstance(err, ImportError), err)
        loaded = sorted(m for m in sys.modules if m.startswith(("netcl.ops", "netcl.autograd")))
        print("LOADED", loaded)
    """))
    env = dict(os.environ, NETCL_DEVICE="cpu")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    error = next(line for line in lines if line.startswith("ERROR "))
    assert lines[-1] == "LOADED []"
    message = error.removeprefix("ERROR True ")
    assert message.startswith("Tensor.add: ") and "netcl-ops" in message
    readme = " ".join((PACKAGES / "netcl-core" / "README.md").read_text().split())
    assert f"`{message}`" in readme  # the README quotes the message exactly


# -- netcl-ops -------------------------------------------------------------------------------

def test_ops_block(dev: DeviceHandle) -> None:
    ns, out = run_block(first_block("netcl-ops"), dev, "ops_readme")
    x, w = ns["x"].numpy().astype(np.float64), ns["w"].numpy().astype(np.float64)
    h = np.maximum(x @ w, 0)
    p = np.exp(h - h.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(ns["h"].numpy(), h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ns["p"].numpy(), p, rtol=1e-5, atol=1e-6)
    lines = out.splitlines()
    np.testing.assert_allclose(eval(lines[0]), np.ones(4), rtol=1e-6)  # a printed list
    assert lines[1] == f"(1, 5) {h.argmax(axis=1).tolist()}"
    assert lines[2] == "(2, 3) (5, 4) (20,)"
    fraction, total = (float(v) for v in lines[3].split())
    assert fraction == pytest.approx((h > 0).mean())
    assert total == pytest.approx(np.abs(x * 2 - 1).sum(), rel=1e-5)


# -- netcl-autograd --------------------------------------------------------------------------

def test_autograd_block(dev: DeviceHandle) -> None:
    source = first_block("netcl-autograd")
    assert "loss.backward()" in source and "ag.Tape" not in source
    ns, _ = run_block(source, dev, "autograd_readme")
    np.testing.assert_allclose(ns["w"].numpy().ravel(), [2.0, -1.0, 0.5], atol=1e-3)
    np.testing.assert_allclose(ns["b"].numpy(), [0.3], atol=1e-3)
    assert ns["final"].item() < 1e-5 and not ns["final"].requires_grad
    assert ns["w"].grad is None and ns["w"].requires_grad


# -- netcl-runtime ---------------------------------------------------------------------------

def test_runtime_block_replays_the_eager_loop(dev: DeviceHandle) -> None:
    source = first_block("netcl-runtime")
    capture_line = next(line for line in source.splitlines() if line.startswith("step = capture("))
    captured, _ = run_block(source, dev, "runtime_readme")
    assert captured["step"].mode == "graph"
    eager, _ = run_block(source.replace(capture_line, "step = train_step"), dev, "runtime_eager")
    got, want = captured["losses"], eager["losses"]
    assert len(got) == 20 and got[-1] < got[0]
    if dev.backend == "cpu":
        assert got == want  # NumPy replays are bitwise equal to eager steps
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5)


# -- netcl-distributed -----------------------------------------------------------------------

SAVE_RANK = """
np.savez(__import__("os").environ["README_OUT"] + f"/rank{pg.rank}.npz",
         backend=pg.backend.name, world=pg.world_size,
         **{k: v.numpy() for k, v in model.state_dict().items()})
"""


def launcher() -> list[str]:
    """``netcl launch`` beside this Python, else the module it runs."""
    found = shutil.which("netcl", path=str(Path(sys.executable).parent))
    return [found, "launch"] if found else [sys.executable, "-m", "netcl.distributed.launch"]


@pytest.mark.parametrize("selector", ["cpu", pytest.param(opencl_cpu_selector(), marks=(
    pytest.mark.skipif(opencl_cpu_selector() is None, reason="no OpenCL CPU device"),),
    id="opencl-cpu")])
def test_distributed_script_under_the_launcher(selector: str | None, tmp_path: Path) -> None:
    source = first_block("netcl-distributed")
    assert "init_process_group()" in source and "DistributedDataParallel(" in source
    script = tmp_path / "train.py"
    script.write_text(source + SAVE_RANK)
    env = dict(os.environ, NETCL_DEVICE=str(selector), README_OUT=str(tmp_path),
               NETCL_DIST_TIMEOUT_S="60")
    done = subprocess.run([*launcher(), "-n", "2", str(script)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    losses = [float(v) for v in re.findall(r"^epoch \d: loss ([\d.]+)$", done.stdout, re.M)]
    assert len(losses) == 3 and losses[-1] < losses[0], done.stdout  # printed by rank 0 only
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    assert [(str(z["backend"]), int(z["world"])) for z in ranks] == [("shm", 2)] * 2
    for name in ("weight", "bias"):
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name], err_msg=name)
