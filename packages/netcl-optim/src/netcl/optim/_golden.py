"""Golden kernel sources of netcl.optim: the update and gradient-norm programs, rendered
through :func:`._kernels.program_source` (no device needed).

``tests/test_golden_sources.py`` compares them with the checked-in files under
``tests/golden`` and builds them on every OpenCL device present (see
:mod:`netcl.core.kernels.golden`). float16 programs store ``half`` and compute in float (see
NOTE [ float16 parameters ] in ``_kernels.py``), so they build on devices without
``cl_khr_fp16`` too.

Examples:
    >>> sorted(golden_sources())[:2]
    ['clip/clip_factor-float32.cl', 'norm/sum_squares-float16.cl']
"""

from __future__ import annotations

from netcl.core.kernels.golden import GoldenSource

from ._kernels import _CLIP, _NORM, _UPDATES, program_source

__all__ = ["golden_sources"]


def golden_sources() -> dict[str, GoldenSource]:
    """Every golden optimizer program: ``{"<family>/<kernel>-<dtype>.cl": GoldenSource}``.

    The header depends on the dtype only (not on the device), so nothing else varies.
    """
    out: dict[str, GoldenSource] = {}
    for dtype in ("float32", "float16", "float64"):
        needs = ("cl_khr_fp64",) if dtype == "float64" else ()
        for kind, source in _UPDATES.items():
            out[f"update/{kind}-{dtype}.cl"] = GoldenSource(program_source(source, dtype),
                                                            (kind,), needs)
        out[f"norm/sum_squares-{dtype}.cl"] = GoldenSource(
            program_source(_NORM, dtype), ("sum_squares", "scale_by"), needs)
    out["clip/clip_factor-float32.cl"] = GoldenSource(program_source(_CLIP, "float32"),
                                                      ("clip_factor",))
    return out
