"""Machinery under every elementwise op: dtype promotion, broadcasting, the kernel family.

An elementwise op is a row of :data:`netcl.ops.ELEMENTWISE` (an :class:`EwOp`: its C
expression, its NumPy function and its dtype rule). This module turns a row into OpenCL
kernels and launches them; it knows no op by name.

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
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, INT_DTYPES, c_type, numpy_dtype
from netcl.core.kernel_selector import KernelVariant, get_kernel_selector
from netcl.core.kernels.primitives import launch, launch_values
from netcl.core.tensor import Tensor

from ._common import cl_kernel, empty

__all__ = [
    "MAX_DIMS",
    "SCALAR_FLOAT",
    "SCALAR_INT",
    "EwOp",
    "Strided",
    "broadcast_shapes",
    "broadcast_strides",
    "contiguous_strides",
    "device_buffer",
    "index_defs",
    "kernel_name",
    "kernel_scalar",
    "launch_items",
    "launch_nd",
    "literal_macro",
    "local_size",
    "np_compute",
    "promote",
    "require_float",
    "run_broadcast",
    "run_fast",
    "run_strided",
    "scalar_kind",
    "view_args",
]

MAX_DIMS = 6
SCALAR_INT = "<python int>"
SCALAR_FLOAT = "<python float>"
_INT32_LIMIT = 2**31 - 1
_FLOAT_RANK = {"float16": 0, "float32": 1, "float64": 2}
_INT_RANK = {"uint8": 0, "int32": 1, "int64": 2}
_LOCAL = 256

Scalar = int | float


# -- dtypes ---------------------------------------------------------------------------------


def scalar_kind(op: str, value: Any) -> str:
    """``SCALAR_INT`` or ``SCALAR_FLOAT`` for a Python/NumPy number; ``TypeError`` otherwise."""
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return SCALAR_INT
    if isinstance(value, (float, np.floating)):
        return SCALAR_FLOAT
    raise TypeError(f"{op}: operands must be netcl Tensors or Python numbers, "
                    f"got {type(value).__name__}")


def promote(op: str, kinds: Sequence[str]) -> str:
    """The result dtype of tensors (dtype names) and scalars (``SCALAR_*``), as in PyTorch.

    Any float tensor wins over integer tensors (the widest float); integer tensors give the
    widest integer; a Python scalar never widens a tensor's dtype, except that a float scalar
    makes an integer result float32.

    Examples:
        >>> promote("add", ["int32", "float16"]), promote("add", ["float16", SCALAR_FLOAT])
        ('float16', 'float16')
        >>> promote("add", ["uint8", "int64"]), promote("add", ["int32", SCALAR_FLOAT])
        ('int64', 'float32')
    """
    tensors = [k for k in kinds if k not in (SCALAR_INT, SCALAR_FLOAT)]
    if not tensors:
        raise TypeError(f"{op}: needs at least one Tensor operand, got only Python numbers")
    floats = [k for k in tensors if k in _FLOAT_RANK]
    if floats:
        return max(floats, key=_FLOAT_RANK.__getitem__)
    if SCALAR_FLOAT in kinds:
        return "float32"
    return max(tensors, key=_INT_RANK.__getitem__)


def require_float(op: str, t: Tensor) -> None:
    """``TypeError`` naming ``op`` unless ``t`` is a floating-point tensor."""
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: needs a floating-point tensor, got {t.dtype}; "
                        "cast it first, e.g. cast(x, 'float32')")


def np_compute(dtype: str) -> np.dtype[Any]:
    """The NumPy dtype arithmetic runs in: float32 for float16 (as on OpenCL), else ``dtype``."""
    return np.dtype(np.float32) if dtype == "float16" else numpy_dtype(dtype)


def kernel_scalar(op: str, value: Scalar, dtype: str) -> Any:
    """``value`` as the NumPy scalar type of ``CT`` for ``dtype`` (range-checked for ints)."""
    if dtype in INT_DTYPES:
        ivalue = int(value)
        info = np.iinfo(numpy_dtype(dtype))
        if not info.min <= ivalue <= info.max:
            raise ValueError(
                f"{op}: scalar {value!r} is out of range for {dtype} "
                f"[{info.min}, {info.max}]; cast the tensor to a wider dtype first"
            )
        return numpy_dtype(dtype).type(ivalue)
    return np_compute(dtype).type(value)


# -- shapes ---------------------------------------------------------------------------------


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy broadcasting of ``shapes``; ``ValueError`` naming the op and the shapes.

    Examples:
        >>> broadcast_shapes("add", (3, 1), (4,))
        (3, 4)
    """
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for k, d in enumerate(shape, start=ndim - len(shape)):
            if d != out[k] and out[k] != 1 and d != 1:
                listed = " and ".join(str(s) for s in shapes)
                raise ValueError(
                    f"{op}: shapes {listed} cannot be broadcast together: dimension "
                    f"{k - ndim} is {out[k]} in one and {d} in another"
                )
            if d != 1:
                out[k] = d
    return tuple(out)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * max(shape[k + 1], 1)
    return tuple(strides)


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides reading a contiguous ``shape`` broadcast to ``out_shape`` (0: repeat)."""
    own = contiguous_strides(shape)
    lead = len(out_shape) - len(shape)
    return (0,) * lead + tuple(0 if d == 1 else s for d, s in zip(shape, own))


def _collapse(
    shape: Sequence[int], strides: Sequence[Sequence[int]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Drop size-1 dims, merge neighbours that are contiguous for every stride set."""
    dims: list[int] = []
    merged: list[list[int]] = [[] for _ in strides]
    for k, d in enumerate(shape):
        if d == 1:
            continue
        if dims and all(m[-1] == s[k] * d for m, s in zip(merged, strides)):
            dims[-1] *= d
            for m, s in zip(merged, strides):
                m[-1] = s[k]
        else:
            dims.append(d)
            for m, s in zip(merged, strides):
                m.append(s[k])
    if not dims:
        return (1,), [(1,) for _ in strides]  # one element: any stride reads it
    return tuple(dims), [tuple(m) for m in merged]


# -- device arguments -------------------------------------------------------------------------


def device_buffer(t: Tensor) -> Any:
    """The OpenCL buffer behind ``t`` (its pending upload waited for); offsets go separately."""
    t.wait()
    return t.buffer


def view_args(*values: Any) -> list[Any]:
    """Kernel arguments with each Tensor as two, its buffer and its element offset (``long``),
    for kernels written ``__global T* x, const long xo`` that start with ``x += xo``; other
    values pass through. Views with an offset then work with no copy."""
    out: list[Any] = []
    for v in values:
        out += [device_buffer(v), np.int64(v.offset)] if isinstance(v, Tensor) else [v]
    return out


def index_defs(*extents: int) -> tuple[str, Callable[[int], Any]]:
    """``#define IDX`` for indices up to ``max(extents)`` and the matching argument converter.

    32-bit indices while every extent fits (fast division on GPUs), 64-bit beyond.
    """
    if max(extents, default=0) > _INT32_LIMIT:
        return "#define IDX long\n", np.int64
    return "#define IDX int\n", np.int32


@functools.cache
def local_size(device: Any) -> int:
    """The one 1-D local size used on ``device``: 256, or its maximum work-group size."""
    return int(min(_LOCAL, device.max_work_group_size))


_queue_selectors: dict[int, tuple[Any, Any, int]] = {}  # id(queue) -> (queue, selector, local)


def _queue_facts(queue: Any) -> tuple[Any, Any, int]:
    """(queue, its device's selector, its local size), without a driver query per call."""
    facts = _queue_selectors.get(id(queue))
    if facts is None or facts[0] is not queue:
        device = queue.device
        facts = _queue_selectors[id(queue)] = (queue, get_kernel_selector(device),
                                               local_size(device))
    return facts


def launch_nd(queue: Any, kernel: Any, global_size: Sequence[int], local: Sequence[int],
              *args: Any) -> None:
    """:func:`netcl.core.kernels.primitives.launch` (counted), float64 scalars kept 64-bit.

    ``launch`` turns Python floats into float32, and ``np.float64`` is a float subclass, so a
    float64 scalar goes as a 0-d array, which PyOpenCL passes by its 8 bytes.
    """
    launch(queue, kernel, global_size, local,
           *(np.array(a) if isinstance(a, np.float64) else a for a in args))


def launch_items(queue: Any, kernel: Any, items: int, *args: Any) -> None:
    """Launch ``kernel`` over ``items`` work items with the device's fixed local size."""
    if items <= 0:
        return
    local = _queue_facts(queue)[2]
    launch_nd(queue, kernel, (-(-items // local) * local,), (local,), *args)


# -- ops and kernels --------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Strided:
    """A tensor read or written through element ``strides`` over an iteration shape.

    ``offset`` counts elements from the start of the tensor's buffer (``tensor.offset``
    included).
    """

    tensor: Tensor
    strides: tuple[int, ...]
    offset: int

    @classmethod
    def over(cls, t: Tensor, shape: Sequence[int]) -> Strided:
        """``t`` broadcast over ``shape``."""
        return cls(t, broadcast_strides(t.shape, shape), t.offset)


_NAMES = "abc"


def _load_macro(k: int, dtype: str) -> str:
    if dtype == "float16":
        return f"#define LD{k}(p, i) ((CT)vload_half((i), (p)))\n"
    return f"#define LD{k}(p, i) ((CT)(p)[(i)])\n"


def _store_macro(dtype: str) -> str:
    if dtype == "float16":
        return "#define STO(p, i, v) vstore_half((v), (i), (p))\n"
    return f"#define STO(p, i, v) ((p)[(i)] = ({c_type(dtype)})(v))\n"


def literal_macro(compute: str) -> str:
    """``#define LIT(x)``: ``x`` as a literal of ``compute``'s CT (``LIT(0.5)``)."""
    # LIT(0.5) is a literal of the compute type: float literals need the f suffix on devices
    # without fp64, double ones must keep every digit.
    if compute == "float64":
        return "#define LIT(x) (x)\n"
    if compute in FLOAT_DTYPES:
        return "#define LIT(x) (x##f)\n"
    return "#define LIT(x) ((CT)(x))\n"


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


def _switch(cases: Sequence[tuple[int, str]], indent: str) -> list[str]:
    lines = [f"{indent}switch (op) {{"]
    lines += [f"{indent}  case {code}: {{ {stmt} }} break;" for code, stmt in cases]
    lines.append(f"{indent}}}")
    return lines


def _scalar_body(sig: _Sig, exprs: Sequence[tuple[int, str]], index: str, out_index: str,
                 indent: str) -> list[str]:
    cases = [(code, f"STO(out, {out_index}, ({expr}));") for code, expr in exprs]
    return _loads(sig, index, indent) + _switch(cases, indent)


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
    lines += _switch(cases, "    ")
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


def kernel_name(ops: tuple[EwOp, ...]) -> str:
    """The name of the kernel serving the bundle ``ops`` (``ew_arith2``, ``ew_cmp2``, ...)."""
    return f"ew_{ops[0].group}{ops[0].arity}"


@functools.cache
def _program_source(sig: _Sig, ops: tuple[EwOp, ...]) -> str:
    """The one kernel of bundle ``ops`` for ``sig``: ``op`` is the index of an op in ``ops``."""
    head = [index_defs(_INT32_LIMIT + 1 if sig.wide else 0)[0], literal_macro(sig.compute),
            _store_macro(sig.out)]
    head += [_load_macro(k, dt) for k, dt in enumerate(sig.operands)]
    if sig.layout == "vec":
        head.append(f"#define W {sig.width}\n")
    exprs = [(code, e) for code, op in enumerate(ops)
             if (e := op.expression(sig.compute)) is not None]
    if sig.layout == "flat":
        body = ["  if (i >= n) return;", *_scalar_body(sig, exprs, "o{k} + i", "oo + i", "  ")]
    elif sig.layout == "vec":
        body = _vec_body(sig, exprs)
    else:
        body = _nd_body(sig, exprs)
    params = ",\n    ".join([*_params(sig), "const int op"])
    return (f"{''.join(head)}\n__kernel void {kernel_name(ops)}(\n    {params})\n{{\n"
            "  const IDX i = get_global_id(0);\n" + "\n".join(body) + "\n}\n")


_kernels: dict[tuple[int, _Sig, tuple[EwOp, ...]], Any] = {}


def _kernel(context: Any, sig: _Sig, bundle: tuple[EwOp, ...]) -> Any:
    key = (id(context), sig, bundle)
    kernel = _kernels.get(key)
    if kernel is None:
        source = _program_source(sig, bundle)
        kernel = _kernels[key] = cl_kernel(context, kernel_name(bundle), source, sig.compute)
    return kernel


# -- running ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """What a launch of one (op, shapes, strides, dtypes, alignment) signature needs."""

    kernel: Any
    zero: Any  # 0 as the compute type's scalar: the unused s<k> of tensor operands
    nd_args: tuple[Any, ...]  # dims then every stride set, as IDX scalars ("nd" only)
    idx: Callable[[int], Any]
    items: int
    nparams: int
    code: Any  # np.int32 index of the op in its bundle


_plans: dict[tuple[Any, ...], _Plan] = {}
_MAX_PLANS = 4096


def run_strided(
    op: EwOp,
    bundle: tuple[EwOp, ...],
    shape: Sequence[int],
    out: Strided,
    operands: Sequence[Strided | Any],
    compute: str,
    params: Sequence[Any] = (),
) -> _Plan | None:
    """Launch ``op`` over ``shape``: ``out`` gets ``op(operands)`` through their strides.

    ``operands`` are :class:`Strided` tensors or NumPy scalars already of the ``CT`` type of
    ``compute`` (see :func:`kernel_scalar`); ``params`` likewise. Nothing runs for an empty
    ``shape`` (None is returned; otherwise the launch's plan).
    """
    n = math.prod(shape)
    if n == 0:
        return None
    queue = out.tensor.queue
    views = [o for o in operands if isinstance(o, Strided)]
    # NOTE [ Elementwise plans ]: everything but buffers, offsets and scalar values depends
    # only on this key, so a repeated call skips collapsing, kernel selection and the hashing
    # of the signature and bundle (most of an op's host time before plans: 120 us per small
    # add on the H100's host, where the kernel takes a few).
    wide = max(n, *(v.offset + v.tensor.size for v in [out, *views])) > _INT32_LIMIT
    epoch = _queue_facts(queue)[1].epoch("elementwise")
    key = (id(queue.context), epoch, op.name, id(bundle), tuple(shape), compute, len(params), wide,
           out.tensor.dtype, out.strides, out.offset % 8,
           *[(o.tensor.dtype, o.strides, o.offset % 8) if isinstance(o, Strided) else type(o)
             for o in operands])
    plan = _plans.get(key)
    if plan is None:
        if len(_plans) >= _MAX_PLANS:  # a long run over ever-new shapes: start over
            _plans.clear()
        plan = _plans[key] = _plan(op, bundle, shape, out, operands, compute, views, n)
    launch_items(queue, plan.kernel, plan.items, *_plan_args(plan, out, operands, params, n))
    return plan


def _plan_args(plan: _Plan, out: Strided, operands: Sequence[Strided | Any],
               params: Sequence[Any], n: int) -> list[Any]:
    """The kernel arguments of one launch of ``plan`` (buffers at 0 and 2 + 4k)."""
    zero = plan.zero
    idx = plan.idx
    args: list[Any] = [device_buffer(out.tensor), idx(out.offset)]
    for o in operands:
        if isinstance(o, Strided):
            args += [device_buffer(o.tensor), idx(o.offset), zero, _ZERO32]
        else:
            args += [None, _IDX0[idx], o, _ONE32]
    args += [*params, *[zero] * (plan.nparams - len(params)), idx(n), *plan.nd_args, plan.code]
    return args


_ZERO32, _ONE32 = np.int32(0), np.int32(1)
_IDX0: dict[Any, Any] = {np.int32: np.int32(0), np.int64: np.int64(0)}


def _plan(op: EwOp, bundle: tuple[EwOp, ...], shape: Sequence[int], out: Strided,
          operands: Sequence[Strided | Any], compute: str, views: Sequence[Strided],
          n: int) -> _Plan:
    queue = out.tensor.queue
    none = (0,) * len(shape)
    dims, strides = _collapse(
        shape, [out.strides] + [o.strides if isinstance(o, Strided) else none for o in operands])
    _, idx = index_defs(n, *(v.offset + v.tensor.size for v in [out, *views]))
    layout, width = "nd", 1
    if len(dims) == 1 and all(st[0] == 1 for st, o in zip(strides, [out, *operands])
                              if isinstance(o, Strided)):
        cfg = get_kernel_selector(queue.device).select_elementwise_kernel(n, out.tensor.dtype)
        if cfg.variant is KernelVariant.ELEMENTWISE_VECTORIZED:
            layout, width = "vec", cfg.vector_width
        else:
            layout = "flat"
    if len(dims) > MAX_DIMS:
        raise ValueError(
            f"{op.name}: {len(shape)}-d iteration shape {tuple(shape)} keeps {len(dims)} dims "
            f"after merging contiguous ones; OpenCL kernels take at most {MAX_DIMS}"
        )
    nparams = max(o.nparams for o in bundle)
    sig = _Sig(
        group=op.group, arity=op.arity, nparams=nparams,
        operands=tuple(o.tensor.dtype if isinstance(o, Strided) else compute for o in operands),
        compute=compute, out=out.tensor.dtype, layout=layout,
        ndim=len(dims) if layout == "nd" else 1, width=width, wide=idx is np.int64,
        aligned=layout == "vec" and all(v.offset % width == 0 for v in [out, *views]),
    )
    nd_args: list[Any] = []
    if layout == "nd":
        nd_args += [idx(d) for d in dims]
        for st in strides:
            nd_args += [idx(v) for v in st]
    return _Plan(
        kernel=_kernel(queue.context, sig, bundle), zero=kernel_scalar(op.name, 0, compute),
        nd_args=tuple(nd_args),
        idx=idx, items=-(-n // width) if layout == "vec" else n, nparams=nparams,
        code=np.int32(bundle.index(op)),
    )


def run_broadcast(
    op: EwOp,
    bundle: tuple[EwOp, ...],
    operands: Sequence[Tensor | Any],
    shape: tuple[int, ...],
    compute: str,
    out_dtype: str,
    params: Sequence[Any] = (),
) -> Tensor:
    """A new ``out_dtype`` tensor of ``shape`` = ``op`` of the operands broadcast to ``shape``.

    Tensor operands must share one OpenCL queue; scalars are NumPy scalars of ``CT``.
    """
    first = next(o for o in operands if isinstance(o, Tensor))
    out = empty(first.queue, shape, out_dtype)
    views = [Strided.over(o, shape) if isinstance(o, Tensor) else o for o in operands]
    target = Strided(out, contiguous_strides(shape), 0)
    plan = run_strided(op, bundle, shape, target, views, compute, params)
    if plan is not None and not params and len(views) == len(operands) and all(
            isinstance(o, Tensor) for o in operands):
        _remember(op, operands, shape, out_dtype, plan,
                  _plan_args(plan, target, views, params, math.prod(shape)))
    return out


# NOTE [ Elementwise fast path ]
# An op on Tensors alone (no scalars, no parameters: add, mul, relu, exp, ...) is keyed on
# what decides everything but its buffers -- op, selector epoch, and each operand's shape,
# dtype, offset and queue -- and a repeated call reuses the checked result shape and dtype, the
# plan and the argument list, filling in only the output's and operands' buffers. The key
# holds each operand's queue, so tensors on different devices never hit an entry (the slow
# path raises for them); an entry is only made after the slow path ran the op successfully.
# It halves a small op's host time, which is what bounds a 16 M-element add on a fast GPU.


@dataclass(frozen=True)
class _Fast:
    plan: _Plan
    shape: tuple[int, ...]
    out_dtype: str
    args: tuple[Any, ...]  # float64 scalars already 0-d arrays; buffers at 0 and 2 + 4k
    grid: tuple[int]
    local: tuple[int]


_fast: dict[tuple[Any, ...], _Fast] = {}


def _fast_key(op: EwOp, operands: Sequence[Tensor]) -> tuple[Any, ...]:
    queue = operands[0].queue
    return (op.name, _queue_facts(queue)[1].epoch("elementwise"),
            *[(t.shape, t.dtype, t.offset, id(t.queue)) for t in operands])


def _remember(op: EwOp, operands: Sequence[Tensor], shape: tuple[int, ...], out_dtype: str,
              plan: _Plan, args: list[Any]) -> None:
    if len(_fast) >= _MAX_PLANS:
        _fast.clear()
    args[0] = None
    for k in range(len(operands)):
        args[2 + 4 * k] = None
    frozen = tuple(np.array(a) if isinstance(a, np.float64) else a for a in args)
    local = _queue_facts(operands[0].queue)[2]
    _fast[_fast_key(op, operands)] = _Fast(plan, shape, out_dtype, frozen,
                                           (-(-plan.items // local) * local,), (local,))


def run_fast(op: EwOp, operands: Sequence[Tensor]) -> Tensor | None:
    """``op`` of OpenCL ``operands`` through a remembered launch, or None if there is none."""
    entry = _fast.get(_fast_key(op, operands))
    if entry is None:
        return None
    queue = operands[0].queue
    out = empty(queue, entry.shape, entry.out_dtype)
    args = list(entry.args)
    args[0] = device_buffer(out)
    for k, t in enumerate(operands):
        args[2 + 4 * k] = device_buffer(t)
    launch_values(queue, entry.plan.kernel, entry.grid, entry.local, args)
    return out
