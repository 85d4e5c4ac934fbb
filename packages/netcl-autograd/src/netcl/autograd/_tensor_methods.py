"""The differentiable Tensor methods and ``Tensor.backward``.

Importing ``netcl.autograd`` puts the recording version of every differentiable op in its
Tensor method slot (:mod:`netcl.core.tensor_methods`), so ``((model(x) - y) ** 2).mean()``
records like the functional ops do, and fills ``backward``.

# NOTE [ Tensor.backward ]
# ``loss.backward()`` runs the same reverse pass as ``tape.backward(loss)`` from ``loss``'s
# ``grad_fn`` (the graph is the ``grad_fn`` links, NOTE [ Tapes, nesting and consumption ]),
# whichever tape recorded it, also after its ``with`` block ended. Without ``retain_graph``
# every node it ran is freed; a later backward through them raises ``RuntimeError``.
#
# Recording without a Tape (PyTorch's default) is NOTE [ Recording ] in ``_tape``.

Examples:
    >>> import numpy as np
    >>> import netcl.autograd as ag
    >>> from netcl.core import Tensor, manager
    >>> w = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 2.0]))
    >>> w.requires_grad = True
    >>> with ag.Tape():
    ...     loss = ((w * 3 - 1) ** 2).sum()
    >>> loss.backward()
    >>> w.grad.tolist()
    [12.0, 30.0]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from netcl.core.tensor import Tensor
from netcl.core.tensor_methods import register

from ._ops_elementwise import (
    abs,
    add,
    cast,
    clamp,
    div,
    exp,
    gelu,
    leaky_relu,
    log,
    maximum,
    minimum,
    mul,
    neg,
    pow,
    reciprocal,
    relu,
    rsqrt,
    sigmoid,
    silu,
    sqrt,
    sub,
    tanh,
    where,
)
from ._ops_movement import (
    broadcast_to,
    contiguous,
    copy,
    flatten,
    gather,
    getitem,
    index_select,
    permute,
    squeeze,
    transpose,
    unsqueeze,
    view,
)
from ._ops_nn import matmul
from ._ops_reduce import log_softmax, max, mean, min, softmax, sum, var
from ._tape import Node, Tape, _accumulate, detach, is_recording

__all__ = ["METHODS", "backward", "check_inplace"]


def backward(t: Tensor, gradient: Tensor | None = None, retain_graph: bool = False) -> None:
    """``t.backward()``: accumulate d(t)/d(leaf) into ``leaf.grad`` for every leaf ``t``
    depends on (NOTE [ Tensor.backward ]).

    Raises:
        RuntimeError: ``t`` does not require grad (nothing recorded it), or the pass reaches
            a node an earlier backward freed.
        ValueError: ``t`` has more than one element and no ``gradient`` is given.
    """
    if not t.requires_grad:
        raise RuntimeError(
            f"Tensor.backward: this tensor (shape {t.shape}) does not require grad: no op that "
            "made it was recorded. Compute it from tensors with requires_grad=True outside "
            "no_grad (inside `with netcl.autograd.Tape():` when netcl.autograd.implicit_tape is "
            "off)"
        )
    seed = Tape._seed(t, gradient)
    root = t.grad_fn
    if isinstance(root, Node):
        _RUNNER._run(root, seed, retain_graph, None)
    else:
        _accumulate(t, seed, {})


def check_inplace(t: Tensor, op: str) -> None:
    """Refuse ``t.add_(...)`` (and ``+=``, ``zero_``, ...) where it would be recorded: the
    write is not differentiable, so the gradient would be silently wrong (as PyTorch refuses).

    Raises:
        RuntimeError: ``t`` requires grad and recording is on (do it under ``no_grad``).
    """
    if t.requires_grad and is_recording():
        raise RuntimeError(
            f"Tensor.{op}: an in-place write to a tensor that requires grad cannot be recorded; "
            "do it inside `with netcl.no_grad():` (as an optimizer step does), or write "
            "`x = x + y` to record it"
        )


_RUNNER = Tape()  # never entered: its reverse pass reads nothing of the tape itself


#: slot name -> recording op (the differentiable slots of :mod:`netcl.core.tensor_methods`)
METHODS: dict[str, Callable[..., Any]] = {
    "abs": abs, "add": add, "backward": backward, "broadcast_to": broadcast_to, "cast": cast,
    "check_inplace": check_inplace, "clamp": clamp, "contiguous": contiguous, "copy": copy,
    "detach": detach, "div": div,
    "exp": exp, "flatten": flatten, "gather": gather, "gelu": gelu, "getitem": getitem,
    "index_select": index_select, "leaky_relu": leaky_relu, "log": log,
    "log_softmax": log_softmax, "matmul": matmul, "max": max, "maximum": maximum,
    "mean": mean, "min": min, "minimum": minimum, "mul": mul, "neg": neg, "permute": permute,
    "pow": pow, "reciprocal": reciprocal, "relu": relu, "rsqrt": rsqrt, "sigmoid": sigmoid,
    "silu": silu, "softmax": softmax, "sqrt": sqrt, "squeeze": squeeze, "sub": sub,
    "sum": sum, "tanh": tanh, "transpose": transpose, "unsqueeze": unsqueeze, "var": var,
    "view": view, "where": where,
}

for _name, _fn in METHODS.items():
    register(_name, _fn, "netcl-autograd")
