"""The eager elementwise ops' gradients, which come from the derivative rows (``_vjp``), in the
cases a table row alone does not reach: broadcasting, Python numbers on either side, one
operand needing a gradient, one tensor in two operand slots, mixed dtypes, 0-d tensors and
``where``'s uint8 condition. Each is compared with the fused primitive's gradient (the JIT's
own backward) or with its closed form, on every device.
"""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from netcl.autograd import Tape, compiler, ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import supports_dtype

BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum"]


def _tensor(dev: DeviceHandle, a: Any, dtype: str = "float32", grad: bool = True) -> Tensor:
    t = Tensor.from_host(dev.queue, np.asarray(a), dtype=dtype)
    t.requires_grad = grad
    return t


def _grads(fn: Callable[..., Tensor], *args: Any) -> list[np.ndarray[Any, Any] | None]:
    """The gradients of ``sum(fn(*args) * w)`` (a fixed non-uniform weight) for each Tensor
    argument that requires grad (``None`` for those that do not)."""
    tensors = [a for a in args if isinstance(a, Tensor)]
    for t in tensors:
        t.grad = None
    with Tape() as tape:
        out = fn(*args)
        w = Tensor.from_host(out.queue, np.arange(1.0, 1.0 + out.size).reshape(out.shape)
                             / out.size, dtype=out.dtype)
        total = ops.sum(ops.mul(out, w))
    tape.backward(total)
    return [t.grad.to_host().astype(np.float64) if t.grad is not None else None
            for t in tensors]


def _close(actual: list[Any], expected: list[Any], what: str) -> None:
    assert len(actual) == len(expected), what
    for k, (a, e) in enumerate(zip(actual, expected)):
        if e is None:
            assert a is None, f"{what}: operand {k} got a gradient"
            continue
        assert a is not None and a.shape == e.shape, f"{what}: operand {k} shape"
        np.testing.assert_allclose(a, e, rtol=2e-5, atol=1e-6, err_msg=f"{what}: operand {k}")


def _values(shape: tuple[int, ...], seed: int) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).uniform(0.5, 2.0, shape)


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("shapes", [((3, 1, 4), (5, 4)), ((2, 3), (2, 3)), ((4,), ())],
                         ids=["broadcast", "same", "0-d"])
def test_binary_broadcast_matches_fused(dev: DeviceHandle, name: str,
                                        shapes: tuple[tuple[int, ...], ...]) -> None:
    a, b = (_tensor(dev, _values(s, k)) for k, s in enumerate(shapes))
    prim = compiler.get_primitive(name)
    _close(_grads(getattr(ops, name), a, b), _grads(prim, a, b), f"{name}{shapes}")
    _close(_grads(getattr(ops, name), b, a), _grads(prim, b, a), f"{name}{shapes} swapped")


@pytest.mark.parametrize("name", BINARY)
def test_python_number_on_either_side(dev: DeviceHandle, name: str) -> None:
    x = _tensor(dev, _values((2, 3), 0))
    fn, prim = getattr(ops, name), compiler.get_primitive(name)
    _close(_grads(lambda t: fn(t, 1.5), x), _grads(lambda t: prim(t, 1.5), x), f"{name}(x, 1.5)")
    _close(_grads(lambda t: fn(1.5, t), x), _grads(lambda t: prim(1.5, t), x), f"{name}(1.5, x)")


@pytest.mark.parametrize("name", BINARY)
def test_only_one_operand_needs_a_gradient(dev: DeviceHandle, name: str) -> None:
    a, b = _tensor(dev, _values((3, 4), 0)), _tensor(dev, _values((4,), 1), grad=False)
    got = _grads(getattr(ops, name), a, b)
    assert got[1] is None
    _close(got[:1], _grads(compiler.get_primitive(name), a, b)[:1], name)


def test_one_tensor_in_both_slots(dev: DeviceHandle) -> None:
    v = np.array([0.5, 1.0, 2.0])
    w = np.arange(1.0, 4.0) / 3
    x = _tensor(dev, v)
    _close(_grads(lambda t: ops.sub(t, t), x), [0 * w], "x - x")
    _close(_grads(lambda t: ops.add(t, t), x), [2 * w], "x + x")
    _close(_grads(lambda t: ops.mul(t, t), x), [2 * v * w], "x * x")
    _close(_grads(lambda t: ops.div(t, t), x), [0 * w], "x / x")
    _close(_grads(lambda t: ops.maximum(t, t), x), [w], "maximum(x, x): half to each slot")


def test_mixed_dtypes_give_each_input_its_dtype(dev: DeviceHandle) -> None:
    if not supports_dtype(dev, "float16"):
        pytest.skip("float16 unsupported on this device")
    half = _tensor(dev, [1.0, 2.0], "float16")
    single = _tensor(dev, [3.0, 4.0])
    with Tape() as tape:
        total = ops.sum(ops.mul(half, single))
    tape.backward(total)
    assert half.grad is not None and single.grad is not None
    assert (half.grad.dtype, single.grad.dtype) == ("float16", "float32")
    np.testing.assert_allclose(half.grad.to_host(), [3.0, 4.0])
    np.testing.assert_allclose(single.grad.to_host(), [1.0, 2.0])


def test_integer_operand_without_gradient(dev: DeviceHandle) -> None:
    x = _tensor(dev, [1.0, 2.0, 3.0])
    k = _tensor(dev, [2, 0, -1], "int32", grad=False)
    _close(_grads(ops.mul, x, k), [np.array([2.0, 0.0, -1.0]) * np.arange(1, 4) / 3, None],
           "x * int32")


def test_where_condition_gets_no_gradient(dev: DeviceHandle) -> None:
    x = _tensor(dev, [[-1.0, 2.0, 3.0], [4.0, -5.0, 6.0]])
    y = _tensor(dev, [10.0, 20.0, 30.0])
    cond = Tensor.from_host(dev.queue, np.array([[1, 0, 1], [0, 0, 1]], dtype=np.uint8))
    w = np.arange(1.0, 7.0).reshape(2, 3) / 6
    mask = cond.to_host().astype(bool)
    got = _grads(ops.where, cond, x, y)
    _close(got, [None, np.where(mask, w, 0.0), np.where(mask, 0.0, w).sum(axis=0)], "where")


@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh", "sqrt", "rsqrt", "reciprocal"])
def test_rows_reading_out_match_fused(dev: DeviceHandle, name: str) -> None:
    x = _tensor(dev, _values((3, 5), 2))
    _close(_grads(getattr(ops, name), x), _grads(compiler.get_primitive(name), x), name)


@pytest.mark.parametrize("name", ["netcl.autograd._vjp", "netcl.autograd._eager_expr"])
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0, f"{name}: {result}"
