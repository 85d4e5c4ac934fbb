"""Tensor-core GEMM for float16 storage on NVIDIA's OpenCL driver (inline PTX ``mma.sync``).

:func:`mma_available` says whether a queue's device runs the kernels of
:mod:`._matmul_mma_source`: only NVIDIA's own OpenCL driver is asked, and there one tiny
kernel (``cp.async`` into local memory, ``ldmatrix`` out, one ``mma.sync``) is built, run and
checked against NumPy; the verdict is kept per device and driver for the process. Other
devices are never asked to build the PTX: PoCL's LLVM aborts the whole process on it.

:func:`run_hgemm_mma` launches ``C = op(A) @ op(B)`` on buffers (float16 A and B, float32 or
float16 C, f32 accumulation); :func:`matmul_mma` is the same on Tensors. Both take an
explicit :class:`MmaConfig`; ``MmaConfig(emulate=True, ...)`` runs the same kernel with its
PTX emulated in plain C on any OpenCL device (NOTE [ Emulated PTX ]), which is how CPU
devices test everything but the instructions themselves.

# NOTE [ Tensor-core verdict cache ]
# The verdict lives in this process only (a dict keyed by platform, device and driver):
# netcl-core's probe cache (device_probe.py) has no slot for per-op capabilities and the rule
# is that ops does not edit core. It costs one small program per process, and after the
# first run that program comes from netcl's on-disk binary cache (get_kernel), so the probe
# is a cache read and one 32-work-item launch. ``NETCL_MMA=0`` turns the kernels off.

Examples:
    >>> from netcl.core.device import manager
    >>> mma_verdict(manager.default("cpu").queue)
    (False, 'the NumPy backend has no tensor cores')
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Any

import numpy as np

from netcl.core.capabilities import vendor_family_of
from netcl.core.env import env_flag
from netcl.core.kernels.cache import get_kernel
from netcl.core.kernels.primitives import launch
from netcl.core.tensor import Tensor

from ._common import check_tensor, empty, same_device
from ._matmul_mma_source import (
    PROBE_SOURCE,
    MmaConfig,
    hgemm_alignment_ok,
    hgemm_kernel_name,
    hgemm_source,
)

__all__ = [
    "MMA_ENV",
    "MmaConfig",
    "matmul_mma",
    "mma_applicable",
    "mma_available",
    "mma_config",
    "mma_split_k",
    "mma_verdict",
    "run_hgemm_mma",
]

MMA_ENV = "NETCL_MMA"

# NOTE [ Tensor-core tile choice ]
# H100 SXM, NVIDIA OpenCL 580.159.04, float16 (benchmarks/probe_mma.py, three runs,
# benchmarks/results/h100/probe_mma.txt; TFLOP/s from kernel events at 2048^3 / 4096^3):
# 128x128x32 work-group tiles of four 64x64 warps with 3 stages ran 191 / 231 (254 registers,
# two work-groups per SM; torch.matmul float16 418 / 651); 2 stages 179 / 210; 128x256 and
# 256x128 (eight 64x64 warps, 2 stages, one work-group per SM) 155 / 175 and 147 / 169;
# 64x128 (two 64x64 warps, 4 stages) 139 / 162; 64x64 109 / 126. Big tiles win once there are
# enough of them to fill the SMs; below that smaller ones keep every SM busy: at 1024^3 the
# 64x128 tiles ran 87-91 against 72-75 for 128x128 (torch.matmul: 73-80).
_BIG = MmaConfig(bm=128, bn=128, bk=32, warps_m=2, warps_n=2, stages=3)
_MEDIUM = MmaConfig(bm=64, bn=128, bk=32, warps_m=1, warps_n=2, stages=4)
_SMALL = MmaConfig(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, stages=4)

_MAX_GRID_Y = 65535

_verdicts: dict[str, tuple[bool, str]] = {}
_lock = threading.Lock()


def mma_verdict(queue: Any) -> tuple[bool, str]:
    """``(True, "")`` when ``queue``'s device runs the tensor-core kernels, else ``(False,
    reason)``. Probes once per device and driver in a process; never raises.

    Examples:
        >>> from netcl.core.device import manager
        >>> mma_verdict(manager.default("cpu").queue)[0]
        False
    """
    dev = getattr(queue, "device", None)
    if dev is None:
        return (False, "the NumPy backend has no tensor cores")
    if not env_flag(MMA_ENV, True):
        return (False, f"{MMA_ENV}=0")
    try:
        family = vendor_family_of(dev.vendor, dev.name, dev.version)
        key = "|".join(s.strip() for s in (dev.platform.name, dev.name, dev.driver_version))
    except Exception as exc:  # a stand-in or a broken device object
        return (False, f"cannot read the device: {exc!r}")
    if family != "nvidia":
        return (False, f"inline PTX needs NVIDIA's OpenCL driver, this is {family}")
    with _lock:
        verdict = _verdicts.get(key)
        if verdict is None:
            verdict = _verdicts[key] = _probe(queue)
    return verdict


def mma_available(queue: Any) -> bool:
    """Whether ``queue``'s device runs the tensor-core kernels (see :func:`mma_verdict`).

    Examples:
        >>> from netcl.core.device import manager
        >>> mma_available(manager.default("cpu").queue)
        False
    """
    return mma_verdict(queue)[0]


def _probe(queue: Any) -> tuple[bool, str]:
    """Build and run the probe kernel on ``queue``; compare with NumPy."""
    rng = np.random.default_rng(16)
    a = rng.uniform(-1, 1, (16, 16)).astype(np.float16)
    b = rng.uniform(-1, 1, (16, 8)).astype(np.float16)
    try:
        kernel = get_kernel(queue.context, PROBE_SOURCE, "mma_probe")
        ta = Tensor.from_host(queue, a, dtype="float16")
        tb = Tensor.from_host(queue, b, dtype="float16")
        tc = empty(queue, (16, 8), "float32")
        info = empty(queue, (2,), "int32")
        launch(queue, kernel, (32,), (32,), ta, tb, tc, info)
        got = tc.to_host()
    except Exception as exc:  # a build failure (old GPU, new driver), a launch error
        return (False, f"the mma probe kernel failed: {str(exc).splitlines()[0][:200]}")
    want = a.astype(np.float64) @ b.astype(np.float64)
    err = float(np.abs(got - want).max())
    if not err < 1e-3:
        return (False, f"the mma probe kernel computed wrong values (max error {err:.3g})")
    return (True, "")


def mma_config(
    M: int, N: int, K: int, batch: int = 1, compute_units: int = 132, *,
    trans_a: bool = False, trans_b: bool = False, out_f16: bool = True,
) -> MmaConfig:
    """The tile configuration for one GEMM (NOTE [ Tensor-core tile choice ]).

    Examples:
        >>> mma_config(4096, 4096, 4096).label()
        '128x128x32_w2x2_s3_g8_h'
        >>> mma_config(256, 256, 256, out_f16=False).label()
        '64x64x32_w2x2_s4_g8'
    """
    for base in (_BIG, _MEDIUM):
        tiles = -(-M // base.bm) * -(-N // base.bn) * batch
        if tiles >= compute_units:
            break
    else:
        base = _SMALL
    return _with(base, trans_a, trans_b, out_f16)


# NOTE [ Tensor-core split-K ]
# A weight gradient dY^T X has a small M x N and a long K (the charlm GPT: 384 x 384 x 8192):
# 36 tiles of 64 x 64 for an H200's 132 SMs, so the AMP step's ``hgemm_mma_tn`` launches ran
# at ~32 TFLOP/s (2.8 of its 25 ms; kernel table of bench_gpt_step --kernels); 1536 x 384 x
# 8192 (144 tiles, one wave) ran at 102, 0.24x cuBLAS (scripts/gpu/gemm_shapes.py). With few tiles
# K is cut into S slices (each at least 512 deep, a whole number of k tiles) that run as S
# batch entries of one launch into an S x M x N float32 workspace (a shorter last slice as a
# second launch), and ``hgemm_split_sum_*`` adds the slices in slice order into C (float16
# rounded once, from the float32 sum).
_SPLIT_MIN_DEPTH = 512

# Split-K's sum: C = the S float32 slices of the workspace added in slice order, stored as
# float16 (``_h``: rounded to nearest even) or float32 (``_f``), one kernel per output type.
_SPLIT_SUM = """
__kernel void hgemm_split_sum_NAME(__global const float* w, const long wo, const int S,
                                   const long MN, __global OUT* c, const long co) {
  const long i = get_global_id(0);
  if (i >= MN) return;
  w += wo;
  float s = w[i];
  for (int q = 1; q < S; ++q) s += w[(long)q * MN + i];
  STORE;
}
"""
_SPLIT_SUM_SOURCE = "".join(
    _SPLIT_SUM.replace("NAME", name).replace("OUT", out).replace("STORE", store)
    for name, out, store in (("h", "half", "vstore_half_rte(s, co + i, c)"),
                             ("f", "float", "c[co + i] = s")))


def mma_split_k(M: int, N: int, K: int, batch: int, compute_units: int, config: MmaConfig
                ) -> int:
    """How many K slices :func:`matmul_mma` runs (1: no split; NOTE [ Tensor-core split-K ]):
    up to 2 tiles per compute unit split into about 4 work-groups per compute unit (several
    64 x 64 work-groups fit on one), each slice >= 512 deep, at most 16 slices.

    Examples:
        >>> mma_split_k(384, 384, 8192, 1, 132, mma_config(384, 384, 8192))
        15
        >>> mma_split_k(1536, 384, 8192, 1, 132, mma_config(1536, 384, 8192))
        4
        >>> mma_split_k(4096, 4096, 4096, 1, 132, mma_config(4096, 4096, 4096))
        1
    """
    tiles = -(-M // config.bm) * -(-N // config.bn) * batch
    if batch != 1 or tiles > 2 * compute_units:
        return 1
    return max(1, min(-(-4 * compute_units // tiles), K // _SPLIT_MIN_DEPTH, 16))


@functools.lru_cache(maxsize=64)
def _with(base: MmaConfig, trans_a: bool, trans_b: bool, out_f16: bool) -> MmaConfig:
    """``base`` with the layouts and output dtype of one call (one object per combination)."""
    return dataclasses.replace(base, trans_a=trans_a, trans_b=trans_b, out_f16=out_f16)


@functools.lru_cache(maxsize=64)
def _source(config: MmaConfig) -> str:
    return hgemm_source(config)


def run_hgemm_mma(
    queue: Any, config: MmaConfig, a: Any, b: Any, c: Any, M: int, N: int, K: int, *,
    offsets: tuple[int, int, int] = (0, 0, 0), lds: tuple[int, int, int] | None = None,
    batch: int = 1, batch_strides: tuple[int, int, int] = (0, 0, 0),
) -> Any:
    """Launch ``C[i] = op(A[i]) @ op(B[i])`` for ``i < batch``; return the kernel's event.

    ``a``, ``b`` are buffers of float16 (A M x K, or K x M with ``config.trans_a``; B K x N,
    or N x K with ``config.trans_b``), ``c`` of float16 or float32 (``config.out_f16``), all
    row-major with element ``offsets``, leading dimensions ``lds`` (default: packed) and
    ``batch_strides`` in elements. The caller checks :func:`mma_applicable` (non-emulated
    configs need :func:`mma_available` too).

    Raises:
        ValueError: sizes below 1, or operands the kernel cannot read in 16-byte rows.
    """
    if min(M, N, K, batch) < 1:
        raise ValueError(f"run_hgemm_mma: sizes must be >= 1, got M={M}, N={N}, K={K}, "
                         f"batch={batch}")
    if lds is None:
        lds = (M if config.trans_a else K, K if config.trans_b else N, N)
    if not hgemm_alignment_ok(config, M, N, K, offsets, lds, batch_strides):
        raise ValueError(
            "run_hgemm_mma: tensor-core GEMM needs the contiguous sizes, leading dimensions, "
            "offsets and batch strides of A and B to be multiples of 8 elements and those of C "
            f"even, got M={M}, N={N}, K={K}, offsets={offsets}, lds={lds}, "
            f"batch_strides={batch_strides}, transposes={(config.trans_a, config.trans_b)}"
        )
    kernel = get_kernel(queue.context, _source(config), hgemm_kernel_name(config))
    tiles = -(-M // config.bm) * -(-N // config.bn)
    i32, i64 = np.int32, np.int64
    event = None
    for first in range(0, batch, _MAX_GRID_Y):  # NVIDIA caps a grid's second dimension
        count = min(_MAX_GRID_Y, batch - first)
        oa, ob, oc = (o + first * s for o, s in zip(offsets, batch_strides))
        event = launch(
            queue, kernel, (tiles * config.threads, count), (config.threads, 1),
            a, i64(oa), i32(lds[0]), i64(batch_strides[0]),
            b, i64(ob), i32(lds[1]), i64(batch_strides[1]),
            c, i64(oc), i32(lds[2]), i64(batch_strides[2]),
            i32(M), i32(N), i32(K),
        )
    return event


def _dims(op: str, a: Tensor, b: Tensor, trans_a: bool, trans_b: bool
          ) -> tuple[int, int, int, int]:
    """``(batch, M, N, K)`` of a product whose operands have the same leading (batch) shape;
    ValueError otherwise. ``batch`` is the product of the leading dimensions."""
    if a.ndim != b.ndim or a.ndim < 2 or a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"{op}: needs two tensors of 2 or more dimensions with the same batch "
                         f"dimensions (no broadcasting), got {a.shape} and {b.shape}")
    batch = int(np.prod(a.shape[:-2], dtype=np.int64))
    M, Ka = (a.shape[-1], a.shape[-2]) if trans_a else (a.shape[-2], a.shape[-1])
    Kb, N = (b.shape[-1], b.shape[-2]) if trans_b else (b.shape[-2], b.shape[-1])
    if Ka != Kb:
        raise ValueError(f"{op}: inner dimensions differ, got {a.shape} (transpose_a={trans_a}) "
                         f"and {b.shape} (transpose_b={trans_b})")
    return batch, M, N, Ka


def mma_applicable(a: Tensor, b: Tensor, transpose_a: bool = False,
                   transpose_b: bool = False) -> bool:
    """Whether :func:`matmul_mma` can run on ``a`` and ``b`` as they are: float16 tensors with
    the same batch dimensions on a device that passed the probe, with 16-byte rows.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((16, 16)), dtype="float16")
        >>> mma_applicable(x, x)
        False
    """
    if a.dtype != "float16" or b.dtype != "float16" or a.queue is not b.queue:
        return False
    try:
        batch, M, N, K = _dims("mma_applicable", a, b, transpose_a, transpose_b)
    except ValueError:
        return False
    if min(batch, M, N, K) < 1:
        return False
    config = mma_config(M, N, K, batch, trans_a=transpose_a, trans_b=transpose_b)
    lds = (M if transpose_a else K, K if transpose_b else N, N)
    strides = (M * K, K * N, M * N) if batch > 1 else (0, 0, 0)
    offsets = (a.offset, b.offset, 0)
    return hgemm_alignment_ok(config, M, N, K, offsets, lds, strides) and mma_available(a.queue)


def matmul_mma(
    a: Tensor, b: Tensor, *, transpose_a: bool = False, transpose_b: bool = False,
    out_dtype: str = "float16", config: MmaConfig | None = None, split_k: int = 0,
) -> Tensor:
    """``op(a) @ op(b)`` of float16 tensors on the tensor cores (f32 accumulation).

    Args:
        a: float16, (..., M, K); (..., K, M) with ``transpose_a``.
        b: float16, (..., K, N) with the same leading dimensions; (..., N, K) with
            ``transpose_b``.
        out_dtype: ``"float16"`` (rounded to nearest even) or ``"float32"``.
        config: tiles to use (default :func:`mma_config`); ``MmaConfig(emulate=True, ...)``
            runs on any OpenCL device.
        split_k: K slices (NOTE [ Tensor-core split-K ]): 0 picks (:func:`mma_split_k`),
            1 runs one pass; splits apply to unbatched products.

    Returns:
        A new (..., M, N) tensor of ``out_dtype``.

    Raises:
        TypeError: a non-Tensor or a dtype other than float16.
        ValueError: shapes that do not multiply, sizes the kernel cannot read in 16-byte rows
            (:func:`mma_applicable`), or an ``out_dtype`` other than float16/float32.
        RuntimeError: the device has no usable tensor cores (:func:`mma_verdict`'s reason).

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((8, 8)), dtype="float16")
        >>> matmul_mma(x, x)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        RuntimeError: matmul_mma: no tensor cores on this device: the NumPy backend has no ...
    """
    op = "matmul_mma"
    check_tensor(op, a, "a")
    check_tensor(op, b, "b")
    if a.dtype != "float16" or b.dtype != "float16":
        raise TypeError(f"{op}: needs float16 tensors, got {a.dtype} and {b.dtype}")
    if out_dtype not in ("float16", "float32"):
        raise ValueError(f"{op}: out_dtype must be float16 or float32, got {out_dtype!r}")
    queue = same_device(op, a, b)
    if getattr(queue, "device", None) is None:
        raise RuntimeError(f"{op}: no tensor cores on this device: the NumPy backend has no "
                           "tensor cores")
    if config is None or not config.emulate:
        ok, reason = mma_verdict(queue)
        if not ok:
            raise RuntimeError(f"{op}: no tensor cores on this device: {reason}")
    batch, M, N, K = _dims(op, a, b, transpose_a, transpose_b)
    out_f16 = out_dtype == "float16"
    if config is None:
        units = int(getattr(queue.device, "max_compute_units", 132))
        config = mma_config(M, N, K, batch, units, trans_a=transpose_a, trans_b=transpose_b,
                            out_f16=out_f16)
    elif (config.trans_a, config.trans_b, config.out_f16) != (transpose_a, transpose_b, out_f16):
        config = _with(config, transpose_a, transpose_b, out_f16)
    a.wait()
    b.wait()
    c = empty(queue, (*a.shape[:-2], M, N), out_dtype)
    if split_k == 0:
        units = int(getattr(queue.device, "max_compute_units", 132))
        split_k = mma_split_k(M, N, K, batch, units, config)
    if split_k > 1 and batch == 1:
        _split(queue, config, a, b, c, M, N, K, split_k, transpose_a, transpose_b)
        return c
    strides = (M * K, K * N, M * N) if batch > 1 else (0, 0, 0)
    run_hgemm_mma(queue, config, a.buffer, b.buffer, c.buffer, M, N, K,
                  offsets=(a.offset, b.offset, c.offset), batch=batch, batch_strides=strides)
    return c


def _split(queue: Any, config: MmaConfig, a: Tensor, b: Tensor, c: Tensor, M: int, N: int,
           K: int, split: int, trans_a: bool, trans_b: bool) -> None:
    """``c = op(a) @ op(b)`` as ``split`` K slices and their sum (NOTE [ Tensor-core
    split-K ])."""
    ks = -(-K // split)
    ks = -(-ks // config.bk) * config.bk  # a whole number of k tiles (and of 8 elements)
    full, rest = divmod(K, ks)
    slices = full + (1 if rest else 0)
    work = empty(queue, (slices, M, N), "float32")
    wide = _with(config, trans_a, trans_b, False)
    lds = (M if trans_a else K, K if trans_b else N, N)
    sa = ks * (lds[0] if trans_a else 1)  # elements from one K slice to the next
    sb = ks * (1 if trans_b else lds[1])
    run_hgemm_mma(queue, wide, a.buffer, b.buffer, work.buffer, M, N, ks,
                  offsets=(a.offset, b.offset, work.offset), lds=lds, batch=full,
                  batch_strides=(sa, sb, M * N))
    if rest:
        run_hgemm_mma(queue, wide, a.buffer, b.buffer, work.buffer, M, N, rest,
                      offsets=(a.offset + full * sa, b.offset + full * sb,
                               work.offset + full * M * N), lds=lds)
    name = "hgemm_split_sum_h" if c.dtype == "float16" else "hgemm_split_sum_f"
    kernel = get_kernel(queue.context, _SPLIT_SUM_SOURCE, name)
    total = M * N
    launch(queue, kernel, (-(-total // 256) * 256,), (256,), work.buffer,
           np.int64(work.offset), np.int32(slices), np.int64(total), c.buffer,
           np.int64(c.offset))
