"""Movement ops: views (view/reshape, flatten, squeeze, unsqueeze) and copies (permute,
transpose, copy, contiguous, getitem/slice, concat, stack, pad, broadcast_to).

A Tensor is contiguous, so only reshapes are views; every other movement op writes a new
tensor with one strided-copy kernel (the elementwise ``copy`` row run through element strides:
permuted, stepped, offset or 0 for broadcast) per input. Gathers are in :mod:`._movement_take`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from netcl.core.dtypes import INT_DTYPES
from netcl.core.shapes import broadcast_strides, contiguous_strides
from netcl.core.tensor import Tensor
from netcl.core.tensor import reshape as _reshape

from ._common import check_tensor, empty, normalize_axis, same_device
from ._creation import fill_for
from ._dtype_policy import SCALAR_FLOAT, kernel_scalar, scalar_kind
from ._elementwise_base import Strided, run_strided
from ._elementwise_dispatch import bundle, cast_compute, copy_strided, host, np_result
from ._elementwise_table import OPS
from ._launch import launch_key, queue_facts, remember, remembered, run_remembered

__all__ = [
    "broadcast_to",
    "concat",
    "contiguous",
    "copy",
    "flatten",
    "getitem",
    "pad",
    "permute",
    "reshape",
    "slice",
    "squeeze",
    "stack",
    "transpose",
    "unsqueeze",
    "view",
]

_slice = slice  # the builtin, before ``slice`` the op shadows it


def _gather_view(x: Tensor, shape: Sequence[int], strides: Sequence[int], offset: int) -> Tensor:
    """OpenCL: a new contiguous tensor of ``shape`` read from ``x`` through ``strides`` (a
    repeated gather repeats its launch: NOTE [ Remembered launches ] in ._launch)."""
    key = launch_key("gather", x.shape, x.dtype, x.offset, x.queue, tuple(shape),
                     tuple(strides), offset, queue_facts(x.queue)[1].epoch("elementwise"))
    entry = remembered(key)
    if entry is not None:
        return run_remembered(entry, x.queue, x)[0]
    out = empty(x.queue, shape, x.dtype)
    op = OPS["copy"]  # copy_strided's launch, kept
    launched: list[Any] = []
    run_strided(op, bundle(op), shape, Strided(out, contiguous_strides(shape), 0),
                [Strided(x, tuple(strides), x.offset + offset)], cast_compute(x.dtype, x.dtype),
                launched=launched)
    if launched:
        kernel, grid, local, args = launched[0]
        remember(key, kernel, grid, local, args, [(0, out)], [2])
    return out


# -- views ------------------------------------------------------------------------------------


def view(x: Tensor, shape: int | Sequence[int]) -> Tensor:
    """A view of ``x`` with ``shape``; one entry may be -1 (inferred). Shares storage.

    Raises:
        ValueError: more than one -1, or an element count that does not fit.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(6.0))
        >>> view(x, (2, -1)).shape
        (2, 3)
    """
    x = check_tensor("view", x)
    dims = [shape] if isinstance(shape, (int, np.integer)) else list(shape)
    holes = [k for k, d in enumerate(dims) if d == -1]
    if len(holes) > 1:
        raise ValueError(f"view: only one dimension can be -1, got shape {tuple(dims)}")
    if holes:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or x.size % known:
            raise ValueError(f"view: cannot view {x.size} elements of shape {x.shape} as "
                             f"{tuple(dims)}")
        dims[holes[0]] = x.size // known
    return _reshape(x, dims)


reshape = view


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """A view merging dims ``start_dim..end_dim`` (inclusive) into one.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((2, 3, 4)))
        >>> flatten(x).shape, flatten(x, 1).shape
        ((24,), (2, 12))
    """
    x = check_tensor("flatten", x)
    if x.ndim == 0:
        return _reshape(x, (1,))
    s = normalize_axis("flatten", start_dim, x.ndim)
    e = normalize_axis("flatten", end_dim, x.ndim)
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
                         f"for a {x.ndim}-d tensor")
    return _reshape(x, (*x.shape[:s], math.prod(x.shape[s:e + 1]), *x.shape[e + 1:]))


def squeeze(x: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """A view without the size-1 dims ``axis`` (all size-1 dims for ``None``).

    Raises:
        ValueError: a named axis whose size is not 1.

    Examples:
        >>> from netcl.core.device import manager
        >>> squeeze(Tensor.from_host(manager.default("cpu").queue, np.zeros((1, 3, 1)))).shape
        (3,)
    """
    x = check_tensor("squeeze", x)
    if x.ndim == 0:  # axis 0 or -1 of a 0-d tensor, as in PyTorch: nothing to squeeze
        if axis is not None:
            for a in [axis] if isinstance(axis, (int, np.integer)) else list(axis):
                normalize_axis("squeeze", a, 0)
        return _reshape(x, ())
    if axis is None:
        axes = [k for k, d in enumerate(x.shape) if d == 1]
    else:
        items = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
        axes = [normalize_axis("squeeze", a, x.ndim) for a in items]
        for a in axes:
            if x.shape[a] != 1:
                raise ValueError(f"squeeze: axis {a} has size {x.shape[a]}, not 1 "
                                 f"(shape {x.shape})")
    return _reshape(x, tuple(d for k, d in enumerate(x.shape) if k not in axes))


def unsqueeze(x: Tensor, axis: int) -> Tensor:
    """A view with a new size-1 dim at ``axis`` (in ``[-ndim-1, ndim]``).

    Examples:
        >>> from netcl.core.device import manager
        >>> unsqueeze(Tensor.from_host(manager.default("cpu").queue, np.zeros(3)), -1).shape
        (3, 1)
    """
    x = check_tensor("unsqueeze", x)
    a = normalize_axis("unsqueeze", axis, x.ndim + 1)
    return _reshape(x, (*x.shape[:a], 1, *x.shape[a:]))


# -- copies -----------------------------------------------------------------------------------


def copy(x: Tensor) -> Tensor:
    """A new tensor with the values of ``x`` (its own storage).

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones(2))
        >>> y = copy(x)
        >>> y is x, y.to_host().tolist()
        (False, [1.0, 1.0])
    """
    x = check_tensor("copy", x)
    if x.array is not None:
        return np_result(x, x.dtype, np.array, host(x))
    return _gather_view(x, x.shape, contiguous_strides(x.shape), 0)


def contiguous(x: Tensor) -> Tensor:
    """``x`` itself when it starts at element 0 of its storage, else a copy that does.

    Kernels that take whole buffers (``netcl.core.kernels.primitives.launch``) need offset 0.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones(2))
        >>> contiguous(x) is x
        True
    """
    x = check_tensor("contiguous", x)
    return x if x.offset == 0 else copy(x)


def permute(x: Tensor, dims: Sequence[int]) -> Tensor:
    """A new tensor with the axes of ``x`` reordered: output axis ``k`` is input ``dims[k]``.

    Raises:
        IndexError: an axis out of range.
        ValueError: ``dims`` is not a permutation of the axes.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((2, 3, 4)))
        >>> permute(x, (2, 0, 1)).shape
        (4, 2, 3)
    """
    x = check_tensor("permute", x)
    order = [normalize_axis("permute", d, x.ndim) for d in dims]
    if sorted(order) != list(range(x.ndim)):
        raise ValueError(f"permute: dims {tuple(dims)} is not a permutation of the "
                         f"{x.ndim} axes of shape {x.shape}")
    shape = tuple(x.shape[d] for d in order)
    if x.array is not None:
        return np_result(x, x.dtype, _permute_np, host(x), tuple(order))
    strides = contiguous_strides(x.shape)
    return _gather_view(x, shape, [strides[d] for d in order], 0)


def transpose(x: Tensor, dim0: int = -2, dim1: int = -1) -> Tensor:
    """A new tensor with axes ``dim0`` and ``dim1`` swapped (default: the last two).

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[1, 2, 3]]))
        >>> transpose(x).to_host().tolist()
        [[1], [2], [3]]
    """
    x = check_tensor("transpose", x)
    a = normalize_axis("transpose", dim0, x.ndim)
    b = normalize_axis("transpose", dim1, x.ndim)
    if x.ndim == 0:  # axes 0 and -1 of a 0-d tensor, as in PyTorch: a copy
        return permute(x, ())
    order = list(range(x.ndim))
    order[a], order[b] = order[b], order[a]
    return permute(x, order)


def _index_plan(
    op: str, shape: tuple[int, ...], key: Any
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Output shape, element strides and offset of basic indexing ``x[key]``."""
    items = key if isinstance(key, tuple) else (key,)
    for item in items:
        ok = item is None or item is Ellipsis or isinstance(item, _slice) or (
            isinstance(item, (int, np.integer)) and not isinstance(item, bool))
        if not ok:
            raise TypeError(f"{op}: indices must be ints, slices, Ellipsis or None, got "
                            f"{type(item).__name__}; use index_select or gather for tensors")
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError(f"{op}: an index can have only one Ellipsis, got {key!r}")
    used = sum(item is not None and item is not Ellipsis for item in items)
    if used > len(shape):
        raise IndexError(f"{op}: too many indices ({used}) for a {len(shape)}-d tensor "
                         f"of shape {shape}")
    fill_in = (_slice(None),) * (len(shape) - used)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items = items[:at] + fill_in + items[at + 1:]
    else:
        items = items + fill_in
    base = contiguous_strides(shape)
    out_shape: list[int] = []
    strides: list[int] = []
    offset = 0
    axis = 0
    for item in items:
        if item is None:
            out_shape.append(1)
            strides.append(0)
            continue
        length, stride, skip = basic_index_item(op, item, shape[axis], base[axis], f"axis {axis}")
        if length is not None:
            out_shape.append(length)
            strides.append(stride)
        offset += skip
        axis += 1
    return tuple(out_shape), tuple(strides), offset


def basic_index_item(op: str, item: Any, size: int, stride: int, where: str,
                     context: str = "") -> tuple[int | None, int, int]:
    """One int or slice of a basic index on a dim of ``size`` elements ``stride`` apart:
    ``(length, stride, offset)`` of what it selects (``length`` None for an int, which drops
    the dim). ``where`` names the dim in errors (``"axis 1"``), ``context`` ends them.

    Raises:
        ValueError: a slice step of 0.
        IndexError: an int out of range.

    Examples:
        >>> basic_index_item("getitem", _slice(1, None, 2), 7, 3, "axis 0")
        (3, 6, 3)
        >>> basic_index_item("getitem", -1, 7, 3, "axis 0")
        (None, 3, 18)
    """
    if isinstance(item, _slice):
        if item.step == 0:
            raise ValueError(f"{op}: slice step must not be 0 ({where}){context}")
        start, stop, step = item.indices(size)
        length = len(range(start, stop, step))
        return length, stride * step, start * stride if length else 0
    i = int(item)
    if not -size <= i < size:
        raise IndexError(f"{op}: index {i} is out of range for {where} of size {size}{context}")
    return None, stride, (i % size) * stride


def getitem(x: Tensor, key: Any) -> Tensor:
    """A new tensor ``x[key]`` for basic indexing: ints, slices (any step), Ellipsis, None.

    Raises:
        IndexError: an int out of range, too many indices, two Ellipses.
        TypeError: other index types (use :func:`index_select` / :func:`gather`).
        ValueError: a slice step of 0.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(12).reshape(3, 4))
        >>> getitem(x, np.s_[::-2, 1]).to_host().tolist()
        [9, 1]
    """
    return _getitem("getitem", check_tensor("getitem", x), key)


def _getitem(op: str, x: Tensor, key: Any) -> Tensor:
    """:func:`getitem` on behalf of ``op`` (``slice``): its errors name ``op``."""
    shape, strides, offset = _index_plan(op, x.shape, key)
    if x.array is not None:
        return np_result(x, x.dtype, _slice_np, host(x), key, tuple(shape))
    return _gather_view(x, shape, strides, offset)


def slice(x: Tensor, starts: Sequence[int | None], stops: Sequence[int | None],
          steps: Sequence[int | None] | None = None,
          axes: Sequence[int] | None = None) -> Tensor:
    """``x[starts[k]:stops[k]:steps[k]]`` along ``axes[k]`` (default: the leading axes).

    Python slice rules: negative values count from the end, ``None`` is open, stops clip.

    Raises:
        ValueError: sequences of different lengths, a step of 0.
        IndexError: an axis out of range or repeated.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(10))
        >>> slice(x, [1], [None], [3]).to_host().tolist()
        [1, 4, 7]
    """
    x = check_tensor("slice", x)
    steps = [None] * len(starts) if steps is None else steps
    axes = list(range(len(starts))) if axes is None else axes
    if not len(starts) == len(stops) == len(steps) == len(axes):
        raise ValueError(f"slice: starts, stops, steps and axes differ in length: "
                         f"{len(starts)}, {len(stops)}, {len(steps)}, {len(axes)}")
    key: list[Any] = [_slice(None)] * x.ndim
    seen: set[int] = set()
    for a, start, stop, step in zip(axes, starts, stops, steps):
        k = normalize_axis("slice", a, x.ndim)
        if k in seen:
            raise IndexError(f"slice: axis {a} is repeated in axes {tuple(axes)}")
        seen.add(k)
        key[k] = _slice(start, stop, step)
    return _getitem("slice", x, tuple(key))


def _check_same(op: str, tensors: Sequence[Any]) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not tensors:
        raise TypeError(f"{op}: expected a non-empty sequence of Tensors")
    ts = [check_tensor(op, t, "every entry") for t in tensors]
    same_device(op, *ts)
    dtypes = sorted({t.dtype for t in ts})
    if len(dtypes) > 1:
        raise TypeError(f"{op}: tensors have different dtypes {dtypes}; cast them first")
    return ts


def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors of one dtype along ``axis``; the other dims must match.

    Raises:
        ValueError: shapes that differ off ``axis``, or 0-d tensors.
        TypeError: different dtypes, or not a sequence of Tensors.
        IndexError: ``axis`` out of range.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> a, b = Tensor.from_host(q, np.zeros((1, 2))), Tensor.from_host(q, np.ones((2, 2)))
        >>> concat([a, b]).to_host().tolist()
        [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0]]
    """
    ts = _check_same("concat", tensors)
    first = ts[0]
    if first.ndim == 0:
        raise ValueError("concat: cannot join 0-d tensors; use stack")
    ax = normalize_axis("concat", axis, first.ndim)
    for t in ts[1:]:
        if t.ndim != first.ndim or any(
                d != e for k, (d, e) in enumerate(zip(t.shape, first.shape)) if k != ax):
            raise ValueError(f"concat: shapes {first.shape} and {t.shape} differ off axis {ax}")
    shape = list(first.shape)
    shape[ax] = sum(t.shape[ax] for t in ts)
    if first.array is not None:
        return np_result(first, first.dtype, np.concatenate, [host(t) for t in ts], ax)
    out = empty(first.queue, shape, first.dtype)
    strides = contiguous_strides(shape)
    at = 0
    for t in ts:
        copy_strided(t.shape, Strided(out, strides, at * strides[ax]),
                     Strided(t, contiguous_strides(t.shape), t.offset))
        at += t.shape[ax]
    return out


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors of one shape and dtype along a new axis ``axis``.

    Raises:
        ValueError: different shapes.
        TypeError: different dtypes, or not a sequence of Tensors.
        IndexError: ``axis`` out of range.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> a, b = Tensor.from_host(q, np.zeros(2)), Tensor.from_host(q, np.ones(2))
        >>> stack([a, b], axis=1).to_host().tolist()
        [[0.0, 1.0], [0.0, 1.0]]
    """
    ts = _check_same("stack", tensors)
    for t in ts[1:]:
        if t.shape != ts[0].shape:
            raise ValueError(f"stack: shapes {ts[0].shape} and {t.shape} differ")
    ax = normalize_axis("stack", axis, ts[0].ndim + 1)
    return concat([unsqueeze(t, ax) for t in ts], axis=ax)


def pad(x: Tensor, pads: Sequence[int], value: float = 0) -> Tensor:
    """Constant padding; ``pads`` lists (before, after) pairs from the *last* dim backwards.

    As ``torch.nn.functional.pad``: ``(1, 2)`` pads the last dim by 1 before and 2 after,
    ``(1, 1, 0, 3)`` also pads the dim before it by 0 and 3.

    Raises:
        ValueError: an odd count, more pairs than dims, or a negative pad.
        TypeError: non-int pads, or a float ``value`` for an integer tensor.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((1, 2)))
        >>> pad(x, (1, 0)).to_host().tolist()
        [[0.0, 1.0, 1.0]]
    """
    x = check_tensor("pad", x)
    pads = tuple(pads)
    if any(isinstance(p, bool) or not isinstance(p, (int, np.integer)) for p in pads):
        raise TypeError(f"pad: pads must be ints, got {pads!r}")
    if len(pads) % 2 or len(pads) > 2 * x.ndim:
        raise ValueError(f"pad: pads must be (before, after) pairs for at most {x.ndim} dims, "
                         f"got {len(pads)} values")
    if any(p < 0 for p in pads):
        raise ValueError(f"pad: pads must be >= 0 (constant mode does not crop), got {pads}")
    widths = [(0, 0)] * x.ndim
    for k in range(len(pads) // 2):
        widths[x.ndim - 1 - k] = (int(pads[2 * k]), int(pads[2 * k + 1]))
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, widths))
    if x.array is not None:
        region = tuple(_slice(lo, lo + d) for d, (lo, _) in zip(x.shape, widths))
        if x.dtype in INT_DTYPES and scalar_kind("pad", value) == SCALAR_FLOAT:
            raise TypeError(f"pad: float value {value!r} for an integer tensor ({x.dtype})")
        return np_result(x, x.dtype, _pad_np, host(x), shape, region,
                         kernel_scalar("pad", value, x.dtype))
    out = fill_for("pad", empty(x.queue, shape, x.dtype), value)
    strides = contiguous_strides(shape)
    at = sum(lo * s for (lo, _), s in zip(widths, strides))
    copy_strided(x.shape, Strided(out, strides, at),
                 Strided(x, contiguous_strides(x.shape), x.offset))
    return out


def broadcast_to(x: Tensor, shape: Sequence[int]) -> Tensor:
    """A new tensor of ``shape`` holding ``x`` broadcast as in NumPy.

    Raises:
        ValueError: ``x.shape`` does not broadcast to ``shape``.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 2.0]))
        >>> broadcast_to(x, (2, 2)).to_host().tolist()
        [[1.0, 2.0], [1.0, 2.0]]
    """
    x = check_tensor("broadcast_to", x)
    target = tuple(int(d) for d in shape)
    tail = target[len(target) - x.ndim:]
    if len(target) < x.ndim or any(d not in (1, t) for d, t in zip(x.shape, tail)):
        raise ValueError(f"broadcast_to: cannot broadcast shape {x.shape} to {target}")
    if x.array is not None:
        return np_result(x, x.dtype, _broadcast_np, host(x), tuple(target))
    return _gather_view(x, target, broadcast_strides(x.shape, target), 0)


# -- NumPy backend (NOTE [ NumPy work under a recorder ] in netcl.core.recording) -------------

def _permute_np(a: Any, order: tuple[int, ...]) -> Any:
    # a copy in C order: np.ascontiguousarray would make a 0-d array 1-d
    return np.transpose(a, order).copy()


def _slice_np(a: Any, key: Any, shape: tuple[int, ...]) -> Any:
    return np.array(a[key], copy=True).reshape(shape)


def _pad_np(a: Any, shape: tuple[int, ...], region: tuple[Any, ...], value: Any) -> Any:
    out = np.full(shape, value, dtype=a.dtype)
    out[region] = a
    return out


def _broadcast_np(a: Any, target: tuple[int, ...]) -> Any:
    return np.broadcast_to(a, target).copy()
