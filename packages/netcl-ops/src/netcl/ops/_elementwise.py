"""Elementwise ops: unary ops and :func:`elementwise` (any row of the table by name).

Binary ops, comparisons, ``where`` and ``cast`` are in :mod:`._elementwise_binary`; the dispatch
of table rows in :mod:`._elementwise_dispatch`; the kernel family and dtype/broadcast rules in
:mod:`._elementwise_base`.

Dtype rules (as in PyTorch): float beats int, the widest float/int wins, a Python scalar never
widens a tensor's dtype (a float scalar with an integer tensor gives float32). Float16 is stored
as half and computed in float32 on every backend. Transcendental ops, ``leaky_relu`` and
``pow`` need floating-point tensors (``TypeError`` otherwise); ``div`` of integers gives float32.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, numpy_dtype
from netcl.core.tensor import Tensor

from ._common import check_tensor
from ._dtype_policy import promote, scalar_kind
from ._elementwise_binary import cast
from ._elementwise_dispatch import apply
from ._elementwise_table import OPS as OPS

__all__ = [
    "abs",
    "clamp",
    "elementwise",
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

def elementwise(name: str, *operands: Tensor | int | float,
                params: Sequence[int | float] = ()) -> Tensor:
    """Row ``name`` of :data:`netcl.ops.ELEMENTWISE` applied to ``operands`` (broadcast), with
    its scalar ``params`` (``q0``, ``q1``): every row, including those with no named function.

    Raises:
        KeyError: no row ``name``.
        ValueError: wrong number of operands or parameters, shapes that do not broadcast.
        TypeError: the row's dtype rule (e.g. a float-only op on an integer tensor).

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0, 30.0]))
        >>> [round(float(v), 4) for v in elementwise("softplus", x).to_host()]
        [0.6931, 30.0]
    """
    op = OPS.get(name)
    if op is None:
        raise KeyError(f"elementwise: no op {name!r}; known: {', '.join(sorted(OPS))}")
    if len(operands) != op.arity or len(params) != op.nparams:
        raise ValueError(f"elementwise: {name} takes {op.arity} operand(s) and {op.nparams} "
                         f"parameter(s), got {len(operands)} and {len(params)}")
    return apply(name, operands, params)



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
    return apply("leaky_relu", [x], [float(negative_slope)])


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
        x = cast(x, dtype)
    if dtype in FLOAT_DTYPES:
        lo = -np.inf if min is None else float(min)
        hi = np.inf if max is None else float(max)
        return apply("clamp", [x], [lo, hi])
    info = np.iinfo(numpy_dtype(dtype))
    lo_i = info.min if min is None else int(np.clip(int(min), info.min, info.max))
    hi_i = info.max if max is None else int(np.clip(int(max), info.min, info.max))
    return apply("clamp", [x], [lo_i, hi_i])
