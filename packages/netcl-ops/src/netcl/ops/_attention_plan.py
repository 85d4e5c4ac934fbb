"""Argument checks and the shape plan of ``scaled_dot_product_attention``.

Every path (plain and fused) starts from one :class:`AttentionPlan`: the operands checked,
the batch dimensions broadcast, and -- with ``enable_gqa`` -- the query viewed as
``(..., Hk, G, L, E)`` against keys ``(..., Hk, 1, S, E)``, so grouped-query attention is
ordinary batch broadcasting to every path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.tensor import Tensor, reshape

from ._common import check_tensor, same_device

__all__ = ["OP", "AttentionPlan", "broadcast_shapes", "plan_attention"]

OP = "scaled_dot_product_attention"
MASK_DTYPES = ("uint8", *FLOAT_DTYPES)


@dataclass(frozen=True)
class AttentionPlan:
    """The checked operands of one call (``q``, ``k``, ``v``, ``mask`` possibly reshaped for
    grouped-query attention) and what every path needs to know about them."""

    q: Tensor
    k: Tensor
    v: Tensor
    mask: Tensor | None
    batch: tuple[int, ...]  # the broadcast batch dims of the (reshaped) operands
    L: int
    S: int
    E: int
    Ev: int
    scale: float
    causal: bool
    dropout_p: float
    out_shape: tuple[int, ...]  # what the caller gets: (*batch of the original q, L, Ev)
    shapes: tuple[tuple[int, ...], ...]  # the original q, k, v (and mask) shapes

    @property
    def batch_size(self) -> int:
        return math.prod(self.batch)


def broadcast_shapes(op: str, what: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy broadcasting of ``shapes``; ``ValueError`` naming ``op`` and the shapes."""
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"{op}: {what} must broadcast, got "
                         f"{' and '.join(str(s) for s in shapes)}") from None


def _check_float(name: str, t: Tensor) -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{OP}: {name} must be a float tensor, got {t.dtype}")
    if t.ndim < 2:
        raise ValueError(f"{OP}: {name} must have at least 2 dimensions (..., length, dim), "
                         f"got shape {t.shape}")


def _check_scalars(dropout_p: Any, scale: Any, E: int) -> tuple[float, float]:
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise TypeError(f"{OP}: dropout_p must be a float, got {dropout_p!r}")
    if not 0.0 <= float(dropout_p) < 1.0:
        raise ValueError(f"{OP}: dropout_p must be in [0, 1), got {dropout_p}")
    if scale is None:
        return float(dropout_p), 1.0 / math.sqrt(E) if E else 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"{OP}: scale must be a float or None, got {scale!r}")
    if not math.isfinite(scale):
        raise ValueError(f"{OP}: scale must be finite, got {scale}")
    return float(dropout_p), float(scale)


def _check_mask(mask: Any, q: Tensor, batch: tuple[int, ...], L: int, S: int) -> Tensor:
    m: Tensor = check_tensor(OP, mask, "attn_mask")
    same_device(OP, q, m)
    if m.dtype not in MASK_DTYPES:
        raise TypeError(f"{OP}: attn_mask must be boolean (uint8, True/1 = take part) or "
                        f"float (added to the scores), got {m.dtype}")
    if m.dtype != "uint8" and m.dtype != q.dtype:
        raise TypeError(f"{OP}: a float attn_mask must have the query's dtype {q.dtype}, "
                        f"got {m.dtype}")
    full = (*batch, L, S)
    try:
        fits = m.ndim <= len(full) and np.broadcast_shapes(m.shape, full) == full
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{OP}: attn_mask of shape {m.shape} does not broadcast to the "
                         f"scores' shape {full} (batch, L, S)")
    return m


def _gqa(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Views for grouped-query attention: q ``(..., Hk, G, L, E)``, k and v
    ``(..., Hk, 1, S, .)``."""
    if q.ndim < 3 or k.ndim < 3 or v.ndim < 3:
        raise ValueError(f"{OP}: enable_gqa needs a head dimension (-3) on query, key and "
                         f"value, got {q.shape}, {k.shape} and {v.shape}")
    hq, hk = q.shape[-3], k.shape[-3]
    if v.shape[-3] != hk or hk == 0 or hq % hk:
        raise ValueError(f"{OP}: enable_gqa needs key and value heads that divide the query "
                         f"heads, got query {hq}, key {hk} and value {v.shape[-3]} heads")
    q = reshape(q, (*q.shape[:-3], hk, hq // hk, *q.shape[-2:]))
    k = reshape(k, (*k.shape[:-3], hk, 1, *k.shape[-2:]))
    v = reshape(v, (*v.shape[:-3], hk, 1, *v.shape[-2:]))
    return q, k, v


def _gqa_mask(mask: Tensor, hk: int, g: int) -> Tensor:
    """The mask's head dim (-3, 1 or Hk * G when present) split as the query's."""
    if mask.ndim < 3:
        return mask
    split = (hk, g) if mask.shape[-3] != 1 else (1, 1)
    return reshape(mask, (*mask.shape[:-3], *split, *mask.shape[-2:]))


def plan_attention(query: Any, key: Any, value: Any, attn_mask: Any, dropout_p: Any,
                   is_causal: bool, scale: Any, enable_gqa: bool) -> AttentionPlan:
    """Check the arguments of one call; raises ``TypeError``/``ValueError`` naming the rule
    and the values (see :func:`netcl.ops.scaled_dot_product_attention`)."""
    q = check_tensor(OP, query, "query")
    k = check_tensor(OP, key, "key")
    v = check_tensor(OP, value, "value")
    same_device(OP, q, k, v)
    for name, t in (("query", q), ("key", k), ("value", v)):
        _check_float(name, t)
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"{OP}: query, key and value must share a dtype, got {q.dtype}, "
                        f"{k.dtype} and {v.dtype}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"{OP}: query and key must have the same last dimension E, got "
                         f"query {q.shape} and key {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{OP}: key and value must have the same length S (dim -2), got "
                         f"key {k.shape} and value {v.shape}")
    p, sc = _check_scalars(dropout_p, scale, q.shape[-1])
    shapes: tuple[tuple[int, ...], ...] = (q.shape, k.shape, v.shape)
    L, S, E, Ev = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    if enable_gqa:
        q, k, v = _gqa(q, k, v)
    batch = broadcast_shapes(OP, "the batch dimensions of query, key and value",
                             q.shape[:-2], k.shape[:-2], v.shape[:-2])
    out_batch = (*batch[:-2], batch[-2] * batch[-1]) if enable_gqa else batch
    mask = None
    if attn_mask is not None:
        mask = _check_mask(attn_mask, q, out_batch, L, S)
        shapes += (mask.shape,)
        if enable_gqa:
            mask = _gqa_mask(mask, batch[-2], batch[-1])
    return AttentionPlan(q, k, v, mask, batch, L, S, E, Ev, sc, bool(is_causal), p,
                         (*out_batch, L, Ev), shapes)
