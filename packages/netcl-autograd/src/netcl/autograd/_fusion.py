"""Running a lazy expression: collect its fusible group, run it, record it on the tape.

A group is the DAG of primitives under one lazy value, down to its *leaves*: real tensors
(deduplicated, so ``x * x`` reads ``x`` once and gets one gradient) and Python numbers. On
OpenCL it runs as the kernels of :mod:`._codegen`; on the NumPy backend the same primitive
expressions are evaluated with NumPy (:mod:`._cexpr`). Either way the whole group is one node
on the tape, whose backward produces the gradient of every tensor leaf at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor

from . import _codegen
from ._cexpr import compile_expression
from ._lazy import Lazy
from ._primitives import Primitive, get_primitive
from ._tape import record

__all__ = ["GNode", "Group", "build_group", "primitive_vjp", "run_group"]


@dataclass(frozen=True)
class GNode:
    """One primitive application inside a group; ``args`` are variable names (x<i>, t<j>)."""

    prim: Primitive
    attrs: dict[str, Any]
    args: tuple[str, ...]

    def forward_source(self) -> str:
        """The C expression of this node's value."""
        return self.prim.forward_source(self.args, self.attrs)

    def backward_sources(self, grad_var: str, out_var: str) -> list[str]:
        """One C expression per argument: its share of ``grad_var``."""
        return self.prim.backward_sources(self.args, grad_var, self.attrs, out_var)


@dataclass
class Group:
    """A fusible DAG: ``leaves`` (tensors and numbers) and ``nodes`` in order, root last."""

    leaves: list[Tensor | float]
    nodes: list[GNode]
    shape: tuple[int, ...]
    dtype: str
    queue: Any
    key: tuple[Any, ...] = ()
    tensors: list[Tensor] = field(default_factory=list)
    tensor_leaves: list[int] = field(default_factory=list)

    def reaching(self, targets: Sequence[int]) -> set[str]:
        """Variable names whose value depends on one of the leaves ``targets``."""
        reach = {f"x{i}" for i in targets}
        for j, node in enumerate(self.nodes):
            if any(a in reach for a in node.args):
                reach.add(f"t{j}")
        return reach

    @property
    def preamble(self) -> str:
        """The C preambles of the user primitives in the group, each once."""
        seen: list[str] = []
        for node in self.nodes:
            if node.prim.preamble and node.prim.preamble not in seen:
                seen.append(node.prim.preamble)
        return "\n".join(seen)

    @property
    def label(self) -> str:
        """``jit(mul, add, relu)``: the name the tape and error messages use."""
        return f"jit({', '.join(n.prim.name for n in self.nodes)})"


def _attrs_key(attrs: dict[str, Any]) -> tuple[Any, ...]:
    out = []
    for k, v in sorted(attrs.items()):
        try:
            hash(v)
            out.append((k, v))
        except TypeError:
            out.append((k, repr(v)))
    return tuple(out)


def build_group(root: Lazy) -> Group:
    """The group under ``root``: every unmaterialized lazy value it reaches."""
    leaves: list[Tensor | float] = []
    seen_tensor: dict[int, str] = {}
    names: dict[int, str] = {}
    nodes: list[GNode] = []
    key: list[Any] = []

    def var_of(o: Any) -> str:
        if isinstance(o, Lazy) and o.value is None:
            return names[id(o)]
        if isinstance(o, Lazy):
            t = o.value
            found = seen_tensor.get(id(t))
            if found is not None:
                return found
            leaves.append(t)  # type: ignore[arg-type]
            name = seen_tensor[id(t)] = f"x{len(leaves) - 1}"
            key.append("T")
            return name
        leaves.append(float(o))
        key.append("S")
        return f"x{len(leaves) - 1}"

    stack: list[tuple[Lazy, bool]] = [(root, False)]
    while stack:
        lazy, expanded = stack.pop()
        if id(lazy) in names:
            continue
        if not expanded:
            stack.append((lazy, True))
            for o in reversed(lazy.operands):
                if isinstance(o, Lazy) and o.value is None and id(o) not in names:
                    stack.append((o, False))
            continue
        prim = get_primitive(lazy.prim)
        attrs = dict(lazy.attrs)
        args = tuple(var_of(o) for o in lazy.operands)
        names[id(lazy)] = f"t{len(nodes)}"
        nodes.append(GNode(prim, attrs, args))
        key.append((prim.name, prim.version, _attrs_key(attrs), args))
    group = Group(leaves, nodes, root.shape, root.dtype, root.queue, tuple(key))
    group.tensor_leaves = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Tensor)]
    group.tensors = [leaves[i] for i in group.tensor_leaves]  # type: ignore[misc]
    return group


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


def _backward(group: Group, g: Tensor, needs: Sequence[bool]) -> list[Tensor | None]:
    if g.array is not None:
        return _numpy_backward(group, g, needs, _env(group))
    return _codegen.run_backward(group, g, needs)


def primitive_vjp(
    name: str, operands: Sequence[Any], g: Tensor, attrs: dict[str, Any] | None = None
) -> list[Tensor | None]:
    """Gradients of primitive ``name`` at ``operands`` given output gradient ``g`` (one kernel
    on OpenCL), one per Tensor operand; a tensor passed twice gets its whole gradient once."""
    group = build_group(Lazy.apply(name, operands, attrs or {}))
    grads = _backward(group, g, [True] * len(group.tensors))
    out: list[Tensor | None] = []
    given: set[int] = set()
    for o in operands:
        if isinstance(o, Tensor):
            k = next(i for i, t in enumerate(group.tensors) if t is o)
            out.append(None if k in given else grads[k])
            given.add(k)
    return out


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
    arr = np.ascontiguousarray(np.broadcast_to(array, shape), dtype=np.dtype(dtype))
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
