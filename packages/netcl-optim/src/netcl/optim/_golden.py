"""Golden kernel sources of netcl.optim: the update (per parameter and foreach) and
gradient-norm programs, rendered through :func:`._kernels.optim_family` (no device needed),
which registers them.

``tests/test_golden_sources.py`` compares them with the checked-in files under
``tests/golden`` and builds them on every OpenCL device present (see
:mod:`netcl.core.kernels.golden`). float16 programs store ``half`` and compute in float (see
NOTE [ float16 parameters ] in ``_kernels.py``), so they build on devices without
``cl_khr_fp16`` too.

Examples:
    >>> sorted(golden_sources())[:2]
    ['clip/clip_factor-float32.cl', 'foreach/adagrad_x16-float16.cl']
"""

from __future__ import annotations

from netcl.core.kernels.golden import GoldenSource, render_golden

from ._kernels import EXTENSIONS

__all__ = ["golden_sources"]


def golden_sources() -> dict[str, GoldenSource]:
    """Every golden optimizer program: ``{"<family>/<kernel>-<dtype>.cl": GoldenSource}``.

    The header depends on the dtype only (not on the device), so nothing else varies.
    """
    return render_golden("optim", EXTENSIONS)
