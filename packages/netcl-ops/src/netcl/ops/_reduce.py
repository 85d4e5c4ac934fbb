"""Reductions: sum (``reduce_sum``), mean, max, min, argmax, var over any axes.

# NOTE [ Reduction plan ]
# A reduction views its input as (outer, R, inner): the reduced axes are R, the axes before
# them outer, after them inner. Size-1 axes are dropped first; reduced axes that are still not
# adjacent are moved last by one permuting copy (inner = 1). Kernels (chosen by
# ``select_reduction_kernel(R, kind)``):
# - REDUCTION_SEQUENTIAL: one work item per output loops over R (coalesced across inner);
# - REDUCTION_PARALLEL: one work-group per (outer index, tile of inner), local size (LJ, LR)
#   with LJ = 1 for inner == 1, 32 for inner >= 32 (a warp reads 128 contiguous bytes of a
#   row), else 16; LR lanes stride over R, then a local-memory tree reduction;
# - REDUCTION_WORKGROUP: the same kernel with R split into G chunks (G work-groups per
#   output), writing (outer, G, inner) partials in the accumulator dtype (plus indices for
#   argmax), reduced again by the selector's choice for G: multi-stage for large R.
#   Columns (inner > 1) split R in both work-group variants, into enough chunks that all
#   the work-groups together fill the device (8 per compute unit); except for argmax, the
#   chunks' partials go to a per-queue scratch buffer and the last group of each (outer
#   index, column tile) merges them in order (one launch: NOTE [ Last group merges ] in
#   ._split_sync).
# Rows (inner == 1; sum, mean, max, min, var; NOTE [ Row reductions ]) take ``red_vec`` in the
# two work-group variants instead of ``red_grp``.
# Accumulators: float32 for float16/float32, float64 for float64, int64 for integer sums.
# mean scales the last stage by 1/R; var is two passes (mean, then the sum of squared
# deviations from it, scaled by 1/(R - correction)) for stability.
"""

from __future__ import annotations

import builtins
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, numpy_dtype
from netcl.core.kernel_selector import KernelVariant, get_kernel_selector
from netcl.core.kernels.primitives import launch_values
from netcl.core.keywords import resolve_dim, resolve_keepdim
from netcl.core.tensor import Tensor, output_tensor, reshape

from ._common import check_tensor, empty, normalize_axes, normalize_axis
from ._dtype_policy import np_compute, require_float
from ._elementwise_dispatch import host, np_result, wrap
from ._launch import (
    device_buffer,
    index_defs,
    launch_items,
    launch_nd,
    local_size,
    queue_facts,
)
from ._movement import permute
from ._reduce_kernels import KINDS, Prog, kernel
from ._split_sync import partials, ptx_fence, tickets

__all__ = ["argmax", "max", "mean", "min", "reduce_sum", "sum", "var"]

_CHUNK_PER_LANE = 4  # elements per work item below which WORKGROUP stays one stage
_MAX_CHUNKS = 1024
_ROW_GROUPS_PER_CU = 8  # red_vec work-groups per compute unit a large row is split into

# NOTE [ Row reductions ]
# A reduction of contiguous rows (inner == 1: the whole tensor, or the last axes) is bandwidth:
# ``red_vec`` reads each row in aligned 4-vectors (a scalar head and tail around them, so any
# length and offset works), two loads in flight per lane, four accumulators per lane, then a
# local-memory tree. REDUCTION_PARALLEL gives each row one work-group of 32..local lanes (about
# 16 elements per lane); REDUCTION_WORKGROUP splits each row over G = min(R / (16 * local),
# 8 * compute units / rows) work-groups, a fixed number for a shape on a device. They merge
# in the same launch (NOTE [ Last group merges ] in ._split_sync): the row's last group adds
# the G partials in index order, so the result is the same bits on every run. (A second
# launch over the partials cost as much device time on an H100 as reading 16 MB: the sum of
# 4096x1024 took 16.3 us in two launches, 10.0 us for the same bytes as 4096 row sums.)

# -- OpenCL driver ------------------------------------------------------------------------------


@dataclass
class _Job:
    """One reduction of a (outer, R, inner) view of ``x`` (from element ``xo``)."""

    kind: str
    x: Tensor
    xo: int
    outer: int
    R: int
    inner: int
    out_dtype: str
    scale: float = 1.0
    aux: Tensor | None = None
    xi: Tensor | None = None  # argmax indices of a previous stage


def _acc_dtype(kind: str, dtype: str) -> str:
    if dtype in ("float16", "float32"):
        return "float32"
    if dtype == "float64" or kind != "sum":
        return dtype
    return "int64"


def _run(job: _Job, shape: tuple[int, ...] | None = None,
         chain: list[_Stage] | None = None) -> Tensor:
    """The result of ``job`` as a flat (outer * inner,) tensor: values, or argmax indices.

    With ``shape`` a one-stage sum, max or min writes a tensor of that shape (outer * inner
    elements) instead. A sum, max or min with a ``chain`` appends each of its launches to it
    (NOTE [ Reduction launches ]).
    """
    queue = job.x.queue
    kind = job.kind
    argmax = kind == "argmax"
    acc = _acc_dtype(kind, job.x.dtype)
    n_out = job.outer * job.inner
    local = local_size(queue.device)
    variant = get_kernel_selector(queue.device).select_reduction_kernel(job.R, kind).variant
    if (variant is not KernelVariant.REDUCTION_SEQUENTIAL and job.inner == 1 and not argmax
            and n_out > 0):
        return _run_rows(job, variant is KernelVariant.REDUCTION_WORKGROUP, local, acc, shape,
                         chain)
    # columns: a warp's lanes read 32 consecutive elements (128 bytes) of a row where it can
    lj = 1 if job.inner == 1 else builtins.min(32 if job.inner >= 32 else 16, local)
    lr = local // lj
    tiles = -(-job.inner // lj)
    chunks = 1
    columns = job.inner > 1 and variant is not KernelVariant.REDUCTION_SEQUENTIAL
    if ((variant is KernelVariant.REDUCTION_WORKGROUP or columns)
            and lr * _CHUNK_PER_LANE < job.R):
        # columns: enough work-groups to fill the device, else at most _MAX_CHUNKS of them
        target = (_ROW_GROUPS_PER_CU * _compute_units(queue.device) if columns
                  else _MAX_CHUNKS)
        budget = builtins.max(1, target // builtins.max(1, job.outer * tiles))
        chunks = builtins.min(-(-job.R // (lr * _CHUNK_PER_LANE)), budget)
    merged = chunks > 1 and not argmax  # one launch: the last group merges (NOTE above)
    staged = chunks > 1 and argmax
    partial = n_out * chunks
    direct = shape is not None and not staged and not argmax
    # a final argmax stage writes indices only
    values = empty(queue, shape if direct and shape is not None else
                   (0 if argmax and not staged else n_out if merged else partial,),
                   acc if staged or argmax else job.out_dtype)
    indices = empty(queue, (partial,), "int64") if argmax else None
    _, idx = index_defs(job.x.size + job.xo, job.outer * job.R * job.inner, partial)
    prog = Prog(job.x.dtype, acc, values.dtype, local, idx is np.int64,
                ptx_fence(queue.device))
    args = [
        _buffer(job.x), idx(job.xo), _buffer(values), idx(0),
        _buffer(job.xi), idx(0), _buffer(indices), idx(0),
        _buffer(job.aux), idx(job.aux.offset if job.aux is not None else 0),
        idx(job.outer), idx(job.R), idx(job.inner),
        np_compute(acc).type(1 if staged else job.scale),
        np.int32(KINDS[kind]), np.int32(job.aux is not None), np.int32(job.xi is not None),
        np.int32(staged),
    ]
    if n_out == 0:
        pass
    elif variant is KernelVariant.REDUCTION_SEQUENTIAL:
        launch_items(queue, kernel(queue.context, prog, "red_seq"), n_out, *args)
        if chain is not None:
            chain.append(_stage(kernel(queue.context, prog, "red_seq"),
                                (-(-n_out // local) * local,), (local,), args, values))
    else:
        chunk = builtins.max(1, -(-job.R // chunks))
        grid, lsize = (tiles * lj, job.outer * chunks * lr), (lj, lr)
        args += [idx(chunks), idx(chunk), *(_scratch(queue) if merged else (None, None))]
        launch_nd(queue, kernel(queue.context, prog, "red_grp"), grid, lsize, *args)
        if chain is not None:
            chain.append(_stage(kernel(queue.context, prog, "red_grp"), grid, lsize, args,
                                values))
    if staged:  # argmax: the partials' (value, index) pairs reduced by another launch
        return _run(_Job(kind, values, 0, job.outer, chunks, job.inner, job.out_dtype,
                         job.scale, None, indices), None, chain)
    return values if indices is None else indices


def _groups_per_row(device: Any, outer: int, R: int, lanes: int) -> int:
    """Work-groups sharing each row in REDUCTION_WORKGROUP's ``red_vec``: enough to fill the
    device (NOTE [ Row reductions ]), at least 16 elements per lane each."""
    target = _ROW_GROUPS_PER_CU * _compute_units(device)
    return builtins.max(1, builtins.min(-(-R // (lanes * 16)), target // builtins.max(outer, 1)))


_units: dict[Any, int] = {}
def _compute_units(device: Any) -> int:
    units = _units.get(device)
    if units is None:
        units = _units[device] = builtins.max(1, int(device.max_compute_units))
    return units


def _run_rows(job: _Job, split: bool, local: int, acc: str,
              shape: tuple[int, ...] | None, chain: list[_Stage] | None) -> Tensor:
    """``red_vec``: ``job`` (inner == 1, not argmax) with G work-groups per row where ``split``
    (REDUCTION_WORKGROUP; NOTE [ Row reductions ]); with G > 1 each row's last group merges
    the partials in the same launch."""
    queue = job.x.queue
    n_out = job.outer
    if split:
        lanes = local
        groups = _groups_per_row(queue.device, job.outer, job.R, lanes)
    else:  # about 4 vectors per lane, whole warps
        lanes = builtins.min(local, builtins.max(32, 1 << builtins.max(0, (job.R - 1) // 16)
                                                 .bit_length()))
        groups = 1
    values = empty(queue, shape if shape is not None else (n_out,), job.out_dtype)
    _, idx = index_defs(job.x.size + job.xo, job.outer * job.R, n_out * groups)
    prog = Prog(job.x.dtype, acc, values.dtype, local, idx is np.int64,
                ptx_fence(queue.device))
    part, count = _scratch(queue) if groups > 1 else (None, None)
    args = [
        _buffer(job.x), idx(job.xo), _buffer(values), idx(0),
        _buffer(job.aux), idx(job.aux.offset if job.aux is not None else 0),
        idx(job.R), np_compute(acc).type(job.scale),
        np.int32(KINDS[job.kind]), np.int32(job.aux is not None), idx(groups),
        part, count,
    ]
    kern = kernel(queue.context, prog, "red_vec")
    grid, lsize = (n_out * groups * lanes,), (lanes,)
    launch_nd(queue, kern, grid, lsize, *args)
    if chain is not None:
        chain.append(_stage(kern, grid, lsize, args, values))
    return values


def _scratch(queue: Any) -> tuple[Any, Any]:
    """A split reduction's partials (8 bytes each, room for every ACC) and ticket counters
    (NOTE [ Last group merges ] in ._split_sync). A split has at most
    ``_ROW_GROUPS_PER_CU * compute units`` groups in all (:func:`_groups_per_row`, and the
    column budget in :func:`_run`), each writing at most 32 columns' partials."""
    n = _ROW_GROUPS_PER_CU * _compute_units(queue.device)
    return partials(queue, 8 * 32 * n), tickets(queue, n)


def _buffer(t: Tensor | None) -> Any:
    return None if t is None or t.size == 0 else device_buffer(t)


# NOTE [ Reduction launches ]
# A sum, mean, max or min of a tensor whose reduced axes are adjacent (no permuting copy) is
# one launch, or a chain of them (partials, then their reduction), whose kernels, sizes and
# arguments depend only on the op, the input's shape, dtype and offset, the axes, keepdims,
# the scale and the selector's epoch; the first call remembers them, and a repeated call
# allocates each stage's output and launches with only the input and output buffers filled in
# (stage k reads stage k - 1's output), skipping the planning and the kernel selection.
# Bounded, cleared when full.


@dataclass(frozen=True)
class _Stage:
    kernel: Any
    grid: tuple[int, ...]
    local: tuple[int, ...]
    args: tuple[Any, ...]  # kernel form; the input (0) and output (2) buffers left None
    size: int  # elements written
    dtype: str


@dataclass(frozen=True)
class _Launch:
    stages: tuple[_Stage, ...]
    shape: tuple[int, ...]  # of the last stage's output, the result


_launches: dict[tuple[Any, ...], _Launch] = {}
_MAX_LAUNCHES = 4096


def _stage(kern: Any, grid: tuple[int, ...], lsize: tuple[int, ...], args: list[Any],
           values: Tensor) -> _Stage:
    frozen = [np.array(a) if isinstance(a, np.float64) else a for a in args]
    frozen[0] = frozen[2] = None
    return _Stage(kern, grid, lsize, tuple(frozen), values.size, values.dtype)


def _remember(key: tuple[Any, ...], chain: list[_Stage], shape: tuple[int, ...]) -> None:
    if len(_launches) >= _MAX_LAUNCHES:
        _launches.clear()
    _launches[key] = _Launch(tuple(chain), shape)


def _launch_key(kind: str, x: Tensor, axes: tuple[int, ...], keepdims: bool, out_dtype: str,
                scale: float) -> tuple[Any, ...]:
    epoch = queue_facts(x.queue)[1].epoch("reduction")
    return (kind, x.shape, x.dtype, x.offset, x.queue, axes, keepdims, out_dtype, scale, epoch)


def _run_remembered(entry: _Launch, x: Tensor) -> Tensor:
    last = len(entry.stages) - 1
    src = x
    for k, stage in enumerate(entry.stages):
        out = output_tensor(x.queue, entry.shape if k == last else (stage.size,), stage.dtype)
        args = list(stage.args)
        args[0] = _buffer(src)
        args[2] = device_buffer(out)
        launch_values(x.queue, stage.kernel, stage.grid, stage.local, args)
        src = out
    return src


# -- planning ---------------------------------------------------------------------------------


def _plan(op: str, x: Tensor, axes: tuple[int, ...]) -> tuple[Tensor, int, int, int]:
    """``x`` (or a permuted copy) and its (outer, R, inner) view for reducing ``axes``."""
    dims = [(d, k in axes) for k, d in enumerate(x.shape) if d != 1]
    flags = [red for _, red in dims]
    R = math.prod(d for d, red in dims if red)
    if True in flags:
        first = flags.index(True)
        last = len(flags) - 1 - flags[::-1].index(True)
        if all(flags[first:last + 1]):
            outer = math.prod(d for d, _ in dims[:first])
            return x, outer, R, math.prod(d for d, _ in dims[last + 1:])
        order = [k for k in range(x.ndim) if k not in axes] + list(axes)
        return permute(x, order), math.prod(d for d, red in dims if not red), R, 1
    return x, x.size, 1, 1


def _out_shape(x: Tensor, axes: tuple[int, ...], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if k in axes else d for k, d in enumerate(x.shape))
    return tuple(d for k, d in enumerate(x.shape) if k not in axes)


def _check_nonempty(op: str, x: Tensor, axes: tuple[int, ...]) -> None:
    reduced = math.prod([x.shape[k] for k in axes])
    if reduced == 0 and math.prod(_out_shape(x, axes, False)) > 0:
        raise ValueError(f"{op}: cannot reduce an empty axis (axes {axes} of shape {x.shape}) "
                         "without an identity; sum and mean can")



def _reduce_cl(kind: str, x: Tensor, axes: tuple[int, ...], keepdims: bool, out_dtype: str,
               scale: float = 1.0, aux: Tensor | None = None) -> Tensor:
    key = None
    if aux is None:
        key = _launch_key(kind, x, axes, keepdims, out_dtype, scale)
        entry = _launches.get(key)
        if entry is not None:
            return _run_remembered(entry, x)
    src, outer, R, inner = _plan(kind, x, axes)
    shape = _out_shape(x, axes, keepdims)
    chain: list[_Stage] | None = [] if key is not None and src is x and kind != "argmax" else None
    flat = _run(_Job(kind, src, src.offset, outer, R, inner, out_dtype, scale, aux), shape,
                chain)
    if chain and key is not None and math.prod(shape) > 0:
        _remember(key, chain, shape)
    return flat if flat.shape == shape else reshape(flat, shape)


def _scale(count: int) -> float:
    return 1.0 / count if count > 0 else math.inf  # 0 * inf is NaN, as NumPy's mean of nothing


Axis = int | Sequence[int] | None


def _axes(op: str, axis: Axis, ndim: int) -> tuple[int, ...]:
    """The sorted axes to reduce. A 0-d tensor takes axis 0 or -1, as in PyTorch (and as
    :func:`normalize_axis` allows); it has no axis to reduce, so its value comes back."""
    axes = normalize_axes(op, axis, ndim)
    return axes if ndim else ()


def _np_reduce(fn: Any, x: Tensor, axes: tuple[int, ...], keepdims: bool, out_dtype: str,
               **kwargs: Any) -> Tensor:
    # only np.var (ddof past the count) and empty axes warn through the warnings module; the
    # rest of the warnings are floating-point ones, which numpy_call silences more cheaply
    loud = fn is np.var or builtins.any(x.shape[a] == 0 for a in axes)
    return np_result(x, out_dtype, _np_reduce_run, fn, host(x), np_compute(x.dtype), axes,
                     keepdims, tuple(kwargs.items()), loud)


def _np_reduce_run(fn: Any, a: Any, ct: Any, axes: tuple[int, ...], keepdims: bool,
                   kwargs: tuple[tuple[str, Any], ...], loud: bool) -> Any:
    if ct is not None:
        a = a.astype(ct, copy=False)
    if not loud:
        return fn(a, axis=axes, keepdims=keepdims, **dict(kwargs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(a, axis=axes, keepdims=keepdims, **dict(kwargs))


def _np_argmax(a: Any, axis: int | None, shape: tuple[int, ...]) -> Any:
    return np.reshape(np.argmax(a) if axis is None else np.argmax(a, axis=axis), shape)


def _np_empty(x: Tensor, axes: tuple[int, ...], keepdims: bool, dtype: str) -> Tensor:
    """The empty result of reducing an empty tensor to an empty one (as OpenCL gives)."""
    return wrap(x.queue, np.empty(_out_shape(x, axes, keepdims), numpy_dtype(dtype)), dtype)


# -- public ops -------------------------------------------------------------------------------


def sum(x: Tensor, axis: Axis = None, keepdims: bool | None = None, *,
        dim: Axis = None, keepdim: bool | None = None) -> Tensor:
    """Sum over ``axis`` (an int, a sequence of ints, or ``None`` for all).

    ``dim``/``keepdim`` are PyTorch's names for ``axis``/``keepdims`` (giving both spellings
    is a ``TypeError``).

    Float tensors keep their dtype (float16 accumulates in float32); integer tensors give
    int64. The sum of nothing is 0.

    Raises:
        IndexError: an axis out of range or repeated.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(6.0).reshape(2, 3))
        >>> sum(x, axis=1).to_host().tolist(), sum(x).to_host().tolist()
        ([3.0, 12.0], 15.0)
    """
    axis, keepdims = resolve_dim("sum", axis, dim), resolve_keepdim("sum", keepdims, keepdim)
    x = check_tensor("sum", x)
    axes = _axes("sum", axis, x.ndim)
    out_dtype = x.dtype if x.dtype in FLOAT_DTYPES else "int64"
    if x.array is not None:
        # np.add.reduce is what np.sum runs on an ndarray, without its Python wrapper
        return _np_reduce(np.add.reduce, x, axes, keepdims, out_dtype,
                          dtype=None if out_dtype in FLOAT_DTYPES else np.int64)
    return _reduce_cl("sum", x, axes, keepdims, out_dtype)


reduce_sum = sum


def mean(x: Tensor, axis: Axis = None, keepdims: bool | None = None, *,
        dim: Axis = None, keepdim: bool | None = None) -> Tensor:
    """Mean over ``axis`` of a floating-point tensor (NaN for an empty axis).

    ``dim``/``keepdim`` are PyTorch's names for ``axis``/``keepdims`` (giving both spellings
    is a ``TypeError``).

    Raises:
        TypeError: an integer tensor.
        IndexError: an axis out of range or repeated.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(6.0).reshape(2, 3))
        >>> mean(x, axis=0).to_host().tolist()
        [1.5, 2.5, 3.5]
    """
    axis, keepdims = resolve_dim("mean", axis, dim), resolve_keepdim("mean", keepdims, keepdim)
    x = check_tensor("mean", x)
    axes = _axes("mean", axis, x.ndim)
    require_float("mean", x)
    if x.array is not None:
        return _np_reduce(np.mean, x, axes, keepdims, x.dtype)
    count = math.prod(x.shape[k] for k in axes)
    return _reduce_cl("sum", x, axes, keepdims, x.dtype, _scale(count))


def max(x: Tensor, axis: Axis = None, keepdims: bool | None = None, *,
        dim: Axis = None, keepdim: bool | None = None) -> Tensor:
    """Maximum over ``axis``; NaN wins, as in NumPy. Keeps the dtype.

    ``dim``/``keepdim`` are PyTorch's names for ``axis``/``keepdims`` (giving both spellings
    is a ``TypeError``).

    Raises:
        ValueError: reducing an empty axis.
        IndexError: an axis out of range or repeated.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[1.0, 5.0], [7.0, 2.0]]))
        >>> max(x, axis=1).to_host().tolist()
        [5.0, 7.0]
    """
    return _maxmin("max", np.max, x, resolve_dim("max", axis, dim),
                   resolve_keepdim("max", keepdims, keepdim))


def min(x: Tensor, axis: Axis = None, keepdims: bool | None = None, *,
        dim: Axis = None, keepdim: bool | None = None) -> Tensor:
    """Minimum over ``axis``; NaN wins, as in NumPy. Keeps the dtype.

    ``dim``/``keepdim`` are PyTorch's names for ``axis``/``keepdims`` (giving both spellings
    is a ``TypeError``).

    Raises:
        ValueError: reducing an empty axis.
        IndexError: an axis out of range or repeated.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[1.0, 5.0], [7.0, 2.0]]))
        >>> min(x, axis=0).to_host().tolist()
        [1.0, 2.0]
    """
    return _maxmin("min", np.min, x, resolve_dim("min", axis, dim),
                   resolve_keepdim("min", keepdims, keepdim))


def _maxmin(op: str, fn: Any, x: Tensor, axis: Axis, keepdims: bool) -> Tensor:
    x = check_tensor(op, x)
    axes = _axes(op, axis, x.ndim)
    _check_nonempty(op, x, axes)
    if x.array is not None:
        if x.size == 0:  # an empty result (else _check_nonempty raised); NumPy refuses it
            return _np_empty(x, axes, keepdims, x.dtype)
        return np_result(x, x.dtype, _np_reduce_run, fn, host(x), None, axes, keepdims, (),
                         False)
    return _reduce_cl(op, x, axes, keepdims, x.dtype)


def argmax(x: Tensor, axis: int | None = None, keepdims: bool | None = None, *,
           dim: int | None = None, keepdim: bool | None = None) -> Tensor:
    """Index (int64) of the first maximum along ``axis``, or in the flattened tensor.

    ``dim``/``keepdim`` are PyTorch's names for ``axis``/``keepdims`` (giving both spellings
    is a ``TypeError``).

    A NaN counts as the maximum, as in NumPy. With ``axis=None`` and ``keepdims`` the result
    has shape ``(1,) * x.ndim``.

    Raises:
        ValueError: an empty axis.
        IndexError: ``axis`` out of range.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[1.0, 5.0], [7.0, 2.0]]))
        >>> argmax(x, axis=1).to_host().tolist(), argmax(x).to_host().tolist()
        ([1, 0], 2)
    """
    axis = resolve_dim("argmax", axis, dim)
    keepdims = resolve_keepdim("argmax", keepdims, keepdim)
    x = check_tensor("argmax", x)
    if axis is not None and not _axes("argmax", axis, x.ndim):
        axis = None  # a 0-d tensor's axis 0 or -1: its one element
    axes = tuple(range(x.ndim)) if axis is None else (normalize_axis("argmax", axis, x.ndim),)
    _check_nonempty("argmax", x, axes)
    if x.size == 0 and axis is None:
        raise ValueError(f"argmax: cannot take the argmax of an empty tensor of shape {x.shape}")
    if x.array is not None:
        if x.size == 0:
            return _np_empty(x, axes, keepdims, "int64")
        return np_result(x, "int64", _np_argmax, host(x), None if axis is None else axes[0],
                         tuple(_out_shape(x, axes, keepdims)))
    if axis is None:
        flat = _run(_Job("argmax", x, x.offset, 1, x.size, 1, "int64"))
        return reshape(flat, _out_shape(x, axes, keepdims))
    return _reduce_cl("argmax", x, axes, keepdims, "int64")


def var(x: Tensor, axis: Axis = None, keepdims: bool | None = None, correction: int = 1,
        ddof: int | None = None, *, dim: Axis = None, keepdim: bool | None = None) -> Tensor:
    """Variance over ``axis``: the sum of squared deviations / (N - ``correction``).

    ``dim``/``keepdim`` are PyTorch's names for ``axis``/``keepdims`` (giving both spellings
    is a ``TypeError``).

    ``correction=1`` (the default, as PyTorch) is the unbiased estimate, ``0`` the population
    variance; ``ddof`` is NumPy's name for it. N - correction <= 0 gives inf or NaN, as NumPy.
    Two passes (mean, then deviations) keep it accurate for large offsets.

    Raises:
        TypeError: an integer tensor.
        ValueError: both ``correction`` and ``ddof`` given with different values.
        IndexError: an axis out of range or repeated.

    Examples:
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([1.0, 2.0, 3.0, 4.0]))
        >>> var(x).to_host().tolist(), var(x, correction=0).to_host().tolist()
        (1.6666666269302368, 1.25)
    """
    axis, keepdims = resolve_dim("var", axis, dim), resolve_keepdim("var", keepdims, keepdim)
    x = check_tensor("var", x)
    axes = _axes("var", axis, x.ndim)
    require_float("var", x)
    if ddof is not None:
        if correction not in (1, ddof):
            raise ValueError(f"var: give correction or ddof, not both ({correction} vs {ddof})")
        correction = ddof
    if x.array is not None:
        return _np_reduce(np.var, x, axes, keepdims, x.dtype, ddof=correction)
    count = math.prod(x.shape[k] for k in axes)
    acc = _acc_dtype("sum", x.dtype)
    src, outer, R, inner = _plan("var", x, axes)
    mu = _run(_Job("sum", src, src.offset, outer, R, inner, acc, _scale(count)))
    flat = _run(_Job("sum", src, src.offset, outer, R, inner, x.dtype,
                     _scale(count - correction), mu))
    return reshape(flat, _out_shape(x, axes, keepdims))
