"""``run_gemm``: launch the GEMM family on (batched) matrices in buffers, through each
context's prepared launches; split-K for few output tiles with a long K.

The kernels come from :func:`~._matmul_family.gemm_family` (program, kernel name and
:class:`~._matmul_family.GemmGeometry` together); this module derives a launch's parameters
(:func:`vector_flags` from the operands' alignment), keeps them per context (NOTE [ Prepared
GEMM launches ]) and launches, splitting batches past the grid's 65535 limit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.env import env_choice
from netcl.core.kernel_selector import KernelConfig, get_kernel_selector
from netcl.core.kernels.cache import ContextCache
from netcl.core.kernels.primitives import launch, launch_values
from netcl.core.tensor import Tensor

from . import _matmul_kernels as mk
from ._common import empty
from ._matmul_family import (
    SPLIT_K_SUM,
    TRANSPOSE,
    for_device,
    gemm_family,
    gemm_launch,
    gemm_params,
    layout_config,
    uses_fma,
)
from ._matmul_params import GemmParams
from ._split_sync import ptx_fence, tickets

__all__ = ["Operand", "operand", "run_gemm", "select_gemm", "split_merge_mode", "vector_flags"]

BATCH_ROWS_MIN = 128  # rows per matrix from which a GPU selects for the batch's rows


def select_gemm(device: Any, M: int, N: int, K: int, dtype: str, batch: int = 1
                ) -> KernelConfig:
    """The selector's config for ``batch`` products of ``M x K @ K x N`` on ``device``.

    The selector sees one product; on a GPU (not an OpenCL CPU device, whose panels follow
    M) a batch of matrices of at least BATCH_ROWS_MIN rows is selected for as one product of
    all their rows, so the tile counts behind the GPU rules include the batch (an H100 ran
    32 x 512^3 0.58-0.63x cuBLAS with the 32x32 tiles of one 512^3 product, 0.87-0.94x with
    the 128x128 tiles of 16384 x 512 x 512).
    """
    rows = M
    if batch > 1 and M >= BATCH_ROWS_MIN and uses_fma(device):
        rows = M * batch
    return get_kernel_selector(device).select_matmul_kernel(
        max(rows, 1), max(N, 1), max(K, 1), dtype)


@dataclass(frozen=True)
class Operand:
    """A (batched) matrix in a buffer: element ``offset``, leading dimension ``ld`` and the
    element strides ``s1``/``s2`` of the two batch levels (0 broadcasts)."""

    buffer: Any
    offset: int = 0
    ld: int = 0
    s1: int = 0
    s2: int = 0

    def aligned(self, width: int) -> bool:
        """Whether offset, leading dimension and batch strides are multiples of ``width``."""
        return all(v % width == 0 for v in (self.offset, self.ld, self.s1, self.s2))


def operand(t: Tensor, ld: int, s1: int = 0, s2: int = 0, offset: int = 0) -> Operand:
    """The :class:`Operand` of tensor ``t`` (its own element offset added to ``offset``)."""
    t.wait()
    return Operand(t.buffer, t.offset + offset, ld, s1, s2)


def vector_flags(
    p: GemmParams, a: Operand, b: Operand, c: Operand, M: int, N: int, K: int,
    bias_mode: int, sbias: int,
) -> GemmParams:
    """Set ``vec_a``/``vec_b``/``vec_c`` where the operands allow aligned vector access."""
    if p.variant == mk.REGISTER_TILED:
        w = 4
        vec_a = a.aligned(w) and ((M % w == 0) if p.trans_a else (K % w == 0))
        vec_b = not p.b_loader and b.aligned(w) and ((K % w == 0) if p.trans_b else (N % w == 0))
    elif p.variant == mk.VECTORIZED:  # packs through local memory: only C is vector-accessed
        w = p.vw
        vec_a = vec_b = False
    else:
        return p
    vec_c = c.aligned(w) and N % w == 0 and (bias_mode != 2 or sbias % w == 0)
    return dataclasses.replace(p, vec_a=vec_a, vec_b=vec_b, vec_c=vec_c)



def run_gemm(
    queue: Any,
    config: KernelConfig,
    dtype: str,
    a: Operand,
    b: Operand,
    c: Operand,
    M: int,
    N: int,
    K: int,
    *,
    trans_a: bool = False,
    trans_b: bool = False,
    batch: tuple[int, int] = (1, 1),
    bias: Any = None,
    bias_mode: int = 0,
    sbias: int = 0,
    b_loader: str = "",
    extra_params: str = "",
    extra_args: Sequence[Any] = (),
) -> Any:
    """Launch ``C = op(A) @ op(B) (+ bias)`` for ``batch[0] * batch[1]`` matrices.

    ``bias_mode`` 1 adds ``bias[m]`` (per row), 2 adds ``bias[n]`` (per column); the bias
    pointer advances ``sbias`` elements per second-level batch index. ``b_loader`` (C macros
    defining ``B_AT(k, n)``) with ``extra_params``/``extra_args`` replaces the matrix B.
    """
    remember = None
    if not extra_args and not isinstance(bias, Tensor):  # NOTE [ Remembered GEMM launches ]
        remember = (queue, id(config), dtype, trans_a, trans_b, b_loader, extra_params, a.offset,
               a.ld, a.s1, a.s2, b.offset, b.ld, b.s1, b.s2, c.offset, c.ld, c.s1, c.s2, M, N,
               K, batch, bias is None, bias_mode, sbias)
        known = _launches.get(remember)
        if known is not None and known[0] is config:
            values = list(known[4])
            values[0], values[5], values[10] = a.buffer, b.buffer, c.buffer
            values[19] = a.buffer if bias is None else bias
            return launch_values(queue, known[1], known[2], known[3], values)
    staged = _stage_tn(queue, config, dtype, a, b, M, N, K, trans_a, trans_b, batch, b_loader)
    if staged is not None:  # NOTE [ Staging for tn ]; ``staged`` keeps the scratch alive
        a, b = staged[0], staged[1]
        trans_a, trans_b, remember = True, False, None
    split = _split_k(config, dtype, M, N, K, batch, b_loader, trans_a, trans_b)
    if split:
        return _run_split_k(queue, config, dtype, a, b, c, M, N, K, split, trans_a, trans_b,
                            bias, bias_mode)
    key = (id(config), dtype, trans_a, trans_b, b_loader, extra_params, _low_bit(*_dims(a)),
           _low_bit(*_dims(b)), _low_bit(*_dims(c)), _low_bit(M), _low_bit(N), _low_bit(K),
           bias_mode, _low_bit(sbias))
    prepared = _prepared.of(queue.context)
    hit = prepared.get(key)
    if hit is not None and hit[0] is config:
        grid, kernel = hit[1], hit[2]
    else:
        max_wg = int(queue.device.max_work_group_size)
        p = gemm_params(config, dtype, trans_a, trans_b, max_wg)
        p = dataclasses.replace(p, b_loader=b_loader, extra_params=extra_params)
        p = vector_flags(for_device(p, queue.device), a, b, c, M, N, K, bias_mode, sbias)
        kernel, geometry = gemm_launch(queue.context, p)
        grid = geometry.grid
        if len(prepared) >= _MAX_PREPARED:
            prepared.clear()
        prepared[key] = (config, grid, kernel)
    nb1, nb2 = batch
    if nb2 > _MAX_GRID_Z and bias is not None:
        raise ValueError(f"run_gemm: a bias with more than {_MAX_GRID_Z} second-level batch "
                         f"entries is not supported, got {nb2}")
    event = None
    # Some drivers cap the grid's third dimension at 65535: split larger batches.
    blocks = _batch_blocks(nb1, nb2, _MAX_GRID_Z)
    for i1, n1, i2, n2 in blocks:
        gsize, lsize = grid(M, N, n1 * n2)
        offsets = [o.offset + i1 * o.s1 + i2 * o.s2 for o in (a, b, c)]
        values = [
            a.buffer, np.int32(offsets[0]), np.int32(a.ld), np.int32(a.s1), np.int32(a.s2),
            b.buffer, np.int32(offsets[1]), np.int32(b.ld), np.int32(b.s1), np.int32(b.s2),
            c.buffer, np.int32(offsets[2]), np.int32(c.ld), np.int32(c.s1), np.int32(c.s2),
            np.int32(M), np.int32(N), np.int32(K), np.int32(n2),
            a.buffer if bias is None else bias, np.int32(bias_mode), np.int32(sbias),
        ]
        event = launch(queue, kernel, gsize, lsize, *values, *extra_args)
        if remember is not None and len(blocks) == 1:
            if len(_launches) >= _MAX_PREPARED:
                _launches.clear()
            values[0] = values[5] = values[10] = values[19] = None
            _launches[remember] = (config, kernel, tuple(gsize), tuple(lsize), tuple(values))
    return event


# NOTE [ Remembered GEMM launches ]
# A one-launch GEMM without extra arguments is a pure function of its queue, config, dtype,
# transposes, B loader, operand offsets, leading dimensions and strides, sizes, batch and bias
# mode: the first launch remembers its kernel, sizes and scalar arguments (NumPy int32s), and
# a repeated one fills in the four buffers and launches, skipping the key derivation above
# and the 18 scalar conversions. The entry holds its config (identity-checked, as
# _prepared's); cleared past _MAX_PREPARED entries.
_launches: dict[tuple[Any, ...], tuple[KernelConfig, Any, tuple[int, ...], tuple[int, ...],
                                       tuple[Any, ...]]] = {}


_MAX_GRID_Z = 65535

# NOTE [ Prepared GEMM launches ]
# Deriving a launch's GemmParams (tiles, device flags, vector flags) took about a third of
# matmul's host time. Each context keeps the kernel and its launch geometry (what
# ``gemm_family`` built for the derived parameters) per (config object, dtype, transposes,
# B loader, alignments): the vector flags depend on the operands' offsets, leading
# dimensions, strides and sizes only through the lowest set bit of each (capped at 16), which
# the key holds. The entry keeps its config alive, so the config's id() is not reused while
# the entry exists; the table is cleared past _MAX_PREPARED entries (configs made per call).
_prepared = ContextCache("prepared GEMM launches")
_MAX_PREPARED = 512


def _dims(o: Operand) -> tuple[int, int, int, int]:
    return (o.offset, o.ld, o.s1, o.s2)


def _low_bit(*values: int) -> int:
    """The largest power of two (at most 16) dividing every value (16 for all zeros)."""
    x = 16
    for v in values:
        x |= v
    return x & -x


# NOTE [ Staging for tn ]
# On an H100 the 128x128 register-tiled kernel ran the tn layout (A^T and B both read along
# their rows, both local tiles stored as loaded) 0.80-0.83x cuBLAS at 4096^3 but nn and tt
# 0.67-0.69x. ``config.extra["stage_tn"]`` lists layouts ("nn", "tt", ...) that run as tn:
# A (M x K) is first transposed into a K x M scratch matrix per batch entry, B^T (N x K) into
# K x N, by a 32 x 32-tiled kernel, which moves 2 x 4 bytes per element of the operand: at
# 4096^3 about 1.5% of the GEMM's time. A broadcast operand (both batch strides 0) is
# transposed once. Not for implicit-GEMM B loaders, nor past the grid's batch limit; with
# ``extra["stage_unaligned_only"]`` only where sizes or operands are not 4-aligned (no vector
# loads: an H100 ran 4095^3 tn 0.78x cuBLAS, nn/nt/tt 0.67x).


def _stage_tn(
    queue: Any, config: KernelConfig, dtype: str, a: Operand, b: Operand, M: int, N: int,
    K: int, trans_a: bool, trans_b: bool, batch: tuple[int, int], b_loader: str,
) -> tuple[Operand, Operand, list[Tensor]] | None:
    """The tn operands of a GEMM ``config`` stages (scratch tensors kept alive), or None."""
    layouts = config.extra.get("stage_tn")
    layout = ("t" if trans_a else "n") + ("t" if trans_b else "n")
    if not layouts or layout not in layouts or layout == "tn" or b_loader:
        return None
    if config.extra.get("stage_unaligned_only") and all(
            v % 4 == 0 for v in (M, N, K, *_dims(a), *_dims(b))):
        return None
    if batch[0] * batch[1] > _MAX_GRID_Z or min(M, N, K) < 1:
        return None
    scratch: list[Tensor] = []
    if not trans_a:
        a = _transposed(queue, dtype, a, M, K, batch, scratch)
    if trans_b:
        b = _transposed(queue, dtype, b, N, K, batch, scratch)
    return a, b, scratch


def _transposed(queue: Any, dtype: str, x: Operand, rows: int, cols: int,
                batch: tuple[int, int], scratch: list[Tensor]) -> Operand:
    """``x`` (``rows x cols`` per batch entry) transposed into a new contiguous scratch
    matrix per entry (one for a broadcast ``x``), as an Operand (leading dimension ``rows``)."""
    nb1, nb2 = (1, 1) if x.s1 == 0 and x.s2 == 0 else batch
    work = empty(queue, (nb1 * nb2, cols, rows), dtype)
    scratch.append(work)
    kernel, geometry = gemm_launch(queue.context, GemmParams(TRANSPOSE, dtype))
    gsize, lsize = geometry.grid(rows, cols, nb1 * nb2)
    launch(queue, kernel, gsize, lsize, x.buffer, np.int32(x.offset), np.int32(x.ld),
           np.int32(x.s1), np.int32(x.s2), np.int32(nb2), work.buffer, np.int32(work.offset),
           np.int32(rows), np.int32(cols))
    size = rows * cols
    if nb1 * nb2 == 1:
        return Operand(work.buffer, work.offset, rows)
    return Operand(work.buffer, work.offset, rows, nb2 * size, size)


# NOTE [ Split-K ]
# A GEMM with few output tiles and a long K (128 x 4096 x 4096 has 32 tiles of 128 x 128 for
# an H100's 132 compute units) leaves most of the GPU idle. ``config.extra["split_k"] = S``
# cuts K into S slices (a multiple of the tile depth each, the last one shorter) that run as
# S batch entries of one launch. float16 storage keeps one pass (its partial sums would round
# to half). A ``by_layout`` entry (NOTE [ Per-layout GEMM tiles ]) may set its own ``split_k``
# (and tiles). The slices' partial products are merged in one of two ways:
# - "group" (the default; register-tiled kernels): the last work-group of each output tile
#   merges them in the same launch (NOTE [ Last group merges ] in ._split_sync). Each group
#   writes its TM x TN accumulators per work-item into its slice's slot of the tile in a
#   pooled workspace (slices x tiles x BM x BN, laid out so that each work-item reads back the
#   same positions: coalesced, no bounds checks), fences (``GL_FENCE``), and its first
#   work-item takes the tile's ticket (one int per tile, :func:`._split_sync.tickets`); the
#   group drawing the last ticket resets it to 0, sums the slots from 0 in slice order and
#   stores C (+ bias) as an unsplit launch does. The kernel's K is its slice's length, so the
#   shorter last slice needs no launch of its own, and the sums are the same additions in the
#   same order as the "launch" path's: both give the same bits (tested), whichever group
#   finishes last. The merging group reads the workspace with plain (not volatile) loads
#   after its fence, which orders them after the ticket; each tile's slots start on a
#   128-byte line, so no other group has read (cached) a line of them during the launch.
# - "launch": each slice writes its partial into an S x M x N workspace (the last, shorter
#   slice as a second launch) and ``gemm_split_k_sum`` sums them into C (adding the bias): up
#   to three launches, and the S x M x N partials written and read once more.
# ``config.extra["split_merge"]`` ("group" or "launch"; a ``by_layout`` entry may set it), else
# NETCL_GEMM_SPLIT_MERGE, else "group" chooses; kernels other than the register-tiled one
# always take "launch".
SPLIT_MERGE_ENV = "NETCL_GEMM_SPLIT_MERGE"
SPLIT_MERGES = ("group", "launch")


def split_merge_mode(config: KernelConfig) -> str:
    """How a split K of ``config`` merges its slices: ``"group"`` or ``"launch"``
    (NOTE [ Split-K ]).

    Raises:
        ValueError: ``config.extra["split_merge"]`` or NETCL_GEMM_SPLIT_MERGE is another value.

    Examples:
        >>> from netcl.core.kernel_selector import KernelConfig, KernelVariant
        >>> cfg = KernelConfig(KernelVariant.MATMUL_REGISTER_TILED, extra={"split_k": 4})
        >>> split_merge_mode(cfg)
        'group'
        >>> cfg.extra["split_merge"] = "launch"
        >>> split_merge_mode(cfg)
        'launch'
    """
    mode = config.extra.get("split_merge")
    if mode is None:
        return env_choice(SPLIT_MERGE_ENV, SPLIT_MERGES) or "group"
    if mode not in SPLIT_MERGES:
        raise ValueError(f"run_gemm: extra['split_merge'] must be one of "
                         f"{', '.join(SPLIT_MERGES)}, got {mode!r}")
    return str(mode)


def _split_k(config: KernelConfig, dtype: str, M: int, N: int, K: int,
             batch: tuple[int, int], b_loader: str, trans_a: bool, trans_b: bool) -> int:
    """The number of K slices to run (0: no split; a ``by_layout`` entry may set it)."""
    if config.extra.get("no_split"):
        return 0
    config = layout_config(config, trans_a, trans_b)
    want = int(config.extra.get("split_k", 0))
    if want < 2 or batch != (1, 1) or b_loader or dtype == "float16":
        return 0
    step = max(4, config.tile_k)
    if 2 * step > K:
        return 0
    return min(want, K // step)


def _slices(config: KernelConfig, K: int, split: int, trans_a: bool, trans_b: bool
            ) -> tuple[int, int, int]:
    """``(ks, full, rest)``: the slice length (whole k tiles), the number of full slices and
    the length of a shorter last one (0: none)."""
    step = max(4, layout_config(config, trans_a, trans_b).tile_k)
    ks = -(-K // split)
    ks = -(-ks // step) * step  # each slice a whole number of k tiles
    full, rest = divmod(K, ks)
    return ks, full, rest


def _run_split_k(
    queue: Any, config: KernelConfig, dtype: str, a: Operand, b: Operand, c: Operand,
    M: int, N: int, K: int, split: int, trans_a: bool, trans_b: bool, bias: Any,
    bias_mode: int,
) -> Any:
    ks, full, rest = _slices(config, K, split, trans_a, trans_b)
    slices = full + (1 if rest else 0)
    # element strides of one K slice in A and B
    sa = ks * (a.ld if trans_a else 1)
    sb = ks * (1 if trans_b else b.ld)
    if split_merge_mode(layout_config(config, trans_a, trans_b)) == "group":
        event = _run_split_merge(queue, config, dtype, Operand(a.buffer, a.offset, a.ld, 0, sa),
                                 Operand(b.buffer, b.offset, b.ld, 0, sb), c, M, N, K, ks,
                                 slices, trans_a, trans_b, bias, bias_mode)
        # (a launch under a recorder returns None: only _NOT_MERGED means "run the other path")
        if event is not _NOT_MERGED:
            return event
    work = empty(queue, (slices, M, N), dtype)
    plain = dataclasses.replace(config, extra={**config.extra, "split_k": 0, "no_split": True})
    ws = Operand(work.buffer, work.offset, N, 0, M * N)
    run_gemm(queue, plain, dtype, Operand(a.buffer, a.offset, a.ld, 0, sa),
             Operand(b.buffer, b.offset, b.ld, 0, sb), ws, M, N, ks,
             trans_a=trans_a, trans_b=trans_b, batch=(1, full))
    if rest:
        run_gemm(queue, plain, dtype, Operand(a.buffer, a.offset + full * sa, a.ld),
                 Operand(b.buffer, b.offset + full * sb, b.ld),
                 Operand(work.buffer, work.offset + full * M * N, N), M, N, rest,
                 trans_a=trans_a, trans_b=trans_b)
    total = M * N
    return gemm_family(queue.context, GemmParams(SPLIT_K_SUM, dtype)).launch(
        queue, total, work.buffer, np.int32(work.offset), np.int32(slices), np.int32(N),
        np.int32(total),
        c.buffer, np.int32(c.offset), np.int32(c.ld),
        c.buffer if bias is None else bias, np.int32(bias_mode),
    )


_LINE = 32  # elements of a 128-byte line of float32 (of two of float64)
_NOT_MERGED = object()  # _run_split_merge: the merged kernel does not apply


def _run_split_merge(
    queue: Any, config: KernelConfig, dtype: str, a: Operand, b: Operand, c: Operand,
    M: int, N: int, K: int, ks: int, slices: int, trans_a: bool, trans_b: bool, bias: Any,
    bias_mode: int,
) -> Any:
    """Launch a split K whose last group per tile merges the slices (NOTE [ Split-K ]);
    ``a``/``b`` step one slice per second-level batch index. ``_NOT_MERGED`` where the
    config's kernel is not register-tiled (the caller runs the "launch" path); else what the
    launch returns (its event, or None under a recorder: captured or profiled launches, which
    until 2026-11-29 then ran the two-launch path as well, twice the work in a replayed step).
    """
    key = ("split", id(config), dtype, trans_a, trans_b, _low_bit(*_dims(a)),
           _low_bit(*_dims(b)), _low_bit(*_dims(c)), _low_bit(M), _low_bit(N), _low_bit(K),
           bias_mode)
    prepared = _prepared.of(queue.context)
    hit = prepared.get(key)
    if hit is not None and hit[0] is config:
        grid, kernel, slot = hit[1], hit[2], hit[3]
    else:
        device = queue.device
        p = gemm_params(config, dtype, trans_a, trans_b, int(device.max_work_group_size))
        grid = kernel = None
        slot = p.bm * p.bn
        if p.variant == mk.REGISTER_TILED:
            p = dataclasses.replace(p, split_merge=True, ptx_fence=ptx_fence(device))
            p = vector_flags(for_device(p, device), a, b, c, M, N, K, bias_mode, 0)
            kernel, geometry = gemm_launch(queue.context, p)
            grid = geometry.grid
        if len(prepared) >= _MAX_PREPARED:
            prepared.clear()
        prepared[key] = (config, grid, kernel, slot)
    if grid is None or slices > _MAX_GRID_Z:
        return _NOT_MERGED
    gsize, lsize = grid(M, N, slices)
    tiles = (gsize[0] // lsize[0]) * (gsize[1] // lsize[1])
    # each tile's slots start on a cache line of their own (with BM x BN a multiple of 32):
    # no line of the workspace is read by two merging groups
    work = empty(queue, (slices * tiles * slot + _LINE,), dtype)
    offset = -(-work.offset // _LINE) * _LINE
    return launch(
        queue, kernel, gsize, lsize,
        a.buffer, np.int32(a.offset), np.int32(a.ld), np.int32(0), np.int32(a.s2),
        b.buffer, np.int32(b.offset), np.int32(b.ld), np.int32(0), np.int32(b.s2),
        c.buffer, np.int32(c.offset), np.int32(c.ld), np.int32(0), np.int32(0),
        np.int32(M), np.int32(N), np.int32(K), np.int32(slices),
        c.buffer if bias is None else bias, np.int32(bias_mode), np.int32(0),
        np.int32(ks), work.buffer, np.int32(offset), tickets(queue, tiles),
    )


def _batch_blocks(
    nb1: int, nb2: int, cap: int
) -> list[tuple[int, int, int, int]]:
    """``(first b1, count, first b2, count)`` blocks of at most ``cap`` batch entries."""
    if nb1 * nb2 <= cap:
        return [(0, nb1, 0, nb2)]
    if nb2 <= cap:
        step = cap // nb2
        return [(i, min(step, nb1 - i), 0, nb2) for i in range(0, nb1, step)]
    return [(i, 1, j, min(cap, nb2 - j)) for i in range(nb1) for j in range(0, nb2, cap)]


