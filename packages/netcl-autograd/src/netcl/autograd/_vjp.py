"""Eager gradients from the derivative table: a primitive's backward expressions, run once.

The named differentiable elementwise ops (``relu``, ``mul``, ``maximum``, ...) and
:func:`netcl.autograd.ops.elementwise` compute their backward here, from the derivative row
of their primitive (NOTE [ Derivative rows ]), so no backward is written twice.

# NOTE [ Eager row gradients ]
# ``primitive_vjp(name, operands, g, needs, out)`` gives one gradient per Tensor operand:
# - NumPy backend: each needed argument's backward expression is evaluated once (the
#   compiled C expression of :mod:`._cexpr`, cached per primitive) over the operands, ``g``
#   and the forward's ``out``, then summed over its broadcast axes.
# - OpenCL, rows of at most two ``netcl.ops`` calls (relu, mul, exp, sqrt, log, sub's ``b``,
#   ...): those calls (NOTE [ Eager OpenCL row gradients ] in ``_eager_expr``), then summed
#   over the broadcast axes.
# - OpenCL, longer rows: one generated kernel computes every needed gradient (the fused
#   backward of a one-node group, see ``_codegen``), broadcast operands reduced inside it;
#   operands not of ``g``'s dtype are cast to it first. A row that reads
#   ``out`` (exp, sigmoid, tanh, sqrt, div's ``b``, ...) instead reads the forward's value: each
#   needed gradient is then the forward kernel of a derived one-node group over the operands,
#   ``out`` and ``g`` (no exp/tanh computed again), summed over its broadcast axes.
# - An argument whose backward expression is exactly ``g`` (add, sub's ``a``) gets ``g``
#   itself, summed over its broadcast axes: no kernel, no copy.
# Gradients may come out wider than their input (mixed precision): the tape casts each to its
# input's dtype (NOTE [ Gradient dtypes ]).

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

from netcl.core.recording import numpy_call
from netcl.core.tensor import Tensor
from netcl.ops import broadcast_to, cast

from . import _codegen
from ._cexpr import compile_expression, compile_expressions
from ._eager_expr import ops_plan
from ._function import unbroadcast
from ._group import build_group, leaf_group
from ._lazy import Lazy
from ._registry import PrimitiveDef, lookup_primitive
from ._tape import Backward

__all__ = ["primitive_vjp", "row_backward"]

_OUT = re.compile(r"\bout\b")
_GRAD = "g"
_lock = threading.Lock()


class _Compiled:
    """A primitive's backward (and forward) expressions over ``x0, x1, ...``, ``g`` and
    ``out``, compiled for NumPy once, when the NumPy backend first needs them."""

    def __init__(self, prim: PrimitiveDef, nargs: int, attrs: Mapping[str, Any]) -> None:
        names = [f"x{i}" for i in range(nargs)]
        self.prim, self.nargs, self.attrs = prim, nargs, dict(attrs)
        self.functions = prim.functions
        self.sources = prim.backward_sources(names, _GRAD, attrs, "out")
        self.identity = [s.strip() == _GRAD for s in self.sources]
        self.uses_out = any(_OUT.search(s) for s in self.sources)
        self.forward_source = prim.forward_source(names, attrs)
        self._backward: dict[tuple[int, ...], Any] = {}
        self._derived: dict[int, PrimitiveDef] = {}
        self._plans: dict[tuple[tuple[int, ...], frozenset[str]], Any] = {}

    def forward(self, env: dict[str, Any]) -> Any:
        """The forward's value (NumPy), where ``out`` is read but was not given."""
        return compile_expression(self.forward_source, self.functions)(env)

    def backward(self, args: tuple[int, ...]) -> Any:
        """The gradients of arguments ``args`` as one compiled function (shared
        subexpressions computed once)."""
        found = self._backward.get(args)
        if found is None:
            found = self._backward[args] = compile_expressions(
                tuple(self.sources[k] for k in args), self.functions)
        return found

    def ops_plan(self, args: tuple[int, ...], tensors: frozenset[str]) -> Any:
        """The gradients of arguments ``args`` as ``netcl.ops`` calls, where the rows are
        short enough (NOTE [ Eager OpenCL row gradients ]), else ``None``."""
        key = (args, tensors)
        if key not in self._plans:
            self._plans[key] = ops_plan(tuple(self.sources[k] for k in args), tensors,
                                        dict(self.functions))
        return self._plans[key]

    def derived(self, k: int) -> PrimitiveDef:
        """Argument ``k``'s gradient as a primitive of the arguments, ``out`` and ``g`` (in
        that order), for a forward kernel that reads ``out`` (not registered)."""
        found = self._derived.get(k)
        if found is None:
            prim, n, attrs = self.prim, self.nargs, self.attrs

            def forward(args: Sequence[str], _: Mapping[str, Any]) -> str:
                return prim.backward_sources(args[:n], args[n + 1], attrs, args[n])[k]

            found = self._derived[k] = PrimitiveDef(
                f"{prim.name}_grad{k}", forward, None, n + 2, True, prim.preamble,
                prim.functions, version=prim.version)
        return found


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
    return _opencl(name, comp, operands, slots, wanted, g, out, attrs)


def row_backward(name: str, operands: Sequence[Any], out: Tensor | None = None) -> Backward:
    """The backward closure of an eager op whose gradient is primitive ``name``'s derivative
    row at ``operands`` (Tensors and numbers), for :func:`~._function.differentiable`.

    ``out`` (the forward's value) is kept only where the derivative row reads it.
    """
    if out is not None and not _compile(lookup_primitive(name), len(operands), {}).uses_out:
        out = None  # not captured: the closure keeps alive only what it reads

    def backward(g: Tensor, needs: tuple[bool, ...]) -> list[Tensor | None]:
        return primitive_vjp(name, operands, g, needs, out)

    return backward


# -- NumPy backend ----------------------------------------------------------------------------


def _numpy(comp: _Compiled, operands: Sequence[Any], slots: Sequence[int],
           wanted: Sequence[bool], g: Tensor, out: Tensor | None) -> list[Tensor | None]:
    computed = tuple(k for k, need in zip(slots, wanted) if need and not comp.identity[k])
    if computed:  # one recordable NumPy call (NOTE [ NumPy work under a recorder ])
        values = tuple(_host(o) if isinstance(o, Tensor) else o for o in operands)
        shapes = tuple(operands[k].shape for k in computed)
        arrays = iter(numpy_call(_numpy_grads, comp, computed, shapes, np.dtype(g.dtype),
                                 _host(g), values, None if out is None else _host(out)))
    grads: list[Tensor | None] = []
    for k, need in zip(slots, wanted):
        t = operands[k]
        if not need:
            grads.append(None)
        elif comp.identity[k]:
            grads.append(unbroadcast(g, t.shape))
        else:
            arr = next(arrays)
            grads.append(Tensor(shape=arr.shape, dtype=g.dtype, queue=g.queue, array=arr,
                                _backend=g._backend))
    return grads


def _host(t: Tensor) -> Any:
    """A NumPy-backend tensor's array in its shape (no copy, no host-read hook: the array is
    the data)."""
    a: Any = t.array
    return a if a.shape == t.shape else a.reshape(t.shape)


def _numpy_grads(comp: _Compiled, computed: tuple[int, ...], shapes: tuple[tuple[int, ...], ...],
                 dtype: np.dtype[Any], gh: Any, operands: tuple[Any, ...], out: Any
                 ) -> tuple[Any, ...]:
    """The gradients of the operands ``computed`` (of ``shapes``, as ``dtype``) from the
    upstream gradient ``gh``, the operands' arrays (or numbers) and the forward's ``out``."""
    ct = np.float64 if dtype == np.float64 else np.float32
    env: dict[str, Any] = {"__ct__": ct, _GRAD: gh.astype(ct, copy=False)}
    for i, o in enumerate(operands):
        env[f"x{i}"] = o.astype(ct, copy=False) if isinstance(o, np.ndarray) else ct(o)
    if comp.uses_out:
        env["out"] = (np.asarray(comp.forward(env)) if out is None else out).astype(ct,
                                                                                 copy=False)
    values = dict(zip(computed, comp.backward(computed)(env)))
    taken = [v for v in env.values() if isinstance(v, np.ndarray)]  # what no result may alias
    results = []
    for k, shape in zip(computed, shapes):
        value = np.asarray(values[k])
        if value.shape != gh.shape:
            value = np.broadcast_to(value, gh.shape)
        results.append(_own(_sum_to(value.astype(ct, copy=False), shape), dtype, taken))
    return tuple(results)


def _sum_to(arr: Any, shape: tuple[int, ...]) -> Any:
    """``arr`` (of the output's shape) summed over the axes broadcasting added or stretched."""
    if arr.shape == shape:
        return arr
    lead = arr.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + k for k, d in enumerate(shape) if d == 1 and arr.shape[lead + k] != 1)
    return arr.sum(axis=axes).reshape(shape)


def _own(array: Any, dtype: np.dtype[Any], taken: list[np.ndarray[Any, Any]]) -> Any:
    """``array`` as ``dtype`` (C order, writable), copied if it aliases an array of ``taken``
    (an expression may return an input unchanged, two arguments may get one value); it is then
    added to ``taken``."""
    # np.require keeps a 0-d result 0-d (ascontiguousarray made it 1-d)
    arr = np.require(array, dtype=dtype, requirements=("C", "W"))
    if any(np.may_share_memory(arr, v) for v in taken):
        arr = arr.copy()
    taken.append(arr)
    return arr


# -- OpenCL ---------------------------------------------------------------------------------


def _opencl(name: str, comp: _Compiled, operands: Sequence[Any], slots: Sequence[int],
            wanted: Sequence[bool], g: Tensor, out: Tensor | None, attrs: Mapping[str, Any]
            ) -> list[Tensor | None]:
    dtype = g.dtype
    rest = tuple(k for k, need in zip(slots, wanted) if need and not comp.identity[k])
    tensors = frozenset([_GRAD, *(f"x{k}" for k in slots), *(["out"] if out is not None else [])])
    plan = comp.ops_plan(rest, tensors) if rest else None
    if plan is not None or not rest:  # netcl.ops calls, or none at all
        env: dict[str, Any] = {"__ct__": dtype, _GRAD: g, "out": out}
        env.update((f"x{i}", o) for i, o in enumerate(operands))
        values = dict(zip(rest, plan(env))) if plan is not None else {}
        out_grads: list[Tensor | None] = []
        for k, need in zip(slots, wanted):
            value = (g if comp.identity[k] else values[k]) if need else None
            if value is not None and value.shape != g.shape:
                value = broadcast_to(value, g.shape)
            out_grads.append(unbroadcast(value, operands[k].shape))
        return out_grads
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
    if kernel_slots and out is not None and comp.uses_out:
        args = _same_dtype([*operands, out], dtype)
        for k in kernel_slots:  # one forward kernel each, reading out
            group = leaf_group(comp.derived(k), [*args, g], g.shape, dtype, g.queue)
            grads[k] = unbroadcast(_codegen.run_forward(group), operands[k].shape)
    elif kernel_slots:
        _kernel_grads(name, _same_dtype(operands, dtype), kernel_slots, g, attrs, grads)
    return [grads[k] for k in slots]


def _same_dtype(operands: Sequence[Any], dtype: str) -> list[Any]:
    """``operands`` with their tensors cast to ``dtype`` (a tensor passed twice cast once)."""
    converted: dict[int, Tensor] = {}
    out = []
    for o in operands:
        if isinstance(o, Tensor) and o.dtype != dtype:
            if id(o) not in converted:
                converted[id(o)] = cast(o, dtype)
            o = converted[id(o)]
        out.append(o)
    return out


def _kernel_grads(name: str, args: Sequence[Any], kernel_slots: Sequence[int], g: Tensor,
                  attrs: Mapping[str, Any], grads: dict[int, Tensor | None]) -> None:
    """The gradients of ``kernel_slots`` by one generated backward kernel, into ``grads``; a
    tensor in several slots gets its whole gradient in the first of them."""
    group = build_group(Lazy.apply(name, args, attrs))  # of g's dtype, g's shape
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

