"""``triu``, ``tril`` and ``masked_fill``: masks a transformer builds (causal masks, padding).

Each is a ``where`` over a mask: ``triu``/``tril`` compare column and row indices
(``arange``) against the diagonal, so no mask is uploaded from the host and the ops run on
every backend (and inside captured graphs) as the elementwise kernels do.
"""

from __future__ import annotations

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.tensor import Tensor, reshape

from . import _elementwise_binary as bi
from ._common import check_tensor
from ._creation import arange

__all__ = ["masked_fill", "tril", "triu"]


def _offsets(op: str, x: Tensor, diagonal: int) -> Tensor:
    """int64 (R, C): column index minus row index of the last two dims of ``x``."""
    x = check_tensor(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must have at least 2 dimensions, got shape {x.shape}")
    if isinstance(diagonal, bool) or not isinstance(diagonal, (int, np.integer)):
        raise TypeError(f"{op}: diagonal must be an int, got {diagonal!r}")
    R, C = x.shape[-2:]
    rows = reshape(arange(x.queue, R), (R, 1))
    cols = reshape(arange(x.queue, C), (1, C))
    return bi.sub(cols, rows)


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims of ``x`` (element ``(i, j)`` kept where
    ``j - i >= diagonal``, else 0), as ``torch.triu``.

    Raises:
        TypeError: ``x`` is not a Tensor, ``diagonal`` not an int.
        ValueError: ``x`` has fewer than 2 dimensions.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((2, 3)))
        >>> triu(x).to_host().tolist()
        [[1.0, 1.0, 1.0], [0.0, 1.0, 1.0]]
        >>> triu(x, 1).to_host().tolist()
        [[0.0, 1.0, 1.0], [0.0, 0.0, 1.0]]
    """
    keep = bi.ge(_offsets("triu", x, diagonal), int(diagonal))
    return bi.where(keep, x, 0)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims of ``x`` (element ``(i, j)`` kept where
    ``j - i <= diagonal``, else 0), as ``torch.tril``; ``tril(ones(L, S))`` is the causal
    mask of ``is_causal``.

    Raises:
        TypeError: ``x`` is not a Tensor, ``diagonal`` not an int.
        ValueError: ``x`` has fewer than 2 dimensions.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((2, 3)))
        >>> tril(x).to_host().tolist()
        [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
        >>> tril(x, -1).to_host().tolist()
        [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    """
    keep = bi.le(_offsets("tril", x, diagonal), int(diagonal))
    return bi.where(keep, x, 0)


def masked_fill(x: Tensor, mask: Tensor, value: float) -> Tensor:
    """``x`` with ``value`` where ``mask`` is 1 (True), as ``torch.Tensor.masked_fill``.

    Args:
        x: any dtype.
        mask: a uint8 (0/1) tensor broadcastable to ``x``'s shape (NumPy bool arrays upload
            as uint8; comparisons return uint8).
        value: a number, converted to ``x``'s dtype (``-inf`` for attention scores).

    Raises:
        TypeError: ``x`` or ``mask`` not a Tensor, ``mask`` not uint8, ``value`` not a number.
        ValueError: ``mask`` does not broadcast to ``x``'s shape, a fractional ``value`` for
            an integer ``x``.

    Examples:
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> m = Tensor.from_host(q, np.array([True, False]))
        >>> masked_fill(x, m, -1.0).to_host().tolist()
        [[-1.0, 2.0], [-1.0, 4.0]]
    """
    x = check_tensor("masked_fill", x)
    mask = check_tensor("masked_fill", mask, "mask")
    if mask.dtype != "uint8":
        raise TypeError(f"masked_fill: mask must be a uint8 (0/1) tensor, got {mask.dtype}")
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"masked_fill: value must be a number, got {value!r}")
    try:
        fits = np.broadcast_shapes(mask.shape, x.shape) == x.shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"masked_fill: mask of shape {mask.shape} must broadcast to the "
                         f"input's shape {x.shape}")
    if x.dtype not in FLOAT_DTYPES and not float(value).is_integer():
        raise ValueError(f"masked_fill: value {value} cannot be stored in {x.dtype}")
    fill = float(value) if x.dtype in FLOAT_DTYPES else int(value)
    return bi.where(mask, fill, x)
