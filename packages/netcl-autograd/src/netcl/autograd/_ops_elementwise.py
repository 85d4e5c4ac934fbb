"""Differentiable elementwise ops: each forward (a ``netcl.ops`` call) beside its backward.

Binary ops broadcast; their gradients are summed back over the broadcast axes. Python numbers
may stand for either operand (they get no gradient). Inside ``compiler.jit`` these ops build
the fused expression instead of running (``primitive=``).

Kinks follow PyTorch: ``relu'(0) = 0``, ``abs'(0) = 0``, ``leaky_relu'(0) = negative_slope``,
``clamp`` passes the gradient where ``min <= x <= max``, and a tie of ``maximum(a, b)``
(``minimum``) sends half the gradient to each operand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import netcl.ops as _ops
from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.tensor import Tensor

from ._function import Grads, differentiable, unbroadcast
from ._fusion import primitive_vjp
from ._lazy import Lazy
from ._tape import Backward

__all__ = [
    "abs", "add", "cast", "clamp", "div", "elementwise", "exp", "gelu", "leaky_relu", "log",
    "maximum", "minimum", "mul", "neg", "pow", "reciprocal", "relu", "rsqrt", "sigmoid", "silu",
    "sqrt", "sub", "tanh", "where",
]

Operand = Tensor | float


def _shape(x: Any) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tensor) else ()


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
    return _ops.neg(x), lambda g, needs: (_ops.neg(g),)


@differentiable("abs", primitive="abs")
def abs(x: Tensor) -> tuple[Tensor, Backward]:
    """``|x|``; the gradient at 0 is 0.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> abs(Tensor.from_host(manager.default("cpu").queue, np.array([-3.0]))).to_host()
        array([3.], dtype=float32)
    """
    return _ops.abs(x), lambda g, needs: (_ops.mul(g, _ops.sign(x)),)


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
    return out, lambda g, needs: (_ops.mul(g, out),)


@differentiable("log", primitive="log")
def log(x: Tensor) -> tuple[Tensor, Backward]:
    """Natural logarithm.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> log(Tensor.from_host(manager.default("cpu").queue, np.ones(1))).to_host()
        array([0.], dtype=float32)
    """
    return _ops.log(x), lambda g, needs: (_ops.div(g, x),)


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
    return out, lambda g, needs: (_ops.mul(_ops.div(g, out), 0.5),)


@differentiable("rsqrt")
def rsqrt(x: Tensor) -> tuple[Tensor, Backward]:
    """``1 / sqrt(x)``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> rsqrt(Tensor.from_host(manager.default("cpu").queue, np.array([4.0]))).to_host()
        array([0.5], dtype=float32)
    """
    out = _ops.rsqrt(x)
    # d/dx x^(-1/2) = -0.5 * out^3
    return out, lambda g, needs: (_ops.mul(_ops.mul(g, _ops.mul(out, _ops.mul(out, out))),
                                           -0.5),)


@differentiable("reciprocal")
def reciprocal(x: Tensor) -> tuple[Tensor, Backward]:
    """``1 / x``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> reciprocal(Tensor.from_host(manager.default("cpu").queue, np.array([4.0]))).to_host()
        array([0.25], dtype=float32)
    """
    out = _ops.reciprocal(x)
    return out, lambda g, needs: (_ops.neg(_ops.mul(g, _ops.mul(out, out))),)


@differentiable("relu", primitive="relu")
def relu(x: Tensor) -> tuple[Tensor, Backward]:
    """``max(x, 0)``; the gradient at 0 is 0 (PyTorch's convention).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> relu(Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))).to_host()
        array([0., 2.], dtype=float32)
    """
    return _ops.relu(x), lambda g, needs: (_ops.where(_ops.gt(x, 0), g, 0.0),)


@differentiable("leaky_relu")
def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> tuple[Tensor, Backward]:
    """``x`` where ``x > 0``, else ``negative_slope * x``; the gradient at 0 is the slope.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-2.0, 3.0]))
        >>> leaky_relu(x, 0.5).to_host()
        array([-1.,  3.], dtype=float32)
    """
    out = _ops.leaky_relu(x, negative_slope)
    slope = float(negative_slope)
    return out, lambda g, needs: (_ops.where(_ops.gt(x, 0), g, _ops.mul(g, slope)),)


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
    return out, lambda g, needs: (_ops.mul(g, _ops.mul(out, _ops.sub(1.0, out))),)


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
    return out, lambda g, needs: (_ops.mul(g, _ops.sub(1.0, _ops.mul(out, out))),)


@differentiable("silu", primitive="silu")
def silu(x: Tensor) -> tuple[Tensor, Backward]:
    """``x * sigmoid(x)``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> silu(Tensor.from_host(manager.default("cpu").queue, np.zeros(1))).to_host()
        array([0.], dtype=float32)
    """

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        s = _ops.sigmoid(x)  # d/dx = s * (1 + x * (1 - s))
        return (_ops.mul(g, _ops.mul(s, _ops.add(_ops.mul(x, _ops.sub(1.0, s)), 1.0))),)

    return _ops.silu(x), backward


def _lazy_gelu(x: Any, approximate: str = "none") -> Tensor:
    return Lazy.apply("gelu" if approximate == "none" else "gelu_tanh", (x,), {})


@differentiable("gelu", primitive=_lazy_gelu)
def gelu(x: Tensor, approximate: str = "none") -> tuple[Tensor, Backward]:
    """GELU with the exact normal CDF, or its tanh form (``approximate="tanh"``).

    The backward needs erf, which ``netcl.ops`` has no op for: it runs the derivative of the
    compiler's ``gelu`` primitive as one generated kernel.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0, 1.0]))
        >>> np.round(gelu(x).to_host().astype(float), 4).tolist()
        [0.0, 0.8413]
    """
    out = _ops.gelu(x, approximate=approximate)
    name = "gelu" if approximate == "none" else "gelu_tanh"
    return out, lambda g, needs: primitive_vjp(name, (x,), g)


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
    out = _ops.clamp(x, min, max)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        masks = []
        if min is not None:
            masks.append(_ops.ge(x, min))
        if max is not None:
            masks.append(_ops.le(x, max))
        inside = masks[0] if len(masks) == 1 else _ops.mul(masks[0], masks[1])
        return (_ops.where(inside, g, 0.0),)

    return out, backward


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
    arguments = (*operands, *(float(p) for p in params))
    return out, lambda g, needs: primitive_vjp(name, arguments, g)


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

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        ga = unbroadcast(g, _shape(a)) if _wants(a, b, needs, 0) else None
        gb = unbroadcast(g, _shape(b)) if _wants(a, b, needs, 1) else None
        return _per_tensor(a, b, ga, gb)

    return _ops.add(a, b), backward


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

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        ga = unbroadcast(g, _shape(a)) if _wants(a, b, needs, 0) else None
        gb = unbroadcast(_ops.neg(g), _shape(b)) if _wants(a, b, needs, 1) else None
        return _per_tensor(a, b, ga, gb)

    return _ops.sub(a, b), backward


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

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        ga = unbroadcast(_ops.mul(g, b), _shape(a), needs[0]) if _wants(a, b, needs, 0) else None
        gb = unbroadcast(_ops.mul(g, a), _shape(b), needs[-1]) if _wants(a, b, needs, 1) else None
        return _per_tensor(a, b, ga, gb)

    return _ops.mul(a, b), backward


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

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        ga = unbroadcast(_ops.div(g, b), _shape(a), needs[0]) if _wants(a, b, needs, 0) else None
        gb = None
        if _wants(a, b, needs, 1):
            gb = unbroadcast(_ops.neg(_ops.div(_ops.mul(g, out), b)), _shape(b), True)
        return _per_tensor(a, b, ga, gb)

    return out, backward


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

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        ga = gb = None
        if _wants(a, b, needs, 0):  # b * a^(b-1)
            bm1 = _ops.sub(b, 1.0) if isinstance(b, Tensor) else float(b) - 1.0
            ga = unbroadcast(_ops.mul(g, _ops.mul(b, _ops.pow(a, bm1))), _shape(a), True)
        if _wants(a, b, needs, 1):  # a^b * log(a)
            la = _ops.log(a) if isinstance(a, Tensor) else _log_scalar(a)
            gb = unbroadcast(_ops.mul(g, _ops.mul(out, la)), _shape(b), True)
        return _per_tensor(a, b, ga, gb)

    return out, backward


def _log_scalar(a: Any) -> float:
    import math

    return math.log(a) if a > 0 else float("nan")


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
    return _ops.maximum(a, b), lambda g, needs: _tie_grads(a, b, g, needs, _ops.lt, _ops.gt)


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
    return _ops.minimum(a, b), lambda g, needs: _tie_grads(a, b, g, needs, _ops.gt, _ops.lt)


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

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        k = 1
        ga = gb = None
        if isinstance(a, Tensor):
            if needs[k]:
                ga = unbroadcast(_ops.where(cond, g, 0.0), a.shape)
            k += 1
        if isinstance(b, Tensor) and needs[k]:
            gb = unbroadcast(_ops.where(cond, 0.0, g), b.shape)
        return (None, *_per_tensor(a, b, ga, gb))

    return _ops.where(cond, a, b), backward


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


# -- helpers ----------------------------------------------------------------------------------


def _wants(a: Any, b: Any, needs: tuple[bool, ...], which: int) -> bool:
    """Whether operand ``which`` (0: a, 1: b) is a Tensor that needs a gradient."""
    operand = a if which == 0 else b
    if not isinstance(operand, Tensor):
        return False
    index = 1 if which == 1 and isinstance(a, Tensor) else 0
    return needs[index]


def _per_tensor(a: Any, b: Any, ga: Tensor | None, gb: Tensor | None) -> tuple[
        Tensor | None, ...]:
    """Gradients for the Tensor operands only, in order (numbers take no slot)."""
    out: list[Tensor | None] = []
    if isinstance(a, Tensor):
        out.append(ga)
    if isinstance(b, Tensor):
        out.append(gb)
    return tuple(out)


def _tie_grads(a: Any, b: Any, g: Tensor, needs: tuple[bool, ...],
               a_loses: Callable[[Any, Any], Tensor], b_loses: Callable[[Any, Any], Tensor]
               ) -> Grads:
    """PyTorch's maximum/minimum derivative: ``g / 2`` where ``a == b``, else ``g``, zeroed
    where the operand loses (``a_loses(a, b)``: ``a < b`` for maximum). With a NaN neither
    loses nor ties, so both operands get ``g``, as in PyTorch."""
    shared = _ops.where(_ops.eq(a, b), _ops.mul(g, 0.5), g)
    ga = gb = None
    if _wants(a, b, needs, 0):
        ga = unbroadcast(_ops.where(a_loses(a, b), 0.0, shared), _shape(a), True)
    if _wants(a, b, needs, 1):
        gb = unbroadcast(_ops.where(b_loses(a, b), 0.0, shared), _shape(b), True)
    return _per_tensor(a, b, ga, gb)
