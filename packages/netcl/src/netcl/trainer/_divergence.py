"""Noticing divergence: the error a diverged run stops with, and the finiteness checks behind it.

# NOTE [ Checking the loss without a sync per step ]
# The trainer queues each step's loss (a device scalar) and reads the queued losses back in one
# transfer every ``CHECK_EVERY`` steps and at the end of the epoch (``stack`` on the device,
# then one ``to_host``), the same reads that already fed the progress bar and the epoch mean.
# So a NaN is noticed at most ``CHECK_EVERY`` steps late, and a GPU is never made to wait for
# each step's loss. Under AMP a step whose gradients held inf/NaN was skipped by the
# GradScaler (the weights did not change), so a non-finite loss on such a step is excused and
# left out of the epoch mean; an interval in which *no* loss is finite stops the run even
# then, because the scaler would go on skipping forever.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["CHECK_EVERY", "DivergenceError", "non_finite_report"]

CHECK_EVERY = 16  # steps between loss read-backs (and divergence checks)


class DivergenceError(FloatingPointError):
    """Training diverged: a loss or a weight is NaN or infinite.

    Attributes:
        epoch: the 0-based epoch it happened in (``None`` when not known).
        step: the 0-based step (batch) within that epoch (``None`` for a weight check).
        loss: the non-finite loss that was seen (``None`` for a weight check).

    Examples:
        >>> err = DivergenceError("loss is nan", epoch=0, step=3, loss=float("nan"))
        >>> isinstance(err, FloatingPointError), err.epoch, err.step
        (True, 0, 3)
    """

    __module__ = "netcl.trainer"  # its public home, for tracebacks and reprs

    def __init__(self, message: str, epoch: int | None = None, step: int | None = None,
                 loss: float | None = None) -> None:
        super().__init__(message)
        self.epoch, self.step, self.loss = epoch, step, loss


def non_finite_report(arrays: Mapping[str, np.ndarray[Any, Any]], limit: int = 3) -> str:
    """``""`` when every floating-point array is finite, else which ones are not and how.

    Examples:
        >>> ok = {"w": np.ones(3, np.float32), "n": np.arange(2)}
        >>> non_finite_report(ok)
        ''
        >>> non_finite_report({"w": np.array([1.0, np.nan, np.inf], np.float32)})
        'w has 1 NaN and 1 inf of 3 values'
    """
    bad = []
    for name, arr in arrays.items():
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            nans = int(np.isnan(arr).sum())
            infs = int(np.isinf(arr).sum())
            bad.append(f"{name} has {nans} NaN and {infs} inf of {arr.size} values")
    more = f" (and {len(bad) - limit} more tensors)" if len(bad) > limit else ""
    return "; ".join(bad[:limit]) + more
