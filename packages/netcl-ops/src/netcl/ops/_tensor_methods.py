"""The forward ops behind the Tensor methods (``x + y``, ``x.sum(dim=1)``, ``x[0]``, ...).

netcl-core defines the methods and their slots (:mod:`netcl.core.tensor_methods`); importing
``netcl.ops`` fills every slot from :data:`METHODS` below. netcl-autograd later puts its
recording versions in the differentiable slots.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[1.0, -2.0], [3.0, 4.0]]))
    >>> (x @ x).tolist(), (2 - x).abs().max().item(), x.to("float16").dtype
    ([[-5.0, -10.0], [15.0, 10.0]], 4.0, 'float16')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from netcl.core.placement import resolve_queue
from netcl.core.tensor import Tensor, reshape
from netcl.core.tensor_methods import register

from ._creation import fill
from ._elementwise import (
    abs,
    clamp,
    exp,
    gelu,
    leaky_relu,
    log,
    neg,
    reciprocal,
    relu,
    rsqrt,
    sigmoid,
    sign,
    silu,
    sqrt,
    tanh,
)
from ._elementwise_binary import (
    add,
    cast,
    div,
    eq,
    ge,
    gt,
    le,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    pow,
    sub,
    where,
)
from ._matmul import matmul
from ._movement import (
    broadcast_to,
    contiguous,
    copy,
    flatten,
    getitem,
    permute,
    squeeze,
    transpose,
    unsqueeze,
    view,
)
from ._movement_take import gather, index_select
from ._reduce import argmax, max, mean, min, sum, var
from ._setitem import setitem
from ._softmax import log_softmax, softmax

__all__ = ["METHODS", "detach", "to_device"]


def to_device(x: Tensor, device: Any) -> Tensor:
    """``x`` on ``device`` (a selector string, a DeviceHandle or a queue): ``x`` itself when
    it is there already, else a copy through the host (the two devices share no memory).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones(2))
        >>> to_device(x, "cpu") is x
        True
    """
    queue = resolve_queue(device, "Tensor.to")
    if queue is x.queue:
        return x
    return Tensor.from_host(queue, x.to_host(), dtype=x.dtype)


def detach(x: Tensor) -> Tensor:
    """A view of ``x`` outside every graph (no ``grad_fn``, no ``requires_grad``)."""
    return reshape(x, x.shape)


#: slot name -> forward op (the names of :mod:`netcl.core.tensor_methods`' slots)
METHODS: dict[str, Callable[..., Any]] = {
    "abs": abs, "add": add, "argmax": argmax, "broadcast_to": broadcast_to, "cast": cast,
    "clamp": clamp, "contiguous": contiguous, "copy": copy, "detach": detach, "div": div,
    "eq": eq, "exp": exp, "fill": fill, "flatten": flatten, "gather": gather, "ge": ge,
    "gelu": gelu, "getitem": getitem, "gt": gt, "index_select": index_select, "le": le,
    "leaky_relu": leaky_relu, "log": log, "log_softmax": log_softmax, "lt": lt,
    "matmul": matmul, "max": max, "maximum": maximum, "mean": mean, "min": min,
    "minimum": minimum, "mul": mul, "ne": ne, "neg": neg,
    "permute": permute, "pow": pow, "reciprocal": reciprocal, "relu": relu, "rsqrt": rsqrt,
    "setitem": setitem, "sigmoid": sigmoid, "sign": sign, "silu": silu, "softmax": softmax,
    "sqrt": sqrt,
    "squeeze": squeeze, "sub": sub, "sum": sum, "tanh": tanh, "to_device": to_device,
    "transpose": transpose, "unsqueeze": unsqueeze, "var": var, "view": view, "where": where,
}

for _name, _fn in METHODS.items():
    register(_name, _fn, "netcl-ops")
