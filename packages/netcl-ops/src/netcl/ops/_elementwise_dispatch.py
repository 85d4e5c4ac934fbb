"""Dispatch of the elementwise table's rows (:mod:`._elementwise_table`) to the NumPy backend
or the OpenCL kernel family (:mod:`._elementwise_base`): what every elementwise op function
(:mod:`._elementwise`, :mod:`._elementwise_binary`) calls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, numpy_dtype
from netcl.core.kernel_selector import KernelVariant, default_config
from netcl.core.shapes import broadcast_shapes
from netcl.core.tensor import CPU_BACKEND, Tensor

from ._common import check_tensor, same_device
from ._dtype_policy import kernel_scalar, np_compute, op_dtypes, promote, scalar_kind
from ._elementwise_base import Strided, run_broadcast, run_fast, run_strided
from ._elementwise_source import EwOp, _Sig, elementwise_family, kernel_name
from ._elementwise_table import OPS

__all__ = ["apply", "bundle", "cast_compute", "copy_strided", "host", "wrap"]

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


def apply(name: str, operands: Sequence[Any], params: Sequence[Any] = (),
          kinds: Sequence[str] | None = None) -> Tensor:
    """Run table op ``name`` on Tensors and Python numbers, broadcasting them.

    ``kinds`` overrides the dtypes that decide the result (``where`` leaves its condition out).
    """
    op = OPS[name]
    if not params and kinds is None and all(
            isinstance(o, Tensor) and o.array is None for o in operands):
        fast = run_fast(op, operands)  # NOTE [ Elementwise fast path ]
        if fast is not None:
            return fast
    tensors = [check_tensor(name, o, "operand") for o in operands if isinstance(o, Tensor)]
    if kinds is None:
        kinds = [o.dtype if isinstance(o, Tensor) else scalar_kind(name, o) for o in operands]
    else:
        for o in operands:
            if not isinstance(o, Tensor):
                scalar_kind(name, o)
    compute, out_dtype = op_dtypes(op, kinds)
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
    return run_broadcast(op, bundle(op), values, shape, compute, out_dtype, qs)


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
                 aligned: bool = True) -> tuple[str, tuple[_Sig, tuple[EwOp, ...]]]:
    """The bundle of ``op`` for one signature, as ``run_strided`` builds it; ``aligned``
    (``vec`` only): every offset a multiple of ``width`` (vector pointers), as for whole
    tensors, else ``vloadN``/``vstoreN``."""
    ops = bundle(OPS[op])
    vec = layout == "vec"
    sig = _Sig(group=ops[0].group, arity=ops[0].arity, nparams=max(o.nparams for o in ops),
               operands=operands, compute=compute, out=out, layout=layout,
               ndim=ndim if layout == "nd" else 1, width=width, wide=wide,
               aligned=vec and aligned)
    tag = {"flat": "flat", "vec": f"vec{width}", "nd": f"nd{ndim}"}[layout]
    tag += "-unaligned" if vec and not aligned else ""
    tag += "-idx64" if wide else ""
    cast = ops[0].group == "copy" and operands[0] != out
    dtypes = f"{operands[0]}-to-{out}" if cast else operands[-1]
    return f"elementwise/{kernel_name(ops)[3:]}-{dtypes}-{tag}", (sig, ops)


def _elementwise_golden() -> list[tuple[str, tuple[_Sig, tuple[EwOp, ...]]]]:
    """The binary, unary, comparison, ``where`` and copy/cast bundles in the flat, vec (aligned
    and not) and nd layouts, one with 64-bit indices."""
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
    return cases


elementwise_family.register_golden(_elementwise_golden)
