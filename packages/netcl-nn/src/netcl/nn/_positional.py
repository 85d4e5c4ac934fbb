"""Position information for sequence models: ``SinusoidalPositionalEncoding`` (the fixed sines
and cosines of "Attention Is All You Need", the ``PositionalEncoding`` of PyTorch's
transformer tutorial) and ``LearnedPositionalEmbedding`` (a trained vector per position, as
GPT-2's ``wpe``). PyTorch has no layer of either: netcl names them for what they add.

Both add to an input of (S, N, E) (``batch_first``: (N, S, E)) the vectors of positions
``0..S-1`` and apply dropout; the sequence may be at most ``max_len`` long.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> pe = SinusoidalPositionalEncoding(4, max_len=16, batch_first=True, device=q)
    >>> pe(Tensor.from_host(q, np.zeros((1, 2, 4)))).to_host()[0].astype(float).round(3).tolist()
    [[0.0, 1.0, 0.0, 1.0], [0.841, 0.54, 0.01, 1.0]]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netcl.autograd import ops as _ops
from netcl.core.tensor import Tensor

from . import functional as F
from . import init
from ._layers import Dropout
from ._module import Module, Parameter, placement

__all__ = ["LearnedPositionalEmbedding", "SinusoidalPositionalEncoding"]


def sinusoidal_table(max_len: int, d_model: int) -> np.ndarray[Any, Any]:
    """``pe[pos, 2i] = sin(pos / 10000^(2i/d))``, ``pe[pos, 2i+1] = cos(pos / 10000^(2i/d))``
    (float64, (max_len, d_model); an odd ``d_model`` ends with a sine column).

    Examples:
        >>> sinusoidal_table(2, 3).round(4).tolist()
        [[0.0, 1.0, 0.0], [0.8415, 0.5403, 0.0022]]
    """
    position = np.arange(max_len, dtype=np.float64)[:, None]
    div = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))
    table = np.zeros((max_len, d_model))
    table[:, 0::2] = np.sin(position * div)
    table[:, 1::2] = np.cos(position * div[:d_model // 2])
    return table


class _Positions(Module):
    """``x + table[:S]`` (broadcast over the batch), then dropout."""

    def __init__(self, layer: str, max_len: int, d_model: int, dropout: float,
                 batch_first: bool) -> None:
        super().__init__()
        for name, v in (("max_len", max_len), ("d_model", d_model)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{layer}: {name} must be a positive int, got {v!r}")
        self.max_len, self.d_model, self.batch_first = max_len, d_model, batch_first
        self.dropout = Dropout(dropout)

    def _add(self, x: Tensor, table: Tensor) -> Tensor:
        name = type(self).__name__
        if x.ndim not in (2, 3) or x.shape[-1] != self.d_model:
            raise ValueError(f"{name}: expected input (S, N, {self.d_model}), (N, S, "
                             f"{self.d_model}) with batch_first, or (S, {self.d_model}), got "
                             f"{x.shape}")
        length = x.shape[1 if self.batch_first and x.ndim == 3 else 0]
        if length > self.max_len:
            raise ValueError(f"{name}: sequence length {length} exceeds max_len="
                             f"{self.max_len} (input {x.shape})")
        rows = _ops.slice(table, [0], [length])
        if x.ndim == 3 and not self.batch_first:
            rows = _ops.reshape(rows, (length, 1, self.d_model))
        return self.dropout(F.add(x, rows))  # type: ignore[no-any-return]

    def extra_repr(self) -> str:
        return f"{self.d_model}, max_len={self.max_len}, batch_first={self.batch_first}"


class SinusoidalPositionalEncoding(_Positions):
    """Adds the fixed sinusoidal position code of Vaswani et al.
    (:func:`sinusoidal_table`), then dropout. The table is a non-persistent buffer: it moves
    with the module but is not in the ``state_dict`` (PyTorch's tutorial saves it; pass
    ``strict=False`` to load such a state dict, or drop its ``pe`` key).

    Args:
        d_model: feature width E; max_len: longest sequence; dropout: p after the addition;
        batch_first: input (N, S, E) instead of (S, N, E).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> pe = SinusoidalPositionalEncoding(6, max_len=32, device=q)
        >>> pe(Tensor.from_host(q, np.zeros((5, 2, 6)))).shape, list(pe.state_dict())
        ((5, 2, 6), [])
    """

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0,
                 batch_first: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__("SinusoidalPositionalEncoding", max_len, d_model, dropout,
                         batch_first)
        self.table: Tensor
        queue, dt = placement("SinusoidalPositionalEncoding", device, dtype)
        self.register_buffer("table", Tensor.from_host(queue, sinusoidal_table(max_len,
                                                                                d_model),
                                                       dtype=dt), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return self._add(x, self.table)


class LearnedPositionalEmbedding(_Positions):
    """Adds a learned vector per position (``weight``, (max_len, E), drawn N(0, ``std``^2);
    GPT-2 uses std 0.02), then dropout. Position ``i`` of every sequence gets ``weight[i]``.

    Args:
        max_len: positions learned; d_model: feature width E; dropout: p after the addition;
        batch_first: input (N, S, E) instead of (S, N, E); std: the initial weights' spread.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> wpe = LearnedPositionalEmbedding(16, 4, batch_first=True, device=q)
        >>> y = wpe(Tensor.from_host(q, np.zeros((3, 5, 4))))
        >>> y.shape, bool((y.to_host()[0] == wpe.weight.to_host()[:5]).all())
        ((3, 5, 4), True)
    """

    def __init__(self, max_len: int, d_model: int, dropout: float = 0.0,
                 batch_first: bool = False, std: float = 0.02, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__("LearnedPositionalEmbedding", max_len, d_model, dropout, batch_first)
        queue, dt = placement("LearnedPositionalEmbedding", device, dtype)
        self.weight = Parameter.from_shape(queue, (max_len, d_model), dt)
        init.normal_(self.weight, 0.0, std)

    def forward(self, x: Tensor) -> Tensor:
        return self._add(x, self.weight)
