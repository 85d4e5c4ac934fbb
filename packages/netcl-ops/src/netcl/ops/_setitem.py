"""``x[key] = value``: assignment through basic and advanced indices (``Tensor.__setitem__``).

The key is parsed once on the host into a *selection*: the selected shape, the element strides
and offset of each selected element in ``x``'s storage, and at most one advanced index (an
integer array or Tensor on one axis, or a boolean mask over one or more axes, read as the
integer positions of its true elements on those axes merged into one). The selected shape
follows NumPy: an advanced index puts its dims where it stands when it and the ints of the key
are adjacent, else first (``x[0, :, idx]`` selects ``idx.shape + (x.shape[1],)``).

How each backend writes:

- NumPy: NumPy's own assignment (``a[key] = value``, vectorized) in one
  :func:`~netcl.core.recording.numpy_update`.
- OpenCL, basic keys (ints, slices of any step, None, Ellipsis): the elementwise ``copy`` row
  run through the selection's strides (``run_strided`` writes into a strided output, and
  broadcasts and casts the value, or takes a scalar). Shapes, strides and the offset are kernel
  scalars: no device allocation per call.
- OpenCL, a boolean mask of the tensor's shape on the device with a scalar value: the
  elementwise ``where`` row written into ``x`` in place (``masked_fill``; no host read).
- OpenCL, other advanced keys: ``put_k`` below, one work item per selected element, writing
  ``value`` (a scalar argument, or a tensor read through broadcast strides) at
  ``offset + index[...] * axis_stride + sum(c_k * stride_k)``. A host key (list, NumPy array,
  mask) is checked and uploaded; an index Tensor on the device is read there: an index out of
  range writes nothing (checking would need a host round trip, as ``take_k``'s reads).

The value is converted to ``x``'s dtype as PyTorch does (``x[0] = 2.7`` on an int32 tensor
writes 2). Repeated indices write one of their values (which one is unspecified on OpenCL, the
last on NumPy, as PyTorch's ``index_put_``). A value Tensor sharing ``x``'s storage is copied
first, so ``x[1:] = x[:-1]`` reads the values from before the write.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((3, 4), np.float32))
    >>> setitem(x, np.s_[:, 1], 5)
    >>> setitem(x, np.s_[::2, -1], np.array([1.0, 2.0]))
    >>> setitem(x, np.array([False, True, False]), 7)
    >>> x.tolist()
    [[0.0, 5.0, 0.0, 1.0], [7.0, 7.0, 7.0, 7.0], [0.0, 5.0, 0.0, 2.0]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, numpy_dtype
from netcl.core.kernels.family import KernelSource, kernel_family
from netcl.core.recording import numpy_update
from netcl.core.shapes import broadcast_strides, collapse, contiguous_strides
from netcl.core.tensor import Tensor, reshape

from ._common import check_tensor, same_device
from ._dtype_policy import kernel_scalar
from ._elementwise_base import Strided, run_strided
from ._elementwise_binary import cast
from ._elementwise_dispatch import bundle, copy_strided, host
from ._elementwise_table import OPS
from ._launch import device_buffer, index_defs, launch_items
from ._movement import basic_index_item, copy

__all__ = ["put_family", "setitem"]

_OP = "Tensor.__setitem__"
_slice = slice


# -- the selection ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Advanced:
    """The one advanced index of a key: ``index`` (a host int64 array or an int32/int64
    Tensor) on an axis of ``size`` elements ``stride`` apart; its dims are selected dims
    ``at .. at + index.ndim``."""

    index: np.ndarray[Any, Any] | Tensor
    size: int
    stride: int
    at: int


@dataclass(frozen=True)
class _Selection:
    """Where ``x[key]`` lies in ``x``'s storage (element strides and offset from ``x``'s first
    element; 0 strides on the advanced index's dims) and the key in NumPy's terms."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    advanced: _Advanced | None
    np_key: tuple[Any, ...]


def _where(key: Any, shape: tuple[int, ...]) -> str:
    return f"(key {key!r}, tensor shape {shape})"


def _is_int(item: Any) -> bool:
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _as_index(item: Any, key: Any, shape: tuple[int, ...]) -> Any:
    """An advanced item as a host array or an int Tensor; a 0-d host int array as an int."""
    if isinstance(item, Tensor):
        if item.dtype not in ("int32", "int64", "uint8"):
            raise IndexError(f"{_OP}: a tensor index must be an integer or uint8 (mask) "
                             f"tensor, got {item.dtype} {_where(key, shape)}")
        return item
    arr = np.asarray(item)
    if arr.dtype == np.bool_:
        return arr
    if arr.size == 0 and arr.dtype.kind == "f":  # x[[]] = v: an empty integer index
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise IndexError(f"{_OP}: an index array must hold integers or booleans, got dtype "
                         f"{arr.dtype} {_where(key, shape)}")
    return int(arr) if arr.ndim == 0 else arr.astype(np.int64, copy=False)


def _items(key: Any, shape: tuple[int, ...]) -> list[Any]:
    """The key as a list of items (ints, slices, None, Ellipsis, arrays, Tensors)."""
    raw = list(key) if isinstance(key, tuple) else [key]
    items: list[Any] = []
    for item in raw:
        if item is None or item is Ellipsis or isinstance(item, _slice) or _is_int(item):
            items.append(int(item) if _is_int(item) else item)
        elif isinstance(item, (Tensor, np.ndarray, list, tuple)):
            items.append(_as_index(item, key, shape))
        else:
            raise TypeError(f"{_OP}: indices must be ints, slices, None, Ellipsis, integer or "
                            f"boolean arrays or Tensors, got {type(item).__name__} "
                            f"{_where(key, shape)}")
    return items


def _is_mask(item: Any, shape: tuple[int, ...], axis: int) -> bool:
    """A boolean array, or a uint8 Tensor of the shape of the dims it would cover (PyTorch
    reads a uint8 index tensor as a mask)."""
    if isinstance(item, Tensor):
        return item.dtype == "uint8" and item.ndim > 0 and \
            tuple(shape[axis:axis + item.ndim]) == item.shape
    return isinstance(item, np.ndarray) and item.dtype == np.bool_


def select(shape: tuple[int, ...], key: Any) -> _Selection:
    """Parse ``key`` for a contiguous tensor of ``shape`` (see the module docstring).

    Raises:
        IndexError: an index out of range, too many indices, two Ellipses, a mask whose shape
            differs from the dims it covers, an index array of another kind.
        TypeError: more than one advanced index, or an item of an unknown type.
        ValueError: a slice step of 0.

    Examples:
        >>> s = select((4, 5), np.s_[::-2, 1])
        >>> s.shape, s.strides, s.offset
        ((2,), (-10,), 16)
    """
    items = _items(key, shape)
    fancy = [k for k, it in enumerate(items)
             if isinstance(it, (Tensor, np.ndarray))]
    if len(fancy) > 1:
        raise TypeError(f"{_OP}: at most one advanced index (an integer array or Tensor, or a "
                        f"boolean mask) per key is supported, got {len(fancy)} "
                        f"{_where(key, shape)}; assign in steps")
    if sum(it is Ellipsis for it in items) > 1:
        raise IndexError(f"{_OP}: an index can have only one Ellipsis {_where(key, shape)}")
    spans = [0 if it is None or it is Ellipsis else 1 for it in items]
    if fancy:
        spans[fancy[0]] = _span(items, fancy[0], spans, shape)
    used = sum(spans)
    if used > len(shape):
        raise IndexError(f"{_OP}: too many indices ({used}) for a {len(shape)}-d tensor "
                         f"{_where(key, shape)}")
    dots = [k for k, it in enumerate(items) if it is Ellipsis]  # identity: items hold arrays
    if dots:
        at = dots[0]
        fill = [_slice(None)] * (len(shape) - used)
        items = items[:at] + fill + items[at + 1:]
        spans = spans[:at] + [1] * len(fill) + spans[at + 1:]
        fancy = [k + len(fill) - 1 if k > at else k for k in fancy]
    else:
        items = items + [_slice(None)] * (len(shape) - used)
        spans = spans + [1] * (len(shape) - used)
    return _plan(shape, key, items, spans, fancy[0] if fancy else None)


def _span(items: list[Any], k: int, spans: list[int], shape: tuple[int, ...]) -> int:
    """How many dims advanced item ``k`` covers: a mask its ndim, an integer index one."""
    item = items[k]
    if isinstance(item, np.ndarray):
        return item.ndim if item.dtype == np.bool_ else 1
    if any(it is Ellipsis for it in items[:k]):  # counted from the end
        axis = len(shape) - sum(spans[k + 1:]) - item.ndim
    else:
        axis = sum(spans[:k])
    return item.ndim if axis >= 0 and _is_mask(item, shape, axis) else 1


def _plan(shape: tuple[int, ...], key: Any, items: list[Any], spans: list[int],
          fancy: int | None) -> _Selection:
    base = contiguous_strides(shape)
    out_shape: list[int] = []
    strides: list[int] = []
    offset, axis = 0, 0
    advanced: tuple[Any, int, int, int] | None = None  # index, size, stride, selected at
    np_key: list[Any] = []
    for k, item in enumerate(items):
        if item is None:
            out_shape.append(1)
            strides.append(0)
            np_key.append(None)
            continue
        if k == fancy:
            index, size, stride = _advanced_index(item, shape, axis, spans[k], base, key)
            advanced = (index, size, stride, len(out_shape))
            np_item = item  # a Tensor on OpenCL stays (the NumPy key serves NumPy only)
            if isinstance(item, Tensor) and item.array is not None:
                np_item = host(item)
                np_item = np_item.astype(np.bool_) if _is_mask(item, shape, axis) else np_item
            np_key.append(np_item)
            axis += spans[k]
            continue
        length, stride, skip = basic_index_item(_OP, item, shape[axis], base[axis],
                                                f"dim {axis}", " " + _where(key, shape))
        if length is not None:
            out_shape.append(length)
            strides.append(stride)
        offset += skip
        np_key.append(item)
        axis += 1
    if advanced is None:
        return _Selection(tuple(out_shape), tuple(strides), offset, None, tuple(np_key))
    index, size, stride, at = advanced
    # NumPy: the ints count as advanced indices beside an array; apart, its dims go first
    marks = [k for k, it in enumerate(items) if k == fancy or _is_int(it)]
    if marks[-1] - marks[0] + 1 != len(marks):
        at = 0
    dims = tuple(index.shape)
    out_shape[at:at] = dims
    strides[at:at] = [0] * len(dims)
    return _Selection(tuple(out_shape), tuple(strides), offset,
                      _Advanced(index, size, stride, at), tuple(np_key))


def _advanced_index(item: Any, shape: tuple[int, ...], axis: int, span: int,
                    base: tuple[int, ...], key: Any) -> tuple[Any, int, int]:
    """(index, axis size, axis stride) of an advanced item covering dims ``axis ..``."""
    if _is_mask(item, shape, axis):
        covered = tuple(shape[axis:axis + span])
        mask = item.to_host() if isinstance(item, Tensor) else item
        if tuple(mask.shape) != covered:
            raise IndexError(f"{_OP}: a boolean mask must have the shape {covered} of the dims "
                             f"it indexes, got {tuple(mask.shape)} {_where(key, shape)}")
        rows = np.flatnonzero(mask.reshape(-1)).astype(np.int64)
        return rows, math.prod(covered), base[axis + span - 1] if span else 1
    size = shape[axis]
    if isinstance(item, np.ndarray):
        _check_range(item, size, axis, key, shape)
    elif item.array is not None:  # a NumPy-backend Tensor: checked as NumPy would
        _check_range(host(item), size, axis, key, shape)
    return item, size, base[axis]


def _check_range(index: np.ndarray[Any, Any], size: int, axis: int, key: Any,
                 shape: tuple[int, ...]) -> None:
    bad = (index < -size) | (index >= size)
    if bad.any():
        raise IndexError(f"{_OP}: index {int(index[bad].reshape(-1)[0])} is out of range for "
                         f"dim {axis} of size {size} {_where(key, shape)}")


# -- the value ------------------------------------------------------------------------------------


def _fit(value_shape: tuple[int, ...], sel: tuple[int, ...], key: Any,
         shape: tuple[int, ...]) -> tuple[int, ...]:
    """``value_shape`` without the leading 1s beyond ``sel``'s rank, checked to broadcast."""
    vs = value_shape
    while len(vs) > len(sel) and vs[0] == 1:
        vs = vs[1:]
    tail = sel[len(sel) - len(vs):] if vs else ()
    if len(vs) > len(sel) or any(d not in (1, t) for d, t in zip(vs, tail)):
        raise ValueError(f"{_OP}: a value of shape {value_shape} cannot broadcast to the "
                         f"selected shape {sel} {_where(key, shape)}")
    return vs


def _scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


# -- the entry point ------------------------------------------------------------------------------


def setitem(x: Tensor, key: Any, value: Any) -> None:
    """``x[key] = value`` in place (see the module docstring): ``key`` any basic index, or one
    with one advanced index; ``value`` a number, a NumPy array (or list) or a Tensor on
    ``x``'s device, broadcast to the selected shape and converted to ``x.dtype``.

    Raises:
        IndexError: an index out of range, too many indices, a mask of the wrong shape.
        TypeError: an unknown key item, more than one advanced index, a value of another kind.
        ValueError: a value that does not broadcast to the selected shape, a value Tensor on
            another device, a slice step of 0.
    """
    x = check_tensor(_OP, x)
    if isinstance(key, list):  # x[[0, 2]]: one index array, as NumPy and PyTorch
        key = np.asarray(key) if key else np.zeros(0, np.int64)
    if _scalar(value):
        _assign_scalar(x, key, value)
        return
    if isinstance(value, (list, tuple)):
        value = np.asarray(value)
    if not isinstance(value, (Tensor, np.ndarray)):
        raise TypeError(f"{_OP}: the value must be a number, a NumPy array or a Tensor, got "
                        f"{type(value).__name__} {_where(key, x.shape)}")
    sel = select(x.shape, key)
    fit = _fit(tuple(value.shape), sel.shape, key, x.shape)
    if isinstance(value, Tensor):
        same_device(_OP, x, value)
    if x.array is not None:
        data = host(value) if isinstance(value, Tensor) else value
        numpy_update(_assign_np, host(x), sel.np_key,
                     data.reshape(fit).astype(numpy_dtype(x.dtype), copy=False))
        return
    if math.prod(sel.shape) == 0:
        return
    if isinstance(value, np.ndarray):
        src = Tensor.from_host(x.queue, value.reshape(fit).astype(numpy_dtype(x.dtype)),
                               dtype=x.dtype)
    else:
        src = value if fit == value.shape else reshape(value, fit)
        if src.buffer is x.buffer:  # x[1:] = x[:-1]: read the values from before the write
            src = copy(src)
    if sel.advanced is None:
        copy_strided(sel.shape, Strided(x, sel.strides, x.offset + sel.offset),
                     Strided(src, broadcast_strides(src.shape, sel.shape), src.offset))
        return
    if src.dtype != x.dtype:
        src = cast(src, x.dtype)
    _put(x, sel, sel.advanced, src)


def _assign_scalar(x: Tensor, key: Any, value: Any) -> None:
    v = kernel_scalar(_OP, int(value) if isinstance(value, (bool, np.bool_)) else value,
                      x.dtype)
    if x.array is None and isinstance(key, Tensor) and key.dtype == "uint8" and \
            key.shape == x.shape and key.ndim > 0:
        same_device(_OP, x, key)  # masked_fill on the device: no host read of the mask
        strides = contiguous_strides(x.shape)
        op = OPS["where"]
        run_strided(op, bundle(op), x.shape, Strided(x, strides, x.offset),
                    [Strided(key, strides, key.offset), v, Strided(x, strides, x.offset)],
                    x.dtype)
        return
    sel = select(x.shape, key)
    if x.array is not None:
        numpy_update(_assign_np, host(x), sel.np_key, numpy_dtype(x.dtype).type(v))
    elif sel.advanced is None:
        op = OPS["copy"]
        run_strided(op, bundle(op), sel.shape, Strided(x, sel.strides, x.offset + sel.offset),
                    [v], x.dtype)
    elif math.prod(sel.shape):
        _put(x, sel, sel.advanced, v)


def _assign_np(a: np.ndarray[Any, Any], key: tuple[Any, ...], value: Any) -> None:
    a[key] = value


# -- the scatter kernel ---------------------------------------------------------------------------


def _program_source(ndim: int, index_dtype: str, scalar: bool, wide: bool) -> str:
    """``put_k`` over ``ndim`` merged dims: ``out[oo + index[io + ..] * as + ..] = value`` (a
    ``CT`` scalar if ``scalar``, else ``src`` read through its strides)."""
    defs = index_defs(2**31 if wide else 0)[0]
    tix = "int" if index_dtype == "int32" else "long"
    src = "const CT value" if scalar else "__global const T* src, const IDX so"
    # (position, its stride arguments): the output, the source (a tensor), the index
    sets = [("o", "os"), ("x", "is")] if scalar else [("o", "os"), ("s", "ss"), ("x", "is")]
    args = "".join(f", const IDX d{k}" for k in range(ndim))
    args += "".join(f", const IDX {s}{k}" for _, s in sets for k in range(ndim))
    walk = []
    for k in reversed(range(ndim)):
        moves = " ".join(f"{v} += c * {s}{k};" for v, s in sets)
        walk.append(f"  {{ const IDX c = r % d{k}; r /= d{k}; {moves} }}")
    start = "IDX r = i, o = oo, x = io;" if scalar else "IDX r = i, o = oo, s = so, x = io;"
    load = "value" if scalar else "LD(src, s)"
    body = "\n".join(walk)
    return f"""{defs}#define TIX {tix}

__kernel void put_k(__global T* out, const IDX oo, {src},
                    __global const TIX* index, const IDX io, const IDX A, const IDX ast,
                    const IDX n{args})
{{
  const IDX i = get_global_id(0);
  if (i >= n) return;
  {start}
{body}
  long v = (long)index[x];
  if (v < 0) v += (long)A;
  if (v < 0 || v >= (long)A) return;
  ST(out, o + (IDX)v * ast, {load});
}}
"""


def _put_golden() -> list[tuple[str, tuple[str, str, int, bool, bool]]]:
    cases = [(f"movement/put-{dt}-index-int64-nd2", (dt, "int64", 2, False, False))
             for dt in (*FLOAT_DTYPES, "int32")]
    return [*cases, ("movement/put-float32-index-int32-nd1-scalar",
                     ("float32", "int32", 1, True, False))]


@kernel_family("ops.put", golden=_put_golden)
def put_family(dtype: str, index_dtype: str, ndim: int, scalar: bool, wide: bool
               ) -> KernelSource:
    """``put_k`` (see :func:`_program_source`); one work item per selected element."""
    return KernelSource(_program_source(ndim, index_dtype, scalar, wide), ("put_k",), dtype)


def _put(x: Tensor, sel: _Selection, adv: _Advanced, value: Tensor | Any) -> None:
    """OpenCL: write ``value`` (a Tensor of ``x``'s dtype broadcastable to the selection, or a
    kernel scalar) at the positions of selection ``sel`` with advanced index ``adv``."""
    index = adv.index
    if isinstance(index, np.ndarray):
        index = Tensor.from_host(x.queue, index, dtype="int64")
    else:
        same_device(_OP, x, index)
        if index.dtype == "uint8":  # not a mask here: an index of small integers
            index = cast(index, "int32")
    n = math.prod(sel.shape)
    dims = len(index.shape)
    index_strides = [0] * len(sel.shape)
    index_strides[adv.at:adv.at + dims] = contiguous_strides(index.shape)
    scalar = not isinstance(value, Tensor)
    sets = [sel.strides, tuple(index_strides)]
    if not scalar:
        sets.insert(1, broadcast_strides(value.shape, sel.shape))
    merged, strides = collapse(sel.shape, sets)
    extents = [n, x.offset + x.size, index.offset + index.size]
    if not scalar:
        extents.append(value.offset + value.size)
    _, idx = index_defs(*extents)
    kernel = put_family(x.queue.context, x.dtype, index.dtype, len(merged), scalar,
                        idx is np.int64).kernel
    src = [value] if scalar else [device_buffer(value), idx(value.offset)]
    launch_items(x.queue, kernel, n, device_buffer(x), idx(x.offset + sel.offset), *src,
                 device_buffer(index), idx(index.offset), idx(adv.size), idx(adv.stride),
                 idx(n), *(idx(d) for d in merged), *(idx(s) for st in strides for s in st))

