"""The derivative table: one row per differentiable elementwise op, keyed by its forward row.

Forward rows (C expression, NumPy function, dtype rule) belong to :data:`netcl.ops.ELEMENTWISE`;
this table holds only derivatives, as PyTorch's ``derivatives.yaml`` keeps them apart from the
forwards. The JIT's built-in primitives are made from the two (:mod:`._primitives`).

# NOTE [ Derivative rows ]
# A row is one C expression per argument of the op's primitive: its operands (``a``, ``b``,
# ``c``) then its scalar parameters (``q0``, ``q1``), as the forward row names them. Each gives
# that argument's share of the upstream gradient ``g``; it may read ``out`` (the forward's
# value), ``CT`` (the compute type), ``LIT(x)`` (a literal of CT) and the OpenCL built-ins that
# :mod:`._cexpr` evaluates on the NumPy backend. Kinks follow PyTorch: relu'(0) = 0, abs'(0) = 0,
# leaky_relu'(0) = the slope, clamp passes the gradient where min <= x <= max, and a tie of
# maximum(a, b) (minimum) sends half the gradient to each operand; with a NaN neither loses
# nor ties, so both get ``g``.

Examples:
    >>> DERIVATIVES["mul"]
    ('g * b', 'g * a')
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["DERIVATIVES"]


def _tie(loses: str) -> str:
    """An operand's share in maximum/minimum: 0 where ``a <loses> b``, ``g / 2`` at a tie."""
    return f"a {loses} b ? (CT)0 : (a == b ? g * LIT(0.5) : g)"


_SIGMOID = "(LIT(1.0) / (LIT(1.0) + exp(-a)))"
_GELU_U = "(LIT(0.7978845608028654) * (a + LIT(0.044715) * a * a * a))"
# gelu_tanh's tanh, saturated as netcl.ops' forward row is (PoCL's tanh stops short of +-1)
_GELU_T = f"(fabs({_GELU_U}) >= LIT(20.0) ? copysign(LIT(1.0), {_GELU_U}) : tanh({_GELU_U}))"

_ROWS: dict[str, tuple[str, ...]] = {
    "neg": ("-g",),
    "abs": ("g * (isnan(a) ? a : sign(a))",),  # sign(NaN) is 0 in OpenCL C
    "sign": ("(CT)0",),
    "exp": ("g * out",),
    "log": ("g / a",),
    "sqrt": ("g / (LIT(2.0) * out)",),
    "rsqrt": ("LIT(-0.5) * g * (out * out * out)",),
    "reciprocal": ("-(g * (out * out))",),
    "relu": ("a > (CT)0 ? g : (CT)0",),
    "leaky_relu": ("a > (CT)0 ? g : g * q0", "a > (CT)0 ? (CT)0 : g * a"),
    "sigmoid": ("g * (out * (LIT(1.0) - out))",),
    "tanh": ("g * (LIT(1.0) - out * out)",),
    "gelu": ("g * (LIT(0.5) * (LIT(1.0) + erf(a * LIT(0.7071067811865476))) "
             "+ a * LIT(0.3989422804014327) * exp(LIT(-0.5) * a * a))",),
    "gelu_tanh": (f"g * (LIT(0.5) * (LIT(1.0) + {_GELU_T}) + LIT(0.5) * a * (LIT(1.0) "
                  f"- {_GELU_T} * {_GELU_T}) * LIT(0.7978845608028654) "
                  "* (LIT(1.0) + LIT(0.134145) * a * a))",),
    "silu": (f"g * {_SIGMOID} * (LIT(1.0) + a * (LIT(1.0) - {_SIGMOID}))",),
    "clamp": ("a >= q0 && a <= q1 ? g : (CT)0", "a < q0 ? g : (CT)0",
              "a >= q0 && a > q1 ? g : (CT)0"),
    "square": ("g * (LIT(2.0) * a)",),
    "softplus": ("a > LIT(20.0) ? g : g / (LIT(1.0) + exp(-a))",),
    "erf": ("g * LIT(1.1283791670955126) * exp(-(a * a))",),
    "add": ("g", "g"),
    "sub": ("g", "-g"),
    "mul": ("g * b", "g * a"),
    "div": ("g / b", "-(g * out / b)"),
    "maximum": (_tie("<"), _tie(">")),
    "minimum": (_tie(">"), _tie("<")),
    "pow": ("g * (b * pow(a, b - LIT(1.0)))", "g * (out * log(a))"),
    "where": ("(CT)0", "a != (CT)0 ? g : (CT)0", "a != (CT)0 ? (CT)0 : g"),
}

#: ``{op name: one C expression per primitive argument}``, read-only (NOTE [ Derivative rows ]).
DERIVATIVES: Mapping[str, tuple[str, ...]] = MappingProxyType(_ROWS)
