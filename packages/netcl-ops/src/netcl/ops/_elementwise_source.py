"""The elementwise kernel family: one OpenCL program per (signature, bundle), as source.

Pure functions of an op bundle and a :class:`_Sig` (no device): :func:`elementwise_family` is the
:func:`~netcl.core.kernels.family.kernel_family` that builds them per context, and the golden
test renders them through :func:`program_source`.

# NOTE [ Elementwise kernel family ]
# One kernel serves every op of a *bundle* (same group and arity) that has an expression for
# the compute type, for one signature: operand storage dtypes, compute dtype, output dtype and
# layout. Two uniform arguments pick the work: ``int op`` (the op's
# index in the bundle, switched on once per work item after the shared loads) and, per
# operand, ``u<k>`` (1: use the by-value scalar ``s<k>`` instead of loading ``p<k>``), so
# ``x + y``, ``x + 2`` and ``2 + x`` share one kernel.
# Why not a kernel per op: PoCL JIT-compiles every kernel on its first launch (0.1-0.5 s on a
# small CPU) on top of ~0.3 s per program build, which made a model's first step (and this
# package's tests) spend minutes compiling; a uniform branch costs a GPU nothing measurable in
# a memory-bound kernel. The bundle keeps each op's C expression in one table row.
#
# On OpenCL CPU devices the op is a compile-time constant instead (``_Sig.fixed``: a kernel
# ``ew_<group><arity>_<op>`` holding that op's expression alone, same arguments, ``op``
# unused): see NOTE [ Elementwise kernels on CPU devices ] in :mod:`._elementwise_base`.
#
# Layouts (shapes and strides are scalar kernel arguments, never buffers):
# - "flat": every operand contiguous over the output (same shape), one element per work item
#   (KernelVariant.ELEMENTWISE_SCALAR);
# - "vec": the same with vloadN/vstoreN of ``width`` elements per work item and a scalar tail
#   (KernelVariant.ELEMENTWISE_VECTORIZED);
# - "nd": any element strides (broadcast stride 0, permuted, sliced, offset output) over an
#   iteration shape of at most MAX_DIMS dims left after merging dims that are contiguous for
#   every operand.
# Every launch uses one fixed local size per device: PoCL compiles a work-group function per
# (kernel, local size), so a size-dependent local size would recompile for every new shape.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from netcl.core.dtypes import FLOAT_DTYPES, c_type
from netcl.core.kernels.family import Geometry, KernelSource, kernel_family
from netcl.core.kernels.header import literal_macro

from ._launch import INT32_LIMIT, index_defs

__all__ = ["EwOp", "elementwise_family", "kernel_name", "literal_macro", "program_source"]


@dataclass(frozen=True)
class EwOp:
    """One elementwise op: C expressions over ``a, b, c`` (operands) and ``q0, q1`` (params).

    Args:
        name: the op's name (kernel ``ew_<name>``).
        arity: number of operands.
        group: ``"arith"`` (output dtype = compute dtype), ``"cmp"`` (uint8 0/1 output) or
            ``"copy"`` (the identity; output dtype chosen by the caller).
        c_float: expression for float compute types (``None``: floats unsupported).
        c_int: expression for integer compute (``None``: ``TypeError`` on integer tensors).
        numpy: vectorized NumPy function on arrays in the compute dtype (params after operands).
        unsigned: whether uint8 is allowed (``neg`` is not).
        nparams: number of scalar parameters (``q0``, ``q1``) the op reads.
        int_out: the compute and output dtype of integer operands, where it is not theirs
            (``div``: float32).
    """

    name: str
    arity: int
    group: str
    c_float: str | None
    c_int: str | None
    numpy: Callable[..., Any]
    unsigned: bool = True
    nparams: int = 0
    int_out: str | None = None

    def expression(self, compute: str) -> str | None:
        """The C expression for ``compute`` dtype, ``None`` where the op does not apply."""
        if compute in FLOAT_DTYPES:
            return self.c_float
        if compute == "uint8" and not self.unsigned:
            return None
        return self.c_int


@dataclass(frozen=True)
class _Sig:
    group: str
    arity: int
    nparams: int
    operands: tuple[str, ...]  # storage dtype of each operand (compute dtype for scalars)
    compute: str
    out: str
    layout: str  # "flat" | "vec" | "nd"
    ndim: int
    width: int
    wide: bool
    aligned: bool = False  # "vec" only: every offset a multiple of width (vector pointers)
    fixed: int = -1  # the op's index in the bundle, compiled in (CPU devices); -1: ``op`` picks


_NAMES = "abc"


def _load_macro(k: int, dtype: str) -> str:
    if dtype == "float16":
        return f"#define LD{k}(p, i) ((CT)vload_half((i), (p)))\n"
    return f"#define LD{k}(p, i) ((CT)(p)[(i)])\n"


def _store_macro(dtype: str) -> str:
    if dtype == "float16":
        return "#define STO(p, i, v) vstore_half((v), (i), (p))\n"
    return f"#define STO(p, i, v) ((p)[(i)] = ({c_type(dtype)})(v))\n"


def _params(sig: _Sig) -> list[str]:
    out = [f"__global {c_type(sig.out)}* out", "const IDX oo"]
    for k, dt in enumerate(sig.operands):
        out += [f"__global const {c_type(dt)}* p{k}", f"const IDX o{k}", f"const CT s{k}",
                f"const int u{k}"]
    out += [f"const CT q{j}" for j in range(sig.nparams)]
    out.append("const IDX n")
    if sig.layout == "nd":
        out += [f"const IDX d{j}" for j in range(sig.ndim)]
        out += [f"const IDX so{j}" for j in range(sig.ndim)]
        for k in range(len(sig.operands)):
            out += [f"const IDX s{k}_{j}" for j in range(sig.ndim)]
    return out


def _loads(sig: _Sig, index: str, indent: str) -> list[str]:
    """``const CT a = ...;`` for every operand; ``index`` formats with the operand number."""
    return [f"{indent}const CT {_NAMES[k]} = u{k} ? s{k} : LD{k}(p{k}, {index.format(k=k)});"
            for k in range(len(sig.operands))]


def _switch(sig: _Sig, cases: Sequence[tuple[int, str]], indent: str) -> list[str]:
    """``switch (op)`` over ``cases``; the one case's statement alone in a ``fixed`` kernel."""
    if sig.fixed >= 0:
        return [f"{indent}{{ {stmt} }}" for _, stmt in cases]
    lines = [f"{indent}switch (op) {{"]
    lines += [f"{indent}  case {code}: {{ {stmt} }} break;" for code, stmt in cases]
    lines.append(f"{indent}}}")
    return lines


def _scalar_body(sig: _Sig, exprs: Sequence[tuple[int, str]], index: str, out_index: str,
                 indent: str) -> list[str]:
    cases = [(code, f"STO(out, {out_index}, ({expr}));") for code, expr in exprs]
    return _loads(sig, index, indent) + _switch(sig, cases, indent)


def _vec_load(sig: _Sig, k: int, dt: str) -> str:
    """Operand ``k``'s W lanes of vector ``i``: a whole-vector load when ``sig.aligned``."""
    w = sig.width
    if dt == "float16":
        fn = "vloada_half" if sig.aligned else "vload_half"
        return f"{fn}{w}(i, p{k} + o{k})"
    if sig.aligned:
        return f"((__global const {c_type(dt)}{w}*)(p{k} + o{k}))[i]"
    return f"vload{w}(i, p{k} + o{k})"


def _vec_store(sig: _Sig) -> str:
    w = sig.width
    if sig.out == "float16":
        fn = "vstorea_half" if sig.aligned else "vstore_half"
        return f"{fn}{w}(r, i, out + oo);"
    if sig.aligned:
        return f"((__global {c_type(sig.out)}{w}*)(out + oo))[i] = r;"
    return f"vstore{w}(r, i, out + oo);"


def _vec_body(sig: _Sig, exprs: Sequence[tuple[int, str]]) -> list[str]:
    """W lanes per work item, each lane's expression written out (measured 2x faster on
    PoCL than loops over private arrays, for a similar compile time).

    Unaligned offsets use vloadW/vstoreW; when every offset is a multiple of W the operands
    are read through vector pointers, which NVIDIA's compiler turns into one 16-byte load
    where vload4 from an arbitrary offset stays four scalar loads.
    """
    w = sig.width
    lines = ["  const IDX base = i * W;", "  if (base + W <= n) {"]
    for k, dt in enumerate(sig.operands):
        ctype = "float" if dt == "float16" else c_type(dt)
        scalar = f"({ctype}{w})(s{k})" if dt == "float16" else f"({ctype}{w})(({ctype})s{k})"
        lines.append(f"    const {ctype}{w} v{k} = u{k} ? {scalar} : {_vec_load(sig, k, dt)};")
    if sig.out == "float16":
        lane_type = "double" if sig.compute == "float64" else "float"
    else:
        lane_type = c_type(sig.out)
    lines.append(f"    {lane_type}{w} r;")
    cases = []
    for code, expr in exprs:
        lanes = []
        for lane in range(w):
            sl = f"s{lane:X}"
            loads = " ".join(f"const CT {_NAMES[k]} = (CT)v{k}.{sl};"
                             for k in range(len(sig.operands)))
            lanes.append(f"{{ {loads} r.{sl} = ({lane_type})({expr}); }}")
        cases.append((code, "\n        ".join(lanes)))
    lines += _switch(sig, cases, "    ")
    lines += [f"    {_vec_store(sig)}", "  } else {", "    for (IDX j = base; j < n; ++j) {"]
    lines += _scalar_body(sig, exprs, "o{k} + j", "oo + j", "      ")
    lines += ["    }", "  }"]
    return lines


def _nd_body(sig: _Sig, exprs: Sequence[tuple[int, str]]) -> list[str]:
    tensors = range(len(sig.operands))
    lines = ["  if (i >= n) return;", "  IDX r = i;", "  IDX io = oo;"]
    lines += [f"  IDX i{k} = o{k};" for k in tensors]
    for j in range(sig.ndim - 1, -1, -1):
        step = "const IDX c = r;" if j == 0 else f"const IDX c = r % d{j}; r /= d{j};"
        adds = " ".join([f"io += c * so{j};"] + [f"i{k} += c * s{k}_{j};" for k in tensors])
        lines.append(f"  {{ {step} {adds} }}")
    return lines + _scalar_body(sig, exprs, "i{k}", "io", "  ")


def kernel_name(ops: tuple[EwOp, ...], fixed: int = -1) -> str:
    """The name of the kernel serving the bundle ``ops`` (``ew_arith2``, ``ew_cmp2``, ...), or
    only its op ``fixed`` (an index into ``ops``) when that is not -1 (``ew_arith1_exp``).

    Examples:
        >>> from netcl.ops import ELEMENTWISE
        >>> from netcl.ops._elementwise_dispatch import bundle
        >>> ops = bundle(ELEMENTWISE["exp"])
        >>> kernel_name(ops), kernel_name(ops, ops.index(ELEMENTWISE["exp"]))
        ('ew_arith1', 'ew_arith1_exp')
    """
    name = f"ew_{ops[0].group}{ops[0].arity}"
    return name if fixed < 0 else f"{name}_{ops[fixed].name}"


@functools.cache
def program_source(sig: _Sig, ops: tuple[EwOp, ...]) -> str:
    """The one kernel of bundle ``ops`` for ``sig``: ``op`` is the index of an op in ``ops``
    (or, where ``sig.fixed`` is not -1, the kernel of that op alone, ``op`` unused).

    Raises:
        ValueError: ``sig.fixed`` names an op without an expression for ``sig.compute``.
    """
    head = [index_defs(INT32_LIMIT + 1 if sig.wide else 0)[0], literal_macro(sig.compute),
            _store_macro(sig.out)]
    head += [_load_macro(k, dt) for k, dt in enumerate(sig.operands)]
    if sig.layout == "vec":
        head.append(f"#define W {sig.width}\n")
    exprs = [(code, e) for code, op in enumerate(ops)
             if (e := op.expression(sig.compute)) is not None]
    if sig.fixed >= 0:
        exprs = [(code, e) for code, e in exprs if code == sig.fixed]
        if not exprs:
            raise ValueError(f"elementwise: {ops[sig.fixed].name} has no {sig.compute} "
                             "expression to compile in")
    if sig.layout == "flat":
        body = ["  if (i >= n) return;", *_scalar_body(sig, exprs, "o{k} + i", "oo + i", "  ")]
    elif sig.layout == "vec":
        body = _vec_body(sig, exprs)
    else:
        body = _nd_body(sig, exprs)
    params = ",\n    ".join([*_params(sig), "const int op"])
    return (f"{''.join(head)}\n__kernel void {kernel_name(ops, sig.fixed)}(\n    {params})\n{{\n"
            "  const IDX i = get_global_id(0);\n" + "\n".join(body) + "\n}\n")


@kernel_family("ops.elementwise")
def elementwise_family(sig: _Sig, bundle: tuple[EwOp, ...]) -> KernelSource:
    """The kernel of ``bundle`` for ``sig``: one kernel, ``sig.width`` elements per work item."""
    return KernelSource(program_source(sig, bundle), (kernel_name(bundle, sig.fixed),),
                        sig.compute, Geometry(per_item=sig.width))
