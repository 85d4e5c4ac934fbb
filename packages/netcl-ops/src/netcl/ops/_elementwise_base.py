"""Machinery under every elementwise op: strided operands, launch plans, the fast path.

An elementwise op is a row of :data:`netcl.ops.ELEMENTWISE` (an :class:`EwOp`: its C
expression, its NumPy function and its dtype rule). :mod:`._elementwise_source` turns a bundle
of rows into kernel source (see NOTE [ Elementwise kernel family ] there); this module plans and
launches them, and knows no op by name. Dtype rules are in :mod:`._dtype_policy`, launch
helpers in :mod:`._launch`, shapes in :mod:`netcl.core.shapes`.

Every launch uses one fixed local size per device (NOTE [ The 1-D launch rule ] in
:mod:`netcl.core.kernels.family`): PoCL compiles a work-group function per (kernel, local
size), so a size-dependent local size would recompile for every new shape.

# NOTE [ Elementwise kernels on CPU devices ]
# The bundle kernel (NOTE [ Elementwise kernel family ]) switches on its ``op`` argument once
# per work item. GPUs do not notice; OpenCL CPU compilers do. Intel's CPU runtime vectorizes
# across work items and cannot through a runtime switch: 1M float32 elements took 17-20 ms per
# unary op and 9-10 ms per add/mul (NumPy: 0.15-2.8 ms). So OpenCL CPU devices run a kernel
# per op instead (``_Sig.fixed``: the op's expression compiled in, the same arguments, built
# once per context and signature like any other), and the selector's rule gives devices
# that prefer scalar floats (``preferred_vector_width_float == 1``: Intel's runtime) the
# "flat" layout, one element per work item: their vectorizer makes lanes of work items, so
# the "vec" layout's W elements per work item become strided gathers (per-op relu 0.5 ms
# "vec" vs 0.2 ms "flat", exp 4.5 vs 0.6 ms; a vec_type_hint(float4) on "vec" stops the
# gathers but runs exp and sqrt a lane at a time: 2.3 and 1.4 ms). On Intel 1M float32 relu,
# exp, neg, sqrt, add and mul now take 0.2-0.6 ms. PoCL (preferred width 8) keeps "vec" ("flat"
# ran 2-6x slower there); the per-op kernel took its relu, neg, add and mul from 0.4-1.4 ms
# to 0.26-0.9 ms (1.5-1.9x; exp and sqrt, bound by PoCL's scalar libm, unchanged). Figures:
# ``benchmarks/bench_ops_elementwise.py --ops relu,exp,neg,sqrt,add,mul`` (the former bundle,
# the bundle in today's layout, the per-op kernel, NumPy, in one run). The cost is a program
# build per op used where the bundle built one per group: cold (empty caches) ~0.4-0.5 s
# per op and signature on PoCL, ~0.08 s on Intel's runtime (relu, exp, neg, sqrt, add, mul:
# PoCL 1.8 -> 3.4 s, Intel 0.25 -> 0.49 s), then netcl's disk cache. GPUs keep the bundle.
# :func:`kernel_form` chooses, ``NETCL_ELEMENTWISE_FORM=bundle|op`` overrides it for every
# device (a first step that must compile little on PoCL), :func:`forced_form` forces one
# (tests, benchmarks).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.capabilities import device_type_name
from netcl.core.env import env_choice
from netcl.core.kernel_selector import KernelVariant, get_kernel_selector
from netcl.core.kernels.cache import ContextCache
from netcl.core.kernels.primitives import launch_values
from netcl.core.shapes import (
    broadcast_strides,
    check_merged_dims,
    collapse,
    contiguous_strides,
)
from netcl.core.tensor import Tensor, output_tensor

from ._common import empty
from ._dtype_policy import (
    kernel_scalar,
)
from ._elementwise_source import EwOp, _Sig, elementwise_family
from ._launch import (
    INT32_LIMIT,
    device_buffer,
    index_defs,
    launch_items,
    queue_facts,
)

__all__ = ["FORMS", "Strided", "forced_form", "kernel_form", "run_broadcast", "run_fast",
           "run_strided"]

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


# (sig, bundle) -> cl.Kernel per context: one lookup on a plan miss (the family builds it)
_kernels = ContextCache("elementwise kernels")


def _kernel(context: Any, sig: _Sig, bundle: tuple[EwOp, ...]) -> Any:
    table = _kernels.of(context)
    kernel = table.get((sig, bundle))
    if kernel is None:
        kernel = table[(sig, bundle)] = elementwise_family(context, sig, bundle).kernel
    return kernel


# -- kernel forms (NOTE [ Elementwise kernels on CPU devices ]) ----------------------------

FORMS = ("bundle", "op")
"""The kernel forms: the bundle switching on its ``op`` argument (GPUs, accelerators), a
kernel per op (OpenCL CPU devices)."""

_forms: dict[Any, str] = {}
_forced: str | None = None


def _form_of(device: Any) -> str:
    return "op" if device_type_name(int(device.type)) == "cpu" else "bundle"


def kernel_form(device: Any) -> str:
    """The elementwise kernel form for ``device``: one of :data:`FORMS` (NOTE [ Elementwise
    kernels on CPU devices ]); the one :func:`forced_form` forces, else the one
    ``NETCL_ELEMENTWISE_FORM`` names. Read when a launch is planned: plans made before a
    change of the variable keep their kernels.

    Raises:
        ValueError: ``NETCL_ELEMENTWISE_FORM`` names no form.

    Examples:
        >>> from types import SimpleNamespace as NS
        >>> kernel_form(NS(type=4)), kernel_form(NS(type=2))  # a GPU, a CPU
        ('bundle', 'op')
    """
    if _forced is not None:
        return _forced
    chosen = env_choice("NETCL_ELEMENTWISE_FORM", FORMS)
    if chosen is not None:
        return chosen
    try:
        return _forms[device]
    except KeyError:
        form = _forms[device] = _form_of(device)
        return form
    except TypeError:  # an unhashable stand-in
        return _form_of(device)


@contextlib.contextmanager
def forced_form(form: str) -> Iterator[None]:
    """Run every elementwise op in kernel ``form`` on every OpenCL device inside the block
    (tests and benchmarks compare the forms); plans and fast-path entries made before or
    inside it are forgotten on entry and exit.

    Raises:
        ValueError: ``form`` is not one of :data:`FORMS`.

    Examples:
        >>> from types import SimpleNamespace as NS
        >>> with forced_form("bundle"):
        ...     kernel_form(NS(type=2))
        'bundle'
    """
    global _forced
    if form not in FORMS:
        raise ValueError(f"forced_form: form must be one of {FORMS}, got {form!r}")
    previous = _forced
    _forget_plans()
    _forced = form
    try:
        yield
    finally:
        _forced = previous
        _forget_plans()


def _forget_plans() -> None:
    _plans.clear()
    _fast.clear()
    _broadcast.clear()


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


_plans = ContextCache("elementwise plans")
_MAX_PLANS = 4096  # per context


def run_strided(
    op: EwOp,
    bundle: tuple[EwOp, ...],
    shape: Sequence[int],
    out: Strided,
    operands: Sequence[Strided | Any],
    compute: str,
    params: Sequence[Any] = (),
    launched: list[Any] | None = None,
) -> _Plan | None:
    """Launch ``op`` over ``shape``: ``out`` gets ``op(operands)`` through their strides.

    ``operands`` are :class:`Strided` tensors or NumPy scalars already of the ``CT`` type of
    ``compute`` (see :func:`kernel_scalar`); ``params`` likewise. Nothing runs for an empty
    ``shape`` (None is returned; otherwise the launch's plan). ``launched`` gets the launch
    made, as ``(kernel, grid, local, arguments in kernel form)`` (buffers at 0 and 2 + 4k),
    for callers that remember it (NOTE [ Remembered launches ] in :mod:`._launch`).
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
    wide = max(n, *(v.offset + v.tensor.size for v in [out, *views])) > INT32_LIMIT
    epoch = queue_facts(queue)[1].epoch("elementwise")
    key = (epoch, op.name, id(bundle), tuple(shape), compute, len(params), wide,
           out.tensor.dtype, out.strides, out.offset % 8,
           *[(o.tensor.dtype, o.strides, o.offset % 8) if isinstance(o, Strided) else type(o)
             for o in operands])
    plans = _plans.of(queue.context)
    plan = plans.get(key)
    if plan is None:
        if len(plans) >= _MAX_PLANS:  # a long run over ever-new shapes: start over
            plans.clear()
        plan = plans[key] = _plan(op, bundle, shape, out, operands, compute, views, n)
    args = _plan_args(plan, out, operands, params, n)
    launch_items(queue, plan.kernel, plan.items, *args)
    if launched is not None and not any(type(a) in (int, float, bool) for a in args):
        local = queue_facts(queue)[2]  # what launch_items launched with, in kernel form
        launched.append((plan.kernel, (-(-plan.items // local) * local,), (local,),
                         [_value(a) for a in args]))
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
    dims, strides = collapse(
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
    check_merged_dims(op.name, shape, dims)
    nparams = max(o.nparams for o in bundle)
    sig = _Sig(
        group=op.group, arity=op.arity, nparams=nparams,
        operands=tuple(o.tensor.dtype if isinstance(o, Strided) else compute for o in operands),
        compute=compute, out=out.tensor.dtype, layout=layout,
        ndim=len(dims) if layout == "nd" else 1, width=width, wide=idx is np.int64,
        aligned=layout == "vec" and all(v.offset % width == 0 for v in [out, *views]),
        fixed=bundle.index(op) if len(bundle) > 1 and kernel_form(queue.device) == "op" else -1,
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
    given: Sequence[Tensor | Any] | None = None,
) -> Tensor:
    """A new ``out_dtype`` tensor of ``shape`` = ``op`` of the operands broadcast to ``shape``.

    Tensor operands must share one OpenCL queue; scalars are NumPy scalars of ``CT``.
    ``given`` are the operands as the caller got them (Python numbers where ``operands`` has
    their ``CT`` scalars), for :func:`run_fast` to find this launch by; without it only an op on
    Tensors alone is remembered there.
    """
    first = next(o for o in operands if isinstance(o, Tensor))
    key = (op.name, queue_facts(first.queue)[1].epoch("elementwise"), compute, out_dtype,
           len(params), *[(o.shape, o.dtype, o.offset, o.queue) if isinstance(o, Tensor) else None
                          for o in operands])
    entry = _broadcast.get(key)
    if entry is not None:
        if not params and given is not None:  # its fast entry was dropped (table full)
            _remember(op, given, entry)
        return _run_entry(entry, first.queue, operands, params)
    out = empty(first.queue, shape, out_dtype)
    views = [Strided.over(o, shape) if isinstance(o, Tensor) else o for o in operands]
    target = Strided(out, contiguous_strides(shape), 0)
    plan = run_strided(op, bundle, shape, target, views, compute, params)
    if plan is not None:
        args = _plan_args(plan, target, views, params, math.prod(shape))
        entry = _entry(plan, first.queue, operands, shape, out_dtype, args, len(params), compute)
        if len(_broadcast) >= _MAX_PLANS:
            _broadcast.clear()
        _broadcast[key] = entry
        if not params and given is not None:
            _remember(op, given, entry)
        elif not params and all(isinstance(o, Tensor) for o in operands):
            _remember(op, operands, entry)
    return out


# NOTE [ Elementwise fast path ]
# A repeated call is keyed on what decides everything but its buffers and scalar values --
# op, selector epoch, compute and result dtypes, each tensor operand's shape, dtype, offset and
# queue, where the scalars are -- and reuses the checked result shape and dtype, the plan and
# the argument list, filling in only the output's and operands' buffers and the scalars. The
# key holds each operand's queue, so tensors on different devices never hit an entry (the slow
# path raises for them); an entry is only made after the slow path ran the op successfully.
# An op on Tensors and Python numbers (add, relu, ``x * 2.0``, ...) has its own table, which
# ``apply`` reads before any of its checks (run_fast): a number is keyed by its type, which is
# all its dtype kind depends on (netcl.ops._dtype_policy.scalar_kind), and converted with the
# same range-checked kernel_scalar as the slow path, on every call (``x * 2.0`` cost 1.8x an
# add before, all of it apply's checks). One with parameters is found in run_broadcast, after
# apply's dtype and broadcast checks. It halves a small op's host time,
# which is what bounds a 16 M-element add on a fast GPU. The keys hold the queue objects
# themselves (not their ids, which a later queue could reuse); the tables are bounded by
# _MAX_PLANS and cleared when full.


@dataclass(frozen=True)
class _Fast:
    plan: _Plan
    shape: tuple[int, ...]
    out_dtype: str
    args: tuple[Any, ...]  # float64 scalars already 0-d arrays; slots below left None
    grid: tuple[int]
    local: tuple[int]
    buffers: tuple[tuple[int, int], ...]  # (argument, operand) of each tensor operand
    scalars: tuple[tuple[int, int], ...]  # (argument, operand) of each scalar operand
    params_at: int  # the argument of the first parameter
    compute: str  # the dtype scalar operands are converted to (kernel_scalar)


_fast: dict[tuple[Any, ...], _Fast] = {}
_broadcast: dict[tuple[Any, ...], _Fast] = {}


def _entry(plan: _Plan, queue: Any, operands: Sequence[Tensor | Any], shape: tuple[int, ...],
           out_dtype: str, args: list[Any], nparams: int, compute: str) -> _Fast:
    """The fast-path entry of a launch of ``plan`` with ``args`` (buffers at 0 and 2 + 4k,
    a scalar operand k at 4 + 4k, parameters after the operands)."""
    buffers = tuple((2 + 4 * k, k) for k, o in enumerate(operands) if isinstance(o, Tensor))
    scalars = tuple((4 + 4 * k, k) for k, o in enumerate(operands) if not isinstance(o, Tensor))
    params_at = 2 + 4 * len(operands)
    for i in (0, *(i for i, _ in buffers + scalars), *range(params_at, params_at + nparams)):
        args[i] = None
    frozen = tuple(np.array(a) if isinstance(a, np.float64) else a for a in args)
    local = queue_facts(queue)[2]
    return _Fast(plan, shape, out_dtype, frozen, (-(-plan.items // local) * local,), (local,),
                 buffers, scalars, params_at, compute)


def _fast_key(op: EwOp, operands: Sequence[Tensor | Any]) -> tuple[Any, ...]:
    """The fast-path key of ``op`` on OpenCL ``operands`` (what tests look entries up by).

    Raises:
        ValueError: no OpenCL tensor among them, or a NumPy-backend one.
    """
    key = _key_of(op, operands)
    if key is None:
        raise ValueError(f"_fast_key: {op.name} has no fast-path key for these operands")
    return key


def _key_of(op: EwOp, operands: Sequence[Tensor | Any]) -> tuple[Any, ...] | None:
    """The fast-path key of ``op`` on ``operands`` (NOTE [ Elementwise fast path ]); ``None``
    when one of them is a NumPy-backend Tensor, or none is a Tensor."""
    first = operands[0]
    if isinstance(first, Tensor):
        if first.array is not None:
            return None
        epoch = queue_facts(first.queue)[1].epoch("elementwise")
        head = (first.shape, first.dtype, first.offset, first.queue)
        if len(operands) == 1:
            return (op.name, epoch, head)
        second = operands[1]
        if len(operands) == 2 and not isinstance(second, Tensor):
            return (op.name, epoch, head, type(second))
    key: list[Any] = [op.name, None]
    for o in operands:
        if isinstance(o, Tensor):
            if o.array is not None:
                return None
            if key[1] is None:
                key[1] = queue_facts(o.queue)[1].epoch("elementwise")
            key.append((o.shape, o.dtype, o.offset, o.queue))
        else:
            key.append(type(o))
    return None if key[1] is None else tuple(key)


def _remember(op: EwOp, operands: Sequence[Tensor | Any], entry: _Fast) -> None:
    key = _key_of(op, operands)
    if key is None:
        return
    if len(_fast) >= _MAX_PLANS:
        _fast.clear()
    _fast[key] = entry


def _value(v: Any) -> Any:
    """A scalar in kernel form: float64 as a 0-d array (PyOpenCL passes its 8 bytes)."""
    return np.array(v) if type(v) is np.float64 else v


def _run_entry(entry: _Fast, queue: Any, operands: Sequence[Tensor | Any],
               params: Sequence[Any]) -> Tensor:
    out = output_tensor(queue, entry.shape, entry.out_dtype)
    args = list(entry.args)
    args[0] = device_buffer(out)
    for i, k in entry.buffers:
        args[i] = device_buffer(operands[k])
    for i, k in entry.scalars:
        args[i] = _value(operands[k])
    for j, p in enumerate(params, entry.params_at):
        args[j] = _value(p)
    launch_values(queue, entry.plan.kernel, entry.grid, entry.local, args)
    return out


def run_fast(op: EwOp, operands: Sequence[Tensor | Any]) -> Tensor | None:
    """``op`` of OpenCL Tensors and Python numbers through a remembered launch, or None if
    there is none (NOTE [ Elementwise fast path ])."""
    key = _key_of(op, operands)
    entry = _fast.get(key) if key is not None else None
    if entry is None:
        return None
    queue = operands[entry.buffers[0][1]].queue
    out = output_tensor(queue, entry.shape, entry.out_dtype)
    args = list(entry.args)
    args[0] = device_buffer(out)
    for i, k in entry.buffers:
        args[i] = device_buffer(operands[k])
    for i, k in entry.scalars:  # range-checked on every call, as on the slow path
        number: Any = operands[k]  # a number: the key holds its type
        args[i] = _value(kernel_scalar(op.name, number, entry.compute))
    launch_values(queue, entry.plan.kernel, entry.grid, entry.local, args)
    return out
