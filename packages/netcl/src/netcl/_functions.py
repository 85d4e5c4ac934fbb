"""PyTorch's free functions on tensors for the root namespace: ``netcl.max(x, 1)``,
``netcl.cat([a, b], dim=1)``, ``netcl.sum(pred == y)``, ...

Each is the Tensor method of the same name (so it records under autograd like the method),
or the differentiable op of :mod:`netcl.autograd.ops` for those that take several tensors.
``max``/``min`` with ``dim`` return ``(values, indices)`` as PyTorch does.

Examples:
    >>> import netcl
    >>> x = netcl.tensor([[1.0, 5.0], [7.0, 2.0]], device="cpu")
    >>> values, indices = netcl.max(x, 1)
    >>> values.tolist(), indices.tolist(), netcl.sum(x > 1.5).item()
    ([5.0, 7.0], [1, 0], 3)
    >>> netcl.cat([x, x], dim=1).shape, netcl.stack([x, x]).shape
    ((2, 4), (2, 2, 2))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import netcl.autograd.ops as agops
from netcl.core.tensor import Tensor

__all__ = [
    "abs", "argmax", "argmin", "cat", "clamp", "exp", "flatten", "is_tensor", "log", "max",
    "maximum", "mean", "min", "minimum", "numel", "reshape", "sigmoid", "sqrt", "stack", "sum",
    "tanh", "where",
]


def max(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """``input.max(dim, keepdim)``: a 0-d tensor, or ``(values, indices)`` with ``dim``."""
    return input.max(dim, keepdim)


def min(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """``input.min(dim, keepdim)``: a 0-d tensor, or ``(values, indices)`` with ``dim``."""
    return input.min(dim, keepdim)


def sum(input: Tensor, dim: int | Sequence[int] | None = None,
        keepdim: bool = False) -> Tensor:
    """``input.sum(dim, keepdim)`` (an integer or uint8 tensor sums to int64)."""
    return input.sum(dim, keepdim)


def mean(input: Tensor, dim: int | Sequence[int] | None = None,
         keepdim: bool = False) -> Tensor:
    """``input.mean(dim, keepdim)``."""
    return input.mean(dim, keepdim)


def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """``input.argmax(dim, keepdim)``."""
    return input.argmax(dim, keepdim)


def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:
    """``input.argmin(dim, keepdim)``."""
    return input.argmin(dim, keepdim)


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors joined along ``dim`` (recorded under autograd)."""
    return agops.concat(list(tensors), dim)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors stacked along a new ``dim`` (recorded under autograd)."""
    return agops.stack(list(tensors), dim)


def where(condition: Tensor, input: Any, other: Any) -> Tensor:
    """``input`` where ``condition`` is nonzero, else ``other`` (recorded under autograd)."""
    return agops.where(condition, input, other)


def abs(input: Tensor) -> Tensor:
    """``|input|``."""
    return input.abs()


def exp(input: Tensor) -> Tensor:
    """``e ** input``."""
    return input.exp()


def log(input: Tensor) -> Tensor:
    """Natural logarithm."""
    return input.log()


def sqrt(input: Tensor) -> Tensor:
    """Square root."""
    return input.sqrt()


def sigmoid(input: Tensor) -> Tensor:
    """``1 / (1 + exp(-input))``."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return input.tanh()


def clamp(input: Tensor, min: float | None = None,
          max: float | None = None) -> Tensor:
    """Each element limited to ``[min, max]``."""
    return input.clamp(min, max)


def maximum(input: Tensor, other: Any) -> Tensor:
    """Elementwise maximum."""
    return input.maximum(other)


def minimum(input: Tensor, other: Any) -> Tensor:
    """Elementwise minimum."""
    return input.minimum(other)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Dims ``start_dim..end_dim`` merged into one (a view)."""
    return input.flatten(start_dim, end_dim)


def reshape(input: Tensor, shape: Sequence[int]) -> Tensor:
    """A view with ``shape`` (one entry may be -1)."""
    return input.reshape(tuple(shape))


def numel(input: Tensor) -> int:
    """The number of elements."""
    return input.numel()


def is_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a netcl Tensor."""
    return isinstance(obj, Tensor)
