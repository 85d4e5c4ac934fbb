"""The Tape contract: recording, backward, accumulation, errors, nesting, threads, memory."""

from __future__ import annotations

import gc
import threading
import tracemalloc
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd import ops
from netcl.core.device import DeviceHandle
from netcl.core.memory import get_persistent_pool
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close


def leaf(dev: DeviceHandle, values: Any) -> Tensor:
    t = Tensor.from_host(dev.queue, np.asarray(values, dtype=np.float64))
    t.requires_grad = True
    return t


def grad(t: Tensor) -> list[Any]:
    assert t.grad is not None, "no gradient"
    out: list[Any] = t.grad.to_host().tolist()
    return out


def test_training_loop_of_the_spec(dev: DeviceHandle) -> None:
    w = leaf(dev, [[0.5, -0.5, 0.1], [1.0, 0.0, -0.2]])
    x = Tensor.from_host(dev.queue, np.array([[1.0, 2.0], [0.5, -1.0]]))
    y = Tensor.from_host(dev.queue, np.array([2, 0]))
    with ag.Tape() as tape:
        logits = ops.matmul(x, w)
        loss = ag.cross_entropy(logits, y)
    assert loss.requires_grad and loss.grad_fn is not None
    tape.backward(loss)
    logits_h = np.array([[1.0, 2.0], [0.5, -1.0]]) @ w.to_host().astype(np.float64)
    p = np.exp(logits_h - logits_h.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    p[[0, 1], [2, 0]] -= 1
    # a 2x2 matmul and a softmax: a tenth of the table's float32 tolerance
    assert_close(grad(w), np.array([[1.0, 2.0], [0.5, -1.0]]).T @ p / 2, "float32", scale=0.1)


def test_records_when_an_input_requires_grad(dev: DeviceHandle) -> None:
    w = leaf(dev, [1.0, 2.0])
    y = ops.mul(w, w)  # no tape: the implicit tape (NOTE [ Recording ]), as PyTorch
    assert y.requires_grad and isinstance(y.grad_fn, ag.Node) and y.grad_fn.tape_ids == ()
    assert ag.current_tape() is None and ag.is_recording()
    with ag.no_grad():
        assert not ops.mul(w, w).requires_grad
    before = ag.implicit_tape(False)
    try:
        off = ops.mul(w, w)
        assert not off.requires_grad and off.grad_fn is None and not ag.is_recording()
    finally:
        ag.implicit_tape(before)
    with ag.Tape() as tape:
        z = ops.mul(w, w)
        c = ops.mul(Tensor.from_host(dev.queue, np.ones(2)), 3.0)
    assert z.requires_grad and isinstance(z.grad_fn, ag.Node)
    assert not c.requires_grad and c.grad_fn is None
    assert len(tape) == 1 and tape.nodes[0].name == "mul"


def test_grads_accumulate_across_backward_calls_until_zeroed(dev: DeviceHandle) -> None:
    w = leaf(dev, [1.0, -2.0, 3.0])
    for expected in ([2.0, -4.0, 6.0], [4.0, -8.0, 12.0]):
        with ag.Tape() as tape:
            loss = ops.sum(ops.mul(w, w))
        tape.backward(loss)
        assert grad(w) == expected
    w.grad = None  # what an optimizer's zero_grad does
    with ag.Tape() as tape:
        loss = ops.sum(ops.mul(w, 3.0))
    tape.backward(loss)
    assert grad(w) == [3.0, 3.0, 3.0]


def test_non_scalar_loss_needs_grad(dev: DeviceHandle) -> None:
    w = leaf(dev, [1.0, 2.0])
    with ag.Tape() as tape:
        y = ops.mul(w, 3.0)
    with pytest.raises(ValueError, match=r"non-scalar loss needs grad="):
        tape.backward(y)
    with ag.Tape() as tape:
        y = ops.mul(w, 3.0)
    with pytest.raises(ValueError, match=r"grad has shape \(3,\), loss has shape \(2,\)"):
        tape.backward(y, grad=Tensor.from_host(dev.queue, np.ones(3)))
    with ag.Tape() as tape:
        y = ops.mul(w, 3.0)
    tape.backward(y, grad=Tensor.from_host(dev.queue, np.array([1.0, -1.0])))
    assert grad(w) == [3.0, -3.0]


def test_consumed_tape_and_retain_graph(dev: DeviceHandle) -> None:
    w = leaf(dev, [2.0])
    with ag.Tape() as tape:
        loss = ops.sum(ops.exp(w))
    tape.backward(loss, retain_graph=True)
    tape.backward(loss)
    assert grad(w) == pytest.approx([2 * np.exp(2.0)])
    assert tape.consumed and len(tape) == 0
    with pytest.raises(RuntimeError, match=r"already consumed.*retain_graph=True"):
        tape.backward(loss)
    with pytest.raises(RuntimeError, match="consumed"):
        with tape:
            pass


def test_loss_must_come_from_this_tape(dev: DeviceHandle) -> None:
    w = leaf(dev, [1.0])
    with ag.Tape():
        loss = ops.sum(ops.mul(w, w))
    other = ag.Tape()
    with pytest.raises(RuntimeError, match="not recorded on this tape"):
        other.backward(loss)
    with ag.Tape() as tape:
        plain = ops.sum(Tensor.from_host(dev.queue, np.ones(2)))
    with pytest.raises(RuntimeError, match="does not require grad"):
        tape.backward(plain)


def test_nested_tapes_both_record_and_freed_nodes_raise(dev: DeviceHandle) -> None:
    w = leaf(dev, [1.0, 2.0])
    with ag.Tape() as outer:
        h = ops.mul(w, 3.0)
        with ag.Tape() as inner:
            a = ops.sum(ops.mul(h, h))
        b = ops.sum(h)
    assert len(inner) == 2 and len(outer) == 4
    inner.backward(a)
    assert grad(w) == [18.0, 36.0]  # d/dw sum(9 w^2) = 18 w
    with pytest.raises(RuntimeError, match="already freed"):
        outer.backward(b)  # h's node ran (and was freed) in inner's backward
    w.grad = None
    with ag.Tape() as outer2:
        h = ops.mul(w, 3.0)
        with ag.Tape() as inner2:
            a = ops.sum(ops.mul(h, h))
        b = ops.sum(h)
    inner2.backward(a, retain_graph=True)
    outer2.backward(b)
    assert grad(w) == [21.0, 39.0]


def test_tapes_are_thread_local(dev: DeviceHandle) -> None:
    w = leaf(dev, [1.0])
    seen: list[Any] = []

    def worker() -> None:
        y = ops.mul(w, 2.0)
        seen.append((ag.current_tape(), y.requires_grad))

    with ag.Tape() as tape:
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert seen == [(None, True)]  # the worker recorded on the implicit tape, not on `tape`
    assert len(tape) == 0


def test_no_grad_enable_grad_and_detach(dev: DeviceHandle) -> None:
    w = leaf(dev, [1.0, 2.0])
    with ag.Tape() as tape:
        with ag.no_grad():
            frozen = ops.mul(w, w)
            assert not ag.is_recording()
            with ag.enable_grad():
                live = ops.mul(w, 2.0)
        loss = ops.sum(ops.add(ops.mul(ag.detach(ops.mul(w, w)), w), ops.add(frozen, live)))
    assert not frozen.requires_grad and live.requires_grad
    tape.backward(loss)
    assert grad(w) == [3.0, 6.0]  # w^2 (detached) + 2 (live)


def test_grad_fn_is_the_local_gradient_callback(dev: DeviceHandle) -> None:
    a, b = leaf(dev, [1.0, 2.0]), leaf(dev, [3.0, 4.0])
    with ag.Tape():
        y = ops.mul(a, b)
    assert y.grad_fn is not None
    ga, gb = y.grad_fn(Tensor.from_host(dev.queue, np.ones(2)))
    assert ga is not None and gb is not None
    assert ga.to_host().tolist() == [3.0, 4.0] and gb.to_host().tolist() == [1.0, 2.0]


def test_leaf_grads_never_share_storage(dev: DeviceHandle) -> None:
    a, b = leaf(dev, [1.0, 2.0]), leaf(dev, [3.0, 4.0])
    with ag.Tape() as tape:
        y = ops.add(a, b)
    seed = Tensor.from_host(dev.queue, np.array([1.0, 5.0]))
    tape.backward(y, grad=seed)
    assert a.grad is not None and b.grad is not None
    assert a.grad is not b.grad and a.grad is not seed and b.grad is not seed
    if a.grad.array is not None:
        assert not np.shares_memory(a.grad.array, b.grad.array)
    else:
        assert a.grad.buffer is not b.grad.buffer
    assert grad(a) == grad(b) == [1.0, 5.0]


def test_gradient_reaches_through_a_shared_intermediate(dev: DeviceHandle) -> None:
    x = leaf(dev, [0.5, -1.5])
    with ag.Tape() as tape:
        h = ops.tanh(x)
        loss = ops.sum(ops.add(ops.mul(h, h), ops.mul(h, 2.0)))
    tape.backward(loss)
    hx = np.tanh(np.array([0.5, -1.5]))
    assert_close(grad(x), (2 * hx + 2) * (1 - hx**2), "float32", scale=0.1)  # a few roundings


def _in_use(dev: DeviceHandle) -> int:
    if dev.backend == "cpu":
        return tracemalloc.get_traced_memory()[0]
    stats = get_persistent_pool(dev.queue).get_stats()
    return int(stats["bytes_allocated"] - stats["bytes_cached"])


def test_gradients_take_the_dtype_of_their_tensor(dev: DeviceHandle) -> None:
    # add(float16, float32) hands its float32 upstream gradient to the float16 matmul output;
    # the matmul backward must still get float16 (it refuses mixed dtypes), and each leaf's
    # .grad has the leaf's dtype.
    q = dev.queue
    a = Tensor.from_host(q, np.ones((2, 3)), dtype="float16")
    a.requires_grad = True
    w = leaf(dev, np.full((4, 3), 0.5))
    bias = leaf(dev, np.zeros(4))
    with ag.Tape() as tape:
        h = ops.matmul(a, ops.cast(w, "float16"), transpose_b=True)
        loss = ops.sum(ops.add(h, bias))
    assert (h.dtype, loss.dtype) == ("float16", "float32")
    tape.backward(loss)
    assert a.grad is not None and w.grad is not None and bias.grad is not None
    assert (a.grad.dtype, w.grad.dtype, bias.grad.dtype) == ("float16", "float32", "float32")
    np.testing.assert_allclose(a.grad.to_host(), np.full((2, 3), 2.0))
    np.testing.assert_allclose(w.grad.to_host(), np.full((4, 3), 2.0))


def test_backward_releases_buffers_as_the_graph_is_consumed(dev: DeviceHandle) -> None:
    """A 12-layer MLP: in-use bytes peak before backward and fall as nodes are consumed."""
    rng = np.random.default_rng(0)
    width, depth = 128, 12
    weights = [leaf(dev, rng.standard_normal((width, width)) / np.sqrt(width))
               for _ in range(depth)]
    x = Tensor.from_host(dev.queue, rng.standard_normal((256, width)))
    gc.collect()
    tracing = dev.backend == "cpu"
    if tracing:
        tracemalloc.start()
    try:
        with ag.Tape() as tape:
            h = x
            for w in weights:
                h = ops.relu(ops.matmul(h, w))
            loss = ops.sum(h)
        del h
        profile: list[int] = []
        tape.backward(loss, on_node=lambda node: profile.append(_in_use(dev)))
    finally:
        if tracing:
            tracemalloc.stop()
    activation = 256 * width * 4
    peak = max(profile)
    # Each layer saved its input and its matmul output; by the end only the leaves' grads
    # (and nothing of the graph) remain.
    assert profile[-1] < peak - depth * activation, (peak, profile[-1])
    half = len(profile) // 2
    assert np.mean(profile[half:]) < np.mean(profile[:half])
    assert all(w.grad is not None for w in weights)
