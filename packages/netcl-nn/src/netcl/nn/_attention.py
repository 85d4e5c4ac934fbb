"""``MultiheadAttention``: PyTorch's layer (signature, parameter names and shapes,
initialisation), over :func:`netcl.nn.functional.multi_head_attention_forward`.

A PyTorch ``nn.MultiheadAttention``'s ``state_dict`` loads as it is (converted to NumPy):
``in_proj_weight`` (3E, E) and ``in_proj_bias`` (3E,), or ``q_proj_weight``/``k_proj_weight``/
``v_proj_weight`` when ``kdim``/``vdim`` differ from ``embed_dim``, ``bias_k``/``bias_v``
(1, 1, E) with ``add_bias_kv``, and ``out_proj.weight``/``out_proj.bias``.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> mha = MultiheadAttention(8, 2, batch_first=True, device=q)
    >>> x = Tensor.from_host(q, np.ones((3, 5, 8)))
    >>> out, weights = mha(x, x, x)
    >>> out.shape, weights.shape
    ((3, 5, 8), (3, 5, 5))
    >>> sorted(mha.state_dict())
    ['in_proj_bias', 'in_proj_weight', 'out_proj.bias', 'out_proj.weight']
"""

from __future__ import annotations

from typing import Any

from netcl.core.tensor import Tensor

from . import functional as F
from . import init
from ._layers import Linear
from ._module import Module, Parameter, placement

__all__ = ["MultiheadAttention"]


def check_heads(layer: str, embed_dim: int, num_heads: int) -> None:
    """``embed_dim`` and ``num_heads`` positive ints, ``embed_dim`` a multiple of the heads."""
    for name, v in (("embed_dim", embed_dim), ("num_heads", num_heads)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{layer}: {name} must be a positive int, got {v!r}")
    if embed_dim % num_heads:
        raise ValueError(f"{layer}: embed_dim must be divisible by num_heads, got "
                         f"embed_dim={embed_dim} and num_heads={num_heads}")


def check_dropout(layer: str, p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{layer}: dropout must be in [0, 1], got {p}")


class MultiheadAttention(Module):
    """Attention of ``num_heads`` heads of ``embed_dim // num_heads`` dims each
    (``torch.nn.MultiheadAttention``): ``out_proj(concat(head_1..head_h))`` with
    ``head_i = softmax(q_i k_i^T / sqrt(d) + mask) v_i`` and ``q, k, v`` the in-projections of
    query, key and value.

    Initialised as PyTorch's: ``in_proj_weight`` (or each of ``q/k/v_proj_weight``)
    xavier-uniform, ``in_proj_bias`` and ``out_proj.bias`` zero, ``out_proj.weight`` as a
    :class:`~netcl.nn.Linear`'s, ``bias_k``/``bias_v`` xavier-normal.

    Args:
        embed_dim: model width E (that of query and output).
        num_heads: heads; must divide ``embed_dim``.
        dropout: dropout on the attention weights in training mode.
        bias: in- and output-projection biases.
        add_bias_kv: learn one more key and value position (``bias_k``, ``bias_v``).
        add_zero_attn: append a zero key and value position (after ``bias_k``/``bias_v``).
        kdim, vdim: key and value widths (default ``embed_dim``; separate projection weights
            when either differs).
        batch_first: inputs and output (N, L, E) instead of (L, N, E).

    Shape:
        ``forward(query, key, value, key_padding_mask=None, need_weights=True,
        attn_mask=None, average_attn_weights=True, is_causal=False)``: query (L, N, E), key
        (S, N, kdim), value (S, N, vdim) (``batch_first``: batch first; unbatched: no N);
        returns ``(output like query, weights or None)``, weights (N, L, S) averaged over the
        heads or (N, num_heads, L, S). Masks as
        :func:`~netcl.nn.functional.multi_head_attention_forward` (bool means *masked out*).
        ``need_weights=False`` runs the fused attention kernels and returns ``None`` weights
        (what the transformer layers do).

    Raises:
        ValueError: ``embed_dim`` not divisible by ``num_heads``, a bad ``dropout``, inputs or
            masks of the wrong shape.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> mha = MultiheadAttention(6, 3, kdim=4, vdim=5, device=q)
        >>> query = Tensor.from_host(q, np.ones((2, 1, 6)))
        >>> key, value = (Tensor.from_host(q, np.ones((7, 1, d))) for d in (4, 5))
        >>> out, w = mha(query, key, value, need_weights=False)
        >>> out.shape, w is None, mha.in_proj_weight is None, mha.k_proj_weight.shape
        ((2, 1, 6), True, True, (6, 4))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False,
                 kdim: int | None = None, vdim: int | None = None, batch_first: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        check_heads("MultiheadAttention", embed_dim, num_heads)
        check_dropout("MultiheadAttention", dropout)
        queue, dt = placement("MultiheadAttention", device, dtype)
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.batch_first, self.add_zero_attn = batch_first, add_zero_attn
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim

        def param(*shape: int) -> Parameter:
            return Parameter.from_shape(queue, shape, dt)

        self.in_proj_weight: Parameter | None = None
        self.q_proj_weight: Parameter | None = None
        self.k_proj_weight: Parameter | None = None
        self.v_proj_weight: Parameter | None = None
        if self._qkv_same_embed_dim:
            self.in_proj_weight = param(3 * embed_dim, embed_dim)
        else:
            self.q_proj_weight = param(embed_dim, embed_dim)
            self.k_proj_weight = param(embed_dim, self.kdim)
            self.v_proj_weight = param(embed_dim, self.vdim)
        self.in_proj_bias: Parameter | None = param(3 * embed_dim) if bias else None
        self.bias_k: Parameter | None = None
        self.bias_v: Parameter | None = None
        if add_bias_kv:
            self.bias_k, self.bias_v = param(1, 1, embed_dim), param(1, 1, embed_dim)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, device=queue, dtype=dt)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for w in (self.in_proj_weight, self.q_proj_weight, self.k_proj_weight,
                  self.v_proj_weight):
            if w is not None:
                init.xavier_uniform_(w)
        for b in (self.in_proj_bias, self.out_proj.bias):
            if b is not None:
                init.zeros_(b)
        for b in (self.bias_k, self.bias_v):
            if b is not None:
                init.xavier_normal_(b)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        return F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=not self._qkv_same_embed_dim,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights,
            is_causal=is_causal, batch_first=self.batch_first, op_name="MultiheadAttention")
