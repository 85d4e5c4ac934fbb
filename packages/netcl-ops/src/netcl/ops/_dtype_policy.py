"""The ops' dtype policy: result dtypes of mixed operands, compute dtypes, kernel scalars.

What dtype an op's result has (:func:`promote`, PyTorch's rules), what dtype arithmetic runs in
(:func:`np_compute`: float32 for float16, as the kernels' ``CT``), and how a Python number
becomes a kernel argument of that type (:func:`kernel_scalar`, range-checked for integers).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, INT_DTYPES, numpy_dtype
from netcl.core.tensor import Tensor

from ._elementwise_source import EwOp

__all__ = [
    "SCALAR_FLOAT",
    "SCALAR_INT",
    "Scalar",
    "kernel_scalar",
    "np_compute",
    "op_dtypes",
    "promote",
    "require_float",
    "scalar_kind",
]

SCALAR_INT = "<python int>"
SCALAR_FLOAT = "<python float>"
_FLOAT_RANK = {"float16": 0, "float32": 1, "float64": 2}
_INT_RANK = {"uint8": 0, "int32": 1, "int64": 2}

Scalar = int | float
_PLAIN_KINDS: dict[type, str] = {float: SCALAR_FLOAT, int: SCALAR_INT}  # the usual operands


def scalar_kind(op: str, value: Any) -> str:
    """``SCALAR_INT`` or ``SCALAR_FLOAT`` for a Python/NumPy number; ``TypeError`` otherwise."""
    kind = _PLAIN_KINDS.get(type(value))
    if kind is not None:
        return kind
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return SCALAR_INT
    if isinstance(value, (float, np.floating)):
        return SCALAR_FLOAT
    raise TypeError(f"{op}: operands must be netcl Tensors or Python numbers, "
                    f"got {type(value).__name__}")


def promote(op: str, kinds: Sequence[str]) -> str:
    """The result dtype of tensors (dtype names) and scalars (``SCALAR_*``), as in PyTorch.

    Any float tensor wins over integer tensors (the widest float); integer tensors give the
    widest integer; a Python scalar never widens a tensor's dtype, except that a float scalar
    makes an integer result float32.

    Examples:
        >>> promote("add", ["int32", "float16"]), promote("add", ["float16", SCALAR_FLOAT])
        ('float16', 'float16')
        >>> promote("add", ["uint8", "int64"]), promote("add", ["int32", SCALAR_FLOAT])
        ('int64', 'float32')
    """
    tensors = [k for k in kinds if k not in (SCALAR_INT, SCALAR_FLOAT)]
    if not tensors:
        raise TypeError(f"{op}: needs at least one Tensor operand, got only Python numbers")
    floats = [k for k in tensors if k in _FLOAT_RANK]
    if floats:
        return max(floats, key=_FLOAT_RANK.__getitem__)
    if SCALAR_FLOAT in kinds:
        return "float32"
    return max(tensors, key=_INT_RANK.__getitem__)


def require_float(op: str, t: Tensor) -> None:
    """``TypeError`` naming ``op`` unless ``t`` is a floating-point tensor."""
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: needs a floating-point tensor, got {t.dtype}; "
                        "cast it first, e.g. cast(x, 'float32')")


def np_compute(dtype: str) -> np.dtype[Any]:
    """The NumPy dtype arithmetic runs in: float32 for float16 (as on OpenCL), else ``dtype``."""
    return np.dtype(np.float32) if dtype == "float16" else numpy_dtype(dtype)


def kernel_scalar(op: str, value: Scalar, dtype: str) -> Any:
    """``value`` as the NumPy scalar type of ``CT`` for ``dtype`` (range-checked for ints)."""
    if dtype in INT_DTYPES:
        ivalue = int(value)
        info = np.iinfo(numpy_dtype(dtype))
        if not info.min <= ivalue <= info.max:
            raise ValueError(
                f"{op}: scalar {value!r} is out of range for {dtype} "
                f"[{info.min}, {info.max}]; cast the tensor to a wider dtype first"
            )
        return numpy_dtype(dtype).type(ivalue)
    ct = _FLOAT_CT.get(dtype)
    return np_compute(dtype).type(value) if ct is None else ct(value)


_FLOAT_CT: dict[str, Any] = {"float16": np.float32, "float32": np.float32,
                             "float64": np.float64}


def op_dtypes(op: EwOp, kinds: Sequence[str]) -> tuple[str, str]:
    """(compute dtype, output dtype) of elementwise ``op`` on operands of ``kinds`` (dtype
    names and ``SCALAR_*``): :func:`promote`, then the op's group and integer rules.

    Raises:
        TypeError: the op has no expression for the promoted dtype (``exp`` of integers).
    """
    key = (id(op), *kinds)
    found = _op_dtypes.get(key)
    if found is None or found[0] is not op:
        if len(_op_dtypes) >= 4096:
            _op_dtypes.clear()
        found = _op_dtypes[key] = (op, *_op_dtypes_of(op, kinds))
    return found[1], found[2]


# (id(op), *kinds) -> (op, op_dtypes' answer): a pure function of the op and kinds, asked on
# every op call (the op is held, so its id is not reused while the entry lives); only answers
# are kept (a dtype error is raised again each time)
_op_dtypes: dict[tuple[Any, ...], tuple[EwOp, str, str]] = {}


def _op_dtypes_of(op: EwOp, kinds: Sequence[str]) -> tuple[str, str]:
    promoted = promote(op.name, kinds)
    if op.group == "cmp":
        return promoted, "uint8"
    if op.int_out is not None and promoted in INT_DTYPES:
        return op.int_out, op.int_out
    if op.expression(promoted) is None:
        what = "a floating-point" if op.c_int is None else "a signed or floating-point"
        raise TypeError(
            f"{op.name}: needs {what} tensor, got {promoted}; cast it first, "
            f"e.g. cast(x, 'float32')"
        )
    return promoted, promoted
