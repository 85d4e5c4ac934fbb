"""OpenCL code generation for fused elementwise groups: one forward kernel, two backward ones.

# NOTE [ Fused kernels ]
# A group is a DAG of primitives over *leaves* (tensors and scalars), see ``_fusion.Group``.
# Every kernel iterates over the group's broadcast output shape after merging the dimensions
# that are contiguous for every operand (at most ``MAX_DIMS`` remain). Leaf ``i`` is read at
# ``o_i + sum_j c_j * st_i_j`` (stride 0 where it is broadcast); shapes, strides and offsets are
# scalar arguments, so one kernel serves every shape with the same broadcast pattern.
#
# - forward: one work item per output element evaluates the DAG in registers (SSA ``t_j``).
# - backward "full": one work item per output element recomputes the forward, then runs the
#   reverse sweep of the DAG (each primitive's backward expressions) and writes the gradient
#   of every leaf whose shape *is* the output shape.
# - backward "reduce": the gradient of a broadcast leaf is a sum over its broadcast dims. One
#   work-group per element of that gradient (all such leaves share one launch: consecutive
#   ranges of groups) strides over the broadcast dims recomputing forward and reverse sweep,
#   then tree-reduces in local memory. No full-size temporary is ever written.
#
# So a fused group costs one launch forward and at most two backward. Kernels are cached by
# the group's structure (primitives, attributes, wiring, leaf kinds) plus dtype, number of
# dims, broadcast masks and index width: never by the values of shapes or scalars.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from netcl.core.dtypes import c_type
from netcl.core.kernels.primitives import BuiltKernel, KernelSpec
from netcl.core.tensor import Tensor

if TYPE_CHECKING:
    from ._fusion import Group

__all__ = ["MAX_DIMS", "Layout", "cache_info", "clear_cache", "run_backward", "run_forward"]

MAX_DIMS = 8
_INT32_MAX = 2**31 - 1
_LOCAL = 256

_lock = threading.Lock()
_cache: dict[tuple[Any, ...], BuiltKernel] = {}
_stats = {"generated": 0, "hits": 0}


def cache_info() -> dict[str, int]:
    """``generated``: kernels generated and built; ``hits``: launches that reused one."""
    return {**_stats, "size": len(_cache)}


def clear_cache() -> None:
    """Forget the generated kernels (the program cache on disk is kept)."""
    with _lock:
        _cache.clear()


# -- layout ---------------------------------------------------------------------------------


def _contiguous(shape: Sequence[int]) -> tuple[int, ...]:
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * max(shape[k + 1], 1)
    return tuple(strides)


def _broadcast_strides(shape: Sequence[int], out: Sequence[int]) -> tuple[int, ...]:
    own = _contiguous(shape)
    lead = len(out) - len(shape)
    return (0,) * lead + tuple(0 if d == 1 else s for d, s in zip(shape, own))


@dataclass(frozen=True)
class Layout:
    """The merged iteration space of a group: dims, per-leaf strides, output strides."""

    dims: tuple[int, ...]
    strides: tuple[tuple[int, ...], ...]
    out_strides: tuple[int, ...]
    wide: bool

    @property
    def flat(self) -> bool:
        """Every tensor leaf is contiguous over the output: index = element number."""
        return len(self.dims) == 1 and all(s == (1,) for s in self.strides)

    def kept(self, leaf: int) -> tuple[bool, ...]:
        """Per dim: whether tensor leaf ``leaf`` varies along it (False: broadcast)."""
        return tuple(s != 0 for s in self.strides[leaf])

    def is_full(self, leaf: int) -> bool:
        """Whether tensor leaf ``leaf`` has the output's shape (no broadcast dim)."""
        return all(self.kept(leaf))

    @classmethod
    def of(cls, shape: tuple[int, ...], tensors: Sequence[Tensor]) -> Layout:
        """Merge the dims of ``shape`` that are contiguous for the output and every tensor."""
        sets = [_contiguous(shape)] + [_broadcast_strides(t.shape, shape) for t in tensors]
        dims: list[int] = []
        merged: list[list[int]] = [[] for _ in sets]
        for k, d in enumerate(shape):
            if d == 1:
                continue
            if dims and all(m[-1] == s[k] * d for m, s in zip(merged, sets)):
                dims[-1] *= d
                for m, s in zip(merged, sets):
                    m[-1] = s[k]
            else:
                dims.append(d)
                for m, s in zip(merged, sets):
                    m.append(s[k])
        if not dims:
            dims, merged = [1], [[1] for _ in sets]
        if len(dims) > MAX_DIMS:
            raise ValueError(
                f"jit: broadcast shape {shape} keeps {len(dims)} dims after merging contiguous "
                f"ones; fused kernels take at most {MAX_DIMS}"
            )
        n = math.prod(shape)
        extents = [n] + [t.offset + t.size for t in tensors]
        return cls(tuple(dims), tuple(tuple(m) for m in merged[1:]), tuple(merged[0]),
                   max(extents, default=0) > _INT32_MAX)


# -- source generation ------------------------------------------------------------------------


def _compute(dtype: str) -> str:
    return "double" if dtype == "float64" else "float"


def _header(dtype: str, wide: bool) -> str:
    storage = c_type(dtype)
    if dtype == "float16":
        access = ("#define LD(p, i) vload_half((i), (p))\n"
                  "#define ST(p, i, v) vstore_half((v), (i), (p))\n")
    else:
        access = "#define LD(p, i) ((p)[(i)])\n#define ST(p, i, v) ((p)[(i)] = (v))\n"
    lit = "#define LIT(x) (x)\n" if dtype == "float64" else "#define LIT(x) (x##f)\n"
    return (f"#define T {storage}\n#define CT {_compute(dtype)}\n"
            f"#define IDX {'long' if wide else 'int'}\n{lit}{access}")


def _input_params(group: Group, lay: Layout) -> list[str]:
    out: list[str] = []
    for i, leaf in enumerate(group.leaves):
        if isinstance(leaf, Tensor):
            out += [f"__global const T* p{i}", f"const IDX o{i}"]
        else:
            out.append(f"const CT s{i}")
    out.append("const IDX n")
    out += [f"const IDX d{j}" for j in range(len(lay.dims))]
    for i in group.tensor_leaves:
        out += [f"const IDX st{i}_{j}" for j in range(len(lay.dims))]
    return out


def _decode(group: Group, lay: Layout, src: str, dims: Sequence[int], prefix: str,
            base: str | None, with_out: str | None) -> list[str]:
    """Index math: element ``src`` decomposed over ``dims`` into per-leaf indices."""
    lines = [f"  IDX {prefix}r = {src};"]
    for i in group.tensor_leaves:
        start = f"o{i}" if base is None else f"{base}{i}"
        lines.append(f"  IDX {prefix}{i} = {start};")
    if with_out is not None:
        lines.append(f"  IDX {prefix}o = {with_out};")
    for j in reversed(dims):
        adds = " ".join(f"{prefix}{i} += c * st{i}_{j};" for i in group.tensor_leaves)
        out_add = f" {prefix}o += c * so{j};" if with_out is not None else ""
        lines.append(f"  {{ const IDX c = {prefix}r % d{j}; {prefix}r /= d{j}; {adds}{out_add} }}")
    return lines


def _forward_lines(group: Group, index: str) -> list[str]:
    lines = []
    for i, leaf in enumerate(group.leaves):
        value = f"LD(p{i}, {index}{i})" if isinstance(leaf, Tensor) else f"s{i}"
        lines.append(f"  const CT x{i} = {value};")
    for j, node in enumerate(group.nodes):
        lines.append(f"  const CT t{j} = (CT)({node.forward_source()});")
    return lines


def _reverse_lines(group: Group, targets: Sequence[int], seed: str) -> list[str]:
    """The reverse sweep: ``gx<i>`` for every target leaf ``i``."""
    reach = group.reaching(targets)
    root = len(group.nodes) - 1
    lines = [f"  CT gx{i} = (CT)0;" for i in targets]
    lines += [f"  CT gt{j} = (CT)0;" for j in range(root) if f"t{j}" in reach]
    lines.append(f"  CT gt{root} = {seed};")
    for j in range(root, -1, -1):
        if f"t{j}" not in reach:
            continue
        node = group.nodes[j]
        exprs = node.backward_sources(f"gt{j}", f"t{j}")
        for arg, expr in zip(node.args, exprs):
            if arg in reach:
                lines.append(f"  g{arg} += (CT)({expr});")
    return lines


def _forward_source(name: str, group: Group, lay: Layout) -> tuple[list[str], str]:
    params = ["__global T* out", *_input_params(group, lay)]
    lines = ["  const IDX gid = get_global_id(0);", "  if (gid >= n) return;"]
    if lay.flat:
        lines += [f"  const IDX i{i} = o{i} + gid;" for i in group.tensor_leaves]
    else:
        lines += _decode(group, lay, "gid", range(len(lay.dims)), "i", None, None)
    lines += _forward_lines(group, "i")
    lines.append(f"  ST(out, gid, t{len(group.nodes) - 1});")
    return params, "\n".join(lines)


def _full_source(name: str, group: Group, lay: Layout, targets: Sequence[int]) -> tuple[
        list[str], str]:
    params = ["__global const T* gout", "const IDX og"]
    params += [f"__global T* g{i}" for i in targets] + _input_params(group, lay)
    lines = ["  const IDX gid = get_global_id(0);", "  if (gid >= n) return;"]
    if lay.flat:
        lines += [f"  const IDX i{i} = o{i} + gid;" for i in group.tensor_leaves]
    else:
        lines += _decode(group, lay, "gid", range(len(lay.dims)), "i", None, None)
    lines += _forward_lines(group, "i")
    lines += _reverse_lines(group, targets, "LD(gout, og + gid)")
    lines += [f"  ST(g{i}, gid, gx{i});" for i in targets]
    return params, "\n".join(lines)


def _branch(k: int, count: int) -> str:
    """``if``/``else if``/``else`` heads choosing section ``k`` of ``count`` by group id."""
    if count == 1:
        return "if (1)"
    if k == 0:
        return "if (grp < start1)"
    if k == count - 1:
        return "else"
    return f"else if (grp < start{k + 1})"


def _reduce_source(name: str, group: Group, lay: Layout, targets: Sequence[int],
                   local: int) -> tuple[list[str], str]:
    params = ["__global const T* gout", "const IDX og"]
    params += [f"__global T* g{i}" for i in targets] + _input_params(group, lay)
    params += [f"const IDX so{j}" for j in range(len(lay.dims))]
    params += [f"const IDX start{k}" for k in range(len(targets))]
    params += [f"const IDX red{k}" for k in range(len(targets))]
    lines = ["  const IDX grp = get_group_id(0);", "  const int lid = get_local_id(0);",
             f"  __local CT scratch[{local}];", "  CT acc = (CT)0;", "  IDX m = 0;"]
    for k, leaf in enumerate(targets):
        kept = [j for j, keep in enumerate(lay.kept(leaf)) if keep]
        gone = [j for j, keep in enumerate(lay.kept(leaf)) if not keep]
        lines.append(f"  {'} ' if k else ''}{_branch(k, len(targets))} {{")
        lines.append(f"  m = grp - start{k};")
        lines += _decode(group, lay, "m", kept, "b", None, "og")
        lines.append(f"  for (IDX q = lid; q < red{k}; q += {local}) {{")
        lines += _decode(group, lay, "q", gone, "i", "b", "bo")
        lines += _forward_lines(group, "i")
        lines += _reverse_lines(group, [leaf], "LD(gout, io)")
        lines.append(f"  acc += gx{leaf};")
        lines.append("  }")
    lines.append("  }")
    lines += [
        "  scratch[lid] = acc;",
        "  barrier(CLK_LOCAL_MEM_FENCE);",
        f"  for (int s = {local // 2}; s > 0; s >>= 1) {{",
        "    if (lid < s) scratch[lid] += scratch[lid + s];",
        "    barrier(CLK_LOCAL_MEM_FENCE);",
        "  }",
        "  if (lid == 0) {",
    ]
    for k, leaf in enumerate(targets):
        lines.append(f"    {_branch(k, len(targets))} {{ ST(g{leaf}, m, scratch[0]); }}")
    lines.append("  }")
    return params, "\n".join(lines)


# -- building and launching -------------------------------------------------------------------


def _local_size(queue: Any) -> int:
    cap = int(queue.device.max_work_group_size)
    return 1 << (min(_LOCAL, cap).bit_length() - 1)


def _kernel(kind: str, group: Group, lay: Layout, queue: Any, extra: tuple[Any, ...]) -> Any:
    masks = tuple(lay.kept(i) for i in group.tensor_leaves)
    key = (id(queue.context), kind, group.key, group.dtype, len(lay.dims), lay.flat, lay.wide,
           masks, extra)
    built = _cache.get(key)
    if built is not None:
        _stats["hits"] += 1
        return built
    digest = hashlib.sha1(repr(key[1:]).encode()).hexdigest()[:12]
    name = f"fused_{kind}_{digest}"
    if kind == "fwd":
        params, body = _forward_source(name, group, lay)
    elif kind == "full":
        params, body = _full_source(name, group, lay, extra[0])
    else:
        params, body = _reduce_source(name, group, lay, extra[0], extra[1])
    spec = KernelSpec(name=name, params=params, body=body,
                      preamble=_header(group.dtype, lay.wide), tune=False)
    built = spec.build(queue)
    with _lock:
        _cache[key] = built
        _stats["generated"] += 1
    return built


def _scalar(dtype: str) -> Any:
    return np.float64 if dtype == "float64" else np.float32


def _input_args(group: Group, lay: Layout, idx: Any, n: int) -> list[Any]:
    ct = _scalar(group.dtype)
    args: list[Any] = []
    for leaf in group.leaves:
        if isinstance(leaf, Tensor):
            leaf.wait()
            args += [leaf.buffer, idx(leaf.offset)]
        else:
            args.append(ct(leaf))
    args.append(idx(n))
    args += [idx(d) for d in lay.dims]
    for s in lay.strides:
        args += [idx(v) for v in s]
    return args


def run_forward(group: Group) -> Tensor:
    """The group's output as a new tensor (one launch)."""
    queue = group.queue
    out = Tensor.from_shape(queue, group.shape, group.dtype, fill=None)
    n = out.size
    if n == 0:
        return out
    lay = Layout.of(group.shape, group.tensors)
    idx = np.int64 if lay.wide else np.int32
    built = _kernel("fwd", group, lay, queue, ())
    local = _local_size(queue)
    built.run(queue, (-(-n // local) * local,), (local,), out.buffer,
              *_input_args(group, lay, idx, n))
    return out


def run_backward(group: Group, g: Tensor, needs: Sequence[bool]) -> list[Tensor | None]:
    """Gradients of the group's tensor leaves (``None`` where not needed): <= 2 launches."""
    queue = group.queue
    lay = Layout.of(group.shape, group.tensors)
    idx = np.int64 if lay.wide else np.int32
    n = math.prod(group.shape)
    grads: list[Tensor | None] = [None] * len(group.tensors)
    wanted = [k for k, need in enumerate(needs) if need]
    for k in wanted:
        grads[k] = Tensor.from_shape(queue, group.tensors[k].shape, group.dtype,
                                     fill=0 if n == 0 else None)
    if n == 0 or not wanted:
        return grads
    g.wait()
    leaf_of = group.tensor_leaves
    full = [k for k in wanted if lay.is_full(k)]
    reduced = [k for k in wanted if not lay.is_full(k)]
    local = _local_size(queue)
    inputs = _input_args(group, lay, idx, n)
    if full:
        targets = tuple(leaf_of[k] for k in full)
        built = _kernel("full", group, lay, queue, (targets,))
        bufs = [_buffer(grads[k]) for k in full]
        built.run(queue, (-(-n // local) * local,), (local,), g.buffer, idx(g.offset),
                  *bufs, *inputs)
    if reduced:
        targets = tuple(leaf_of[k] for k in reduced)
        built = _kernel("reduce", group, lay, queue, (targets, local))
        starts, reds, total = [], [], 0
        for k in reduced:
            m = group.tensors[k].size
            starts.append(idx(total))
            reds.append(idx(n // max(m, 1)))
            total += m
        bufs = [_buffer(grads[k]) for k in reduced]
        built.run(queue, (total * local,), (local,), g.buffer, idx(g.offset), *bufs, *inputs,
                  *(idx(s) for s in lay.out_strides), *starts, *reds)
    return grads


def _buffer(t: Tensor | None) -> Any:
    if t is None:
        raise RuntimeError("jit: internal error, gradient buffer missing")
    return t.buffer
