"""Golden kernel sources of netcl.ops: every kernel family rendered without a device.

:func:`golden_sources` renders the OpenCL programs the ops build, for a fixed matrix of kernel
family x dtype x variant/layout, into ``{name: GoldenSource}`` with names like
``elementwise/arith2-float32-vec4.cl``. ``tests/test_golden_sources.py`` compares them with the
checked-in files under ``tests/golden`` and builds them on every OpenCL device present (see
:mod:`netcl.core.kernels.golden`). Each source is exactly what ``cl_kernel`` hands the compiler:
the dtype header of :func:`._common.kernel_header` (rendered for a stand-in device with the
given extensions; the golden files use one with ``cl_khr_fp16`` and ``cl_khr_fp64``, so their
pragmas show) followed by the program the op renders.

The matrix (112 programs; each family in float32, float16 and float64, int32 where it has
integer kernels):

- elementwise: the binary, unary, comparison, ``where`` and copy/cast bundles in the flat,
  vec4 (aligned and not) and nd layouts, one with 64-bit indices;
- matmul: the four GEMMs with their default tiles in their GPU flavour (``fma()``), the
  register-tiled one with aligned vector access transposed both ways, and the vectorized one
  in the shape an OpenCL CPU device runs;
- conv2d: naive, implicit GEMM, Winograd, im2col, col2im, the batch sum, tiled-local;
- reduce (sequential and work-group programs), softmax (row, column, NLL gather), pooling,
  normalization, bias, creation, gathers (``take_k``) and the Philox random kernels.

Every family renders through the pure function or constant its op uses (``_program_source``,
``gemm_source``, ``tiled_local_source``, the ``_SRC`` strings); only the reduction program is
assembled here from its pieces (``_defines(prog) + _SOURCE + _KERNELS[name]``, as
``_reduce._kernel`` does) because ``_reduce`` has no function returning it.

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
from dataclasses import dataclass

from netcl.core.kernel_selector import KernelConfig, KernelVariant, default_config
from netcl.core.kernels.golden import GoldenSource

from . import _conv_kernels as ck
from . import _conv_winograd, _creation, _movement_take, _random, _reduce, _softmax
from . import _matmul_kernels as mk
from ._bias import _SRC as _BIAS_SRC
from ._common import kernel_header
from ._elementwise_base import _program_source as _ew_source
from ._elementwise_base import _Sig, kernel_name
from ._elementwise_dispatch import bundle
from ._elementwise_table import OPS
from ._matmul import gemm_params
from ._normalization import _SRC as _NORM_SRC
from ._pooling import _AVG_SRC, _MAX_SRC

__all__ = ["REFERENCE_EXTENSIONS", "golden_sources"]

REFERENCE_EXTENSIONS = "cl_khr_fp16 cl_khr_fp64"
"""The extensions of the stand-in device the golden files are rendered for."""

FLOATS = ("float32", "float16", "float64")
_LOCAL = 256  # the one 1-D local size of a device with work-groups of 256 (elementwise_base)


@dataclass(frozen=True)
class _StandInDevice:
    extensions: str


@dataclass(frozen=True)
class _StandInContext:
    """What :func:`._common.kernel_header` reads of a context: its device's extensions."""

    devices: tuple[_StandInDevice, ...]


class _Renderer:
    """Renders ``(name, program, kernels, dtype)`` rows with the header for ``extensions``."""

    def __init__(self, extensions: str) -> None:
        self.context = _StandInContext((_StandInDevice(extensions),))
        self.out: dict[str, GoldenSource] = {}

    def add(self, name: str, program: str, kernels: tuple[str, ...], dtype: str) -> None:
        """One golden source: ``kernel_header(dtype) + program``, as ``cl_kernel`` builds it
        (float64 ones need ``cl_khr_fp64``; float16 is storage only and needs nothing)."""
        if f"{name}.cl" in self.out:
            raise ValueError(f"golden_sources: {name!r} is rendered twice")
        needs = ("cl_khr_fp64",) if dtype == "float64" else ()
        source = kernel_header(self.context, dtype) + program
        self.out[f"{name}.cl"] = GoldenSource(source, kernels, needs)


def golden_sources(extensions: str = REFERENCE_EXTENSIONS) -> dict[str, GoldenSource]:
    """Every golden source of netcl.ops, rendered for a device with ``extensions``.

    Args:
        extensions: the space-separated OpenCL extensions of the device to render the dtype
            headers for (the pragmas ``kernel_header`` adds); the default is the reference the
            checked-in golden files use.

    Returns:
        ``{"<family>/<kernel>-<dtype>[-<variant>].cl": GoldenSource}``, in a fixed order.
    """
    r = _Renderer(extensions)
    for render in (_elementwise, _matmul, _conv, _reduce_family, _softmax_family, _pooling,
                   _normalization, _bias, _creation_family, _take, _random_family):
        render(r)
    return r.out


# -- elementwise ------------------------------------------------------------------------------


def _ew(r: _Renderer, op: str, operands: tuple[str, ...], compute: str, out: str,
        layout: str, ndim: int = 1, width: int = 1, wide: bool = False,
        aligned: bool = True) -> None:
    """The bundle of ``op`` for one signature, as ``run_strided`` builds it.

    ``aligned`` (``vec`` only): every offset a multiple of ``width`` (vector pointers), as for
    whole tensors; otherwise ``vloadN``/``vstoreN``.
    """
    ops = bundle(OPS[op])
    vec = layout == "vec"
    sig = _Sig(group=ops[0].group, arity=ops[0].arity, nparams=max(o.nparams for o in ops),
               operands=operands, compute=compute, out=out, layout=layout,
               ndim=ndim if layout == "nd" else 1, width=width, wide=wide,
               aligned=vec and aligned)
    tag = {"flat": "flat", "vec": f"vec{width}", "nd": f"nd{ndim}"}[layout]
    tag += "-unaligned" if vec and not aligned else ""
    tag += "-idx64" if wide else ""
    cast = ops[0].group == "copy" and operands[0] != out
    dtypes = f"{operands[0]}-to-{out}" if cast else operands[-1]
    name = f"elementwise/{kernel_name(ops)[3:]}-{dtypes}-{tag}"
    r.add(name, _ew_source(sig, ops), (kernel_name(ops),), compute)


def _elementwise(r: _Renderer) -> None:
    vec = default_config(KernelVariant.ELEMENTWISE_VECTORIZED).vector_width
    for dt in (*FLOATS, "int32"):  # binary arithmetic: every layout
        _ew(r, "add", (dt, dt), dt, dt, "flat")
        _ew(r, "add", (dt, dt), dt, dt, "vec", width=vec)
        _ew(r, "add", (dt, dt), dt, dt, "nd", ndim=3)
    for dt in ("float32", "float16"):  # a view at an odd offset
        _ew(r, "add", (dt, dt), dt, dt, "vec", width=vec, aligned=False)
    _ew(r, "add", ("float32", "float32"), "float32", "float32", "flat", wide=True)
    for dt in (*FLOATS, "int32"):  # unary: every dtype flat, float32 in the other layouts
        _ew(r, "exp", (dt,), dt, dt, "flat")
    _ew(r, "exp", ("float32",), "float32", "float32", "vec", width=vec)
    _ew(r, "exp", ("float32",), "float32", "float32", "nd", ndim=2)
    for dt in ("float32", "int32"):  # comparisons: uint8 out
        _ew(r, "lt", (dt, dt), dt, "uint8", "flat")
    _ew(r, "lt", ("float32", "float32"), "float32", "uint8", "vec", width=vec)
    for dt in ("float32", "float16"):  # where: uint8 condition
        _ew(r, "where", ("uint8", dt, dt), dt, dt, "nd", ndim=2)
    _ew(r, "where", ("uint8", "float32", "float32"), "float32", "float32", "flat")
    # copy: movement (strided) and casts (compute = the wider of the two)
    _ew(r, "copy", ("float32",), "float32", "float32", "nd", ndim=3)
    _ew(r, "copy", ("float16",), "float32", "float32", "vec", width=vec)
    _ew(r, "copy", ("float64",), "float64", "float16", "vec", width=vec)
    _ew(r, "copy", ("float32",), "float32", "int32", "flat")
    _ew(r, "copy", ("int32",), "float64", "float64", "flat")


# -- matmul and convolution -----------------------------------------------------------------

_GEMMS = {
    "naive": KernelVariant.MATMUL_NAIVE,
    "tiled": KernelVariant.MATMUL_TILED,
    "register_tiled": KernelVariant.MATMUL_REGISTER_TILED,
    "vectorized": KernelVariant.MATMUL_VECTORIZED,
}


def _gemm(r: _Renderer, name: str, p: mk.GemmParams) -> None:
    r.add(name, mk.gemm_source(p), (mk.gemm_kernel_name(p),), p.dtype)


def _cpu_vectorized_config() -> KernelConfig:
    """The shape of the vectorized config an OpenCL CPU device runs (one work-item per group,
    6 x 16 micro-tiles of 8-wide vectors), for a 96 x 128 problem."""
    return dataclasses.replace(
        default_config(KernelVariant.MATMUL_VECTORIZED), tile_m=96, tile_n=128, tile_k=256,
        work_per_thread=6, local_size_2d=(1, 1), vector_width=8, extra={"micro_n": 16},
    )


def _matmul(r: _Renderer) -> None:
    for label, variant in _GEMMS.items():  # default configs, GPU flavour (fma), no transposes
        for dt in FLOATS:
            _gemm(r, f"matmul/{label}-{dt}", gemm_params(default_config(variant), dt, False, False))
    reg = default_config(KernelVariant.MATMUL_REGISTER_TILED)
    for ta, tb in ((False, True), (True, False)):  # aligned operands: vector loads and stores
        p = dataclasses.replace(gemm_params(reg, "float32", ta, tb), vec_a=True, vec_b=True,
                                vec_c=True)
        _gemm(r, f"matmul/register_tiled-float32-{'tn' if ta else 'nt'}-vec", p)
    cpu = dataclasses.replace(gemm_params(_cpu_vectorized_config(), "float32", False, False),
                              vec_c=True, fma=False)
    _gemm(r, "matmul/vectorized-float32-cpu", cpu)


def _conv(r: _Renderer) -> None:
    implicit = default_config(KernelVariant.CONV2D_IMPLICIT_GEMM)
    for dt in FLOATS:
        r.add(f"conv2d/naive-{dt}", ck.NAIVE, ("conv2d_naive",), dt)
        p = dataclasses.replace(gemm_params(implicit, dt, False, False),
                                b_loader=ck.IMPLICIT_B_LOADER, extra_params=ck.IMPLICIT_PARAMS)
        _gemm(r, f"conv2d/implicit_gemm-{dt}", p)
        r.add(f"conv2d/winograd-{dt}", _conv_winograd._SRC,
              ("winograd_weights", "winograd_input", "winograd_output"), dt)
    r.add("conv2d/im2col-float32", ck.IM2COL, ("conv2d_im2col",), "float32")
    r.add("conv2d/col2im-float32", ck.COL2IM, ("conv2d_col2im",), "float32")
    r.add("conv2d/sum_batch-float32", ck.SUM_BATCH, ("conv2d_sum_batch",), "float32")
    r.add("conv2d/tiled_local-float32-3x3", ck.tiled_local_source(3, 3, 1, 1, 1, 1),
          ("conv2d_tiled_local",), "float32")
    r.add("conv2d/tiled_local-float16-5x5-s2-d2", ck.tiled_local_source(5, 5, 2, 2, 2, 2),
          ("conv2d_tiled_local",), "float16")


# -- reductions and softmax -------------------------------------------------------------------


def _reduction_programs() -> Iterator[tuple[str, str, str, str]]:
    """(label, input, accumulator, output) dtypes of the reduction programs."""
    for dt in FLOATS:
        acc = "float64" if dt == "float64" else "float32"
        yield dt, dt, acc, dt
    yield "int32-sum", "int32", "int64", "int64"  # integer sums accumulate in int64
    yield "int32-max", "int32", "int32", "int32"


def _reduce_family(r: _Renderer) -> None:
    for label, src, acc, out in _reduction_programs():
        prog = _reduce._Prog(src, acc, out, _LOCAL, False)
        for kernel in ("red_seq", "red_grp"):
            if label == "int32-max" and kernel == "red_grp":
                continue  # the same template as the sum's, with other #defines
            program = _reduce._defines(prog) + _reduce._SOURCE + _reduce._KERNELS[kernel]
            r.add(f"reduce/{kernel}-{label}", program, (kernel,), acc)


def _softmax_family(r: _Renderer) -> None:
    for dt in FLOATS:
        for kernel in ("softmax_row", "softmax_col"):
            r.add(f"softmax/{kernel}-{dt}", _softmax._program_source(kernel, _LOCAL, False),
                  (kernel,), dt)
    for dt, labels in (("float32", "int64"), ("float16", "int32"), ("float64", "int64")):
        r.add(f"softmax/nll-{dt}-labels-{labels}", _softmax._nll_source(labels, False),
              ("nll_k",), dt)


# -- pooling, normalization, bias -------------------------------------------------------------


def _pooling(r: _Renderer) -> None:
    for dt in FLOATS:
        r.add(f"pooling/max-{dt}", _MAX_SRC, ("max_pool", "max_pool_backward"), dt)
        r.add(f"pooling/avg-{dt}", _AVG_SRC, ("avg_pool", "avg_pool_backward", "adaptive_avg",
                                              "adaptive_avg_backward"), dt)


def _normalization(r: _Renderer) -> None:
    kernels = ("bn_stats", "bn_apply", "bn_backward_reduce", "bn_backward_dx", "ln_forward",
               "ln_backward_dx", "ln_backward_params")
    for dt in FLOATS:
        r.add(f"normalization/norm-{dt}", _NORM_SRC, kernels, dt)


def _bias(r: _Renderer) -> None:
    for dt in FLOATS:
        r.add(f"bias/bias_add-{dt}", _BIAS_SRC, ("bias_add",), dt)


# -- creation, gathers, random ----------------------------------------------------------------


def _creation_family(r: _Renderer) -> None:
    for dt in (*FLOATS, "int32"):
        r.add(f"creation/fill_arange-{dt}", _creation._program_source(False),
              ("fill_k", "arange_k"), dt)
    for dt, labels in (("int64", "int64"), ("float32", "int32")):
        program = _creation._program_source(False, _creation._one_hot_defines(labels),
                                            _creation._ONE_HOT)
        r.add(f"creation/one_hot-{dt}-labels-{labels}", program, ("one_hot_k",), dt)


def _take(r: _Renderer) -> None:
    for dt in (*FLOATS, "int32"):
        r.add(f"movement/take-{dt}-index-int64", _movement_take._program_source(dt, "int64", False),
              ("take_k",), dt)
    r.add("movement/take-float32-index-int32",
          _movement_take._program_source("float32", "int32", False), ("take_k",), "float32")


def _random_family(r: _Renderer) -> None:
    r.add("random/bits-int64", _random._program_source("bits", "int64", False), ("rng_bits",),
          "int64")
    for kernel, dtypes in (("uniform", FLOATS), ("normal", FLOATS),
                           ("bernoulli", ("float32",)), ("dropout", ("float32", "float16"))):
        for dt in dtypes:
            r.add(f"random/{kernel}-{dt}", _random._program_source(kernel, dt, False),
                  (f"rng_{kernel}",), dt)
