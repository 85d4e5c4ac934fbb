"""Argument checks of :mod:`netcl.core.kernel_selector`."""

from __future__ import annotations

import json
import operator
from typing import Any

from netcl.core.dtypes import FLOAT_DTYPES, canonical_dtype


def _int_arg(fn: str, name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{fn}: {name} must be an integer, got {value!r}")
    try:
        result = operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an integer, got {value!r}") from None
    if result < minimum:
        raise ValueError(f"{fn}: {name} must be >= {minimum}, got {result}")
    return result


def _pair_arg(fn: str, name: str, value: Any, minimum: int) -> tuple[int, int]:
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValueError(f"{fn}: {name} must be an int or a pair, got {value!r}")
        return (_int_arg(fn, name, value[0], minimum), _int_arg(fn, name, value[1], minimum))
    v = _int_arg(fn, name, value, minimum)
    return (v, v)


def _bool_arg(fn: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{fn}: {name} must be a bool, got {value!r}")
    return value


def _float_dtype(fn: str, dtype: Any) -> str:
    name = canonical_dtype(dtype, op=fn)
    if name not in FLOAT_DTYPES:
        raise TypeError(f"{fn}: dtype must be one of {', '.join(FLOAT_DTYPES)}, got {dtype!r}")
    return name


def _json_key(fn: str, key: Any) -> list[Any]:
    """The JSON form of a tuning key; rejects keys that would not come back equal."""
    if not isinstance(key, tuple):
        raise TypeError(f"{fn}: key must be a tuple, got {type(key).__name__}")
    try:
        out: list[Any] = json.loads(json.dumps(key))
    except (TypeError, ValueError):
        out = []
    if _tuple_key(out) != key:
        raise TypeError(f"{fn}: key items must be str/int/float/bool/None/tuple, got {key!r}")
    return out


def _tuple_key(value: Any) -> Any:
    return tuple(_tuple_key(v) for v in value) if isinstance(value, list) else value
