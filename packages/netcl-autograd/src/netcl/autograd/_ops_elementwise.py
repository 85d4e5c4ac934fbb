"""Differentiable elementwise ops: each forward a ``netcl.ops`` call, each backward its row.

The forward of every op here is a row of :data:`netcl.ops.ELEMENTWISE` (through its
``netcl.ops`` function); the backward is that row's derivative row (``_derivatives``), run by
:func:`~._vjp.row_backward` (NOTE [ Eager row gradients ]): no derivative is written here.
``cast`` alone is structural (the table's ``copy`` row, no derivative row): its gradient is
the cast back. Binary ops broadcast; their gradients are summed back over the broadcast axes.
Python numbers may stand for either operand (they get no gradient). Inside ``compiler.jit``
these ops build the fused expression instead of running (``primitive=``).

Kinks follow the derivative rows, which follow PyTorch: ``relu'(0) = 0``, ``abs'(0) = 0``,
``leaky_relu'(0) = negative_slope``, ``clamp`` passes the gradient where ``min <= x <= max``,
and a tie of ``maximum(a, b)`` (``minimum``) sends half the gradient to each operand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import netcl.ops as _ops
from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.tensor import Tensor

from ._function import differentiable
from ._lazy import Lazy
from ._tape import Backward
from ._vjp import row_backward

__all__ = [
    "abs", "add", "cast", "clamp", "div", "elementwise", "exp", "gelu", "leaky_relu", "log",
    "maximum", "minimum", "mul", "neg", "pow", "reciprocal", "relu", "rsqrt", "sigmoid", "silu",
    "sqrt", "sub", "tanh", "where",
]

Operand = Tensor | float


# -- unary --------------------------------------------------------------------------------------


@differentiable("neg", primitive="neg")
def neg(x: Tensor) -> tuple[Tensor, Backward]:
    """``-x``, differentiable.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, -2.0]))
        >>> neg(x).to_host().tolist()
        [-1.0, 2.0]
    """
    return _ops.neg(x), row_backward("neg", (x,))


@differentiable("abs", primitive="abs")
def abs(x: Tensor) -> tuple[Tensor, Backward]:
    """``|x|``; the gradient at 0 is 0.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> abs(Tensor.from_host(manager.default("cpu").queue, np.array([-3.0]))).to_host()
        array([3.], dtype=float32)
    """
    return _ops.abs(x), row_backward("abs", (x,))


@differentiable("exp", primitive="exp")
def exp(x: Tensor) -> tuple[Tensor, Backward]:
    """``e**x``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> exp(Tensor.from_host(manager.default("cpu").queue, np.zeros(1))).to_host()
        array([1.], dtype=float32)
    """
    out = _ops.exp(x)
    return out, row_backward("exp", (x,), out)


@differentiable("log", primitive="log")
def log(x: Tensor) -> tuple[Tensor, Backward]:
    """Natural logarithm.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> log(Tensor.from_host(manager.default("cpu").queue, np.ones(1))).to_host()
        array([0.], dtype=float32)
    """
    return _ops.log(x), row_backward("log", (x,))


@differentiable("sqrt", primitive="sqrt")
def sqrt(x: Tensor) -> tuple[Tensor, Backward]:
    """Square root (its gradient is infinite at 0).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> sqrt(Tensor.from_host(manager.default("cpu").queue, np.array([4.0]))).to_host()
        array([2.], dtype=float32)
    """
    out = _ops.sqrt(x)
    return out, row_backward("sqrt", (x,), out)


@differentiable("rsqrt", primitive="rsqrt")
def rsqrt(x: Tensor) -> tuple[Tensor, Backward]:
    """``1 / sqrt(x)``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> rsqrt(Tensor.from_host(manager.default("cpu").queue, np.array([4.0]))).to_host()
        array([0.5], dtype=float32)
    """
    out = _ops.rsqrt(x)
    return out, row_backward("rsqrt", (x,), out)


@differentiable("reciprocal", primitive="reciprocal")
def reciprocal(x: Tensor) -> tuple[Tensor, Backward]:
    """``1 / x``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> reciprocal(Tensor.from_host(manager.default("cpu").queue, np.array([4.0]))).to_host()
        array([0.25], dtype=float32)
    """
    out = _ops.reciprocal(x)
    return out, row_backward("reciprocal", (x,), out)


@differentiable("relu", primitive="relu")
def relu(x: Tensor) -> tuple[Tensor, Backward]:
    """``max(x, 0)``; the gradient at 0 is 0 (PyTorch's convention).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> relu(Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))).to_host()
        array([0., 2.], dtype=float32)
    """
    return _ops.relu(x), row_backward("relu", (x,))


@differentiable("leaky_relu", primitive=lambda x, negative_slope=0.01: Lazy.apply(
    "leaky_relu", (x, negative_slope), {}))
def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> tuple[Tensor, Backward]:
    """``x`` where ``x > 0``, else ``negative_slope * x``; the gradient at 0 is the slope.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-2.0, 3.0]))
        >>> leaky_relu(x, 0.5).to_host()
        array([-1.,  3.], dtype=float32)
    """
    return _ops.leaky_relu(x, negative_slope), row_backward(
        "leaky_relu", (x, float(negative_slope)))


@differentiable("sigmoid", primitive="sigmoid")
def sigmoid(x: Tensor) -> tuple[Tensor, Backward]:
    """``1 / (1 + exp(-x))``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> sigmoid(Tensor.from_host(manager.default("cpu").queue, np.zeros(1))).to_host()
        array([0.5], dtype=float32)
    """
    out = _ops.sigmoid(x)
    return out, row_backward("sigmoid", (x,), out)


@differentiable("tanh", primitive="tanh")
def tanh(x: Tensor) -> tuple[Tensor, Backward]:
    """Hyperbolic tangent.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> tanh(Tensor.from_host(manager.default("cpu").queue, np.zeros(1))).to_host()
        array([0.], dtype=float32)
    """
    out = _ops.tanh(x)
    return out, row_backward("tanh", (x,), out)


@differentiable("silu", primitive="silu")
def silu(x: Tensor) -> tuple[Tensor, Backward]:
    """``x * sigmoid(x)``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> silu(Tensor.from_host(manager.default("cpu").queue, np.zeros(1))).to_host()
        array([0.], dtype=float32)
    """
    return _ops.silu(x), row_backward("silu", (x,))


def _lazy_gelu(x: Any, approximate: str = "none") -> Tensor:
    return Lazy.apply("gelu" if approximate == "none" else "gelu_tanh", (x,), {})


@differentiable("gelu", primitive=_lazy_gelu)
def gelu(x: Tensor, approximate: str = "none") -> tuple[Tensor, Backward]:
    """GELU with the exact normal CDF, or its tanh form (``approximate="tanh"``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0, 1.0]))
        >>> np.round(gelu(x).to_host().astype(float), 4).tolist()
        [0.0, 0.8413]
    """
    out = _ops.gelu(x, approximate=approximate)
    return out, row_backward("gelu" if approximate == "none" else "gelu_tanh", (x,))


@differentiable("clamp", primitive=lambda x, min=None, max=None: Lazy.apply(
    "clamp", (x, -float("inf") if min is None else min, float("inf") if max is None else max), {}))
def clamp(x: Tensor, min: float | None = None, max: float | None = None) -> tuple[
        Tensor, Backward]:
    """``x`` limited to ``[min, max]``; the gradient passes where ``min <= x <= max``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-2.0, 0.5, 3.0]))
        >>> clamp(x, 0.0, 1.0).to_host()
        array([0. , 0.5, 1. ], dtype=float32)
    """
    bounds = (-float("inf") if min is None else float(min),
              float("inf") if max is None else float(max))
    return _ops.clamp(x, min, max), row_backward("clamp", (x, *bounds))


def _lazy_elementwise(name: str, *operands: Any, params: Sequence[float] = ()) -> Tensor:
    return Lazy.apply(name, (*operands, *params), {})


@differentiable("elementwise", primitive=_lazy_elementwise)
def elementwise(name: str, *operands: Operand, params: Sequence[float] = ()) -> tuple[
        Tensor, Backward]:
    """Row ``name`` of :data:`netcl.ops.ELEMENTWISE`, differentiated by its derivative row.

    Any row with a derivative (``softplus``, ``square``, ...) is differentiable this way, with
    no function of its own: the forward is :func:`netcl.ops.elementwise`, the backward the
    derivative row run as one generated kernel, and inside ``jit`` it fuses.

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0, 30.0]))
        >>> x.requires_grad = True
        >>> with ag.Tape() as tape:
        ...     y = ag.ops.sum(elementwise("softplus", x))
        >>> tape.backward(y)
        >>> x.grad.to_host().tolist()
        [0.5, 1.0]
    """
    out = _ops.elementwise(name, *operands, params=params)
    return out, row_backward(name, (*operands, *(float(p) for p in params)), out)


# -- binary -------------------------------------------------------------------------------------


@differentiable("add", primitive="add")
def add(a: Operand, b: Operand) -> tuple[Tensor, Backward]:
    """``a + b`` with broadcasting.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> a = Tensor.from_host(manager.default("cpu").queue, np.ones((2, 1)))
        >>> add(a, 2.0).to_host().tolist()
        [[3.0], [3.0]]
    """
    return _ops.add(a, b), row_backward("add", (a, b))


@differentiable("sub", primitive="sub")
def sub(a: Operand, b: Operand) -> tuple[Tensor, Backward]:
    """``a - b`` with broadcasting.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> a = Tensor.from_host(manager.default("cpu").queue, np.ones(2))
        >>> sub(1.5, a).to_host().tolist()
        [0.5, 0.5]
    """
    return _ops.sub(a, b), row_backward("sub", (a, b))


@differentiable("mul", primitive="mul")
def mul(a: Operand, b: Operand) -> tuple[Tensor, Backward]:
    """``a * b`` with broadcasting.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> a = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 2.0]))
        >>> mul(a, a).to_host().tolist()
        [1.0, 4.0]
    """
    return _ops.mul(a, b), row_backward("mul", (a, b))


@differentiable("div", primitive="div")
def div(a: Operand, b: Operand) -> tuple[Tensor, Backward]:
    """``a / b`` with broadcasting (floating-point).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> a = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 2.0]))
        >>> div(a, 4.0).to_host().tolist()
        [0.25, 0.5]
    """
    out = _ops.div(a, b)
    return out, row_backward("div", (a, b), out)


@differentiable("pow", primitive="pow")
def pow(a: Operand, b: Operand) -> tuple[Tensor, Backward]:
    """``a ** b`` with broadcasting (floating-point).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> a = Tensor.from_host(manager.default("cpu").queue, np.array([2.0, 3.0]))
        >>> pow(a, 2.0).to_host().tolist()
        [4.0, 9.0]
    """
    out = _ops.pow(a, b)
    return out, row_backward("pow", (a, b), out)


@differentiable("maximum", primitive="maximum")
def maximum(a: Operand, b: Operand) -> tuple[Tensor, Backward]:
    """Elementwise maximum (NaN wins); a tie splits the gradient, half to each (PyTorch).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> a = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 5.0]))
        >>> maximum(a, 2.0).to_host().tolist()
        [2.0, 5.0]
    """
    return _ops.maximum(a, b), row_backward("maximum", (a, b))


@differentiable("minimum", primitive="minimum")
def minimum(a: Operand, b: Operand) -> tuple[Tensor, Backward]:
    """Elementwise minimum (NaN wins); a tie splits the gradient, half to each (PyTorch).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> a = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 5.0]))
        >>> minimum(a, 2.0).to_host().tolist()
        [1.0, 2.0]
    """
    return _ops.minimum(a, b), row_backward("minimum", (a, b))


@differentiable("where")
def where(cond: Tensor, a: Operand, b: Operand) -> tuple[Tensor, Backward]:
    """``a`` where ``cond`` (uint8) is nonzero, else ``b``; broadcasting; ``cond`` gets no grad.

    Examples:
        >>> import numpy as np
        >>> import netcl.ops
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))
        >>> where(netcl.ops.gt(x, 0), x, 0.0).to_host().tolist()
        [0.0, 2.0]
    """
    out = _ops.where(cond, a, b)
    backward = row_backward("where", (cond, a, b))
    # the condition takes no gradient
    return out, lambda g, needs: backward(g, (False, *needs[1:]))


@differentiable("cast")
def cast(x: Tensor, dtype: str) -> tuple[Tensor, Backward]:
    """``x`` converted to ``dtype``; the gradient flows back (cast to ``x``'s dtype) between
    floating-point dtypes only.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.5]))
        >>> cast(x, "float64").dtype
        'float64'
    """
    out = _ops.cast(x, dtype)
    flows = x.dtype in FLOAT_DTYPES and out.dtype in FLOAT_DTYPES
    return out, lambda g, needs: (_ops.cast(g, x.dtype) if flows else None,)
