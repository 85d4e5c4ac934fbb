"""Turning a list of dataset items into one batch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def default_collate(items: Sequence[Any]) -> Any:
    """Stack a list of items into a batch, field by field.

    Arrays and NumPy scalars are stacked along a new first axis; Python ``int``, ``float`` and
    ``bool`` become ``int64``, ``float32`` and ``bool`` arrays; tuples and lists are collated
    per position (a tuple of batches comes back); dicts per key; strings stay a list.

    Args:
        items: the dataset items of one batch, all of the same structure and shapes.

    Returns:
        The batch.

    Raises:
        ValueError: items have different shapes, lengths or keys, or there are no items.
        TypeError: an item holds a type that cannot be collated.

    Examples:
        >>> import numpy as np
        >>> x, y = default_collate([(np.zeros((2, 3)), 1), (np.ones((2, 3)), 0)])
        >>> x.shape, y.dtype
        ((2, 2, 3), dtype('int64'))
    """
    if len(items) == 0:
        raise ValueError("default_collate: a batch needs at least one item, got 0 items")
    return _collate(items, "item")


def _collate(items: Sequence[Any], path: str) -> Any:
    first = items[0]
    if isinstance(first, np.ndarray | np.generic):
        return _stack(items, path)
    if isinstance(first, bool):
        return np.asarray(_same_kind(items, bool, path), dtype=np.bool_)
    if isinstance(first, int):
        return np.asarray(_same_kind(items, int, path), dtype=np.int64)
    if isinstance(first, float):
        return np.asarray(_same_kind(items, float, path), dtype=np.float32)
    if isinstance(first, str):
        return list(_same_kind(items, str, path))
    if isinstance(first, Mapping):
        keys = list(first.keys())
        for k, item in enumerate(items):
            if not isinstance(item, Mapping) or list(item.keys()) != keys:
                got: object = (
                    list(item.keys()) if isinstance(item, Mapping) else type(item).__name__
                )
                raise ValueError(
                    f"default_collate: every item must have the same keys, {path} 0 has "
                    f"{keys} and {path} {k} has {got}"
                )
        return {key: _collate([item[key] for item in items], f"{path}[{key!r}]") for key in keys}
    if isinstance(first, tuple | list):
        width = len(first)
        for k, item in enumerate(items):
            if not isinstance(item, tuple | list) or len(item) != width:
                n_fields: object = (
                    len(item) if isinstance(item, tuple | list) else type(item).__name__
                )
                raise ValueError(
                    f"default_collate: every item must have the same number of fields, "
                    f"{path} 0 has {width} and {path} {k} has {n_fields}"
                )
        return tuple(_collate([item[f] for item in items], f"{path}[{f}]") for f in range(width))
    raise TypeError(
        f"default_collate: cannot collate {path} of type {type(first).__name__}; items must be "
        "arrays, numbers, strings, or tuples/lists/dicts of those (or pass collate_fn)"
    )


def _same_kind(items: Sequence[Any], kind: type, path: str) -> Sequence[Any]:
    for k, item in enumerate(items):
        if not isinstance(item, kind):
            raise TypeError(
                f"default_collate: every {path} must have one type, {path} 0 is "
                f"{kind.__name__} and {path} {k} is {type(item).__name__}"
            )
    return items


def _stack(items: Sequence[Any], path: str) -> np.ndarray[Any, Any]:
    first = np.asarray(items[0])
    for k, item in enumerate(items):
        arr = np.asarray(item)
        if arr.shape != first.shape:
            raise ValueError(
                f"default_collate: items must share one shape to stack into a batch, "
                f"{path} 0 has shape {first.shape} and {path} {k} has shape {arr.shape}"
            )
        if arr.dtype != first.dtype:
            raise TypeError(
                f"default_collate: items must share one dtype to stack into a batch, "
                f"{path} 0 has dtype {first.dtype} and {path} {k} has dtype {arr.dtype}"
            )
    return np.stack([np.asarray(item) for item in items])
