"""Differentiable reductions and softmax: sum, mean, max, min, var, softmax, log_softmax,
nll_gather.

``max``/``min`` send the gradient of each reduced slice to its *first* extreme element in
row-major order over the reduced axes (the element ``argmax`` picks), as PyTorch does for
``max(dim)``; other tied elements get 0.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import netcl.ops as _ops
from netcl.core.tensor import Tensor, reshape

from ._function import Grads, differentiable
from ._tape import Backward

__all__ = ["log_softmax", "max", "mean", "min", "nll_gather", "softmax", "sum", "var"]

Axis = int | Sequence[int] | None


def _axes(axis: Axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    items = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(a % builtins.max(ndim, 1) for a in items))


def _kept_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(1 if k in axes else d for k, d in enumerate(shape))


def _expand(g: Tensor, x: Tensor, axes: tuple[int, ...]) -> Tensor:
    """``g`` (reduced over ``axes``, with or without keepdims) broadcast back to ``x.shape``."""
    return _ops.broadcast_to(reshape(g, _kept_shape(x.shape, axes)), x.shape)


@differentiable("sum")
def sum(x: Tensor, axis: Axis = None, keepdims: bool = False) -> tuple[Tensor, Backward]:
    """Sum over ``axis`` (all axes for ``None``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((2, 3)))
        >>> sum(x, axis=1).to_host().tolist()
        [3.0, 3.0]
    """
    out = _ops.sum(x, axis=axis, keepdims=keepdims)
    axes = _axes(axis, x.ndim)
    return out, lambda g, needs: (_expand(g, x, axes),)


@differentiable("mean")
def mean(x: Tensor, axis: Axis = None, keepdims: bool = False) -> tuple[Tensor, Backward]:
    """Mean over ``axis`` (all axes for ``None``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(4.0))
        >>> mean(x).to_host().tolist()
        1.5
    """
    out = _ops.mean(x, axis=axis, keepdims=keepdims)
    axes = _axes(axis, x.ndim)
    count = math.prod(x.shape[a] for a in axes)
    return out, lambda g, needs: (_ops.mul(_expand(g, x, axes), 1.0 / builtins.max(count, 1)),)


def _first_extreme_grad(x: Tensor, g: Tensor, axes: tuple[int, ...], largest: bool) -> Tensor:
    """``g`` placed at the first max (min) of each slice of ``x`` over ``axes``, zeros elsewhere.

    The reduced axes are moved last and merged, so one ``argmax`` finds the first extreme in
    row-major order over them.
    """
    rest = [k for k in range(x.ndim) if k not in axes]
    order = rest + list(axes)
    moved = _ops.permute(x, order) if order != list(range(x.ndim)) else x
    outer = tuple(x.shape[k] for k in rest)
    count = math.prod(x.shape[k] for k in axes)
    flat = reshape(moved, (*outer, count))
    pick = _ops.argmax(flat if largest else _ops.neg(flat), axis=-1)
    hot = _ops.one_hot(pick, count, dtype=x.dtype)
    spread = _ops.mul(hot, reshape(g, (*outer, 1)))
    back = reshape(spread, tuple(x.shape[k] for k in order))
    if order == list(range(x.ndim)):
        return back
    inverse = [order.index(k) for k in range(x.ndim)]
    return _ops.permute(back, inverse)


@differentiable("max")
def max(x: Tensor, axis: Axis = None, keepdims: bool = False) -> tuple[Tensor, Backward]:
    """Maximum over ``axis``; the gradient goes to the first maximum (ties: see module doc).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[1.0, 3.0], [2.0, 0.0]]))
        >>> max(x, axis=1).to_host().tolist()
        [3.0, 2.0]
    """
    axes = _axes(axis, x.ndim)
    out = _ops.max(x, axis=axis, keepdims=keepdims)
    return out, lambda g, needs: (_first_extreme_grad(x, g, axes, True),)


@differentiable("min")
def min(x: Tensor, axis: Axis = None, keepdims: bool = False) -> tuple[Tensor, Backward]:
    """Minimum over ``axis``; the gradient goes to the first minimum.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[1.0, 3.0], [2.0, 0.0]]))
        >>> min(x, axis=1).to_host().tolist()
        [1.0, 0.0]
    """
    axes = _axes(axis, x.ndim)
    out = _ops.min(x, axis=axis, keepdims=keepdims)
    return out, lambda g, needs: (_first_extreme_grad(x, g, axes, False),)


@differentiable("var")
def var(x: Tensor, axis: Axis = None, keepdims: bool = False, correction: int = 1) -> tuple[
        Tensor, Backward]:
    """Variance over ``axis``: squared deviations summed / (N - ``correction``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 2.0, 3.0, 4.0]))
        >>> var(x, correction=0).to_host().tolist()
        1.25
    """
    out = _ops.var(x, axis=axis, keepdims=keepdims, correction=correction)
    axes = _axes(axis, x.ndim)
    count = math.prod(x.shape[a] for a in axes)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        centered = _ops.sub(x, _ops.mean(x, axis=axes, keepdims=True))
        scale = 2.0 / (count - correction) if count != correction else math.inf
        return (_ops.mul(_ops.mul(centered, _expand(g, x, axes)), scale),)

    return out, backward


@differentiable("softmax")
def softmax(x: Tensor, axis: int = -1) -> tuple[Tensor, Backward]:
    """Softmax along ``axis``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((1, 2)))
        >>> softmax(x).to_host().tolist()
        [[0.5, 0.5]]
    """
    y = _ops.softmax(x, axis=axis)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        dot = _ops.sum(_ops.mul(g, y), axis=axis, keepdims=True)
        return (_ops.mul(y, _ops.sub(g, dot)),)

    return y, backward


@differentiable("log_softmax")
def log_softmax(x: Tensor, axis: int = -1) -> tuple[Tensor, Backward]:
    """Log of the softmax along ``axis``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((1, 2)))
        >>> np.round(log_softmax(x).to_host().astype(float), 4).tolist()
        [[-0.6931, -0.6931]]
    """
    y = _ops.log_softmax(x, axis=axis)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        total = _ops.sum(g, axis=axis, keepdims=True)
        return (_ops.sub(g, _ops.mul(_ops.exp(y), total)),)

    return y, backward


@differentiable("nll_gather")
def nll_gather(logp: Tensor, labels: Tensor, ignore_index: int = -100) -> tuple[
        Tensor, Backward]:
    """``-logp[i, labels[i]]`` per row of the (N, C) ``logp`` (0 where ``ignore_index``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> logp = Tensor.from_host(q, np.log(np.array([[0.5, 0.5], [0.25, 0.75]])))
        >>> y = Tensor.from_host(q, np.array([1, -100]))
        >>> np.round(nll_gather(logp, y).to_host().astype(float), 4).tolist()
        [0.6931, 0.0]
    """
    out = _ops.nll_gather(logp, labels, ignore_index=ignore_index)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        valid = _ops.ne(labels, ignore_index)
        safe = _ops.where(valid, labels, 0)
        hot = _ops.one_hot(safe, logp.shape[1], dtype=logp.dtype)
        weight = reshape(_ops.mul(g, valid), (logp.shape[0], 1))
        return (_ops.neg(_ops.mul(hot, weight)), None)

    return out, backward
