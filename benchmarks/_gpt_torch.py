"""The charlm job's GPT (``netcl.trainer._charlm_model.GPT``) in PyTorch, with the same
parameter names, so a netcl state dict loads into it and both start from the same weights."""

from __future__ import annotations

from typing import Any

import numpy as np


def torch_gpt(torch: Any, vocab: int, context: int, layers: int, width: int, heads: int,
              dropout: float = 0.0) -> Any:
    """A ``torch.nn.Module`` computing what netcl's GPT computes (PyTorch's fused SDPA)."""
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)
            self.resid_drop = nn.Dropout(dropout)

        def forward(self, x: Any) -> Any:
            b, t, c = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                               dropout_p=dropout if self.training else 0.0)
            return self.resid_drop(self.proj(y.transpose(1, 2).reshape(b, t, c)))

    class Block(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(width)
            self.attn = Attention()
            self.ln2 = nn.LayerNorm(width)
            self.fc = nn.Linear(width, 4 * width)
            self.act = nn.GELU(approximate="tanh")
            self.fc_proj = nn.Linear(4 * width, width)
            self.mlp_drop = nn.Dropout(dropout)

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp_drop(self.fc_proj(self.act(self.fc(self.ln2(x)))))

    class GPT(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.tok_emb = nn.Embedding(vocab, width)
            self.pos_emb = nn.Parameter(torch.zeros(context, width))
            self.drop = nn.Dropout(dropout)
            self.blocks = nn.ModuleList([Block() for _ in range(layers)])
            self.ln_f = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab, bias=False)

        def forward(self, ids: Any) -> Any:
            x = self.drop(self.tok_emb(ids) + self.pos_emb[: ids.shape[1]])
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return GPT()


def load_netcl_weights(torch: Any, model: Any, netcl_model: Any) -> None:
    """Copy a netcl GPT's parameters into the PyTorch one (same names)."""
    state = {k: torch.from_numpy(np.asarray(v.to_host(), np.float32))
             for k, v in netcl_model.state_dict().items()}
    model.load_state_dict(state)


def gpt_flops(tokens: int, context: int, layers: int, width: int, vocab: int) -> float:
    """Training FLOPs of one step over ``tokens`` tokens: 6 per parameter-token of the
    matmuls plus the attention scores and values (causal: half), forward and backward."""
    matmul_params = layers * 12 * width * width + width * vocab
    attention = layers * 2 * 2 * context * width / 2  # QK^T and AV per token, causal half
    return tokens * (6 * matmul_params + 3 * attention)
