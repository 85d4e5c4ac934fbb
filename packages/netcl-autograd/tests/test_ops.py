"""Every differentiable op, driven by the op test rows of netcl-ops: each ``OpInfo`` row whose
``grad`` names the differentiable op is checked here on every backend, forward against the
row's float64 NumPy reference (its samples and its NaN/inf inputs), gradient against central
finite differences of that reference, at its kinks against the documented value, eager against
fused (the JIT) for elementwise rows, and its error rows through the differentiable op.

Adding an op with a gradient is one row in netcl-ops' tests (``grad="name"``); the few rows
below are cases only a gradient test needs (an operand used twice, a negative base).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd import compiler, ops
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close
from netcl.ops.testing import OpInfo, away_from_kinks, check_error, check_op

OPS_TESTS = Path(__file__).resolve().parents[2] / "netcl-ops" / "tests"


def _rows_of(module: str) -> Any:
    """netcl-ops' test module ``module`` (its OpInfo tables), loaded from its file."""
    spec = importlib.util.spec_from_file_location(f"netcl_ops_rows_{module}",
                                                  OPS_TESTS / f"{module}.py")
    assert spec is not None and spec.loader is not None, f"{OPS_TESTS / module}.py is missing"
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


EW, RED, SM, MOV = (_rows_of(m) for m in ("test_elementwise", "test_reduce", "test_softmax",
                                          "test_movement"))

rng = np.random.default_rng(1234)


def distinct(*shape: int) -> np.ndarray[Any, Any]:
    """Values at least 0.05 apart (no ties for max/min)."""
    n = int(np.prod(shape))
    return rng.permutation(np.arange(n) * 0.05 - n * 0.025).reshape(shape)

# Rows only a gradient test needs: one tensor as both operands (its gradients add up), a
# negative base under an integral exponent, the population variance.
LOCAL = [
    OpInfo("mul_self", lambda x: x, lambda x: x * x, [((rng.standard_normal(7),), {})],
           grad=lambda m: lambda x: m.mul(x, x)),
    OpInfo("pow_negative_base", lambda x: x, lambda x: x**3.0,
           [((rng.standard_normal(7),), {})], grad=lambda m: lambda x: m.pow(x, 3.0)),
    OpInfo("var_correction_0", lambda x: x, lambda x: x.var(),
           [((rng.standard_normal(9),), {})], grad=lambda m: lambda x: m.var(x, correction=0)),
]

ELEMENTWISE: list[OpInfo] = [i for i in EW.UNARY + EW.BINARY if i.grad]
ROWS: list[OpInfo] = ELEMENTWISE + [
    i for i in RED.TABLE + SM.TABLE + [SM.NLL] + MOV.TABLE if i.grad] + LOCAL

# Finite differences step each element of a non-elementwise op's input: samples above this
# many elements (the 33 x 257 reductions) are left to the forward tests of netcl-ops.
FD_MAX_ELEMENTS = 1100


def _grad_fn(info: OpInfo) -> Callable[..., Tensor]:
    """The row's differentiable op."""
    if isinstance(info.grad, str):
        fn: Callable[..., Tensor] = getattr(ops, info.grad)
        return fn
    assert info.grad is not None
    made: Callable[..., Tensor] = info.grad(ops)
    return made


def _size(args: tuple[Any, ...]) -> int:
    return max((a.size for a in args if isinstance(a, np.ndarray)), default=0)


@pytest.mark.parametrize("info", ROWS, ids=lambda i: i.name)
def test_forward_and_grad(dev: DeviceHandle, info: OpInfo) -> None:
    """Forward against the reference, gradients against finite differences (off the kinks)."""
    elementwise = info in ELEMENTWISE
    checked = 0
    for args, kwargs in info.samples:
        if not elementwise and _size(args) > FD_MAX_ELEMENTS:
            continue
        check_grad(dev, _grad_fn(info), info.ref, away_from_kinks(args, info.kinks), kwargs,
                   scale=info.scale, elementwise=elementwise)
        checked += 1
    assert checked, f"{info.name}: every sample is too large for finite differences"


@pytest.mark.parametrize("info", [i for i in ROWS if i.nan_inputs], ids=lambda i: i.name)
def test_forward_nan_inputs(dev: DeviceHandle, info: OpInfo) -> None:
    """The differentiable op's forward has NaN and infinities where the reference has them."""
    for args, kwargs in info.nan_inputs:
        with np.errstate(all="ignore"):
            check_op(dev, _grad_fn(info), info.ref, args, kwargs, scale=info.scale)


@pytest.mark.parametrize("info", [i for i in ROWS if i.kinks], ids=lambda i: i.name)
def test_gradient_at_kinks(dev: DeviceHandle, info: OpInfo) -> None:
    """At a kink (relu at 0, a tie of maximum, clamp at a bound) the gradient is the documented
    convention, which finite differences cannot check."""
    kwargs = info.samples[0][1]
    for kink in info.kinks:
        tensors = [Tensor.from_host(dev.queue, np.array([v])) for v in kink.at]
        for t in tensors:
            t.requires_grad = True
        with ag.Tape() as tape:
            y = ops.sum(_grad_fn(info)(*tensors, **kwargs))
        tape.backward(y)
        for k, (t, want) in enumerate(zip(tensors, kink.grads, strict=True)):
            got = np.zeros(1) if t.grad is None else t.grad.to_host()
            assert_close(got, [want], err_msg=f"{info.name} at {kink.at}: operand {k}")


def _run(fn: Callable[..., Tensor], dev: DeviceHandle, args: tuple[Any, ...],
         kwargs: dict[str, Any]) -> tuple[np.ndarray[Any, Any], list[np.ndarray[Any, Any]]]:
    """``fn``'s value and the gradients of ``sum(fn(...))`` for its float array arguments."""
    tensors = [Tensor.from_host(dev.queue, a.astype(np.uint8) if a.dtype.kind == "b" else a)
               if isinstance(a, np.ndarray) else a for a in args]
    floats = [t for t in tensors if isinstance(t, Tensor) and t.dtype.startswith("float")]
    for t in floats:
        t.requires_grad = True
    with ag.Tape() as tape:
        out = fn(*tensors, **kwargs)
        total = ops.sum(out)
    tape.backward(total)
    return out.to_host(), [np.zeros(t.shape) if t.grad is None else t.grad.to_host()
                           for t in floats]


@pytest.mark.parametrize("info", ELEMENTWISE, ids=lambda i: i.name)
def test_eager_matches_fused(dev: DeviceHandle, info: OpInfo) -> None:
    """The JIT-fused op gives the eager op's values (NaN and infinities included) and, on the
    finite samples, its gradients."""
    fn = _grad_fn(info)
    fused = compiler.jit(fn)
    for args, kwargs in [*info.samples, *info.nan_inputs]:
        finite = all(np.isfinite(a).all() for a in args if isinstance(a, np.ndarray)
                     and a.dtype.kind == "f")
        with np.errstate(all="ignore"):
            eager, eager_grads = _run(fn, dev, args, kwargs)
            jitted, jitted_grads = _run(fused, dev, args, kwargs)
        assert_close(jitted, eager, err_msg=f"{info.name}: fused vs eager values")
        if finite:
            for k, (jg, eg) in enumerate(zip(jitted_grads, eager_grads, strict=True)):
                assert_close(jg, eg, err_msg=f"{info.name}: gradient {k}, fused vs eager")


@pytest.mark.parametrize("info", [i for i in ROWS if i.errors], ids=lambda i: i.name)
def test_row_errors(dev: DeviceHandle, info: OpInfo) -> None:
    """The differentiable op raises the op's documented errors."""
    for args, kwargs, exc, pattern in info.errors:
        check_error(dev, _grad_fn(info), args, kwargs, exc, pattern)


def test_every_registered_op_is_tested() -> None:
    tested = {i.grad if isinstance(i.grad, str) else i.name for i in ROWS}
    elsewhere = {"cast", "dropout", "binary_cross_entropy_with_logits", "matmul", "bias_add",
                 "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
                 "global_avg_pool2d", "batch_norm", "layer_norm",
                 "elementwise",  # every table row in test_elementwise_table.py
                 # test_attention.py and test_masking.py here; netcl-nn's test_rnn.py
                 "scaled_dot_product_attention", "masked_fill", "tril", "triu", "rnn_scan"}
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
    # one multiplication by 1 / (1 - p): a hundredth of the table's float32 tolerance
    assert_close(x.grad.to_host(), np.where(kept, 1 / 0.75, 0.0), "float32", scale=0.01)
    assert_close(y.to_host()[kept], np.arange(1.0, 65.0)[kept] / 0.75, "float32", scale=0.01)
