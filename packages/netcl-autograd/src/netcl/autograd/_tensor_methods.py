"""The differentiable Tensor methods, ``Tensor.backward`` and recording without a Tape.

Importing ``netcl.autograd`` puts the recording version of every differentiable op in its
Tensor method slot (:mod:`netcl.core.tensor_methods`), so ``((model(x) - y) ** 2).mean()``
records like the functional ops do, and fills ``backward``.

# NOTE [ Tensor.backward ]
# ``loss.backward()`` runs the same reverse pass as ``tape.backward(loss)`` from ``loss``'s
# ``grad_fn`` (the graph is the ``grad_fn`` links, NOTE [ Tapes, nesting and consumption ]),
# whichever tape recorded it, also after its ``with`` block ended. Without ``retain_graph``
# every node it ran is freed; a later backward through them raises ``RuntimeError``.
#
# NOTE [ Implicit tape ]
# PyTorch records without a Tape: every op on a tensor that requires grad, outside
# ``no_grad``. :func:`implicit_tape` turns that on for the calling thread: an implicit tape
# sits at the bottom of the thread's tape stack, so every op records (explicit tapes above it
# work as before). It holds its nodes by weak reference only: a graph lives exactly as long as
# the tensors computed from it (as in PyTorch), and ``loss.backward()`` frees what it ran. It
# is off by default: the Tape page makes recording happen only inside ``with Tape()``.

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

import builtins
import weakref
from collections.abc import Callable, Iterator
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
from ._tape import Node, Tape, _accumulate, _state, detach, is_recording

__all__ = ["METHODS", "backward", "check_inplace", "implicit_tape", "implicit_tape_enabled"]


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
            "made it was recorded. Compute it from tensors with requires_grad=True inside "
            "`with netcl.autograd.Tape():`, or turn on netcl.autograd.implicit_tape() to record "
            "without a tape, as PyTorch does"
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


class _WeakNodes:
    """The implicit tape's node list: weak references, pruned as it grows."""

    def __init__(self) -> None:
        self._refs: list[weakref.ref[Node]] = []
        self._limit = 256

    def append(self, node: Node) -> None:
        refs = self._refs
        if len(refs) >= self._limit:
            refs[:] = [r for r in refs if r() is not None]
            self._limit = 2 * len(refs) + 256
        refs.append(weakref.ref(node))

    def __iter__(self) -> Iterator[Node]:
        return iter([n for n in (r() for r in self._refs) if n is not None])

    def __len__(self) -> int:
        return builtins.sum(r() is not None for r in self._refs)

    def clear(self) -> None:
        self._refs.clear()


class _ImplicitTape(Tape):
    """The tape :func:`implicit_tape` keeps at the bottom of a thread's tape stack."""

    def __init__(self) -> None:
        super().__init__()
        self._nodes = _WeakNodes()  # type: ignore[assignment]

    def backward(self, loss: Tensor, grad: Tensor | None = None, retain_graph: bool = False,
                 on_node: Callable[[Node], Any] | None = None) -> None:
        """``loss.backward(grad, retain_graph)``: the implicit tape is never consumed."""
        backward(loss, grad, retain_graph)

    def __repr__(self) -> str:
        return f"ImplicitTape({len(self._nodes)} live nodes)"


def implicit_tape(enabled: bool = True) -> bool:
    """Record ops on tensors that require grad without a ``with Tape()`` block, in this
    thread (NOTE [ Implicit tape ]); returns whether it was on before.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> w = Tensor.from_host(manager.default("cpu").queue, np.array([2.0]))
        >>> w.requires_grad = True
        >>> before = implicit_tape()
        >>> loss = (w * w).sum()
        >>> loss.backward()
        >>> _ = implicit_tape(before)
        >>> w.grad.tolist(), implicit_tape_enabled()
        ([4.0], False)
    """
    tapes = _state.tapes
    held = [t for t in tapes if isinstance(t, _ImplicitTape)]
    if enabled and not held:
        tapes.insert(0, _ImplicitTape())
    elif not enabled:
        for t in held:
            tapes.remove(t)
    return bool(held)


def implicit_tape_enabled() -> bool:
    """Whether :func:`implicit_tape` is on in this thread."""
    return any(isinstance(t, _ImplicitTape) for t in _state.tapes)


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
