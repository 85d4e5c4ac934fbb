"""OpenCL code generation for fused elementwise groups: one forward kernel, two backward ones.

# NOTE [ Fused kernels ]
# A group is a DAG of primitives over *leaves* (tensors and scalars), see ``_group.Group``.
# Every kernel iterates over the group's broadcast output shape after merging the dimensions
# that are contiguous for every operand (at most ``MAX_DIMS`` remain). Leaf ``i`` is read at
# ``o_i + sum_j c_j * st_i_j`` (stride 0 where it is broadcast); shapes, strides and offsets are
# scalar arguments, so one kernel serves every shape with the same broadcast pattern.
#
# Two numberings: a *leaf* index ``i`` counts tensors and numbers alike (``0.5 * x + y`` has
# leaves 0.5, x, y) and names the kernel's variables (``p<i>``, ``s<i>``, ``g<i>``); a *tensor*
# index ``k`` counts tensors only (``Group.tensors``, ``Layout.strides``, the gradients).
# ``Group.tensor_leaves[k]`` is the leaf of tensor ``k``; :func:`_leaf_kept` goes back.
#
# - forward: one work item per output element evaluates the DAG in registers (SSA ``t_j``).
# - backward "full": one work item per output element recomputes the forward, then runs the
#   reverse sweep of the DAG (each primitive's backward expressions) and writes the gradient
#   of every leaf whose shape *is* the output shape.
# - backward "reduce": the gradient of a broadcast leaf is a sum over its broadcast dims; all
#   such leaves share one launch that recomputes forward and reverse sweep while summing (see
#   NOTE [ Reduce kernel ]). No full-size temporary is ever written.
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
from typing import Any

import numpy as np

from netcl.core.capabilities import device_profile
from netcl.core.kernels.cache import ContextCache
from netcl.core.kernels.family import local_size_1d
from netcl.core.kernels.header import EXPRESSION_MACROS, kernel_header
from netcl.core.kernels.primitives import KernelSpec
from netcl.core.shapes import (
    MAX_DIMS,
    broadcast_strides,
    check_merged_dims,
    collapse,
    contiguous_strides,
)
from netcl.core.tensor import Tensor

from ._group import Group

__all__ = ["MAX_DIMS", "Layout", "cache_info", "clear_cache", "kernel_spec", "run_backward",
           "run_forward"]

_INT32_MAX = 2**31 - 1
_MIN_CHUNK = 16  # positions each reduce work item sums at least
_MAX_SHARE = 2048  # work items per reduced element at most (the last one adds their partials)

_lock = threading.Lock()
_cache = ContextCache("fused kernels")  # structure -> BuiltKernel, per context
_stats = {"generated": 0, "hits": 0}


def cache_info() -> dict[str, int]:
    """``generated``: kernels generated and built; ``hits``: launches that reused one;
    ``size``: kernels held now.

    Examples:
        >>> sorted(cache_info())
        ['generated', 'hits', 'size']
    """
    return {**_stats, "size": len(_cache)}


def clear_cache() -> None:
    """Forget the generated kernels (the program cache on disk is kept)."""
    with _lock:
        _cache.clear()


# -- layout ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """The merged iteration space of a group: dims, per-tensor strides, output strides.

    ``strides[k]`` belongs to the group's ``k``-th *tensor* (numbers have no strides), so the
    methods below take a tensor index, not a leaf index (see NOTE [ Fused kernels ]).
    """

    dims: tuple[int, ...]
    strides: tuple[tuple[int, ...], ...]
    out_strides: tuple[int, ...]
    wide: bool

    @property
    def flat(self) -> bool:
        """Every tensor leaf is contiguous over the output: index = element number."""
        return len(self.dims) == 1 and all(s == (1,) for s in self.strides)

    def kept(self, k: int) -> tuple[bool, ...]:
        """Per dim: whether the ``k``-th tensor varies along it (False: broadcast)."""
        return tuple(s != 0 for s in self.strides[k])

    def is_full(self, k: int) -> bool:
        """Whether the ``k``-th tensor has the output's shape (no broadcast dim)."""
        return all(self.kept(k))

    @classmethod
    def of(cls, shape: tuple[int, ...], tensors: Sequence[Tensor]) -> Layout:
        """Merge the dims of ``shape`` that are contiguous for the output and every tensor."""
        sets = [contiguous_strides(shape)] + [broadcast_strides(t.shape, shape) for t in tensors]
        dims, merged = collapse(shape, sets)
        check_merged_dims("jit", shape, dims, what="fused kernels")
        n = math.prod(shape)
        extents = [n] + [t.offset + t.size for t in tensors]
        return cls(dims, tuple(merged[1:]), merged[0],
                   max(extents, default=0) > _INT32_MAX)


def _leaf_kept(group: Group, lay: Layout, leaf: int) -> tuple[bool, ...]:
    """:meth:`Layout.kept` of the tensor at leaf index ``leaf``."""
    return lay.kept(group.tensor_leaves.index(leaf))


# -- source generation ------------------------------------------------------------------------


def _header(dtype: str, wide: bool) -> str:
    """The one kernel header (:func:`netcl.core.kernels.header.kernel_header`) in the fused
    kernels' form: the expression macros (the primitives are written with ``ADD``, ``MUL``,
    ...), ``IDX`` and ``LIT``, no pragma (``KernelSpec.device_source`` adds it)."""
    return kernel_header(None, dtype, preamble=EXPRESSION_MACROS, wide=wide, literal=True,
                         cast=False)


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
    for k, j in enumerate(reversed(dims)):
        adds = " ".join(f"{prefix}{i} += c * st{i}_{j};" for i in group.tensor_leaves)
        out_add = f" {prefix}o += c * so{j};" if with_out is not None else ""
        # the outermost dim takes what is left: no division
        step = f"{prefix}r;" if k == len(dims) - 1 else f"{prefix}r % d{j}; {prefix}r /= d{j};"
        lines.append(f"  {{ const IDX c = {step} {adds}{out_add} }}")
    return lines


def _digits(src: str, dims: Sequence[int], prefix: str) -> list[str]:
    """``src`` written in the mixed radix of ``dims``: ``IDX <prefix><dim>`` per dim."""
    lines = [f"  IDX {prefix}r = {src};"]
    for k, j in enumerate(reversed(dims)):
        if k == len(dims) - 1:
            lines.append(f"  IDX {prefix}{j} = {prefix}r;")
        else:
            lines.append(f"  IDX {prefix}{j} = {prefix}r % d{j}; {prefix}r /= d{j};")
    return lines


def _element_lines(group: Group, lay: Layout) -> list[str]:
    """``gid`` (the output element) and the leaf indices ``i<k>`` of this work item.

    Multi-dim layouts run on a 2-d range: dimension 0 walks the innermost dim, so its index
    needs no division, and the outer dims come from dimension 1.
    """
    if lay.flat or len(lay.dims) == 1:
        lines = ["  const IDX gid = get_global_id(0);", "  if (gid >= n) return;"]
        if lay.flat:
            return lines + [f"  const IDX i{i} = o{i} + gid;" for i in group.tensor_leaves]
        return lines + _decode(group, lay, "gid", [0], "i", None, None)
    last = len(lay.dims) - 1
    lines = ["  const IDX c0 = get_global_id(0);", "  const IDX row = get_global_id(1);",
             f"  const IDX gid = row * d{last} + c0;", f"  if (c0 >= d{last} || gid >= n) return;"]
    lines += [f"  const IDX e{i} = o{i} + c0 * st{i}_{last};" for i in group.tensor_leaves]
    return lines + _decode(group, lay, "row", range(last), "i", "e", None)


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
    lines = _element_lines(group, lay) + _forward_lines(group, "i")
    lines.append(f"  ST(out, gid, t{len(group.nodes) - 1});")
    return params, "\n".join(lines)


def _full_source(name: str, group: Group, lay: Layout, targets: Sequence[int]) -> tuple[
        list[str], str]:
    params = ["__global const T* gout", "const IDX og"]
    params += [f"__global T* g{i}" for i in targets] + _input_params(group, lay)
    lines = _element_lines(group, lay) + _forward_lines(group, "i")
    lines += _reverse_lines(group, targets, "LD(gout, og + gid)")
    lines += [f"  ST(g{i}, gid, gx{i});" for i in targets]
    return params, "\n".join(lines)


# NOTE [ Reduce kernel ]
# The gradient of a broadcast leaf has ``M`` elements, each a sum over ``R`` positions of the
# dims the leaf is broadcast along. Leaves with the same broadcast pattern share a *section*
# (one recomputation of the DAG feeds all their sums). ``W`` work items share each element
# (``W`` from the device size: enough items to fill it, at least 16 positions each); sections
# start on work-group boundaries. When the leaf keeps the last dim, consecutive items take
# consecutive elements (contiguous loads on a GPU) and each item sums a block of positions;
# otherwise consecutive items take consecutive positions of one element, interleaved - except
# on CPU devices, where an item always sums one contiguous block (its cache lines stay its
# own). Coordinates over the reduced dims advance by carries, without a division per element.
# With ``W > 1`` every item writes its partial sums, then counts itself in with an atomic; the
# last item of an element adds the partials in a fixed order, so the result is deterministic
# and the whole reduction stays one launch. There are no barriers: PoCL compiles kernels with
# barriers many times slower.

_SECTION_ARGS = ("start", "m", "w", "red", "chunk", "iters", "pbase", "cbase")


def _section_head(k: int, count: int) -> str:
    if count == 1:
        return "  if (1) {"
    if k == 0:
        return "  if (grp < start1) {"
    cond = "" if k == count - 1 else f" if (grp < start{k + 1})"
    return f"  }} else{cond} {{"


def _store(sections: Sequence[Sequence[int]], values: str, indent: str) -> list[str]:
    """Store the sums of every section's leaves (``values`` formats with the slot number)."""
    lines = []
    for k, leaves in enumerate(sections):
        head = "if" if k == 0 else "else if"
        stores = " ".join(f"ST(g{leaf}, m, {values.format(a)});" for a, leaf in enumerate(leaves))
        lines.append(f"{indent}{head} (sec == {k}) {{ {stores} }}")
    return lines


def _reduce_source(name: str, group: Group, lay: Layout, sections: Sequence[Sequence[int]],
                   local: int, blocked: bool) -> tuple[list[str], str]:
    """See NOTE [ Reduce kernel ]; ``sections`` group the leaves of one broadcast pattern;
    ``blocked``: every section sums contiguous blocks (what CPU caches want)."""
    targets = [leaf for leaves in sections for leaf in leaves]
    slots = max(len(leaves) for leaves in sections)
    params = ["__global const T* gout", "const IDX og"]
    params += [f"__global T* g{i}" for i in targets] + _input_params(group, lay)
    params += [f"const IDX so{j}" for j in range(len(lay.dims))]
    params += [f"const IDX {a}{k}" for k in range(len(sections)) for a in _SECTION_ARGS]
    params += ["volatile __global CT* part", "volatile __global int* count"]
    lines = [
        "  const IDX grp = get_group_id(0);", "  const IDX lid = get_local_id(0);",
        *(f"  CT acc{a} = (CT)0;" for a in range(slots)),
        "  IDX m = 0, w = 0, W = 1, M = 1, pbase = 0, cbase = 0;", "  int sec = 0, active = 0;",
    ]
    for k, leaves in enumerate(sections):
        mask = _leaf_kept(group, lay, leaves[0])
        kept = [j for j, keep in enumerate(mask) if keep]
        gone = [j for j, keep in enumerate(mask) if not keep]
        lines += [_section_head(k, len(sections)),
                  f"  sec = {k}; W = w{k}; M = m{k}; pbase = pbase{k}; cbase = cbase{k};",
                  f"  const IDX u = (grp - start{k}) * {local} + lid;"]
        if mask[-1] or blocked:  # blocks of positions
            lines += ["  m = u % M; w = u / M; active = w < W;", f"  const IDX lo = w * chunk{k};",
                      f"  const IDX hi = min(lo + chunk{k}, red{k});", "  const IDX step = 1;"]
        else:  # positions interleaved; neighbours take neighbouring positions
            lines += ["  m = u / W; w = u % W; active = m < M;", "  const IDX lo = w;",
                      f"  const IDX hi = red{k};", "  const IDX step = W;"]
        lines += _decode(group, lay, "m", kept, "b", None, "og")
        # Coordinates over the reduced dims advance by the digits of ``step`` with carries:
        # no division per element. A trip count uniform over the group lets PoCL vectorize
        # across work items.
        lines += _digits("lo", gone, "c") + _digits("step", gone, "s")
        lines += [f"  for (IDX j = 0; j < iters{k}; ++j) {{",
                  "  if (active && lo + j * step < hi) {"]
        for i in group.tensor_leaves:
            terms = "".join(f" + c{d} * st{i}_{d}" for d in gone)
            lines.append(f"  const IDX i{i} = b{i}{terms};")
        lines.append("  const IDX io = bo" + "".join(f" + c{d} * so{d}" for d in gone) + ";")
        lines += _forward_lines(group, "i")
        lines += _reverse_lines(group, leaves, "LD(gout, io)")
        lines += [f"  acc{a} += gx{leaf};" for a, leaf in enumerate(leaves)]
        lines += ["  }", "  IDX carry = 0;"]
        for pos, d in enumerate(reversed(gone)):
            if pos == len(gone) - 1:
                lines.append(f"  c{d} += s{d} + carry;")
            else:
                lines.append(f"  c{d} += s{d} + carry; carry = c{d} >= d{d}; "
                             f"if (carry) c{d} -= d{d};")
        lines.append("  }")
    lines += [
        "  }",
        "  if (!active) return;",
        "  if (W == 1) {",
        *_store(sections, "acc{}", "    "),
        "    return;",
        "  }",
        *(f"  if ({a} < nleaves(sec)) part[pbase + ({a} * M + m) * W + w] = acc{a};"
          for a in range(slots)),
        "  mem_fence(CLK_GLOBAL_MEM_FENCE);",
        "  if (atomic_inc(&count[cbase + m]) != (int)(W - 1)) return;",
        "  mem_fence(CLK_GLOBAL_MEM_FENCE);",
        *(f"  acc{a} = (CT)0;" for a in range(slots)),
        "  for (IDX j = 0; j < W; ++j) {",
        *(f"    if ({a} < nleaves(sec)) acc{a} += part[pbase + ({a} * M + m) * W + j];"
          for a in range(slots)),
        "  }",
        *_store(sections, "acc{}", "  "),
    ]
    counts = " : ".join(f"(s) == {k} ? {len(leaves)}" for k, leaves in enumerate(sections))
    header = f"#define nleaves(s) ({counts} : 0)\n"
    return params, header + "\n".join(lines)


# -- building and launching -------------------------------------------------------------------


def _local_size(queue: Any) -> int:
    """The device's one 1-D local size (NOTE [ The 1-D launch rule ] in
    :mod:`netcl.core.kernels.family`): a power of two, as the reduce kernel's tree needs."""
    return local_size_1d(queue.device)


def _elementwise_range(lay: Layout, n: int, local: int) -> tuple[tuple[int, ...],
                                                                  tuple[int, ...]]:
    """Global and local size for the forward and full kernels (see :func:`_element_lines`)."""
    if lay.flat or len(lay.dims) == 1:
        return (-(-n // local) * local,), (local,)
    inner = lay.dims[-1]
    l0 = min(local, 1 << (inner - 1).bit_length())
    l1 = local // l0
    rows = n // inner
    return (-(-inner // l0) * l0, -(-rows // l1) * l1), (l0, l1)


def _structure(kind: str, group: Group, lay: Layout, extra: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a generated kernel depends on: never the values of shapes or scalars."""
    masks = tuple(lay.kept(k) for k in range(len(group.tensors)))
    return (kind, group.key, group.dtype, len(lay.dims), lay.flat, lay.wide, masks, extra)


def kernel_spec(kind: str, group: Group, lay: Layout, extra: tuple[Any, ...]) -> KernelSpec:
    """The generated kernel of ``group`` over ``lay``: a pure function, no device involved.

    ``kind`` is ``"fwd"``, ``"full"`` (``extra``: the target leaves) or ``"reduce"``
    (``extra``: sections, local size, blocked; see NOTE [ Reduce kernel ]).
    """
    digest = hashlib.sha1(repr(_structure(kind, group, lay, extra)).encode()).hexdigest()[:12]
    name = f"fused_{kind}_{digest}"
    if kind == "fwd":
        params, body = _forward_source(name, group, lay)
    elif kind == "full":
        params, body = _full_source(name, group, lay, extra[0])
    else:
        params, body = _reduce_source(name, group, lay, extra[0], extra[1], extra[2])
    return KernelSpec(name=name, params=params, body=body,
                      preamble=_header(group.dtype, lay.wide) + group.preamble, tune=False)


def _kernel(kind: str, group: Group, lay: Layout, queue: Any, extra: tuple[Any, ...]) -> Any:
    key = _structure(kind, group, lay, extra)
    table = _cache.of(queue.context)
    built = table.get(key)
    if built is not None:
        _stats["hits"] += 1
        return built
    built = kernel_spec(kind, group, lay, extra).build(queue)
    with _lock:
        table[key] = built
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
    gsize, lsize = _elementwise_range(lay, n, _local_size(queue))
    built.run(queue, gsize, lsize, out.buffer, *_input_args(group, lay, idx, n))
    return out


def run_backward(group: Group, g: Tensor, needs: Sequence[bool]) -> list[Tensor | None]:
    """Gradients of the group's tensors (``None`` where not needed): <= 2 launches."""
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
        gsize, lsize = _elementwise_range(lay, n, local)
        built.run(queue, gsize, lsize, g.buffer, idx(g.offset), *bufs, *inputs)
    if reduced:
        _run_reduce(group, lay, queue, g, [(k, grads[k]) for k in reduced], inputs, idx, n,
                    local)
    return grads


def _run_reduce(group: Group, lay: Layout, queue: Any, g: Tensor,
                outs: list[tuple[int, Tensor | None]], inputs: list[Any], idx: Any, n: int,
                local: int) -> None:
    """Launch the reduce kernel for the broadcast tensors ``outs``: (tensor index, gradient)
    pairs (see NOTE [ Reduce kernel ])."""
    target = max(4096, 2048 * int(queue.device.max_compute_units))
    blocked = _is_cpu(queue.device)
    by_mask: dict[tuple[bool, ...], list[tuple[int, Tensor | None]]] = {}
    for k, t in outs:
        by_mask.setdefault(lay.kept(k), []).append((k, t))
    sections: list[Any] = []
    groups = parts = counters = 0
    for mask, members in by_mask.items():
        m = max(group.tensors[members[0][0]].size, 1)
        red = n // m
        w = max(1, min(-(-target // m), -(-red // _MIN_CHUNK), _MAX_SHARE))
        chunk = -(-red // w)
        sections += [groups, m, w, red, chunk, chunk if mask[-1] or blocked else -(-red // w),
                     parts, counters]
        groups += -(-(m * w) // local)  # sections start on work-group boundaries
        if w > 1:
            parts += len(members) * m * w
            counters += m
    ct = "float64" if group.dtype == "float64" else "float32"
    part = Tensor.from_shape(queue, (max(parts, 1),), ct, fill=None)
    count = Tensor.from_shape(queue, (max(counters, 1),), "int32", fill=0)
    layout = tuple(tuple(group.tensor_leaves[k] for k, _ in members)
                   for members in by_mask.values())
    built = _kernel("reduce", group, lay, queue, (layout, local, blocked))
    bufs = [_buffer(t) for members in by_mask.values() for _, t in members]
    built.run(queue, (groups * local,), (local,), g.buffer, idx(g.offset), *bufs, *inputs,
              *(idx(s) for s in lay.out_strides), *(idx(v) for v in sections), part.buffer,
              count.buffer)


def _is_cpu(device: Any) -> bool:
    return device_profile(device).device_type == "cpu"


def _buffer(t: Tensor | None) -> Any:
    if t is None:
        raise RuntimeError("jit: internal error, gradient buffer missing")
    return t.buffer
