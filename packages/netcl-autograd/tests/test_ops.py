"""Every differentiable op: forward and gradient against a NumPy float64 reference, on every
backend (the op test matrix is data: one row per case, ids from the op name)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.ops
from netcl.autograd import compiler, ops
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor

rng = np.random.default_rng(1234)


def r(*shape: int) -> np.ndarray[Any, Any]:
    """Standard normal values of ``shape``."""
    return rng.standard_normal(shape)


def away(*shape: int, lo: float = 0.2) -> np.ndarray[Any, Any]:
    """Normal values pushed away from 0 (no kink or pole inside the finite differences)."""
    x = rng.standard_normal(shape)
    return np.where(x >= 0, x + lo, x - lo)


def pos(*shape: int) -> np.ndarray[Any, Any]:
    """Values in [0.5, 2.5)."""
    return rng.uniform(0.5, 2.5, shape)


def distinct(*shape: int) -> np.ndarray[Any, Any]:
    """Values at least 0.05 apart (no ties for max/min)."""
    n = math.prod(shape)
    return rng.permutation(np.arange(n) * 0.05 - n * 0.025).reshape(shape)


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    scale: float = 1.0


def _erf(x: Any) -> Any:
    return np.vectorize(math.erf)(x)


def _softmax(x: Any, axis: int) -> Any:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax(x: Any, axis: int) -> Any:
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


LABELS = np.array([2, 0, -100, 4, 1])
INDEX = np.array([[1, 0, 2], [2, 2, 0]])

CASES = [
    # elementwise, unary
    Case("neg", ops.neg, np.negative, (r(7),)),
    Case("abs", ops.abs, np.abs, (away(3, 5),)),
    Case("exp", ops.exp, np.exp, (r(2, 7),)),
    Case("log", ops.log, np.log, (pos(33),)),
    Case("sqrt", ops.sqrt, np.sqrt, (pos(5, 3),)),
    Case("rsqrt", ops.rsqrt, lambda x: 1 / np.sqrt(x), (pos(7),)),
    Case("reciprocal", ops.reciprocal, lambda x: 1 / x, (away(7, lo=0.5),)),
    Case("relu", ops.relu, lambda x: np.maximum(x, 0), (away(4, 7),)),
    Case("leaky_relu", ops.leaky_relu, lambda x, negative_slope: np.where(
        x > 0, x, negative_slope * x), (away(9),), {"negative_slope": 0.2}),
    Case("sigmoid", ops.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (r(3, 3),)),
    Case("tanh", ops.tanh, np.tanh, (r(1, 7),)),
    Case("silu", ops.silu, lambda x: x / (1 + np.exp(-x)), (r(11),)),
    Case("gelu", ops.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), (r(2, 5),)),
    Case("gelu_tanh", lambda x: ops.gelu(x, approximate="tanh"),
         lambda x: 0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3))),
         (r(7),)),
    Case("clamp", lambda x: ops.clamp(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7),
         (np.array([-1.3, -0.2, 0.1, 0.69, 1.5, 2.0, -0.8]),)),
    Case("clamp_min_only", lambda x: ops.clamp(x, min=0.1), lambda x: np.maximum(x, 0.1),
         (np.array([-1.0, 0.3, 0.05, 2.0]),)),
    # elementwise, binary with broadcasting corners
    Case("add_row", ops.add, np.add, (r(3, 4), r(4))),
    Case("add_outer", ops.add, np.add, (r(3, 1), r(1, 5))),
    Case("add_one", ops.add, np.add, (r(1), r(2, 3))),
    Case("add_scalar", lambda x: ops.add(x, 2.5), lambda x: x + 2.5, (r(5),)),
    Case("sub_3d", ops.sub, np.subtract, (r(2, 3, 4), r(3, 1))),
    Case("sub_rscalar", lambda x: ops.sub(1.5, x), lambda x: 1.5 - x, (r(6),)),
    Case("mul_col", ops.mul, np.multiply, (r(4, 1), r(4, 7))),
    Case("mul_self", lambda x: ops.mul(x, x), lambda x: x * x, (r(7),)),
    Case("div", ops.div, np.divide, (r(3, 5), away(5, lo=0.5))),
    Case("div_rscalar", lambda x: ops.div(2.0, x), lambda x: 2.0 / x, (away(5, lo=0.5),)),
    Case("pow", ops.pow, np.power, (pos(3, 4), r(4))),
    Case("pow_scalar", lambda x: ops.pow(x, 3.0), lambda x: x**3, (r(7),)),
    Case("maximum", ops.maximum, np.maximum, (distinct(3, 4), distinct(4) + 0.01)),
    Case("minimum", ops.minimum, np.minimum, (distinct(2, 5), distinct(2, 1) + 0.01)),
    Case("where", lambda c, a, b: ops.where(netcl.ops.gt(c, 0), a, b),
         lambda c, a, b: np.where(c > 0, a, b), (r(3, 4), r(3, 4), r(4)), scale=1.0),
    # reductions and softmax
    Case("sum_all", ops.sum, np.sum, (r(3, 7),)),
    Case("sum_axis", lambda x: ops.sum(x, axis=1), lambda x: x.sum(axis=1), (r(2, 33, 3),)),
    Case("sum_axes_keep", lambda x: ops.sum(x, axis=(0, 2), keepdims=True),
         lambda x: x.sum(axis=(0, 2), keepdims=True), (r(2, 3, 5),)),
    Case("mean", lambda x: ops.mean(x, axis=-1), lambda x: x.mean(axis=-1), (r(4, 7),)),
    Case("max_axis", lambda x: ops.max(x, axis=1), lambda x: x.max(axis=1), (distinct(3, 5),)),
    Case("max_axes", lambda x: ops.max(x, axis=(0, 2)), lambda x: x.max(axis=(0, 2)),
         (distinct(3, 2, 4),)),
    Case("min_all_keep", lambda x: ops.min(x, keepdims=True),
         lambda x: x.min(keepdims=True), (distinct(4, 3),)),
    Case("var", lambda x: ops.var(x, axis=0), lambda x: x.var(axis=0, ddof=1), (r(6, 3),)),
    Case("var_pop", lambda x: ops.var(x, correction=0), lambda x: x.var(), (r(9),)),
    Case("softmax", lambda x: ops.softmax(x, axis=-1), lambda x: _softmax(x, -1), (r(3, 7),)),
    Case("softmax_axis0", lambda x: ops.softmax(x, axis=0), lambda x: _softmax(x, 0),
         (r(4, 2),)),
    Case("log_softmax", lambda x: ops.log_softmax(x, axis=1), lambda x: _log_softmax(x, 1),
         (r(5, 6),)),
    Case("nll_gather", ops.nll_gather, lambda lp, y: np.array(
        [0.0 if t == -100 else -lp[i, t] for i, t in enumerate(y)]), (r(5, 6), LABELS)),
    # movement and indexing
    Case("reshape", lambda x: ops.reshape(x, (3, -1)), lambda x: x.reshape(3, -1), (r(2, 6),)),
    Case("view", lambda x: ops.view(x, (6, 2)), lambda x: x.reshape(6, 2), (r(3, 4),)),
    Case("copy", ops.copy, lambda x: x.copy(), (r(2, 3),)),
    Case("contiguous", ops.contiguous, lambda x: x, (r(4),)),
    Case("flatten", lambda x: ops.flatten(x, 1), lambda x: x.reshape(2, -1), (r(2, 3, 4),)),
    Case("squeeze", lambda x: ops.squeeze(x, 1), lambda x: x.squeeze(1), (r(3, 1, 2),)),
    Case("unsqueeze", lambda x: ops.unsqueeze(x, -1), lambda x: x[..., None], (r(3, 2),)),
    Case("permute", lambda x: ops.permute(x, (2, 0, 1)), lambda x: x.transpose(2, 0, 1),
         (r(2, 3, 4),)),
    Case("transpose", ops.transpose, lambda x: x.swapaxes(-1, -2), (r(3, 5),)),
    Case("getitem_slices", lambda x: ops.getitem(x, np.s_[1:, ::2]),
         lambda x: x[1:, ::2], (r(4, 7),)),
    Case("getitem_neg_step", lambda x: ops.getitem(x, np.s_[..., ::-2]),
         lambda x: x[..., ::-2], (r(2, 3, 5),)),
    Case("getitem_int_none", lambda x: ops.getitem(x, np.s_[1, None, 2:4]),
         lambda x: x[1, None, 2:4], (r(3, 5),)),
    Case("slice", lambda x: ops.slice(x, [1], [6], [2], axes=[1]),
         lambda x: x[:, 1:6:2], (r(2, 7),)),
    Case("concat", lambda a, b: ops.concat([a, b], axis=1),
         lambda a, b: np.concatenate([a, b], axis=1), (r(2, 3), r(2, 5))),
    Case("stack", lambda a, b: ops.stack([a, b], axis=1),
         lambda a, b: np.stack([a, b], axis=1), (r(3, 2), r(3, 2))),
    Case("pad", lambda x: ops.pad(x, (1, 2, 0, 1)),
         lambda x: np.pad(x, ((0, 1), (1, 2))), (r(2, 3),)),
    Case("broadcast_to", lambda x: ops.broadcast_to(x, (4, 3, 5)),
         lambda x: np.broadcast_to(x, (4, 3, 5)), (r(3, 1),)),
    Case("gather", lambda x, i: ops.gather(x, 1, i),
         lambda x, i: np.take_along_axis(x, i, 1), (r(2, 4), INDEX)),
    Case("index_select", lambda x, i: ops.index_select(x, 1, i),
         lambda x, i: np.take(x, i, axis=1), (r(3, 4, 2), np.array([3, 0, 3]))),
    Case("index_select_1d", lambda x, i: ops.index_select(x, 0, i),
         lambda x, i: x[i], (r(5), np.array([4, 4, 1]))),
    Case("embedding", lambda i, w: ops.embedding(i, w), lambda i, w: w[i],
         (np.array([[1, 3], [1, 0]]), r(4, 3))),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_op_forward_and_grad(dev: DeviceHandle, case: Case) -> None:
    check_grad(dev, case.fn, case.ref, case.args, case.kwargs, scale=case.scale)


def test_every_registered_op_is_tested() -> None:
    tested = {c.name.split("_")[0] for c in CASES} | {c.name for c in CASES}
    elsewhere = {"cast", "dropout", "binary_cross_entropy_with_logits",
                 "getitem", "matmul", "bias_add", "conv2d", "max_pool2d", "avg_pool2d",
                 "adaptive_avg_pool2d", "global_avg_pool2d", "batch_norm", "layer_norm",
                 "elementwise"}  # elementwise: every table row in test_elementwise_table.py
    registered = {name for name in ag.REGISTRY if not name.startswith("test_")}  # test-only ops
    missing = registered - tested - elsewhere
    assert not missing, f"differentiable ops without a test row: {sorted(missing)}"


# -- kinks and ties, tested on purpose ----------------------------------------------------------


def _grad_of(dev: DeviceHandle, fn: Callable[[Tensor], Tensor], x: np.ndarray[Any, Any]
             ) -> np.ndarray[Any, Any]:
    t = Tensor.from_host(dev.queue, x)
    t.requires_grad = True
    with ag.Tape() as tape:
        y = ops.sum(fn(t))
    tape.backward(y)
    assert t.grad is not None
    return t.grad.to_host()


def test_relu_and_abs_at_zero_have_zero_gradient(dev: DeviceHandle) -> None:
    x = np.array([-1.0, 0.0, 2.0])
    assert _grad_of(dev, ops.relu, x).tolist() == [0.0, 0.0, 1.0]
    assert _grad_of(dev, ops.abs, x).tolist() == [-1.0, 0.0, 1.0]
    assert _grad_of(dev, lambda t: ops.leaky_relu(t, 0.1), x).tolist() == pytest.approx(
        [0.1, 0.1, 1.0])


def test_max_ties_send_the_gradient_to_the_first_max(dev: DeviceHandle) -> None:
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    assert _grad_of(dev, lambda t: ops.max(t, axis=1), x).tolist() == [
        [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    assert _grad_of(dev, lambda t: ops.min(t, axis=0), x).tolist() == [
        [1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]
    assert _grad_of(dev, ops.max, x).tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]


def test_maximum_tie_splits_the_gradient_and_clamp_bounds_pass(dev: DeviceHandle) -> None:
    x = np.array([1.0, 2.0, 3.0])
    assert _grad_of(dev, lambda t: ops.maximum(t, 2.0), x).tolist() == [0.0, 0.5, 1.0]
    assert _grad_of(dev, lambda t: ops.minimum(t, 2.0), x).tolist() == [1.0, 0.5, 0.0]
    assert _grad_of(dev, lambda t: ops.maximum(2.0, t), x).tolist() == [0.0, 0.5, 1.0]
    assert _grad_of(dev, lambda t: ops.clamp(t, 1.0, 2.0), x).tolist() == [1.0, 1.0, 0.0]


# Ties (1 == 1, -0 == +0, inf == inf), a loser, NaN on either side and both, -inf == -inf.
SPECIAL_A = np.array([1.0, 2.0, -0.0, np.inf, -np.inf, np.nan, 3.0, np.nan, -np.inf, 7.0])
SPECIAL_B = np.array([1.0, 3.0, 0.0, np.inf, 5.0, 1.0, np.nan, np.nan, -np.inf, -7.0])


def _pytorch_tie_ref(a: Any, b: Any, g: Any, largest: bool) -> tuple[Any, Any, Any]:
    """maximum/minimum and PyTorch's derivative (derivatives.yaml) in float64: g / 2 at a
    tie, g where the operand is not beaten (so both get g next to a NaN)."""
    with np.errstate(invalid="ignore"):
        out = np.maximum(a, b) if largest else np.minimum(a, b)
        a_loses, b_loses = (a < b, a > b) if largest else (a > b, a < b)
        shared = np.where(a == b, g / 2, g)
        return out, np.where(a_loses, 0.0, shared), np.where(b_loses, 0.0, shared)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_eager_and_fused_on_ties_nan_inf_and_zeros(dev: DeviceHandle,
                                                                   name: str) -> None:
    """Both operands' gradients follow PyTorch (half each at a tie) in the eager op and in the
    JIT-fused kernel, which also computes the eager forward (NaN wins)."""
    op = getattr(ops, name)
    fused = compiler.jit(lambda a, b: op(a, b))
    g = np.arange(1.0, 1.0 + SPECIAL_A.size)
    want = _pytorch_tie_ref(SPECIAL_A, SPECIAL_B, g, name == "maximum")
    for fn in (op, fused):
        ta, tb = Tensor.from_host(dev.queue, SPECIAL_A), Tensor.from_host(dev.queue, SPECIAL_B)
        ta.requires_grad = tb.requires_grad = True
        with ag.Tape() as tape:
            y = fn(ta, tb)
        tape.backward(y, grad=Tensor.from_host(dev.queue, g, dtype=y.dtype))
        assert ta.grad is not None and tb.grad is not None
        for got, ref in zip((y, ta.grad, tb.grad), want):
            np.testing.assert_array_equal(got.to_host(), ref.astype(np.float32))


def test_maximum_tie_gradient_broadcasts_and_sums(dev: DeviceHandle) -> None:
    """A (3, 1) operand tied with some of a (3, 4) one: the halves add up over the
    broadcast axis, as the float64 formula says."""
    a = np.array([[1.0], [2.0], [3.0]])
    b = np.array([[1.0, 0.0, 1.0, 5.0], [2.0, 2.0, 2.0, 2.0], [9.0, 3.0, -1.0, 3.0]])
    g = np.ones((3, 4))
    _, ga, gb = _pytorch_tie_ref(np.broadcast_to(a, b.shape), b, g, True)
    check_grad(dev, ops.maximum, np.maximum, (a, distinct(3, 4)))  # away from ties
    ta, tb = Tensor.from_host(dev.queue, a), Tensor.from_host(dev.queue, b)
    ta.requires_grad = tb.requires_grad = True
    with ag.Tape() as tape:
        y = ops.sum(ops.maximum(ta, tb))
    tape.backward(y)
    assert ta.grad is not None and tb.grad is not None
    np.testing.assert_array_equal(ta.grad.to_host(), ga.sum(axis=1, keepdims=True))
    np.testing.assert_array_equal(tb.grad.to_host(), gb)


def test_cast_passes_gradient_between_floats(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.array([1.0, 2.0]))
    x.requires_grad = True
    with ag.Tape() as tape:
        y = ops.sum(ops.mul(ops.cast(ops.cast(x, "float16"), "float32"), 3.0))
    tape.backward(y)
    assert x.grad is not None and x.grad.dtype == "float32"
    assert x.grad.to_host().tolist() == [3.0, 3.0]


def test_dropout_backward_uses_the_forward_mask(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.arange(1.0, 65.0))
    x.requires_grad = True
    with ag.Tape() as tape:
        y = ops.dropout(x, 0.25, seed=7)
        loss = ops.sum(y)
    tape.backward(loss)
    assert x.grad is not None
    kept = y.to_host() != 0
    assert 0 < kept.sum() < 64
    np.testing.assert_allclose(x.grad.to_host(), np.where(kept, 1 / 0.75, 0.0), rtol=1e-6)
    np.testing.assert_allclose(y.to_host()[kept], np.arange(1.0, 65.0)[kept] / 0.75, rtol=1e-6)
