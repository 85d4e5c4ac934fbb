"""Eager gradients from the derivative table: a primitive's backward expressions, run once.

The named differentiable elementwise ops (``relu``, ``mul``, ``maximum``, ...) and
:func:`netcl.autograd.ops.elementwise` compute their backward here, from the derivative row
of their primitive (NOTE [ Derivative rows ]), so no backward is written twice.

# NOTE [ Eager row gradients ]
# ``primitive_vjp(name, operands, g, needs, out)`` gives one gradient per Tensor operand:
# - NumPy backend: each needed argument's backward expression is evaluated once (the
#   compiled C expression of :mod:`._cexpr`, cached per primitive) over the operands, ``g``
#   and the forward's ``out``, then summed over its broadcast axes.
# - OpenCL: one generated kernel computes every needed gradient (the fused backward of a
#   one-node group, see ``_codegen``), broadcast operands reduced inside it.
# - An argument whose backward expression is exactly ``g`` (add, sub's ``a``) gets ``g``
#   itself, summed over its broadcast axes: no kernel, no copy.
# Operands that are not of ``g``'s floating-point dtype (mixed precision, integer or uint8
# operands such as ``where``'s condition) are computed in ``g``'s dtype; the tape casts each
# gradient to its input's dtype (NOTE [ Gradient dtypes ]).

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> x = Tensor.from_host(q, np.array([-1.0, 0.0, 2.0]))
    >>> g = Tensor.from_host(q, np.ones(3))
    >>> [t.to_host().tolist() for t in primitive_vjp("relu", (x,), g)]
    [[0.0, 0.0, 1.0]]
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor
from netcl.ops import cast

from . import _codegen
from ._cexpr import compile_expression
from ._function import unbroadcast
from ._group import build_group
from ._lazy import Lazy
from ._registry import PrimitiveDef, lookup_primitive
from ._tape import Backward

__all__ = ["primitive_vjp", "row_backward"]

_OUT = re.compile(r"\bout\b")
_GRAD = "g"
_lock = threading.Lock()


class _Compiled:
    """A primitive's backward (and forward) expressions over ``x0, x1, ...``, ``g`` and
    ``out``, compiled for NumPy once."""

    def __init__(self, prim: PrimitiveDef, nargs: int, attrs: Mapping[str, Any]) -> None:
        names = [f"x{i}" for i in range(nargs)]
        functions = prim.functions
        self.sources = prim.backward_sources(names, _GRAD, attrs, "out")
        self.identity = [s.strip() == _GRAD for s in self.sources]
        self.uses_out = any(_OUT.search(s) for s in self.sources)
        self.backward = [compile_expression(s, functions) for s in self.sources]
        self.forward = compile_expression(prim.forward_source(names, attrs), functions)


_compiled: dict[tuple[str, int, int], _Compiled] = {}


def _compile(prim: PrimitiveDef, nargs: int, attrs: Mapping[str, Any]) -> _Compiled:
    if attrs:  # attributes change the expressions and need not be hashable: no cache
        return _Compiled(prim, nargs, attrs)
    key = (prim.name, prim.version, nargs)
    found = _compiled.get(key)
    if found is None:
        found = _Compiled(prim, nargs, attrs)
        with _lock:
            _compiled[key] = found
    return found


def primitive_vjp(
    name: str, operands: Sequence[Any], g: Tensor, needs: Sequence[bool] | None = None,
    out: Tensor | None = None, attrs: Mapping[str, Any] | None = None,
) -> list[Tensor | None]:
    """Gradients of primitive ``name`` at ``operands`` (Tensors and numbers: its arguments)
    given the output gradient ``g``: one per Tensor operand, ``None`` where ``needs`` (one
    flag per Tensor operand, default all) is false. ``out`` is the forward's value, if known
    (NumPy reads it instead of computing it again). See NOTE [ Eager row gradients ].

    Raises:
        KeyError: no primitive ``name``.
        RuntimeError: the primitive has no backward.
    """
    prim = lookup_primitive(name)
    attrs = attrs or {}
    slots = [k for k, o in enumerate(operands) if isinstance(o, Tensor)]
    wanted = [True] * len(slots) if needs is None else [bool(n) for n in needs]
    if len(wanted) != len(slots):
        raise ValueError(f"primitive_vjp {name!r}: {len(slots)} tensor operands, "
                         f"{len(wanted)} needs flags")
    comp = _compile(prim, len(operands), attrs)
    if g.array is not None:
        return _numpy(comp, operands, slots, wanted, g, out)
    return _opencl(name, comp, operands, slots, wanted, g, attrs)


def row_backward(name: str, operands: Sequence[Any], out: Tensor | None = None) -> Backward:
    """The backward closure of an eager op whose gradient is primitive ``name``'s derivative
    row at ``operands`` (Tensors and numbers), for :func:`~._function.differentiable`.

    ``out`` (the forward's value) is kept only where the NumPy backend reads it.
    """
    if out is not None and (out.array is None or not _compile(
            lookup_primitive(name), len(operands), {}).uses_out):
        out = None  # not captured: the closure keeps alive only what it reads

    def backward(g: Tensor, needs: tuple[bool, ...]) -> list[Tensor | None]:
        return primitive_vjp(name, operands, g, needs, out)

    return backward


# -- NumPy backend ----------------------------------------------------------------------------


def _numpy(comp: _Compiled, operands: Sequence[Any], slots: Sequence[int],
           wanted: Sequence[bool], g: Tensor, out: Tensor | None) -> list[Tensor | None]:
    ct = np.float64 if g.dtype == "float64" else np.float32
    gh = g.to_host()
    env: dict[str, Any] = {"__ct__": ct, _GRAD: gh.astype(ct, copy=False)}
    for i, o in enumerate(operands):
        env[f"x{i}"] = o.to_host().astype(ct, copy=False) if isinstance(o, Tensor) else ct(o)
    if comp.uses_out:
        env["out"] = (np.asarray(comp.forward(env)) if out is None
                      else out.to_host()).astype(ct, copy=False)
    grads: list[Tensor | None] = []
    for k, need in zip(slots, wanted):
        t = operands[k]
        if not need:
            grads.append(None)
        elif comp.identity[k]:
            grads.append(unbroadcast(g, t.shape))
        else:
            value = np.asarray(comp.backward[k](env))
            if value.shape != gh.shape:
                value = np.broadcast_to(value, gh.shape)
            grads.append(_wrap(g, _sum_to(value.astype(ct, copy=False), t.shape), env))
    return grads


def _sum_to(arr: Any, shape: tuple[int, ...]) -> Any:
    """``arr`` (of the output's shape) summed over the axes broadcasting added or stretched."""
    if arr.shape == shape:
        return arr
    lead = arr.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + k for k, d in enumerate(shape) if d == 1 and arr.shape[lead + k] != 1)
    return arr.sum(axis=axes).reshape(shape)


def _wrap(like: Tensor, array: Any, env: Mapping[str, Any]) -> Tensor:
    """A tensor like ``like`` holding ``array``, which must alias none of the inputs in ``env``
    (an expression may return one of them unchanged)."""
    with np.errstate(over="ignore"):  # float16 overflows to inf, as on OpenCL
        arr = np.require(array, dtype=np.dtype(like.dtype), requirements="C")  # 0-d stays 0-d
    if any(isinstance(v, np.ndarray) and np.may_share_memory(arr, v) for v in env.values()):
        arr = arr.copy()
    return Tensor(shape=arr.shape, dtype=like.dtype, queue=like.queue, array=arr,
                  _backend=like._backend)


# -- OpenCL ---------------------------------------------------------------------------------


def _opencl(name: str, comp: _Compiled, operands: Sequence[Any], slots: Sequence[int],
            wanted: Sequence[bool], g: Tensor, attrs: Mapping[str, Any]) -> list[Tensor | None]:
    dtype = g.dtype
    counts: dict[int, int] = {}
    for k in slots:
        counts[id(operands[k])] = counts.get(id(operands[k]), 0) + 1
    grads: dict[int, Tensor | None] = {}
    kernel_slots = []
    for k, need in zip(slots, wanted):
        t = operands[k]
        if not need:
            grads[k] = None
        elif comp.identity[k] and counts[id(t)] == 1:
            grads[k] = unbroadcast(g, t.shape)
        else:
            kernel_slots.append(k)
    if kernel_slots:
        _kernel_grads(name, operands, kernel_slots, g, dtype, attrs, grads)
    return [grads[k] for k in slots]


def _kernel_grads(name: str, operands: Sequence[Any], kernel_slots: Sequence[int], g: Tensor,
                  dtype: str, attrs: Mapping[str, Any], grads: dict[int, Tensor | None]) -> None:
    """The gradients of ``kernel_slots`` by one generated backward kernel, into ``grads``; a
    tensor in several slots gets its whole gradient in the first of them."""
    converted: dict[int, Tensor] = {}

    def same_dtype(o: Any) -> Any:
        if not isinstance(o, Tensor) or o.dtype == dtype:
            return o
        if id(o) not in converted:
            converted[id(o)] = cast(o, dtype)
        return converted[id(o)]

    args = [same_dtype(o) for o in operands]
    group = build_group(Lazy.apply(name, args, attrs))
    if g.dtype != group.dtype:
        g = cast(g, group.dtype)
    index = {id(t): i for i, t in enumerate(group.tensors)}
    needs = [False] * len(group.tensors)
    for k in kernel_slots:
        needs[index[id(args[k])]] = True
    computed = _codegen.run_backward(group, g, needs)
    given: set[int] = set()
    for k in kernel_slots:
        i = index[id(args[k])]
        grads[k] = None if i in given else computed[i]
        given.add(i)

