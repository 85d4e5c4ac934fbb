"""PyTorch-style tensor factories and ``manual_seed`` for the root namespace.

``netcl.zeros(2, 3, device="cl")`` reads as ``torch.zeros(2, 3, device=...)``: sizes as
arguments or one sequence, and keyword ``dtype=``/``device=`` (a selector string, a
DeviceHandle, a queue or ``None`` for the default device, see :mod:`netcl.core.placement`).
They call the ``netcl.ops`` creation and random ops, whose first argument is the device.

Examples:
    >>> import netcl
    >>> netcl.zeros(2, 3, device="cpu").shape, netcl.tensor([1, 2]).dtype
    ((2, 3), 'int64')
    >>> netcl.arange(3, device="cpu").tolist(), netcl.full((2,), 7.0, device="cpu").tolist()
    ([0, 1, 2], [7.0, 7.0])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import netcl.data
import netcl.ops as ops
from netcl.core.dtypes import canonical_dtype
from netcl.core.placement import resolve_queue
from netcl.core.tensor import Tensor

__all__ = [
    "arange",
    "empty",
    "from_numpy",
    "full",
    "manual_seed",
    "ones",
    "ones_like",
    "rand",
    "randn",
    "tensor",
    "zeros",
    "zeros_like",
]


def _size(op: str, size: tuple[Any, ...]) -> tuple[int, ...]:
    """``zeros(2, 3)``, ``zeros((2, 3))`` and ``zeros([2, 3])`` alike."""
    if len(size) == 1 and isinstance(size[0], Sequence):
        size = tuple(size[0])
    for d in size:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{op}: sizes must be ints, got {size!r}")
    return tuple(int(d) for d in size)


def _dtype(dtype: Any, default: str) -> str:
    return default if dtype is None else canonical_dtype(dtype)


def tensor(data: Any, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, a NumPy array, a number or a
    Tensor).

    Without ``dtype``: float data gives float32, integer data int64 (a NumPy int32/uint8
    array keeps its dtype), booleans uint8 (netcl has no bool dtype).

    Examples:
        >>> tensor([[1.0, 2.0]], device="cpu").dtype, tensor(True, device="cpu").dtype
        ('float32', 'uint8')
    """
    if isinstance(data, Tensor):
        data = data.to_host()
    arr = np.asarray(data)
    if dtype is None:
        kind = arr.dtype.kind
        if kind == "b":
            dtype = "uint8"
        elif kind in "iu":
            keep = isinstance(data, np.ndarray) and arr.dtype.name in ("int32", "uint8")
            dtype = arr.dtype.name if keep else "int64"
        else:
            dtype = "float32"
    out = Tensor.from_host(resolve_queue(device, "tensor"), arr, dtype=canonical_dtype(dtype))
    out.requires_grad = bool(requires_grad)
    return out


def from_numpy(array: np.ndarray[Any, Any], device: Any = None) -> Tensor:
    """``array`` as a tensor of the same dtype (a copy on the device).

    Examples:
        >>> from_numpy(np.arange(3, dtype=np.int32), device="cpu").dtype
        'int32'
    """
    return Tensor.from_host(resolve_queue(device, "from_numpy"), array,
                            dtype=canonical_dtype(array.dtype))


def zeros(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor of 0s (float32 without ``dtype``)."""
    return ops.zeros(None, _size("zeros", size), _dtype(dtype, "float32"), device=device)


def ones(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """A tensor of 1s (float32 without ``dtype``)."""
    return ops.ones(None, _size("ones", size), _dtype(dtype, "float32"), device=device)


def full(size: Sequence[int] | int, fill_value: float, dtype: Any = None,
         device: Any = None) -> Tensor:
    """A tensor filled with ``fill_value`` (int64 for an int value, else float32)."""
    return ops.full(None, size, fill_value, None if dtype is None else canonical_dtype(dtype),
                    device=device)


def empty(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """An uninitialized tensor (float32 without ``dtype``)."""
    return Tensor.from_shape(resolve_queue(device, "empty"), _size("empty", size),
                             _dtype(dtype, "float32"), fill=None)


def zeros_like(x: Tensor, dtype: Any = None, device: Any = None) -> Tensor:
    """0s of ``x``'s shape, dtype and device (unless given)."""
    return ops.zeros(x.queue if device is None else device, x.shape,
                     x.dtype if dtype is None else canonical_dtype(dtype))


def ones_like(x: Tensor, dtype: Any = None, device: Any = None) -> Tensor:
    """1s of ``x``'s shape, dtype and device (unless given)."""
    return ops.ones(x.queue if device is None else device, x.shape,
                    x.dtype if dtype is None else canonical_dtype(dtype))


def rand(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Uniform values in [0, 1) from the default generator (:func:`manual_seed` repeats them)."""
    return ops.uniform(resolve_queue(device, "rand"), _size("rand", size),
                       dtype=_dtype(dtype, "float32"))


def randn(*size: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Standard normal values from the default generator."""
    return ops.normal(resolve_queue(device, "randn"), _size("randn", size),
                      dtype=_dtype(dtype, "float32"))


def arange(start: float, end: float | None = None, step: float = 1, dtype: Any = None,
           device: Any = None) -> Tensor:
    """``start, start + step, ...`` below ``end`` (int64 when every argument is an int)."""
    return ops.arange(None, start, end, step, None if dtype is None else canonical_dtype(dtype),
                      device=device)


def manual_seed(seed: int) -> ops.Generator:
    """Seed everything netcl draws without an explicit seed (PyTorch's ``torch.manual_seed``):
    parameter initialisation of layers built without ``rng=``, dropout masks, ``rand``/``randn``
    (the default generator of :mod:`netcl.ops`), and the shuffle order of DataLoaders built
    without ``generator=`` (``netcl.data.manual_seed``). Returns the default generator.

    Examples:
        >>> import netcl
        >>> _ = netcl.manual_seed(3)
        >>> a = netcl.rand(4, device="cpu").tolist()
        >>> _ = netcl.manual_seed(3)
        >>> a == netcl.rand(4, device="cpu").tolist()
        True
    """
    generator = ops.manual_seed(seed)
    netcl.data.manual_seed(seed)
    return generator
