"""Differentiable matmul, conv2d, batch norm, layer norm and 2-D pooling.

Each backward rule sits beside its forward and runs as ``netcl.ops`` device ops: matmul's
gradients are matmuls with transpose flags, conv2d's go through ``conv2d_backward_data`` and
``conv2d_backward_weight``, the norms through their ``*_backward`` ops, and pooling through
the pooling backward ops (max pooling sends each gradient to the first maximum of its window).
"""

from __future__ import annotations

from collections.abc import Sequence

import netcl.ops as _ops
from netcl.core.tensor import Tensor, reshape

from ._function import differentiable, sum_to_shape
from ._tape import Backward

__all__ = [
    "adaptive_avg_pool2d",
    "avg_pool2d",
    "batch_norm",
    "bias_add",
    "conv2d",
    "global_avg_pool2d",
    "layer_norm",
    "matmul",
    "max_pool2d",
]

IntPair = int | tuple[int, int]


@differentiable("matmul")
def matmul(a: Tensor, b: Tensor, transpose_a: bool = False,
           transpose_b: bool = False) -> tuple[Tensor, Backward]:
    """``op(a) @ op(b)`` (2-D or batched), ``op`` transposing the last two dims when asked.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> a = Tensor.from_host(q, np.ones((2, 3)))
        >>> matmul(a, a, transpose_b=True).to_host().tolist()
        [[3.0, 3.0], [3.0, 3.0]]
    """
    out = _ops.matmul(a, b, transpose_a=transpose_a, transpose_b=transpose_b)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> tuple[Tensor | None, Tensor | None]:
        ga = gb = None
        if needs[0]:
            if transpose_a:
                ga = _ops.matmul(b, g, transpose_a=transpose_b, transpose_b=True)
            else:
                ga = _ops.matmul(g, b, transpose_b=not transpose_b)
            ga = sum_to_shape(ga, a.shape)
        if needs[1]:
            if transpose_b:
                gb = _ops.matmul(g, a, transpose_a=True, transpose_b=transpose_a)
            else:
                gb = _ops.matmul(a, g, transpose_a=not transpose_a)
            gb = sum_to_shape(gb, b.shape)
        return ga, gb

    return out, backward


@differentiable("bias_add")
def bias_add(x: Tensor, bias: Tensor, axis: int | None = None) -> tuple[Tensor, Backward]:
    """``x + bias`` with ``bias`` along ``axis`` (default: 1 for 3-D and up, else the last);
    the bias gradient sums the others.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.zeros((2, 3)))
        >>> bias_add(x, Tensor.from_host(q, np.arange(3.0))).to_host().tolist()
        [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]
    """
    out = _ops.bias_add(x, bias, axis)
    ax = (1 if x.ndim >= 3 else x.ndim - 1) if axis is None else axis % x.ndim
    others = tuple(k for k in range(x.ndim) if k != ax)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> tuple[Tensor | None, Tensor | None]:
        gb = (_ops.sum(g, axis=others) if others else g) if needs[1] else None
        return g, gb

    return out, backward


@differentiable("conv2d")
def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,
           padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1
           ) -> tuple[Tensor, Backward]:
    """2-D convolution of NCHW ``x`` with (K, C/groups, R, S) ``weight`` (+ ``bias`` (K,)), any
    stride, padding, dilation and groups; gradients through ``conv2d_backward_data`` and
    ``conv2d_backward_weight``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((1, 1, 3, 3)))
        >>> conv2d(x, Tensor.from_host(q, np.ones((2, 1, 2, 2))), padding=1).shape
        (1, 2, 4, 4)
    """
    out = _ops.conv2d(x, weight, bias, stride, padding, dilation, groups)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> tuple[Tensor | None, ...]:
        gx = gw = None
        if needs[0]:
            gx = _ops.conv2d_backward_data(g, weight, x.shape, stride, padding, dilation, groups)
        if needs[1]:
            gw = _ops.conv2d_backward_weight(x, g, weight.shape, stride, padding, dilation,
                                             groups)
        if bias is None:
            return gx, gw
        gb = _ops.sum(g, axis=(0, 2, 3)) if needs[2] else None
        return gx, gw, gb

    return out, backward


def _channel(t: Tensor, ndim: int) -> Tensor:
    return reshape(t, (1, t.shape[0]) + (1,) * (ndim - 2))


@differentiable("batch_norm")
def batch_norm(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = True,
               momentum: float = 0.1, eps: float = 1e-5) -> tuple[Tensor, Backward]:
    """Batch norm over the channel axis 1: batch statistics (and an in-place update of the
    running statistics, when given) in training, the running statistics in eval. Returns the
    normalized tensor; ``weight`` and ``bias`` are used together.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[1.0], [3.0]]))
        >>> batch_norm(x, None, None).to_host().round(3).tolist()
        [[-1.0], [1.0]]
    """
    present = [t is not None for t in (running_mean, running_var, weight, bias)]
    axes = (0, *range(2, x.ndim))
    if training:
        out, mean, invstd = _ops.batch_norm(x, running_mean, running_var, weight, bias, True,
                                            momentum, eps)

        def backward(g: Tensor, needs: tuple[bool, ...]) -> list[Tensor | None]:
            gx, gw, gb = _ops.batch_norm_backward(g, x, mean, invstd, weight)
            grads: list[Tensor | None] = [gx]
            for slot, here in zip((None, None, gw, gb), present):
                if here:
                    grads.append(slot)
            return grads

        return out, backward
    out = _ops.batch_norm(x, running_mean, running_var, weight, bias, False, momentum, eps)
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm: eval mode needs running_mean and running_var")
    rm, rv = running_mean, running_var

    def backward_eval(g: Tensor, needs: tuple[bool, ...]) -> list[Tensor | None]:
        inv = _ops.rsqrt(_ops.add(_channel(rv, x.ndim), eps))
        scale = inv if weight is None else _ops.mul(inv, _channel(weight, x.ndim))
        grads: list[Tensor | None] = [_ops.mul(g, scale) if needs[0] else None, None, None]
        if weight is not None:
            xhat = _ops.mul(_ops.sub(x, _channel(rm, x.ndim)), inv)
            grads.append(_ops.sum(_ops.mul(g, xhat), axis=axes))
        if bias is not None:
            grads.append(_ops.sum(g, axis=axes))
        return grads

    return out, backward_eval


@differentiable("layer_norm")
def layer_norm(x: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> tuple[Tensor, Backward]:
    """Layer norm over the trailing ``normalized_shape`` dims (``weight``/``bias`` together).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[1.0, 3.0]]))
        >>> layer_norm(x, 2).to_host().round(3).tolist()
        [[-1.0, 1.0]]
    """
    out, mean, rstd = _ops.layer_norm(x, normalized_shape, weight, bias, eps)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> list[Tensor | None]:
        gx, gw, gb = _ops.layer_norm_backward(g, x, normalized_shape, mean, rstd, weight)
        grads: list[Tensor | None] = [gx]
        if weight is not None:
            grads.append(reshape(gw, weight.shape))
        if bias is not None:
            grads.append(reshape(gb, bias.shape))
        return grads

    return out, backward


@differentiable("max_pool2d")
def max_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, dilation: IntPair = 1, ceil_mode: bool = False
               ) -> tuple[Tensor, Backward]:
    """Max pooling; the gradient of a window goes to its first maximum (row-major), as the
    indices of ``netcl.ops.max_pool2d(..., return_indices=True)`` pick it.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(16.0).reshape(1, 1, 4, 4))
        >>> max_pool2d(x, 2).to_host().reshape(-1).tolist()
        [5.0, 7.0, 13.0, 15.0]
    """
    out, idx = _ops.max_pool2d(x, kernel_size, stride, padding, dilation, return_indices=True,
                               ceil_mode=ceil_mode)
    return out, lambda g, needs: (
        _ops.max_pool2d_backward(g, idx, x.shape, kernel_size, stride, padding, dilation),)


@differentiable("avg_pool2d")
def avg_pool2d(x: Tensor, kernel_size: IntPair, stride: IntPair | None = None,
               padding: IntPair = 0, count_include_pad: bool = True, ceil_mode: bool = False
               ) -> tuple[Tensor, Backward]:
    """Average pooling with PyTorch's divisor (``count_include_pad``: padded zeros count, but
    not the part of a ``ceil_mode`` window beyond the padding); the backward divides by the
    same divisor.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(16.0).reshape(1, 1, 4, 4))
        >>> avg_pool2d(x, 2).to_host().reshape(-1).tolist()
        [2.5, 4.5, 10.5, 12.5]
        >>> avg_pool2d(x, 3, 2, ceil_mode=True).to_host().reshape(-1).tolist()
        [5.0, 6.5, 11.0, 12.5]
    """
    out = _ops.avg_pool2d(x, kernel_size, stride, padding, count_include_pad, ceil_mode)
    return out, lambda g, needs: (
        _ops.avg_pool2d_backward(g, x.shape, kernel_size, stride, padding, count_include_pad,
                                 ceil_mode),)


@differentiable("adaptive_avg_pool2d")
def adaptive_avg_pool2d(x: Tensor, output_size: IntPair) -> tuple[Tensor, Backward]:
    """Average pooling to a fixed output size (PyTorch's bins).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(16.0).reshape(1, 1, 4, 4))
        >>> adaptive_avg_pool2d(x, 1).to_host().reshape(-1).tolist()
        [7.5]
    """
    out = _ops.adaptive_avg_pool2d(x, output_size)
    return out, lambda g, needs: (_ops.adaptive_avg_pool2d_backward(g, x.shape),)


def global_avg_pool2d(x: Tensor) -> Tensor:
    """Mean over H and W kept as size 1, ``(N, C, 1, 1)``: :func:`adaptive_avg_pool2d` to 1.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((2, 3, 4, 4)))
        >>> global_avg_pool2d(x).shape
        (2, 3, 1, 1)
    """
    return adaptive_avg_pool2d(x, 1)
