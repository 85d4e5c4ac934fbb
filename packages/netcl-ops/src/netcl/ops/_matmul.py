"""``matmul`` and the GEMM kernel family it runs on (also used by the convolution ops).

On the NumPy backend ``matmul`` is ``np.matmul`` (BLAS; float16 goes through float32). On
OpenCL the :class:`~netcl.core.kernel_selector.KernelSelector` picks one of four GEMM kernels
(``MATMUL_NAIVE``, ``MATMUL_TILED``, ``MATMUL_REGISTER_TILED``, ``MATMUL_VECTORIZED``) and its
tile sizes; :func:`run_gemm` launches it. Kernels are built once per (context, parameters).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.capabilities import device_type_name
from netcl.core.dtypes import FLOAT_DTYPES, canonical_dtype
from netcl.core.kernel_selector import (
    AnyVariant,
    KernelConfig,
    KernelVariant,
    default_config,
    force_variant,
    get_kernel_selector,
)
from netcl.core.kernels.cache import ContextCache
from netcl.core.kernels.primitives import launch
from netcl.core.tensor import Tensor

from . import _matmul_kernels as mk
from ._common import check_tensor, cl_kernel, empty, result, same_device
from ._matmul_blocked import warp_layout_ok

__all__ = ["MatmulKernel", "Operand", "build_matmul_kernel", "matmul", "run_gemm"]

_VARIANT_NAMES: dict[AnyVariant, str] = {
    KernelVariant.MATMUL_NAIVE: mk.NAIVE,
    KernelVariant.MATMUL_TILED: mk.TILED,
    KernelVariant.MATMUL_REGISTER_TILED: mk.REGISTER_TILED,
    KernelVariant.MATMUL_VECTORIZED: mk.VECTORIZED,
}


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


# -- kernel parameters ----------------------------------------------------------------------


def _pow2_at_most(n: int, cap: int) -> int:
    return max(1, min(cap, 1 << max(0, (max(1, n) - 1).bit_length())))


def uses_fma(device: Any) -> bool:
    """Whether GEMM kernels for ``device`` multiply-add with ``fma()`` (not on CPU devices)."""
    return device is None or device_type_name(int(device.type)) != "cpu"


def gemm_params(
    config: KernelConfig, dtype: str, trans_a: bool, trans_b: bool, max_wg: int = 1024
) -> mk.GemmParams:
    """Compile-time GEMM parameters for ``config`` (alignment flags unset).

    Tile shapes the kernels cannot run (work-groups above ``max_wg``, tiles that do not divide
    into the work-group) fall back to the variant's defaults.
    """
    name = _VARIANT_NAMES.get(config.variant)
    if name is None:  # a conv2d config: extra["gemm_variant"] names the GEMM its tiles are for
        gemm = str(config.extra.get("gemm_variant", "MATMUL_TILED"))
        name = _VARIANT_NAMES.get(KernelVariant.__members__.get(gemm, KernelVariant.MATMUL_TILED),
                                  mk.TILED)
    base = mk.GemmParams(name, dtype, trans_a=trans_a, trans_b=trans_b)
    bm, bn, bk = config.tile_m, config.tile_n, max(1, config.tile_k)
    if name == mk.NAIVE:
        return base
    if name == mk.TILED:
        tm = max(1, config.work_per_thread)
        if bm % tm or bn * bm // tm > max_wg:
            bm, bn, bk, tm = 16, 16, 16, 1
        return _replace(base, bm=bm, bn=bn, bk=bk, tm=tm, tn=1, lx=bn, ly=bm // tm)
    if name == mk.REGISTER_TILED:
        # work_per_thread rows x extra["micro_n"] columns per work-item (default: square)
        tm = max(1, config.work_per_thread)
        tn = max(1, int(config.extra.get("micro_n", tm)))
        ok = bm % tm == 0 and bn % tn == 0 and (bm // tm) * (bn // tn) <= max_wg
        ok = ok and bk % 4 == 0 and bm % 4 == 0 and bn % 4 == 0
        if not ok:
            bm, bn, bk, tm, tn = 64, 64, 16, 4, 4
        warp_n = int(config.extra.get("warp_n", 0))
        if not warp_layout_ok(bn // tn, bm // tm, warp_n):
            warp_n = 0
        return _replace(base, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, lx=bn // tn, ly=bm // tm,
                        warp_n=warp_n)
    # vectorized: work-group local_size_2d; micro-tiles of work_per_thread x extra["micro_n"]
    lx, ly = config.local_size_2d
    tm = max(1, config.work_per_thread)
    vw = config.vector_width if config.vector_width in (2, 4, 8, 16) else 4
    tn = int(config.extra.get("micro_n", vw))
    tiles = (bm // tm) * (bn // max(1, tn))
    ok = tn >= vw and tn % vw == 0 and bm % tm == 0 and bn % tn == 0 and lx * ly <= max_wg
    if not ok or lx * ly > tiles:
        bm, bn, bk, tm, tn, vw, lx, ly = 64, 64, 16, 4, 4, 4, 16, 16
    return _replace(base, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, vw=vw, lx=lx, ly=ly)


def _replace(p: mk.GemmParams, **changes: Any) -> mk.GemmParams:
    return dataclasses.replace(p, **changes)


def _vector_flags(
    p: mk.GemmParams, a: Operand, b: Operand, c: Operand, M: int, N: int, K: int,
    bias_mode: int, sbias: int,
) -> mk.GemmParams:
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
    return _replace(p, vec_a=vec_a, vec_b=vec_b, vec_c=vec_c)


_kernels = ContextCache("GEMM kernels")  # GemmParams -> cl.Kernel, per context


def gemm_kernel(context: Any, p: mk.GemmParams) -> Any:
    """The cached ``cl.Kernel`` for parameters ``p`` on ``context``."""
    kernels = _kernels.of(context)
    kernel = kernels.get(p)
    if kernel is None:
        kernel = kernels[p] = cl_kernel(context, mk.gemm_kernel_name(p), mk.gemm_source(p),
                                        p.dtype)
    return kernel


def for_device(p: mk.GemmParams, device: Any) -> mk.GemmParams:
    """``p`` with the device's flags (``fma`` off on CPU devices)."""
    return _replace(p, fma=uses_fma(device))


def _launch_shape(
    p: mk.GemmParams, M: int, N: int, batch: int
) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    if p.variant == mk.NAIVE:
        lx, ly = _pow2_at_most(N, 16), _pow2_at_most(M, 16)
        return (-(-N // lx) * lx, -(-M // ly) * ly, batch), (lx, ly, 1)
    lx, ly = mk.local_size(p)
    return (-(-N // p.bn) * lx, -(-M // p.bm) * ly, batch), (lx, ly, 1)


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
    split = _split_k(config, dtype, M, N, K, batch, b_loader)
    if split:
        return _run_split_k(queue, config, dtype, a, b, c, M, N, K, split, trans_a, trans_b,
                            bias, bias_mode)
    key = (id(config), dtype, trans_a, trans_b, b_loader, extra_params, _low_bit(*_dims(a)),
           _low_bit(*_dims(b)), _low_bit(*_dims(c)), _low_bit(M), _low_bit(N), _low_bit(K),
           bias_mode, _low_bit(sbias))
    prepared = _prepared.of(queue.context)
    hit = prepared.get(key)
    if hit is not None and hit[0] is config:
        p, kernel = hit[1], hit[2]
    else:
        max_wg = int(queue.device.max_work_group_size)
        p = gemm_params(config, dtype, trans_a, trans_b, max_wg)
        p = for_device(_replace(p, b_loader=b_loader, extra_params=extra_params), queue.device)
        p = _vector_flags(p, a, b, c, M, N, K, bias_mode, sbias)
        kernel = gemm_kernel(queue.context, p)
        if len(prepared) >= _MAX_PREPARED:
            prepared.clear()
        prepared[key] = (config, p, kernel)
    nb1, nb2 = batch
    if nb2 > _MAX_GRID_Z and bias is not None:
        raise ValueError(f"run_gemm: a bias with more than {_MAX_GRID_Z} second-level batch "
                         f"entries is not supported, got {nb2}")
    event = None
    # Some drivers cap the grid's third dimension at 65535: split larger batches.
    for i1, n1, i2, n2 in _batch_blocks(nb1, nb2, _MAX_GRID_Z):
        gsize, lsize = _launch_shape(p, M, N, n1 * n2)
        offsets = [o.offset + i1 * o.s1 + i2 * o.s2 for o in (a, b, c)]
        event = launch(
            queue, kernel, gsize, lsize,
            a.buffer, np.int32(offsets[0]), np.int32(a.ld), np.int32(a.s1), np.int32(a.s2),
            b.buffer, np.int32(offsets[1]), np.int32(b.ld), np.int32(b.s1), np.int32(b.s2),
            c.buffer, np.int32(offsets[2]), np.int32(c.ld), np.int32(c.s1), np.int32(c.s2),
            np.int32(M), np.int32(N), np.int32(K), np.int32(n2),
            a.buffer if bias is None else bias, np.int32(bias_mode), np.int32(sbias),
            *extra_args,
        )
    return event


_MAX_GRID_Z = 65535

# NOTE [ Prepared GEMM launches ]
# Deriving a launch's GemmParams (tiles, device flags, vector flags) took about a third of
# matmul's host time. Each context keeps the parameters and kernel per (config object, dtype,
# transposes, B loader, alignments): the vector flags depend on the operands' offsets, leading
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


# NOTE [ Split-K ]
# A GEMM with few output tiles and a long K (128 x 4096 x 4096 has 32 tiles of 128 x 128 for
# an H100's 132 compute units) leaves most of the GPU idle. ``config.extra["split_k"] = S``
# cuts K into S slices (a multiple of the tile depth each): the slices run as S batch entries
# of one launch (the last, shorter one as a second launch), each writing its partial product
# into an S x M x N workspace, and a third kernel sums the slices into C (adding the bias).
# float16 storage keeps one pass (its partial sums would round to half).


def _split_k(config: KernelConfig, dtype: str, M: int, N: int, K: int,
             batch: tuple[int, int], b_loader: str) -> int:
    """The number of K slices to run (0: no split)."""
    want = int(config.extra.get("split_k", 0))
    if want < 2 or batch != (1, 1) or b_loader or dtype == "float16":
        return 0
    step = max(4, config.tile_k)
    if 2 * step > K:
        return 0
    return min(want, K // step)


def _run_split_k(
    queue: Any, config: KernelConfig, dtype: str, a: Operand, b: Operand, c: Operand,
    M: int, N: int, K: int, split: int, trans_a: bool, trans_b: bool, bias: Any,
    bias_mode: int,
) -> Any:
    step = max(4, config.tile_k)
    ks = -(-K // split)
    ks = -(-ks // step) * step  # each slice a whole number of k tiles
    full, rest = divmod(K, ks)
    slices = full + (1 if rest else 0)
    work = empty(queue, (slices, M, N), dtype)
    # element strides of one K slice in A and B
    sa = ks * (a.ld if trans_a else 1)
    sb = ks * (1 if trans_b else b.ld)
    plain = dataclasses.replace(config, extra={**config.extra, "split_k": 0})
    ws = Operand(work.buffer, work.offset, N, 0, M * N)
    run_gemm(queue, plain, dtype, Operand(a.buffer, a.offset, a.ld, 0, sa),
             Operand(b.buffer, b.offset, b.ld, 0, sb), ws, M, N, ks,
             trans_a=trans_a, trans_b=trans_b, batch=(1, full))
    if rest:
        run_gemm(queue, plain, dtype, Operand(a.buffer, a.offset + full * sa, a.ld),
                 Operand(b.buffer, b.offset + full * sb, b.ld),
                 Operand(work.buffer, work.offset + full * M * N, N), M, N, rest,
                 trans_a=trans_a, trans_b=trans_b)
    kernel = cl_kernel(queue.context, "gemm_split_k_sum", mk.SPLIT_K_SUM, dtype)
    total = M * N
    local = 256
    return launch(
        queue, kernel, (-(-total // local) * local,), (local,),
        work.buffer, np.int32(work.offset), np.int32(slices), np.int32(N), np.int32(total),
        c.buffer, np.int32(c.offset), np.int32(c.ld),
        c.buffer if bias is None else bias, np.int32(bias_mode),
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


# -- the op --------------------------------------------------------------------------------


def _check_operands(
    a: Any, b: Any, transpose_a: bool, transpose_b: bool
) -> tuple[Tensor, Tensor, int, int, int]:
    op = "matmul"
    a = check_tensor(op, a, "a")
    b = check_tensor(op, b, "b")
    same_device(op, a, b)
    for name, t in (("a", a), ("b", b)):
        if t.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{op}: {name} must be a float tensor, got dtype {t.dtype}")
        if t.ndim < 2:
            raise ValueError(f"{op}: {name} must be at least 2-D, got shape {t.shape}")
    if a.dtype != b.dtype:
        raise TypeError(f"{op}: dtypes differ: a is {a.dtype}, b is {b.dtype}")
    M, Ka = (a.shape[-1], a.shape[-2]) if transpose_a else (a.shape[-2], a.shape[-1])
    Kb, N = (b.shape[-1], b.shape[-2]) if transpose_b else (b.shape[-2], b.shape[-1])
    if Ka != Kb:
        flags = "".join(
            f", {n}=True" for n, f in (("transpose_a", transpose_a), ("transpose_b", transpose_b))
            if f
        )
        raise ValueError(
            f"{op}: inner dimensions differ: a is {a.shape}, b is {b.shape}{flags}"
        )
    return a, b, M, N, Ka


def _broadcast_batch(op: str, a: Tensor, b: Tensor) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise ValueError(
            f"{op}: batch dimensions do not broadcast: a is {a.shape}, b is {b.shape}"
        ) from None


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """Matrix product ``op(a) @ op(b)`` of 2-D or batched tensors.

    Leading batch dimensions broadcast as in NumPy; ``transpose_a``/``transpose_b`` transpose
    the last two dimensions of that operand without a copy.

    Args:
        a: ``(..., M, K)`` (``(..., K, M)`` with ``transpose_a``).
        b: ``(..., K, N)`` (``(..., N, K)`` with ``transpose_b``).

    Returns:
        ``(*broadcast(batch_a, batch_b), M, N)`` in the inputs' dtype.

    Raises:
        TypeError: non-Tensor, non-float or differing dtypes.
        ValueError: fewer than 2 dimensions, inner dimensions that differ, batch dimensions
            that do not broadcast, tensors on different devices.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> from netcl.core.tensor import Tensor
        >>> q = manager.default("cpu").queue
        >>> a = Tensor.from_host(q, np.arange(6.0).reshape(2, 3))
        >>> matmul(a, a, transpose_b=True).to_host().tolist()
        [[5.0, 14.0], [14.0, 50.0]]
    """
    a, b, M, N, K = _check_operands(a, b, transpose_a, transpose_b)
    batch = _broadcast_batch("matmul", a, b)
    if a.array is not None:
        return result(a, _matmul_numpy(a.array, b.array, transpose_a, transpose_b), a.dtype)
    config = get_kernel_selector(a.queue.device).select_matmul_kernel(
        max(M, 1), max(N, 1), max(K, 1), a.dtype
    )
    return _matmul_cl(a, b, M, N, K, batch, transpose_a, transpose_b, config)


def _matmul_numpy(
    x: Any, y: Any, transpose_a: bool, transpose_b: bool
) -> np.ndarray[Any, Any]:
    dtype = x.dtype
    if transpose_a:
        x = np.swapaxes(x, -1, -2)
    if transpose_b:
        y = np.swapaxes(y, -1, -2)
    if dtype == np.float16:  # no float16 BLAS: compute in float32
        out: np.ndarray[Any, Any] = np.matmul(x.astype(np.float32), y.astype(np.float32))
        return out.astype(np.float16)
    return np.asarray(np.matmul(x, y))


def _batch_strides(shape: tuple[int, ...], batch: tuple[int, ...], mat: int) -> list[int]:
    """Element strides of ``shape``'s batch dims aligned to ``batch`` (0 where broadcast)."""
    dims = shape[:-2]
    lead = len(batch) - len(dims)
    strides = [0] * len(batch)
    step = mat
    for i in range(len(dims) - 1, -1, -1):
        strides[lead + i] = step if dims[i] != 1 else 0
        step *= dims[i]
    return strides


def _collapse(
    batch: tuple[int, ...], strides: list[list[int]]
) -> tuple[list[int], list[list[int]]]:
    """Merge adjacent batch dims that every operand walks contiguously; drop size-1 dims."""
    dims: list[int] = []
    out: list[list[int]] = [[] for _ in strides]
    for i, n in enumerate(batch):
        if n == 1:
            continue
        if dims and all(o[-1] == s[i] * n for o, s in zip(out, strides)):
            dims[-1] *= n
            for o, s in zip(out, strides):
                o[-1] = s[i]
            continue
        dims.append(n)
        for o, s in zip(out, strides):
            o.append(s[i])
    return dims, out


def _matmul_cl(
    a: Tensor, b: Tensor, M: int, N: int, K: int, batch: tuple[int, ...],
    transpose_a: bool, transpose_b: bool, config: KernelConfig,
) -> Tensor:
    out = empty(a.queue, (*batch, M, N), a.dtype)
    if out.size == 0:
        return out
    sa = _batch_strides(a.shape, batch, a.shape[-2] * a.shape[-1])
    sb = _batch_strides(b.shape, batch, b.shape[-2] * b.shape[-1])
    sc = _batch_strides(out.shape, batch, M * N)
    dims, (sa, sb, sc) = _collapse(batch, [sa, sb, sc])
    lda, ldb = a.shape[-1], b.shape[-1]
    outer = dims[:-2]
    inner = dims[-2:]
    inner_s = [s[-2:] for s in (sa, sb, sc)]
    while len(inner) < 2:
        inner.insert(0, 1)
        for s in inner_s:
            s.insert(0, 0)
    for index in np.ndindex(*outer):
        offs = [sum(i * s for i, s in zip(index, st[: len(outer)])) for st in (sa, sb, sc)]
        run_gemm(
            a.queue, config, a.dtype,
            operand(a, lda, inner_s[0][0], inner_s[0][1], offset=offs[0]),
            operand(b, ldb, inner_s[1][0], inner_s[1][1], offset=offs[1]),
            operand(out, N, inner_s[2][0], inner_s[2][1], offset=offs[2]),
            M, N, K, trans_a=transpose_a, trans_b=transpose_b,
            batch=(inner[0], inner[1]),
        )
    return out


# -- a user-facing built kernel ---------------------------------------------------------------


class MatmulKernel:
    """A built GEMM kernel: call it like :func:`matmul` (2-D or batched Tensors).

    With ``variant=None`` each call lets the selector choose by shape; otherwise the given
    variant (or full :class:`KernelConfig`) runs whatever the shape. The non-transposed
    kernel is built on construction (so build errors surface here); transposed and aligned
    versions are built on first use and cached.

    Attributes:
        config: the :class:`KernelConfig` run (``None`` when chosen per call).
        dtype: the dtype it computes in.
        kernel: the built ``pyopencl.Kernel`` (``None`` on the NumPy backend or per-call).
    """

    def __init__(self, queue_or_context: Any, config: KernelConfig | None, dtype: str) -> None:
        self.queue = queue_or_context if hasattr(queue_or_context, "finish") else None
        self.context = getattr(queue_or_context, "context", queue_or_context)
        self.config = config
        self.dtype = dtype
        self.kernel: Any = None
        if self.context is not None and config is not None:
            dev = self.context.devices[0]
            p = gemm_params(config, dtype, False, False, int(dev.max_work_group_size))
            self.kernel = gemm_kernel(self.context, for_device(p, dev))

    @property
    def source(self) -> str:
        """The OpenCL C source of the non-transposed kernel (empty on the NumPy backend)."""
        if self.config is None:
            return ""
        p = gemm_params(self.config, self.dtype, False, False)
        return mk.gemm_source(p)

    def __call__(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        """``matmul(a, b, transpose_a, transpose_b)`` with this kernel."""
        a, b, M, N, K = _check_operands(a, b, transpose_a, transpose_b)
        if a.dtype != self.dtype:
            raise TypeError(f"MatmulKernel: built for {self.dtype}, got {a.dtype} tensors")
        batch = _broadcast_batch("matmul", a, b)
        if a.array is not None:
            return result(a, _matmul_numpy(a.array, b.array, transpose_a, transpose_b), a.dtype)
        if self.context is not None and a.context is not self.context:
            raise ValueError("MatmulKernel: tensors are not on the context it was built for")
        config = self.config or get_kernel_selector(a.queue.device).select_matmul_kernel(
            max(M, 1), max(N, 1), max(K, 1), a.dtype
        )
        return _matmul_cl(a, b, M, N, K, batch, transpose_a, transpose_b, config)

    def __repr__(self) -> str:
        what = "selected per call" if self.config is None else self.config.variant.name
        return f"MatmulKernel({what}, dtype={self.dtype})"


def build_matmul_kernel(
    queue_or_context: Any,
    variant: KernelVariant | KernelConfig | str | None = None,
    dtype: str = "float32",
) -> MatmulKernel:
    """Build a GEMM kernel of one variant (default: chosen per call) for a device.

    Args:
        queue_or_context: an OpenCL queue or context, or the NumPy backend's queue.
        variant: a ``MATMUL_*`` :class:`KernelVariant` (or its name), a full
            :class:`KernelConfig` for custom tiles, or ``None``.
        dtype: float32, float16 (storage; float arithmetic) or float64.

    Raises:
        ValueError: a variant that is not a matmul kernel; an unsupported dtype.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> from netcl.core.tensor import Tensor
        >>> q = manager.default("cpu").queue
        >>> mm = build_matmul_kernel(q, "MATMUL_TILED")
        >>> x = Tensor.from_host(q, np.ones((2, 3)))
        >>> mm(x, x, transpose_b=True).to_host().tolist()
        [[3.0, 3.0], [3.0, 3.0]]
    """
    dt = canonical_dtype(dtype, "build_matmul_kernel")
    if dt not in FLOAT_DTYPES:
        raise ValueError(f"build_matmul_kernel: dtype must be a float type, got {dtype!r}")
    config: KernelConfig | None
    if variant is None:
        config = None
    elif isinstance(variant, KernelConfig):
        config = variant
    else:
        if isinstance(variant, str):
            try:
                variant = KernelVariant[variant.upper()]
            except KeyError:
                raise ValueError(f"build_matmul_kernel: no kernel variant {variant!r}") from None
        if not isinstance(variant, KernelVariant):
            raise TypeError(
                f"build_matmul_kernel: variant must be a KernelVariant, got {variant!r}"
            )
        config = default_config(variant)
    if config is not None and config.variant.family != "matmul":
        raise ValueError(
            f"build_matmul_kernel: {config.variant.name} is not a matmul kernel; use one of "
            + ", ".join(v.name for v in _VARIANT_NAMES)
        )
    if config is not None and getattr(queue_or_context, "context", queue_or_context) is not None:
        device = getattr(queue_or_context, "context", queue_or_context).devices[0]
        if variant is not None and not isinstance(variant, KernelConfig):
            # the selector's config for this variant carries the device's tile overrides
            config = _device_config(device, config.variant, dt)
    return MatmulKernel(queue_or_context, config, dt)


def _device_config(device: Any, variant: AnyVariant, dtype: str) -> KernelConfig:
    """The device's config of ``variant`` (its tile overrides) for a large problem."""
    sel = get_kernel_selector(device)
    with force_variant(variant):
        forced = sel.select_matmul_kernel(1024, 1024, 1024, dtype)
    return forced


def flops(M: int, N: int, K: int, batch: Sequence[int] = ()) -> int:
    """Floating-point operations of a matmul (2 per multiply-add)."""
    return 2 * M * N * K * math.prod(batch)
