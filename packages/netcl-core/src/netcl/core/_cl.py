"""The one place netcl.core imports pyopencl, lazily, so ``import netcl.core`` never needs it."""

from __future__ import annotations

import importlib
from typing import Any

from ._pocl_cache import guard_pocl_cache
from .icd import register_pip_runtimes

_INSTALL_HINT = (
    "pyopencl required for OpenCL devices: install it with "
    "`pip install 'netcl-core[cpu]'` (pyopencl plus the PoCL CPU device) or "
    "`pip install 'netcl-core[opencl]'` (pyopencl for your own OpenCL driver); "
    "the NumPy backend (NETCL_DEVICE=cpu) works without it"
)

_cl: Any = None


def cl() -> Any:
    """Return the ``pyopencl`` module, or raise ``ImportError`` saying how to install it."""
    global _cl
    if _cl is None:
        register_pip_runtimes()  # before pyopencl's loader reads OCL_ICD_VENDORS
        guard_pocl_cache()  # before PoCL reads POCL_CACHE_DIR and trusts what lies there
        try:
            _cl = importlib.import_module("pyopencl")
        except ImportError as exc:
            raise ImportError(_INSTALL_HINT) from exc
    return _cl


def have_pyopencl() -> bool:
    """True when pyopencl can be imported."""
    try:
        cl()
    except ImportError:
        return False
    return True
