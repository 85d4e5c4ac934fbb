"""Gathers by integer index tensors: ``gather``, ``index_select``, ``embedding``.

One kernel serves all three: the input viewed as (outer, A, inner), the output as
(outer, K, inner), and the index read at ``o * so + k * sk + j * sj`` (strides as scalar
arguments). On OpenCL an index outside ``[0, A)`` reads nothing and yields NaN (0 for integer
tensors): checking would need a host round trip. The NumPy backend raises ``IndexError``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.kernels.family import KernelSource, kernel_family
from netcl.core.tensor import Tensor, reshape

from ._common import check_tensor, empty, normalize_axis, same_device
from ._elementwise_dispatch import host, np_checked, np_result
from ._launch import device_buffer, index_defs, launch_items

__all__ = ["embedding", "gather", "index_select"]

_SOURCE = """
__kernel void take_k(__global T* out, __global const T* x, const IDX xo,
                     __global const TIX* index, const IDX io,
                     const IDX so, const IDX sk, const IDX sj,
                     const IDX K, const IDX A, const IDX inner, const IDX n)
{
  const IDX i = get_global_id(0);
  if (i >= n) return;
  const IDX j = i % inner;
  const IDX t = i / inner;
  const IDX k = t % K;
  const IDX o = t / K;
  const long v = (long)index[io + o * so + k * sk + j * sj];
  if (v < 0 || v >= (long)A) {
    ST(out, i, OOB);
  } else {
    ST(out, i, LD(x, xo + (o * A + (IDX)v) * inner + j));
  }
}
"""


def _program_source(dtype: str, index_dtype: str, wide: bool) -> str:
    """``take_k`` gathering ``dtype`` elements by ``index_dtype`` (int32/int64) indices, with
    64-bit element indices if ``wide``; the dtype header comes from :func:`take_family`."""
    defs = index_defs(2**31 if wide else 0)[0]
    oob = "((CT)NAN)" if dtype in FLOAT_DTYPES else "((CT)0)"
    tix = "int" if index_dtype == "int32" else "long"
    return f"{defs}#define TIX {tix}\n#define OOB {oob}\n{_SOURCE}"


def _take_golden() -> list[tuple[str, tuple[str, str, bool]]]:
    cases = [(f"movement/take-{dt}-index-int64", (dt, "int64", False))
             for dt in (*FLOAT_DTYPES, "int32")]
    return [*cases, ("movement/take-float32-index-int32", ("float32", "int32", False))]


@kernel_family("ops.take", golden=_take_golden)
def take_family(dtype: str, index_dtype: str, wide: bool) -> KernelSource:
    """``take_k`` (see :func:`_program_source`); one work item per output element."""
    return KernelSource(_program_source(dtype, index_dtype, wide), ("take_k",), dtype)


def _check_index(op: str, x: Tensor, index: Any) -> Tensor:
    checked = check_tensor(op, index, "index")
    if checked.dtype not in ("int32", "int64"):
        raise TypeError(f"{op}: index must be int32 or int64, got {checked.dtype}")
    same_device(op, x, checked)
    return checked


def _check_range(op: str, idx: np.ndarray[Any, Any], axis: int, size: int) -> None:
    bad = (idx < 0) | (idx >= size)
    if bad.any():
        raise IndexError(f"{op}: index {int(idx[bad][0])} is out of range for axis {axis} "
                         f"of size {size}")


def _take(x: Tensor, index: Tensor, axis: int, out_shape: tuple[int, ...], K: int,
          index_strides: tuple[int, int, int]) -> Tensor:
    """OpenCL: out (outer, K, inner) = x (outer, A, inner) at the given indices."""
    out = empty(x.queue, out_shape, x.dtype)
    n = out.size
    if n == 0:
        return out
    inner = math.prod(x.shape[axis + 1:])
    _, idx = index_defs(n, x.offset + x.size, index.offset + index.size)
    kernel = take_family(x.queue.context, x.dtype, index.dtype, idx is np.int64).kernel
    launch_items(x.queue, kernel, n, device_buffer(out), device_buffer(x) if x.size else None,
                 idx(x.offset), device_buffer(index), idx(index.offset),
                 *(idx(s) for s in index_strides), idx(K), idx(x.shape[axis]), idx(inner),
                 idx(n))
    return out


def gather(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """``out[..., k, ...] = x[..., index[..., k, ...], ...]`` along ``axis`` (``torch.gather``).

    ``index`` has ``x``'s rank and shape except along ``axis``; the output has its shape.

    Raises:
        TypeError: ``index`` is not int32/int64.
        ValueError: ``index``'s shape differs from ``x``'s off ``axis``.
        IndexError: ``axis`` out of range; on the NumPy backend an index out of range.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> i = Tensor.from_host(q, np.array([[1], [0]]))
        >>> gather(x, 1, i).to_host().tolist()
        [[2.0], [3.0]]
    """
    x = check_tensor("gather", x)
    index = _check_index("gather", x, index)
    ax = normalize_axis("gather", axis, x.ndim)
    if x.ndim == 0 and index.ndim == 0:  # axis 0 or -1 of a 0-d tensor, as in PyTorch
        return reshape(gather(reshape(x, (1,)), 0, reshape(index, (1,))), ())
    if index.ndim != x.ndim or any(
            d != e for k, (d, e) in enumerate(zip(index.shape, x.shape)) if k != ax):
        raise ValueError(f"gather: index shape {index.shape} must match input shape {x.shape} "
                         f"except along axis {ax}")
    if x.array is not None:
        idx = host(index)
        np_checked(x, _check_range, "gather", idx, ax, x.shape[ax])
        return np_result(x, x.dtype, _gather_np, host(x), idx, ax)
    K = index.shape[ax]
    inner = math.prod(x.shape[ax + 1:])
    return _take(x, index, ax, index.shape, K, (K * inner, inner, 1))


def index_select(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """The slices of ``x`` at the 1-d ``index`` positions along ``axis``.

    Raises:
        TypeError: ``index`` is not int32/int64.
        ValueError: ``index`` is not 1-d.
        IndexError: ``axis`` out of range; on the NumPy backend an index out of range.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> index_select(x, 0, Tensor.from_host(q, np.array([1, 1, 0]))).to_host().tolist()
        [[3.0, 4.0], [3.0, 4.0], [1.0, 2.0]]
    """
    x = check_tensor("index_select", x)
    index = _check_index("index_select", x, index)
    ax = normalize_axis("index_select", axis, x.ndim)
    if index.ndim != 1:
        raise ValueError(f"index_select: index must be 1-d, got shape {index.shape}")
    if x.ndim == 0:  # axis 0 or -1 of a 0-d tensor, as in PyTorch: a 1-d result
        x = reshape(x, (1,))
    return _select("index_select", x, ax, index)


def _select(op: str, x: Tensor, ax: int, index: Tensor) -> Tensor:
    """:func:`index_select` of checked arguments on behalf of ``op``: errors name ``op``."""
    shape = (*x.shape[:ax], index.shape[0], *x.shape[ax + 1:])
    if x.array is not None:
        idx = host(index)
        np_checked(x, _check_range, op, idx, ax, x.shape[ax])
        return np_result(x, x.dtype, _select_np, host(x), idx, ax)
    return _take(x, index, ax, shape, index.shape[0], (0, 1, 0))


def embedding(indices: Tensor, weight: Tensor) -> Tensor:
    """Rows of the 2-d ``weight`` (num_embeddings, dim) at ``indices`` (any shape).

    The result has shape ``indices.shape + (dim,)``.

    Raises:
        TypeError: ``indices`` is not int32/int64.
        ValueError: ``weight`` is not 2-d.
        IndexError: on the NumPy backend an index out of range.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> w = Tensor.from_host(q, np.array([[0.0, 0.5], [1.0, 1.5]]))
        >>> embedding(Tensor.from_host(q, np.array([[1], [0]])), w).to_host().tolist()
        [[[1.0, 1.5]], [[0.0, 0.5]]]
    """
    weight = check_tensor("embedding", weight, "weight")
    indices = _check_index("embedding", weight, indices)
    if weight.ndim != 2:
        raise ValueError(f"embedding: weight must be 2-d (num_embeddings, dim), "
                         f"got shape {weight.shape}")
    rows = _select("embedding", weight, 0, reshape(indices, (indices.size,)))
    return reshape(rows, (*indices.shape, weight.shape[1]))


def _gather_np(x: Any, idx: Any, ax: int) -> Any:
    size = x.shape[ax]  # an index out of range reads 0 (the replay's check raises after it)
    safe = np.where((idx >= 0) & (idx < size), idx, 0).astype(np.int64)
    return np.take_along_axis(x, safe, ax)


def _select_np(x: Any, idx: Any, ax: int) -> Any:
    size = x.shape[ax]
    return np.take(x, np.where((idx >= 0) & (idx < size), idx, 0), axis=ax)
