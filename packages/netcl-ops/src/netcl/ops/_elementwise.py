"""Elementwise ops: one table row per op (C expression + NumPy function), dispatch, unary ops.

Binary ops, comparisons, ``where`` and ``cast`` are in :mod:`._elementwise_binary`; the kernel
family and dtype/broadcast rules in :mod:`._elementwise_base`.

Dtype rules (as in PyTorch): float beats int, the widest float/int wins, a Python scalar never
widens a tensor's dtype (a float scalar with an integer tensor gives float32). Float16 is stored
as half and computed in float32 on every backend. Transcendental ops, ``leaky_relu`` and
``pow`` need floating-point tensors (``TypeError`` otherwise); ``div`` of integers gives float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.polynomial.chebyshev as cheb

from netcl.core.dtypes import FLOAT_DTYPES, INT_DTYPES, numpy_dtype
from netcl.core.tensor import _CPU_BACKEND, Tensor

from ._common import check_tensor, same_device
from ._elementwise_base import (
    EwOp,
    Strided,
    broadcast_shapes,
    kernel_scalar,
    np_compute,
    promote,
    run_broadcast,
    run_fast,
    run_strided,
    scalar_kind,
)

__all__ = [
    "abs",
    "clamp",
    "exp",
    "gelu",
    "leaky_relu",
    "log",
    "neg",
    "reciprocal",
    "relu",
    "rsqrt",
    "sigmoid",
    "sign",
    "silu",
    "sqrt",
    "tanh",
]

# -- NumPy helpers ----------------------------------------------------------------------------

# NOTE [ erf on NumPy ]
# NumPy has no erf. Chebyshev fits of erf(sqrt(u))/sqrt(u) on u = x^2 in [0, 1] and of
# erfc(x)*exp(x^2) on v = 1/x in [1/6, 1], made from mpmath at 40 digits; both agree with
# math.erf to 1e-15 (relative) everywhere; |x| >= 6 gives +-1 (erfc(6) < 2.2e-17).
_ERF_INNER = (
    0.9754769393826545, -0.14226120510371354, 0.010035582187599769, -0.0005768764699767233,
    2.7419931252195823e-05, -1.1043175506760156e-06, 3.8488755453847274e-08,
    -1.1808582408068812e-09, 3.233427947363029e-11, -7.990537014178701e-13,
    1.8005380973056022e-14, -3.250009724776344e-16,
)
_ERF_OUTER = (
    0.274774685897953, 0.16699329119310397, -0.014778434908201294, 0.0004607660043735307,
    0.00017657967835407875, -5.026984064250317e-05, 7.427013355626763e-06,
    -3.5188112190249004e-07, -1.715011288314677e-07, 6.706623049222044e-08,
    -1.4316589287249802e-08, 1.7595567714068648e-09, 7.452125925902882e-11,
    -1.1543790532987167e-10, 3.8873503922903895e-11, -8.504826142441907e-12,
    1.1272288026965894e-12, 4.329529954820512e-14, -8.414125486086354e-14,
    3.198278338338851e-14, -8.152705091715507e-15, 1.5033635291897156e-15,
    -4.710277376051329e-17,
)


def _erf(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Vectorized erf in the dtype of ``x`` (see NOTE [ erf on NumPy ])."""
    ax = np.abs(x)
    out: np.ndarray[Any, Any] = np.sign(x)  # |x| >= 6, and NaN stays NaN
    small = ax < 1
    xs = x[small]
    out[small] = xs * cheb.chebval(2 * xs * xs - 1, _ERF_INNER)
    mid = (ax >= 1) & (ax < 6)
    xm = ax[mid]
    t = (2 / xm - 7 / 6) * 1.2
    out[mid] = np.sign(x[mid]) * (1 - np.exp(-xm * xm) * cheb.chebval(t, _ERF_OUTER))
    return out


def _gelu_tanh(a: Any) -> Any:
    return 0.5 * a * (1 + np.tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))


def _sign(a: Any) -> Any:
    return np.sign(a)


def _clamp(a: Any, lo: Any, hi: Any) -> Any:
    return np.minimum(np.maximum(a, lo), hi)


# -- the table --------------------------------------------------------------------------------

_INT_SIGN = "(CT)((a > (CT)0) - (a < (CT)0))"
_CLAMP = "((a < q0 ? q0 : a) > q1 ? q1 : (a < q0 ? q0 : a))"

# One row per op: name, arity, group, float C expression, int C expression, NumPy function.
# C sees the operands as a, b, c and the parameters as q0, q1, all of the compute type CT.
OPS: dict[str, EwOp] = {op.name: op for op in (
    EwOp("neg", 1, "arith", "-a", "-a", np.negative, unsigned=False),
    EwOp("abs", 1, "arith", "fabs(a)", "(CT)abs(a)", np.abs),
    EwOp("sign", 1, "arith", "isnan(a) ? a : sign(a)", _INT_SIGN, _sign),
    EwOp("exp", 1, "arith", "exp(a)", None, np.exp),
    EwOp("log", 1, "arith", "log(a)", None, np.log),
    EwOp("sqrt", 1, "arith", "sqrt(a)", None, np.sqrt),
    EwOp("rsqrt", 1, "arith", "rsqrt(a)", None, lambda a: 1 / np.sqrt(a)),
    EwOp("reciprocal", 1, "arith", "LIT(1.0) / a", None, np.reciprocal),
    EwOp("relu", 1, "arith", "a < (CT)0 ? (CT)0 : a", "a < (CT)0 ? (CT)0 : a",
         lambda a: np.maximum(a, a.dtype.type(0))),
    EwOp("leaky_relu", 1, "arith", "a < (CT)0 ? a * q0 : a", None,
         lambda a, s, _: np.where(a < 0, a * s, a), nparams=2),
    EwOp("sigmoid", 1, "arith", "LIT(1.0) / (LIT(1.0) + exp(-a))", None,
         lambda a: 1 / (1 + np.exp(-a))),
    EwOp("tanh", 1, "arith", "tanh(a)", None, np.tanh),
    EwOp("gelu", 1, "arith", "LIT(0.5) * a * (LIT(1.0) + erf(a * LIT(0.7071067811865476)))",
         None, lambda a: 0.5 * a * (1 + _erf(a * 0.7071067811865476))),
    EwOp("gelu_tanh", 1, "arith",
         "LIT(0.5) * a * (LIT(1.0) + tanh(LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a"
         " * a)))", None, _gelu_tanh),
    EwOp("silu", 1, "arith", "a / (LIT(1.0) + exp(-a))", None, lambda a: a / (1 + np.exp(-a))),
    EwOp("clamp", 1, "arith", _CLAMP, _CLAMP, _clamp, nparams=2),
    EwOp("add", 2, "arith", "a + b", "a + b", np.add),
    EwOp("sub", 2, "arith", "a - b", "a - b", np.subtract),
    EwOp("mul", 2, "arith", "a * b", "a * b", np.multiply),
    EwOp("div", 2, "arith", "a / b", None, np.true_divide),
    EwOp("max", 2, "arith", "(a > b || isnan(a)) ? a : b", "a > b ? a : b", np.maximum),
    EwOp("min", 2, "arith", "(a < b || isnan(a)) ? a : b", "a < b ? a : b", np.minimum),
    EwOp("pow", 2, "arith", "pow(a, b)", None, np.power),
    EwOp("eq", 2, "cmp", "a == b", "a == b", np.equal),
    EwOp("ne", 2, "cmp", "a != b", "a != b", np.not_equal),
    EwOp("lt", 2, "cmp", "a < b", "a < b", np.less),
    EwOp("le", 2, "cmp", "a <= b", "a <= b", np.less_equal),
    EwOp("gt", 2, "cmp", "a > b", "a > b", np.greater),
    EwOp("ge", 2, "cmp", "a >= b", "a >= b", np.greater_equal),
    EwOp("where", 3, "arith", "a != (CT)0 ? b : c", "a != (CT)0 ? b : c",
         lambda c, a, b: np.where(c != 0, a, b)),
    # movement ops and casts: its own one-op kernel, small to compile
    EwOp("copy", 1, "copy", "a", "a", lambda a: a),
)}

_BUNDLES: dict[tuple[str, int], tuple[EwOp, ...]] = {}
for _op in OPS.values():
    _BUNDLES[(_op.group, _op.arity)] = (*_BUNDLES.get((_op.group, _op.arity), ()), _op)


def bundle(op: EwOp) -> tuple[EwOp, ...]:
    """The ops served by one kernel with ``op`` (same group and arity)."""
    return _BUNDLES[(op.group, op.arity)]


# -- dispatch ---------------------------------------------------------------------------------


def host(t: Tensor) -> np.ndarray[Any, Any]:
    """The NumPy array of a NumPy-backend tensor, in its shape (no copy)."""
    if t.array is None:
        raise TypeError("host: tensor is not on the NumPy backend")
    return t.array.reshape(t.shape)


def wrap(queue: Any, array: Any, dtype: str) -> Tensor:
    """A NumPy-backend tensor holding ``array`` as ``dtype`` (0-d arrays stay 0-d)."""
    arr = np.asarray(array, dtype=numpy_dtype(dtype))
    if not arr.flags.c_contiguous:
        arr = arr.copy()
    return Tensor(shape=arr.shape, dtype=dtype, queue=queue, array=arr, _backend=_CPU_BACKEND)


def _dtypes(op: EwOp, kinds: Sequence[str]) -> tuple[str, str]:
    """(compute dtype, output dtype) of ``op`` on operands of ``kinds``."""
    promoted = promote(op.name, kinds)
    if op.group == "cmp":
        return promoted, "uint8"
    if op.name == "div" and promoted in INT_DTYPES:
        return "float32", "float32"
    if op.expression(promoted) is None:
        what = "a floating-point" if op.c_int is None else "a signed or floating-point"
        raise TypeError(
            f"{op.name}: needs {what} tensor, got {promoted}; cast it first, "
            f"e.g. cast(x, 'float32')"
        )
    return promoted, promoted


def apply(name: str, operands: Sequence[Any], params: Sequence[Any] = (),
          kinds: Sequence[str] | None = None) -> Tensor:
    """Run table op ``name`` on Tensors and Python numbers, broadcasting them.

    ``kinds`` overrides the dtypes that decide the result (``where`` leaves its condition out).
    """
    op = OPS[name]
    if not params and kinds is None and all(
            isinstance(o, Tensor) and o.array is None for o in operands):
        fast = run_fast(op, operands)  # NOTE [ Elementwise fast path ]
        if fast is not None:
            return fast
    tensors = [check_tensor(name, o, "operand") for o in operands if isinstance(o, Tensor)]
    if kinds is None:
        kinds = [o.dtype if isinstance(o, Tensor) else scalar_kind(name, o) for o in operands]
    else:
        for o in operands:
            if not isinstance(o, Tensor):
                scalar_kind(name, o)
    compute, out_dtype = _dtypes(op, kinds)
    queue = same_device(name, *tensors)
    shape = broadcast_shapes(name, *(t.shape for t in tensors))
    values = [o if isinstance(o, Tensor) else kernel_scalar(name, o, compute) for o in operands]
    qs = [kernel_scalar(name, p, compute) for p in params]
    if tensors[0].array is not None:
        ct = np_compute(compute)
        arrays = [host(v).astype(ct, copy=False) if isinstance(v, Tensor) else v for v in values]
        with np.errstate(all="ignore"):
            res = np.asarray(op.numpy(*arrays, *qs))
        # np.broadcast_to is a read-only view even at the same shape, and in-place users
        # (zero_grad, clipping) need a writable result that aliases no input
        own = res.shape == tuple(shape) and not any(
            isinstance(a, np.ndarray) and np.may_share_memory(res, a) for a in arrays)
        return wrap(queue, res if own else np.broadcast_to(res, shape).copy(), out_dtype)
    return run_broadcast(op, bundle(op), values, shape, compute, out_dtype, qs)


def cast_compute(src: str, dst: str) -> str:
    """The compute dtype of a ``src`` -> ``dst`` conversion: the widest float, else widest int."""
    return promote("cast", [src, dst])


def copy_strided(shape: Sequence[int], out: Strided, src: Strided) -> None:
    """OpenCL: ``out[...] = src[...]`` over ``shape`` through both views' strides (with cast)."""
    op = OPS["copy"]
    compute = cast_compute(src.tensor.dtype, out.tensor.dtype)
    run_strided(op, bundle(op), shape, out, [src], compute)


# -- unary ops --------------------------------------------------------------------------------


def neg(x: Tensor) -> Tensor:
    """``-x``; int32/int64/float tensors (uint8 raises ``TypeError``).

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, -2.0]))
        >>> neg(x).to_host().tolist()
        [-1.0, 2.0]
    """
    return apply("neg", [x])


def abs(x: Tensor) -> Tensor:
    """``|x|`` elementwise, any dtype.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, -2.0]))
        >>> abs(x).to_host().tolist()
        [1.0, 2.0]
    """
    return apply("abs", [x])


def sign(x: Tensor) -> Tensor:
    """-1, 0 or 1 by the sign of ``x`` (NaN stays NaN), any dtype.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([3.0, 0.0, -0.5]))
        >>> sign(x).to_host().tolist()
        [1.0, 0.0, -1.0]
    """
    return apply("sign", [x])


def exp(x: Tensor) -> Tensor:
    """``e**x`` of a floating-point tensor.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0]))
        >>> exp(x).to_host().tolist()
        [1.0]
    """
    return apply("exp", [x])


def log(x: Tensor) -> Tensor:
    """Natural logarithm of a floating-point tensor (NaN below 0, -inf at 0).

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0]))
        >>> log(x).to_host().tolist()
        [0.0]
    """
    return apply("log", [x])


def sqrt(x: Tensor) -> Tensor:
    """Square root of a floating-point tensor.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([4.0, 9.0]))
        >>> sqrt(x).to_host().tolist()
        [2.0, 3.0]
    """
    return apply("sqrt", [x])


def rsqrt(x: Tensor) -> Tensor:
    """``1 / sqrt(x)`` of a floating-point tensor.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([4.0]))
        >>> rsqrt(x).to_host().tolist()
        [0.5]
    """
    return apply("rsqrt", [x])


def reciprocal(x: Tensor) -> Tensor:
    """``1 / x`` of a floating-point tensor.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([4.0]))
        >>> reciprocal(x).to_host().tolist()
        [0.25]
    """
    return apply("reciprocal", [x])


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)`` (NaN stays NaN), any signed or float dtype.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))
        >>> relu(x).to_host().tolist()
        [0.0, 2.0]
    """
    return apply("relu", [x])


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    """``x`` where ``x >= 0``, else ``negative_slope * x``; floating-point tensors.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-2.0, 3.0]))
        >>> leaky_relu(x, 0.5).to_host().tolist()
        [-1.0, 3.0]
    """
    return apply("leaky_relu", [x], [float(negative_slope), 0.0])


def sigmoid(x: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))`` of a floating-point tensor.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0]))
        >>> sigmoid(x).to_host().tolist()
        [0.5]
    """
    return apply("sigmoid", [x])


def tanh(x: Tensor) -> Tensor:
    """Hyperbolic tangent of a floating-point tensor.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0]))
        >>> tanh(x).to_host().tolist()
        [0.0]
    """
    return apply("tanh", [x])


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU: ``x * Phi(x)`` with the exact normal CDF, or its tanh form (``"tanh"``).

    Raises:
        ValueError: ``approximate`` is neither ``"none"`` nor ``"tanh"``.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0, 1.0]))
        >>> [round(float(v), 4) for v in gelu(x).to_host()]
        [0.0, 0.8413]
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return apply("gelu" if approximate == "none" else "gelu_tanh", [x])


def silu(x: Tensor) -> Tensor:
    """SiLU (swish): ``x * sigmoid(x)`` of a floating-point tensor.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0]))
        >>> silu(x).to_host().tolist()
        [0.0]
    """
    return apply("silu", [x])


def clamp(x: Tensor, min: float | None = None, max: float | None = None) -> Tensor:
    """``minimum(maximum(x, min), max)``; a ``None`` bound is open. NaN stays NaN.

    Integer tensors with float bounds give float32 (as PyTorch); integer bounds beyond the
    dtype's range act as no bound.

    Raises:
        ValueError: both bounds are ``None``.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-2.0, 0.5, 3.0]))
        >>> clamp(x, 0, 1).to_host().tolist()
        [0.0, 0.5, 1.0]
    """
    x = check_tensor("clamp", x)
    if min is None and max is None:
        raise ValueError("clamp: give at least one of min and max")
    bounds = [b for b in (min, max) if b is not None]
    dtype = promote("clamp", [x.dtype] + [scalar_kind("clamp", b) for b in bounds])
    if dtype != x.dtype:
        from ._elementwise_binary import cast

        x = cast(x, dtype)
    if dtype in FLOAT_DTYPES:
        lo = -np.inf if min is None else float(min)
        hi = np.inf if max is None else float(max)
        return apply("clamp", [x], [lo, hi])
    info = np.iinfo(numpy_dtype(dtype))
    lo_i = info.min if min is None else int(np.clip(int(min), info.min, info.max))
    hi_i = info.max if max is None else int(np.clip(int(max), info.min, info.max))
    return apply("clamp", [x], [lo_i, hi_i])
