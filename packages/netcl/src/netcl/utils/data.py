"""``torch.utils.data`` for netcl: a :class:`DataLoader` yielding netcl Tensors and
:class:`TensorDataset`, so ``from torch.utils.data import DataLoader, TensorDataset`` becomes
``from netcl.utils.data import DataLoader, TensorDataset``.

netcl-data (:mod:`netcl.data`) imports no compute layer and hands out NumPy batches; this
:class:`DataLoader` is that loader (workers, samplers, every option) with each batch's arrays
wrapped as Tensors on the NumPy backend, as PyTorch's loader yields CPU tensors: the loop moves
them with ``x.to(device)`` (no copy when the device is the NumPy backend). ``netcl.manual_seed``
seeds the shuffle of loaders built without ``generator=`` (through ``netcl.data.manual_seed``).

Examples:
    >>> import numpy as np
    >>> import netcl
    >>> x = netcl.tensor(np.arange(10.0).reshape(5, 2), device="cpu")
    >>> y = netcl.tensor(np.arange(5), device="cpu")
    >>> loader = DataLoader(TensorDataset(x, y), batch_size=2)
    >>> [(type(a).__name__, a.shape, b.dtype) for a, b in loader][:2]
    [('Tensor', (2, 2), 'int64'), ('Tensor', (2, 2), 'int64')]
    >>> len(loader)
    3
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

import netcl.data as _data
from netcl.core.dtypes import canonical_dtype
from netcl.core.placement import device
from netcl.core.tensor import Tensor

__all__ = ["DataLoader", "Dataset", "TensorDataset", "random_split"]

Dataset = _data.Dataset
random_split = _data.random_split


class TensorDataset(_data.ArrayDataset):
    """Samples ``i`` of each tensor: ``dataset[i] == (t0[i], t1[i], ...)``.

    The tensors (netcl Tensors or arrays) are read to the host once; batches are gathered with
    one fancy index per tensor.

    Raises:
        ValueError: no tensors, or their first dimensions differ (as PyTorch's).
    """

    def __init__(self, *tensors: Any) -> None:
        arrays = [np.asarray(t) for t in tensors]
        if not arrays:
            raise ValueError("TensorDataset: needs at least one tensor")
        sizes = [a.shape[0] if a.ndim else None for a in arrays]
        if None in sizes or len(set(sizes)) != 1:
            raise ValueError(f"TensorDataset: every tensor needs the same first dimension, got "
                             f"shapes {[a.shape for a in arrays]}")
        super().__init__(*arrays)


class DataLoader(_data.DataLoader):
    """:class:`netcl.data.DataLoader` whose batches are netcl Tensors on the NumPy backend
    (see the module docstring); every argument is netcl.data's."""

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        queue = device("cpu").queue
        for batch in super().__iter__():
            yield _tensors(batch, queue)


def _tensors(batch: Any, queue: Any) -> Any:
    """The arrays in ``batch`` (an array, or tuples, lists and dicts of them) as Tensors."""
    if isinstance(batch, np.ndarray):
        dtype = "uint8" if batch.dtype == np.bool_ else canonical_dtype(batch.dtype)
        return Tensor.from_host(queue, batch, dtype=dtype)
    if isinstance(batch, (tuple, list)):
        return type(batch)(_tensors(b, queue) for b in batch)
    if isinstance(batch, dict):
        return {k: _tensors(v, queue) for k, v in batch.items()}
    return batch
