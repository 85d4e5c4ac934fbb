"""Lazy elementwise values: what ``jit`` traces a function into.

A :class:`Lazy` is a Tensor that has a shape, dtype and device but no storage yet: either a
*leaf* wrapping a real Tensor, or a primitive applied to other lazy values and Python numbers.
Elementwise differentiable ops and registered primitives called on lazy values build more lazy
values; anything else (matmul, a reduction, a non-fusible primitive) first *materializes* its
lazy arguments, which runs their whole expression as one generated kernel (see ``_fusion``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.shapes import broadcast_shapes
from netcl.core.tensor import Tensor, check_same_device

from ._registry import lookup_primitive
from ._tape import is_recording

__all__ = ["Lazy", "has_lazy"]

Operand = Any  # Lazy | float


@dataclass(eq=False, repr=False)
class Lazy(Tensor):
    """A not-yet-computed elementwise value (see the module docstring).

    Arithmetic operators build further lazy values: ``relu(x * w + b) * s - t``.
    """

    prim: str = ""
    attrs: tuple[tuple[str, Any], ...] = ()
    operands: tuple[Operand, ...] = ()
    value: Tensor | None = None

    # -- construction ----------------------------------------------------------------------

    @classmethod
    def leaf(cls, t: Tensor) -> Lazy:
        """A lazy value standing for the real tensor ``t``."""
        if isinstance(t, Lazy):
            return t
        return cls(shape=t.shape, dtype=t.dtype, queue=t.queue, context=t.context,
                   requires_grad=t.requires_grad, value=t, _backend=t._backend)

    @classmethod
    def apply(cls, name: str, operands: Sequence[Any], attrs: Mapping[str, Any]) -> Lazy:
        """Primitive ``name`` of ``operands`` (Lazy values, Tensors or numbers) as a lazy value.

        Nothing runs here: a non-fusible node is a boundary that the executor computes (its
        operands first) as its own kernel.

        Raises:
            KeyError: unknown primitive.
            TypeError: wrong number or kind of operands, non-float or mixed dtypes.
            ValueError: shapes that do not broadcast, tensors on different devices.
        """
        prim = lookup_primitive(name)
        if len(operands) != prim.arity:
            raise TypeError(f"{name}: takes {prim.arity} operands, got {len(operands)}")
        ops: list[Operand] = []
        for o in operands:
            if isinstance(o, Tensor):
                ops.append(cls.leaf(o))
            elif isinstance(o, (int, float)) and not isinstance(o, bool):
                ops.append(float(o))
            else:
                raise TypeError(
                    f"{name}: operands must be Tensors or Python numbers, got {type(o).__name__}"
                )
        lazies = [o for o in ops if isinstance(o, Lazy)]
        if not lazies:
            raise TypeError(f"{name}: needs at least one Tensor operand, got only numbers")
        dtypes = {o.dtype for o in lazies}
        if len(dtypes) != 1 or not dtypes <= set(FLOAT_DTYPES):
            raise TypeError(
                f"{name}: fused elementwise ops need Tensors of one floating-point dtype, got "
                f"{', '.join(sorted(dtypes))}; cast them first"
            )
        check_same_device(name, *lazies)
        first = lazies[0]
        out = cls(
            shape=broadcast_shapes(name, *(o.shape for o in lazies)),
            dtype=first.dtype, queue=first.queue, context=first.context,
            requires_grad=is_recording() and any(o.requires_grad for o in lazies),
            prim=name, attrs=tuple(sorted(attrs.items())), operands=tuple(ops),
            _backend=first._backend,
        )
        return out

    @property
    def is_leaf_value(self) -> bool:
        """Whether this stands for a real tensor (a leaf, or already materialized)."""
        return self.value is not None

    # -- operators ---------------------------------------------------------------------------

    def __add__(self, other: Any) -> Lazy:
        return Lazy.apply("add", (self, other), {})

    def __radd__(self, other: Any) -> Lazy:
        return Lazy.apply("add", (other, self), {})

    def __sub__(self, other: Any) -> Lazy:
        return Lazy.apply("sub", (self, other), {})

    def __rsub__(self, other: Any) -> Lazy:
        return Lazy.apply("sub", (other, self), {})

    def __mul__(self, other: Any) -> Lazy:
        return Lazy.apply("mul", (self, other), {})

    def __rmul__(self, other: Any) -> Lazy:
        return Lazy.apply("mul", (other, self), {})

    def __truediv__(self, other: Any) -> Lazy:
        return Lazy.apply("div", (self, other), {})

    def __rtruediv__(self, other: Any) -> Lazy:
        return Lazy.apply("div", (other, self), {})

    def __pow__(self, other: Any) -> Lazy:
        return Lazy.apply("pow", (self, other), {})

    def __neg__(self) -> Lazy:
        return Lazy.apply("neg", (self,), {})

    # -- Tensor behaviour --------------------------------------------------------------------

    def to_host(self) -> Any:
        """The data of a leaf or of a value the executor has computed.

        Raises:
            RuntimeError: the value is not computed yet (return it from the ``jit`` function,
                or pass it to a non-elementwise op, to compute it).
        """
        if self.value is None:
            raise RuntimeError(
                f"{self!r} is not computed yet: inside jit a lazy value has no data; return it "
                "from the traced function to compute it"
            )
        return self.value.to_host()

    def __repr__(self) -> str:
        what = "leaf" if self.value is not None else self.prim
        return f"Lazy({what}, shape={self.shape}, dtype={self.dtype})"


def has_lazy(args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether any argument (or element of a list/tuple argument) is a :class:`Lazy`."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, Lazy):
            return True
        if isinstance(value, (list, tuple)) and any(isinstance(v, Lazy) for v in value):
            return True
    return False
