"""capture on every OpenCL device, with steps made of netcl-core kernels only (KernelSpec): the
replay equals eager execution bitwise over several steps and a parameter change, each thing
that would make a replay wrong raises its typed error, the graph keeps its buffers from the
pool, and the NumPy backend captures too."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import KernelSpec
from netcl.core.memory import get_persistent_pool
from netcl.core.recording import check_flag
from netcl.core.tensor import copy_from_host
from netcl.runtime import (
    CaptureFallbackWarning,
    DeviceCheckError,
    GraphReleasedError,
    HostReadError,
    InputMismatchError,
    Param,
    UnstableStepError,
    capture,
)
from netcl.runtime._checks import MAX_PENDING, DeviceChecks
from netcl.runtime._numpy_graph import NumpyGraph

# h = x * k + w;  w -= lr * h;  out = h (a "forward" and an "update" of the state w)
FORWARD = KernelSpec("fwd", src="""
__kernel void fwd(__global const float* x, __global const float* w, __global float* h,
                  const float k, const int n) {
    int i = get_global_id(0);
    if (i < n) h[i] = x[i] * k + w[i];
}""", workgroup_size=64)
UPDATE = KernelSpec("upd", src="""
__kernel void upd(__global float* w, __global const float* h, const float lr, const int n) {
    int i = get_global_id(0);
    if (i < n) w[i] -= lr * h[i];
}""", workgroup_size=64)
FLAG = KernelSpec("flag_negative", src="""
__kernel void flag_negative(__global const float* x, __global int* bad, const int n) {
    int i = get_global_id(0);
    if (i < n && x[i] < 0.0f) bad[0] = 1;
}""", workgroup_size=64)
N = 100



@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("graph capture runs on OpenCL devices (the NumPy backend: see below)")
    return dev


class Model:
    """State ``w`` and a learning rate, updated by :meth:`step`."""

    def __init__(self, dev: DeviceHandle) -> None:
        self.q = dev.queue
        self.w = Tensor.from_host(self.q, np.linspace(-1, 1, N, dtype=np.float32))
        self.lr = 0.1

    def step(self, x: Tensor) -> Tensor:
        h = Tensor.from_shape(self.q, (N,), fill=None)
        FORWARD.run(self.q, (128,), None, x, self.w, h, 1.5, N)
        UPDATE.run(self.q, (128,), None, self.w, h, self.lr, N)
        return h


def _batches(steps: int) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(N).astype(np.float32) for _ in range(steps)]


def _run(step: Callable[[Tensor], Tensor], model: Model, batches: list[Any]) -> list[Any]:
    outs = []
    for i, x in enumerate(batches):
        if i == 3:
            model.lr = 0.025
        outs.append((step(Tensor.from_host(model.q, x)).to_host().copy(), model.w.to_host().copy()))
    return outs


def test_replay_equals_eager_bitwise_with_a_parameter(cl_dev: DeviceHandle) -> None:
    batches = _batches(6)
    eager_model, graph_model = Model(cl_dev), Model(cl_dev)
    eager = _run(eager_model.step, eager_model, batches)
    step = capture(graph_model.step, params={"lr": Param.attribute(graph_model, "lr")})
    replayed = _run(step, graph_model, batches)
    assert step.mode == "graph" and step.graph is not None
    assert step.graph.launches == 2 and step.graph.params == {"lr": 1}
    for (h0, w0), (h1, w1) in zip(eager, replayed):
        np.testing.assert_array_equal(h0, h1)
        np.testing.assert_array_equal(w0, w1)


def test_numpy_arrays_feed_the_inputs_after_capture(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)
    step = capture(model.step, warmup=0)
    x0, x1 = _batches(2)
    step(Tensor.from_host(model.q, x0))
    w = model.w.to_host().copy()
    out = step(x1).to_host()
    np.testing.assert_allclose(out, x1 * np.float32(1.5) + w, rtol=1e-6, atol=1e-6)  # FMA
    with pytest.raises(InputMismatchError, match="array of shape"):
        step(x1.astype(np.float64))


def test_shape_and_dtype_changes_raise(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)
    step = capture(model.step, warmup=0)
    step(Tensor.from_host(model.q, np.zeros(N, np.float32)))
    with pytest.raises(InputMismatchError, match=r"shape \(50,\).*captured with shape \(100,\)"):
        step(Tensor.from_host(model.q, np.zeros(50, np.float32)))
    with pytest.raises(InputMismatchError, match="dtype float64"):
        step(Tensor.from_host(model.q, np.zeros(N), dtype="float64"))
    with pytest.raises(InputMismatchError, match="structured"):
        step(Tensor.from_host(model.q, np.zeros(N, np.float32)), Tensor.from_host(model.q, [1.0]))


def test_non_tensor_argument_must_stay_the_same(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue
    w = Tensor.from_host(q, np.zeros(N, np.float32))

    def step(x: Tensor, k: float) -> Tensor:
        h = Tensor.from_shape(q, (N,), fill=None)
        FORWARD.run(q, (128,), None, x, w, h, k, N)
        return h

    graph = capture(step, warmup=0)
    x = Tensor.from_host(q, np.ones(N, np.float32))
    assert graph(x, 2.0).to_host()[0] == 2.0
    with pytest.raises(InputMismatchError, match=r"argument 1 is 3\.0"):
        graph(x, 3.0)


def test_host_read_inside_the_step_raises(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)

    def step(x: Tensor) -> Tensor:
        h = model.step(x)
        if h.to_host().sum() > 0:  # a branch on device data
            model.lr = 0.0
        return h

    with pytest.raises(HostReadError, match=r"Tensor.to_host reads a tensor of shape \(100,\)"):
        capture(step, warmup=0)(Tensor.from_host(model.q, np.ones(N, np.float32)))


def test_scalar_that_changes_without_being_a_parameter_raises(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)

    def step(x: Tensor) -> Tensor:
        model.lr *= 0.5  # a host-side schedule the graph was not told about
        return model.step(x)

    with pytest.raises(UnstableStepError, match=r"kernel upd\), scalar argument 2 is \S+ on one "
                       r"call and \S+ on the next, and follows no graph parameter; .*Make the "
                       r"value a parameter"):
        capture(step, warmup=0)(Tensor.from_host(model.q, np.ones(N, np.float32)))


def test_step_counter_advanced_inside_the_step_raises(cl_dev: DeviceHandle) -> None:
    """A Python counter the step advances: the error says so, with the advance per call (the
    capture traced three pairs of calls, so the counter went to 18)."""
    model = Model(cl_dev)
    counter = {"t": 0}

    def step(x: Tensor) -> Tensor:
        counter["t"] += 3
        h = Tensor.from_shape(model.q, (N,), fill=None)
        FORWARD.run(model.q, (128,), None, x, model.w, h, 1.5, N)
        UPDATE.run(model.q, (128,), None, model.w, h, 0.1, np.int32(min(N, counter["t"])))
        return h

    with pytest.raises(UnstableStepError, match=r"kernel upd\), scalar argument 3 is \d+ on one "
                       r"call and \d+ on the next.*a counter the step advances on the host "
                       r"\(by 3 a call\)"):
        capture(step, warmup=0)(Tensor.from_host(model.q, np.ones(N, np.float32)))
    assert counter["t"] == 18


def test_buffer_the_graph_does_not_own_raises(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)
    outside = [Tensor.from_host(model.q, np.zeros(N, np.float32)) for _ in range(8)]

    def step(x: Tensor) -> Tensor:
        model.w = outside.pop()  # another tensor made outside the step on each call
        return model.step(x)

    with pytest.raises(UnstableStepError, match="does not own"):
        capture(step, warmup=0)(Tensor.from_host(model.q, np.ones(N, np.float32)))


def test_upload_of_changing_host_data_raises(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)
    counter = [0]

    def step(x: Tensor) -> Tensor:
        counter[0] += 1
        shift = Tensor.from_host(model.q, np.full(N, counter[0], np.float32))
        h = Tensor.from_shape(model.q, (N,), fill=None)
        FORWARD.run(model.q, (128,), None, x, shift, h, 1.0, N)
        return h

    with pytest.raises(UnstableStepError, match="uploads host data"):
        capture(step, warmup=0)(Tensor.from_host(model.q, np.ones(N, np.float32)))


def test_constant_upload_and_fill_are_replayed(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue

    def step(x: Tensor) -> Tensor:
        shift = Tensor.from_host(q, np.full(N, 2.0, np.float32))  # the same on every call
        h = Tensor.from_shape(q, (N,), fill=7.0)
        FORWARD.run(q, (128,), None, x, shift, h, 3.0, N)
        copy_from_host(shift, np.full(N, 0.5, np.float32))  # an upload command
        FORWARD.run(q, (128,), None, h, shift, h, 1.0, N)
        return h

    graph = capture(step, warmup=0)
    for value in (1.0, 2.0, 3.0):
        out = graph(Tensor.from_host(q, np.full(N, value, np.float32))).to_host()
        np.testing.assert_array_equal(out, np.full(N, value * 3.0 + 2.5, np.float32))


def test_device_side_check_raises_at_the_next_call(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue

    def step(x: Tensor) -> Tensor:
        bad = Tensor.from_shape(q, (1,), "int32", fill=0)
        FLAG.run(q, (128,), None, x, bad, N)

        def fail() -> None:
            raise ValueError(f"step: negative input {float(x.to_host().min())}")

        check_flag(bad, fail)
        return x

    graph = capture(step, warmup=1)
    with pytest.raises(ValueError, match=r"negative input -1\.0"):  # eager: at once
        graph(Tensor.from_host(q, -np.ones(N, np.float32)))
    ok = np.ones(N, np.float32)
    graph(Tensor.from_host(q, ok))  # captures
    graph(Tensor.from_host(q, -2 * ok))  # the check runs on the device ...
    with pytest.raises(ValueError, match=r"negative input -2\.0"):  # ... and raises at sync()
        graph.sync()
    graph(Tensor.from_host(q, -3 * ok))
    with pytest.raises(ValueError) as failed:  # or at a later call, once read back
        for _ in range(2 + MAX_PENDING):
            graph(Tensor.from_host(q, ok))
        graph.sync()
    assert "negative input -3.0" in str(failed.value) or (
        isinstance(failed.value, DeviceCheckError) and "call(s) ago" in str(failed.value))
    graph(Tensor.from_host(q, ok))
    graph.sync()


def test_a_check_read_back_after_the_inputs_changed_does_not_name_them(
        cl_dev: DeviceHandle) -> None:
    """The race CI met: a flag's read completes between a call's first look and its input
    copies; the replay's own poll must not call ``fail`` (it would read the new inputs)."""
    q = cl_dev.queue
    flag = Tensor.from_host(q, np.ones(1, np.int32))

    def fail() -> None:
        raise ValueError("the op's own error")

    for inputs_replaced, error in ((False, ValueError), (True, DeviceCheckError)):
        checks = DeviceChecks()
        checks.fails.append(fail)
        checks.read(q, 0, flag.buffer)
        checks.end_replay()
        q.finish()  # the read is complete
        with pytest.raises(error) as raised:
            checks.poll(block=False, inputs_replaced=inputs_replaced)
        assert ("1 call(s) ago" in str(raised.value)) is inputs_replaced


def test_graph_holds_its_buffers_until_released(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)
    step = capture(model.step, warmup=0)
    out = step(Tensor.from_host(model.q, np.ones(N, np.float32)))
    buffer = out.buffer
    del out
    pool = get_persistent_pool(model.q)
    leases = [pool.allocate(N * 4) for _ in range(8)]
    assert all(lease.buffer is not buffer for lease in leases)
    for lease in leases:
        lease.release()
    step.release()  # the held buffers go back to the pool
    assert step.mode == "pending" and step.graph is None
    again = [pool.allocate(N * 4) for _ in range(16)]
    assert any(lease.buffer is buffer for lease in again)


def test_released_graph_cannot_replay(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)
    step = capture(model.step, warmup=0)
    step(Tensor.from_host(model.q, np.ones(N, np.float32)))
    graph = step.graph
    assert graph is not None
    graph.release()
    with pytest.raises(GraphReleasedError, match="released"):
        graph.replay()


def test_numpy_backend_captures_without_a_warning(dev: DeviceHandle) -> None:
    if dev.backend != "cpu":
        pytest.skip("the NumPy backend's capture")
    x = Tensor.from_host(dev.queue, np.ones(3, np.float32))
    step = capture(lambda t: t, warmup=0, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureFallbackWarning)
        out = step(x)
    assert step.mode == "graph" and isinstance(step.graph, NumpyGraph)
    given = Tensor.from_host(dev.queue, np.arange(3, dtype=np.float32))
    assert step(given) is out and out.to_host().tolist() == [0.0, 1.0, 2.0]
