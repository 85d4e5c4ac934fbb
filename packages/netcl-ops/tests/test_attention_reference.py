"""A float64 NumPy reference of scaled dot-product attention, its gradients and its dropout
mask (the Philox words the ops use), shared by the ops and autograd attention tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from netcl.ops import philox4x32_10

Array = np.ndarray[Any, Any]


def dropout_keep(shape: tuple[int, ...], p: float, seed: int, offset: int) -> Array:
    """The keep mask word ``offset + flat index`` gives (NOTE [ Philox streams ])."""
    n = int(np.prod(shape))
    first, last = offset // 4, (offset + n - 1) // 4
    blocks = np.arange(first, last + 1, dtype=np.uint64)
    counters = np.zeros((blocks.size, 4), np.uint32)
    counters[:, 0] = (blocks & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    counters[:, 1] = (blocks >> np.uint64(32)).astype(np.uint32)
    words = philox4x32_10(counters, (seed & 0xFFFFFFFF, seed >> 32)).reshape(-1)
    words = words[offset - 4 * first:offset - 4 * first + n]
    return ((words >> 8) >= round(p * (1 << 24))).reshape(shape)


def _scores(q: Array, k: Array, mask: Array | None, causal: bool, scale: float) -> Array:
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    L, S = s.shape[-2:]
    if causal:
        s = np.where(np.tri(L, S) > 0, s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    out: Array = s
    return out


def _softmax(s: Array) -> Array:
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    p: Array = e / np.where(z == 0, 1.0, z)
    return p


def _sum_to(a: Array, shape: tuple[int, ...]) -> Array:
    lead = a.ndim - len(shape)
    a = a.sum(axis=tuple(range(lead))) if lead else a
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and a.shape[i] != 1)
    return a.sum(axis=axes, keepdims=True) if axes else a


def sdpa(q: Array, k: Array, v: Array, mask: Array | None = None, causal: bool = False,
         scale: float | None = None, keep: Array | None = None, p: float = 0.0,
         grad: Array | None = None) -> tuple[Array, list[Array | None]]:
    """``(out, [dq, dk, dv, dmask])`` in float64 (the gradients of ``sum(grad * out)`` when
    ``grad`` is given, else an empty list); ``keep`` is the dropout keep mask."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    if mask is not None and mask.dtype != bool:
        mask = mask.astype(np.float64)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    prob = _softmax(_scores(q, k, mask, causal, scale))
    drop = prob if keep is None else np.where(keep, prob / (1.0 - p), 0.0)
    out = np.matmul(drop, v)
    if grad is None:
        return out, []
    g = np.asarray(grad, np.float64)
    dv = np.matmul(np.swapaxes(drop, -1, -2), g)
    dp = np.matmul(g, np.swapaxes(v, -1, -2))
    if keep is not None:
        dp = np.where(keep, dp / (1.0 - p), 0.0)
    ds = prob * (dp - (dp * prob).sum(axis=-1, keepdims=True))
    dq = np.matmul(ds, k) * scale
    dk = np.matmul(np.swapaxes(ds, -1, -2), q) * scale
    dmask = None if mask is None or mask.dtype == bool else _sum_to(ds, mask.shape)
    return out, [_sum_to(dq, q.shape), _sum_to(dk, k.shape), _sum_to(dv, v.shape), dmask]
