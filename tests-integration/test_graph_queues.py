"""A replay graph on two in-order queues (NOTE [ Two queues in a graph ] in
netcl.runtime._overlap): the placement of commands and the events they wait for, checked on
stand-in commands; on every OpenCL device, a step whose slow kernels would expose any missing
dependency (read after write, write after read across the queues, the replay's start and end)
gives NumPy's results over several replays with changing inputs; an MLP training step replays
bitwise as on one queue; ``NETCL_GRAPH_QUEUES=2`` turns it on for new graphs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import KernelSpec
from netcl.nn import Linear, ReLU, Sequential
from netcl.optim import SGD
from netcl.runtime import capture
from netcl.runtime._overlap import START, accesses, place
from netcl.runtime._trace import Command, Fill, Launch

N = 33
SPIN = 20000  # iterations per work item of the slow kernels: long enough to be overtaken

SLOW = KernelSpec("slow_plus_one", src=f"""
__kernel void slow_plus_one(__global float* out, __global const float* x, const int n) {{
    int i = get_global_id(0);
    if (i >= n) return;
    float acc = 0.0f;
    for (int k = 0; k < {SPIN}; ++k) acc += sin((float)k * x[i]);
    out[i] = acc == 12345.678f ? 0.0f : x[i] + 1.0f;  /* the loop cannot be dropped */
}}""", workgroup_size=1)
TWICE = KernelSpec("twice", src="""
__kernel void twice(__global float* out, __global const float* x, const int n) {
    int i = get_global_id(0);
    if (i < n) out[i] = 2.0f * x[i];
}""", workgroup_size=1)
ADD = KernelSpec("add2", src="""
__kernel void add2(__global float* out, __global const float* a, __global const float* b,
                   const int n) {
    int i = get_global_id(0);
    if (i < n) out[i] = a[i] + b[i];
}""", workgroup_size=1)


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("graph replay runs on OpenCL devices")
    return dev


# -- placement, on stand-in commands -----------------------------------------------------------


class Kernel:
    """A stand-in kernel: a name and a source (what read_only_arguments reads)."""

    def __init__(self, name: str, params: str) -> None:
        self.function_name = name
        self._netcl_source = f"__kernel void {name}({params}) {{}}"


RW = Kernel("rw", "__global float* out, __global const float* x")
RW2 = Kernel("rw2", "__global float* out, __global const float* a, __global const float* b")
OPAQUE = object()  # a kernel of unknown source: every buffer is written


def _launch(kernel: Any, *tokens: int) -> Launch:
    return Launch(kernel, (N,), None, [("buf", ("own", t)) for t in tokens])


def test_accesses_read_const_pointers_only() -> None:
    assert accesses(_launch(RW2, 1, 2, 3)) == ({("own", 2), ("own", 3)}, {("own", 1)})
    assert accesses(_launch(OPAQUE, 1, 2)) == (set(), {("own", 1), ("own", 2)})
    assert accesses(_launch(RW, 1, 1)) == (set(), {("own", 1)})  # in place: a write
    assert accesses(Fill(("own", 4), np.zeros(1, np.float32), 0, 4)) == (set(), {("own", 4)})


def test_placement_waits_and_flushes() -> None:
    commands: list[Command] = [
        _launch(RW, 1, 0),      # 0: P <- X                      queue 0
        _launch(RW, 2, 9),      # 1: R <- Y, independent         queue 1, after the start
        _launch(RW2, 3, 1, 2),  # 2: S <- P + R: after 1 and 0   queue 1, waits for 0
        _launch(RW, 4, 3),      # 3: T <- S                      queue 1
        _launch(RW, 1, 9),      # 4: P <- Y: after 0 and 2 read  queue 0, waits for 2
        _launch(RW2, 5, 1, 4),  # 5: out <- P + T: after 4 and 3 queue 0, waits for 3
        Fill(("own", 2), np.zeros(1, np.float32), 0, 4),  # 6: R read by 2: queue 0, seen
    ]
    plan = place(commands)
    got = [(p.queue, p.wait, p.signals, p.flush) for p in plan.placements]
    assert got == [(0, None, True, None), (1, START, False, 0), (1, 0, True, None),
                   (1, None, True, None), (0, 2, False, 1), (0, 3, False, None),
                   (0, None, False, None)]
    assert plan.last_second == 3 and not plan.flush_at_end  # flushed before command 4


def test_dependent_commands_stay_on_one_queue() -> None:
    chain = [_launch(RW, 1, 0), _launch(RW, 2, 1), _launch(OPAQUE, 2, 3)]
    plan = place(chain)
    assert [p.queue for p in plan.placements] == [0, 0, 0]
    assert plan.last_second is None and all(p.wait is None for p in plan.placements)


# -- on the device -----------------------------------------------------------------------------


def _new(q: Any) -> Tensor:
    return Tensor.from_shape(q, (N,), "float32", fill=None)


def step(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The stand-in commands above, as kernels: slow ones where a missing wait shows."""
    q = x.queue
    p, r, s, t, out = (_new(q) for _ in range(5))
    SLOW.run(q, (N,), (1,), p, x, N)          # P <- X + 1 (slow)
    TWICE.run(q, (N,), (1,), r, y, N)         # R <- 2Y
    ADD.run(q, (N,), (1,), s, p, r, N)        # S <- P + R: must wait for the slow P
    SLOW.run(q, (N,), (1,), t, s, N)          # T <- S + 1 (slow)
    TWICE.run(q, (N,), (1,), p, y, N)         # P <- 2Y: not before S read P
    ADD.run(q, (N,), (1,), out, p, t, N)      # out <- P + T: must wait for the slow T
    return s, t, out


def _expected(x: np.ndarray[Any, Any], y: np.ndarray[Any, Any]) -> list[Any]:
    s = (x + 1) + 2 * y
    t = s + 1
    return [s, t, 2 * y + t]


def test_two_queues_keep_every_dependency(cl_dev: DeviceHandle) -> None:
    q = cl_dev.queue
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal(N).astype(np.float32)
    captured = capture(step, warmup=0)
    captured(Tensor.from_host(q, x0), Tensor.from_host(q, x0))
    graph = captured.graph
    assert graph is not None and graph.queues == 1
    graph.use_queues(2)
    assert graph.queues == 2 and graph.overlap == {"second": 3, "waits": 4}
    for i in range(4):
        x = rng.standard_normal(N).astype(np.float32)
        y = rng.standard_normal(N).astype(np.float32)
        outs = captured(x, y)
        for got, want in zip(outs, _expected(x, y), strict=True):
            np.testing.assert_allclose(got.to_host(), want, rtol=1e-6, err_msg=f"replay {i}")
    graph.use_queues(1)
    assert graph.queues == 1 and graph.second_queue is None
    with pytest.raises(ValueError, match="count must be 1 or 2, got 3"):
        graph.use_queues(3)


def test_an_mlp_step_on_two_queues_replays_one_queue_bitwise(cl_dev: DeviceHandle) -> None:
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((9, 7)).astype(np.float32), rng.integers(0, 5, 9))
               for _ in range(5)]
    results = []
    for queues in (1, 2):
        r = np.random.default_rng(0)
        model = Sequential(Linear(7, 33, queue=cl_dev.queue, rng=r), ReLU(),
                           Linear(33, 5, queue=cl_dev.queue, rng=r))
        opt = SGD(model.parameters(), lr=0.05, momentum=0.9)

        def train(x: Tensor, y: Tensor) -> Tensor:
            with ag.Tape() as tape:
                loss = ag.cross_entropy(model(x), y)
            tape.backward(loss)
            opt.step()
            opt.zero_grad()
            return loss

        run = capture(train, warmup=1)
        seen = []
        for i, (x, y) in enumerate(batches):
            loss = run(Tensor.from_host(cl_dev.queue, x), Tensor.from_host(cl_dev.queue, y))
            if i == 1 and queues == 2:
                run.graph.use_queues(2)
                assert run.graph.overlap["second"] > 0
            seen.append(loss.to_host().copy())
        results.append((seen, [p.to_host().copy() for p in model.parameters()]))
    (losses1, params1), (losses2, params2) = results
    for a, b in zip(losses1 + params1, losses2 + params2, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_variable_turns_two_queues_on(cl_dev: DeviceHandle,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_GRAPH_QUEUES", "2")
    captured = capture(step, warmup=0)
    x = Tensor.from_host(cl_dev.queue, np.ones(N, np.float32))
    outs = captured(x, x)
    assert captured.graph is not None and captured.graph.queues == 2
    np.testing.assert_allclose(outs[2].to_host(), _expected(np.ones(N), np.ones(N))[2])
