"""``scaled_dot_product_attention``: its forward (with the row log-sum-exp kept) and its
recomputation-based backward, on the fused kernels or the plain path.

The path is chosen here, once per call: the fused kernels (NOTE [ Fused attention kernels ]
in ._attention_kernels; the float16 forward on NVIDIA tensor cores, NOTE [ Tensor-core
attention forward ] in ._attention_mma) on OpenCL devices for float32 and float16, the plain
path (NOTE [ The plain attention path ] in ._attention_plain) on the NumPy backend, for
float64, and for the backward of a float mask that needs its gradient (the fused kernels
never hold the (L, S) scores that gradient is). A fused call repeated with the same
signature skips the planning and repeats its launches (NOTE [ Remembered attention
launches ] in ._attention_prepared).
"""

from __future__ import annotations

from netcl.core.tensor import Tensor, reshape

from ._attention_fused import fused_applies, fused_backward, fused_forward
from ._attention_plain import plain_backward, plain_forward
from ._attention_plan import OP, AttentionPlan, plan_attention
from ._attention_prepared import Record, call_key, lookup, remember, run
from ._common import check_tensor
from ._random import default_generator

__all__ = [
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_backward",
    "scaled_dot_product_attention_forward",
]


def _stream(plan: AttentionPlan, seed: int | None, offset: int | None) -> tuple[int, int]:
    """The dropout stream: the given one, or the default generator's next words."""
    if plan.dropout_p == 0.0:
        return 0, 0
    if seed is None:
        return default_generator.seed, default_generator.take(plan.batch_size * plan.L * plan.S)
    return int(seed), 0 if offset is None else int(offset)


def scaled_dot_product_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
        dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None, *,
        enable_gqa: bool = False, seed: int | None = None, offset: int | None = None
) -> tuple[Tensor, Tensor, tuple[int, int]]:
    """:func:`scaled_dot_product_attention` returning ``(out, lse, (seed, offset))``: the row
    log-sum-exp of the masked, scaled scores (shape ``(*batch, L)``, float32 or float64; -inf
    for a row that attends nothing) and the dropout stream used, which
    :func:`scaled_dot_product_attention_backward` needs.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = Tensor.from_host(manager.default("cpu").queue, np.zeros((2, 3, 4)))
        >>> out, lse, _ = scaled_dot_product_attention_forward(q, q, q)
        >>> out.shape, lse.shape, round(float(lse.to_host()[0, 0]), 4)  # log(3)
        ((2, 3, 4), (2, 3), 1.0986)
    """
    # NOTE [ Remembered attention launches ] in ._attention_prepared
    ckey = call_key("fwd", (query, key, value, attn_mask), dropout_p, is_causal, scale,
                    enable_gqa)
    entry = lookup(ckey)
    if entry is not None:
        stream = _repeat_stream(entry.words, seed, offset)
        given = {"q": query, "k": key, "v": value}
        if attn_mask is not None:
            given["mask"] = attn_mask
        out, lse = run(entry, query.queue, given, *stream)
        return out, lse, stream
    plan = plan_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    stream = _stream(plan, seed, offset)
    if not fused_applies(plan):
        out, lse = plain_forward(plan, *stream)
    else:
        record = _record(plan)
        out, lse = fused_forward(plan, *stream, record=record)
        remember(ckey, record, (("out", plan.out_shape), ("lse", plan.out_shape[:-1])),
                 plan.batch_size * plan.L * plan.S if plan.dropout_p > 0 else 0)
    if out.shape != plan.out_shape:
        out = reshape(out, plan.out_shape)
        lse = reshape(lse, plan.out_shape[:-1])
    return out, lse, stream


def _record(plan: AttentionPlan) -> Record:
    """A record of a fused call with the operands' roles (NOTE [ Remembered attention
    launches ])."""
    record = Record()
    record.tensors.update(q=plan.q, k=plan.k, v=plan.v)
    if plan.mask is not None:
        record.tensors["mask"] = plan.mask
    return record


def _repeat_stream(words: int, seed: int | None, offset: int | None) -> tuple[int, int]:
    """:func:`_stream` of a remembered call that draws ``words`` dropout words (0: none)."""
    if words == 0:
        return 0, 0
    if seed is None:
        return default_generator.seed, default_generator.take(words)
    return int(seed), 0 if offset is None else int(offset)


def scaled_dot_product_attention(
        query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
        dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None, *,
        enable_gqa: bool = False, seed: int | None = None, offset: int | None = None
) -> Tensor:
    """Attention ``softmax(q k^T * scale + mask) v``, as PyTorch's
    ``torch.nn.functional.scaled_dot_product_attention``.

    Args:
        query: ``(..., L, E)``.
        key: ``(..., S, E)``.
        value: ``(..., S, Ev)``; the batch dims of the three broadcast.
        attn_mask: broadcastable to ``(..., L, S)``: boolean (uint8; 1/True = the key takes
            part, as PyTorch) or float in the query's dtype (added to the scores).
        dropout_p: probability of dropping each attention weight (the rest scaled by
            ``1 / (1 - p)``), applied whenever > 0, as PyTorch. Counter-based: weight
            ``(batch, i, j)`` is kept by word ``offset + flat index`` of the Philox stream
            ``(seed, offset)`` (the default generator's next words without a seed), the test
            :func:`netcl.ops.dropout` makes; the fused kernels compute it in-kernel and the
            backward regenerates it, so no mask is stored.
        is_causal: query ``i`` attends keys ``j <= i`` (top-left aligned, as PyTorch); may
            be combined with ``attn_mask``.
        scale: multiplies the scores; default ``1 / sqrt(E)``.
        enable_gqa: grouped-query attention: key and value have ``Hk`` heads (dim -3) that
            divide the query's ``Hq``; query head ``h`` uses key head ``h // (Hq / Hk)``.

    Returns:
        ``(*batch, L, Ev)`` in the inputs' dtype. A query row that attends no key gives 0.

    Raises:
        TypeError: non-Tensor or non-float operands, differing dtypes, a mask that is neither
            uint8 nor the query's float dtype, a non-float ``dropout_p`` or ``scale``.
        ValueError: operands with fewer than 2 dims, E or S that differ, batch dims or a mask
            that do not broadcast, ``dropout_p`` outside [0, 1), a non-finite ``scale``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> dev = manager.default("cpu").queue
        >>> q = Tensor.from_host(dev, np.ones((1, 2, 4)))
        >>> v = Tensor.from_host(dev, np.array([[[1.0] * 4, [3.0] * 4]]))
        >>> scaled_dot_product_attention(q, q, v).to_host()[0, :, 0].tolist()
        [2.0, 2.0]
        >>> scaled_dot_product_attention(q, q, v, is_causal=True).to_host()[0, :, 0].tolist()
        [1.0, 2.0]
    """
    return scaled_dot_product_attention_forward(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa=enable_gqa,
        seed=seed, offset=offset)[0]


def scaled_dot_product_attention_backward(
        grad: Tensor, query: Tensor, key: Tensor, value: Tensor, out: Tensor, lse: Tensor,
        attn_mask: Tensor | None = None, dropout_p: float = 0.0, is_causal: bool = False,
        scale: float | None = None, *, enable_gqa: bool = False, stream: tuple[int, int] = (0, 0),
        mask_grad: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
    """Gradients ``(dq, dk, dv, dmask)`` of :func:`scaled_dot_product_attention` given the
    output gradient ``grad`` and what :func:`scaled_dot_product_attention_forward` returned
    (``out``, ``lse``, ``stream``); the probabilities are recomputed, never saved. ``dmask``
    is the float mask's gradient when ``mask_grad``, else ``None``. Each gradient has its
    operand's shape (broadcast batch dims summed).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = Tensor.from_host(manager.default("cpu").queue, np.ones((1, 2, 4)))
        >>> out, lse, stream = scaled_dot_product_attention_forward(q, q, q)
        >>> dq, dk, dv, _ = scaled_dot_product_attention_backward(q, q, q, q, out, lse)
        >>> dv.to_host()[0, :, 0].tolist()
        [1.0, 1.0]
    """
    ckey = call_key("bwd", (grad, query, key, value, out, lse, attn_mask), dropout_p,
                    is_causal, scale, enable_gqa, bool(mask_grad))
    entry = lookup(ckey)
    if entry is not None:
        given = {"grad": grad, "q": query, "k": key, "v": value, "out": out, "lse": lse}
        if attn_mask is not None:
            given["mask"] = attn_mask
        made = run(entry, query.queue, given, *stream if entry.words else (0, 0))
        return made[1], made[2], made[3], None
    plan = plan_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    grad = check_tensor(OP, grad, "grad")
    if grad.shape != plan.out_shape or out.shape != plan.out_shape:
        raise ValueError(f"{OP}: grad and out must have the output's shape {plan.out_shape}, "
                         f"got {grad.shape} and {out.shape}")
    full = (*plan.batch, plan.L, plan.Ev)
    if full != plan.out_shape:
        grad, out = reshape(grad, full), reshape(out, full)
        lse = reshape(lse, full[:-1])
    if fused_applies(plan) and not (mask_grad and attn_mask is not None
                                    and attn_mask.dtype != "uint8"):
        record = _record(plan)
        dq, dk, dv = fused_backward(plan, grad, out, lse, *stream, record=record)
        dmask = None
        if (dq is record.tensors["dq"] and dk is record.tensors["dk"]
                and dv is record.tensors["dv"]):  # no broadcast gradient summed
            remember(ckey, record, (("dd", (*plan.batch, plan.L)), ("dq", plan.shapes[0]),
                                    ("dk", plan.shapes[1]), ("dv", plan.shapes[2])),
                     plan.batch_size * plan.L * plan.S if plan.dropout_p > 0 else 0)
    else:
        dq, dk, dv, dmask = plain_backward(plan, grad, out, lse, *stream, mask_grad)
    shapes = plan.shapes
    grads = [g if g.shape == s else reshape(g, s) for g, s in zip((dq, dk, dv), shapes)]
    if dmask is not None and dmask.shape != shapes[3]:
        dmask = reshape(dmask, shapes[3])
    return grads[0], grads[1], grads[2], dmask
