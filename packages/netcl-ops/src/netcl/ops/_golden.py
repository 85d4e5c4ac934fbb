"""Golden kernel sources of netcl.ops: every kernel family rendered without a device.

:func:`golden_sources` is a loop over the registry of :mod:`netcl.core.kernels.golden`: each
kernel family of netcl.ops registers the programs it builds for its golden matrix where it is
defined (``kernel_family(..., golden=cases)``: elementwise, reduce, softmax, pooling,
normalization, bias, creation, take, random), and the matmul and conv2d programs, built by
their modules from ``gemm_source`` and the ``_conv_kernels`` constants, are registered here.
``tests/test_golden_sources.py`` compares them with the checked-in files under ``tests/golden``
and builds them on every OpenCL device present. Each source is exactly what the op hands the
compiler: the dtype header of :func:`netcl.core.kernels.header.kernel_header` (rendered for a
device with the given extensions; the golden files use one with ``cl_khr_fp16`` and
``cl_khr_fp64``, so their pragmas show) followed by the program the family renders.

Examples:
    >>> sources = golden_sources()
    >>> sources["elementwise/arith2-float32-vec4.cl"].kernels
    ('ew_arith2',)
    >>> "#define W 4" in sources["elementwise/arith2-float32-vec4.cl"].source
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.kernel_selector import KernelConfig, KernelVariant, default_config
from netcl.core.kernels.family import KernelSource
from netcl.core.kernels.golden import GoldenSource, register_golden, render_golden

# the modules defining the kernel families: importing them registers their golden programs
from . import (
    _bias,
    _conv_winograd,
    _creation,
    _elementwise_dispatch,
    _movement_take,
    _normalization,
    _pooling,
    _random,
    _reduce_kernels,
    _softmax,
)
from . import _conv_kernels as ck
from . import _matmul_kernels as mk
from ._matmul import gemm_params

__all__ = ["FLOATS", "REFERENCE_EXTENSIONS", "golden_sources"]

REFERENCE_EXTENSIONS = "cl_khr_fp16 cl_khr_fp64"
"""The extensions of the stand-in device the golden files are rendered for."""

FLOATS = FLOAT_DTYPES
_FAMILIES = (_bias, _creation, _elementwise_dispatch, _movement_take, _normalization, _pooling,
             _random, _reduce_kernels, _softmax)


def golden_sources(extensions: str = REFERENCE_EXTENSIONS) -> dict[str, GoldenSource]:
    """Every golden source of netcl.ops, rendered for a device with ``extensions``.

    Args:
        extensions: the space-separated OpenCL extensions of the device to render the dtype
            headers for (the pragmas ``kernel_header`` adds); the default is the reference the
            checked-in golden files use.

    Returns:
        ``{"<family>/<kernel>-<dtype>[-<variant>].cl": GoldenSource}``.
    """
    return render_golden("ops", extensions)


# -- matmul and convolution (built by modules outside this registry) --------------------------

_GEMMS = {
    "naive": KernelVariant.MATMUL_NAIVE,
    "tiled": KernelVariant.MATMUL_TILED,
    "register_tiled": KernelVariant.MATMUL_REGISTER_TILED,
    "vectorized": KernelVariant.MATMUL_VECTORIZED,
}


def _gemm(p: mk.GemmParams) -> KernelSource:
    return KernelSource(mk.gemm_source(p), (mk.gemm_kernel_name(p),), p.dtype)


def _cpu_vectorized_config() -> KernelConfig:
    """The shape of the vectorized config an OpenCL CPU device runs (one work-item per group,
    6 x 16 micro-tiles of 8-wide vectors), for a 96 x 128 problem."""
    return dataclasses.replace(
        default_config(KernelVariant.MATMUL_VECTORIZED), tile_m=96, tile_n=128, tile_k=256,
        work_per_thread=6, local_size_2d=(1, 1), vector_width=8, extra={"micro_n": 16},
    )


def _matmul() -> Iterator[tuple[str, KernelSource]]:
    for label, variant in _GEMMS.items():  # default configs, GPU flavour (fma), no transposes
        for dt in FLOATS:
            yield f"matmul/{label}-{dt}", _gemm(gemm_params(default_config(variant), dt, False,
                                                            False))
    reg = default_config(KernelVariant.MATMUL_REGISTER_TILED)
    for ta, tb in ((False, True), (True, False)):  # aligned operands: vector loads and stores
        p = dataclasses.replace(gemm_params(reg, "float32", ta, tb), vec_a=True, vec_b=True,
                                vec_c=True)
        yield f"matmul/register_tiled-float32-{'tn' if ta else 'nt'}-vec", _gemm(p)
    cpu = dataclasses.replace(gemm_params(_cpu_vectorized_config(), "float32", False, False),
                              vec_c=True, fma=False)
    yield "matmul/vectorized-float32-cpu", _gemm(cpu)


def _conv() -> Iterator[tuple[str, KernelSource]]:
    implicit = default_config(KernelVariant.CONV2D_IMPLICIT_GEMM)
    for dt in FLOATS:
        yield f"conv2d/naive-{dt}", KernelSource(ck.NAIVE, ("conv2d_naive",), dt)
        p = dataclasses.replace(gemm_params(implicit, dt, False, False),
                                b_loader=ck.IMPLICIT_B_LOADER, extra_params=ck.IMPLICIT_PARAMS)
        yield f"conv2d/implicit_gemm-{dt}", _gemm(p)
        yield f"conv2d/winograd-{dt}", KernelSource(
            _conv_winograd._SRC, ("winograd_weights", "winograd_input", "winograd_output"), dt)
    yield "conv2d/im2col-float32", KernelSource(ck.IM2COL, ("conv2d_im2col",), "float32")
    yield "conv2d/col2im-float32", KernelSource(ck.COL2IM, ("conv2d_col2im",), "float32")
    yield "conv2d/sum_batch-float32", KernelSource(ck.SUM_BATCH, ("conv2d_sum_batch",),
                                                   "float32")
    yield "conv2d/tiled_local-float32-3x3", KernelSource(
        ck.tiled_local_source(3, 3, 1, 1, 1, 1), ("conv2d_tiled_local",), "float32")
    yield "conv2d/tiled_local-float16-5x5-s2-d2", KernelSource(
        ck.tiled_local_source(5, 5, 2, 2, 2, 2), ("conv2d_tiled_local",), "float16")


register_golden("ops", "matmul",
                lambda ext: ((f"{name}.cl", src.golden(ext)) for name, src in _matmul()))
register_golden("ops", "conv2d",
                lambda ext: ((f"{name}.cl", src.golden(ext)) for name, src in _conv()))
