"""What every op shares: argument checks, output allocation, scalar promotion, kernel launch.

Ops take and return :class:`netcl.core.tensor.Tensor`. On the NumPy backend (``t.array`` is set)
an op computes with NumPy on ``t.array``; on OpenCL it launches a cached kernel on ``t.queue``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from netcl.core.dtypes import canonical_dtype, numpy_dtype
from netcl.core.kernels.family import grid_1d
from netcl.core.kernels.primitives import WorkGroupTuner, launch
from netcl.core.tensor import Tensor, check_same_device, output_tensor

from ._launch import queue_facts

__all__ = [
    "TUNER",
    "as_tensor",
    "check_tensor",
    "empty",
    "from_numpy",
    "launch_1d",
    "normalize_axes",
    "normalize_axis",
    "result",
    "same_device",
]

TUNER = WorkGroupTuner()
"""Kept for callers outside netcl.ops; ops launch with :func:`launch_1d` (the device's one
1-D local size, see NOTE [ The 1-D launch rule ] in :mod:`netcl.core.kernels.family`)."""


def check_tensor(op: str, x: Any, name: str = "input") -> Tensor:
    """``x`` itself when it is a Tensor; ``TypeError`` naming the op otherwise."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a netcl Tensor, got {type(x).__name__}")
    return x


def same_device(op: str, *tensors: Tensor) -> Any:
    """The queue shared by ``tensors``; ``ValueError`` naming both devices otherwise."""
    return check_same_device(op, *tensors)


def empty(queue: Any, shape: Sequence[int], dtype: str) -> Tensor:
    """An uninitialized output tensor on ``queue`` (pooled on OpenCL; its checks done once per
    queue, shape and dtype: :func:`netcl.core.tensor.output_tensor`)."""
    dims = shape if type(shape) is tuple else tuple(int(d) for d in shape)
    return output_tensor(queue, dims, dtype)


def from_numpy(queue: Any, array: np.ndarray[Any, Any], dtype: str | None = None) -> Tensor:
    """Wrap a NumPy result as a Tensor on ``queue`` (no copy on the NumPy backend)."""
    dtype = canonical_dtype(dtype or array.dtype.name)
    arr = np.asarray(array, dtype=numpy_dtype(dtype), order="C")  # keeps 0-d data 0-d
    if getattr(queue, "backend", None) == "cpu":
        from netcl.core.tensor import CPU_BACKEND

        return Tensor(shape=arr.shape, dtype=dtype, queue=queue, array=arr, _backend=CPU_BACKEND)
    return Tensor.from_host(queue, arr, dtype=dtype)


def result(like: Tensor, array: np.ndarray[Any, Any], dtype: str | None = None) -> Tensor:
    """A NumPy-backend result on ``like``'s queue."""
    return from_numpy(like.queue, array, dtype)


def as_tensor(op: str, x: Any, like: Tensor, dtype: str | None = None) -> Tensor:
    """A Tensor for ``x``: Tensors pass through (device-checked), scalars/arrays are uploaded."""
    if isinstance(x, Tensor):
        same_device(op, like, x)
        return x
    return from_numpy(like.queue, np.asarray(x, dtype=numpy_dtype(dtype or like.dtype)))


def normalize_axis(op: str, axis: int, ndim: int) -> int:
    """``axis`` in ``[0, ndim)``; ``IndexError`` naming the op and values otherwise."""
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"{op}: axis must be an int, got {axis!r}")
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise IndexError(f"{op}: axis {axis} is out of range for a {ndim}-d tensor")
    return int(axis) % max(ndim, 1)


def normalize_axes(op: str, axes: int | Sequence[int] | None, ndim: int) -> tuple[int, ...]:
    """Sorted unique axes (all axes for ``None``); ``IndexError`` for bad or repeated ones."""
    if axes is None:
        return tuple(range(ndim))
    items = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    out = tuple(sorted(normalize_axis(op, a, ndim) for a in items))
    if len(set(out)) != len(out):
        raise IndexError(f"{op}: repeated axis in {axes!r}")
    return out


def launch_1d(queue: Any, kernel: Any, n: int, *args: Any) -> Any:
    """Launch ``kernel`` over ``n`` work items (rounded up; kernels guard ``gid < n``) in
    work-groups of the device's :func:`~netcl.core.kernels.family.local_size_1d`."""
    if n <= 0:
        return None
    gsize, lsize = grid_1d(n, queue_facts(queue)[2])  # local_size_1d, no driver query
    return launch(queue, kernel, gsize, lsize, *args)
