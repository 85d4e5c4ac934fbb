"""Golden kernel sources of netcl.ops: every kernel family rendered without a device.

:func:`golden_sources` is a loop over the registry of :mod:`netcl.core.kernels.golden`: each
kernel family of netcl.ops registers the programs it builds for its golden matrix where it is
defined (``kernel_family(..., golden=cases)``: elementwise, reduce, softmax, pooling,
normalization, bias, creation, take, random, matmul (``_matmul_family``, with the
convolution's implicit GEMM) and conv2d (``_conv_family``)); importing those modules here
registers them. ``tests/test_golden_sources.py`` compares them with the checked-in files under
``tests/golden`` and builds them on every OpenCL device present. Each source is exactly what
the op hands the compiler: the dtype header of :func:`netcl.core.kernels.header.kernel_header`
(rendered for a device with the given extensions; the golden files use one with
``cl_khr_fp16`` and ``cl_khr_fp64``, so their pragmas show) followed by the program the family
renders.

Examples:
    >>> sources = golden_sources()
    >>> sources["elementwise/arith2-float32-vec4.cl"].kernels
    ('ew_arith2',)
    >>> "#define W 4" in sources["elementwise/arith2-float32-vec4.cl"].source
    True
    >>> sources["conv2d/winograd-float32.cl"].kernels[0]
    'winograd_weights'
"""

from __future__ import annotations

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.kernels.golden import GoldenSource, render_golden

# the modules defining the kernel families: importing them registers their golden programs
from . import (
    _bias,
    _conv_family,
    _creation,
    _elementwise_dispatch,
    _matmul_family,
    _movement_take,
    _normalization,
    _pooling,
    _random,
    _reduce_kernels,
    _softmax,
)

__all__ = ["FLOATS", "REFERENCE_EXTENSIONS", "golden_sources"]

REFERENCE_EXTENSIONS = "cl_khr_fp16 cl_khr_fp64"
"""The extensions of the stand-in device the golden files are rendered for."""

FLOATS = FLOAT_DTYPES
_FAMILIES = (_bias, _conv_family, _creation, _elementwise_dispatch, _matmul_family,
             _movement_take, _normalization, _pooling, _random, _reduce_kernels, _softmax)


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
