"""TF32 tensor-core matmul for float32 (opt-in: ``set_float32_matmul_precision("high")``).

:func:`tf32_applicable` says whether :func:`matmul_tf32` runs on two tensors: float32, the
same batch dimensions (no broadcasting), an OpenCL device that passed the tensor-core probe
(:func:`~._matmul_mma.mma_verdict`: NVIDIA's driver only, ``NETCL_MMA=0`` turns it off).
``matmul`` routes float32 products here only while :func:`~._precision.tf32_allowed`
(NOTE [ Precision under capture ] in ``_precision``). Kernels: ``_matmul_mma_tf32_source``.

Examples:
    >>> import numpy as np
    >>> from netcl.core.device import manager
    >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((8, 8), np.float32))
    >>> tf32_applicable(x, x)
    False
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from netcl.core.kernels.cache import get_kernel
from netcl.core.kernels.primitives import launch
from netcl.core.tensor import Tensor

from ._common import check_tensor, empty, same_device
from ._matmul_mma import mma_verdict
from ._matmul_mma_tf32_source import Tf32Config, tf32_gemm_source, tf32_kernel_name

__all__ = ["Tf32Config", "matmul_tf32", "tf32_applicable", "tf32_config"]

_BIG = Tf32Config(bm=128, bn=128, bk=16, warps_m=2, warps_n=4)
_SMALL = Tf32Config(bm=64, bn=64, bk=16, warps_m=2, warps_n=2)
_MAX_GRID_Y = 65535


def tf32_config(M: int, N: int, K: int, batch: int = 1, compute_units: int = 132, *,
                trans_a: bool = False, trans_b: bool = False) -> Tf32Config:
    """128x128 tiles when there are enough of them to fill the device, else 64x64.

    Examples:
        >>> tf32_config(4096, 4096, 4096).label()
        '128x128x16_w2x4'
        >>> tf32_config(256, 256, 256, trans_b=True).label()
        '64x64x16_w2x2_nt'
    """
    base = _BIG if -(-M // 128) * -(-N // 128) * batch >= compute_units else _SMALL
    return _with(base, trans_a, trans_b)


@functools.lru_cache(maxsize=16)
def _with(base: Tf32Config, trans_a: bool, trans_b: bool) -> Tf32Config:
    return dataclasses.replace(base, trans_a=trans_a, trans_b=trans_b)


@functools.lru_cache(maxsize=32)
def _source(config: Tf32Config) -> str:
    return tf32_gemm_source(config)


def _dims(a: Tensor, b: Tensor, trans_a: bool, trans_b: bool) -> tuple[int, int, int, int] | None:
    """``(batch, M, N, K)``, or None when the operands do not multiply without broadcasting."""
    if a.ndim != b.ndim or a.ndim < 2 or a.shape[:-2] != b.shape[:-2]:
        return None
    M, Ka = (a.shape[-1], a.shape[-2]) if trans_a else (a.shape[-2], a.shape[-1])
    Kb, N = (b.shape[-1], b.shape[-2]) if trans_b else (b.shape[-2], b.shape[-1])
    if Ka != Kb:
        return None
    return int(np.prod(a.shape[:-2], dtype=np.int64)), M, N, Ka


def tf32_applicable(a: Tensor, b: Tensor, transpose_a: bool = False,
                    transpose_b: bool = False) -> bool:
    """Whether :func:`matmul_tf32` runs on ``a`` and ``b`` (see the module docstring).
    Never raises."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor) or a.array is not None:
        return False
    if a.dtype != "float32" or b.dtype != "float32" or a.queue is not b.queue:
        return False
    dims = _dims(a, b, transpose_a, transpose_b)
    if dims is None or min(dims) < 1 or max(a.size, b.size, dims[0] * dims[1] * dims[2]) >= 2**31:
        return False
    return mma_verdict(a.queue)[0]


def matmul_tf32(a: Tensor, b: Tensor, *, transpose_a: bool = False, transpose_b: bool = False,
                config: Tf32Config | None = None) -> Tensor:
    """``op(a) @ op(b)`` of float32 tensors on TF32 tensor cores (float32 accumulation).

    Args:
        a: float32, (..., M, K); (..., K, M) with ``transpose_a``.
        b: float32, (..., K, N) with the same leading dimensions; (..., N, K) with
            ``transpose_b``.
        config: tiles (default :func:`tf32_config`); ``Tf32Config(emulate=True, ...)`` runs
            on any OpenCL device.

    Returns:
        A new float32 (..., M, N) tensor.

    Raises:
        TypeError: a non-Tensor or a dtype other than float32.
        ValueError: shapes that do not multiply (or would broadcast).
        RuntimeError: no usable tensor cores on the device (the probe's reason).

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((8, 8), np.float32))
        >>> matmul_tf32(x, x)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        RuntimeError: matmul_tf32: no tensor cores on this device: the NumPy backend has no ...
    """
    op = "matmul_tf32"
    check_tensor(op, a, "a")
    check_tensor(op, b, "b")
    if a.dtype != "float32" or b.dtype != "float32":
        raise TypeError(f"{op}: needs float32 tensors, got {a.dtype} and {b.dtype}")
    queue = same_device(op, a, b)
    if getattr(queue, "device", None) is None:
        raise RuntimeError(f"{op}: no tensor cores on this device: the NumPy backend has no "
                           "tensor cores")
    if config is None or not config.emulate:
        ok, reason = mma_verdict(queue)
        if not ok:
            raise RuntimeError(f"{op}: no tensor cores on this device: {reason}")
    dims = _dims(a, b, transpose_a, transpose_b)
    if dims is None:
        raise ValueError(f"{op}: needs tensors of 2 or more dimensions with the same batch "
                         f"dimensions and equal inner dimensions, got {a.shape} and {b.shape} "
                         f"(transpose_a={transpose_a}, transpose_b={transpose_b})")
    batch, M, N, K = dims
    if config is None:
        units = int(getattr(queue.device, "max_compute_units", 132))
        config = tf32_config(M, N, K, batch, units, trans_a=transpose_a, trans_b=transpose_b)
    elif (config.trans_a, config.trans_b) != (transpose_a, transpose_b):
        config = _with(config, transpose_a, transpose_b)
    c = empty(queue, (*a.shape[:-2], M, N), "float32")
    if min(batch, M, N) == 0:
        return c
    if K == 0:
        return Tensor.from_shape(queue, c.shape, "float32", fill=0)
    a.wait()
    b.wait()
    kernel = get_kernel(queue.context, _source(config), tf32_kernel_name(config))
    lds = (M if transpose_a else K, K if transpose_b else N, N)
    strides = (M * K, K * N, M * N) if batch > 1 else (0, 0, 0)
    tiles = -(-M // config.bm) * -(-N // config.bn)
    i32, i64 = np.int32, np.int64
    for first in range(0, batch, _MAX_GRID_Y):  # NVIDIA caps a grid's second dimension
        count = min(_MAX_GRID_Y, batch - first)
        oa, ob, oc = (o + first * s for o, s in zip((a.offset, b.offset, c.offset), strides))
        launch(queue, kernel, (tiles * config.threads, count), (config.threads, 1),
               a.buffer, i64(oa), i32(lds[0]), i64(strides[0]),
               b.buffer, i64(ob), i32(lds[1]), i64(strides[1]),
               c.buffer, i64(oc), i32(lds[2]), i64(strides[2]), i32(M), i32(N), i32(K))
    return c
