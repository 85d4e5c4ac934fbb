"""A fusible group: the flat form of a lazy expression that the code generator and the
executor read.

A group is the DAG of primitives under one lazy value, down to its *leaves*: real tensors
(deduplicated, so ``x * x`` reads ``x`` once and gets one gradient) and Python numbers.
Computed lazy values are leaves too, so a non-fusible node, once the executor has run it,
ends the group below it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from netcl.core.tensor import Tensor

from ._lazy import Lazy
from ._registry import PrimitiveDef, lookup_primitive

__all__ = ["GNode", "Group", "build_group", "leaf_group"]


@dataclass(frozen=True)
class GNode:
    """One primitive application inside a group; ``args`` are variable names (x<i>, t<j>)."""

    prim: PrimitiveDef
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
        prim = lookup_primitive(lazy.prim)
        attrs = dict(lazy.attrs)
        args = tuple(var_of(o) for o in lazy.operands)
        names[id(lazy)] = f"t{len(nodes)}"
        nodes.append(GNode(prim, attrs, args))
        key.append((prim.name, prim.version, _attrs_key(attrs), args))
    group = Group(leaves, nodes, root.shape, root.dtype, root.queue, tuple(key))
    group.tensor_leaves = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Tensor)]
    group.tensors = [leaves[i] for i in group.tensor_leaves]  # type: ignore[misc]
    return group


def leaf_group(prim: PrimitiveDef, operands: Sequence[Tensor | float], shape: tuple[int, ...],
               dtype: str, queue: Any) -> Group:
    """The group of one node, ``prim`` of ``operands`` (tensors of ``dtype`` broadcasting to
    ``shape``, and numbers); ``prim`` need not be registered (the eager gradients' derived
    primitives, see ``_vjp``). A tensor passed twice is one leaf, as in :func:`build_group`."""
    leaves: list[Tensor | float] = []
    seen: dict[int, str] = {}
    args: list[str] = []
    key: list[Any] = []
    for o in operands:
        if isinstance(o, Tensor) and id(o) in seen:
            args.append(seen[id(o)])
            continue
        leaves.append(o if isinstance(o, Tensor) else float(o))
        name = f"x{len(leaves) - 1}"
        if isinstance(o, Tensor):
            seen[id(o)] = name
        key.append("T" if isinstance(o, Tensor) else "S")
        args.append(name)
    key.append((prim.name, prim.version, (), tuple(args)))
    group = Group(leaves, [GNode(prim, {}, tuple(args))], shape, dtype, queue, tuple(key))
    group.tensor_leaves = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Tensor)]
    group.tensors = [leaves[i] for i in group.tensor_leaves]  # type: ignore[misc]
    return group
