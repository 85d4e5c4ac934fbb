"""Argument checks shared by the selector and the families' ``parse`` functions.

Each raises the documented error with a message naming the function, the argument and the
value, so a family's ``select_*`` wrapper reports bad input the same way as every other.

Examples:
    >>> int_arg("select_matmul_kernel", "M", 8, 1)
    8
    >>> int_arg("select_matmul_kernel", "M", 0, 1)
    Traceback (most recent call last):
    ...
    ValueError: select_matmul_kernel: M must be >= 1, got 0
    >>> pair_arg("select_conv2d_kernel", "stride", 2, 1)
    (2, 2)
"""

from __future__ import annotations

import json
import operator
from typing import Any

from netcl.core.dtypes import FLOAT_DTYPES, canonical_dtype

__all__ = ["bool_arg", "float_dtype_arg", "int_arg", "json_key", "pair_arg", "tuple_key"]


def int_arg(fn: str, name: str, value: Any, minimum: int) -> int:
    """``value`` as an int of at least ``minimum`` (bools refused).

    Raises:
        TypeError: not an integer.
        ValueError: below ``minimum``.
    """
    if isinstance(value, bool):
        raise TypeError(f"{fn}: {name} must be an integer, got {value!r}")
    try:
        result = operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an integer, got {value!r}") from None
    if result < minimum:
        raise ValueError(f"{fn}: {name} must be >= {minimum}, got {result}")
    return result


def pair_arg(fn: str, name: str, value: Any, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints, each at least ``minimum``, as a pair.

    Raises:
        TypeError: an item is not an integer.
        ValueError: not a pair, or an item below ``minimum``.
    """
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{fn}: {name} must be an int or a pair, got {value!r}")
        return (int_arg(fn, name, value[0], minimum), int_arg(fn, name, value[1], minimum))
    v = int_arg(fn, name, value, minimum)
    return (v, v)


def bool_arg(fn: str, name: str, value: Any) -> bool:
    """``value`` if it is a bool.

    Raises:
        TypeError: anything else (``1`` included).

    Examples:
        >>> bool_arg("f", "training", True)
        True
    """
    if not isinstance(value, bool):
        raise TypeError(f"{fn}: {name} must be a bool, got {value!r}")
    return value


def float_dtype_arg(fn: str, dtype: Any) -> str:
    """The canonical name of a float dtype.

    Raises:
        ValueError: an unknown dtype.
        TypeError: a dtype that is not a float type.

    Examples:
        >>> float_dtype_arg("f", "half")
        'float16'
    """
    name = canonical_dtype(dtype, op=fn)
    if name not in FLOAT_DTYPES:
        raise TypeError(f"{fn}: dtype must be one of {', '.join(FLOAT_DTYPES)}, got {dtype!r}")
    return name


def json_key(fn: str, key: Any) -> list[Any]:
    """The JSON form of a tuning key; rejects keys that would not come back equal.

    Raises:
        TypeError: not a tuple, or items that are not str/int/float/bool/None/tuple.

    Examples:
        >>> json_key("f", (1, "float32", (2, 2)))
        [1, 'float32', [2, 2]]
    """
    if not isinstance(key, tuple):
        raise TypeError(f"{fn}: key must be a tuple, got {type(key).__name__}")
    try:
        out: list[Any] = json.loads(json.dumps(key))
    except (TypeError, ValueError):
        out = []
    if tuple_key(out) != key:
        raise TypeError(f"{fn}: key items must be str/int/float/bool/None/tuple, got {key!r}")
    return out


def tuple_key(value: Any) -> Any:
    """A JSON key back as the tuple it was made from (lists become tuples, recursively).

    Examples:
        >>> tuple_key([1, [2, 2]])
        (1, (2, 2))
    """
    return tuple(tuple_key(v) for v in value) if isinstance(value, list) else value
