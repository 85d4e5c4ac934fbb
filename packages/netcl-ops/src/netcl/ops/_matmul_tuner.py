"""The matmul family's tuner: shape classes, the GEMM configs timed around the rule's pick, and
their bench on scratch matrices (registered by ``_kernel_families``).

With tuning on (``NETCL_AUTOTUNE``, ``netcl.core.autotune``) the selector times, once per
shape class, the rule's pick and a few neighbours from the GEMM knob space:

- a naive pick (tiny products): the tiled kernel;
- an OpenCL CPU device: the packed-panel vectorized kernel with half the ``tile_k`` (128) and
  with 64-column panels, and the tiled kernel;
- a GPU: the tiled kernel, and the register-tiled kernel as 32x32x16 (4x4 per work-item),
  64x64x16 (4x4; 8x4 swizzled in bands of 4) and, where M and N reach 128, 128x128x8 (16x8)
  and 128x64x16 (8x8) tiles.

A shape class is ``(M, N, K)`` each rounded up to a power of two, and the dtype. Timing runs
the ``nn`` layout on scratch matrices of the query's exact sizes (random values, never the
caller's): each candidate once to build and warm up, then the best of three samples of
runs back to back (``netcl.core.selection.time_candidate``).

Examples:
    >>> from netcl.core.device_profile import extended_profile
    >>> from ._matmul_rule import MatmulQuery
    >>> matmul_class(MatmulQuery(100, 1000, 64, "float32"))
    (128, 1024, 64, 'float32')
    >>> [c.label for c in matmul_candidates(extended_profile(None), MatmulQuery(4, 4, 4),
    ...                                     KernelVariant.MATMUL_NAIVE)]
    ['MATMUL_TILED']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from netcl.core.device_profile import ExtendedDeviceProfile
from netcl.core.kernel_selector import KernelConfig, KernelVariant
from netcl.core.process import registered_queues
from netcl.core.selection import (
    AnyVariant,
    Bench,
    Candidate,
    FamilyTuner,
    params_of,
    pow2_bucket,
)
from netcl.core.tensor import Tensor

from ._matmul_launch import operand, run_gemm
from ._matmul_rule import MatmulQuery

__all__ = ["MATMUL_TUNER", "matmul_bench", "matmul_candidates", "matmul_class", "queue_for",
           "scratch"]

V = KernelVariant
REG = V.MATMUL_REGISTER_TILED
# register-tiled neighbours on GPUs: (tile_m, tile_n, tile_k, rows, columns per work-item)
GPU_REGISTER_TILES = ((32, 32, 16, 4, 4), (64, 64, 16, 4, 4))
GPU_SWIZZLED = (64, 64, 16, 8, 4)  # swizzled in bands of 4 (NVIDIA's mid tiles)
GPU_LARGE_TILES = ((128, 128, 8, 16, 8), (128, 64, 16, 8, 8))  # from M, N >= 128
CPU_TILE_K = 128
CPU_PANEL_COLUMNS = 64


def matmul_class(q: MatmulQuery) -> tuple[Any, ...]:
    """The shape class of a GEMM: ``(M, N, K)`` rounded up to powers of two, and the dtype."""
    return (pow2_bucket(q.M), pow2_bucket(q.N), pow2_bucket(q.K), q.dtype)


def _register(tm: int, tn: int, tk: int, rows: int, cols: int, **more: Any) -> Candidate:
    return Candidate(REG, params_of({"tile_m": tm, "tile_n": tn, "tile_k": tk,
                                     "work_per_thread": rows, "micro_n": cols, **more}))


def matmul_candidates(profile: ExtendedDeviceProfile, q: MatmulQuery,
                      rule: AnyVariant) -> list[Candidate]:
    """The configs timed besides the rule's pick (see the module's list)."""
    if rule is V.MATMUL_NAIVE:
        return [Candidate(V.MATMUL_TILED)]
    if profile.opencl_cpu:
        return [Candidate(V.MATMUL_VECTORIZED, params_of({"tile_k": CPU_TILE_K})),
                Candidate(V.MATMUL_VECTORIZED, params_of({"tile_n": CPU_PANEL_COLUMNS})),
                Candidate(V.MATMUL_TILED)]
    out = [Candidate(V.MATMUL_TILED), *(_register(*t) for t in GPU_REGISTER_TILES),
           _register(*GPU_SWIZZLED, swizzle=4)]
    if min(q.M, q.N) >= GPU_LARGE_TILES[0][0]:
        out += [_register(*t) for t in GPU_LARGE_TILES]
    return out


def queue_for(device: Any) -> Any | None:
    """A registered queue of ``device`` (the device manager's), or ``None``."""
    if device is None:
        return None
    for queue in registered_queues():
        if getattr(queue, "device", None) == device:
            return queue
    return None


def scratch(queue: Any, shape: tuple[int, ...], dtype: str, seed: int) -> Tensor:
    """A tensor of ``shape`` holding random values in [-1, 1) (no denormals, no NaNs)."""
    rng = np.random.default_rng(seed)
    return Tensor.from_host(queue, rng.uniform(-1.0, 1.0, shape).astype(dtype))


def matmul_bench(device: Any, profile: ExtendedDeviceProfile, q: MatmulQuery) -> Bench | None:
    """Scratch ``A (M x K)``, ``B (K x N)`` and ``C (M x N)`` on the device's queue; a config
    runs ``C = A @ B`` and waits. ``None`` without an OpenCL queue of ``device``."""
    queue = queue_for(device)
    if queue is None:
        return None
    a = scratch(queue, (q.M, q.K), q.dtype, 1)
    b = scratch(queue, (q.K, q.N), q.dtype, 2)
    c = scratch(queue, (q.M, q.N), q.dtype, 3)

    def bench(config: KernelConfig) -> Callable[[int], None]:
        oa, ob, oc = operand(a, q.K), operand(b, q.N), operand(c, q.N)

        def run(n: int) -> None:
            for _ in range(n):
                run_gemm(queue, config, q.dtype, oa, ob, oc, q.M, q.N, q.K)
            queue.finish()

        return run

    return bench


MATMUL_TUNER = FamilyTuner(shape_class=matmul_class, candidates=matmul_candidates,
                           bench=matmul_bench)
