"""The elementwise op table: one row per op (C expression, NumPy function, dtype rule).

Read-only as :data:`netcl.ops.ELEMENTWISE`; see NOTE [ Elementwise table ].

Examples:
    >>> row = ELEMENTWISE["relu"]
    >>> row.arity, row.c_float
    (1, 'a < (CT)0 ? (CT)0 : a')
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.polynomial.chebyshev as cheb

from ._elementwise_source import EwOp

__all__ = ["ELEMENTWISE", "OPS"]

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
    x = np.asarray(x)
    shape = x.shape
    x = x.reshape(-1)  # 0-d input: np.sign would give a scalar that cannot be assigned into
    ax = np.abs(x)
    out: np.ndarray[Any, Any] = np.sign(x)  # |x| >= 6, and NaN stays NaN
    small = ax < 1
    xs = x[small]
    out[small] = xs * cheb.chebval(2 * xs * xs - 1, _ERF_INNER)
    mid = (ax >= 1) & (ax < 6)
    xm = ax[mid]
    t = (2 / xm - 7 / 6) * 1.2
    out[mid] = np.sign(x[mid]) * (1 - np.exp(-xm * xm) * cheb.chebval(t, _ERF_OUTER))
    return out.reshape(shape)


# tanh(sqrt(2 / pi) (a + 0.044715 a^3)), saturated to +-1 from |u| >= 20 (where tanh rounds to
# +-1 in float16, float32 and float64 alike): OpenCL allows tanh 5 ulp, and PoCL's float32 tanh
# stops at 0.99999994, which made gelu_tanh(-inf) -inf there and NaN (-inf * 0) on NumPy and
# Intel's runtime, gelu_tanh(-20) -6e-7 instead of -0. netcl.autograd's derivative does the same.
_GELU_U = "(LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))"
_GELU_TANH = f"(fabs({_GELU_U}) >= LIT(20.0) ? copysign(LIT(1.0), {_GELU_U}) : tanh({_GELU_U}))"


def _gelu_tanh(a: Any) -> Any:
    return 0.5 * a * (1 + np.tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)))


def _clamp(a: Any, lo: Any, hi: Any) -> Any:
    return np.minimum(np.maximum(a, lo), hi)


# -- the table --------------------------------------------------------------------------------

_INT_SIGN = "(CT)((a > (CT)0) - (a < (CT)0))"
_CLAMP = "((a < q0 ? q0 : a) > q1 ? q1 : (a < q0 ? q0 : a))"

# NOTE [ Elementwise table ]
# One row per op: name, arity, group, float C expression, int C expression, NumPy function
# (then the dtype rule's options). C sees the operands as a, b, c and the parameters as q0, q1,
# all of the compute type CT, and may use LIT(x) for a literal of CT. The same row feeds the
# eager kernels (``_elementwise_base``), the eager NumPy path and netcl.autograd's JIT, whose
# built-in primitives are these expressions with the operands then the parameters as their
# arguments; their derivatives are autograd's (``netcl.autograd`` derivative table). Adding an
# op is one row here plus one derivative row there and one OpInfo test row (netcl-ops'
# tests/test_elementwise.py: forward, NaN/inf, gradient, eager vs fused on every device), as
# ``erf`` was added: append it, since a row's place in its
# group is its case in the bundle kernel and the JIT's kernel names count registrations.
OPS: dict[str, EwOp] = {op.name: op for op in (
    EwOp("neg", 1, "arith", "-a", "-a", np.negative, unsigned=False),
    EwOp("abs", 1, "arith", "fabs(a)", "(CT)abs(a)", np.abs),
    EwOp("sign", 1, "arith", "isnan(a) ? a : sign(a)", _INT_SIGN, np.sign),
    EwOp("exp", 1, "arith", "exp(a)", None, np.exp),
    EwOp("log", 1, "arith", "log(a)", None, np.log),
    EwOp("sqrt", 1, "arith", "sqrt(a)", None, np.sqrt),
    EwOp("rsqrt", 1, "arith", "rsqrt(a)", None, lambda a: 1 / np.sqrt(a)),
    EwOp("reciprocal", 1, "arith", "LIT(1.0) / a", None, np.reciprocal),
    EwOp("relu", 1, "arith", "a < (CT)0 ? (CT)0 : a", "a < (CT)0 ? (CT)0 : a",
         lambda a: np.maximum(a, a.dtype.type(0))),
    EwOp("leaky_relu", 1, "arith", "a < (CT)0 ? a * q0 : a", None,
         lambda a, s: np.where(a < 0, a * s, a), nparams=1),
    EwOp("sigmoid", 1, "arith", "LIT(1.0) / (LIT(1.0) + exp(-a))", None,
         lambda a: 1 / (1 + np.exp(-a))),
    EwOp("tanh", 1, "arith", "tanh(a)", None, np.tanh),
    EwOp("gelu", 1, "arith", "LIT(0.5) * a * (LIT(1.0) + erf(a * LIT(0.7071067811865476)))",
         None, lambda a: 0.5 * a * (1 + _erf(a * 0.7071067811865476))),
    EwOp("gelu_tanh", 1, "arith", f"LIT(0.5) * a * (LIT(1.0) + {_GELU_TANH})", None,
         _gelu_tanh),
    EwOp("silu", 1, "arith", "a / (LIT(1.0) + exp(-a))", None, lambda a: a / (1 + np.exp(-a))),
    EwOp("clamp", 1, "arith", _CLAMP, _CLAMP, _clamp, nparams=2),
    EwOp("square", 1, "arith", "a * a", "a * a", np.square),
    EwOp("softplus", 1, "arith", "a > LIT(20.0) ? a : log1p(exp(a))", None,
         lambda a: np.where(a > 20, a, np.log1p(np.exp(a)))),
    EwOp("add", 2, "arith", "a + b", "a + b", np.add),
    EwOp("sub", 2, "arith", "a - b", "a - b", np.subtract),
    EwOp("mul", 2, "arith", "a * b", "a * b", np.multiply),
    EwOp("div", 2, "arith", "a / b", None, np.true_divide, int_out="float32"),
    EwOp("maximum", 2, "arith", "(a > b || isnan(a)) ? a : b", "a > b ? a : b", np.maximum),
    EwOp("minimum", 2, "arith", "(a < b || isnan(a)) ? a : b", "a < b ? a : b", np.minimum),
    EwOp("pow", 2, "arith", "pow(a, b)", None, np.power),
    EwOp("eq", 2, "cmp", "a == b", "a == b", np.equal),
    EwOp("ne", 2, "cmp", "a != b", "a != b", np.not_equal),
    EwOp("lt", 2, "cmp", "a < b", "a < b", np.less),
    EwOp("le", 2, "cmp", "a <= b", "a <= b", np.less_equal),
    EwOp("gt", 2, "cmp", "a > b", "a > b", np.greater),
    EwOp("ge", 2, "cmp", "a >= b", "a >= b", np.greater_equal),
    EwOp("where", 3, "arith", "a != (CT)0 ? b : c", "a != (CT)0 ? b : c",
         lambda c, a, b: np.where(c != 0, a, b)),
    EwOp("erf", 1, "arith", "erf(a)", None, _erf),
    # movement ops and casts: its own one-op kernel, small to compile
    EwOp("copy", 1, "copy", "a", "a", lambda a: a),
)}


#: The table, read-only: ``{name: EwOp}``.
ELEMENTWISE: Mapping[str, EwOp] = MappingProxyType(OPS)
