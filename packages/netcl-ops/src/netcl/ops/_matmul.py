"""``matmul`` and ``build_matmul_kernel``, on the GEMM kernel family.

On the NumPy backend ``matmul`` is ``np.matmul`` (BLAS; float16 goes through float32). On
OpenCL the :class:`~netcl.core.kernel_selector.KernelSelector` picks one of four GEMM kernels
(``MATMUL_NAIVE``, ``MATMUL_TILED``, ``MATMUL_REGISTER_TILED``, ``MATMUL_VECTORIZED``) and its
tile sizes; ``run_gemm`` (``_matmul_launch``, also used by the convolution ops) launches it.
Kernels are built once per (context, parameters) by ``gemm_family`` (``_matmul_family``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES, canonical_dtype
from netcl.core.kernel_selector import (
    AnyVariant,
    KernelConfig,
    KernelVariant,
    default_config,
    force_variant,
    get_kernel_selector,
)
from netcl.core.selection import forced_variant
from netcl.core.tensor import Tensor

from ._common import check_tensor, empty, same_device
from ._elementwise_dispatch import np_result
from ._launch import device_buffer, queue_facts
from ._matmul_family import VARIANT_NAMES, for_device, gemm_family, gemm_params
from ._matmul_launch import Operand, run_gemm, select_gemm
from ._matmul_mma import matmul_mma, mma_applicable
from ._matmul_mma_tf32 import matmul_tf32, tf32_applicable
from ._precision import tf32_allowed

__all__ = ["MatmulKernel", "build_matmul_kernel", "matmul"]

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


#: NumPy matmul signatures (shapes, dtypes, transposes) whose checks passed
_NP_CHECKED: set[tuple[Any, ...]] = set()


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
    if (tf32_allowed() and forced_variant("matmul") is None
            and tf32_applicable(a, b, transpose_a, transpose_b)):
        # float32 on TF32 tensor cores, opted into (NOTE [ Precision under capture ])
        return matmul_tf32(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    if isinstance(a, Tensor) and a.array is None and isinstance(b, Tensor) and b.array is None:
        key = _plan_key(a, b, transpose_a, transpose_b)
        known = _plans.get(key)
        if known is not None:  # NOTE [ Remembered matmul plans ]
            return _run_plan(known, a, b)
        if key in _mma_keys:  # a signature the tensor cores took before: no checks again
            return matmul_mma(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    if isinstance(a, Tensor) and a.array is not None and isinstance(b, Tensor) and (
            b.array is not None
            and (a.shape, b.shape, a.dtype, b.dtype, transpose_a, transpose_b) in _NP_CHECKED):
        # a NumPy signature checked before (the NumPy queue is one): no checks again
        return np_result(a, a.dtype, _matmul_numpy, a.array, b.array, transpose_a, transpose_b)
    a, b, M, N, K = _check_operands(a, b, transpose_a, transpose_b)
    batch = _broadcast_batch("matmul", a, b)
    if a.array is not None:
        if len(_NP_CHECKED) >= 1024:
            _NP_CHECKED.clear()
        _NP_CHECKED.add((a.shape, b.shape, a.dtype, b.dtype, transpose_a, transpose_b))
        return np_result(a, a.dtype, _matmul_numpy, a.array, b.array, transpose_a, transpose_b)
    if (a.dtype == "float16" and forced_variant("matmul") is None
            and mma_applicable(a, b, transpose_a, transpose_b)):
        # tensor cores on NVIDIA devices that passed the probe (NOTE [ What bounds the
        # tensor-core GEMM ] in ._matmul_mma): same batch dimensions, 16-byte rows
        if len(_mma_keys) >= _MAX_PLANS:
            _mma_keys.clear()
        _mma_keys.add(_plan_key(a, b, transpose_a, transpose_b))
        return matmul_mma(a, b, transpose_a=transpose_a, transpose_b=transpose_b)
    config = _select(a, M, N, K, batch)
    plan = _plan_cl(a, b, M, N, K, batch, transpose_a, transpose_b, config)
    out = _run_plan(plan, a, b)
    if len(_plans) >= _MAX_PLANS:
        _plans.clear()
    _plans[_plan_key(a, b, transpose_a, transpose_b)] = plan
    return out


def _select(a: Tensor, M: int, N: int, K: int, batch: tuple[int, ...]) -> KernelConfig:
    """The selector's config for ``batch`` products (:func:`~._matmul_launch.select_gemm`)."""
    return select_gemm(a.queue.device, M, N, K, a.dtype, math.prod(batch))


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


# NOTE [ Remembered matmul plans ]
# On OpenCL, everything a matmul derives before launching (the checks, the broadcast batch,
# the kernel selection, the collapsed batch strides and the per-launch operand layouts) is a
# function of the operands' shapes, dtypes and offsets, the transposes, their queues and the
# selector's matmul epoch. The first successful call remembers the result as a _Plan; a
# repeated one allocates the output and runs the plan with the three buffers filled in
# (device_buffer still raises for a released operand). Bounded, cleared when full.

Layout = tuple[int, int, int, int]  # element offset, leading dimension, batch strides s1, s2


@dataclass(frozen=True)
class _Plan:
    shape: tuple[int, ...]  # of the output
    config: KernelConfig
    M: int
    N: int
    K: int
    trans: tuple[bool, bool]
    runs: tuple[tuple[Layout, Layout, Layout, tuple[int, int]], ...]  # a, b, out, batch


_plans: dict[tuple[Any, ...], _Plan] = {}
_mma_keys: set[tuple[Any, ...]] = set()  # plan keys whose product runs on the tensor cores
_MAX_PLANS = 1024


def _plan_key(a: Tensor, b: Tensor, transpose_a: bool, transpose_b: bool) -> tuple[Any, ...]:
    epoch = queue_facts(a.queue)[1].epoch("matmul")
    return (a.shape, a.dtype, a.offset, b.shape, b.dtype, b.offset, transpose_a, transpose_b,
            a.queue, b.queue, epoch)


def _plan_cl(
    a: Tensor, b: Tensor, M: int, N: int, K: int, batch: tuple[int, ...],
    transpose_a: bool, transpose_b: bool, config: KernelConfig,
) -> _Plan:
    shape = (*batch, M, N)
    if math.prod(shape) == 0:
        return _Plan(shape, config, M, N, K, (transpose_a, transpose_b), ())
    sa = _batch_strides(a.shape, batch, a.shape[-2] * a.shape[-1])
    sb = _batch_strides(b.shape, batch, b.shape[-2] * b.shape[-1])
    sc = _batch_strides(shape, batch, M * N)
    dims, strides = _collapse(batch, [sa, sb, sc])
    lds = (a.shape[-1], b.shape[-1], N)
    outer = dims[:-2]
    inner = dims[-2:]
    inner_s = [s[-2:] for s in strides]
    while len(inner) < 2:
        inner.insert(0, 1)
        for s in inner_s:
            s.insert(0, 0)
    runs = []
    for index in np.ndindex(*outer):
        offs = [sum(i * s for i, s in zip(index, st[: len(outer)])) for st in strides]
        la, lb, lc = ((offs[k], lds[k], inner_s[k][0], inner_s[k][1]) for k in range(3))
        runs.append((la, lb, lc, (inner[0], inner[1])))
    return _Plan(shape, config, M, N, K, (transpose_a, transpose_b), tuple(runs))


def _run_plan(p: _Plan, a: Tensor, b: Tensor) -> Tensor:
    out = empty(a.queue, p.shape, a.dtype)
    if not p.runs:
        return out
    bufs = (device_buffer(a), device_buffer(b), device_buffer(out))
    base = (a.offset, b.offset, out.offset)
    for la, lb, lc, batch in p.runs:
        a_op, b_op, c_op = (Operand(bufs[k], base[k] + o, ld, s1, s2)
                            for k, (o, ld, s1, s2) in enumerate((la, lb, lc)))
        run_gemm(a.queue, p.config, a.dtype, a_op, b_op, c_op, p.M, p.N, p.K,
                 trans_a=p.trans[0], trans_b=p.trans[1], batch=batch)
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
            self.kernel = gemm_family(self.context, for_device(p, dev)).kernel

    @property
    def source(self) -> str:
        """The OpenCL C source of the non-transposed kernel (empty on the NumPy backend)."""
        if self.config is None:
            return ""
        p = gemm_params(self.config, self.dtype, False, False)
        return gemm_family.source(p).program

    def __call__(
        self, a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False
    ) -> Tensor:
        """``matmul(a, b, transpose_a, transpose_b)`` with this kernel."""
        a, b, M, N, K = _check_operands(a, b, transpose_a, transpose_b)
        if a.dtype != self.dtype:
            raise TypeError(f"MatmulKernel: built for {self.dtype}, got {a.dtype} tensors")
        batch = _broadcast_batch("matmul", a, b)
        if a.array is not None:
            return np_result(a, a.dtype, _matmul_numpy, a.array, b.array, transpose_a,
                             transpose_b)
        if self.context is not None and a.context is not self.context:
            raise ValueError("MatmulKernel: tensors are not on the context it was built for")
        config = self.config or _select(a, M, N, K, batch)
        plan = _plan_cl(a, b, M, N, K, batch, transpose_a, transpose_b, config)
        return _run_plan(plan, a, b)

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
            + ", ".join(v.name for v in VARIANT_NAMES)
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
