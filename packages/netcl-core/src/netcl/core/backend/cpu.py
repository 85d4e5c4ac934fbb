"""The NumPy backend's transport: every method is a NumPy call.

Examples:
    >>> import numpy as np
    >>> be = CPUBackend()
    >>> x = be.from_host(np.arange(6), dtype="float32")
    >>> be.to_host(x, (2, 3), "float32").tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..device import CPUQueue
from ..dtypes import numpy_dtype

__all__ = ["CPUBackend"]


class CPUBackend:
    """NumPy stand-in for :class:`netcl.core.backend.opencl.OpenCLBackend`."""

    name = "cpu"

    def __init__(self, queue: CPUQueue | None = None) -> None:
        self.queue = queue if queue is not None else CPUQueue()

    def from_host(self, host: Any, dtype: str = "float32") -> np.ndarray[Any, Any]:
        """A private contiguous copy of ``host`` as ``dtype``."""
        return np.array(host, dtype=numpy_dtype(dtype), order="C", copy=True)

    def from_shape(
        self, shape: Sequence[int], dtype: str = "float32", fill: float | None = 0
    ) -> np.ndarray[Any, Any]:
        """A new array of ``shape``; filled with ``fill`` (``None`` leaves it uninitialized)."""
        if fill is None:
            return np.empty(tuple(shape), dtype=numpy_dtype(dtype))
        return np.full(tuple(shape), fill, dtype=numpy_dtype(dtype))

    def to_host(self, array: np.ndarray[Any, Any], shape: Sequence[int], dtype: str) -> Any:
        """The array itself, seen with ``shape`` (no copy)."""
        return array.reshape(tuple(shape))

    def to_host_async(
        self, array: np.ndarray[Any, Any], shape: Sequence[int], dtype: str
    ) -> tuple[np.ndarray[Any, Any], None]:
        """Same as :meth:`to_host`; there is never an event on this backend."""
        return self.to_host(array, shape, dtype), None

    def wait(self, event: Any = None) -> None:
        """Nothing is ever pending."""

    def reshape(self, array: np.ndarray[Any, Any], shape: Sequence[int]) -> np.ndarray[Any, Any]:
        """A view of ``array`` with ``shape``."""
        return array.reshape(tuple(shape))
