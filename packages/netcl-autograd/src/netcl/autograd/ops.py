"""Differentiable versions of the ``netcl.ops`` ops that have a gradient.

Each op computes its forward with ``netcl.ops`` and, when it runs inside a
:class:`~netcl.autograd.Tape` on an input with ``requires_grad``, records its backward rule
(which also runs as ``netcl.ops`` device ops). Ops without a gradient (comparisons, ``argmax``,
``one_hot``, creation, random numbers) are used from ``netcl.ops`` directly.

The reductions and the softmax family take PyTorch's ``dim=``/``keepdim=`` beside
``axis=``/``keepdims=`` (giving both spellings is a ``TypeError``).

Examples:
    >>> import numpy as np
    >>> import netcl.autograd as ag
    >>> from netcl.core import Tensor, manager
    >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))
    >>> x.requires_grad = True
    >>> with ag.Tape() as tape:
    ...     y = ag.ops.sum(ag.ops.relu(x))
    >>> tape.backward(y)
    >>> x.grad.to_host().tolist()
    [0.0, 1.0]
    >>> ag.ops.softmax(x, dim=0).shape, ag.ops.sum(x, dim=0, keepdim=True).shape
    ((2,), (1,))
"""

from __future__ import annotations

from collections.abc import Sequence

from netcl.core.keywords import resolve_dim, resolve_keepdim
from netcl.core.tensor import Tensor

from . import _ops_reduce
from . import _tensor_methods as _tensor_methods  # fills the Tensor method slots
from ._masking import masked_fill as masked_fill
from ._masking import tril as tril
from ._masking import triu as triu
from ._ops_attention import scaled_dot_product_attention as scaled_dot_product_attention
from ._ops_elementwise import abs as abs
from ._ops_elementwise import add as add
from ._ops_elementwise import cast as cast
from ._ops_elementwise import clamp as clamp
from ._ops_elementwise import div as div
from ._ops_elementwise import elementwise as elementwise
from ._ops_elementwise import exp as exp
from ._ops_elementwise import gelu as gelu
from ._ops_elementwise import leaky_relu as leaky_relu
from ._ops_elementwise import log as log
from ._ops_elementwise import maximum as maximum
from ._ops_elementwise import minimum as minimum
from ._ops_elementwise import mul as mul
from ._ops_elementwise import neg as neg
from ._ops_elementwise import pow as pow
from ._ops_elementwise import reciprocal as reciprocal
from ._ops_elementwise import relu as relu
from ._ops_elementwise import rsqrt as rsqrt
from ._ops_elementwise import sigmoid as sigmoid
from ._ops_elementwise import silu as silu
from ._ops_elementwise import sqrt as sqrt
from ._ops_elementwise import sub as sub
from ._ops_elementwise import tanh as tanh
from ._ops_elementwise import where as where
from ._ops_movement import broadcast_to as broadcast_to
from ._ops_movement import concat as concat
from ._ops_movement import contiguous as contiguous
from ._ops_movement import copy as copy
from ._ops_movement import dropout as dropout
from ._ops_movement import embedding as embedding
from ._ops_movement import flatten as flatten
from ._ops_movement import gather as gather
from ._ops_movement import getitem as getitem
from ._ops_movement import index_select as index_select
from ._ops_movement import pad as pad
from ._ops_movement import permute as permute
from ._ops_movement import reshape as reshape
from ._ops_movement import slice as slice
from ._ops_movement import squeeze as squeeze
from ._ops_movement import stack as stack
from ._ops_movement import transpose as transpose
from ._ops_movement import unsqueeze as unsqueeze
from ._ops_movement import view as view
from ._ops_nn import adaptive_avg_pool2d as adaptive_avg_pool2d
from ._ops_nn import avg_pool2d as avg_pool2d
from ._ops_nn import batch_norm as batch_norm
from ._ops_nn import bias_add as bias_add
from ._ops_nn import conv2d as conv2d
from ._ops_nn import global_avg_pool2d as global_avg_pool2d
from ._ops_nn import layer_norm as layer_norm
from ._ops_nn import matmul as matmul
from ._ops_nn import max_pool2d as max_pool2d
from ._ops_reduce import nll_gather as nll_gather
from ._tape import implicit_tape as implicit_tape

__all__ = [
    # elementwise
    "abs", "add", "cast", "clamp", "div", "elementwise", "exp", "gelu", "leaky_relu", "log",
    "maximum", "minimum", "mul", "neg", "pow", "reciprocal", "relu", "rsqrt", "sigmoid", "silu",
    "sqrt", "sub", "tanh", "where",
    # matmul, convolution, normalization, pooling
    "adaptive_avg_pool2d", "avg_pool2d", "batch_norm", "bias_add", "conv2d",
    "global_avg_pool2d", "layer_norm", "matmul", "max_pool2d",
    # reductions and softmax
    "log_softmax", "max", "mean", "min", "nll_gather", "softmax", "sum", "var",
    # movement, indexing, dropout
    "broadcast_to", "concat", "contiguous", "copy", "dropout", "embedding", "flatten", "gather",
    "getitem", "index_select", "pad", "permute", "reshape", "slice", "squeeze", "stack",
    "transpose", "unsqueeze", "view",
    # recording without a tape
    "implicit_tape",
    # attention
    "scaled_dot_product_attention",
    # masking
    "masked_fill",
    "tril",
    "triu",
]

Axis = int | Sequence[int] | None


def sum(x: Tensor, axis: Axis = None, keepdims: bool | None = None, *, dim: Axis = None,
        keepdim: bool | None = None) -> Tensor:
    """Sum over ``axis``/``dim`` (all axes for ``None``), recorded under a tape."""
    return _ops_reduce.sum(x, resolve_dim("sum", axis, dim),
                           resolve_keepdim("sum", keepdims, keepdim))


def mean(x: Tensor, axis: Axis = None, keepdims: bool | None = None, *, dim: Axis = None,
         keepdim: bool | None = None) -> Tensor:
    """Mean over ``axis``/``dim`` (all axes for ``None``), recorded under a tape."""
    return _ops_reduce.mean(x, resolve_dim("mean", axis, dim),
                            resolve_keepdim("mean", keepdims, keepdim))


def max(x: Tensor, axis: Axis = None, keepdims: bool | None = None, *, dim: Axis = None,
        keepdim: bool | None = None) -> Tensor:
    """Maximum over ``axis``/``dim`` (the values only), recorded under a tape."""
    return _ops_reduce.max(x, resolve_dim("max", axis, dim),
                           resolve_keepdim("max", keepdims, keepdim))


def min(x: Tensor, axis: Axis = None, keepdims: bool | None = None, *, dim: Axis = None,
        keepdim: bool | None = None) -> Tensor:
    """Minimum over ``axis``/``dim`` (the values only), recorded under a tape."""
    return _ops_reduce.min(x, resolve_dim("min", axis, dim),
                           resolve_keepdim("min", keepdims, keepdim))


def var(x: Tensor, axis: Axis = None, keepdims: bool | None = None, correction: int = 1, *,
        dim: Axis = None, keepdim: bool | None = None) -> Tensor:
    """Variance over ``axis``/``dim`` (/ (N - ``correction``)), recorded under a tape."""
    return _ops_reduce.var(x, resolve_dim("var", axis, dim),
                           resolve_keepdim("var", keepdims, keepdim), correction)


def softmax(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """Softmax along ``axis``/``dim`` (default -1), recorded under a tape."""
    return _ops_reduce.softmax(x, resolve_dim("softmax", axis, dim, -1))


def log_softmax(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """Log-softmax along ``axis``/``dim`` (default -1), recorded under a tape."""
    return _ops_reduce.log_softmax(x, resolve_dim("log_softmax", axis, dim, -1))
