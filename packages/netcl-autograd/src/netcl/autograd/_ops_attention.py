"""Differentiable ``scaled_dot_product_attention``.

The forward keeps only the output and the row log-sum-exp; the backward recomputes the
attention probabilities from them (FlashAttention's recomputation, on the fused kernels where
they apply) and regenerates the dropout mask from the same Philox stream.
"""

from __future__ import annotations

import netcl.ops as _ops
from netcl.core.tensor import Tensor

from ._function import differentiable
from ._tape import Backward

__all__ = ["scaled_dot_product_attention"]


@differentiable("scaled_dot_product_attention")
def scaled_dot_product_attention(
        query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
        dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None, *,
        enable_gqa: bool = False) -> tuple[Tensor, Backward]:
    """Attention ``softmax(q k^T * scale + mask) v`` (PyTorch's
    ``torch.nn.functional.scaled_dot_product_attention``), recorded under a tape: gradients
    for query, key, value and a float ``attn_mask``. Arguments and errors as
    :func:`netcl.ops.scaled_dot_product_attention`; ``dropout_p > 0`` draws its mask from the
    default generator and the backward regenerates it.

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> dev = manager.default("cpu").queue
        >>> q = Tensor.from_host(dev, np.ones((1, 2, 4)))
        >>> v = Tensor.from_host(dev, np.array([[[1.0] * 4, [3.0] * 4]]))
        >>> v.requires_grad = True
        >>> with ag.Tape() as tape:
        ...     y = ag.ops.sum(scaled_dot_product_attention(q, q, v, is_causal=True))
        >>> tape.backward(y)
        >>> v.grad.to_host()[0, :, 0].tolist()
        [1.5, 0.5]
    """
    out, lse, stream = _ops.scaled_dot_product_attention_forward(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa=enable_gqa)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> list[Tensor | None]:
        mask_grad = len(needs) > 3 and needs[3]
        dq, dk, dv, dmask = _ops.scaled_dot_product_attention_backward(
            g, query, key, value, out, lse, attn_mask, dropout_p, is_causal, scale,
            enable_gqa=enable_gqa, stream=stream, mask_grad=mask_grad)
        grads: list[Tensor | None] = [dq if needs[0] else None, dk if needs[1] else None,
                                      dv if needs[2] else None]
        if attn_mask is not None:
            grads.append(dmask)
        return grads

    return out, backward
