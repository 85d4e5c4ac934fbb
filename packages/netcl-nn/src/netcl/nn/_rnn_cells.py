"""One-step recurrent cells: RNNCell, LSTMCell and GRUCell, PyTorch's signatures, formulas
and parameter names (``weight_ih``, ``weight_hh``, ``bias_ih``, ``bias_hh``).

A cell is one step of the corresponding layer: the same projection GEMM and fused scan
(:func:`~._rnn.recurrent_direction` over a sequence of one), so the cells and the layers
cannot disagree.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor

from . import functional as F
from . import init
from ._module import Module, Parameter, placement
from ._rnn import GATES, recurrent_direction

__all__ = ["GRUCell", "LSTMCell", "RNNCell", "RNNCellBase"]


class RNNCellBase(Module):
    """What the cells share: parameters (U(-1/sqrt(H), 1/sqrt(H)) as PyTorch) and checks."""

    weight_ih: Tensor
    weight_hh: Tensor

    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None,
                 rng: np.random.Generator | None = None) -> None:
        super().__init__()
        name = type(self).__name__
        for what, v in (("input_size", input_size), ("hidden_size", hidden_size)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}: {what} must be a positive int, got {v!r}")
        self.mode, self.input_size, self.hidden_size, self.bias = (mode, input_size,
                                                                   hidden_size, bool(bias))
        q, dt = placement(name, device, dtype)
        rows, bound = GATES[mode] * hidden_size, 1 / math.sqrt(hidden_size)
        shapes: list[tuple[str, tuple[int, ...]]] = [
            ("weight_ih", (rows, input_size)), ("weight_hh", (rows, hidden_size))]
        if bias:
            shapes += [("bias_ih", (rows,)), ("bias_hh", (rows,))]
        else:
            self.bias_ih: Parameter | None = None
            self.bias_hh: Parameter | None = None
        for kind, shape in shapes:
            p = Parameter.from_shape(q, shape, dt)
            init.uniform_(p, -bound, bound, rng)
            setattr(self, kind, p)

    def _check(self, x: Any, state: Any, what: str) -> tuple[Tensor, Tensor | None, bool]:
        """``x`` as (1, B, input), ``state`` as (B, H) (or None), and whether batched."""
        name = type(self).__name__
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: input must be a netcl Tensor, got {type(x).__name__}")
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size or x.size == 0:
            raise ValueError(f"{name}: expected input (batch, {self.input_size}) or "
                             f"({self.input_size},), got {x.shape}")
        batched = x.ndim == 2
        expected = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        if state is not None:
            if not isinstance(state, Tensor):
                raise TypeError(f"{name}: {what} must be a netcl Tensor, got "
                                f"{type(state).__name__}")
            if state.shape != expected:
                raise ValueError(f"{name}: expected {what} of shape {expected} for input "
                                 f"{x.shape}, got {state.shape}")
            if not batched:
                state = F.unsqueeze(state, 0)
        x = F.unsqueeze(x if batched else F.unsqueeze(x, 0), 0)
        return x, state, batched

    def _step(self, x: Tensor, h: Tensor | None, c: Tensor | None
              ) -> tuple[Tensor, Tensor | None]:
        _, h1, c1 = recurrent_direction(self.mode, x, self.weight_ih, self.weight_hh,
                                        self.bias_ih, self.bias_hh, h, c)
        return h1, c1

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            text += ", bias=False"
        if self.mode == "RNN_RELU":
            text += ", nonlinearity=relu"  # as PyTorch prints it
        return text


def _unbatch(t: Tensor, batched: bool) -> Tensor:
    return t if batched else F.squeeze(t, 0)


class RNNCell(RNNCellBase):
    """One Elman step: ``h' = act(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (tanh or relu).

    Shape:
        input ``(N, H_in)`` or ``(H_in,)``; ``hx`` ``(N, H)`` or ``(H,)`` (zeros if
        ``None``); returns ``h'`` like ``hx``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> cell = RNNCell(3, 2, nonlinearity="relu", device=q)
        >>> cell(Tensor.from_host(q, np.ones((4, 3)))).shape
        (4, 2)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None,
                 rng: np.random.Generator | None = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got "
                             f"{nonlinearity!r}")
        super().__init__(f"RNN_{nonlinearity.upper()}", input_size, hidden_size, bias,
                         device, dtype, rng)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, h, batched = self._check(input, hx, "hx")
        return _unbatch(self._step(x, h, None)[0], batched)


class GRUCell(RNNCellBase):
    """One GRU step, :class:`~netcl.nn.GRU`'s formulas.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> GRUCell(3, 2, device=q)(Tensor.from_host(q, np.ones(3))).shape
        (2,)
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None,
                 rng: np.random.Generator | None = None) -> None:
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype, rng)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        x, h, batched = self._check(input, hx, "hx")
        return _unbatch(self._step(x, h, None)[0], batched)


class LSTMCell(RNNCellBase):
    """One LSTM step, :class:`~netcl.nn.LSTM`'s formulas; ``hx`` is ``(h, c)`` or ``None``
    and the result is ``(h', c')``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> h, c = LSTMCell(3, 2, device=q)(Tensor.from_host(q, np.ones((4, 3))))
        >>> h.shape, c.shape
        ((4, 2), (4, 2))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None,
                 rng: np.random.Generator | None = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype, rng)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None
                ) -> tuple[Tensor, Tensor]:
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"LSTMCell: hx must be a tuple (h, c), got {type(hx).__name__}")
        x, h, batched = self._check(input, None if hx is None else hx[0], "h")
        _, c, _ = self._check(input, None if hx is None else hx[1], "c")
        h1, c1 = self._step(x, h, c)
        if c1 is None:  # an LSTM step always has a cell state
            raise RuntimeError("LSTMCell: the scan returned no cell state")
        return _unbatch(h1, batched), _unbatch(c1, batched)
