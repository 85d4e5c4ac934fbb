"""Differentiable movement and indexing ops: views, permute/transpose, indexing and slicing,
concat/stack/pad/broadcast_to, gather/index_select/embedding, dropout.

Backward rules stay on the device: a slice's gradient is padded back (step 1) or spread with a
one-hot matrix product (other steps); gathers scatter-add through ``one_hot`` + ``matmul``/
``sum`` (``netcl.ops`` has no scatter op), which costs memory proportional to
``index size x axis length``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import netcl.ops as _ops
from netcl.core.tensor import Tensor
from netcl.core.tensor import reshape as _reshape

from ._function import Grads, differentiable, sum_to_shape
from ._tape import Backward

__all__ = [
    "broadcast_to", "concat", "contiguous", "copy", "dropout", "embedding", "flatten", "gather",
    "getitem", "index_select", "pad", "permute", "reshape", "slice", "squeeze", "stack",
    "transpose", "unsqueeze", "view",
]

_slice = builtins.slice


def _back_to(x: Tensor) -> Backward:
    return lambda g, needs: (_reshape(g, x.shape),)


@differentiable("reshape")
def reshape(x: Tensor, shape: int | Sequence[int]) -> tuple[Tensor, Backward]:
    """A view of ``x`` with ``shape`` (one entry may be -1).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(6.0))
        >>> reshape(x, (2, -1)).shape
        (2, 3)
    """
    return _ops.view(x, shape), _back_to(x)


@differentiable("view")
def view(x: Tensor, shape: int | Sequence[int]) -> tuple[Tensor, Backward]:
    """Same as :func:`reshape` (PyTorch's name).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> view(Tensor.from_host(manager.default("cpu").queue, np.arange(6.0)), (3, 2)).shape
        (3, 2)
    """
    return _ops.view(x, shape), _back_to(x)


@differentiable("flatten")
def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> tuple[Tensor, Backward]:
    """A view merging dims ``start_dim..end_dim``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> flatten(Tensor.from_host(manager.default("cpu").queue, np.zeros((2, 3, 4))), 1).shape
        (2, 12)
    """
    return _ops.flatten(x, start_dim, end_dim), _back_to(x)


@differentiable("squeeze")
def squeeze(x: Tensor, axis: int | Sequence[int] | None = None) -> tuple[Tensor, Backward]:
    """A view without size-1 dims.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> squeeze(Tensor.from_host(manager.default("cpu").queue, np.zeros((2, 1)))).shape
        (2,)
    """
    return _ops.squeeze(x, axis), _back_to(x)


@differentiable("unsqueeze")
def unsqueeze(x: Tensor, axis: int) -> tuple[Tensor, Backward]:
    """A view with a new size-1 dim at ``axis``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> unsqueeze(Tensor.from_host(manager.default("cpu").queue, np.zeros(2)), 0).shape
        (1, 2)
    """
    return _ops.unsqueeze(x, axis), _back_to(x)


@differentiable("copy")
def copy(x: Tensor) -> tuple[Tensor, Backward]:
    """A new tensor with the values of ``x``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> copy(Tensor.from_host(manager.default("cpu").queue, np.ones(2))).to_host().tolist()
        [1.0, 1.0]
    """
    return _ops.copy(x), lambda g, needs: (g,)


@differentiable("contiguous")
def contiguous(x: Tensor) -> tuple[Tensor, Backward]:
    """``x`` starting at element 0 of its storage (a copy only when it does not).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> contiguous(Tensor.from_host(manager.default("cpu").queue, np.ones(2))).shape
        (2,)
    """
    return _ops.contiguous(x), lambda g, needs: (g,)


@differentiable("permute")
def permute(x: Tensor, dims: Sequence[int]) -> tuple[Tensor, Backward]:
    """Axes reordered: output axis ``k`` is input axis ``dims[k]``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> permute(Tensor.from_host(manager.default("cpu").queue, np.zeros((2, 3))), (1, 0)).shape
        (3, 2)
    """
    out = _ops.permute(x, dims)
    order = [d % x.ndim for d in dims]
    inverse = [order.index(k) for k in range(x.ndim)]
    return out, lambda g, needs: (_ops.permute(g, inverse),)


@differentiable("transpose")
def transpose(x: Tensor, dim0: int = -2, dim1: int = -1) -> tuple[Tensor, Backward]:
    """Axes ``dim0`` and ``dim1`` swapped.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> transpose(Tensor.from_host(manager.default("cpu").queue, np.zeros((2, 3)))).shape
        (3, 2)
    """
    return _ops.transpose(x, dim0, dim1), lambda g, needs: (_ops.transpose(g, dim0, dim1),)


# -- indexing -----------------------------------------------------------------------------------


def _plan(shape: tuple[int, ...], key: Any) -> list[tuple[str, int, int, int]]:
    """Per item of the normalized ``key``: ("new",..) for None, ("int", i, 0, 0), or
    ("slice", start, step, count) for every input axis."""
    items = list(key) if isinstance(key, tuple) else [key]
    if any(i is Ellipsis for i in items):
        at = items.index(Ellipsis)
        used = builtins.sum(1 for i in items if i is not None and i is not Ellipsis)
        items[at:at + 1] = [_slice(None)] * (len(shape) - used)
    used = builtins.sum(1 for i in items if i is not None)
    items += [_slice(None)] * (len(shape) - used)
    plan: list[tuple[str, int, int, int]] = []
    axis = 0
    for item in items:
        if item is None:
            plan.append(("new", 0, 0, 0))
            continue
        size = shape[axis]
        if isinstance(item, _slice):
            start, stop, step = item.indices(size)
            plan.append(("slice", start, step, len(range(start, stop, step))))
        else:
            plan.append(("int", int(item) % size, 0, 0))
        axis += 1
    return plan


def _index_grad(g: Tensor, x: Tensor, plan: list[tuple[str, int, int, int]]) -> Tensor:
    """The gradient of ``x[key]`` given the gradient ``g`` of the result."""
    if g.size == 0 or x.size == 0:
        return _ops.zeros(x.queue, x.shape, x.dtype)
    # 1. Back to x's rank: drop the None axes, restore the int axes with size 1.
    dims: list[int] = []
    gi = 0
    for kind, _, _, _ in plan:
        if kind == "new":
            gi += 1
        elif kind == "int":
            dims.append(1)
        else:
            dims.append(g.shape[gi])
            gi += 1
    g = _reshape(g, tuple(dims))
    # 2. Spread strided axes with a one-hot product; pad the unit-stride ones.
    pads: list[int] = []
    axis = 0
    for kind, start, step, _ in plan:
        if kind == "new":
            continue
        size = x.shape[axis]
        if kind == "int" or step == 1:
            width = g.shape[axis]
            pads = [start, size - start - width, *pads]
        else:
            g = _spread(g, axis, start, step, size)
            pads = [0, 0, *pads]
        axis += 1
    return _ops.pad(g, pads) if any(pads) else g


def _spread(g: Tensor, axis: int, start: int, step: int, size: int) -> Tensor:
    """Along ``axis``: entry k of ``g`` goes to position ``start + k * step`` of ``size``."""
    count = g.shape[axis]
    idx = _ops.arange(g.queue, start, start + count * step, step, dtype="int64")
    hot = _ops.one_hot(idx, size, dtype=g.dtype)  # (count, size)
    return _along(g, axis, hot)


def _along(g: Tensor, axis: int, matrix: Tensor) -> Tensor:
    """``g`` with its ``axis`` multiplied by ``matrix`` (K, size): that axis becomes size."""
    if g.ndim == 1:
        return _reshape(_ops.matmul(_reshape(g, (1, g.shape[0])), matrix), (matrix.shape[1],))
    last = axis == g.ndim - 1
    moved = g if last else _ops.transpose(g, axis, -1)
    out = _ops.matmul(moved, matrix)
    return out if last else _ops.transpose(out, axis, -1)


@differentiable("getitem")
def getitem(x: Tensor, key: Any) -> tuple[Tensor, Backward]:
    """``x[key]`` for ints, slices (any step), Ellipsis and None.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(12.0).reshape(3, 4))
        >>> getitem(x, np.s_[::2, 1]).to_host().tolist()
        [1.0, 9.0]
    """
    out = _ops.getitem(x, key)
    plan = _plan(x.shape, key)
    return out, lambda g, needs: (_index_grad(g, x, plan),)


@differentiable("slice")
def slice(x: Tensor, starts: Sequence[int | None], stops: Sequence[int | None],
          steps: Sequence[int | None] | None = None,
          axes: Sequence[int] | None = None) -> tuple[Tensor, Backward]:
    """``x[starts[k]:stops[k]:steps[k]]`` along ``axes[k]`` (default: the leading axes).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(10.0))
        >>> slice(x, [1], [None], [3]).to_host().tolist()
        [1.0, 4.0, 7.0]
    """
    out = _ops.slice(x, starts, stops, steps, axes)
    key: list[Any] = [_slice(None)] * x.ndim
    steps_ = [None] * len(starts) if steps is None else list(steps)
    for k, a in enumerate(range(len(starts)) if axes is None else axes):
        key[a % x.ndim] = _slice(starts[k], stops[k], steps_[k])
    plan = _plan(x.shape, tuple(key))
    return out, lambda g, needs: (_index_grad(g, x, plan),)


@differentiable("concat")
def concat(tensors: Sequence[Tensor], axis: int = 0) -> tuple[Tensor, Backward]:
    """Join tensors along ``axis``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> concat([Tensor.from_host(q, np.zeros(1)), Tensor.from_host(q, np.ones(2))]).shape
        (3,)
    """
    ts = list(tensors)
    out = _ops.concat(ts, axis=axis)
    ax = axis % out.ndim

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        grads: list[Tensor | None] = []
        at = 0
        for t, need in zip(ts, needs):
            width = t.shape[ax]
            grads.append(_ops.slice(g, [at], [at + width], axes=[ax]) if need else None)
            at += width
        return grads

    return out, backward


@differentiable("stack")
def stack(tensors: Sequence[Tensor], axis: int = 0) -> tuple[Tensor, Backward]:
    """Join same-shape tensors along a new axis.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> stack([Tensor.from_host(q, np.zeros(2)), Tensor.from_host(q, np.ones(2))], 1).shape
        (2, 2)
    """
    ts = list(tensors)
    out = _ops.stack(ts, axis=axis)
    ax = axis % out.ndim

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        return [_reshape(_ops.slice(g, [k], [k + 1], axes=[ax]), t.shape) if need else None
                for k, (t, need) in enumerate(zip(ts, needs))]

    return out, backward


@differentiable("pad")
def pad(x: Tensor, pads: Sequence[int], value: float = 0.0) -> tuple[Tensor, Backward]:
    """Constant padding, ``pads`` as (before, after) pairs from the last dim backwards.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> pad(Tensor.from_host(manager.default("cpu").queue, np.ones((1, 2))), (1, 0)).shape
        (1, 3)
    """
    out = _ops.pad(x, pads, value)
    pairs = len(pads) // 2
    axes = [x.ndim - 1 - k for k in range(pairs)]
    starts = [int(pads[2 * k]) for k in range(pairs)]
    stops = [s + x.shape[a] for s, a in zip(starts, axes)]
    return out, lambda g, needs: (_ops.slice(g, starts, stops, axes=axes),)


@differentiable("broadcast_to")
def broadcast_to(x: Tensor, shape: Sequence[int]) -> tuple[Tensor, Backward]:
    """``x`` broadcast to ``shape`` (a copy); the gradient is summed back.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> broadcast_to(Tensor.from_host(manager.default("cpu").queue, np.ones(2)), (3, 2)).shape
        (3, 2)
    """
    return _ops.broadcast_to(x, shape), lambda g, needs: (sum_to_shape(g, x.shape),)


# -- gathers ------------------------------------------------------------------------------------


@differentiable("gather")
def gather(x: Tensor, axis: int, index: Tensor) -> tuple[Tensor, Backward]:
    """``out[..., k, ...] = x[..., index[..., k, ...], ...]`` along ``axis``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> gather(x, 1, Tensor.from_host(q, np.array([[1], [0]]))).to_host().tolist()
        [[2.0], [3.0]]
    """
    out = _ops.gather(x, axis, index)
    ax = axis % x.ndim

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        size = x.shape[ax]
        hot = _ops.one_hot(index, size, dtype=x.dtype)  # index.shape + (size,)
        spread = _ops.sum(_ops.mul(hot, _ops.unsqueeze(g, -1)), axis=ax)  # drops axis
        order = list(range(x.ndim - 1))
        order.insert(ax, x.ndim - 1)
        return (_ops.permute(spread, order), None)

    return out, backward


@differentiable("index_select")
def index_select(x: Tensor, axis: int, index: Tensor) -> tuple[Tensor, Backward]:
    """The slices of ``x`` at the 1-d ``index`` positions along ``axis``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> index_select(x, 0, Tensor.from_host(q, np.array([1, 1]))).to_host().tolist()
        [[3.0, 4.0], [3.0, 4.0]]
    """
    out = _ops.index_select(x, axis, index)
    ax = axis % x.ndim

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        hot = _ops.one_hot(index, x.shape[ax], dtype=x.dtype)  # (K, size)
        return (_along(g, ax, hot), None)

    return out, backward


@differentiable("embedding")
def embedding(indices: Tensor, weight: Tensor) -> tuple[Tensor, Backward]:
    """Rows of ``weight`` (num_embeddings, dim) at ``indices``; repeated rows add up.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> w = Tensor.from_host(q, np.array([[0.0, 0.5], [1.0, 1.5]]))
        >>> embedding(Tensor.from_host(q, np.array([1, 0])), w).to_host().tolist()
        [[1.0, 1.5], [0.0, 0.5]]
    """
    out = _ops.embedding(indices, weight)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
        n, (rows, dim) = indices.size, weight.shape
        hot = _ops.one_hot(_reshape(indices, (n,)), rows, dtype=weight.dtype)  # (n, rows)
        return (None, _ops.matmul(hot, _reshape(g, (n, dim)), transpose_a=True))

    return out, backward


@differentiable("dropout")
def dropout(x: Tensor, p: float, seed: int | None = None, offset: int | None = None
            ) -> tuple[Tensor, Backward]:
    """Zero elements with probability ``p``, scale the rest by ``1 / (1 - p)``; the backward
    applies the same mask and scale. The mask comes from the Philox stream ``seed``/``offset``,
    or without a seed from the default generator (``netcl.ops.manual_seed``), which each call
    advances.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> y = dropout(Tensor.from_host(manager.default("cpu").queue, np.ones(4)), 0.5, seed=1)
        >>> sorted(set(y.to_host().tolist())) in ([0.0, 2.0], [0.0], [2.0])
        True
    """
    out, mask = _ops.dropout(x, p, seed, offset)
    scale = 0.0 if p >= 1.0 else 1.0 / (1.0 - p)
    return out, lambda g, needs: (_ops.mul(_ops.mul(g, mask), scale),)
