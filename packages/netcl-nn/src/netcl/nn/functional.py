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
