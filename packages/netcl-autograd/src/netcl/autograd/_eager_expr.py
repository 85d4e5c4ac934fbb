"""Derivative rows evaluated with ``netcl.ops`` calls: the OpenCL eager backward of short rows.

# NOTE [ Eager OpenCL row gradients ]
# On OpenCL a derivative row is computed one of two ways, both from the row itself:
# - as ``netcl.ops`` calls, one per distinct tensor-valued node of the row's tree (``_cexpr``
#   parses it; numbers fold in Python): ``relu``'s ``a > 0 ? g : 0`` is ``ops.gt`` and
#   ``ops.where``, ``mul``'s ``g * b`` one ``ops.mul``: the eager kernels, which netcl-ops
#   vectorizes and selects per device;
# - as one generated kernel (``_codegen``), when the row needs more than ``MAX_CALLS`` calls
#   (sigmoid, tanh, maximum, clamp, silu, gelu, ...) or something ``netcl.ops`` has no call for
#   (C's ``sign`` of NaN is 0, ``%``, integer casts): one launch, no temporaries.
# A generated kernel takes about as long as two eager ones on PoCL (262144 floats: 339 us
# against 186 us for ``x * y``), so rows of one or two calls run no slower than their
# hand-written op calls did, and longer rows run faster (one launch for ``maximum``'s seven).

Examples:
    >>> plan = ops_plan(("g * x1", "g * x0"), frozenset({"g", "x0"}))
    >>> plan is not None  # one ops.mul each; x1 is a number
    True
    >>> ops_plan(("x0 < x1 ? (CT)0 : (x0 == x1 ? g * LIT(0.5) : g)",),
    ...          frozenset({"g", "x0", "x1"})) is None  # five calls: one generated kernel
    True
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import netcl.ops as _ops
from netcl.core.tensor import Tensor

from ._cexpr import FUNCTIONS, OPERATOR_HELPERS, Node, emit, parse

__all__ = ["MAX_CALLS", "ops_plan"]

#: The most ``netcl.ops`` calls a row's gradients are computed with; longer rows run as one
#: generated kernel (NOTE [ Eager OpenCL row gradients ]).
MAX_CALLS = 2

Evaluator = Callable[[dict[str, Any]], tuple[Any, ...]]


def _number(x: Any) -> Any:
    """A NumPy scalar as a Python number (``netcl.ops`` takes Python numbers)."""
    if isinstance(x, (bool, np.bool_)):
        return int(x)
    return x.item() if isinstance(x, np.generic) else x


def _lift(tensor_fn: Callable[..., Tensor], number_fn: Callable[..., Any]) -> Callable[..., Any]:
    """``tensor_fn`` when an argument is a Tensor, else ``number_fn`` (folded in Python)."""

    def apply(*args: Any) -> Any:
        if any(isinstance(a, Tensor) for a in args):
            return tensor_fn(*args)
        return _number(number_fn(*args))

    return apply


def _mask(c: Any) -> Any:
    """A condition as ``netcl.ops.where`` takes it: uint8, nonzero where true."""
    if isinstance(c, Tensor):
        return c if c.dtype == "uint8" else _ops.ne(c, 0)
    return int(bool(c))


def _where(c: Any, yes: Any, no: Any) -> Any:
    if not isinstance(c, Tensor):
        return yes if c else no
    return _ops.where(_mask(c), yes, no)


def _cast_float(x: Any, ct: str) -> Any:
    if not isinstance(x, Tensor):
        return float(x)
    return x if x.dtype == ct else _ops.cast(x, ct)


def _divide(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return int(a / b)  # C integer division truncates toward zero
    return a / b


_TENSOR_OPS: dict[str, tuple[Callable[..., Tensor], Callable[..., Any]]] = {
    "+": (_ops.add, operator.add), "-": (_ops.sub, operator.sub), "*": (_ops.mul, operator.mul),
    "<": (_ops.lt, operator.lt), "<=": (_ops.le, operator.le), ">": (_ops.gt, operator.gt),
    ">=": (_ops.ge, operator.ge), "==": (_ops.eq, operator.eq), "!=": (_ops.ne, operator.ne),
    "&&": (lambda a, b: _ops.mul(_mask(a), _mask(b)), lambda a, b: bool(a) and bool(b)),
    "||": (lambda a, b: _ops.maximum(_mask(a), _mask(b)), lambda a, b: bool(a) or bool(b)),
}

_HELPERS: dict[str, Any] = {
    "_where": _where, "_castf": _cast_float, "_div": _lift(_ops.div, _divide),
    "_neg": _lift(_ops.neg, operator.neg), "_not": _lift(lambda x: _ops.eq(x, 0), operator.not_),
    **{OPERATOR_HELPERS[op]: _lift(*fns) for op, fns in _TENSOR_OPS.items()},
}

#: C functions with a ``netcl.ops`` call of the same meaning (on NaN and infinities too), and
#: how many calls each is.
_FUNCTIONS: dict[str, tuple[Callable[..., Tensor], int]] = {
    "LIT": (lambda x: x, 0), "exp": (_ops.exp, 1), "log": (_ops.log, 1),
    "sqrt": (_ops.sqrt, 1), "rsqrt": (_ops.rsqrt, 1), "tanh": (_ops.tanh, 1),
    "fabs": (_ops.abs, 1), "pow": (_ops.pow, 1), "isnan": (lambda x: _ops.ne(x, x), 1),
    "erf": (lambda x: _ops.elementwise("erf", x), 1),
}
_CALLABLE = {name: _lift(fn, FUNCTIONS[name]) for name, (fn, _) in _FUNCTIONS.items()}


def _calls(roots: Sequence[Node], tensors: frozenset[str]) -> tuple[int, bool] | None:
    """(``netcl.ops`` calls the roots need, whether every root is a tensor), or ``None``
    where a node has no call."""
    kinds: dict[Node, bool] = {}  # node -> is a tensor
    calls = 0

    def visit(node: Node) -> bool:
        nonlocal calls
        if node in kinds:
            return kinds[node]
        kind = node[0]
        if kind == "num":
            return False
        if kind == "var":
            kinds[node] = node[1] in tensors
            return kinds[node]
        if kind == "casti" or (kind == "bin" and node[1] == "%") or (
                kind == "call" and node[1] not in _FUNCTIONS):
            raise LookupError(kind)
        children = node[2:] if kind in ("bin", "call") else node[1:]
        tensor = any([visit(c) for c in children])
        if tensor:
            calls += _FUNCTIONS[node[1]][1] if kind == "call" else 1
        kinds[node] = tensor
        return tensor

    try:
        every = all([visit(root) for root in roots])
    except LookupError:
        return None
    return calls, every


def ops_plan(sources: tuple[str, ...], tensors: frozenset[str],
             functions: Mapping[str, Callable[..., Any]] | None = None) -> Evaluator | None:
    """The C expressions ``sources`` as one function of ``{name: Tensor or number}`` (and
    ``"__ct__"``: the compute dtype's name) computing each with ``netcl.ops`` calls, or
    ``None`` where they need more than :data:`MAX_CALLS` calls, a call ``netcl.ops`` lacks, or
    give a number (NOTE [ Eager OpenCL row gradients ]). ``tensors`` names the variables that
    are Tensors; ``functions`` are the primitive's own (their names make the plan ``None``).
    """
    known = {**FUNCTIONS, **dict(functions or {})}
    try:
        roots = [parse(source, known) for source in sources]
    except ValueError:
        return None
    counted = _calls(roots, tensors)
    if counted is None or counted[0] > MAX_CALLS or not counted[1]:
        return None
    return emit(roots, "; ".join(sources), _CALLABLE, _HELPERS)
