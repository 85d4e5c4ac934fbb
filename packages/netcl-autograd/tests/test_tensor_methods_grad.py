"""Tensor operators record (with or without a tape), ``Tensor.backward``, and the
dim/keepdim keywords of the differentiable reductions, on every device."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.core.tensor_methods as tm
from netcl.autograd import ops as agops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, numeric_grad


def leaf(dev: DeviceHandle, a: np.ndarray[Any, Any]) -> Tensor:
    t = Tensor.from_host(dev.queue, a.astype(np.float32))
    t.requires_grad = True
    return t


# (name, loss built with operators and methods, the same loss in NumPy float64)
LOSSES: list[tuple[str, Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = [
    ("mse", lambda w, x: ((x @ w - 1.0) ** 2).mean(),
     lambda w, x: ((x @ w - 1.0) ** 2).mean()),
    ("reflected", lambda w, x: (2.0 - w * 3 + 1 / (w * w + 1)).sum(),
     lambda w, x: (2.0 - w * 3 + 1 / (w * w + 1)).sum()),
    ("methods", lambda w, x: (x @ w).relu().exp().sum(dim=1).log().mean(),
     lambda w, x: np.log(np.exp(np.maximum(x @ w, 0)).sum(1)).mean()),
    ("index_and_shape", lambda w, x: (w[1:3].reshape(-1) * w.T.flatten()[:6]).sum(),
     lambda w, x: (w[1:3].reshape(-1) * w.T.reshape(-1)[:6]).sum()),
    ("softmax_max", lambda w, x: (x @ w).softmax(dim=1).max(dim=1).values.sum()
     - abs(w).mean(), lambda w, x: _softmax(x @ w).max(1).sum() - np.abs(w).mean()),
]


def _softmax(z: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)  # type: ignore[no-any-return]


@pytest.mark.parametrize("name,loss_fn,ref", LOSSES, ids=[c[0] for c in LOSSES])
def test_operators_record_and_backward_gives_the_gradient(
        dev: DeviceHandle, name: str, loss_fn: Callable[[Any, Any], Any],
        ref: Callable[[Any, Any], Any]) -> None:
    rng = np.random.default_rng(len(name))
    w0 = rng.standard_normal((5, 3)) * 0.5
    x0 = rng.standard_normal((7, 5))
    w, x = leaf(dev, w0), Tensor.from_host(dev.queue, x0.astype(np.float32))
    with ag.Tape():
        loss = loss_fn(w, x)
    assert loss.requires_grad and loss.size == 1
    assert_close(loss.item(), ref(w0, x0), scale=10)
    loss.backward()  # after the with block: the graph is the grad_fn links
    assert w.grad is not None
    want = numeric_grad(lambda a: ref(a, x0), [w0], 0, np.ones(()))
    assert_close(w.grad.to_host(), want, grad=True, scale=5)


def test_backward_matches_tape_backward_and_accumulates(dev: DeviceHandle) -> None:
    w = leaf(dev, np.array([1.0, -2.0, 3.0]))
    with ag.Tape() as tape:
        loss = (w * w).sum()
    tape.backward(loss, retain_graph=True)
    loss.backward()
    assert w.grad is not None and w.grad.tolist() == [4.0, -8.0, 12.0]
    with pytest.raises(RuntimeError, match="already freed"):
        loss.backward()


def test_backward_without_recording_says_what_to_do(dev: DeviceHandle) -> None:
    w = leaf(dev, np.ones(2))
    with ag.no_grad():
        loss = (w * 2).sum()
    assert not loss.requires_grad
    with pytest.raises(RuntimeError, match=r"does not require grad.*no_grad"):
        loss.backward()
    with pytest.raises(ValueError, match="non-scalar loss needs grad="):
        (w * 2).backward()


def test_records_without_a_tape_and_the_graph_frees_itself(dev: DeviceHandle) -> None:
    w = leaf(dev, np.array([1.0, 2.0]))
    with ag.no_grad():
        frozen = w * 3
    assert not frozen.requires_grad
    loss = ((w * 3 - 1) ** 2).sum()  # no tape: PyTorch's default
    assert ag.current_tape() is None and loss.requires_grad
    loss.backward()
    assert w.grad is not None and w.grad.tolist() == [12.0, 30.0]
    # explicit tapes still work, and consume as before
    with ag.Tape() as tape:
        other = (w * w).sum()
    tape.backward(other)
    assert w.grad.tolist() == [14.0, 34.0]
    # nothing but the graph holds an implicit node: it goes with the last tensor of the graph
    kept = (w * 5).sum()
    node = weakref.ref(kept.grad_fn)
    assert node() is not None
    del kept
    gc.collect()
    assert node() is None


def test_implicit_tape_off_records_only_inside_tapes(dev: DeviceHandle) -> None:
    w = leaf(dev, np.ones(1))
    seen: list[bool] = []

    def worker() -> None:
        seen.append((w * 2).requires_grad)

    before = agops.implicit_tape(False)
    try:
        assert not (w * 2).requires_grad
        with ag.Tape():
            assert (w * 2).requires_grad
        t = threading.Thread(target=worker)  # process-wide: a thread sees it too
        t.start()
        t.join()
    finally:
        agops.implicit_tape(before)
    assert seen == [False] and (w * 2).requires_grad


def test_autograd_fills_the_differentiable_slots() -> None:
    assert tm.registered("add") is agops.add
    assert tm.registered("eq") is not None  # netcl-ops' comparison: no gradient
    assert tm.registered("backward") is not None


def test_autograd_reductions_take_dim_and_keepdim(dev: DeviceHandle) -> None:
    a = np.random.default_rng(1).standard_normal((3, 7))
    x = leaf(dev, a)
    with ag.Tape() as tape:
        loss = agops.sum(agops.mul(agops.softmax(x, dim=0), agops.mean(x, dim=1, keepdim=True)))
    tape.backward(loss)
    assert x.grad is not None and x.grad.shape == (3, 7)
    assert agops.max(x, dim=1).shape == (3,)
    assert agops.var(x, dim=0, keepdim=True).shape == (1, 7)
    assert agops.log_softmax(x, dim=0).shape == (3, 7)
    with pytest.raises(TypeError, match="sum: got both axis=1 and dim=0"):
        agops.sum(x, 1, dim=0)
    with pytest.raises(TypeError, match="log_softmax: got both"):
        agops.log_softmax(x, 0, dim=0)


def test_in_place_writes_on_recorded_tensors_are_refused(dev: DeviceHandle) -> None:
    w = leaf(dev, np.array([1.0, 2.0]))
    with pytest.raises(RuntimeError, match="add_: an in-place write"):
        w += 1  # ops record without a tape too (as PyTorch refuses it on a leaf)
    with ag.no_grad():
        w += 1  # allowed: an optimizer step
    with ag.Tape():
        with pytest.raises(RuntimeError, match=r"add_: an in-place write .*no_grad"):
            w += 1
        with pytest.raises(RuntimeError, match="zero_: an in-place write"):
            w.zero_()
        with ag.no_grad():
            w.sub_(w.grad if w.grad is not None else 0.5)  # a manual SGD step
    assert w.tolist() == [1.5, 2.5]


def test_setitem_on_recorded_tensors_is_refused(dev: DeviceHandle) -> None:
    w = Tensor.from_host(dev.queue, np.zeros(7, np.float32)).requires_grad_()
    with pytest.raises(RuntimeError, match=r"__setitem__: an in-place write .*no_grad"):
        w[::2] = 1
    with pytest.raises(RuntimeError, match=r"__setitem__: an in-place write"):
        w[[0, 1]] = 1
    with ag.no_grad():
        w[::2] = 1
        w[np.array([1])] = 4
    assert w.tolist() == [1, 4, 1, 0, 1, 0, 1]
