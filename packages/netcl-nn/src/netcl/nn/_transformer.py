"""The transformer layers of ``torch.nn``: ``TransformerEncoderLayer``,
``TransformerDecoderLayer``, ``TransformerEncoder``, ``TransformerDecoder`` and
``Transformer`` (with ``generate_square_subsequent_mask``), PyTorch's signatures, formulas,
submodule names and initialisation, so a PyTorch model's ``state_dict`` loads as it is.

Self-attention runs through :class:`~netcl.nn.MultiheadAttention` with ``need_weights=False``:
the fused attention kernels. Nothing reads the device in a forward (no mask inspection:
``is_causal=None`` means "not causal" here, where PyTorch compares the mask with a causal one
on the host), so a training step that uses these layers can be captured and replayed.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> layer = TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, device=q)
    >>> encoder = TransformerEncoder(layer, num_layers=2)
    >>> x = Tensor.from_host(q, np.ones((3, 5, 8)))
    >>> mask = Transformer.generate_square_subsequent_mask(5, device=q)
    >>> encoder(x, mask=mask, is_causal=True).shape
    (3, 5, 8)
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor

from . import functional as F
from . import init
from ._attention import MultiheadAttention, check_dropout, check_heads
from ._containers import ModuleList
from ._layers import Dropout, LayerNorm, Linear
from ._module import Module, default_queue, device_queue, placement

__all__ = [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

Activation = str | Callable[[Tensor], Tensor]


def _activation(layer: str, activation: Activation) -> Callable[[Tensor], Tensor]:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if isinstance(activation, str) or not callable(activation):
        raise ValueError(f"{layer}: activation must be 'relu', 'gelu' or a callable, got "
                         f"{activation!r}")
    return activation


class _ScaleOnlyLayerNorm(LayerNorm):
    """PyTorch's ``LayerNorm(bias=False)``: a learned scale and no shift (no ``bias`` in the
    state dict). netcl's layer-norm kernels apply weight and bias together, so a zero bias
    buffer (not saved) stands in."""

    zero_bias: Tensor

    def __init__(self, d_model: int, eps: float, queue: Any, dtype: str) -> None:
        super().__init__(d_model, eps=eps, device=queue, dtype=dtype)
        self.bias = None
        self.register_buffer("zero_bias", Tensor.from_shape(queue, (d_model,), dtype, fill=0),
                             persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.zero_bias,
                            eps=self.eps)


def _layer_norm(d_model: int, eps: float, bias: bool, queue: Any, dtype: str) -> LayerNorm:
    if bias:
        return LayerNorm(d_model, eps=eps, device=queue, dtype=dtype)
    return _ScaleOnlyLayerNorm(d_model, eps, queue, dtype)


class _Block(Module):
    """What the encoder and decoder layers share: self-attention, the feed-forward block,
    norms and dropouts (three of each and the cross-attention in a decoder layer)."""

    norm1: LayerNorm
    norm2: LayerNorm
    norm3: LayerNorm
    dropout1: Dropout
    dropout2: Dropout
    dropout3: Dropout
    multihead_attn: MultiheadAttention

    def __init__(self, layer: str, d_model: int, nhead: int, dim_feedforward: int,
                 dropout: float, activation: Activation, layer_norm_eps: float,
                 batch_first: bool, norm_first: bool, bias: bool, decoder: bool, device: Any,
                 dtype: Any) -> None:
        super().__init__()
        check_heads(layer, d_model, nhead)
        check_dropout(layer, dropout)
        queue, dt = placement(layer, device, dtype)
        where = {"device": queue, "dtype": dt}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **where)
        if decoder:
            self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout,
                                                     bias=bias, batch_first=batch_first, **where)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **where)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **where)
        self.norm_first, self.batch_first = norm_first, batch_first
        for i in range(1, 4 if decoder else 3):
            setattr(self, f"norm{i}", _layer_norm(d_model, layer_norm_eps, bias, queue, dt))
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(layer, activation)

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None,
                  key_padding_mask: Tensor | None, is_causal: bool) -> Tensor:
        out, _ = self.self_attn(x, x, x, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)
        dropped: Tensor = self.dropout1(out)
        return dropped

    def _ff_block(self, x: Tensor, dropout: Dropout) -> Tensor:
        hidden = self.dropout(self.activation(self.linear1(x)))
        out: Tensor = dropout(self.linear2(hidden))
        return out

    def _residual(self, x: Tensor, norm: LayerNorm, block: Callable[[Tensor], Tensor]
                  ) -> Tensor:
        """``x + block(norm(x))`` (``norm_first``) or ``norm(x + block(x))``."""
        if self.norm_first:
            return F.add(x, block(norm(x)))
        out: Tensor = norm(F.add(x, block(x)))
        return out


class TransformerEncoderLayer(_Block):
    """Self-attention and a feed-forward network, each with a residual connection and layer
    norm (``torch.nn.TransformerEncoderLayer``, "Attention Is All You Need")::

        norm_first=False:  x = norm1(x + sa(x));  x = norm2(x + ff(x))
        norm_first=True:   x = x + sa(norm1(x));  x = x + ff(norm2(x))

    with ``sa`` = dropout1(self_attn(x, x, x)) and ``ff`` =
    dropout2(linear2(dropout(activation(linear1(x))))).

    Args:
        d_model: model width; nhead: attention heads (must divide ``d_model``);
        dim_feedforward: hidden width of the feed-forward network; dropout: every dropout's p;
        activation: ``"relu"``, ``"gelu"`` or a callable (a Module is registered as a
        submodule); layer_norm_eps; batch_first: (N, S, E) instead of (S, N, E);
        norm_first: pre-norm; bias: biases of the linear layers, attention and layer norms.

    Shape:
        ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``: src
        (S, N, E) (``batch_first``: (N, S, E); unbatched (S, E)); the masks as
        :class:`~netcl.nn.MultiheadAttention`'s ``attn_mask`` and ``key_padding_mask``;
        ``is_causal`` a hint that ``src_mask`` is the causal mask (the fused kernel then skips
        the masked tiles). Output like ``src``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> layer = TransformerEncoderLayer(6, 3, dim_feedforward=10, dropout=0.0, device=q)
        >>> layer(Tensor.from_host(q, np.ones((7, 2, 6)))).shape
        (7, 2, 6)
        >>> sorted(layer.state_dict())[:4]
        ['linear1.bias', 'linear1.weight', 'linear2.bias', 'linear2.weight']
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Activation = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__("TransformerEncoderLayer", d_model, nhead, dim_feedforward, dropout,
                         activation, layer_norm_eps, batch_first, norm_first, bias, False,
                         device, dtype)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:
        x = self._residual(src, self.norm1, lambda t: self._sa_block(
            t, src_mask, src_key_padding_mask, is_causal))
        return self._residual(x, self.norm2, lambda t: self._ff_block(t, self.dropout2))


class TransformerDecoderLayer(_Block):
    """Self-attention, cross-attention over ``memory`` and a feed-forward network, each with
    a residual connection and layer norm (``torch.nn.TransformerDecoderLayer``)::

        norm_first=False:  x = norm1(x + sa(x));  x = norm2(x + mha(x, m));  x = norm3(x + ff(x))
        norm_first=True:   x = x + sa(norm1(x));  x = x + mha(norm2(x), m);  x = x + ff(norm3(x))

    Arguments as :class:`TransformerEncoderLayer`'s; the cross-attention is
    ``multihead_attn`` and its dropout ``dropout2`` (the feed-forward's is ``dropout3``).

    Shape:
        ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
        memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``: tgt
        (T, N, E), memory (S, N, E) (``batch_first``: batch first); output like ``tgt``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> layer = TransformerDecoderLayer(6, 2, dim_feedforward=8, batch_first=True, device=q)
        >>> tgt, memory = (Tensor.from_host(q, np.ones((2, n, 6))) for n in (3, 5))
        >>> layer(tgt, memory).shape
        (2, 3, 6)
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Activation = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__("TransformerDecoderLayer", d_model, nhead, dim_feedforward, dropout,
                         activation, layer_norm_eps, batch_first, norm_first, bias, True,
                         device, dtype)

    def _mha_block(self, x: Tensor, memory: Tensor, attn_mask: Tensor | None,
                   key_padding_mask: Tensor | None, is_causal: bool) -> Tensor:
        out, _ = self.multihead_attn(x, memory, memory, attn_mask=attn_mask,
                                     key_padding_mask=key_padding_mask, need_weights=False,
                                     is_causal=is_causal)
        dropped: Tensor = self.dropout2(out)
        return dropped

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        x = self._residual(tgt, self.norm1, lambda t: self._sa_block(
            t, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
        x = self._residual(x, self.norm2, lambda t: self._mha_block(
            t, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
        return self._residual(x, self.norm3, lambda t: self._ff_block(t, self.dropout3))


def _clones(layer: Module, n: int) -> ModuleList:
    """``n`` copies of ``layer`` with copies of its parameters and buffers (PyTorch's
    ``copy.deepcopy``: every copy starts from the same values)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"num_layers must be a positive int, got {n!r}")
    copies = []
    for _ in range(n):
        memo: dict[int, Any] = {}
        for t in list(layer.parameters()) + list(layer.buffers()):
            twin = type(t).from_host(t.queue, t.to_host(), dtype=t.dtype)
            twin.requires_grad, twin.persistent = t.requires_grad, t.persistent
            memo[id(t)] = twin
        copies.append(copy.deepcopy(layer, memo))
    return ModuleList(copies)


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (each starting from its parameters) applied
    in turn, then ``norm`` if given (``torch.nn.TransformerEncoder``; the state dict keys are
    ``layers.<i>.<name>`` and ``norm.<name>``).

    ``forward(src, mask=None, src_key_padding_mask=None, is_causal=None)`` passes the masks
    to every layer; ``is_causal=True`` states that ``mask`` is the causal mask (``None`` is
    ``False`` here: the mask is applied as given, without PyTorch's host-side check of it).
    ``enable_nested_tensor`` and ``mask_check`` are accepted for PyTorch code and ignored
    (netcl has no nested tensors; masks are not inspected on the host).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> layer = TransformerEncoderLayer(4, 2, dim_feedforward=8, device=q)
        >>> encoder = TransformerEncoder(layer, 3, norm=LayerNorm(4, device=q))
        >>> len(encoder.layers), encoder(Tensor.from_host(q, np.ones((5, 1, 4)))).shape
        (3, (5, 1, 4))
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` applied in turn, then ``norm`` if given
    (``torch.nn.TransformerDecoder``).

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> decoder = TransformerDecoder(TransformerDecoderLayer(4, 2, 8, device=q), 2)
        >>> x = Tensor.from_host(q, np.ones((5, 1, 4)))
        >>> decoder(x, x).shape
        (5, 1, 4)
    """

    def __init__(self, decoder_layer: Module, num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder transformer (``torch.nn.Transformer``): a
    :class:`TransformerEncoder` of ``num_encoder_layers`` layers and a
    :class:`TransformerDecoder` of ``num_decoder_layers``, each ending in a
    :class:`~netcl.nn.LayerNorm`; every parameter of more than one dim is then re-drawn
    xavier-uniform (PyTorch's ``_reset_parameters``).

    ``forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    src_is_causal=None, tgt_is_causal=None, memory_is_causal=False)`` returns the decoder's
    output, shaped like ``tgt``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> model = Transformer(8, 2, 1, 1, dim_feedforward=16, batch_first=True, device=q)
        >>> src, tgt = (Tensor.from_host(q, np.ones((2, n, 8))) for n in (7, 4))
        >>> mask = Transformer.generate_square_subsequent_mask(4, device=q)
        >>> model(src, tgt, tgt_mask=mask, tgt_is_causal=True).shape
        (2, 4, 8)
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Activation = "relu",
                 custom_encoder: Module | None = None, custom_decoder: Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        queue, dt = placement("Transformer", device, dtype)
        common: dict[str, Any] = {
            "dim_feedforward": dim_feedforward, "dropout": dropout, "activation": activation,
            "layer_norm_eps": layer_norm_eps, "batch_first": batch_first,
            "norm_first": norm_first, "bias": bias, "device": queue, "dtype": dt}
        self.encoder: Module = custom_encoder if custom_encoder is not None else (
            TransformerEncoder(TransformerEncoderLayer(d_model, nhead, **common),
                               num_encoder_layers,
                               _layer_norm(d_model, layer_norm_eps, bias, queue, dt)))
        self.decoder: Module = custom_decoder if custom_decoder is not None else (
            TransformerDecoder(TransformerDecoderLayer(d_model, nhead, **common),
                               num_decoder_layers,
                               _layer_norm(d_model, layer_norm_eps, bias, queue, dt)))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise ValueError(f"Transformer: src and tgt must have the same batch size, got "
                             f"src {src.shape} and tgt {tgt.shape} "
                             f"(batch_first={self.batch_first})")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ValueError(f"Transformer: src and tgt must have d_model={self.d_model} "
                             f"features, got src {src.shape} and tgt {tgt.shape}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(  # type: ignore[no-any-return]
            tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
            tgt_key_padding_mask=tgt_key_padding_mask,
            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None,
                                        dtype: Any = None) -> Tensor:
        """The (sz, sz) causal mask as a float mask: ``-inf`` above the diagonal (a position
        may not attend to later ones), ``0`` elsewhere (PyTorch's). Built on the host once per
        call: make it once, outside the step.

        Examples:
            >>> Transformer.generate_square_subsequent_mask(3, device="cpu").to_host().tolist()
            [[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]
        """
        if isinstance(sz, bool) or not isinstance(sz, int) or sz < 1:
            raise ValueError(f"generate_square_subsequent_mask: sz must be a positive int, "
                             f"got {sz!r}")
        queue = default_queue() if device is None else device_queue(
            "generate_square_subsequent_mask", device)
        mask = np.triu(np.full((sz, sz), -np.inf), 1)
        return Tensor.from_host(queue, mask, dtype="float32" if dtype is None else dtype)
