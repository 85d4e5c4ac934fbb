"""Every elementwise row, eager against fused (JIT), on every backend: values on NaN, +-inf,
+-0 and ties (equal operands), gradients against each other and against finite differences.

The forward rows are netcl.ops.ELEMENTWISE, the derivatives netcl.autograd's derivative table,
the JIT's built-in primitives are made from both. Every fused row is tested; ``ROWS`` below
holds only what some need beyond the defaults: where the gradient is checked by finite
differences (a domain away from kinks and poles), parameters, the eager differentiable function.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import netcl.ops
from netcl.autograd import Tape, compiler, ops
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import TOLERANCES, supports_dtype


@dataclass(frozen=True)
class Row:
    """How one elementwise row is tested: FD domain ``[lo, hi]``, away from ``0`` by ``gap``
    (kinks), its ``params``, and its eager differentiable function (default: ``ops.<name>``,
    else the generic ``ops.elementwise``)."""

    lo: float = -3.0
    hi: float = 3.0
    gap: float = 0.0
    params: tuple[float, ...] = ()
    eager: Callable[..., Tensor] | None = None
    fd_scale: float = 1.0


def _gelu_tanh(x: Tensor) -> Tensor:
    return ops.gelu(x, approximate="tanh")


# Rows that need more than the defaults (domain, kinks, parameters, eager function); every
# other fused row is tested with Row(): a new op needs no line here.
ROWS: dict[str, Row] = {
    "abs": Row(gap=0.2),
    "sign": Row(gap=0.2),
    "log": Row(0.2, 4.0),
    "sqrt": Row(0.2, 4.0),
    "rsqrt": Row(0.2, 4.0),
    "reciprocal": Row(gap=0.3),
    "relu": Row(gap=0.2),
    "leaky_relu": Row(gap=0.2, params=(0.1,)),
    "gelu_tanh": Row(eager=_gelu_tanh),
    "clamp": Row(params=(-1.0, 1.0), gap=0.2),
    "softplus": Row(-30.0, 30.0),
    "div": Row(gap=0.3),
    "pow": Row(0.3, 2.5),
    "where": Row(eager=lambda c, a, b: ops.elementwise("where", c, a, b)),
}

# gelu_tanh(-inf) is -inf * (1 + tanh(-inf)) = -inf * 0: NaN in NumPy and on Intel's OpenCL,
# -inf from PoCL's compiled kernels; eager and fused agree on each device (checked below).
INF_TIMES_ZERO = {"gelu_tanh"}

FUSED = [name for name, row in netcl.ops.ELEMENTWISE.items()
         if row.group == "arith" and row.c_float is not None]

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 25.0, -25.0, 3.0])


def test_test_rows_name_fused_rows() -> None:
    assert set(ROWS) <= set(FUSED), sorted(set(ROWS) - set(FUSED))


def _operands(name: str, arity: int) -> list[np.ndarray[Any, Any]]:
    """Special values in every operand; binary ops meet each pair, equal operands included."""
    if arity == 1:
        return [SPECIAL]
    a, b = (m.ravel() for m in np.meshgrid(SPECIAL, SPECIAL, indexing="ij"))
    if arity == 2:
        return [a, b]
    cond = np.tile([0.0, 1.0, np.nan], a.size)[:a.size]
    return [cond, a, b]


def _eager_fn(name: str, row: Row) -> Callable[..., Tensor]:
    if row.eager is not None:
        return row.eager
    named = getattr(ops, name, None)
    if named is not None:
        return named  # type: ignore[no-any-return]
    return lambda *xs: ops.elementwise(name, *xs)


def _run(fn: Callable[..., Tensor], tensors: list[Tensor], params: tuple[float, ...]) -> tuple[
        np.ndarray[Any, Any], list[np.ndarray[Any, Any]]]:
    """Value and the gradients of ``sum(fn(...))``."""
    for t in tensors:
        t.grad = None
        t.requires_grad = True
    with Tape() as tape:
        out = fn(*tensors, *params)
        total = ops.sum(out)
    tape.backward(total)
    grads = [t.grad.to_host() if t.grad is not None else np.zeros(t.shape) for t in tensors]
    return out.to_host(), grads


def _same(actual: Any, expected: Any, dtype: str, what: str) -> None:
    """Equal within ``dtype``'s tolerance once both are rounded to ``dtype``; NaN where NaN."""
    rtol, atol = TOLERANCES[dtype]
    with np.errstate(all="ignore"):
        a = np.asarray(actual).astype(dtype).astype(np.float64)
        e = np.asarray(expected).astype(dtype).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(a), np.isnan(e), err_msg=f"{what}: NaN positions")
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("name", FUSED)
def test_eager_matches_fused(dev: DeviceHandle, name: str, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on this device")
    row, table = ROWS.get(name, Row()), netcl.ops.ELEMENTWISE[name]
    arrays = _operands(name, table.arity)
    make = [Tensor.from_host(dev.queue, a, dtype=dtype) for a in arrays]
    eager_value = netcl.ops.elementwise(name, *make, params=row.params).to_host()
    # the NumPy function of the row, in the compute type
    ct = np.float32 if dtype == "float16" else np.dtype(dtype).type
    with np.errstate(all="ignore"):
        numpy_value = table.numpy(*(a.astype(dtype).astype(ct) for a in arrays),
                                  *(ct(p) for p in row.params))
    keep = np.ones(eager_value.shape, dtype=bool)
    if name in INF_TIMES_ZERO:  # the row's value at +-inf is the device's (eager = fused there)
        keep = np.all([np.isfinite(a) | np.isnan(a) for a in arrays], axis=0)
    _same(eager_value[keep], np.asarray(numpy_value)[keep], dtype, f"{name}: eager vs NumPy")
    prim = compiler.get_primitive(name)
    eager, eager_grads = _run(_eager_fn(name, row), make, row.params)
    fused, fused_grads = _run(lambda *xs: prim(*xs), make, row.params)
    jitted = compiler.jit(lambda *xs: prim(*xs))(*make, *row.params).to_host()
    _same(eager, eager_value, dtype, f"{name}: eager autograd vs eager op")
    _same(fused, eager, dtype, f"{name}: fused vs eager values")
    _same(jitted, eager, dtype, f"{name}: jit vs eager values")
    for k, (fg, eg) in enumerate(zip(fused_grads, eager_grads)):
        _same(fg, eg, dtype, f"{name}: gradient of operand {k}, fused vs eager")


def _domain(row: Row, size: int, seed: int) -> np.ndarray[Any, Any]:
    x = np.random.default_rng(seed).uniform(row.lo, row.hi, size)
    return np.where(np.abs(x) < row.gap, np.copysign(row.gap, x) + x, x)


@pytest.mark.parametrize("fused", [False, True], ids=["eager", "fused"])
@pytest.mark.parametrize("name", FUSED)
def test_gradient_matches_finite_differences(dev: DeviceHandle, name: str, fused: bool) -> None:
    row, table = ROWS.get(name, Row()), netcl.ops.ELEMENTWISE[name]
    if name == "sign":
        pytest.skip("sign is flat: its derivative is 0, checked eager vs fused above")
    args = [_domain(row, 17, seed) for seed in range(table.arity)]
    if name == "where":
        args[0] = np.tile([0.0, 1.0], 9)[:17]
    fn = (lambda *xs: compiler.get_primitive(name)(*xs, *row.params)) if fused else (
        lambda *xs: _eager_fn(name, row)(*xs, *row.params))

    def ref(*xs: Any) -> Any:
        with np.errstate(all="ignore"):
            return table.numpy(*xs, *row.params)

    wrt = [1, 2] if name == "where" else None
    check_grad(dev, fn, ref, args, wrt=wrt, scale=row.fd_scale)
