"""The executor: computing a lazy value (collect its fusible group, run it, record it on the
tape).

A lazy value is computed group by group (see ``_group``): first every non-fusible node under it
(its operands first, each its own group), then the fusible rest. On OpenCL a group runs as the
kernels of :mod:`._codegen`; on the NumPy backend the same primitive expressions are evaluated
with NumPy (:mod:`._cexpr`). Either way the whole group is one node on the tape, whose
backward produces the gradient of every tensor leaf at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor

from . import _codegen
from ._cexpr import compile_expression
from ._group import Group, build_group
from ._lazy import Lazy
from ._registry import lookup_primitive
from ._tape import record

__all__ = ["materialize", "materialize_args", "run_group"]


def materialize(x: Any) -> Any:
    """The real Tensor of a lazy value (computing it once); other values pass through."""
    if not isinstance(x, Lazy):
        return x
    if x.value is None:
        _run_boundaries(x)
    if x.value is None:
        x.value = run_group(x)
    return x.value


def _run_boundaries(root: Lazy) -> None:
    """Compute every non-fusible node under ``root`` (``root`` included), each as its own
    kernel after its operands, so that the groups built afterwards end at them."""
    order: list[Lazy] = []
    seen: set[int] = set()
    stack: list[tuple[Lazy, bool]] = [(root, False)]
    while stack:  # post-order over the values not computed yet
        lazy, expanded = stack.pop()
        if expanded:
            order.append(lazy)
            continue
        if id(lazy) in seen:
            continue
        seen.add(id(lazy))
        stack.append((lazy, True))
        stack.extend((o, False) for o in reversed(lazy.operands)
                     if isinstance(o, Lazy) and o.value is None)
    for lazy in order:
        if lazy.value is None and not lookup_primitive(lazy.prim).fusible:
            for o in lazy.operands:
                if isinstance(o, Lazy) and o.value is None:
                    o.value = run_group(o)
            lazy.value = run_group(lazy)


def _real(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(materialize(v) for v in value)
    return materialize(value)


def materialize_args(
    args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` with every lazy value (also inside lists) materialized."""
    return tuple(_real(a) for a in args), {k: _real(v) for k, v in kwargs.items()}


def run_group(root: Lazy) -> Tensor:
    """Compute ``root`` as one fused kernel (NumPy: one evaluation) and record it."""
    group = build_group(root)
    if group.tensors[0].backend == "cpu":
        # NumPy cannot fuse anyway: keep the intermediate values for the backward (as the
        # eager ops do) instead of recomputing them there.
        env = _env(group)
        out = _wrap(group.tensors[0], env[f"t{len(group.nodes) - 1}"], group.shape, group.dtype)

        def backward(g: Tensor, needs: tuple[bool, ...]) -> list[Tensor | None]:
            return _numpy_backward(group, g, needs, env)

        return record(group.label, group.tensors, out, backward)
    out = _codegen.run_forward(group)

    def backward_cl(g: Tensor, needs: tuple[bool, ...]) -> list[Tensor | None]:
        return _codegen.run_backward(group, g, needs)

    return record(group.label, group.tensors, out, backward_cl)


# -- NumPy backend ----------------------------------------------------------------------------


def _ct(dtype: str) -> Any:
    return np.float64 if dtype == "float64" else np.float32


def _env(group: Group) -> dict[str, Any]:
    ct = _ct(group.dtype)
    env: dict[str, Any] = {"__ct__": ct}
    for i, leaf in enumerate(group.leaves):
        if isinstance(leaf, Tensor):
            env[f"x{i}"] = leaf.to_host().astype(ct, copy=False)
        else:
            env[f"x{i}"] = ct(leaf)
    for j, node in enumerate(group.nodes):
        value = compile_expression(node.forward_source(), node.prim.functions)(env)
        env[f"t{j}"] = np.asarray(value).astype(ct, copy=False)
    return env


def _wrap(like: Tensor, array: Any, shape: tuple[int, ...], dtype: str) -> Tensor:
    if np.shape(array) != shape:
        array = np.broadcast_to(array, shape)  # a read-only view: "W" below copies it
    with np.errstate(over="ignore"):  # float16 overflows to inf, as on OpenCL
        # np.require keeps a 0-d result 0-d (ascontiguousarray made it 1-d)
        arr = np.require(array, dtype=np.dtype(dtype), requirements=("C", "W"))
    return Tensor(shape=arr.shape, dtype=dtype, queue=like.queue, array=arr,
                  _backend=like._backend)


def _sum_to(arr: Any, shape: tuple[int, ...]) -> Any:
    arr = np.asarray(arr)
    if arr.shape == shape:
        return arr
    lead = arr.ndim - len(shape)
    if lead < 0:
        return np.broadcast_to(arr, shape)
    axes = tuple(range(lead)) + tuple(
        lead + k for k, d in enumerate(shape) if d == 1 and arr.shape[lead + k] != 1
    )
    out = arr.sum(axis=axes, keepdims=True) if axes else arr
    return np.broadcast_to(out.reshape(out.shape[lead:]), shape)


def _numpy_backward(group: Group, g: Tensor, needs: Sequence[bool], values: dict[str, Any]
                    ) -> list[Tensor | None]:
    env = dict(values)  # the partials add "__g__"; the forward values stay as they are
    ct = _ct(group.dtype)
    targets = [i for i, need in zip(group.tensor_leaves, needs) if need]
    reach = group.reaching(targets)
    shapes = {f"x{i}": np.shape(env[f"x{i}"]) for i in range(len(group.leaves))}
    shapes.update({f"t{j}": np.shape(env[f"t{j}"]) for j in range(len(group.nodes))})
    root = len(group.nodes) - 1
    grads: dict[str, Any] = {f"t{root}": g.to_host().astype(ct, copy=False)}
    for j in range(root, -1, -1):
        gj = grads.pop(f"t{j}", None)
        if gj is None:
            continue
        node = group.nodes[j]
        env["__g__"] = gj
        for arg, expr in zip(node.args, node.backward_sources("__g__", f"t{j}")):
            if arg not in reach:
                continue
            value = compile_expression(expr, node.prim.functions)(env)
            part = _sum_to(np.asarray(value).astype(ct, copy=False), shapes[arg])
            grads[arg] = part if arg not in grads else grads[arg] + part
    out: list[Tensor | None] = []
    for i, t, need in zip(group.tensor_leaves, group.tensors, needs):
        if not need:
            out.append(None)
            continue
        gi = grads.get(f"x{i}")
        value = np.zeros(t.shape, dtype=ct) if gi is None else _sum_to(gi, t.shape)
        out.append(_wrap(t, value, t.shape, t.dtype))
    return out
