"""The conv2d family's tuner: shape classes, the variants timed against the rule's pick, and
their bench on scratch tensors (registered by ``_kernel_families``).

With tuning on (``NETCL_AUTOTUNE``, ``netcl.core.autotune``) the selector times, once per
shape class and direction (forward, data or weight gradient), every conv2d variant that
applies to the query (the naive kernel only where the rule picks it) and, on GPUs, the
register-tiled implicit GEMM (``CONV2D_IMPLICIT_TILED``) and the phase data gradient
(``CONV2D_IGEMM_PHASE``, where it applies) in each of their tilings
(``_conv_igemm_kernels.TILINGS``).

A shape class is the batch, the input and output channels and the input plane's height and
width each rounded up to a power of two, with the window, stride, padding, dilation, groups,
dtype and direction exact, and :data:`CLASS_VERSION` (so every variant that applies to one
query of a class applies to the others, except where the local-memory fit of the tiled-local
kernel changes: the selector checks that per query). Timing runs the variant's runner
(``_conv.RUNNERS``, ``DATA_RUNNERS``, ``WEIGHT_RUNNERS``) on scratch tensors of the query's
exact shapes.

Examples:
    >>> from ._conv_rule import ConvQuery, parse_conv2d
    >>> conv_class(ConvQuery(parse_conv2d(3, 5, 30, 30, 7, 3, 3, 1, 1).geometry, "float32",
    ...                      "data"))
    (4, 8, 32, 32, 8, 3, 3, (1, 1), (1, 1), (1, 1), 1, 'float32', 'data', 3)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from netcl.core.device_profile import ExtendedDeviceProfile
from netcl.core.kernel_selector import KernelConfig, KernelVariant
from netcl.core.selection import (
    AnyVariant,
    Bench,
    Candidate,
    FamilyTuner,
    params_of,
    pow2_bucket,
    variant_named,
    variant_names,
)

from ._conv import DATA_RUNNERS, RUNNERS, WEIGHT_RUNNERS, _data_columns, _weight_columns
from ._conv_igemm_kernels import TILINGS
from ._conv_rule import IMPLICIT_TILED, PHASE_DATA, WINOGRAD_F4, ConvQuery, phase_data_applies
from ._matmul_tuner import queue_for, scratch

__all__ = ["CONV2D_TUNER", "conv_bench", "conv_candidates", "conv_class"]


# The last element of a class: bumped when the candidates change, so winners stored by an
# earlier version (per device and driver, on disk) are not reused (2: NOTE [ Winograd is not
# tuned on GPUs ]; 3: CONV2D_IGEMM_PHASE and its tilings, NOTE [ Phase-specialized data
# gradient ]).
CLASS_VERSION = 3


def conv_class(q: ConvQuery) -> tuple[Any, ...]:
    """The shape class of a convolution (see the module)."""
    g = q.geometry
    return (pow2_bucket(g.n), pow2_bucket(g.c), pow2_bucket(g.h), pow2_bucket(g.w),
            pow2_bucket(g.k), g.r, g.s, g.stride, g.padding, g.dilation, g.groups, q.dtype,
            q.direction, CLASS_VERSION)


# NOTE [ Winograd is not tuned on GPUs ]
# The tuner times a candidate by the host's clock (netcl.core.selection.time_candidate): runs
# back to back, then one wait. Winograd is 3-4 launches with per-call planning on the host,
# and on a GPU that host time exceeds its device time, so the tuner saw it slower than it is:
# on an H200 (2026-11-29) it replaced the rule's Winograd F(2x2)/F(4x4) by implicit GEMMs that
# bench_conv_layers times at 2.2x F(4x4)'s device time (64 channels on 32x32 at batch 128:
# 0.370 against 0.166 ms), and every forward of a ResNet-18 step ran the implicit GEMM (4.8 ms
# of its 15.2 ms of device time). In training the host cost vanishes (capture/replay), so
# where the GPU rule picks Winograd (a measured rule: NOTE [ GPU conv2d rules ]) it stands.


def conv_candidates(profile: ExtendedDeviceProfile, q: ConvQuery,
                    rule: AnyVariant) -> list[Candidate]:
    """Every registered conv2d variant but the naive one, then (GPUs) the implicit GEMM's
    tilings; the selector drops those that do not apply to ``q``. On a GPU where the rule
    picks Winograd, only that (NOTE [ Winograd is not tuned on GPUs ])."""
    gpu = not profile.opencl_cpu and profile.device_type != "cpu"
    if gpu and rule in (KernelVariant.CONV2D_WINOGRAD, WINOGRAD_F4):
        return [Candidate(rule)]
    # a variant registered without a forward runner (a plug-in's, gone with its module or its
    # test) is not a forward candidate: timing it raised KeyError on every GPU tuning
    named = [variant_named(name) for name in variant_names("conv2d")
             if name != KernelVariant.CONV2D_NAIVE.name]
    out = [Candidate(v) for v in named if q.direction != "forward" or v in RUNNERS]
    if gpu:  # the implicit GEMM's tilings, and the phase kernel's (strided data gradients)
        phase = q.direction == "data" and phase_data_applies(q.geometry)
        for variant in (IMPLICIT_TILED, *((PHASE_DATA,) if phase else ())):
            for t in TILINGS.values():
                out.append(Candidate(variant, params_of({
                    "tile_m": t.bm, "tile_n": t.bn, "tile_k": t.bk,
                    "local_size_2d": (t.lx, t.ly), "work_per_thread": t.tm,
                    "use_vectorization": t.vec, "tiles": t.label()})))
    return out


def _blocking(queue: Any, runner: Callable[..., Any], *args: Any) -> Callable[[int], None]:
    def call(n: int) -> None:
        for _ in range(n):
            runner(*args)
        queue.finish()

    return call


def conv_bench(device: Any, profile: ExtendedDeviceProfile, q: ConvQuery) -> Bench | None:
    """Scratch input, weight, output gradient and result of the query's direction on the
    device's queue; a config runs that computation and waits. ``None`` without an OpenCL
    queue of ``device``."""
    queue = queue_for(device)
    if queue is None:
        return None
    g, dtype = q.geometry, q.dtype
    w = scratch(queue, (g.k, g.cg, g.r, g.s), dtype, 4)
    if q.direction == "forward":
        x = scratch(queue, (g.n, g.c, g.h, g.w), dtype, 5)
        out = scratch(queue, (g.n, g.k, g.oh, g.ow), dtype, 6)

        def forward(config: KernelConfig) -> Callable[[int], None]:
            return _blocking(queue, RUNNERS[config.variant], x, w, None, g, out, config)

        return forward
    gy = scratch(queue, (g.n, g.k, g.oh, g.ow), dtype, 7)
    if q.direction == "data":
        dx = scratch(queue, (g.n, g.c, g.h, g.w), dtype, 8)

        def data(config: KernelConfig) -> Callable[[int], None]:
            runner = DATA_RUNNERS.get(config.variant, _data_columns)
            return _blocking(queue, runner, gy, w, g, dx, config)

        return data
    x = scratch(queue, (g.n, g.c, g.h, g.w), dtype, 9)

    def weight(config: KernelConfig) -> Callable[[int], None]:
        runner = WEIGHT_RUNNERS.get(config.variant, _weight_columns)
        return _blocking(queue, runner, x, gy, g, w, config)

    return weight


CONV2D_TUNER = FamilyTuner(shape_class=conv_class, candidates=conv_candidates, bench=conv_bench)
