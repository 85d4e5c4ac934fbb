"""``torch.nn.functional`` layers composed of netcl's differentiable ops: ``softmax(dim=)``,
``conv2d``/``conv1d`` with ``padding='same'``, ``conv_transpose2d``, ``group_norm``,
``dropout``/``dropout2d``, ``interpolate`` (nearest, (bi)linear), ``adaptive_max_pool2d``, and
the activations ``elu``, ``prelu``, ``hardswish``, ``hardsigmoid``, ``hardtanh``, ``relu6``,
``softplus``, ``mish``.

Everything runs as device ops (index selects, reductions, elementwise kernels, the conv and
layer-norm kernels); nothing computes on the host. Index tables (interpolation, adaptive
pooling bins) are built on the host once per shape and kept on the device.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(4.0).reshape(1, 1, 2, 2))
    >>> interpolate(x, scale_factor=2).to_host()[0, 0].tolist()[0]
    [0.0, 0.0, 1.0, 1.0]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import netcl.ops as _raw
from netcl import autograd as _ag
from netcl.autograd import ops as _ops
from netcl.core.tensor import Tensor

__all__ = [
    "adaptive_max_pool2d",
    "check_padding_mode",
    "conv1d",
    "conv2d",
    "conv_transpose2d",
    "dropout",
    "dropout2d",
    "elu",
    "group_norm",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "interpolate",
    "log_softmax",
    "mish",
    "prelu",
    "relu",
    "relu6",
    "softmax",
    "softplus",
]

IntPair = int | tuple[int, int]
_CACHE_SIZE = 64  # index tables kept on the device (one per shape, mode and queue)
_tables: dict[tuple[Any, ...], tuple[Any, tuple[Tensor, ...]]] = {}


def _tensor(op: str, x: object) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: input must be a netcl Tensor, got {type(x).__name__}")
    return x


def _dim(op: str, dim: int | None, axis: int | None, default: int) -> int:
    if dim is not None and axis is not None:
        raise TypeError(f"{op}: got both dim={dim} and axis={axis}; give one")
    chosen = dim if dim is not None else axis
    return default if chosen is None else int(chosen)


# -- activations --------------------------------------------------------------------------------


def softmax(input: Tensor, dim: int | None = None, dtype: Any = None, *,
            axis: int | None = None) -> Tensor:
    """Softmax along ``dim`` (PyTorch's keyword; ``axis`` is netcl's; default the last dim),
    after casting to ``dtype`` when given.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((2, 2)))
        >>> softmax(x, dim=0).to_host().tolist()
        [[0.5, 0.5], [0.5, 0.5]]
    """
    x = _tensor("softmax", input)
    if dtype is not None:
        x = _ops.cast(x, dtype)
    return _ops.softmax(x, _dim("softmax", dim, axis, -1))


def log_softmax(input: Tensor, dim: int | None = None, dtype: Any = None, *,
                axis: int | None = None) -> Tensor:
    """Log-softmax along ``dim`` (or ``axis``; default the last dim), after casting to
    ``dtype`` when given.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((1, 2)))
        >>> np.round(log_softmax(x, dim=1).to_host().astype(float), 4).tolist()
        [[-0.6931, -0.6931]]
    """
    x = _tensor("log_softmax", input)
    if dtype is not None:
        x = _ops.cast(x, dtype)
    return _ops.log_softmax(x, _dim("log_softmax", dim, axis, -1))


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)``. ``inplace`` is accepted for PyTorch code and ignored: netcl computes
    out of place (the tape keeps the input for the backward pass).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> relu(Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))).to_host()
        array([0., 2.], dtype=float32)
    """
    return _ops.relu(input)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)`` (``inplace`` ignored, as in :func:`relu`).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> relu6(Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 7.0]))).to_host()
        array([0., 6.], dtype=float32)
    """
    return _ops.clamp(input, 0.0, 6.0)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` if ``x > 0`` else ``alpha * (exp(x) - 1)``; gradient ``alpha * exp(x)`` at and
    below 0 (PyTorch). ``inplace`` is ignored.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))
        >>> np.round(elu(x).to_host().astype(float), 4).tolist()
        [-0.6321, 2.0]
    """
    x = _tensor("elu", input)
    # exp of the non-positive part only: the unused branch of a large x cannot overflow (its
    # zero gradient times inf would be NaN); clamp passes the gradient at 0, as PyTorch's
    # derivative there is alpha
    negative = _ops.mul(_ops.sub(_ops.exp(_ops.clamp(x, None, 0.0)), 1.0), float(alpha))
    return _ops.where(_raw.gt(x, 0.0), x, negative)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6`` (gradient ``x / 3 + 1/2`` on ``[-3, 3]``, PyTorch's).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-4.0, 1.0, 4.0]))
        >>> np.round(hardswish(x).to_host().astype(float), 4).tolist()
        [-0.0, 0.6667, 4.0]
    """
    x = _tensor("hardswish", input)
    return _ops.mul(x, _ops.mul(_ops.clamp(_ops.add(x, 3.0), 0.0, 6.0), 1.0 / 6.0))


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """``clamp(x, min_val, max_val)`` (gradient 1 inside, bounds included, as ``clamp``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-3.0, 0.5]))
        >>> hardtanh(x).to_host().tolist()
        [-1.0, 0.5]
    """
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} must not exceed max_val {max_val}")
    return _ops.clamp(_tensor("hardtanh", input), float(min_val), float(max_val))


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6`` (PyTorch's piecewise-linear sigmoid).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-4.0, 0.0, 4.0]))
        >>> hardsigmoid(x).to_host().tolist()
        [0.0, 0.5, 1.0]
    """
    x = _tensor("hardsigmoid", input)
    return _ops.mul(_ops.clamp(_ops.add(x, 3.0), 0.0, 6.0), 1.0 / 6.0)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold``
    (PyTorch's); the elementwise table's ``softplus`` row, derivative ``sigmoid(beta x)``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0, 30.0]))
        >>> [round(float(v), 4) for v in softplus(x).to_host()]
        [0.6931, 30.0]
    """
    x = _tensor("softplus", input)
    scaled = x if beta == 1.0 else _ops.mul(x, float(beta))
    soft = _ops.elementwise("softplus", scaled)
    if beta != 1.0:
        soft = _ops.mul(soft, 1.0 / float(beta))
    return _ops.where(_raw.gt(scaled, float(threshold)), x, soft)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))`` (Misra).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.0, 1.0]))
        >>> [round(float(v), 4) for v in mish(x).to_host()]
        [0.0, 0.8651]
    """
    x = _tensor("mish", input)
    return _ops.mul(x, _ops.tanh(_ops.elementwise("softplus", x)))


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` if ``x > 0`` else ``weight * x``, ``weight`` of 1 element or one per channel
    (dim 1).

    Raises:
        ValueError: ``weight`` has neither 1 element nor one per channel.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([[-2.0, 3.0]]))
        >>> prelu(x, Tensor.from_host(q, np.array([0.25]))).to_host().tolist()
        [[-0.5, 3.0]]
    """
    x = _tensor("prelu", input)
    channels = x.shape[1] if x.ndim >= 2 else 1
    if weight.size not in (1, channels):
        raise ValueError(f"prelu: weight must have 1 or {channels} (channels) elements, got "
                         f"shape {weight.shape}")
    w = weight
    if weight.size > 1:
        w = _ops.reshape(weight, (1, channels) + (1,) * (x.ndim - 2))
    elif weight.ndim != 0 and x.ndim != 1:
        w = _ops.reshape(weight, (1,) * x.ndim)
    return _ops.where(_raw.gt(x, 0.0), x, _ops.mul(x, w))


# -- dropout ------------------------------------------------------------------------------------


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
            seed: int | None = None, offset: int | None = None) -> Tensor:
    """Zero elements with probability ``p`` and scale the rest by ``1 / (1 - p)`` when
    ``training`` (``torch.nn.functional.dropout``); masks from the default generator, or the
    Philox stream ``seed``/``offset`` (:func:`netcl.autograd.ops.dropout`). ``inplace`` is
    ignored.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones(3))
        >>> dropout(x, 0.5, training=False) is x
        True
    """
    if not training or p == 0.0:
        return input
    return _ops.dropout(input, p, seed, offset)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True,
              inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, ...)`` input with probability ``p``, scaling the kept
    ones by ``1 / (1 - p)`` (``torch.nn.functional.dropout2d``, also for ``(N, C, L)``). The
    ``(N, C)`` mask is drawn on the device from the default generator.

    Raises:
        ValueError: ``p`` outside [0, 1] or input of fewer than 3 dims.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((2, 8, 3, 3)))
        >>> y = dropout2d(x, 0.5).to_host().reshape(16, 9)
        >>> bool((y == y[:, :1]).all())  # one value per channel
        True
    """
    x = _tensor("dropout2d", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout2d: p must be in [0, 1], got {p}")
    if x.ndim < 3:
        raise ValueError(f"dropout2d: input must be (N, C, ...) with at least 3 dims, got "
                         f"{x.shape}")
    if not training or p == 0.0:
        return x
    shape = x.shape[:2] + (1,) * (x.ndim - 2)
    keep = _raw.bernoulli(x.queue, shape, 1.0 - p, dtype=x.dtype)
    mask = _raw.mul(keep, 0.0 if p >= 1.0 else 1.0 / (1.0 - p))
    return _ops.mul(x, mask)


# -- convolution --------------------------------------------------------------------------------


def check_padding_mode(op: str, padding: str, stride: tuple[int, ...]) -> str:
    """Check a string ``padding``: ``"valid"`` (none) or ``"same"`` (output size = input size;
    stride 1 only, as in PyTorch).

    Raises:
        ValueError: another string, or ``"same"`` with a stride above 1.

    Examples:
        >>> check_padding_mode("conv2d", "same", (1, 1))
        'same'
    """
    if padding not in ("same", "valid"):
        raise ValueError(f"{op}: padding must be 'same', 'valid' or ints, got {padding!r}")
    if padding == "same" and any(s != 1 for s in stride):
        raise ValueError(f"{op}: padding='same' needs stride 1, got stride {stride}")
    return padding


def _pair(value: IntPair) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _same_padding(x: Tensor, kernel: tuple[int, int], dilation: tuple[int, int]
                  ) -> tuple[Tensor, tuple[int, int]]:
    """``x`` padded for ``padding='same'``: the symmetric part as the conv's padding, the odd
    extra column or row on the right or bottom (PyTorch's choice) by an explicit pad."""
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    left = (totals[0] // 2, totals[1] // 2)
    extra = [t - 2 * lo for t, lo in zip(totals, left)]
    if any(extra):
        x = _ops.pad(x, (0, extra[1], 0, extra[0]))
    return x, left


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,
           padding: IntPair | str = 0, dilation: IntPair = 1, groups: int = 1) -> Tensor:
    """2-D convolution (:func:`netcl.autograd.ops.conv2d`) that also takes
    ``padding='same'`` or ``'valid'`` (``torch.nn.functional.conv2d``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((1, 1, 5, 6)))
        >>> w = Tensor.from_host(q, np.ones((2, 1, 2, 3)))
        >>> conv2d(x, w, padding="same").shape
        (1, 2, 5, 6)
    """
    if isinstance(padding, str):
        check_padding_mode("conv2d", padding, _pair(stride))
        if padding == "valid":
            padding = 0
        else:
            kernel = (weight.shape[2], weight.shape[3])
            input, padding = _same_padding(_tensor("conv2d", input), kernel, _pair(dilation))
    return _ops.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: int = 1,
           padding: int | str = 0, dilation: int = 1, groups: int = 1) -> Tensor:
    """1-D convolution of ``(N, C, L)`` input with ``(K, C / groups, k)`` weight: the 2-D
    convolution of unit height (views, no copy), so it runs on the conv2d kernels.

    Raises:
        ValueError: input or weight not 3-D.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x, w = Tensor.from_host(q, np.ones((2, 3, 7))), Tensor.from_host(q, np.ones((4, 3, 3)))
        >>> y = conv1d(x, w, padding=1)
        >>> y.shape, y.to_host()[0, 0].tolist()
        ((2, 4, 7), [6.0, 9.0, 9.0, 9.0, 9.0, 9.0, 6.0])
    """
    x = _tensor("conv1d", input)
    if x.ndim != 3 or weight.ndim != 3:
        raise ValueError(f"conv1d: input (N, C, L) and weight (K, C / groups, k) must be 3-D, "
                         f"got input {x.shape} and weight {weight.shape}")
    x4 = _ops.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
    w4 = _ops.reshape(weight, (weight.shape[0], weight.shape[1], 1, weight.shape[2]))
    pad: IntPair | str = padding if isinstance(padding, str) else (0, int(padding))
    y = conv2d(x4, w4, bias, (1, int(stride)), pad, (1, int(dilation)), groups)
    return _ops.reshape(y, (y.shape[0], y.shape[1], y.shape[3]))


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,
                     stride: IntPair = 1, padding: IntPair = 0, output_padding: IntPair = 0,
                     groups: int = 1, dilation: IntPair = 1) -> Tensor:
    """Transposed 2-D convolution, ``torch.nn.functional.conv_transpose2d``'s arguments:
    :func:`netcl.autograd.conv_transpose2d` (device conv kernels in all three directions).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((1, 2, 3, 3)))
        >>> w = Tensor.from_host(q, np.ones((2, 5, 3, 3)))
        >>> conv_transpose2d(x, w, stride=2, padding=1, output_padding=1).shape
        (1, 5, 6, 6)
    """
    return _ag.conv_transpose2d(_tensor("conv_transpose2d", input), weight, bias, stride,
                                padding, output_padding, groups, dilation)


# -- normalization ------------------------------------------------------------------------------


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize each of ``num_groups`` groups of channels of ``(N, C, ...)`` input over its
    channels and positions, then scale and shift per channel (``torch.nn.functional
    .group_norm``). The statistics are the layer-norm kernels' (on the ``(N, G, C / G * ...)``
    view), the affine part elementwise kernels.

    Raises:
        ValueError: ``num_groups`` does not divide the channels, or fewer than 2 dims.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(8.0).reshape(1, 4, 2))
        >>> np.round(group_norm(x, 2).to_host()[0].astype(float), 3).tolist()[0]
        [-1.342, -0.447]
    """
    x = _tensor("group_norm", input)
    if x.ndim < 2 or num_groups < 1 or x.shape[1] % num_groups:
        raise ValueError(f"group_norm: num_groups={num_groups} must divide the channels (dim 1) "
                         f"of input {x.shape}")
    rest = x.size // (x.shape[0] * num_groups)
    grouped = _ops.reshape(x, (x.shape[0], num_groups, rest))
    y = _ops.reshape(_ops.layer_norm(grouped, (rest,), None, None, eps), x.shape)
    channel = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = _ops.mul(y, _ops.reshape(weight, channel))
    if bias is not None:
        y = _ops.add(y, _ops.reshape(bias, channel))
    return y


# -- resampling ---------------------------------------------------------------------------------


def _table(key: tuple[Any, ...], queue: Any, build: Any) -> tuple[Tensor, ...]:
    """Device tensors of ``build()`` (host arrays) for ``key`` on ``queue``, uploaded once."""
    full = (id(queue), *key)
    hit = _tables.get(full)
    if hit is not None and hit[0] is queue:
        return hit[1]
    if len(_tables) >= _CACHE_SIZE:
        _tables.pop(next(iter(_tables)))
    tensors = tuple(Tensor.from_host(queue, a) for a in build())
    for t in tensors:
        t.persistent = True
    _tables[full] = (queue, tensors)
    return tensors


def _source_scale(size_in: int, size_out: int, scale: float | None, align: bool) -> float:
    if align:
        return (size_in - 1) / (size_out - 1) if size_out > 1 else 0.0
    return 1.0 / scale if scale is not None else size_in / size_out


def _nearest_index(size_in: int, size_out: int, scale: float | None) -> list[Any]:
    s = _source_scale(size_in, size_out, scale, False)
    src = np.minimum(np.floor(np.arange(size_out) * s).astype(np.int64), size_in - 1)
    return [src.astype(np.int32)]


def _linear_matrix(size_in: int, size_out: int, scale: float | None, align: bool,
                   dtype: str) -> list[Any]:
    """The ``(size_out, size_in)`` matrix of linear interpolation weights along one axis:
    row ``o`` holds ``1 - lam`` at ``lo`` and ``lam`` at ``hi`` (PyTorch's source index)."""
    s = _source_scale(size_in, size_out, scale, align)
    dst = np.arange(size_out, dtype=np.float64)
    src = dst * s if align else np.maximum((dst + 0.5) * s - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(np.int64), size_in - 1)
    hi = np.where(lo < size_in - 1, lo + 1, lo)
    lam = src - lo
    matrix = np.zeros((size_out, size_in))
    np.add.at(matrix, (np.arange(size_out), lo), 1.0 - lam)
    np.add.at(matrix, (np.arange(size_out), hi), lam)
    return [matrix.astype(dtype)]


# NOTE [ Linear resampling as a matmul ]
# Along one axis, linear interpolation is a product with a (size_out, size_in) matrix of two
# nonzeros per row. As gathers (two index selects and a lerp) the forward is cheap, but the
# gradient of an index select spreads through a one-hot matrix built per call; as a matmul,
# forward and both gradients run on the GEMM kernels. Bilinear x2 of (8, 64, 32, 32), forward
# and backward on PoCL's CPU device: 536 ms with gathers, about 100 ms as matmuls.


def _resample_axis(x: Tensor, axis: int, size: int, scale: float | None, mode: str,
                   align: bool) -> Tensor:
    size_in = x.shape[axis]
    if size == size_in and mode == "nearest" and (scale is None or scale == 1.0):
        return x
    if mode == "nearest":
        (index,) = _table(("nearest", size_in, size, scale), x.queue,
                          lambda: _nearest_index(size_in, size, scale))
        return _ops.index_select(x, axis, index)
    (matrix,) = _table(("linear", size_in, size, scale, align, x.dtype), x.queue,
                       lambda: _linear_matrix(size_in, size, scale, align, x.dtype))
    return _along_axis(x, axis, matrix)


def _along_axis(x: Tensor, axis: int, matrix: Tensor) -> Tensor:
    """``matrix`` (rows, ``x.shape[axis]``) applied along ``axis`` of ``x`` (a matmul over a
    2-D or 3-D view: NOTE [ Linear resampling as a matmul ])."""
    size_in, size = x.shape[axis], matrix.shape[0]
    lead, tail = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
    shape = (*x.shape[:axis], size, *x.shape[axis + 1:])
    if tail == 1:
        rows = _ops.reshape(x, (lead, size_in))
        return _ops.reshape(_ops.matmul(rows, matrix, transpose_b=True), shape)
    blocks = _ops.reshape(x, (lead, size_in, tail))
    return _ops.reshape(_ops.matmul(matrix, blocks), shape)


def _repeat(x: Tensor, factors: list[int]) -> Tensor:
    """Nearest upsampling by whole ``factors``: each element repeated as a block, a broadcast of
    a ``(N, C, H, 1, W, 1)`` view (its gradient a sum over the blocks: a reduction kernel,
    where index selects would spread through one-hot matrices)."""
    spatial = x.shape[2:]
    expanded = [d for n in spatial for d in (n, 1)]
    blocks = [d for n, f in zip(spatial, factors) for d in (n, f)]
    view = _ops.reshape(x, (*x.shape[:2], *expanded))
    out = _ops.broadcast_to(view, (*x.shape[:2], *blocks))
    return _ops.reshape(out, (*x.shape[:2], *(n * f for n, f in zip(spatial, factors))))


_MODES = {"nearest": (3, 4), "linear": (3,), "bilinear": (4,)}


def interpolate(input: Tensor, size: int | Sequence[int] | None = None,
                scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
                align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None) -> Tensor:
    """Resize the spatial dims of ``(N, C, L)`` or ``(N, C, H, W)`` input to ``size`` or by
    ``scale_factor`` (``torch.nn.functional.interpolate``): ``mode`` ``"nearest"``,
    ``"linear"`` (3-D) or ``"bilinear"`` (4-D), PyTorch's source-index rules (``align_corners``
    for the linear modes; with ``scale_factor`` the index scale is ``1 / scale_factor`` unless
    ``recompute_scale_factor``). Differentiable: nearest by whole factors is a broadcast view,
    other nearest sizes index selects, the linear modes a matmul per axis (NOTE [ Linear
    resampling as a matmul ]).

    Raises:
        ValueError: neither or both of ``size`` and ``scale_factor``, an unknown mode or one
            that does not fit the input's rank, ``align_corners`` with ``"nearest"``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[[0.0, 1.0]]]))
        >>> interpolate(x, size=4, mode="linear").to_host().tolist()
        [[[0.0, 0.25, 0.75, 1.0]]]
        >>> interpolate(x, size=3, mode="linear", align_corners=True).to_host().tolist()
        [[[0.0, 0.5, 1.0]]]
    """
    x = _tensor("interpolate", input)
    if mode not in _MODES or x.ndim not in _MODES[mode]:
        raise ValueError(f"interpolate: mode must be 'nearest' (3-D or 4-D input), 'linear' "
                         f"(3-D) or 'bilinear' (4-D), got {mode!r} for input {x.shape}")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("interpolate: align_corners only applies to the linear modes")
    spatial = x.ndim - 2
    if size is not None:
        sizes = [int(size)] * spatial if isinstance(size, int) else [int(s) for s in size]
        scales: list[float | None] = [None] * spatial
    else:
        factors = ([float(scale_factor)] * spatial if isinstance(scale_factor, (int, float))
                   else [float(s) for s in scale_factor or ()])
        sizes = [math.floor(n * s) for n, s in zip(x.shape[2:], factors)]
        scales = [None if recompute_scale_factor else s for s in factors]
    if len(sizes) != spatial or min(sizes) < 1:
        raise ValueError(f"interpolate: output size {sizes} does not fit input {x.shape}")
    if mode == "nearest" and all(o % n == 0 and (s is None or s == o // n)
                                 for o, n, s in zip(sizes, x.shape[2:], scales)):
        return _repeat(x, [o // n for o, n in zip(sizes, x.shape[2:])])
    for k in range(spatial):
        x = _resample_axis(x, 2 + k, sizes[k], scales[k], "nearest" if mode == "nearest"
                           else "linear", bool(align_corners))
    return x


def _bins(size_in: int, size_out: int) -> tuple[list[tuple[int, int]], int]:
    """PyTorch's adaptive bins ``[floor(i * in / out), ceil((i + 1) * in / out))`` and the
    widest one's width."""
    bins = [((i * size_in) // size_out, -(-((i + 1) * size_in) // size_out))
            for i in range(size_out)]
    return bins, max(e - s for s, e in bins)


def _bin_selection(size_in: int, size_out: int, dtype: str) -> list[Any]:
    """The bins as a 0/1 selection matrix of ``out * width`` rows, each short bin padded with
    its last element (a repeated element changes no maximum)."""
    bins, width = _bins(size_in, size_out)
    index = [min(s + j, e - 1) for s, e in bins for j in range(width)]
    matrix = np.zeros((len(index), size_in), dtype)
    matrix[np.arange(len(index)), index] = 1
    return [matrix]


def adaptive_max_pool2d(input: Tensor, output_size: int | tuple[int | None, int | None],
                        return_indices: bool = False) -> Tensor:
    """Max over PyTorch's adaptive bins of ``(N, C, H, W)`` input, to ``output_size``
    (``None`` keeps a dim); the gradient goes to the first maximum of a bin, as PyTorch's.
    A size that divides the input is :func:`max_pool2d`; other sizes gather each bin's
    elements with selection matmuls and take their max.

    Raises:
        ValueError: not 4-D input, a size below 1, or ``return_indices`` (not supported).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(9.0).reshape(1, 1, 3, 3))
        >>> adaptive_max_pool2d(x, 2).to_host()[0, 0].tolist()
        [[4.0, 5.0], [7.0, 8.0]]
    """
    x = _tensor("adaptive_max_pool2d", input)
    if return_indices:
        raise ValueError("adaptive_max_pool2d: return_indices is not supported")
    pair = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    if x.ndim != 4 or len(pair) != 2:
        raise ValueError(f"adaptive_max_pool2d: needs (N, C, H, W) input and a size or pair, "
                         f"got input {x.shape} and output_size {output_size!r}")
    oh, ow = (x.shape[2 + k] if s is None else int(s) for k, s in enumerate(pair))
    if min(oh, ow) < 1:
        raise ValueError(f"adaptive_max_pool2d: output size must be positive, got {(oh, ow)}")
    h, w = x.shape[2], x.shape[3]
    if h % oh == 0 and w % ow == 0:
        kernel = (h // oh, w // ow)
        return _ops.max_pool2d(x, kernel, kernel)
    (rows,) = _table(("bins", h, oh, x.dtype), x.queue, lambda: _bin_selection(h, oh, x.dtype))
    (cols,) = _table(("bins", w, ow, x.dtype), x.queue, lambda: _bin_selection(w, ow, x.dtype))
    kh, kw = _bins(h, oh)[1], _bins(w, ow)[1]
    # selections as matmuls (NOTE [ Linear resampling as a matmul ]): exact, one 1 per row
    picked = _along_axis(_along_axis(x, 2, rows), 3, cols)
    windows = _ops.reshape(picked, (x.shape[0], x.shape[1], oh, kh, ow, kw))
    return _ops.max(windows, axis=(3, 5))
