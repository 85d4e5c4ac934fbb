"""profile(): launch counts, host enqueue times, device times from profiling events where the
queue has them, replayed graphs seen launch by launch, the table and the Chrome trace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import KernelSpec
from netcl.core.recording import pyopencl
from netcl.runtime import capture, profile

SCALE = KernelSpec("scale2", src="""
__kernel void scale2(__global float* x, const float k, const int n) {
    int i = get_global_id(0);
    if (i < n) x[i] *= k;
}""", workgroup_size=64)



@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("profiling events are OpenCL's")
    return dev


def test_counts_launches_and_host_time(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue
    x = Tensor.from_host(q, np.ones(100, np.float32))
    with profile() as prof:
        for _ in range(3):
            SCALE.run(q, (128,), None, x, 2.0, 100)
        Tensor.from_shape(q, (10,), fill=1.0)
    assert prof.launches == 3 and prof.allocations == 1
    stats = {s.name: s for s in prof.summary()}
    assert stats["scale2"].launches == 3 and stats["scale2"].host_us > 0
    assert "[fill]" in stats
    np.testing.assert_array_equal(x.to_host(), np.full(100, 8.0, np.float32))
    if not prof.device_timed:
        assert "NETCL_PROFILE_EVENTS=1" in prof.table()


def test_device_times_and_chrome_trace(cl_dev: DeviceHandle, tmp_path: Path) -> None:
    cl = pyopencl()
    queue = cl.CommandQueue(cl_dev.context, cl_dev.device,
                            properties=cl.command_queue_properties.PROFILING_ENABLE)
    x = Tensor.from_host(queue, np.ones(1000, np.float32))
    x.wait()
    with profile() as prof:
        SCALE.run(queue, (1024,), None, x, 0.5, 1000)
        SCALE.run(queue, (1024,), None, x, 0.5, 1000)
    assert prof.device_timed
    (row,) = [s for s in prof.summary() if s.name == "scale2"]
    assert row.launches == 2 and row.device_us is not None and row.device_us > 0
    assert prof.table().splitlines()[1].startswith("scale2")
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(path)
    events = json.loads(path.read_text())["traceEvents"]
    device = [e for e in events if e.get("cat") == "device"]
    assert [e["name"] for e in device] == ["scale2", "scale2"]
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in device)


def test_replayed_graph_is_profiled_launch_by_launch(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue
    x = Tensor.from_host(q, np.ones(100, np.float32))

    def step(t: Tensor) -> Tensor:
        SCALE.run(q, (128,), None, t, 2.0, 100)
        SCALE.run(q, (128,), None, t, 3.0, 100)
        return t

    graph = capture(step, warmup=0)
    graph(x)
    with profile() as prof:
        out = graph(Tensor.from_host(q, np.ones(100, np.float32)))
    assert prof.launches == 2
    np.testing.assert_array_equal(out.to_host(), np.full(100, 6.0, np.float32))
