"""Kernel codegen (``primitives``), the program cache (``cache``), the one kernel header
(``header``) and kernel families built once per context (``family``).

Examples:
    >>> from netcl.core.kernels import kernel_header
    >>> "#define CT float" in kernel_header(None, "float16")
    True
"""

from .family import ContextCache as ContextCache
from .family import Geometry as Geometry
from .family import KernelSource as KernelSource
from .family import kernel_family as kernel_family
from .family import local_size_1d as local_size_1d
from .header import kernel_header as kernel_header

__all__ = ["ContextCache", "Geometry", "KernelSource", "kernel_family", "kernel_header",
           "local_size_1d"]
