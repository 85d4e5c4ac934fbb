"""The dtype table shared by every backend.

Floats follow the Tensor page (``"float"``/``"float32"``, ``"half"``/``"float16"``,
``"double"``/``"float64"``); the integer dtypes are there for labels, indices and images.

Examples:
    >>> canonical_dtype("half")
    'float16'
    >>> c_type("float64")
    'double'
"""

from __future__ import annotations

from typing import Any

import numpy as np

_ALIASES: dict[str, str] = {
    "float": "float32",
    "float32": "float32",
    "half": "float16",
    "float16": "float16",
    "double": "float64",
    "float64": "float64",
    "int32": "int32",
    "int": "int32",
    "int64": "int64",
    "long": "int64",
    "uint8": "uint8",
    "uchar": "uint8",
}

_C_TYPES: dict[str, str] = {
    "float32": "float",
    "float16": "half",
    "float64": "double",
    "int32": "int",
    "int64": "long",
    "uint8": "uchar",
}

FLOAT_DTYPES = ("float32", "float16", "float64")
INT_DTYPES = ("int32", "int64", "uint8")
SUPPORTED_DTYPES = FLOAT_DTYPES + INT_DTYPES


def canonical_dtype(dtype: Any, op: str = "Tensor") -> str:
    """Map a dtype name, ``np.dtype`` or NumPy scalar type to its canonical name.

    Raises:
        ValueError: the dtype is not one netcl supports.
    """
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype)
    else:
        try:
            name = _ALIASES.get(np.dtype(dtype).name)
        except TypeError:
            name = None
    if name is None:
        raise ValueError(
            f"{op}: unsupported dtype {dtype!r}; supported: {', '.join(SUPPORTED_DTYPES)} "
            f"(aliases: float, half, double, int, long, uchar)"
        )
    return name


def check_host_dtype(dtype: np.dtype[Any], op: str, what: str = "data") -> None:
    """``TypeError`` unless host ``what`` of NumPy ``dtype`` can become a netcl dtype.

    Booleans, integers and floats can (``Tensor.from_host`` picks the dtype); complex numbers
    cannot (netcl has no complex dtype, and a cast would drop the imaginary part), nor can
    datetimes, timedeltas, strings, bytes, objects or structured records. An unsupported dtype
    *name* is :func:`canonical_dtype`'s ``ValueError``; this is about the data itself.

    Examples:
        >>> check_host_dtype(np.dtype(np.int16), "Tensor.from_host")
        >>> check_host_dtype(np.dtype(np.complex128), "Tensor.from_host")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: Tensor.from_host: data of NumPy dtype complex128 cannot go on a device: ...
    """
    if dtype.kind in "biuf":
        return
    if dtype.kind == "c":
        hint = ": netcl has no complex dtype; keep the real and imaginary parts in two tensors"
    else:
        hint = "; pass numeric data"
    raise TypeError(f"{op}: {what} of NumPy dtype {dtype} cannot go on a device{hint}")


def numpy_dtype(dtype: str) -> np.dtype[Any]:
    """The NumPy dtype for a canonical or alias name."""
    return np.dtype(canonical_dtype(dtype))


def c_type(dtype: str) -> str:
    """The OpenCL C type name that stores ``dtype``."""
    return _C_TYPES[canonical_dtype(dtype)]


def itemsize(dtype: str) -> int:
    """Bytes per element."""
    return int(numpy_dtype(dtype).itemsize)


def is_float(dtype: str) -> bool:
    """True for float16/32/64."""
    return canonical_dtype(dtype) in FLOAT_DTYPES
