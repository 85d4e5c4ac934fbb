"""capture of steps that draw from random generators, on every OpenCL device, with a stand-in
generator (netcl.core.recording's RandomStream: a seed, an offset, ``drawing`` before each draw)
and a netcl-core kernel that writes a hash of (seed, stream position): each replay draws what
eager execution draws, bit for bit, and leaves the generators where eager execution would, so
eager and replayed calls take turns, and a Graph replayed directly draws and advances alike; a
reseed between calls is followed; a generator reseeded or
made inside the step is followed too; what a replay cannot follow raises UnstableStepError, and a
draw on the host HostReadError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import KernelSpec
from netcl.core.recording import drawing
from netcl.runtime import CaptureError, HostReadError, Param, UnstableStepError, capture

# out[i] = hash(seed words, stream position offset + i), accumulated into a state: a draw at a
# stale offset or seed changes the result
DRAW = KernelSpec("draw_hash", src="""
__kernel void draw_hash(__global int* out, __global int* acc, const uint k0, const uint k1,
                        const ulong offset, const int n) {
    int i = get_global_id(0);
    if (i >= n) return;
    const ulong j = offset + (ulong)i;
    uint h = (uint)j * 2654435761u ^ (uint)(j >> 32) * 40503u ^ k0;
    h = (h ^ (h >> 15)) * 2246822519u ^ k1;
    out[i] = (int)h;
    acc[i] += (int)(h >> 4);
}""", workgroup_size=64)
QUARTER = KernelSpec("quarter", src="""
__kernel void quarter(__global int* out, const ulong block) {
    if (get_global_id(0) == 0) out[0] = (int)block;
}""", workgroup_size=1)
SIZES = (7, 33)


def _hash(seed: int, offset: int, n: int) -> np.ndarray[Any, Any]:
    j = np.arange(offset, offset + n, dtype=np.uint64)
    k0, k1 = np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32)
    h = (j.astype(np.uint32) * np.uint32(2654435761)) ^ ((j >> np.uint64(32)).astype(np.uint32)
                                                          * np.uint32(40503)) ^ k0
    h = ((h ^ (h >> np.uint32(15))) * np.uint32(2246822519)) ^ k1
    out: np.ndarray[Any, Any] = h.view(np.int32)
    return out


class Stream:
    """A stand-in for netcl.ops.Generator: draws take words in blocks of 4."""

    def __init__(self, seed: int, offset: int = 0) -> None:
        self.seed, self.offset = seed, offset

    def take(self, n: int) -> int:
        drawing(self)
        start = self.offset
        self.offset += -(-n // 4) * 4
        return start

    def reseed(self, seed: int) -> None:
        drawing(self)
        self.seed, self.offset = seed, 0

    def host_words(self, n: int) -> np.ndarray[Any, Any]:
        drawing(self, host=True)
        return _hash(self.seed, self.take(n), n)


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("graph capture runs on OpenCL devices")
    return dev


class Model:
    """Two generators (one seed above 2**32), an accumulator per draw."""

    def __init__(self, dev: DeviceHandle) -> None:
        self.q = dev.queue
        self.streams = [Stream(3), Stream(2**40 + 5, offset=8)]
        self.acc = [Tensor.from_host(self.q, np.zeros(n, np.int32)) for n in SIZES]

    def draw(self, stream: Stream, i: int) -> Tensor:
        n = SIZES[i]
        out = Tensor.from_shape(self.q, (n,), "int32", fill=None)
        DRAW.run(self.q, (64,), None, out, self.acc[i], np.uint32(stream.seed & 0xFFFFFFFF),
                 np.uint32(stream.seed >> 32), np.uint64(stream.take(n)), np.int32(n))
        return out

    def step(self) -> tuple[Tensor, Tensor, Tensor]:
        a = self.draw(self.streams[0], 0)
        b = self.draw(self.streams[1], 1)
        return a, b, self.draw(self.streams[0], 1)


def _run(model: Model, step: Callable[[], Any], eager_at: tuple[int, ...] = ()) -> list[Any]:
    """Seven calls (``eager_at`` ones run the function itself); a reseed before call 4."""
    seen = []
    for call in range(7):
        if call == 4:
            model.streams[1].seed = 77
        outs = (model.step if call in eager_at else step)()
        seen.append([o.to_host().copy() for o in outs])
        seen.append([(s.seed, s.offset) for s in model.streams])
    return [*seen, [a.to_host().copy() for a in model.acc]]


def _assert_same(a: list[Any], b: list[Any]) -> None:
    for x, y in zip(a, b, strict=True):
        for u, v in zip(x, y, strict=True):
            np.testing.assert_array_equal(u, v)


def test_replay_draws_what_eager_draws(cl_dev: DeviceHandle) -> None:
    eager_model, graph_model = Model(cl_dev), Model(cl_dev)
    eager = _run(eager_model, eager_model.step)
    step = capture(graph_model.step)
    replayed = _run(graph_model, step)
    assert step.mode == "graph" and step.graph is not None
    assert step.graph.params == {"rng0.seed_lo": 2, "rng0.seed_hi": 2, "rng0.offset": 2,
                                 "rng1.seed_lo": 1, "rng1.seed_hi": 1, "rng1.offset": 1}
    _assert_same(eager, replayed)
    # the reference: draws at the offsets eager execution takes
    np.testing.assert_array_equal(eager[0][0], _hash(3, 0, 7))
    np.testing.assert_array_equal(eager[0][2], _hash(3, 8, 33))
    np.testing.assert_array_equal(eager[8][1], _hash(77, 8 + 4 * 36, 33))


def test_eager_and_replayed_calls_take_turns(cl_dev: DeviceHandle) -> None:
    eager_model, mixed_model = Model(cl_dev), Model(cl_dev)
    eager = _run(eager_model, eager_model.step)
    step = capture(mixed_model.step)
    _assert_same(eager, _run(mixed_model, step, eager_at=(3, 5)))
    assert step.calls == 5 and step.mode == "graph"


def test_a_direct_graph_replay_draws_and_advances_like_a_call(cl_dev: DeviceHandle) -> None:
    """Graph.replay() without the CapturedStep around it: the graph owns its generators."""
    eager_model, graph_model = Model(cl_dev), Model(cl_dev)
    eager = _run(eager_model, eager_model.step)
    step = capture(graph_model.step)
    last: list[Any] = []

    def direct() -> Any:
        if step.graph is None:  # the warm-up and the capturing call
            last[:] = [step()]
        else:
            step.graph.replay()
        return last[0]

    _assert_same(eager, _run(graph_model, direct, eager_at=(4,)))
    assert step.calls == 2 and step.graph is not None
    assert [item.name for item in step.graph.streams] == ["rng0", "rng1"]


def test_a_step_that_reseeds_is_followed(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)

    def step() -> Tensor:
        model.streams[0].reseed(9)
        return model.draw(model.streams[0], 1)

    captured = capture(step)
    for _ in range(4):
        model.streams[0].offset = 100  # what the step overrides
        np.testing.assert_array_equal(captured().to_host(), _hash(9, 0, 33))
        assert (model.streams[0].seed, model.streams[0].offset) == (9, 36)
    assert captured.mode == "graph"


def test_a_generator_made_inside_the_step_repeats(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)
    step = capture(lambda: model.draw(Stream(12), 0), warmup=0)
    for _ in range(3):
        np.testing.assert_array_equal(step().to_host(), _hash(12, 0, 7))
    assert step.mode == "graph"


def test_a_state_set_inside_the_step_raises(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)

    def step() -> Tensor:
        model.streams[0].offset += 100
        return model.draw(model.streams[0], 0)

    with pytest.raises(UnstableStepError, match=r"rng0 .* had its seed or offset set inside"):
        capture(step, warmup=0)()


def test_a_host_side_draw_raises(cl_dev: DeviceHandle) -> None:
    """Numbers drawn on the host feed Python a replay does not run."""
    model = Model(cl_dev)

    def step() -> Tensor:
        return Tensor.from_shape(model.q, (int(model.streams[0].host_words(1)[0]) % 5 + 1,))

    with pytest.raises(HostReadError, match="draws random numbers on the host"):
        capture(step, warmup=0)()
    assert model.streams[0].offset == 0  # the refused trace left the generator as it was


def test_a_scalar_derived_from_the_offset_raises(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)

    def step() -> Tensor:
        out = Tensor.from_shape(model.q, (1,), "int32", fill=None)
        QUARTER.run(model.q, (1,), None, out, np.uint64(model.streams[0].take(4) // 4))
        return out

    with pytest.raises(UnstableStepError,
                       match=r"kernel quarter.*followed by themselves, but no other scalar"):
        capture(step, warmup=0)()


def test_a_parameter_named_like_a_generator_raises(cl_dev: DeviceHandle) -> None:
    model = Model(cl_dev)
    box = {"rng0.offset": 1.0}
    step = capture(model.step, params={"rng0.offset": Param.item(box, "rng0.offset")}, warmup=0)
    with pytest.raises(CaptureError, match=r"\['rng0.offset'\] are those of random generator"):
        step()
