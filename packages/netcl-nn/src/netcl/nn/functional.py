"""The functional form of the layers: the differentiable ops and losses of netcl.autograd,
under the names PyTorch users reach for (``F.relu``, ``F.conv2d``, ``F.cross_entropy``...),
plus ``linear``. The layers of :mod:`netcl.nn` compute through these functions, and the ones
listed in NOTE [ Autocast op lists ] follow :func:`netcl.nn.amp.autocast`.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> from netcl.nn import functional as F
    >>> F.relu(Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))).to_host()
    array([0., 2.], dtype=float32)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import netcl.ops as _raw
from netcl.autograd import ops as _ops
from netcl.autograd.ops import *  # noqa: F403  (the whole differentiable op set, by design)
from netcl.autograd.ops import __all__ as _ops_all
from netcl.core.tensor import Tensor

from . import _functional_layers as _layers
from . import _functional_losses as _losses
from ._autocast import is_autocast_enabled, runs_in_autocast_dtype, runs_in_float32

IntPair = int | tuple[int, int]

__all__ = [
    *_ops_all,
    "normalize",
    *_layers.__all__,
    *_losses.__all__,
    "linear",
    "multi_head_attention_forward",
]


@runs_in_autocast_dtype
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias`` over the last dim of ``x``: what :class:`~netcl.nn.Linear` does.

    Shape:
        ``x`` (\\*, in), ``weight`` (out, in), ``bias`` (out,); output (\\*, out).

    Raises:
        ValueError: ``weight`` is not 2-D or its ``in`` differs from the last dim of ``x``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x, w = Tensor.from_host(q, np.ones((5, 2, 3))), Tensor.from_host(q, np.ones((4, 3)))
        >>> y = linear(x, w, Tensor.from_host(q, np.arange(4.0)))
        >>> y.shape, y.to_host()[0, 0].tolist()
        ((5, 2, 4), [3.0, 4.0, 5.0, 6.0])
    """
    if weight.ndim != 2 or x.ndim < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear: input (*, in) must match weight (out, in), got input "
                         f"{x.shape} and weight {weight.shape}")
    lead = x.shape[:-1]
    flat = x if x.ndim == 2 else _ops.reshape(x, (math.prod(lead), weight.shape[1]))
    y = _ops.matmul(flat, weight, transpose_b=True)
    if bias is not None:
        y = _ops.bias_add(y, bias)
    return y if x.ndim == 2 else _ops.reshape(y, (*lead, weight.shape[0]))


def batch_norm(  # type: ignore[no-redef]  # replaces the star-imported one
        x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
        weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
        momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """:func:`netcl.autograd.ops.batch_norm` with ``torch.nn.functional.batch_norm``'s
    defaults (``training=False``: the running statistics). Under autocast the input, weight
    and bias are cast to the running statistics' dtype (float32 without them): the statistics
    are updated in place, so they cannot be cast themselves.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> from netcl.nn.amp import autocast
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([[1.0], [3.0]]), dtype="float16")
        >>> rm, rv = Tensor.from_host(q, np.zeros(1)), Tensor.from_host(q, np.ones(1))
        >>> with autocast():
        ...     y = batch_norm(x, rm, rv, training=True)
        >>> y.dtype, rm.to_host().tolist()
        ('float32', [0.20000000298023224])
    """
    if is_autocast_enabled():
        dtype = "float32" if running_mean is None else running_mean.dtype
        x = _ops.cast(x, dtype) if x.dtype != dtype else x
        weight, bias = _cast_optional(weight, dtype), _cast_optional(bias, dtype)
    return _ops.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)


def _cast_optional(t: Tensor | None, dtype: str) -> Tensor | None:
    return t if t is None or t.dtype == dtype else _ops.cast(t, dtype)


# NOTE [ Autocast op lists ]
# Inside ``netcl.nn.amp.autocast`` (and only there) these functions cast their floating-point
# Tensor arguments before running; every layer computes through this module, so the lists hold
# for the layers too (Linear -> linear, Conv2d -> conv2d, BatchNorm -> batch_norm,
# LayerNorm -> layer_norm).
#
# float16: linear (decorated above), matmul, conv2d, conv1d, conv_transpose2d. Most of a
#   network's bytes and time; the kernels accumulate in float32 (NOTE [ float16 storage,
#   float32 arithmetic ] in ``_autocast.py``), so float16 only halves what is stored and moved.
#   The float32 master weights are cast per call (differentiably: their gradients come back
#   in float32).
# float32: softmax, log_softmax, the losses, batch_norm, layer_norm, group_norm, sum, mean,
#   var, exp, log, pow. Results that need float32 range or precision: a loss or a sum over many
#   elements, exp above 11 (float16 overflows at 65504), normalization statistics.
#   batch_norm (defined above) casts to its running statistics' dtype instead, float32 in a
#   float32 model: they are updated in place, so a cast copy would never see the update.
# Everything else runs in the dtype it gets: activations, pooling, dropout and movement keep
# float16 activations float16, and binary elementwise ops on float16 and float32 promote to
# float32 (the ops' own rule).
matmul = runs_in_autocast_dtype(_ops.matmul)
_conv2d = runs_in_autocast_dtype(_layers.conv2d)
conv1d = runs_in_autocast_dtype(_layers.conv1d)
conv_transpose2d = runs_in_autocast_dtype(_layers.conv_transpose2d)

_softmax = runs_in_float32(_layers.softmax)
_log_softmax = runs_in_float32(_layers.log_softmax)
group_norm = runs_in_float32(_layers.group_norm)
cross_entropy = runs_in_float32(_losses.cross_entropy)
nll_loss = runs_in_float32(_losses.nll_loss)
mse_loss = runs_in_float32(_losses.mse_loss)
l1_loss = runs_in_float32(_losses.l1_loss)
smooth_l1_loss = runs_in_float32(_losses.smooth_l1_loss)
huber_loss = runs_in_float32(_losses.huber_loss)
binary_cross_entropy = runs_in_float32(_losses.binary_cross_entropy)
binary_cross_entropy_with_logits = runs_in_float32(_losses.binary_cross_entropy_with_logits)
kl_div = runs_in_float32(_losses.kl_div)
layer_norm = runs_in_float32(_ops.layer_norm)
sum = runs_in_float32(_ops.sum)
mean = runs_in_float32(_ops.mean)
var = runs_in_float32(_ops.var)
exp = runs_in_float32(_ops.exp)
log = runs_in_float32(_ops.log)
pow = runs_in_float32(_ops.pow)

# the rest of the torch.nn.functional layer set (no autocast policy: they run in their dtype)
adaptive_max_pool2d = _layers.adaptive_max_pool2d
check_padding_mode = _layers.check_padding_mode
dropout2d = _layers.dropout2d
elu = _layers.elu
hardsigmoid = _layers.hardsigmoid
hardswish = _layers.hardswish
hardtanh = _layers.hardtanh
interpolate = _layers.interpolate
mish = _layers.mish
prelu = _layers.prelu
relu6 = _layers.relu6
softplus = _layers.softplus


# The five below replace star-imported netcl.autograd.ops functions with PyTorch's wider
# signatures (padding strings, dim/dtype, training/inplace), hence the no-redef.

def conv2d(  # type: ignore[no-redef]
        input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,
        padding: IntPair | str = 0, dilation: IntPair = 1, groups: int = 1) -> Tensor:
    """2-D convolution, ``torch.nn.functional.conv2d``'s arguments (``padding`` also
    ``'same'``/``'valid'``); float16 under autocast.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((1, 1, 4, 4)))
        >>> w = Tensor.from_host(q, np.ones((1, 1, 3, 3)))
        >>> conv2d(x, w, padding="same").to_host()[0, 0, 0].tolist()
        [4.0, 6.0, 6.0, 4.0]
    """
    return _conv2d(input, weight, bias, stride, padding, dilation, groups)


def softmax(  # type: ignore[no-redef]
        input: Tensor, dim: int | None = None, dtype: Any = None, *,
        axis: int | None = None) -> Tensor:
    """Softmax along ``dim`` (``axis`` also accepted; default the last dim), float32 under
    autocast.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((1, 2)))
        >>> softmax(x, dim=1).to_host().tolist()
        [[0.5, 0.5]]
    """
    return _softmax(input, dim, dtype, axis=axis)


def log_softmax(  # type: ignore[no-redef]
        input: Tensor, dim: int | None = None, dtype: Any = None, *,
        axis: int | None = None) -> Tensor:
    """Log-softmax along ``dim`` (``axis`` also accepted; default the last dim), float32 under
    autocast.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((1, 2)))
        >>> [round(float(v), 4) for v in log_softmax(x, dim=1).to_host()[0]]
        [-0.6931, -0.6931]
    """
    return _log_softmax(input, dim, dtype, axis=axis)


def dropout(  # type: ignore[no-redef]
        input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
        seed: int | None = None, offset: int | None = None) -> Tensor:
    """``torch.nn.functional.dropout`` (``inplace`` ignored; ``seed``/``offset`` name a
    Philox stream, else the default generator).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones(4))
        >>> dropout(x, 0.5, training=False) is x
        True
    """
    return _layers.dropout(input, p, training, inplace, seed=seed, offset=offset)


def avg_pool2d(  # type: ignore[no-redef]
        input: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
        padding: IntPair = 0, ceil_mode: bool = False, count_include_pad: bool = True,
        divisor_override: int | None = None) -> Tensor:
    """Average pooling in ``torch.nn.functional.avg_pool2d``'s argument order (``ceil_mode``
    before ``count_include_pad``; :func:`netcl.autograd.ops.avg_pool2d` has them the other
    way round). ``divisor_override`` is not supported.

    Raises:
        ValueError: ``divisor_override`` given.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(9.0).reshape(1, 1, 3, 3))
        >>> avg_pool2d(x, 2, 2, 0, True).to_host().reshape(-1).tolist()
        [2.0, 3.5, 6.5, 8.0]
    """
    if divisor_override is not None:
        raise ValueError("avg_pool2d: divisor_override is not supported")
    return _ops.avg_pool2d(input, kernel_size, stride, padding, count_include_pad, ceil_mode)


def pad(  # type: ignore[no-redef]
        input: Tensor, pad: Sequence[int], mode: str = "constant",
        value: float | None = None) -> Tensor:
    """Constant padding, ``torch.nn.functional.pad``'s arguments: ``pad`` as (before, after)
    pairs from the last dim backwards.

    Raises:
        ValueError: a ``mode`` other than ``"constant"`` (reflect, replicate and circular are
            not supported).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((1, 2)))
        >>> pad(x, (1, 0), "constant", 5.0).to_host().tolist()
        [[5.0, 1.0, 1.0]]
    """
    if mode != "constant":
        raise ValueError(f"pad: mode {mode!r} is not supported (only 'constant')")
    return _ops.pad(input, pad, 0.0 if value is None else float(value))


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim`` (``torch.nn.functional.normalize``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[3.0, 4.0]]))
        >>> normalize(x).to_host().tolist()
        [[0.6000000238418579, 0.800000011920929]]
    """
    if p == 2.0:
        norm = _ops.sqrt(_ops.sum(_ops.mul(input, input), dim, True))
    elif p == 1.0:
        norm = _ops.sum(_ops.abs(input), dim, True)
    else:
        norm = _ops.pow(_ops.sum(_ops.pow(_ops.abs(input), p), dim, True), 1.0 / p)
    return _ops.div(input, _ops.maximum(norm, eps))


def relu(input: Tensor, inplace: bool = False) -> Tensor:  # type: ignore[no-redef]
    """``max(x, 0)`` (``inplace`` accepted and ignored).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))
        >>> relu(x).to_host().tolist()
        [0.0, 2.0]
    """
    return _layers.relu(input, inplace)


# -- attention ----------------------------------------------------------------------------------

_sdpa = runs_in_autocast_dtype(_ops.scaled_dot_product_attention)


def scaled_dot_product_attention(  # type: ignore[no-redef]
        query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
        dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None, *,
        enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key^T * scale + mask) @ value``: PyTorch's
    ``torch.nn.functional.scaled_dot_product_attention`` over
    :func:`netcl.autograd.ops.scaled_dot_product_attention` (the fused kernels on OpenCL
    devices), in float16 under autocast as PyTorch's.

    Shape:
        ``query`` (\\*, L, E), ``key`` (\\*, S, E), ``value`` (\\*, S, Ev); output (\\*, L, Ev).
        ``attn_mask`` broadcasts to (\\*, L, S): a bool (uint8) mask where True means *take
        part*, or a float mask that is added to the scores. ``is_causal``: query ``i`` sees
        keys ``0..i``. ``scale`` defaults to ``1/sqrt(E)``. ``enable_gqa``: key and value
        may have fewer heads (dim -3) than the query, each shared by a group of query heads.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.eye(3).reshape(1, 3, 3))
        >>> y = scaled_dot_product_attention(x, x, x, is_causal=True)
        >>> y.shape, y.to_host()[0, 0].tolist()
        ((1, 3, 3), [1.0, 0.0, 0.0])
    """
    return _sdpa(query, key, value, attn_mask, dropout_p, is_causal, scale,
                 enable_gqa=enable_gqa)


def multi_head_attention_forward(
        query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
        in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None,
        bias_v: Tensor | None, add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor,
        out_proj_bias: Tensor | None, training: bool = True,
        key_padding_mask: Tensor | None = None, need_weights: bool = True,
        attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
        q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
        v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
        static_v: Tensor | None = None, average_attn_weights: bool = True,
        is_causal: bool = False, *, batch_first: bool = False,
        op_name: str = "multi_head_attention_forward") -> tuple[Tensor, Tensor | None]:
    """Multi-head attention as ``torch.nn.functional.multi_head_attention_forward`` (what
    :class:`~netcl.nn.MultiheadAttention` runs): in-projections, heads, attention, the output
    projection. PyTorch's arguments and semantics; netcl's keywords: ``batch_first`` takes
    (N, L, E) inputs without a transpose, ``op_name`` is the name errors carry (a layer
    passes its own).

    With ``need_weights=False`` the heads go through :func:`scaled_dot_product_attention` (the
    fused kernels); with ``need_weights=True`` the scores are materialized and the attention
    weights (after dropout, as PyTorch's) come back, averaged over the heads when
    ``average_attn_weights``. Masks: ``attn_mask`` (L, S) or (N*num_heads, L, S) and
    ``key_padding_mask`` (N, S), bool (uint8; True = *masked out*, the opposite of
    :func:`scaled_dot_product_attention`'s) or float (added); ``is_causal`` is a hint that
    ``attn_mask`` is the causal mask (it must be given, as in PyTorch). ``static_k`` /
    ``static_v`` (N*num_heads, S, head_dim) replace the projected keys / values, as PyTorch's
    (``key_padding_mask`` and ``attn_mask`` then follow their length S).

    Shape:
        ``query`` (L, N, E) (``batch_first``: (N, L, E); unbatched (L, E)), ``key`` (S, N,
        kdim), ``value`` (S, N, vdim); output like ``query``, weights (N, L, S) or
        (N, num_heads, L, S).

    Raises:
        ValueError: shapes that do not fit (embedding dims, heads, batch, sequence, masks).
        TypeError: a mask that is neither uint8 (bool) nor floating point.
        RuntimeError: ``is_causal`` without ``attn_mask``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((5, 2, 4)))
        >>> w_in, w_out = Tensor.from_host(q, np.ones((12, 4))), Tensor.from_host(q, np.eye(4))
        >>> out, weights = multi_head_attention_forward(
        ...     x, x, x, 4, 2, w_in, None, None, None, False, 0.0, w_out, None)
        >>> out.shape, weights.shape, round(float(weights.to_host()[0, 0, 0]), 4)
        ((5, 2, 4), (2, 5, 5), 0.2)
    """
    op = op_name
    if not use_separate_proj_weight:
        q_proj_weight = k_proj_weight = v_proj_weight = None
    elif q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
        raise ValueError(f"{op}: use_separate_proj_weight needs q_proj_weight, k_proj_weight "
                         "and v_proj_weight")
    if in_proj_weight is None and q_proj_weight is None:
        raise ValueError(f"{op}: give in_proj_weight or use_separate_proj_weight with "
                         "q/k/v_proj_weight")
    heads = _heads_in(query, key, value, embed_dim_to_check, num_heads, batch_first, op,
                      (in_proj_weight, in_proj_bias, q_proj_weight, k_proj_weight,
                       v_proj_weight))
    q, k, v, unbatched = heads
    if is_causal and attn_mask is None:
        raise RuntimeError(f"{op}: is_causal is a hint that attn_mask is the causal mask; "
                           "give attn_mask too (as PyTorch)")
    if static_k is not None or static_v is not None:
        if bias_k is not None or bias_v is not None:
            raise ValueError(f"{op}: bias_k/bias_v cannot be added to a static key or value")
        k = k if static_k is None else _static_heads(op, "static_k", static_k, k.shape)
        v = v if static_v is None else _static_heads(op, "static_v", static_v, v.shape)
        if k.shape[2] != v.shape[2]:
            raise ValueError(f"{op}: keys and values must have the same length, got "
                             f"{k.shape[2]} and {v.shape[2]} (static_k/static_v)")
    n, h, length, source = q.shape[0], num_heads, q.shape[2], k.shape[2]
    mask = _merged_mask(op, attn_mask, key_padding_mask, (n, h, length, source), unbatched,
                        q.dtype)
    if bias_k is not None and bias_v is not None:
        k = _ops.concat([k, _bias_heads(bias_k, n, h)], axis=2)
        v = _ops.concat([v, _bias_heads(bias_v, n, h)], axis=2)
        mask = None if mask is None else _ops.pad(mask, (0, 1))
    if add_zero_attn:
        k, v = _ops.pad(k, (0, 0, 0, 1)), _ops.pad(v, (0, 0, 0, 1))
        mask = None if mask is None else _ops.pad(mask, (0, 1))
    p = dropout_p if training else 0.0
    causal = is_causal and key_padding_mask is None and not need_weights
    weights: Tensor | None = None
    if need_weights:
        scores = matmul(q, k, transpose_b=True)
        scores = _ops.mul(scores, 1.0 / math.sqrt(q.shape[-1]))
        if mask is not None:
            scores = _ops.add(scores, mask if mask.dtype == scores.dtype
                              else _ops.cast(mask, scores.dtype))
        weights = softmax(scores, dim=-1)
        if p > 0.0:
            weights = dropout(weights, p)
        out = matmul(weights, v)
        if average_attn_weights:
            weights = mean(weights, 1)
        if unbatched:
            weights = _ops.squeeze(weights, 0)
    else:
        out = scaled_dot_product_attention(q, k, v, None if causal else mask, p, causal)
    return linear(_heads_out(out, batch_first, unbatched), out_proj_weight, out_proj_bias), weights


def _static_heads(op: str, what: str, t: Tensor, heads: tuple[int, ...]) -> Tensor:
    """A static key or value (N * num_heads, S, head_dim) as heads (N, num_heads, S,
    head_dim); ``heads`` is the projected one's shape."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: {what} must be a netcl Tensor, got {type(t).__name__}")
    n, h, _, d = heads
    if t.ndim != 3 or t.shape[0] != n * h or t.shape[2] != d:
        raise ValueError(f"{op}: {what} must be (batch * num_heads, S, head_dim) = ({n * h}, "
                         f"S, {d}), got {t.shape}")
    return _ops.reshape(t, (n, h, t.shape[1], d))


def _heads_in(query: Tensor, key: Tensor, value: Tensor, embed_dim: int, num_heads: int,
              batch_first: bool, op: str, w: tuple[Tensor | None, ...]
              ) -> tuple[Tensor, Tensor, Tensor, bool]:
    """The projected heads (N, num_heads, L or S, head_dim) of query, key and value, and
    whether the input was unbatched (then made a batch of one)."""
    unbatched = query.ndim == 2
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
        raise ValueError(f"{op}: query, key and value must be all 3-D (batched) or all 2-D "
                         f"(unbatched), got {query.shape}, {key.shape} and {value.shape}")
    if query.shape[-1] != embed_dim:
        raise ValueError(f"{op}: query's last dim must be embed_dim={embed_dim}, got query "
                         f"{query.shape}")
    if embed_dim % num_heads:
        raise ValueError(f"{op}: embed_dim must be divisible by num_heads, got "
                         f"embed_dim={embed_dim} and num_heads={num_heads}")
    if key.shape[:-1] != value.shape[:-1]:
        raise ValueError(f"{op}: key and value must have the same batch and sequence dims, "
                         f"got key {key.shape} and value {value.shape}")
    if unbatched:
        query, key, value = (_ops.unsqueeze(t, 1) for t in (query, key, value))
        batch_first = False
    batch = 0 if batch_first else 1
    if key.shape[batch] != query.shape[batch]:
        raise ValueError(f"{op}: query and key must have the same batch size, got query "
                         f"{query.shape} and key {key.shape} (batch_first={batch_first})")
    in_w, in_b, q_w, k_w, v_w = w
    e = embed_dim
    b = [None if in_b is None else _ops.slice(in_b, [i * e], [(i + 1) * e]) for i in range(3)]
    if in_w is None:
        if q_w is None or k_w is None or v_w is None:
            raise ValueError(f"{op}: q/k/v_proj_weight missing")
        q = _split_heads(linear(query, q_w, b[0]), num_heads, batch_first)
        k = _split_heads(linear(key, k_w, b[1]), num_heads, batch_first)
        v = _split_heads(linear(value, v_w, b[2]), num_heads, batch_first)
        return q, k, v, unbatched
    # NOTE [ One projection per part ]
    # q, k and v each get their own matmul over a slice of in_proj_weight (a copy of E x E
    # weights) rather than one (3E)-wide matmul split afterwards: splitting the activations
    # copies them again, and each split's backward pads its gradient to the full (3E) width
    # and sums three of them, where a weight slice's backward pads only an E x E gradient.
    # (Intel's OpenCL CPU, E=384, 6 heads, 4 x 256 tokens, self-attention forward+backward:
    # 1.1-1.6 s per part against 1.9 s split.)
    q, k, v = (_split_heads(linear(x, _ops.slice(in_w, [i * e], [(i + 1) * e]), b[i]),
                            num_heads, batch_first)
               for i, x in enumerate((query, key, value)))
    return q, k, v, unbatched


def _split_heads(x: Tensor, num_heads: int, batch_first: bool) -> Tensor:
    """(L, N, E) (``batch_first``: (N, L, E)) -> (N, heads, L, head_dim): a reshape (a view)
    and one permute."""
    a, b, width = x.shape
    x = _ops.reshape(x, (a, b, num_heads, width // num_heads))
    return _ops.permute(x, (0, 2, 1, 3) if batch_first else (1, 2, 0, 3))


def _heads_out(x: Tensor, batch_first: bool, unbatched: bool) -> Tensor:
    """(N, heads, L, head_dim) -> (L, N, E) (``batch_first``: (N, L, E); unbatched (L, E))."""
    n, h, length, d = x.shape
    if unbatched:
        return _ops.reshape(_ops.permute(x, (0, 2, 1, 3)), (length, h * d))
    if batch_first:
        return _ops.reshape(_ops.permute(x, (0, 2, 1, 3)), (n, length, h * d))
    return _ops.reshape(_ops.permute(x, (2, 0, 1, 3)), (length, n, h * d))


def _bias_heads(bias: Tensor, n: int, num_heads: int) -> Tensor:
    """``bias_k``/``bias_v`` (1, 1, E) as one more key/value position (N, heads, 1, d)."""
    e = bias.shape[-1]
    return _ops.broadcast_to(_ops.reshape(bias, (1, num_heads, 1, e // num_heads)),
                             (n, num_heads, 1, e // num_heads))


def _additive(op: str, name: str, mask: Tensor, dtype: str) -> Tensor:
    """A bool (uint8, True = masked out) or float mask as a float mask added to the scores."""
    if mask.dtype == "uint8":
        return _ops.cast(_raw.where(mask, -math.inf, 0.0), dtype)
    if not mask.is_floating_point:
        raise TypeError(f"{op}: {name} must be bool (uint8) or floating point, got "
                        f"{mask.dtype}")
    return mask if mask.dtype == dtype else _ops.cast(mask, dtype)


def _merged_mask(op: str, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                 shape: tuple[int, int, int, int], unbatched: bool, dtype: str
                 ) -> Tensor | None:
    """``attn_mask`` and ``key_padding_mask`` as one float mask broadcasting to ``shape`` =
    (N, heads, L, S)."""
    n, h, length, source = shape
    merged: Tensor | None = None
    if attn_mask is not None:
        if attn_mask.shape == (length, source):
            view: tuple[int, ...] = (1, 1, length, source)
        elif attn_mask.shape == (n * h, length, source):
            view = shape
        else:
            raise ValueError(f"{op}: attn_mask must be (L, S) = {(length, source)} or "
                             f"(N*num_heads, L, S) = {(n * h, length, source)}, got "
                             f"{attn_mask.shape}")
        merged = _ops.reshape(_additive(op, "attn_mask", attn_mask, dtype), view)
    if key_padding_mask is not None:
        want = (source,) if unbatched else (n, source)
        if key_padding_mask.shape != want:
            raise ValueError(f"{op}: key_padding_mask must be (N, S) = {want}, got "
                             f"{key_padding_mask.shape}")
        pad = _ops.reshape(_additive(op, "key_padding_mask", key_padding_mask, dtype),
                           (n, 1, 1, source))
        merged = pad if merged is None else _ops.add(merged, pad)
    return merged
