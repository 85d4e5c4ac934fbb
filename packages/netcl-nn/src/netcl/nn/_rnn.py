"""Recurrent layers: RNN, LSTM and GRU (multi-layer, bidirectional, ``batch_first``), with
PyTorch's signatures, gate formulas, parameter names and weight layouts (a PyTorch state dict
loads as is).

Each layer and direction is one input-projection GEMM over the whole sequence
(:func:`~netcl.nn.functional.linear`) and one recurrent scan (:func:`rnn_scan`, the
differentiable form of :func:`netcl.ops.rnn_scan`: per time step one GEMM and one fused gate
kernel, NOTE [ The recurrent scans ] there), so the backward of a layer is the projection's
backward and the scan's backward-through-time, and nothing reads the device on the way
(capture/replay records every launch). Under :func:`netcl.nn.amp.autocast` the projection
runs in float16 and the scan follows it (the recurrent weights and states are cast per call,
their gradients come back in their own dtype); the kernels compute in float32 whatever the
storage.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

import netcl.ops as _raw
from netcl.autograd import Backward, differentiable
from netcl.core.tensor import Tensor

from . import functional as F
from . import init
from ._module import Module, Parameter, placement

__all__ = ["GRU", "LSTM", "RNN", "RNNBase", "recurrent_direction", "rnn_scan"]

#: Gates per cell, the factor between ``hidden_size`` and the rows of the weights.
GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_SCAN_MODE = {"RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu", "LSTM": "lstm", "GRU": "gru"}

State = Tensor | tuple[Tensor, Tensor]


@differentiable("rnn_scan")
def rnn_scan(mode: str, xproj: Tensor, w_hh: Tensor, b_hh: Tensor | None, h0: Tensor,
             c0: Tensor | None = None, reverse: bool = False) -> tuple[Tensor, Backward]:
    """:func:`netcl.ops.rnn_scan`, differentiable: returns its ``states`` (NOTE [ The recurrent
    scans ]); the backward is :func:`netcl.ops.rnn_scan_backward`.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((3, 1, 1)))
        >>> w, h0 = Tensor.from_host(q, np.ones((1, 1))), Tensor.from_host(q, np.zeros((1, 1)))
        >>> x.requires_grad = w.requires_grad = True
        >>> states = rnn_scan("rnn_relu", x, w, None, h0)  # h0 = 0, then h = 1, 2, 3
        >>> F.sum(states).backward()
        >>> states.to_host().ravel().tolist(), x.grad.to_host().ravel().tolist()
        ([0.0, 1.0, 2.0, 3.0], [3.0, 2.0, 1.0])
    """
    saved = _raw.rnn_scan(mode, xproj, w_hh, b_hh, h0, c0, reverse)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> list[Tensor | None]:
        dx, dw, db, dh0, dc0 = _raw.rnn_scan_backward(mode, g, w_hh, b_hh is not None, saved,
                                                      reverse)
        grads: list[Tensor | None] = [dx, dw]
        if b_hh is not None:
            grads.append(db)
        grads.append(dh0)
        if c0 is not None:
            grads.append(dc0)
        return grads

    return saved[0], backward


def _as(t: Tensor | None, dtype: str) -> Any:
    return t if t is None or t.dtype == dtype else F.cast(t, dtype)


def recurrent_direction(mode: str, x: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None,
                        b_hh: Tensor | None, h0: Tensor | None, c0: Tensor | None,
                        reverse: bool = False, w_hr: Tensor | None = None
                        ) -> tuple[Tensor, Tensor, Tensor | None]:
    """One layer and direction over ``x`` (T, B, input): ``(output (T, B, H), h_n, c_n)``.

    ``mode`` is a key of :data:`GATES`; ``h0``/``c0`` are (B, H) or ``None`` (zeros); ``c_n``
    is ``None`` outside LSTM. ``w_hr`` (P, H): an LSTM with projections (NOTE [ LSTM
    projections ]); ``w_hh`` is then (4H, P), ``h0`` (B, P) and the output (T, B, P).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((4, 2, 3)))
        >>> w_ih, w_hh = (Tensor.from_host(q, np.zeros((4 * 5, n))) for n in (3, 5))
        >>> out, h_n, c_n = recurrent_direction("LSTM", x, w_ih, w_hh, None, None, None, None)
        >>> out.shape, h_n.shape, c_n.shape
        ((4, 2, 5), (2, 5), (2, 5))
        >>> float(out.to_host().max())  # zero weights: every gate 1/2, g = 0: c = h = 0
        0.0
    """
    if w_hr is not None:
        return _projected_direction(x, w_ih, w_hh, b_ih, b_hh, h0, c0, reverse, w_hr)
    steps, batch = x.shape[0], x.shape[1]
    hidden = w_hh.shape[1]
    xproj = F.linear(x, w_ih, b_ih)
    dtype = xproj.dtype
    if h0 is None:
        h0 = _raw.zeros(xproj.queue, (batch, hidden), dtype)
    lstm = mode == "LSTM"
    if lstm and c0 is None:
        c0 = _raw.zeros(xproj.queue, (batch, hidden), dtype)
    states = rnn_scan(_SCAN_MODE[mode], xproj, _as(w_hh, dtype), _as(b_hh, dtype),
                      _as(h0, dtype), _as(c0, dtype) if lstm else None, reverse=reverse)
    first, last = (0, 0) if reverse else (1, steps)
    out = F.getitem(states, slice(first, first + steps))
    return out, F.getitem(states, last), (F.getitem(states, steps + 1) if lstm else None)


# NOTE [ LSTM projections ]
# With ``proj_size`` P, PyTorch's LSTM carries h_t = W_hr (o_t * tanh(c_t)) (P wide) instead of
# m_t = o_t * tanh(c_t) (H wide), so the gates read W_hh h_{t-1} = (W_hh W_hr) m_{t-1}. The
# layer therefore runs the ordinary LSTM scan (NOTE [ The recurrent scans ]) over m with the
# (4H, H) recurrent weight W_hh W_hr (one small matmul per call, differentiable), and projects
# all of m with one GEMM afterwards. The initial h_0 (P wide) cannot be written as W_hr m_{-1},
# so the scan starts from m_{-1} = 0 and the first step's input projection gets W_hh h_0
# added instead (the same gates). Every piece is a differentiable op: the backward is the
# scan's backward-through-time plus the matmuls', with nothing per step in Python.


def _projected_direction(x: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor | None,
                         b_hh: Tensor | None, h0: Tensor | None, c0: Tensor | None,
                         reverse: bool, w_hr: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """:func:`recurrent_direction` of an LSTM with projections (NOTE [ LSTM projections ])."""
    steps, batch = x.shape[0], x.shape[1]
    hidden = w_hr.shape[1]
    xproj = F.linear(x, w_ih, b_ih)
    dtype = xproj.dtype
    if h0 is not None:  # the first step's W_hh h_0
        first = steps - 1 if reverse else 0
        head = F.getitem(xproj, slice(first, first + 1)) + F.unsqueeze(
            F.linear(_as(h0, dtype), _as(w_hh, dtype)), 0)
        rest = F.getitem(xproj, slice(0, steps - 1) if reverse else slice(1, steps))
        xproj = F.concat([rest, head] if reverse else [head, rest], axis=0) if steps > 1 else head
    w_eff = F.matmul(_as(w_hh, dtype), _as(w_hr, dtype))
    m0 = _raw.zeros(xproj.queue, (batch, hidden), dtype)
    if c0 is None:
        c0 = _raw.zeros(xproj.queue, (batch, hidden), dtype)
    states = rnn_scan("lstm", xproj, w_eff, _as(b_hh, dtype), m0, _as(c0, dtype),
                      reverse=reverse)
    first, last = (0, 0) if reverse else (1, steps)
    w_out = _as(w_hr, dtype)
    out = F.linear(F.getitem(states, slice(first, first + steps)), w_out)
    return out, F.linear(F.getitem(states, last), w_out), F.getitem(states, steps + 1)


def _check_size(layer: str, **values: Any) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{layer}: {name} must be a positive int, got {v!r}")


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters, their checks and the layer loop.

    ``mode`` is ``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``. Parameters, for layer
    ``k`` and direction suffix ``""`` or ``"_reverse"``: ``weight_ih_l{k}{suffix}`` (G*H,
    input of the layer), ``weight_hh_l{k}{suffix}`` (G*H, H), ``bias_ih_l{k}{suffix}`` and
    ``bias_hh_l{k}{suffix}`` (G*H,), all U(-1/sqrt(H), 1/sqrt(H)) as PyTorch.
    """

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None, rng: np.random.Generator | None = None) -> None:
        super().__init__()
        name = type(self).__name__
        if mode not in GATES:
            raise ValueError(f"{name}: mode must be one of {sorted(GATES)}, got {mode!r}")
        _check_size(name, input_size=input_size, hidden_size=hidden_size,
                    num_layers=num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not (
                0 <= dropout <= 1):
            raise ValueError(f"{name}: dropout must be a number in [0, 1], got {dropout!r}")
        if isinstance(proj_size, bool) or not isinstance(proj_size, int) or proj_size < 0:
            raise ValueError(f"{name}: proj_size must be an int >= 0, got {proj_size!r}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{name}: proj_size is only supported by LSTM, got mode "
                             f"{mode!r} with proj_size={proj_size}")
        if proj_size and proj_size >= hidden_size:
            raise ValueError(f"{name}: proj_size must be smaller than hidden_size, got "
                             f"proj_size={proj_size} and hidden_size={hidden_size}")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{name}: dropout={dropout} acts between layers only, and "
                          f"num_layers=1", UserWarning, stacklevel=2)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bool(bias), bool(batch_first)
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        self.proj_size = proj_size
        where = placement(name, device, dtype)
        rows = GATES[mode] * hidden_size
        out_size = proj_size or hidden_size  # what h carries
        bound = 1 / math.sqrt(hidden_size)
        for layer in range(num_layers):
            width = input_size if layer == 0 else out_size * self.num_directions
            for suffix in self._suffixes():
                shapes: list[tuple[str, tuple[int, ...]]] = [
                    ("weight_ih", (rows, width)), ("weight_hh", (rows, out_size))]
                if bias:
                    shapes += [("bias_ih", (rows,)), ("bias_hh", (rows,))]
                if proj_size:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for kind, shape in shapes:
                    p = Parameter.from_shape(where[0], shape, where[1])
                    init.uniform_(p, -bound, bound, rng)
                    setattr(self, f"{kind}_l{layer}{suffix}", p)

    @property
    def num_directions(self) -> int:
        """2 for a bidirectional layer, else 1."""
        return 2 if self.bidirectional else 1

    def _suffixes(self) -> tuple[str, ...]:
        return ("", "_reverse") if self.bidirectional else ("",)

    def flatten_parameters(self) -> None:
        """PyTorch's cuDNN weight-packing hook: nothing to do here (kept for PyTorch code)."""

    def _weights(self, layer: int, suffix: str) -> tuple[Tensor, Tensor, Any, Any]:
        get = self.__dict__.get
        w_ih, w_hh = get(f"weight_ih_l{layer}{suffix}"), get(f"weight_hh_l{layer}{suffix}")
        if not isinstance(w_ih, Tensor) or not isinstance(w_hh, Tensor):
            raise RuntimeError(f"{type(self).__name__}: weights of layer {layer}{suffix} are "
                               "missing (deleted or replaced by a non-Tensor)")
        return w_ih, w_hh, get(f"bias_ih_l{layer}{suffix}"), get(f"bias_hh_l{layer}{suffix}")

    def _projection(self, layer: int, suffix: str) -> Tensor | None:
        if not self.proj_size:
            return None
        w_hr = self.__dict__.get(f"weight_hr_l{layer}{suffix}")
        if not isinstance(w_hr, Tensor):
            raise RuntimeError(f"{type(self).__name__}: weight_hr_l{layer}{suffix} is missing "
                               "(deleted or replaced by a non-Tensor)")
        return w_hr

    # -- forward ---------------------------------------------------------------------------

    def _check_input(self, x: Any) -> bool:
        """Whether ``x`` is batched (3-D); typed errors for anything else."""
        name = type(self).__name__
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: input must be a netcl Tensor, got {type(x).__name__}")
        if x.ndim not in (2, 3):
            raise ValueError(f"{name}: expected input of 2 dims (seq, input_size: unbatched) "
                             f"or 3 dims, got {x.ndim} dims {x.shape}")
        if x.shape[-1] != self.input_size:
            raise ValueError(f"{name}: input.size(-1) must equal input_size={self.input_size}, "
                             f"got input {x.shape}")
        if x.shape[0] == 0 or x.shape[-2] == 0 or x.size == 0:
            raise ValueError(f"{name}: input must have at least one step and one batch row, "
                             f"got {x.shape}")
        return x.ndim == 3

    def _check_state(self, t: Any, what: str, batched: bool, batch: int) -> Tensor:
        name = type(self).__name__
        n = self.num_layers * self.num_directions
        size = self.proj_size if self.proj_size and what == "h_0" else self.hidden_size
        expected = (n, batch, size) if batched else (n, size)
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: {what} must be a netcl Tensor, got {type(t).__name__}")
        if t.shape != expected:
            kind = "batched" if batched else "unbatched"
            raise ValueError(f"{name}: expected {what} of shape {expected} for {kind} input, "
                             f"got {t.shape}")
        return t if batched else F.unsqueeze(t, 1)

    def _split_state(self, hx: Any, batched: bool, batch: int
                     ) -> tuple[Tensor | None, Tensor | None]:
        name = type(self).__name__
        if hx is None:
            return None, None
        if self.mode == "LSTM":
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"{name}: hx must be a tuple (h_0, c_0), got "
                                f"{type(hx).__name__}")
            return (self._check_state(hx[0], "h_0", batched, batch),
                    self._check_state(hx[1], "c_0", batched, batch))
        if isinstance(hx, (tuple, list)):
            raise TypeError(f"{name}: hx must be a Tensor h_0, got a {type(hx).__name__}")
        return self._check_state(hx, "h_0", batched, batch), None

    def forward(self, input: Tensor, hx: State | None = None) -> tuple[Tensor, State]:
        batched = self._check_input(input)
        x = input if batched else F.unsqueeze(input, 1)
        if batched and self.batch_first:
            x = F.transpose(x, 0, 1)
        h0, c0 = self._split_state(hx, batched, x.shape[1])
        h_n: list[Tensor] = []
        c_n: list[Tensor] = []
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(self._suffixes()):
                k = layer * self.num_directions + d
                out, h, c = recurrent_direction(
                    self.mode, x, *self._weights(layer, suffix),
                    None if h0 is None else F.getitem(h0, k),
                    None if c0 is None else F.getitem(c0, k), reverse=d == 1,
                    w_hr=self._projection(layer, suffix))
                outs.append(out)
                h_n.append(h)
                if c is not None:
                    c_n.append(c)
            x = outs[0] if len(outs) == 1 else F.concat(outs, axis=2)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout)
        return self._finish(x, h_n, c_n, batched)

    def _finish(self, out: Tensor, h_n: list[Tensor], c_n: list[Tensor], batched: bool
                ) -> tuple[Tensor, State]:
        h = F.stack(h_n, 0)
        c = F.stack(c_n, 0) if c_n else None
        if not batched:
            out, h = F.squeeze(out, 1), F.squeeze(h, 1)
            c = None if c is None else F.squeeze(c, 1)
        elif self.batch_first:
            out = F.transpose(out, 0, 1)
        return out, (h if c is None else (h, c))

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"  # PyTorch's (no nonlinearity)
        if self.proj_size:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


class RNN(RNNBase):
    """Elman RNN: ``h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``, ``act`` tanh or
    relu (``nonlinearity``), stacked ``num_layers`` deep, optionally bidirectional.

    Args:
        input_size, hidden_size, num_layers, nonlinearity, bias, batch_first, dropout,
        bidirectional, device, dtype: PyTorch's (``dropout`` between layers, in training).
        rng: the generator of the initial weights (netcl's addition).

    Shape:
        input ``(L, N, H_in)`` (``(N, L, H_in)`` with ``batch_first``) or unbatched
        ``(L, H_in)``; ``hx`` ``(D * num_layers, N, H)`` (unbatched ``(D * num_layers, H)``),
        zeros when ``None``. Returns ``(output, h_n)``: output ``(L, N, D * H)``.

    Raises:
        ValueError: bad sizes, nonlinearity or dropout; input or hx of the wrong shape.
        TypeError: input or hx of the wrong kind.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> rnn = RNN(3, 5, num_layers=2, device=q, rng=np.random.default_rng(0))
        >>> out, h_n = rnn(Tensor.from_host(q, np.ones((7, 2, 3))))
        >>> out.shape, h_n.shape
        ((7, 2, 5), (2, 2, 5))
        >>> rnn
        RNN(3, 5, num_layers=2)
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None, rng: np.random.Generator | None = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(f"RNN_{nonlinearity.upper()}", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, device=device, dtype=dtype,
                         rng=rng)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory, PyTorch's formulas (gates ``i, f, g, o`` in that order in the
    weights' rows)::

        i, f, o = sigmoid(x W_i* + b_i* + h W_h* + b_h*),  g = tanh(...)
        c' = f * c + i * g,  h' = o * tanh(c')

    Args:
        as :class:`RNN` (no nonlinearity), plus ``proj_size``: when > 0, ``h`` is projected
        to ``proj_size`` features by ``weight_hr_l{k}`` (proj_size, hidden_size) each step,
        as PyTorch's LSTM with projections (NOTE [ LSTM projections ]).

    Shape:
        as :class:`RNN`; ``hx`` is a tuple ``(h_0, c_0)`` and the state returned is
        ``(h_n, c_n)``. With ``proj_size`` P, ``h_0``/``h_n`` are ``(D * num_layers, N, P)``
        and the output ``(L, N, D * P)``; ``c_0``/``c_n`` keep ``hidden_size``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> lstm = LSTM(3, 4, batch_first=True, bidirectional=True, device=q)
        >>> out, (h_n, c_n) = lstm(Tensor.from_host(q, np.ones((2, 6, 3))))
        >>> out.shape, h_n.shape, c_n.shape
        ((2, 6, 8), (2, 2, 4), (2, 2, 4))
        >>> sorted(lstm.state_dict())[:2]
        ['bias_hh_l0', 'bias_hh_l0_reverse']
        >>> proj = LSTM(3, 4, proj_size=2, device=q)
        >>> out, (h_n, c_n) = proj(Tensor.from_host(q, np.ones((6, 1, 3))))
        >>> out.shape, h_n.shape, c_n.shape, proj.weight_hr_l0.shape
        ((6, 1, 2), (1, 1, 2), (1, 1, 4), (2, 4))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None, rng: np.random.Generator | None = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device=device, dtype=dtype, rng=rng)


class GRU(RNNBase):
    """Gated recurrent unit, PyTorch's formulas (gates ``r, z, n`` in the weights' rows)::

        r, z = sigmoid(x W_i* + b_i* + h W_h* + b_h*)
        n = tanh(x W_in + b_in + r * (h W_hn + b_hn)),  h' = (1 - z) * n + z * h

    Args, Shape: as :class:`RNN` (no nonlinearity).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> gru = GRU(3, 4, device=q)
        >>> out, h_n = gru(Tensor.from_host(q, np.ones((5, 3))))  # unbatched
        >>> out.shape, h_n.shape
        ((5, 4), (1, 4))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, device: Any = None, dtype: Any = None,
                 rng: np.random.Generator | None = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, device=device, dtype=dtype, rng=rng)
