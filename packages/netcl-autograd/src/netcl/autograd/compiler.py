"""The JIT compiler: a chain of elementwise ops runs as one generated kernel, and so does its
backward (at most two).

:func:`jit` traces a Python function of Tensors: inside it the elementwise ops of
:mod:`netcl.autograd.ops`, the arithmetic operators and every registered primitive build a lazy
expression DAG instead of running. The DAG runs as one OpenCL kernel with broadcasting index
math when a value is needed (the function returns, or a non-elementwise op such as ``matmul``
consumes it); on the NumPy backend the same primitive expressions are evaluated with NumPy.
On a :class:`~netcl.autograd.Tape` the fused chain is one node, whose backward recomputes the
forward in registers and produces every input gradient in one kernel, plus one more for the
inputs that were broadcast (their gradients are reduced over the broadcast dims).

:func:`register_primitive` (as on the KernelSpec page) adds a user op to both fusion and
differentiation. Generated kernels are cached by expression structure; :func:`cache_info`
counts them and :func:`count_launches` counts kernel launches.

Examples:
    >>> import numpy as np
    >>> import netcl.autograd as ag
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> @jit
    ... def f(x, w, b):
    ...     return ag.ops.relu(x * w + b) * 2.0 - 1.0
    >>> x = Tensor.from_host(q, np.array([[1.0, -2.0], [3.0, 4.0]]))
    >>> w = Tensor.from_host(q, np.array([1.0, 0.5]))
    >>> b = Tensor.from_host(q, np.array([0.0, 1.0]))
    >>> f(x, w, b).to_host().tolist()
    [[1.0, -1.0], [5.0, 5.0]]
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from netcl.core.kernels.primitives import count_launches, launch_count
from netcl.core.tensor import Tensor

from ._codegen import cache_info, clear_cache
from ._fusion import materialize
from ._lazy import Lazy
from ._primitives import Primitive, get_primitive, register_primitive
from ._registry import PRIMITIVES, BackwardExpr, ForwardExpr

__all__ = [
    "PRIMITIVES",
    "BackwardExpr",
    "ForwardExpr",
    "Lazy",
    "Primitive",
    "apply",
    "cache_info",
    "clear_cache",
    "count_launches",
    "get_primitive",
    "jit",
    "launch_count",
    "register_primitive",
]

P = ParamSpec("P")
R = TypeVar("R")


def _finish(value: Any) -> Any:
    if isinstance(value, Lazy):
        return materialize(value)
    if isinstance(value, tuple):
        return tuple(_finish(v) for v in value)
    if isinstance(value, list):
        return [_finish(v) for v in value]
    return value


def jit(fn: Callable[P, R]) -> Callable[P, R]:
    """Trace ``fn`` so that its elementwise chains run fused (see the module docstring).

    Tensor arguments become lazy values for the trace; everything the function returns
    (a Tensor, or a tuple/list of them) is materialized before it comes back. Tracing happens on
    every call (it costs microseconds); the generated kernels are cached by structure, so a
    second call with any shapes of the same broadcast pattern builds nothing.

    Inside ``fn`` use the ops of :mod:`netcl.autograd.ops` (or operators and primitives);
    ``netcl.ops`` functions cannot take lazy values.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> double_plus_one = jit(lambda x: x * 2.0 + 1.0)
        >>> double_plus_one(Tensor.from_host(q, np.array([1.0, 2.0]))).to_host().tolist()
        [3.0, 5.0]
    """

    @functools.wraps(fn)
    def traced(*args: P.args, **kwargs: P.kwargs) -> R:
        lazy_args = [Lazy.leaf(a) if isinstance(a, Tensor) else a for a in args]
        lazy_kwargs = {k: Lazy.leaf(v) if isinstance(v, Tensor) else v for k, v in kwargs.items()}
        result: R = _finish(fn(*lazy_args, **lazy_kwargs))  # type: ignore[arg-type]
        return result

    return traced


def apply(name: str, *operands: Any, **attrs: Any) -> Tensor:
    """Apply primitive ``name`` to Tensors, lazy values or numbers (keyword ``attrs``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))
        >>> apply("relu", x).to_host().tolist()
        [0.0, 2.0]
    """
    return get_primitive(name)(*operands, **attrs)
