"""The NumPy backend's transport: every method is a NumPy call.

Examples:
    >>> import numpy as np
    >>> be = CPUBackend()
    >>> x = be.from_host(np.arange(6), dtype="float32")
    >>> be.to_host(x, (2, 3), "float32").tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..device import CPUQueue
from ..dtypes import numpy_dtype
from ..memory import allocation_error, format_bytes

__all__ = ["CPUBackend"]

_MAX_BYTES = int(np.iinfo(np.intp).max)  # the most bytes one NumPy array can span


class CPUBackend:
    """NumPy stand-in for :class:`netcl.core.backend.opencl.OpenCLBackend`."""

    name = "cpu"

    def __init__(self, queue: CPUQueue | None = None) -> None:
        self.queue = queue if queue is not None else CPUQueue()

    def from_host(self, host: Any, dtype: str = "float32") -> np.ndarray[Any, Any]:
        """A private contiguous copy of ``host`` as ``dtype``.

        Raises:
            MemoryError: the host cannot hold the copy (see :meth:`from_shape`).
        """
        try:
            return np.array(host, dtype=numpy_dtype(dtype), order="C", copy=True)
        except MemoryError:
            raise _cannot_allocate(np.shape(host), dtype) from None

    def from_shape(
        self, shape: Sequence[int], dtype: str = "float32", fill: float | None = 0
    ) -> np.ndarray[Any, Any]:
        """A new array of ``shape``; filled with ``fill`` (``None`` leaves it uninitialized).

        Raises:
            MemoryError: NumPy cannot allocate it; the message names the size and the host's
                memory, in the OpenCL backend's wording.
        """
        try:
            if fill is None:
                return np.empty(tuple(shape), dtype=numpy_dtype(dtype))
            return np.full(tuple(shape), fill, dtype=numpy_dtype(dtype))
        except MemoryError:
            raise _cannot_allocate(shape, dtype) from None
        except ValueError:  # "array is too big" past the address space; else a bad fill
            if math.prod(shape) * numpy_dtype(dtype).itemsize <= _MAX_BYTES:
                raise
            raise _cannot_allocate(shape, dtype) from None

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


def _cannot_allocate(shape: Sequence[int], dtype: str) -> MemoryError:
    if math.prod(shape) * numpy_dtype(dtype).itemsize > _MAX_BYTES:
        return allocation_error(
            shape, dtype, "cpu", f"one NumPy array spans at most {format_bytes(_MAX_BYTES)}"
        )
    reason = "NumPy could not get it from the host"
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # no sysconf (Windows)
        return allocation_error(shape, dtype, "cpu", reason)
    return allocation_error(shape, dtype, "cpu", f"{reason}, whose memory is {format_bytes(total)}")
