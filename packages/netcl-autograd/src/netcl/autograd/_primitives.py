"""The JIT compiler's primitives: each an OpenCL C expression and its derivative expressions.

The built-in ones are made from netcl.ops' elementwise table and the derivative table (see
NOTE [ Built-in primitives ]); :func:`register_primitive` adds user primitives.

:func:`register_primitive` takes exactly what the KernelSpec page shows: ``forward(args, attrs)``
returns the C expression of the output given the C names of the arguments; ``backward(args,
grad_var, attrs, out_var)`` returns one C expression per argument, its gradient given the
upstream gradient ``grad_var`` and the output ``out_var``. Expressions may use the netcl
preamble macros (``ADD``, ``MUL``, ``RELU``, ...), ``LIT(1.0)`` for a literal of the compute
type, ``CT`` for the compute type, and the OpenCL math built-ins.

Examples:
    >>> p = register_primitive(
    ...     "doc_axpy",
    ...     forward=lambda args, attrs: f"ADD(MUL({args[0]}, {args[1]}), {args[2]})",
    ...     backward=lambda args, g, attrs, out: [f"MUL({g}, {args[1]})",
    ...                                           f"MUL({g}, {args[0]})", g],
    ...     arity=3,
    ...     replace=True,  # the examples may run twice in one process
    ... )
    >>> p.forward_source(["a", "b", "c"], {})
    'ADD(MUL(a, b), c)'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from netcl.core.tensor import Tensor
from netcl.ops import ELEMENTWISE, EwOp

from ._derivatives import DERIVATIVES
from ._fusion import materialize
from ._lazy import Lazy, has_lazy
from ._registry import BackwardExpr, ForwardExpr, PrimitiveDef, add_primitive, lookup_primitive

__all__ = ["Primitive", "get_primitive", "register_primitive"]


@dataclass(frozen=True)
class Primitive(PrimitiveDef):
    """One registered primitive. Calling it applies it to Tensors, lazy values or numbers.

    Called with Tensors it runs as one generated kernel (recorded on the tape, so it is
    differentiable); inside :func:`netcl.autograd.compiler.jit` it becomes one more node of the
    fused expression, or, if it is not fusible, runs at once as its own kernel. ``attrs`` are
    keyword arguments, passed to ``forward``/``backward``.
    """

    def __call__(self, *operands: Any, **attrs: Any) -> Tensor:
        out = Lazy.apply(self.name, operands, attrs)
        if not self.fusible:
            materialize(out)  # a boundary runs now; later nodes read it as a leaf
        return out if has_lazy(operands, {}) else materialize(out)


def register_primitive(
    name: str,
    forward: ForwardExpr,
    backward: BackwardExpr | None,
    arity: int,
    fusible: bool = True,
    replace: bool = False,
    *,
    preamble: str = "",
    numpy_functions: Mapping[str, Callable[..., Any]] | None = None,
) -> Primitive:
    """Register a primitive so that it joins fusion and differentiation (see the module doc).

    Args:
        name: a C identifier naming the primitive.
        forward: ``(args, attrs) -> C expression``.
        backward: ``(args, grad_var, attrs, out_var) -> [C expression per argument]``, or
            ``None`` for a primitive that is never differentiated.
        arity: number of arguments.
        fusible: ``False`` makes the primitive a fusion boundary: it runs as its own kernel
            and its arguments are computed before it.
        replace: allow replacing a registered primitive (cached kernels of the old one are
            not reused).
        preamble: OpenCL C placed before every kernel that uses the primitive: the macros or
            helper functions its expressions call (``MY_OP`` on the KernelSpec page).
        numpy_functions: NumPy versions of those helpers, by name, for the NumPy backend.

    Returns:
        The :class:`Primitive`; call it on Tensors (eager) or on lazy values inside ``jit``.

    Raises:
        ValueError: bad name or arity, or ``name`` is taken and ``replace`` is false.
        TypeError: ``forward``/``backward`` are not callable.

    Examples:
        The KernelSpec page's ``my_op``, with its macro for OpenCL and for NumPy:

        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> my_op = register_primitive(
        ...     name="doc_my_op",
        ...     forward=lambda args, attrs: f"MY_OP({args[0]}, {args[1]})",
        ...     backward=lambda args, grad_var, attrs, out_var: [
        ...         f"MUL({grad_var}, {args[1]})",
        ...         f"MUL({grad_var}, {args[0]})",
        ...     ],
        ...     arity=2,
        ...     fusible=True,
        ...     preamble="#define MY_OP(a, b) ((a) * (b))",
        ...     numpy_functions={"MY_OP": lambda a, b: a * b},
        ...     replace=True,
        ... )
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([2.0, 3.0]))
        >>> my_op(x, x).to_host().tolist()
        [4.0, 9.0]
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"register_primitive: name must be a C identifier, got {name!r}")
    if isinstance(arity, bool) or not isinstance(arity, int) or arity < 1:
        raise ValueError(f"register_primitive {name!r}: arity must be an int >= 1, got {arity!r}")
    if not callable(forward):
        raise TypeError(f"register_primitive {name!r}: forward must be callable")
    if backward is not None and not callable(backward):
        raise TypeError(f"register_primitive {name!r}: backward must be callable or None")
    if not isinstance(preamble, str):
        raise TypeError(f"register_primitive {name!r}: preamble must be C source text")
    functions = tuple(sorted((numpy_functions or {}).items()))
    prim = Primitive(name, forward, backward, arity, bool(fusible), preamble, functions)
    add_primitive(prim, replace)
    return prim


def get_primitive(name: str) -> Primitive:
    """The primitive registered as ``name``.

    Raises:
        KeyError: no primitive of that name (the message lists the known ones).

    Examples:
        >>> get_primitive("mul").forward_source(["x", "y"], {})
        'x * y'
    """
    prim = lookup_primitive(name)
    if not isinstance(prim, Primitive):  # every registration goes through register_primitive
        raise RuntimeError(f"primitive {name!r} was added to the table without being callable")
    return prim


# -- built-in primitives ------------------------------------------------------------------------

# NOTE [ Built-in primitives ]
# Every "arith" row of netcl.ops.ELEMENTWISE with a float expression is a built-in primitive:
# its arguments are the row's operands then its parameters, its forward is the row's C
# expression and its backward the row of the same name in the derivative table (none: the
# primitive is not differentiable). Nothing is restated here, so the fused and the eager
# kernels compute the same expression (relu of NaN is NaN in both).

_VARIABLES = re.compile(r"\b(?:[abc]|q[01]|g|out)\b")
_ARGUMENTS = ("a", "b", "c", "q0", "q1")


def _bind(template: str, names: Mapping[str, str]) -> str:
    """``template`` with its variables (``a``, ``q0``, ``g``, ``out``, ...) renamed by
    ``names``; a name that is not a C identifier is parenthesized."""

    def name(m: re.Match[str]) -> str:
        value = names[m.group()]
        return value if value.isidentifier() else f"({value})"

    return _VARIABLES.sub(name, template)


def _from_tables(row: EwOp, derivative: Sequence[str] | None) -> None:
    arity = row.arity + row.nparams
    forward_template = row.c_float or ""
    variables = _ARGUMENTS[:row.arity] + _ARGUMENTS[3:3 + row.nparams]

    def forward(args: Sequence[str], attrs: Mapping[str, Any]) -> str:
        return _bind(forward_template, dict(zip(variables, args)))

    def backward(args: Sequence[str], g: str, attrs: Mapping[str, Any], out: str) -> list[str]:
        names = {**dict(zip(variables, args)), "g": g, "out": out}
        return [_bind(t, names) for t in derivative or ()]

    if derivative is not None and len(derivative) != arity:
        raise RuntimeError(f"derivative row {row.name!r} has {len(derivative)} expressions, "
                           f"its primitive {arity} arguments")
    register_primitive(row.name, forward, None if derivative is None else backward, arity)


for _row in ELEMENTWISE.values():
    if _row.group == "arith" and _row.c_float is not None:
        _from_tables(_row, DERIVATIVES.get(_row.name))
