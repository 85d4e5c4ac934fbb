"""Building one batch: the single function that both the parent and the workers run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._collate import default_collate
from ._sampler import batch_rng
from .transforms import batch_scope

CollateFn = Callable[[Sequence[Any]], Any]
BatchTransform = Callable[[npt.NDArray[Any], np.random.Generator], npt.NDArray[Any]]


def fetch_batch(
    dataset: Any,
    indices: npt.NDArray[np.int64],
    collate_fn: CollateFn | None,
    transform: BatchTransform | None,
    seed: int,
    epoch: int,
    batch_index: int,
) -> Any:
    """Load, collate and transform batch ``batch_index`` of ``epoch``."""
    with batch_scope(seed, epoch, batch_index):  # per-sample transforms draw from it
        batch = _load(dataset, indices, collate_fn, epoch, batch_index)
    if transform is None:
        return batch
    rng = batch_rng(seed, epoch, batch_index)
    if isinstance(batch, np.ndarray):
        return transform(batch, rng)
    if isinstance(batch, tuple | list) and batch and isinstance(batch[0], np.ndarray):
        return type(batch)([transform(batch[0], rng), *batch[1:]])
    raise TypeError(
        "DataLoader: transform applies to the batch's inputs, so the batch must be an array "
        f"or a tuple/list whose first element is an array, got {type(batch).__name__}"
    )


def _load(
    dataset: Any,
    indices: npt.NDArray[np.int64],
    collate_fn: CollateFn | None,
    epoch: int,
    batch_index: int,
) -> Any:
    if collate_fn is None:
        get_batch = getattr(dataset, "get_batch", None)
        if callable(get_batch):
            batch = get_batch(indices)
        else:
            batch = default_collate([dataset[int(i)] for i in indices])
    else:
        items = [dataset[int(i)] for i in indices]
        try:
            batch = collate_fn(items)
        except Exception as exc:
            name = getattr(collate_fn, "__qualname__", type(collate_fn).__name__)
            raise RuntimeError(
                f"DataLoader: collate_fn {name} must turn a list of items into a batch, but it "
                f"raised {type(exc).__name__} on batch {batch_index} of epoch {epoch} "
                f"({len(items)} items, indices {indices[:8].tolist()}"
                f"{'...' if len(indices) > 8 else ''}): {exc}"
            ) from exc
    return batch
