"""Golden kernel sources of netcl.autograd: the fused (``jit``) kernels, rendered without a
device.

:func:`golden_sources` traces two fixed expressions on NumPy-backend tensors (only their
shapes and dtypes matter) into fusion groups and renders their generated kernels through
:func:`._codegen.kernel_spec`, the function the OpenCL path builds from:

- ``relu(x * w + b) * 0.5`` with a per-row ``b`` broadcast along the last dimension (a 2-d
  iteration space): forward in every float dtype, the "full" backward (gradients of ``x``
  and ``w``) and the "reduce" backward (gradient of ``b``) in its GPU (interleaved) and CPU
  (blocked) forms;
- ``sigmoid(x) * y`` over equal shapes (the flat forward);
- ``0.5 * x + b`` with ``b`` broadcast as above: a number before the tensors, so leaf
  indices (which name the kernel's variables) differ from tensor indices (which index the
  strides); forward, full backward and CPU reduce backward.

``tests/test_golden_sources.py`` compares them with the checked-in files under
``tests/golden`` and builds them on every OpenCL device present (see
:mod:`netcl.core.kernels.golden`).

Examples:
    >>> sorted(golden_sources())[:2]
    ['fused/full-float32-nd2-number-first.cl', 'fused/full-float32-nd2.cl']
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from netcl.core.device import CPUQueue
from netcl.core.kernels.family import LOCAL_1D as _LOCAL
from netcl.core.kernels.golden import GoldenSource, register_golden, render_golden
from netcl.core.tensor import Tensor

from ._codegen import Layout, kernel_spec
from ._group import Group, build_group
from ._lazy import Lazy

__all__ = ["REFERENCE_EXTENSIONS", "golden_sources"]

REFERENCE_EXTENSIONS = "cl_khr_fp16 cl_khr_fp64"
"""The extensions of the stand-in device the golden files are rendered for (its pragmas)."""



def _tensor(shape: tuple[int, ...], dtype: str) -> Tensor:
    """A NumPy-backend tensor: the codegen reads its shape, dtype and offset only."""
    return Tensor.from_host(CPUQueue(), np.zeros(shape), dtype=dtype)


def _bias_relu(dtype: str) -> Group:
    """``relu(x * w + b) * 0.5``: leaves x, w (4, 8), b (4, 1) broadcast, the number 0.5."""
    x, w, b = _tensor((4, 8), dtype), _tensor((4, 8), dtype), _tensor((4, 1), dtype)
    y = Lazy.apply("relu", (Lazy.apply("add", (Lazy.apply("mul", (x, w), {}), b), {}),), {})
    return build_group(Lazy.apply("mul", (y, 0.5), {}))


def _gated(dtype: str) -> Group:
    """``sigmoid(x) * y`` over two (16,) tensors: one flat dimension."""
    x, y = _tensor((16,), dtype), _tensor((16,), dtype)
    return build_group(Lazy.apply("mul", (Lazy.apply("sigmoid", (x,), {}), y), {}))


def _number_first(dtype: str) -> Group:
    """``0.5 * x + b``: leaves the number 0.5, x (4, 8), b (4, 1) broadcast."""
    x, b = _tensor((4, 8), dtype), _tensor((4, 1), dtype)
    return build_group(Lazy.apply("add", (Lazy.apply("mul", (0.5, x), {}), b), {}))


def golden_sources(extensions: str = REFERENCE_EXTENSIONS) -> dict[str, GoldenSource]:
    """Every golden fused kernel, rendered for a device with ``extensions``: the programs the
    autograd families registered (:func:`netcl.core.kernels.golden.render_golden`).

    Returns:
        ``{"fused/<kind>-<dtype>-<layout>.cl": GoldenSource}``.
    """
    return render_golden("autograd", extensions)


def _fused_golden(extensions: str) -> dict[str, GoldenSource]:
    """The fused family's golden programs (the reduce ones for work-groups of
    :data:`~netcl.core.kernels.family.LOCAL_1D`)."""
    out: dict[str, GoldenSource] = {}

    def add(name: str, make: Callable[[str], Group], dtype: str, kind: str,
            extra: tuple[object, ...] = ()) -> None:
        group = make(dtype)
        spec = kernel_spec(kind, group, Layout.of(group.shape, group.tensors), extra)
        needs = ("cl_khr_fp64",) if dtype == "float64" else ()
        out[f"fused/{name}.cl"] = GoldenSource(spec.device_source(extensions), (spec.name,),
                                               needs)

    for dtype in ("float32", "float16", "float64"):
        add(f"fwd-{dtype}-nd2", _bias_relu, dtype, "fwd")
    add("fwd-float32-flat", _gated, "float32", "fwd")
    add("full-float32-nd2", _bias_relu, "float32", "full", ((0, 1),))
    for flavour, blocked in (("gpu", False), ("cpu", True)):
        add(f"reduce-float32-nd2-{flavour}", _bias_relu, "float32", "reduce",
            (((2,),), _LOCAL, blocked))
    add("fwd-float32-nd2-number-first", _number_first, "float32", "fwd")
    add("full-float32-nd2-number-first", _number_first, "float32", "full", ((1,),))
    add("reduce-float32-nd2-cpu-number-first", _number_first, "float32", "reduce",
        (((2,),), _LOCAL, True))
    return out


register_golden("autograd", "fused", lambda ext: _fused_golden(ext).items())
