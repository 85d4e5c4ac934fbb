"""``@differentiable``: one registry entry per op, its forward and backward side by side.

A differentiable op is a function that computes its output with ``netcl.ops`` and returns it
together with a backward closure (micrograd style: the backward rule sits next to the forward
it differentiates, and captures what it needs)::

    @differentiable("mul", primitive="mul")
    def mul(a: Tensor, b: Tensor) -> tuple[Tensor, Backward]:
        out = _ops.mul(a, b)

        def backward(g: Tensor, needs: tuple[bool, ...]) -> Grads:
            return (unbroadcast(_ops.mul(g, b), a.shape) if needs[0] else None,
                    unbroadcast(_ops.mul(g, a), b.shape) if needs[1] else None)

        return out, backward

The backward returns one gradient (or ``None``) per *Tensor argument*, in argument order, with
Tensors inside list/tuple arguments counted one by one (``concat([a, b])`` has two). ``needs``
says which of them require a gradient. Backward closures run under :func:`no_grad` and use
device ops only. ``primitive`` names the JIT compiler primitive the op becomes when it is called
on lazy values inside :func:`netcl.autograd.compiler.jit`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from netcl.core.tensor import Tensor, reshape
from netcl.ops import sum as reduce_sum

from ._fusion import materialize_args
from ._lazy import Lazy
from ._tape import Backward, no_grad, record

__all__ = [
    "REGISTRY",
    "Backward",
    "Grads",
    "OpDef",
    "differentiable",
    "sum_to_shape",
    "tensor_inputs",
    "unbroadcast",
]

P = ParamSpec("P")
R = TypeVar("R")

#: What a backward closure returns: one gradient or ``None`` per Tensor argument.
Grads = Sequence["Tensor | None"]


@dataclass(frozen=True)
class OpDef:
    """One registered differentiable op: its name, forward+backward function, and primitive."""

    name: str
    fn: Callable[..., tuple[Tensor, Backward]]
    primitive: str | Callable[..., Tensor] | None = None


#: Every differentiable op by name (one entry each; ``grep '@differentiable("name"'``).
REGISTRY: dict[str, OpDef] = {}


def tensor_inputs(args: Sequence[Any], kwargs: dict[str, Any]) -> list[Tensor]:
    """The Tensor arguments in order, Tensors inside list/tuple arguments counted one by one."""
    out: list[Tensor] = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, Tensor):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            out.extend(v for v in value if isinstance(v, Tensor))
    return out


def _scan(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[list[Tensor], bool]:
    """:func:`tensor_inputs` and whether any is :class:`Lazy`, in one pass (every op call)."""
    out: list[Tensor] = []
    lazy = False
    for value in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(value, Tensor):  # Lazy is a Tensor
            out.append(value)
            lazy = lazy or isinstance(value, Lazy)
        elif isinstance(value, (list, tuple)):
            for v in value:
                if isinstance(v, Tensor):
                    out.append(v)
                lazy = lazy or isinstance(v, Lazy)
    return out, lazy


def differentiable(
    name: str, primitive: str | Callable[..., Tensor] | None = None
) -> Callable[[Callable[P, tuple[Tensor, Backward]]], Callable[P, Tensor]]:
    """Register a forward function returning ``(output, backward)`` as differentiable op ``name``.

    The decorated function runs the forward without recording, then records one node on every
    active tape when an input requires grad (see :func:`netcl.autograd.Tape`).

    Raises:
        ValueError: ``name`` is registered already.

    Examples:
        >>> import numpy as np
        >>> import netcl.ops
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> @differentiable("doc_cube")
        ... def cube(x):
        ...     square = netcl.ops.mul(x, x)
        ...     out = netcl.ops.mul(square, x)
        ...     return out, lambda g, needs: (netcl.ops.mul(g, netcl.ops.mul(square, 3.0)),)
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 2.0]))
        >>> x.requires_grad = True
        >>> with ag.Tape() as tape:
        ...     y = ag.ops.sum(cube(x))
        >>> tape.backward(y)
        >>> x.grad.to_host().tolist()
        [3.0, 12.0]
    """

    def wrap(fn: Callable[P, tuple[Tensor, Backward]]) -> Callable[P, Tensor]:
        if name in REGISTRY:
            raise ValueError(f"differentiable: op {name!r} is registered already")
        REGISTRY[name] = OpDef(name, fn, primitive)

        @functools.wraps(fn)
        def op(*args: P.args, **kwargs: P.kwargs) -> Tensor:
            inputs, lazy = _scan(args, kwargs)
            if lazy:
                if isinstance(primitive, str) and not kwargs:
                    return Lazy.apply(primitive, args, {})
                if callable(primitive):
                    return primitive(*args, **kwargs)
                args, kwargs = materialize_args(args, kwargs)  # type: ignore[assignment]
                inputs = tensor_inputs(args, kwargs)
            with no_grad():
                out, backward = fn(*args, **kwargs)
            return record(name, inputs, out, backward)

        return op

    return wrap


def sum_to_shape(g: Tensor, shape: tuple[int, ...]) -> Tensor:
    """``g`` summed over the axes NumPy broadcasting added or stretched to reach ``g.shape``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> g = Tensor.from_host(manager.default("cpu").queue, np.ones((2, 3)))
        >>> sum_to_shape(g, (1, 3)).to_host().tolist()
        [[2.0, 2.0, 2.0]]
    """
    if g.shape == shape:
        return g
    lead = len(g.shape) - len(shape)
    stretched = tuple(lead + k for k, d in enumerate(shape) if d == 1 and g.shape[lead + k] != 1)
    if not stretched and lead:  # only added axes: the sum has the shape already (no view)
        out = reduce_sum(g, axis=tuple(range(lead)))
        return out if out.shape == shape else reshape(out, shape)
    if lead or stretched:
        g = reduce_sum(g, axis=tuple(range(lead)) + stretched, keepdims=True)
    return reshape(g, shape)


def unbroadcast(g: Tensor | None, shape: tuple[int, ...], needed: bool = True) -> Tensor | None:
    """:func:`sum_to_shape` that passes ``None`` through (and skips when not ``needed``)."""
    if g is None or not needed:
        return None
    return sum_to_shape(g, shape)
