"""Launching the fused attention kernels (NOTE [ Fused attention kernels ]).

The operands are read in place: each one's batch index is ``(b / div) % mod`` of the
broadcast batch index ``b`` (:func:`batch_map`), which covers the batch broadcasting of
grouped-query attention, key-padding masks ``(N, 1, 1, S)`` and shared ``(L, S)`` masks; an
operand whose broadcast is not of that form is materialized first.

Two portable families run the same calls with the same arguments: the row kernels (one work
item per query row or key; CPU devices) and their register-tiled twins (NOTE [ Register-tiled
attention kernels ] in ._attention_tiled; GPU devices). :func:`kernel_choice` picks;
``NETCL_ATTENTION_KERNEL=rows|tiled|auto`` or the ``kernel=`` argument of
:func:`fused_forward` / :func:`fused_backward` forces (tests, ``bench_attention.py --kernel``).

The tensor-core backward runs ``attn_bwd_fused_mma`` (dK, dV and dQ in one pass over the
scores, dQ by atomic adds: NOTE [ Fused attention backward ] in ._attention_mma_backward) or the two
kernels ``attn_bwd_dq_mma`` and ``attn_bwd_dkdv_mma``; ``NETCL_ATTENTION_BWD=fused|split`` or
the ``bwd=`` argument of :func:`fused_backward` forces (:func:`backward_choice`; the default
``split``, measured on an H200 and the same bits every run; ``fused`` has run only emulated on
CPU devices so far: no GPU time was left to time or check its PTX there).

The backward first computes D = rowsum(dO * O) with ``attn_bwd_d`` (:func:`row_dot`);
``NETCL_ATTENTION_DELTA=ops`` or ``delta="ops"`` computes it with the ops instead (four
launches: the old way, for timing one beside the other). Every launch goes through
:func:`._attention_prepared.launch` with the roles of its buffer arguments, so a call can be
recorded and repeated (NOTE [ Remembered attention launches ]).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from netcl.core.env import env_choice
from netcl.core.kernels.cache import KernelBuildError
from netcl.core.kernels.family import BuiltFamily, local_size_1d
from netcl.core.tensor import Tensor, reshape

from . import _elementwise_binary as bi
from ._attention_kernels import FUSED_HELPERS, ROW_DOT_ITEMS, ROW_DOT_LANES, attention_family
from ._attention_mma import (
    FUSED_BLOCK_QUERIES,
    MMA_ROWS,
    MMA_THREADS,
    mma_backward_ok,
    mma_block_keys,
    mma_fused_local_bytes,
    mma_head_ok,
)
from ._attention_plain import sum_to
from ._attention_plan import AttentionPlan
from ._attention_prepared import Record, launch
from ._attention_tiled import BLOCK_CHOICES, TILED_ITEMS, tiled_config, tiled_family
from ._common import empty, from_numpy, same_device
from ._launch import device_buffer, index_defs, is_gpu
from ._matmul_mma import mma_available
from ._movement import broadcast_to
from ._random import _P_SCALE
from ._reduce import sum as reduce_sum

__all__ = ["backward_choice", "batch_map", "fused_applies", "fused_backward", "fused_forward",
           "kernel_choice", "mma_applies", "row_dot"]

_mma_refused: set[Any] = set()  # contexts whose driver would not build attn_fwd_mma
_fused_refused: set[Any] = set()  # contexts whose driver would not build attn_bwd_fused_mma
_BM = 64  # work items per group: query rows (forward, dq) or keys (dk, dv)
_MAX_HEAD = 256  # the largest E and Ev the kernels are built for (registers per item)
KERNEL_ENV = "NETCL_ATTENTION_KERNEL"  # rows | tiled | auto: the portable kernels' family
KERNELS = ("auto", "rows", "tiled")
BLOCK_ENV = "NETCL_ATTENTION_TILED_BLOCK"  # RMxCN: the tiled kernels' preferred register block
DELTA_ENV = "NETCL_ATTENTION_DELTA"  # kernel | ops: how the backward computes D = rowsum(dO O)
DELTAS = ("kernel", "ops")
BWD_ENV = "NETCL_ATTENTION_BWD"  # fused | split: the tensor-core backward's kernels
BWDS = ("fused", "split")
# where each kernel's common arguments (:func:`_common_args`) hold q, k, v, the Philox key
# and the mask: slots of NOTE [ Remembered attention launches ]
_COMMON_SLOTS = ((0, "q"), (4, "k"), (8, "v"))
_STREAM_AT = 16
_MASK_AT = 21


def _bn(E: int, Ev: int) -> int:
    """Rows per local-memory tile: 32 up to head dims 64, 16 beyond (local memory)."""
    return 32 if max(E, Ev) <= 64 else 16


def _local_bytes(E: int, Ev: int) -> int:
    return 4 * _bn(E, Ev) * (4 * -(-E // 4) + 4 * -(-Ev // 4) + 2)


def fused_applies(plan: AttentionPlan) -> bool:
    """Whether the fused kernels take this call: an OpenCL device, float32 or float16, head
    dims up to 256, nothing empty, the tiles within the device's local memory."""
    q = plan.q
    if q.array is not None or q.dtype not in ("float32", "float16"):
        return False
    if not (0 < plan.E <= _MAX_HEAD and 0 < plan.Ev <= _MAX_HEAD):
        return False
    if plan.L == 0 or plan.S == 0 or plan.batch_size == 0:
        return False
    if plan.batch_size >= 2**31 or plan.L >= 2**31 or plan.S >= 2**31:
        return False
    local_mem, group = _device_limits(q.queue)
    return local_mem >= _local_bytes(plan.E, plan.Ev) and group >= _BM


_limits: dict[Any, tuple[int, int]] = {}  # queue -> (local memory bytes, work-group size)


def _device_limits(queue: Any) -> tuple[int, int]:
    """The device's local memory and largest work-group, asked of the driver once."""
    found = _limits.get(queue)
    if found is None:
        device = queue.device
        found = _limits[queue] = (int(device.local_mem_size), int(device.max_work_group_size))
    return found


_tiled_refused: set[Any] = set()  # contexts whose driver would not build the tiled kernels




def kernel_choice(plan: AttentionPlan, kernel: str | None = None) -> str:
    """``"rows"`` or ``"tiled"``: the portable kernels that run ``plan`` (NOTE [ Fused attention
    kernels ], NOTE [ Register-tiled attention kernels ]). ``kernel`` (else
    ``NETCL_ATTENTION_KERNEL``) forces ``"rows"`` or ``"tiled"``; ``"auto"`` (the default)
    takes the tiled kernels on GPU devices, the row kernels on CPU devices. The tiled ones
    fall back to the rows where their tiles do not fit the device (head dims beyond 128,
    local memory, work-groups under 128 items). ``NETCL_ATTENTION_TILED_BLOCK=RMxCN`` (one
    of ``BLOCK_CHOICES``) makes the tiled kernels prefer that register block where it fits
    (trials on a GPU).

    Raises:
        ValueError: ``kernel`` or the variable names no family.
    """
    if kernel is None:
        kernel = env_choice(KERNEL_ENV, KERNELS) or "auto"
    if kernel not in KERNELS:
        raise ValueError(f"scaled_dot_product_attention: kernel must be one of "
                         f"{', '.join(KERNELS)}, got {kernel!r}")
    if kernel == "rows":
        return "rows"
    if kernel == "auto" and (not is_gpu(plan.q.queue.device)
                             or plan.q.queue.context in _tiled_refused):
        return "rows"
    local_mem, group = _device_limits(plan.q.queue)
    if group < TILED_ITEMS or any(tiled_config(name, plan.E, plan.Ev, local_mem) is None
                                  for name in ("attn_fwd_tiled", "attn_bwd_dq_tiled",
                                               "attn_bwd_dkdv_tiled")):
        return "rows"
    return "tiled"


def _prefer() -> tuple[int, int] | None:
    """The register block ``NETCL_ATTENTION_TILED_BLOCK`` prefers (``4x2``), if set."""
    chosen = env_choice(BLOCK_ENV, BLOCK_CHOICES)
    if chosen is None:
        return None
    rm, cn = chosen.split("x")
    return int(rm), int(cn)


def _tiled_kernels(plan: AttentionPlan, names: tuple[str, ...], kind: str, wide: bool,
                   forced: bool) -> list[tuple[Any, int]] | None:
    """``(kernel, rows per group)`` of each tiled kernel of ``names``, or ``None`` where the
    driver refuses one and the tiled family was not forced (warned once; the row kernels run
    on that context from then on). A forced family raises the build error."""
    q = plan.q
    built = []
    try:
        for name in names:
            block = tiled_config(name, plan.E, plan.Ev, _device_limits(q.queue)[0], _prefer())
            if block is None:  # kernel_choice checked that every block fits
                raise RuntimeError(f"scaled_dot_product_attention: no register block of "
                                   f"{name} fits head dims {plan.E}/{plan.Ev} on this device")
            built.append((tiled_family(q.queue.context, name, q.dtype, plan.E, plan.Ev, kind,
                                       block[0], block[1], wide).kernel, 8 * block[0]))
    except KernelBuildError as exc:
        if forced:
            raise
        _tiled_refused.add(q.queue.context)
        warnings.warn(f"scaled_dot_product_attention: the tiled attention kernels do not "
                      f"build on this device, using the row kernels ({exc})", RuntimeWarning,
                      stacklevel=3)
        return None
    return built


def _tiled_launch(plan: AttentionPlan, built: tuple[Any, int], rows: int, args: list[Any],
                  roles: tuple[str, ...], record: Record | None) -> None:
    """One group of 128 items per ``built[1]`` of ``rows`` (query rows or keys) and batch
    index."""
    groups = -(-rows // built[1])
    _go(plan, record, built[0], (groups * TILED_ITEMS, plan.batch_size), (TILED_ITEMS, 1),
        args, roles)


def batch_map(shape: tuple[int, ...], batch: tuple[int, ...]) -> tuple[int, int] | None:
    """``(div, mod)`` with which an operand of batch ``shape`` reads batch index ``b`` of the
    broadcast ``batch`` as ``(b / div) % mod``, or ``None`` when its broadcast is not one
    contiguous run of axes.

    Examples:
        >>> batch_map((2, 1, 1), (2, 3, 4)), batch_map((3, 1), (2, 3, 4))
        ((12, 2), (4, 3))
        >>> batch_map((), (2, 3)), batch_map((2, 1, 4), (2, 3, 4))
        ((1, 1), None)
    """
    full = (1,) * (len(batch) - len(shape)) + tuple(shape)
    live = [d for d in range(len(batch)) if full[d] != 1]
    if not live:
        return 1, 1
    a, c = live[0], live[-1] + 1
    if any(full[d] != batch[d] for d in range(a, c)):
        return None
    return math.prod(batch[c:]), math.prod(batch[a:c])


def _operand(t: Tensor, batch: tuple[int, ...]) -> tuple[Tensor, int, int]:
    """``t`` (materialized when its broadcast needs it) and its ``(div, mod)``."""
    found = batch_map(t.shape[:-2], batch)
    if found is None:
        t = broadcast_to(t, (*batch, *t.shape[-2:]))
        found = 1, math.prod(batch)
    return t, found[0], found[1]


def _mask_args(plan: AttentionPlan, idx: Any) -> tuple[str, list[Any]]:
    mask = plan.mask
    if mask is None:
        return "none", []
    kind = "bool" if mask.dtype == "uint8" else "float"
    lm = mask.shape[-2] if mask.ndim >= 2 else 1
    sm = mask.shape[-1] if mask.ndim >= 1 else 1
    mb = mask.shape[:-2] if mask.ndim >= 2 else ()
    found = batch_map(mb, plan.batch)
    if found is None:
        mask = broadcast_to(mask, (*plan.batch, lm, sm))
        found = 1, plan.batch_size
    return kind, [device_buffer(mask), idx(mask.offset), np.int32(found[0]),
                  np.int32(found[1]), idx(lm * sm), idx(sm if lm != 1 else 0),
                  idx(1 if sm != 1 else 0)]


def _common_args(plan: AttentionPlan, seed: int, offset: int
                 ) -> tuple[list[Any], str, bool]:
    """The operand, scalar and mask arguments every kernel takes, the mask kind and whether
    indices are 64-bit."""
    ops_ = [_operand(t, plan.batch) for t in (plan.q, plan.k, plan.v)]
    extents = [t.offset + t.size for t, _, _ in ops_]
    extents += [plan.batch_size * plan.L * max(plan.E, plan.Ev),
                plan.batch_size * plan.S * max(plan.E, plan.Ev)]
    if plan.mask is not None:
        extents.append(plan.mask.offset + plan.batch_size * plan.L * plan.S)
    _, idx = index_defs(*extents)
    args: list[Any] = []
    for t, div, mod in ops_:
        args += [device_buffer(t), idx(t.offset), np.int32(div), np.int32(mod)]
    p = plan.dropout_p
    threshold = round(p * _P_SCALE) if p > 0 else 0
    args += [np.int32(plan.L), np.int32(plan.S), np.float32(plan.scale), np.int32(plan.causal),
             np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32), np.uint64(offset),
             np.uint32(threshold), np.float32(1.0 / (1.0 - p))]
    kind, mask_args = _mask_args(plan, idx)
    return args + mask_args, kind, idx is np.int64


def _kernel(plan: AttentionPlan, name: str, kind: str, wide: bool) -> Any:
    return attention_family(plan.q.queue.context, name, plan.q.dtype, plan.E, plan.Ev, kind,
                            _BM, _bn(plan.E, plan.Ev), wide).kernel


def _launch(plan: AttentionPlan, kernel: Any, rows: int, args: list[Any],
            roles: tuple[str, ...], record: Record | None) -> None:
    """One group of ``_BM`` items per ``_BM`` rows (or keys) and batch index."""
    groups = -(-rows // _BM)
    _go(plan, record, kernel, (groups * _BM, plan.batch_size), (_BM, 1), args, roles)


def _go(plan: AttentionPlan, record: Record | None, kernel: Any, grid: tuple[int, ...],
        local: tuple[int, ...], args: list[Any], roles: tuple[str, ...]) -> None:
    """Launch a kernel whose arguments are the buffers of ``roles`` (its outputs and saved
    tensors), then :func:`_common_args`; recorded in ``record`` with their slots."""
    n = len(roles)
    slots = tuple(enumerate(roles)) + tuple((n + i, role) for i, role in _COMMON_SLOTS)
    if plan.mask is not None:
        slots += ((n + _MASK_AT, "mask"),)
    stream = n + _STREAM_AT if plan.dropout_p > 0 else -1
    launch(record, plan.q.queue, kernel, grid, local, args, slots, stream)


def _from_zero(t: Tensor) -> Tensor:
    """``t`` itself when it starts at element 0 of its buffer, else a copy that does (the
    kernels read saved tensors without offsets)."""
    return t if t.offset == 0 else reshape(bi.add(t, 0.0), t.shape)


def mma_applies(plan: AttentionPlan) -> bool:
    """Whether the forward runs on the tensor cores (NOTE [ Tensor-core attention forward ]):
    float16, no dropout, head dims that are multiples of 16 up to 128, operands starting at
    a multiple of 8 elements, a device that runs mma.sync."""
    return (plan.q.dtype == "float16" and plan.dropout_p == 0.0
            and mma_head_ok(plan.E, plan.Ev)
            and all(t.offset % 8 == 0 for t in (plan.q, plan.k, plan.v))  # 16-byte loads
            and mma_available(plan.q.queue)
            and plan.q.queue.context not in _mma_refused)


def _forced(kernel: str | None) -> bool:
    """Whether ``kernel`` (else ``NETCL_ATTENTION_KERNEL``) forces a portable family."""
    if kernel is None:
        kernel = env_choice(KERNEL_ENV, KERNELS)
    return kernel in ("rows", "tiled")


def fused_forward(plan: AttentionPlan, seed: int, offset: int, mma: str | None = None,
                  kernel: str | None = None, record: Record | None = None
                  ) -> tuple[Tensor, Tensor]:
    """``(out (*batch, L, Ev), lse (*batch, L) float32)`` from ``attn_fwd`` or
    ``attn_fwd_tiled`` (:func:`kernel_choice`; ``kernel`` forces ``"rows"`` or ``"tiled"``),
    or from ``attn_fwd_mma`` where :func:`mma_applies` and no portable family is forced;
    ``mma`` forces ``"off"``, ``"hardware"`` or ``"emulate"`` (the PTX in plain C: tests on
    CPU devices). ``record`` keeps the launch (NOTE [ Remembered attention launches ])."""
    q = plan.q
    out = empty(q.queue, (*plan.batch, plan.L, plan.Ev), q.dtype)
    lse = empty(q.queue, (*plan.batch, plan.L), "float32")
    if record is not None:
        record.tensors.update(out=out, lse=lse)
    common, kind, wide = _common_args(plan, seed, offset)
    if mma is None:
        mma = "hardware" if mma_applies(plan) and not _forced(kernel) else "off"
    args = [device_buffer(out), device_buffer(lse), *common]
    roles = ("out", "lse")
    if mma == "off":
        built = None
        if kernel_choice(plan, kernel) == "tiled":
            built = _tiled_kernels(plan, ("attn_fwd_tiled",), kind, wide, _forced(kernel))
        if built is not None:
            _tiled_launch(plan, built[0], plan.L, args, roles, record)
        else:
            _launch(plan, _kernel(plan, "attn_fwd", kind, wide), plan.L, args, roles, record)
        return out, lse
    program = _mma_program(plan, "attn_fwd_mma", kind, wide, mma,
                           mma_block_keys(plan.E, plan.Ev), _mma_refused,
                           "the tensor-core forward", "the portable kernel", depth=0)
    if program is None:
        _launch(plan, _kernel(plan, "attn_fwd", kind, wide), plan.L, args, roles, record)
        return out, lse
    kernel = program.kernel
    groups = -(-plan.L // MMA_ROWS)
    _go(plan, record, kernel, (groups * MMA_THREADS, plan.batch_size), (MMA_THREADS, 1), args,
        roles)
    return out, lse


def _mma_backward_kernels(plan: AttentionPlan, kind: str, wide: bool, mma: str
                          ) -> tuple[Any, Any] | None:
    """The tensor-core ``attn_bwd_dq_mma`` and ``attn_bwd_dkdv_mma`` (``mma`` ``"hardware"``
    or ``"emulate"``), or ``None`` where a driver refuses them (warned once)."""
    kernels = []
    for name in ("attn_bwd_dq_mma", "attn_bwd_dkdv_mma"):
        built = _mma_program(plan, name, kind, wide, mma, mma_block_keys(plan.E, plan.Ev),
                             _mma_refused, "the tensor-core backward", "the portable kernels")
        if built is None:
            return None
        kernels.append(built.kernel)
    return kernels[0], kernels[1]


def _mma_program(plan: AttentionPlan, name: str, kind: str, wide: bool, mma: str, bn: int,
                 refused: set[Any], what: str, instead: str, depth: int = 1
                 ) -> BuiltFamily | None:
    """The program of tensor-core kernel ``name`` (its ``_emu`` twin where ``mma`` is
    ``"emulate"``), or ``None`` where a driver that passed the GEMM probe refuses it: the
    context joins ``refused`` (``instead`` runs there from now on) and one warning says so, at
    the op's caller (``depth``: this call's frames below the op's)."""
    q = plan.q
    try:
        return attention_family(q.queue.context, f"{name}_emu" if mma == "emulate" else name,
                                q.dtype, plan.E, plan.Ev, kind, MMA_ROWS, bn, wide)
    except KernelBuildError as exc:
        if mma == "emulate":
            raise
        refused.add(q.queue.context)
        warnings.warn(f"scaled_dot_product_attention: {what} does not build on this device, "
                      f"using {instead} ({exc})", RuntimeWarning, stacklevel=3 + depth)
        return None


def backward_choice(bwd: str | None = None) -> str:
    """``"fused"`` or ``"split"``: whether the tensor-core backward runs attn_bwd_fused_mma
    (one pass, dQ by atomic adds in float32: its bits depend on the order of the adds) or
    attn_bwd_dq_mma and attn_bwd_dkdv_mma (the same bits on every run). ``bwd``, else
    ``NETCL_ATTENTION_BWD``, else ``"split"`` (``fused`` awaits a GPU run). Where the fused
    kernel does not apply or build, the split kernels run either way.

    Raises:
        ValueError: ``bwd`` or the variable names neither.

    Examples:
        >>> backward_choice() in BWDS, backward_choice("split")
        (True, 'split')
    """
    if bwd is None:
        try:
            bwd = env_choice(BWD_ENV, BWDS) or "split"
        except ValueError as exc:
            raise ValueError(f"scaled_dot_product_attention: {exc}") from None
    if bwd not in BWDS:
        raise ValueError(f"scaled_dot_product_attention: bwd must be one of "
                         f"{', '.join(BWDS)}, got {bwd!r}")
    return bwd


def _mma_fused_kernels(plan: AttentionPlan, kind: str, wide: bool, mma: str
                       ) -> BuiltFamily | None:
    """The program of ``attn_bwd_fused_mma`` (``mma`` ``"hardware"`` or ``"emulate"``) with its
    workspace kernels, or ``None`` where its tiles do not fit the device's local memory or a
    driver refuses it (warned once: the split kernels run on that context from then on)."""
    q = plan.q
    if (q.queue.context in _fused_refused
            or _device_limits(q.queue)[0] < mma_fused_local_bytes(plan.E, plan.Ev)):
        return None
    return _mma_program(plan, "attn_bwd_fused_mma", kind, wide, mma, FUSED_BLOCK_QUERIES,
                        _fused_refused, "the fused tensor-core backward",
                        "attn_bwd_dq_mma and attn_bwd_dkdv_mma")


def _fused_mma_launch(plan: AttentionPlan, built: BuiltFamily, dq: Tensor, dkdv_args: list[Any],
                      dkdv_roles: tuple[str, ...], wide: bool, record: Record | None) -> None:
    """attn_bwd_dq_zero, attn_bwd_fused_mma and attn_bwd_dq_convert: dK and dV into the
    buffers of ``dkdv_args`` (attn_bwd_dkdv_mma's arguments), dQ through a float32 workspace
    (a scratch tensor of ``record``) into ``dq``."""
    q = plan.q
    queue = q.queue
    dqw = empty(queue, (*plan.batch, plan.L, plan.E), "float32")
    if record is not None:
        record.tensors["dqw"] = dqw
        record.scratch.append("dqw")
    idx = np.int64 if wide else np.int32
    n4 = plan.batch_size * plan.L * plan.E // 4  # E is a multiple of 16
    local = local_size_1d(queue.device)
    grid = (-(-n4 // local) * local,)
    zero, convert = (built.kernels[name] for name in FUSED_HELPERS)
    launch(record, queue, zero, grid, (local,), [device_buffer(dqw), idx(n4)],
           ((0, "dqw"),), -1)
    args = [*dkdv_args[:2], device_buffer(dqw), *dkdv_args[2:]]
    roles = (*dkdv_roles[:2], "dqw", *dkdv_roles[2:])
    groups = (-(-plan.S // MMA_ROWS) * MMA_THREADS, plan.batch_size)
    _go(plan, record, built.kernel, groups, (MMA_THREADS, 1), args, roles)
    launch(record, queue, convert, grid, (local,),
           [device_buffer(dq), device_buffer(dqw), np.float32(plan.scale), idx(n4)],
           ((0, "dq"), (1, "dqw")), -1)


def _row_dot_launch(grad: Tensor, out: Tensor, dd: Tensor, record: Record | None) -> None:
    """``attn_bwd_d`` of ``grad`` and ``out`` (same shape, rows of the last dim) into the
    contiguous ``dd`` (one element per row)."""
    queue = grad.queue
    ev = grad.shape[-1] if grad.ndim else 1
    rows = dd.size
    if rows == 0:
        return
    _, idx = index_defs(grad.offset + grad.size, out.offset + out.size)
    kernel = attention_family(queue.context, "attn_bwd_d", grad.dtype, ev, ev, "none",
                              ROW_DOT_ITEMS, ROW_DOT_LANES, idx is np.int64).kernel
    per_group = ROW_DOT_ITEMS // ROW_DOT_LANES
    grid = (-(-rows // per_group) * ROW_DOT_ITEMS,)
    args = [device_buffer(dd), device_buffer(grad), idx(grad.offset), device_buffer(out),
            idx(out.offset), idx(rows)]
    launch(record, queue, kernel, grid, (ROW_DOT_ITEMS,), args,
           ((0, "dd"), (1, "grad"), (3, "out")), -1)


def row_dot(grad: Tensor, out: Tensor) -> Tensor:
    """``D = sum(grad * out, axis=-1)`` of two tensors of one shape ``(..., Ev)`` and a float
    dtype: float32 for float16 and float32 inputs, float64 for float64. On OpenCL one launch
    of ``attn_bwd_d`` (NOTE [ Fused attention kernels ]) reads both in place from their
    offsets and sums in float (double for float64) in a fixed order: what the fused backward
    computes before its two kernels; NumPy on the NumPy backend.

    Raises:
        TypeError: non-Tensors, non-float or differing dtypes.
        ValueError: differing shapes or devices, or no dimension.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> dev = manager.default("cpu").queue
        >>> x = Tensor.from_host(dev, np.ones((2, 32), np.float32))
        >>> y = Tensor.from_host(dev, np.array([[1.0] * 32, [0.0] * 32], np.float32))
        >>> d = row_dot(x, y)
        >>> d.dtype, d.to_host().tolist()
        ('float32', [32.0, 0.0])
    """
    op = "scaled_dot_product_attention row_dot"
    if not isinstance(grad, Tensor) or not isinstance(out, Tensor):
        raise TypeError(f"{op}: grad and out must be Tensors, got {type(grad).__name__} and "
                        f"{type(out).__name__}")
    same_device(op, grad, out)
    if grad.dtype != out.dtype or grad.dtype not in ("float16", "float32", "float64"):
        raise TypeError(f"{op}: grad and out must share a float dtype, got {grad.dtype} and "
                        f"{out.dtype}")
    if grad.shape != out.shape or grad.ndim == 0:
        raise ValueError(f"{op}: grad and out must have one shape with a last dimension, got "
                         f"{grad.shape} and {out.shape}")
    acc = "float64" if grad.dtype == "float64" else "float32"
    if grad.array is not None:
        g, o = (np.asarray(t.to_host(), dtype=acc) for t in (grad, out))
        return from_numpy(grad.queue, np.einsum("...e,...e->...", g, o), acc)
    dd = empty(grad.queue, grad.shape[:-1], acc)
    _row_dot_launch(grad, out, dd, None)
    return dd


def _delta(plan: AttentionPlan, grad: Tensor, out: Tensor, delta: str | None,
           record: Record | None) -> Tensor:
    """D = rowsum(grad * out) as float32 (*batch, L): ``attn_bwd_d``, or with ``delta``
    (else ``NETCL_ATTENTION_DELTA``) ``"ops"`` the four launches it replaced (two float32
    copies, a multiply and a row sum; kept for timing one beside the other)."""
    if delta is None:
        delta = env_choice(DELTA_ENV, DELTAS) or "kernel"
    if delta not in DELTAS:
        raise ValueError(f"scaled_dot_product_attention: delta must be one of "
                         f"{', '.join(DELTAS)}, got {delta!r}")
    if delta == "ops":
        if record is not None:
            record.ok = False
        g32 = grad if grad.dtype == "float32" else bi.cast(grad, "float32")
        o32 = out if out.dtype == "float32" else bi.cast(out, "float32")
        return reduce_sum(bi.mul(g32, o32), axis=-1)
    dd = empty(plan.q.queue, (*plan.batch, plan.L), "float32")
    if record is not None:
        record.tensors.update(dd=dd, grad=grad, out=out)
    _row_dot_launch(grad, out, dd, record)
    return dd


def fused_backward(plan: AttentionPlan, grad: Tensor, out: Tensor, lse: Tensor, seed: int,
                   offset: int, mma: str | None = None, kernel: str | None = None,
                   delta: str | None = None, record: Record | None = None,
                   bwd: str | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``(dq, dk, dv)`` in the (reshaped) operands' shapes from ``attn_bwd_dq`` and
    ``attn_bwd_dkdv`` or their tiled twins (:func:`kernel_choice`; ``kernel`` forces), or
    their tensor-core twins where :func:`mma_applies` and the head dims are at most 64 and
    no portable family is forced (``mma`` forces as in :func:`fused_forward`): by default
    the two kernels, ``bwd="fused"`` (else ``NETCL_ATTENTION_BWD``, :func:`backward_choice`)
    ``attn_bwd_fused_mma``. ``grad``, ``out`` are (*batch, L, Ev), ``lse``
    (*batch, L). D = rowsum(grad * out) comes from ``attn_bwd_d`` first (``delta`` as in
    :func:`_delta`). ``record`` keeps the launches (NOTE [ Remembered attention launches ]).

    Raises:
        ValueError: ``bwd`` or ``NETCL_ATTENTION_BWD`` names neither ``fused`` nor ``split``.
    """
    q = plan.q
    bwd = backward_choice(bwd)
    dd = _delta(plan, grad, out, delta, record)
    common, kind, wide = _common_args(plan, seed, offset)
    batch = plan.batch
    dq = empty(q.queue, (*batch, plan.L, plan.E), q.dtype)
    dk = empty(q.queue, (*batch, plan.S, plan.E), q.dtype)
    dv = empty(q.queue, (*batch, plan.S, plan.Ev), q.dtype)
    if record is not None:
        record.tensors.update(dq=dq, dk=dk, dv=dv, lse=lse)
    grad_buf = device_buffer(_from_zero(grad))
    saved = [device_buffer(_from_zero(lse)), device_buffer(_from_zero(dd))]
    if mma is None:
        mma = ("hardware" if mma_applies(plan) and mma_backward_ok(plan.E, plan.Ev)
               and not _forced(kernel) else "off")
    dq_args = [device_buffer(dq), grad_buf, *saved, *common]
    dkdv_args = [device_buffer(dk), device_buffer(dv), grad_buf, *saved, *common]
    dq_roles = ("dq", "grad", "lse", "dd")
    dkdv_roles = ("dk", "dv", "grad", "lse", "dd")
    fused = None if mma == "off" or bwd == "split" else _mma_fused_kernels(plan, kind, wide,
                                                                           mma)
    if fused is not None:
        _fused_mma_launch(plan, fused, dq, dkdv_args, dkdv_roles, wide, record)
        return sum_to(dq, plan.q.shape), sum_to(dk, plan.k.shape), sum_to(dv, plan.v.shape)
    kernels = None if mma == "off" else _mma_backward_kernels(plan, kind, wide, mma)
    if kernels is not None:
        grid = (-(-plan.L // MMA_ROWS) * MMA_THREADS, plan.batch_size)
        _go(plan, record, kernels[0], grid, (MMA_THREADS, 1), dq_args, dq_roles)
        grid = (-(-plan.S // MMA_ROWS) * MMA_THREADS, plan.batch_size)
        _go(plan, record, kernels[1], grid, (MMA_THREADS, 1), dkdv_args, dkdv_roles)
        return sum_to(dq, plan.q.shape), sum_to(dk, plan.k.shape), sum_to(dv, plan.v.shape)
    built = None
    if kernel_choice(plan, kernel) == "tiled":
        built = _tiled_kernels(plan, ("attn_bwd_dq_tiled", "attn_bwd_dkdv_tiled"), kind, wide,
                               _forced(kernel))
    if built is not None:
        _tiled_launch(plan, built[0], plan.L, dq_args, dq_roles, record)
        _tiled_launch(plan, built[1], plan.S, dkdv_args, dkdv_roles, record)
    else:
        _launch(plan, _kernel(plan, "attn_bwd_dq", kind, wide), plan.L, dq_args, dq_roles,
                record)
        _launch(plan, _kernel(plan, "attn_bwd_dkdv", kind, wide), plan.S, dkdv_args,
                dkdv_roles, record)
    return sum_to(dq, plan.q.shape), sum_to(dk, plan.k.shape), sum_to(dv, plan.v.shape)
