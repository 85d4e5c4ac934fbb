"""``count_up``: add 1 to a 0-d int64 tensor in place, on its device (one work item; NumPy: in
place through ``numpy_update``), so a captured step replays the count too. BatchNorm's
``num_batches_tracked`` (PyTorch's ``num_batches_tracked.add_(1)``) is its user.

Examples:
    >>> from netcl.core import Tensor, manager
    >>> n = Tensor.from_shape(manager.default("cpu").queue, (), "int64", fill=0)
    >>> count_up(n); count_up(n)
    >>> int(n.to_host())
    2
"""

from __future__ import annotations

from typing import Any

from netcl.core.kernels.cache import get_kernel
from netcl.core.kernels.primitives import launch
from netcl.core.recording import numpy_update
from netcl.core.tensor import Tensor

__all__ = ["count_up"]

_SRC = "__kernel void nn_count_up(__global long* n) { n[0] += 1; }\n"


def count_up(t: Tensor) -> None:
    """``t += 1`` in place for a one-element int64 tensor, without a host round trip.

    Raises:
        TypeError: ``t`` is not int64 or has more than one element.
    """
    if t.dtype != "int64" or t.size != 1:
        raise TypeError(f"count_up: needs a one-element int64 tensor, got {t.dtype} of shape "
                        f"{t.shape}")
    if t.array is not None:
        numpy_update(_count_up_np, t.array)
        return
    launch(t.queue, get_kernel(t.context, _SRC, "nn_count_up"), (1,), (1,), t)


def _count_up_np(a: Any) -> None:
    a[...] += 1
