"""Dispatch of the elementwise table's rows (:mod:`._elementwise_table`) to the NumPy backend
or the OpenCL kernel family (:mod:`._elementwise_base`): what every elementwise op function
(:mod:`._elementwise`, :mod:`._elementwise_binary`) calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, numpy_dtype
from netcl.core.kernel_selector import KernelVariant, default_config
from netcl.core.recording import check_flag, numpy_call
from netcl.core.recording import state as recording_state
from netcl.core.shapes import broadcast_shapes
from netcl.core.tensor import CPU_BACKEND, Tensor

from ._common import check_tensor, same_device
from ._dtype_policy import kernel_scalar, np_compute, op_dtypes, promote, scalar_kind
from ._elementwise_base import Strided, run_broadcast, run_fast, run_strided
from ._elementwise_source import EwOp, _Sig, elementwise_family, kernel_name
from ._elementwise_table import OPS

__all__ = ["apply", "bundle", "cast_compute", "copy_strided", "host", "np_checked", "np_result",
           "np_results", "wrap"]

_BUNDLES: dict[tuple[str, int], tuple[EwOp, ...]] = {}
for _op in OPS.values():
    _BUNDLES[(_op.group, _op.arity)] = (*_BUNDLES.get((_op.group, _op.arity), ()), _op)


def bundle(op: EwOp) -> tuple[EwOp, ...]:
    """The ops served by one kernel with ``op`` (same group and arity)."""
    return _BUNDLES[(op.group, op.arity)]


# -- dispatch ---------------------------------------------------------------------------------


def host(t: Tensor) -> np.ndarray[Any, Any]:
    """The NumPy array of a NumPy-backend tensor, in its shape (no copy)."""
    if t.array is None:
        raise TypeError("host: tensor is not on the NumPy backend")
    return t.array.reshape(t.shape)


def wrap(queue: Any, array: Any, dtype: str) -> Tensor:
    """A NumPy-backend tensor holding ``array`` as ``dtype`` (0-d arrays stay 0-d)."""
    arr = np.asarray(array, dtype=numpy_dtype(dtype))
    if not arr.flags.c_contiguous:
        arr = arr.copy()
    return Tensor(shape=arr.shape, dtype=dtype, queue=queue, array=arr, _backend=CPU_BACKEND)


# NOTE [ NumPy elementwise plans ]
# On the NumPy backend an elementwise op used to cost ~40 us of which NumPy took ~1 us: dtype
# promotion, device and shape checks, np.errstate, may_share_memory and wrap on every call.
# Everything but the scalar values is decided by (op, operand dtypes and shapes, scalar types,
# kinds, number of params), so the first call of a signature makes a _NpPlan and later calls
# only look it up, convert their scalars and make the result Tensor. The NumPy work itself is
# one numpy_call (netcl.core.recording) of _np_run: quiet, and recordable by a NumPy capture,
# whose replay repeats _np_run alone. Checks that depend on values (an int scalar out of range)
# still run per call (kernel_scalar). Operands on several devices, unknown scalar types and
# other errors take the checked path, which raises as before.

@dataclass(frozen=True, eq=False)
class _NpPlan:
    """What one NumPy elementwise signature does: per operand, its compute-dtype cast (or
    ``None``) or scalar conversion; the result's dtype, shape and whether it may alias."""

    op: EwOp
    casts: tuple[Any, ...]  # np dtype to cast a tensor to, or None
    scalar_at: tuple[tuple[int, Callable[[Any], Any]], ...]  # (operand index, converter)
    params: tuple[Callable[[Any], Any], ...]
    out_np: np.dtype[Any]
    out_dtype: str
    shape: tuple[int, ...]
    owned: bool  # the first result had the broadcast shape and aliased no input


_NP_PLANS: dict[tuple[Any, ...], _NpPlan] = {}


def _np_run(plan: _NpPlan, *values: Any) -> np.ndarray[Any, Any]:
    """The NumPy work of one elementwise call: ``values`` are the operands (arrays in their
    shapes, converted scalars) then the params; a new array of the plan's shape and dtype."""
    n = len(plan.casts)
    arrays = [v if c is None else v.astype(c, copy=False)
              for v, c in zip(values[:n], plan.casts)]
    res = np.asarray(plan.op.numpy(*arrays, *values[n:]))
    if res.dtype != plan.out_np:
        res = res.astype(plan.out_np)
    if plan.owned and res.shape == plan.shape:
        return res
    # np.broadcast_to is a read-only view even at the same shape, and in-place users
    # (zero_grad, clipping) need a writable result that aliases no input
    if res.shape == plan.shape and not any(
            isinstance(a, np.ndarray) and np.may_share_memory(res, a) for a in arrays):
        return np.ascontiguousarray(res)
    out: np.ndarray[Any, Any] = np.broadcast_to(res, plan.shape).copy()
    return out


def _dtypes(name: str, op: EwOp, operands: Sequence[Any],
            kinds: Sequence[str] | None) -> tuple[str, str]:
    """(compute, result) dtypes of ``op`` on ``operands``: from the operands' kinds, or from
    ``kinds`` when given (every scalar operand is still checked)."""
    if kinds is None:
        kinds = [o.dtype if isinstance(o, Tensor) else scalar_kind(name, o) for o in operands]
    else:
        for o in operands:
            if not isinstance(o, Tensor):
                scalar_kind(name, o)
    return op_dtypes(op, kinds)


def _np_plan(name: str, op: EwOp, operands: Sequence[Any], params: Sequence[Any],
             kinds: Sequence[str] | None) -> _NpPlan:
    """Check a NumPy signature as the general path does and make its plan."""
    tensors = [o for o in operands if isinstance(o, Tensor)]
    compute, out_dtype = _dtypes(name, op, operands, kinds)
    same_device(name, *tensors)
    shape = tuple(broadcast_shapes(name, *(t.shape for t in tensors)))
    ct = np_compute(compute)

    def convert(value: Any) -> Any:
        return kernel_scalar(name, value, compute)

    casts = tuple(None if not isinstance(o, Tensor) or numpy_dtype(o.dtype) == ct else ct
                  for o in operands)
    scalar_at = tuple((i, convert) for i, o in enumerate(operands) if not isinstance(o, Tensor))
    values = [host(o) if isinstance(o, Tensor) else convert(o) for o in operands]
    values += [convert(p) for p in params]
    with np.errstate(all="ignore"):
        arrays = [v if c is None else v.astype(c, copy=False) for v, c in zip(values, casts)]
        res = np.asarray(op.numpy(*arrays, *values[len(operands):]))
    owned = res.shape == shape and not any(
        isinstance(a, np.ndarray) and np.may_share_memory(res, a) for a in arrays)
    return _NpPlan(op, casts, scalar_at, tuple(convert for _ in params), numpy_dtype(out_dtype),
                   out_dtype, shape, owned)


def _np_apply(name: str, operands: Sequence[Any], params: Sequence[Any],
              kinds: Sequence[str] | None) -> Tensor | None:
    """The NumPy path through a cached plan (NOTE [ NumPy elementwise plans ]); ``None`` when
    an operand is an OpenCL tensor (the checked path names the mix)."""
    key: list[Any] = [name, len(params), kinds if kinds is None else tuple(kinds)]
    values: list[Any] = []
    queue = None
    for o in operands:
        if isinstance(o, Tensor):
            arr = o.array
            if arr is None:
                return None
            shape = o.shape
            key += (o.dtype, shape)
            values.append(arr if arr.shape == shape else arr.reshape(shape))
            queue = o.queue
        else:
            key.append(type(o))
            values.append(o)
    plan = _NP_PLANS.get(tuple(key))
    if plan is None:
        plan = _np_plan(name, OPS[name], operands, params, kinds)
        if len(_NP_PLANS) >= 4096:
            _NP_PLANS.clear()
        _NP_PLANS[tuple(key)] = plan
    for i, convert in plan.scalar_at:
        values[i] = convert(values[i])
    for convert, p in zip(plan.params, params):
        values.append(convert(p))
    res = numpy_call(_np_run, plan, *values)
    return Tensor(shape=plan.shape, dtype=plan.out_dtype, queue=queue, array=res,
                  _backend=CPU_BACKEND)


_NP_DTYPES: dict[str, np.dtype[Any]] = {}  # netcl dtype name -> NumPy dtype, for np_result


def _call_as(fn: Callable[..., Any], dtype: np.dtype[Any], *args: Any) -> Any:
    out = np.asarray(fn(*args))
    if out.dtype != dtype:
        out = out.astype(dtype)
    return out if out.flags.c_contiguous else np.ascontiguousarray(out)


def np_result(like: Tensor, dtype: str, fn: Callable[..., Any], *args: Any) -> Tensor:
    """A NumPy-backend tensor on ``like``'s queue holding ``fn(*args)`` as ``dtype`` (C order):
    the NumPy work of an op in one :func:`netcl.core.recording.numpy_call` (quiet, and
    recordable by a NumPy capture). ``fn`` must compute from its arguments only.

    Examples:
        >>> from netcl.core import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 4.0]))
        >>> np_result(x, "float32", np.sqrt, host(x)).to_host().tolist()
        [1.0, 2.0]
    """
    np_dtype = _NP_DTYPES.get(dtype)
    if np_dtype is None:
        np_dtype = _NP_DTYPES[dtype] = numpy_dtype(dtype)
    arr = numpy_call(_call_as, fn, np_dtype, *args)
    return Tensor(shape=arr.shape, dtype=dtype, queue=like.queue, array=arr,
                  _backend=CPU_BACKEND)


def _call_as_many(fn: Callable[..., Any], dtypes: tuple[np.dtype[Any], ...], *args: Any
                  ) -> tuple[Any, ...]:
    results = fn(*args)
    return tuple(_call_as(np.asarray, dt, r) for r, dt in zip(results, dtypes))


def np_results(like: Tensor, dtypes: Sequence[str], fn: Callable[..., Any],
               *args: Any) -> tuple[Tensor, ...]:
    """:func:`np_result` for an ``fn`` that returns a tuple: one tensor per entry of
    ``dtypes``, holding the result at that index as that dtype.

    Examples:
        >>> from netcl.core import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 4.0]))
        >>> lo, hi = np_results(x, ("float32", "int32"), np.divmod, host(x), 3.0)
        >>> lo.to_host().tolist(), hi.to_host().tolist()
        ([0.0, 1.0], [1, 1])
    """
    arrays = numpy_call(_call_as_many, fn, tuple(numpy_dtype(d) for d in dtypes), *args)
    return tuple(Tensor(shape=a.shape, dtype=d, queue=like.queue, array=a, _backend=CPU_BACKEND)
                 for a, d in zip(arrays, dtypes))


def _flag_np(check: Callable[..., None], *args: Any) -> np.ndarray[Any, Any]:
    try:
        check(*args)
    except (ValueError, IndexError):
        return np.ones(1, np.int32)
    return np.zeros(1, np.int32)


def np_checked(like: Tensor, check: Callable[..., None], *args: Any) -> None:
    """Run a check of NumPy values, ``check(*args)`` (it raises on bad values). Under a
    recorder it becomes a flag the recorder reads after each replay, when ``check`` raises
    again (a NumPy capture repeats it for every call's data, not only the traced one's).

    Examples:
        >>> from netcl.core import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, -1.0]))
        >>> def positive(a):
        ...     if (a < 0).any():
        ...         raise ValueError("negative")
        >>> np_checked(x, positive, host(x))
        Traceback (most recent call last):
        ...
        ValueError: negative
    """
    if getattr(recording_state.recorder, "numpy_check", None) is None:
        check(*args)  # eagerly (or under a recorder that does not record NumPy work)
        return
    flag = numpy_call(_flag_np, check, *args)
    check_flag(Tensor(shape=(1,), dtype="int32", queue=like.queue, array=flag,
                      _backend=CPU_BACKEND), lambda: check(*args))


def apply(name: str, operands: Sequence[Any], params: Sequence[Any] = (),
          kinds: Sequence[str] | None = None) -> Tensor:
    """Run table op ``name`` on Tensors and Python numbers, broadcasting them.

    ``kinds`` overrides the dtypes that decide the result (``where`` leaves its condition out).
    """
    op = OPS[name]
    if not params and kinds is None:  # OpenCL Tensors and numbers, remembered
        fast = run_fast(op, operands)  # NOTE [ Elementwise fast path ]
        if fast is not None:
            return fast
    for o in operands:
        if isinstance(o, Tensor):
            if o.array is not None:
                planned = _np_apply(name, operands, params, kinds)
                if planned is not None:
                    return planned
            break
    tensors = [check_tensor(name, o, "operand") for o in operands if isinstance(o, Tensor)]
    kinds_given = kinds is not None
    compute, out_dtype = _dtypes(name, op, operands, kinds)
    queue = same_device(name, *tensors)
    shape = broadcast_shapes(name, *(t.shape for t in tensors))
    values = [o if isinstance(o, Tensor) else kernel_scalar(name, o, compute) for o in operands]
    qs = [kernel_scalar(name, p, compute) for p in params]
    if tensors[0].array is not None:
        ct = np_compute(compute)
        arrays = [host(v).astype(ct, copy=False) if isinstance(v, Tensor) else v for v in values]
        with np.errstate(all="ignore"):
            res = np.asarray(op.numpy(*arrays, *qs))
        # np.broadcast_to is a read-only view even at the same shape, and in-place users
        # (zero_grad, clipping) need a writable result that aliases no input
        own = res.shape == tuple(shape) and not any(
            isinstance(a, np.ndarray) and np.may_share_memory(res, a) for a in arrays)
        return wrap(queue, res if own else np.broadcast_to(res, shape).copy(), out_dtype)
    return run_broadcast(op, bundle(op), values, shape, compute, out_dtype, qs,
                         None if kinds_given else operands)


def cast_compute(src: str, dst: str) -> str:
    """The compute dtype of a ``src`` -> ``dst`` conversion: the widest float, else widest int."""
    return promote("cast", [src, dst])


def copy_strided(shape: Sequence[int], out: Strided, src: Strided) -> None:
    """OpenCL: ``out[...] = src[...]`` over ``shape`` through both views' strides (with cast)."""
    op = OPS["copy"]
    compute = cast_compute(src.tensor.dtype, out.tensor.dtype)
    run_strided(op, bundle(op), shape, out, [src], compute)


# -- golden sources -----------------------------------------------------------------------------


def _golden_case(op: str, operands: tuple[str, ...], compute: str, out: str, layout: str,
                 ndim: int = 1, width: int = 1, wide: bool = False,
                 aligned: bool = True, fixed: bool = False
                 ) -> tuple[str, tuple[_Sig, tuple[EwOp, ...]]]:
    """The bundle of ``op`` for one signature, as ``run_strided`` builds it; ``aligned``
    (``vec`` only): every offset a multiple of ``width`` (vector pointers), as for whole
    tensors, else ``vloadN``/``vstoreN``; ``fixed``: the kernel of ``op`` alone that CPU
    devices build (NOTE [ Elementwise kernels on CPU devices ] in ``_elementwise_base``)."""
    ops = bundle(OPS[op])
    vec = layout == "vec"
    sig = _Sig(group=ops[0].group, arity=ops[0].arity, nparams=max(o.nparams for o in ops),
               operands=operands, compute=compute, out=out, layout=layout,
               ndim=ndim if layout == "nd" else 1, width=width, wide=wide,
               aligned=vec and aligned, fixed=ops.index(OPS[op]) if fixed else -1)
    tag = {"flat": "flat", "vec": f"vec{width}", "nd": f"nd{ndim}"}[layout]
    tag += "-unaligned" if vec and not aligned else ""
    tag += "-idx64" if wide else ""
    cast = ops[0].group == "copy" and operands[0] != out
    dtypes = f"{operands[0]}-to-{out}" if cast else operands[-1]
    return f"elementwise/{kernel_name(ops, sig.fixed)[3:]}-{dtypes}-{tag}", (sig, ops)


def _elementwise_golden() -> list[tuple[str, tuple[_Sig, tuple[EwOp, ...]]]]:
    """The binary, unary, comparison, ``where`` and copy/cast bundles in the flat, vec (aligned
    and not) and nd layouts, one with 64-bit indices; per-op kernels of CPU devices."""
    c = _golden_case
    vec = default_config(KernelVariant.ELEMENTWISE_VECTORIZED).vector_width
    cases = []
    for dt in (*FLOAT_DTYPES, "int32"):  # binary arithmetic: every layout
        cases += [c("add", (dt, dt), dt, dt, "flat"), c("add", (dt, dt), dt, dt, "vec", width=vec),
                  c("add", (dt, dt), dt, dt, "nd", ndim=3)]
    for dt in ("float32", "float16"):  # a view at an odd offset
        cases.append(c("add", (dt, dt), dt, dt, "vec", width=vec, aligned=False))
    f32 = "float32"
    cases.append(c("add", (f32, f32), f32, f32, "flat", wide=True))
    cases += [c("exp", (dt,), dt, dt, "flat") for dt in (*FLOAT_DTYPES, "int32")]
    cases += [c("exp", (f32,), f32, f32, "vec", width=vec),
              c("exp", (f32,), f32, f32, "nd", ndim=2)]
    cases += [c("lt", (dt, dt), dt, "uint8", "flat") for dt in (f32, "int32")]
    cases.append(c("lt", (f32, f32), f32, "uint8", "vec", width=vec))
    cases += [c("where", ("uint8", dt, dt), dt, dt, "nd", ndim=2) for dt in (f32, "float16")]
    cases.append(c("where", ("uint8", f32, f32), f32, f32, "flat"))
    # copy: movement (strided) and casts (compute = the wider of the two)
    cases += [c("copy", (f32,), f32, f32, "nd", ndim=3),
              c("copy", ("float16",), f32, f32, "vec", width=vec),
              c("copy", ("float64",), "float64", "float16", "vec", width=vec),
              c("copy", (f32,), f32, "int32", "flat"),
              c("copy", ("int32",), "float64", "float64", "flat")]
    # CPU devices: the op compiled in ("flat" on Intel's runtime, "vec" on PoCL)
    cases += [c("exp", (f32,), f32, f32, "flat", fixed=True),
              c("exp", (f32,), f32, f32, "vec", width=vec, fixed=True),
              c("add", (f32, f32), f32, f32, "flat", fixed=True),
              c("add", (f32, f32), f32, f32, "vec", width=vec, fixed=True),
              c("add", (f32, f32), f32, f32, "nd", ndim=3, fixed=True),
              c("lt", (f32, f32), f32, "uint8", "flat", fixed=True)]
    return cases


elementwise_family.register_golden(_elementwise_golden)
