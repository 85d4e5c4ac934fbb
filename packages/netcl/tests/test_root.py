"""The meta-package: extend_path, lazy typed shortcuts, the ``netcl`` command."""

from __future__ import annotations

import ast
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import netcl as nc
from netcl.cli import devices, main
from netcl.core.device import DeviceHandle


def test_first_statement_is_extend_path() -> None:
    """NOTE [ extend_path first ]: the docstring, then extend_path before anything else."""
    tree = ast.parse(Path(nc.__file__).read_text(encoding="utf-8"))
    docstring, first = tree.body[0], tree.body[1]
    assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant)
    assert ast.unparse(first) == (
        "__path__ = __import__('pkgutil').extend_path(__path__, __name__)")
    assert nc.__doc__ is not None and nc.__doc__.startswith("netcl: a deep-learning framework")


def test_every_layer_is_reachable() -> None:
    import netcl.autograd
    import netcl.core
    import netcl.data
    import netcl.distributed
    import netcl.nn
    import netcl.ops
    import netcl.optim
    import netcl.runtime

    for mod in (netcl.core, netcl.ops, netcl.runtime, netcl.autograd, netcl.nn, netcl.optim,
                netcl.data, netcl.distributed):
        assert mod.__version__


def test_shortcuts_are_lazy() -> None:
    code = "import sys, netcl; print('netcl.core' in sys.modules); netcl.Tensor; " \
           "print('netcl.core.tensor' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = nc.nope


def test_pages_002_003_root_shortcuts(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("KernelSpec runs on OpenCL devices")
    from netcl.core.device import device

    queue = dev.queue
    n = 33
    numpy_array = np.arange(n, dtype=np.float32)
    with device(dev):
        spec = nc.KernelSpec(
            name="scale_by_two",
            src="__kernel void scale_by_two(__global float* x) {"
                "  int gid = get_global_id(0);"
                "  x[gid] *= 2.0f;"
                "}",
        )
        prg = spec.build(queue)
        x = nc.Tensor.from_host(numpy_array)
        prg.run(queue, (x.size,), None, x)
    np.testing.assert_array_equal(x.to_host(), 2 * numpy_array)


def test_devices_command_lists_numpy_and_auto() -> None:
    out = io.StringIO()
    assert devices(out) == 0
    text = out.getvalue()
    assert "NumPy backend" in text and "auto picks:" in text
    from netcl.core.device import manager

    for _, d in manager.discover():
        assert d.name.strip() in text
    assert "compute units" in text or not manager.discover()
    with pytest.raises(SystemExit):
        main(["no-such-command"])


def test_page_002_relu_shortcut(dev: DeviceHandle) -> None:
    """Page 002's netcl equivalent of the raw PyOpenCL relu, as written."""
    from netcl.core.device import device

    host_in = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
    with device(dev):
        x = nc.Tensor.from_host(host_in)
        y = nc.relu(x)
        host_out = y.to_host()
    np.testing.assert_array_equal(host_out, np.maximum(host_in, 0))


def test_root_shortcuts_compute(dev: DeviceHandle) -> None:
    q = dev.queue
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    ta = nc.Tensor.from_host(q, a)
    np.testing.assert_allclose(nc.matmul(ta, ta, transpose_b=True).to_host(), a @ a.T)
    np.testing.assert_allclose(nc.elementwise_binary(ta, ta, "mul").to_host(), a * a)
    np.testing.assert_allclose(nc.reduce_sum(ta).to_host(), a.sum())
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(nc.softmax(ta).to_host(), e / e.sum(1, keepdims=True),
                               rtol=1e-5)
    x = nc.Tensor.from_host(q, np.ones((1, 1, 3, 3), np.float32))
    w = nc.Tensor.from_host(q, np.ones((1, 1, 2, 2), np.float32))
    np.testing.assert_allclose(nc.conv2d(x, w).to_host(), np.full((1, 1, 2, 2), 4.0))
    assert callable(nc.build_matmul_kernel)
    b = nc.Tensor.from_host(q, np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_allclose(nc.bias_add(ta, b).to_host(), a + np.array([1.0, 2.0, 3.0]))


def test_devices_command_lists_an_unusable_device_with_reason_and_remedy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from netcl.core import device_probe
    from netcl.core.device import DeviceManager

    m = DeviceManager()
    if not m.discover():
        pytest.skip("no OpenCL device to plant a failure on")
    victim = m.discover()[0][1].name.strip()
    real = device_probe.probe

    def planted(dev: Any) -> device_probe.Verdict:
        if dev.name.strip() == victim:
            return device_probe.Verdict(False, "clBuildProgram failed: planted")
        return real(dev)

    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path))
    # auto's own choice is under test: NETCL_DEVICE=cl on a one-GPU machine would name only
    # the planted failure (devices() then lists everything and raises; test_cli covers that)
    monkeypatch.delenv("NETCL_DEVICE", raising=False)
    monkeypatch.setattr(device_probe, "probe", planted)
    monkeypatch.setattr("netcl.cli.manager", m)
    out = io.StringIO()
    assert devices(out, reprobe=True) == 0
    text = out.getvalue()
    assert f"x [unusable] cl:{m.discover()[0][0].name.strip()}:{victim}" in text
    assert "reason: clBuildProgram failed: planted" in text
    assert "remedy: " in text and "NETCL_REPROBE=1" in text
    assert f"auto picks: cl:{m.discover()[0][0].name.strip()}:{victim}" not in text
