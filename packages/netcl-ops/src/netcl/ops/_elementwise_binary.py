"""Binary elementwise ops, comparisons, ``where`` and ``cast``.

Operands broadcast as in NumPy and may be Python numbers (passed to kernels by value, never
uploaded). The rows these functions run are in :data:`netcl.ops.ELEMENTWISE`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from netcl.core.dtypes import canonical_dtype
from netcl.core.shapes import contiguous_strides
from netcl.core.tensor import Tensor

from ._common import check_tensor, empty
from ._dtype_policy import SCALAR_FLOAT, np_compute, scalar_kind
from ._elementwise_base import Strided
from ._elementwise_dispatch import apply, cast_compute, copy_strided, host, np_result

__all__ = [
    "add",
    "cast",
    "div",
    "elementwise_binary",
    "eq",
    "ge",
    "gt",
    "le",
    "lt",
    "maximum",
    "minimum",
    "mul",
    "ne",
    "pow",
    "sub",
    "where",
]

Operand = Tensor | int | float

BINARY_OPS = ("add", "sub", "mul", "div", "max", "min", "pow")
_ROW = {"max": "maximum", "min": "minimum"}  # elementwise_binary's short names


def elementwise_binary(a: Operand, b: Operand, op: str = "add") -> Tensor:
    """``op`` of ``a`` and ``b`` broadcast together; ``op`` is one of :data:`BINARY_OPS`.

    Either operand may be a Python number (at least one must be a Tensor).

    Raises:
        ValueError: unknown ``op``, shapes that do not broadcast, tensors on different devices.
        TypeError: ``div``/``pow`` dtype rules (``pow`` needs a float result).

    Examples:
        >>> from netcl.core.device import manager
        >>> a = Tensor.from_host(manager.default("cpu").queue, np.array([[1.0], [2.0]]))
        >>> elementwise_binary(a, np.float32(10), "mul").to_host().tolist()
        [[10.0], [20.0]]
    """
    if op not in BINARY_OPS:
        raise ValueError(f"elementwise_binary: op must be one of {', '.join(BINARY_OPS)}, "
                         f"got {op!r}")
    return apply(_ROW.get(op, op), [a, b])


def add(a: Operand, b: Operand) -> Tensor:
    """``a + b``, broadcasting.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> add(Tensor.from_host(q, np.array([1.0, 2.0])), 1).to_host().tolist()
        [2.0, 3.0]
    """
    return apply("add", [a, b])


def sub(a: Operand, b: Operand) -> Tensor:
    """``a - b``, broadcasting.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> sub(10, Tensor.from_host(q, np.array([1.0, 2.0]))).to_host().tolist()
        [9.0, 8.0]
    """
    return apply("sub", [a, b])


def mul(a: Operand, b: Operand) -> Tensor:
    """``a * b``, broadcasting.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> mul(Tensor.from_host(q, np.array([1.0, 2.0])), 3).to_host().tolist()
        [3.0, 6.0]
    """
    return apply("mul", [a, b])


def div(a: Operand, b: Operand) -> Tensor:
    """True division ``a / b``, broadcasting; integer operands give float32.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([1, 3], dtype=np.int32))
        >>> y = div(x, 2)
        >>> y.dtype, y.to_host().tolist()
        ('float32', [0.5, 1.5])
    """
    return apply("div", [a, b])


def maximum(a: Operand, b: Operand) -> Tensor:
    """Elementwise maximum, broadcasting; NaN wins, as in NumPy.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> maximum(Tensor.from_host(q, np.array([1.0, 5.0])), 2).to_host().tolist()
        [2.0, 5.0]
    """
    return apply("maximum", [a, b])


def minimum(a: Operand, b: Operand) -> Tensor:
    """Elementwise minimum, broadcasting; NaN wins, as in NumPy.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> minimum(Tensor.from_host(q, np.array([1.0, 5.0])), 2).to_host().tolist()
        [1.0, 2.0]
    """
    return apply("minimum", [a, b])


def pow(a: Operand, b: Operand) -> Tensor:
    """``a ** b``, broadcasting; the result must be floating point (``TypeError`` for ints).

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> pow(Tensor.from_host(q, np.array([2.0, 3.0])), 2).to_host().tolist()
        [4.0, 9.0]
    """
    return apply("pow", [a, b])


def eq(a: Operand, b: Operand) -> Tensor:
    """``a == b`` as a uint8 0/1 tensor, broadcasting.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> eq(Tensor.from_host(q, np.array([1.0, 2.0])), 2).to_host().tolist()
        [0, 1]
    """
    return apply("eq", [a, b])


def ne(a: Operand, b: Operand) -> Tensor:
    """``a != b`` as a uint8 0/1 tensor, broadcasting (NaN != NaN is 1).

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> ne(Tensor.from_host(q, np.array([1.0, 2.0])), 2).to_host().tolist()
        [1, 0]
    """
    return apply("ne", [a, b])


def lt(a: Operand, b: Operand) -> Tensor:
    """``a < b`` as a uint8 0/1 tensor, broadcasting.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> lt(Tensor.from_host(q, np.array([1.0, 2.0])), 2).to_host().tolist()
        [1, 0]
    """
    return apply("lt", [a, b])


def le(a: Operand, b: Operand) -> Tensor:
    """``a <= b`` as a uint8 0/1 tensor, broadcasting.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> le(Tensor.from_host(q, np.array([1.0, 3.0])), 2).to_host().tolist()
        [1, 0]
    """
    return apply("le", [a, b])


def gt(a: Operand, b: Operand) -> Tensor:
    """``a > b`` as a uint8 0/1 tensor, broadcasting.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> gt(Tensor.from_host(q, np.array([1.0, 3.0])), 2).to_host().tolist()
        [0, 1]
    """
    return apply("gt", [a, b])


def ge(a: Operand, b: Operand) -> Tensor:
    """``a >= b`` as a uint8 0/1 tensor, broadcasting.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> ge(Tensor.from_host(q, np.array([1.0, 2.0])), 2).to_host().tolist()
        [0, 1]
    """
    return apply("ge", [a, b])


def where(cond: Tensor, a: Operand, b: Operand) -> Tensor:
    """``a`` where ``cond`` is nonzero, else ``b``; all three broadcast together.

    ``cond`` is a uint8 tensor (what comparisons return; NumPy bool arrays upload as uint8).
    The result dtype comes from ``a`` and ``b`` alone; two Python numbers give float32 if either
    is a float, else int64.

    Raises:
        TypeError: ``cond`` is not a uint8 Tensor.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([-1.0, 2.0]))
        >>> where(gt(x, 0), x, 0.0).to_host().tolist()
        [0.0, 2.0]
    """
    cond = check_tensor("where", cond, "cond")
    if cond.dtype != "uint8":
        raise TypeError(f"where: cond must be a uint8 (0/1) tensor such as a comparison "
                        f"returns, got {cond.dtype}; build it with ne(cond, 0)")
    kinds = [o.dtype if isinstance(o, Tensor) else scalar_kind("where", o) for o in (a, b)]
    if not any(isinstance(o, Tensor) for o in (a, b)):
        kinds.append("float32" if SCALAR_FLOAT in kinds else "int64")
    return apply("where", [cond, a, b], kinds=kinds)


def cast(x: Tensor, dtype: Any) -> Tensor:
    """A new tensor with ``x``'s values converted to ``dtype`` (always a copy).

    Float -> int truncates toward zero; NaN, infinities and values outside the target range
    give undefined results (as in C and NumPy). Integer -> narrower integer wraps.

    Raises:
        ValueError: unsupported ``dtype``.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.7, -2.5]))
        >>> cast(x, "int32").to_host().tolist()
        [1, -2]
    """
    x = check_tensor("cast", x)
    target = canonical_dtype(dtype, "cast")
    if x.array is not None:
        ct = np_compute(cast_compute(x.dtype, target))
        return np_result(x, target, _cast_np, host(x), ct, np.dtype(target))
    out = empty(x.queue, x.shape, target)
    strides = contiguous_strides(x.shape)
    copy_strided(x.shape, Strided(out, strides, 0), Strided(x, strides, x.offset))
    return out


def _cast_np(a: Any, ct: np.dtype[Any], target: np.dtype[Any]) -> Any:
    return np.array(a.astype(ct), dtype=target)
