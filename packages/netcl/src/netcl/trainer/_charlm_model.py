"""The charlm job's model: a small GPT (nanoGPT-style pre-norm decoder blocks).

Token and learned position embeddings, ``layers`` blocks of ``x + attn(ln1(x))`` and
``x + mlp(ln2(x))`` (attention: one fused q/k/v Linear, causal
:func:`netcl.autograd.ops.scaled_dot_product_attention`, an output projection; the MLP 4x
wide with GPT-2's tanh GELU), a final LayerNorm and a Linear head to the vocabulary,
optionally tied to the token embedding. Weights start as GPT-2's: N(0, 0.02), the residual
projections N(0, 0.02 / sqrt(2 * layers)), zero biases.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import netcl.autograd as ag
from netcl.core.tensor import Tensor
from netcl.nn import (
    GELU,
    Dropout,
    Embedding,
    LayerNorm,
    Linear,
    Module,
    ModuleList,
    Parameter,
    init,
)
from netcl.nn import functional as F

__all__ = ["GPT", "CausalSelfAttention", "Block"]


def _linear(fan_in: int, fan_out: int, queue: Any, rng: np.random.Generator, std: float,
            bias: bool = True) -> Linear:
    layer = Linear(fan_in, fan_out, bias=bias, queue=queue, rng=rng)
    init.normal_(layer.weight, 0.0, std, rng)
    if layer.bias is not None:
        init.zeros_(layer.bias)
    return layer


class CausalSelfAttention(Module):
    """Multi-head causal self-attention over ``(B, T, width)``: one Linear makes q, k and v,
    the heads attend with :func:`netcl.autograd.ops.scaled_dot_product_attention`
    (``is_causal=True``), and a Linear projects the joined heads back."""

    def __init__(self, width: int, heads: int, dropout: float, queue: Any,
                 rng: np.random.Generator, proj_std: float) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"CausalSelfAttention: heads={heads} must divide width={width}")
        self.width, self.heads, self.dropout = width, heads, dropout
        self.qkv = _linear(width, 3 * width, queue, rng, 0.02)
        self.proj = _linear(width, width, queue, rng, proj_std)
        self.resid_drop = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        b, t, c = x.shape
        h = self.heads
        w, bias = self.qkv.weight, self.qkv.bias
        # one matmul per part over a slice of the fused weight, not a (3C)-wide product split
        # afterwards (NOTE [ One projection per part ] in netcl.nn.functional)
        q, k, v = (ag.ops.permute(ag.ops.reshape(F.linear(
            x, ag.ops.slice(w, [i * c], [(i + 1) * c]),
            None if bias is None else ag.ops.slice(bias, [i * c], [(i + 1) * c])),
            (b, t, h, c // h)), (0, 2, 1, 3)) for i in range(3))  # (B, H, T, D) each
        y = ag.ops.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        y = ag.ops.reshape(ag.ops.permute(y, (0, 2, 1, 3)), (b, t, c))  # heads side by side
        out: Tensor = self.resid_drop(self.proj(y))
        return out


class Block(Module):
    """``x + attn(ln1(x))``, then ``x + mlp(ln2(x))`` (pre-norm, as GPT-2)."""

    def __init__(self, width: int, heads: int, dropout: float, queue: Any,
                 rng: np.random.Generator, proj_std: float) -> None:
        super().__init__()
        self.ln1 = LayerNorm(width, queue=queue)
        self.attn = CausalSelfAttention(width, heads, dropout, queue, rng, proj_std)
        self.ln2 = LayerNorm(width, queue=queue)
        self.fc = _linear(width, 4 * width, queue, rng, 0.02)
        self.act = GELU(approximate="tanh")  # GPT-2's; NumPy has no erf to vectorize
        self.fc_proj = _linear(4 * width, width, queue, rng, proj_std)
        self.mlp_drop = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = ag.ops.add(x, self.attn(self.ln1(x)))
        mlp = self.mlp_drop(self.fc_proj(self.act(self.fc(self.ln2(x)))))
        return ag.ops.add(x, mlp)


class GPT(Module):
    """A character-level GPT: ``(B, T)`` token ids to ``(B, T, vocab)`` next-token logits.

    Args:
        vocab: the number of tokens.
        context: the longest sequence (the position table's length).
        layers, width, heads: the decoder blocks, their width and attention heads.
        dropout: after the embeddings, on attention weights and on each residual branch.
        tie_weights: the head shares the token embedding's matrix (GPT-2).
        queue: where the parameters live (default: the active device).
        seed: the initial weights' seed.

    Raises:
        ValueError: a size below 1, ``heads`` not dividing ``width``, a sequence longer than
            ``context``, or ids that are not a 2-D integer tensor.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> model = GPT(vocab=11, context=8, layers=1, width=16, heads=2, queue=q)
        >>> model(Tensor.from_host(q, np.zeros((3, 5), np.int32))).shape
        (3, 5, 11)
    """

    def __init__(self, vocab: int, context: int, layers: int = 2, width: int = 64,
                 heads: int = 4, dropout: float = 0.0, tie_weights: bool = False,
                 queue: Any = None, seed: int = 0) -> None:
        super().__init__()
        for name, value in (("vocab", vocab), ("context", context), ("layers", layers),
                            ("width", width), ("heads", heads)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GPT: {name} must be an integer >= 1, got {value!r}")
        if width % heads:
            raise ValueError(f"GPT: heads={heads} must divide width={width}")
        rng = np.random.default_rng(seed)
        self.vocab, self.context, self.width = vocab, context, width
        self.tok_emb = Embedding(vocab, width, queue=queue, rng=rng)
        init.normal_(self.tok_emb.weight, 0.0, 0.02, rng)
        self.pos_emb = Parameter.from_host(queue, rng.normal(0.0, 0.02, (context, width)),
                                           dtype="float32")
        self.drop = Dropout(dropout)
        proj_std = 0.02 / math.sqrt(2 * layers)
        self.blocks = ModuleList([Block(width, heads, dropout, queue, rng, proj_std)
                                  for _ in range(layers)])
        self.ln_f = LayerNorm(width, queue=queue)
        self.head = _linear(width, vocab, queue, rng, 0.02, bias=False)
        if tie_weights:
            self.head.weight = self.tok_emb.weight

    def forward(self, ids: Tensor) -> Tensor:
        if ids.ndim != 2 or not ids.dtype.startswith(("int", "uint")):
            raise ValueError(f"GPT: expected (batch, sequence) integer token ids, got shape "
                             f"{ids.shape} dtype {ids.dtype}")
        t = ids.shape[1]
        if t > self.context:
            raise ValueError(f"GPT: a sequence of {t} tokens is longer than the context "
                             f"{self.context}")
        pos = self.pos_emb if t == self.context else ag.ops.getitem(self.pos_emb, slice(0, t))
        x = self.drop(ag.ops.add(self.tok_emb(ids), pos))
        for block in self.blocks:
            x = block(x)
        logits: Tensor = self.head(self.ln_f(x))
        return logits
