"""The plain (materialized) path of ``scaled_dot_product_attention``, forward and backward.

# NOTE [ The plain attention path ]
# The reference path, built from netcl ops so it runs on every backend: the (..., L, S) scores
# are materialized, masked, soft-maxed with the row's log-sum-exp kept, dropped out and
# multiplied by V. It is what the NumPy backend runs (vectorized NumPy through the ops) and
# what the OpenCL devices fall back to where the fused kernels do not apply (float64). The
# backward recomputes the probabilities from the saved log-sum-exp, as the fused backward
# does, so both paths save the same things: (out, lse). A row that no key may attend (every
# score -inf) has lse = -inf, output 0 and zero gradients (PyTorch's math path since 2.5).
# float16 is computed in float32; float64 in float64.
"""

from __future__ import annotations

from typing import Any

from netcl.core.tensor import Tensor, reshape

from . import _elementwise as ew
from . import _elementwise_binary as bi
from ._attention_plan import AttentionPlan
from ._creation import arange
from ._matmul import matmul
from ._random import dropout
from ._reduce import max as reduce_max
from ._reduce import sum as reduce_sum

__all__ = ["causal_keep", "plain_backward", "plain_forward", "sum_to"]

_NEG_INF = float("-inf")


def causal_keep(queue: Any, L: int, S: int) -> Tensor:
    """uint8 (L, S): 1 where key ``j`` may be attended from query ``i`` (``j <= i``, top-left
    aligned as PyTorch's ``is_causal``)."""
    rows = reshape(arange(queue, L), (L, 1))
    cols = reshape(arange(queue, S), (1, S))
    return bi.ge(rows, cols)


def _compute(t: Tensor) -> Tensor:
    return bi.cast(t, "float32") if t.dtype == "float16" else t


def _scores(plan: AttentionPlan, q: Tensor, k: Tensor) -> Tensor:
    """The masked, scaled scores (*batch, L, S) in the compute dtype."""
    s = bi.mul(matmul(q, k, transpose_b=True), plan.scale)
    if plan.causal:
        s = bi.where(causal_keep(q.queue, plan.L, plan.S), s, _NEG_INF)
    if plan.mask is not None:
        if plan.mask.dtype == "uint8":
            s = bi.where(plan.mask, s, _NEG_INF)
        else:
            s = bi.add(s, _compute(plan.mask))
    return s


def _probs_lse(s: Tensor) -> tuple[Tensor, Tensor]:
    """softmax(s) along the last axis and its log-sum-exp (keepdims); fully masked rows give
    probabilities 0 and lse -inf."""
    m = reduce_max(s, axis=-1, keepdims=True)
    m = bi.where(bi.eq(m, _NEG_INF), 0.0, m)
    e = ew.exp(bi.sub(s, m))
    z = reduce_sum(e, axis=-1, keepdims=True)
    lse = bi.add(ew.log(z), m)
    p = bi.div(e, bi.where(bi.eq(z, 0.0), 1.0, z))
    return p, lse


def _probs_from_lse(s: Tensor, lse: Tensor) -> Tensor:
    safe = bi.where(bi.eq(lse, _NEG_INF), float("inf"), lse)
    return ew.exp(bi.sub(s, safe))


def sum_to(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``g`` summed over the axes broadcasting added or stretched to reach ``g.shape``."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and g.shape[lead + i] != 1)
    return reshape(reduce_sum(g, axis=axes), shape) if axes else reshape(g, shape)


def _dropped(p: Tensor, plan: AttentionPlan, seed: int, offset: int) -> Tensor:
    if plan.dropout_p == 0.0:
        return p
    return dropout(p, plan.dropout_p, seed, offset)[0]


def plain_forward(plan: AttentionPlan, seed: int, offset: int) -> tuple[Tensor, Tensor]:
    """``(out, lse)``: out (*batch, L, Ev) in the inputs' dtype, lse (*batch, L) in the
    compute dtype (float32, or float64 for float64 inputs)."""
    q, k, v = _compute(plan.q), _compute(plan.k), _compute(plan.v)
    p, lse = _probs_lse(_scores(plan, q, k))
    out = matmul(_dropped(p, plan, seed, offset), v)
    if out.dtype != plan.q.dtype:
        out = bi.cast(out, plan.q.dtype)
    return out, reshape(lse, lse.shape[:-1])


def plain_backward(plan: AttentionPlan, grad: Tensor, out: Tensor, lse: Tensor, seed: int,
                   offset: int, mask_grad: bool) -> tuple[Tensor, Tensor, Tensor,
                                                          Tensor | None]:
    """``(dq, dk, dv, dmask)`` in the (reshaped) operands' shapes; ``dmask`` only for a float
    mask when ``mask_grad``. ``grad`` and ``out`` have the broadcast shape (*batch, L, Ev)."""
    q, k, v = _compute(plan.q), _compute(plan.k), _compute(plan.v)
    g, o = _compute(grad), _compute(out)
    p = _probs_from_lse(_scores(plan, q, k), reshape(lse, (*lse.shape, 1)))
    dv = matmul(_dropped(p, plan, seed, offset), g, transpose_a=True)
    dp = _dropped(matmul(g, v, transpose_b=True), plan, seed, offset)
    d = reduce_sum(bi.mul(g, o), axis=-1, keepdims=True)
    ds = bi.mul(p, bi.sub(dp, d))
    dq = bi.mul(matmul(ds, k), plan.scale)
    dk = bi.mul(matmul(ds, q, transpose_a=True), plan.scale)
    dmask = None
    if mask_grad and plan.mask is not None and plan.mask.dtype != "uint8":
        dmask = sum_to(ds, plan.mask.shape)
        if dmask.dtype != plan.mask.dtype:
            dmask = bi.cast(dmask, plan.mask.dtype)
    grads = []
    for gx, x in ((dq, plan.q), (dk, plan.k), (dv, plan.v)):
        gx = sum_to(gx, x.shape)
        grads.append(bi.cast(gx, x.dtype) if gx.dtype != x.dtype else gx)
    return grads[0], grads[1], grads[2], dmask
