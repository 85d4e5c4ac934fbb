"""The primitive table: each primitive's C expression and derivative expressions, by name.

This is the bottom of the JIT compiler (imports go one way: ``_registry`` <- ``_lazy`` (the
IR) <- ``_group`` <- ``_codegen`` <- ``_fusion`` (the executor) <- ``_primitives`` (callable
primitives, the built-in rows) <- ``compiler`` (public)). A :class:`PrimitiveDef` is only what
the IR, the code generator and the NumPy evaluator read; the callable
:class:`~netcl.autograd.compiler.Primitive` that :func:`~netcl.autograd.compiler.register_primitive`
returns extends it.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PRIMITIVES", "BackwardExpr", "ForwardExpr", "PrimitiveDef", "add_primitive",
           "lookup_primitive"]

#: ``forward(args, attrs) -> C expression``.
ForwardExpr = Callable[[Sequence[str], Mapping[str, Any]], str]
#: ``backward(args, grad_var, attrs, out_var) -> one C expression per argument``.
BackwardExpr = Callable[[Sequence[str], str, Mapping[str, Any], str], Sequence[str]]

_versions = itertools.count(1)
_lock = threading.Lock()


@dataclass(frozen=True)
class PrimitiveDef:
    """One primitive's definition: its expressions, arity, fusibility and C/NumPy helpers.

    ``version`` differs between two registrations of one name, so cached kernels of a
    replaced primitive are not reused.
    """

    name: str
    forward: ForwardExpr
    backward: BackwardExpr | None
    arity: int
    fusible: bool = True
    preamble: str = ""
    functions: tuple[tuple[str, Callable[..., Any]], ...] = ()
    version: int = field(default_factory=lambda: next(_versions), compare=False)

    def forward_source(self, args: Sequence[str], attrs: Mapping[str, Any]) -> str:
        """The forward C expression for argument names ``args``.

        Raises:
            TypeError: ``forward`` did not return a string.
        """
        expr = self.forward(list(args), attrs)
        if not isinstance(expr, str):
            raise TypeError(
                f"primitive {self.name!r}: forward must return a C expression string, got "
                f"{type(expr).__name__}"
            )
        return expr

    def backward_sources(
        self, args: Sequence[str], grad_var: str, attrs: Mapping[str, Any], out_var: str
    ) -> list[str]:
        """One gradient C expression per argument.

        Raises:
            RuntimeError: the primitive has no backward.
            TypeError: ``backward`` did not return ``arity`` strings.
        """
        if self.backward is None:
            raise RuntimeError(
                f"primitive {self.name!r} was registered without backward; it cannot be "
                "differentiated"
            )
        exprs = list(self.backward(list(args), grad_var, attrs, out_var))
        if len(exprs) != self.arity or not all(isinstance(e, str) for e in exprs):
            raise TypeError(
                f"primitive {self.name!r}: backward must return {self.arity} C expression "
                f"strings (one per argument), got {exprs!r}"
            )
        return exprs


PRIMITIVES: dict[str, PrimitiveDef] = {}


def add_primitive(prim: PrimitiveDef, replace: bool) -> None:
    """Put ``prim`` in the table under its name.

    Raises:
        ValueError: the name is taken and ``replace`` is false.
    """
    with _lock:
        if prim.name in PRIMITIVES and not replace:
            raise ValueError(
                f"register_primitive: {prim.name!r} is registered already; pass replace=True "
                "to redefine it"
            )
        PRIMITIVES[prim.name] = prim


def lookup_primitive(name: str) -> PrimitiveDef:
    """The primitive registered as ``name``.

    Raises:
        KeyError: no primitive of that name (the message lists the known ones).
    """
    try:
        return PRIMITIVES[name]
    except KeyError:
        raise KeyError(
            f"no primitive {name!r}; registered: {', '.join(sorted(PRIMITIVES))}"
        ) from None
