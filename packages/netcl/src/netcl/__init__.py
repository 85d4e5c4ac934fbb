"""netcl: a deep-learning framework on OpenCL (PyOpenCL) with a NumPy backend.

The root offers lazy shortcuts to the most used names; everything else is imported from its
layer (``netcl.core``, ``netcl.ops``, ``netcl.autograd``, ``netcl.nn``, ...). Importing ``netcl``
imports no layer until a shortcut is first used.

Examples:
    >>> import numpy as np
    >>> import netcl as nc
    >>> nc.Tensor.from_host(None, np.ones(2)).shape
    (2,)
"""

# NOTE [ extend_path first ]
# Every layer is its own distribution that ships a portion of the ``netcl`` namespace. This
# package alone has ``netcl/__init__.py``; ``extend_path`` makes the other portions importable
# through it, in editable and regular installs alike. It must stay the first statement (only
# the docstring before it, so that ``netcl.__doc__`` is the docstring above).
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

import importlib
from typing import TYPE_CHECKING, Any

from .__about__ import __version__ as __version__

if TYPE_CHECKING:
    from netcl.core.kernels.primitives import KernelSpec as KernelSpec
    from netcl.core.tensor import Tensor as Tensor
    from netcl.ops import bias_add as bias_add
    from netcl.ops import build_matmul_kernel as build_matmul_kernel
    from netcl.ops import conv2d as conv2d
    from netcl.ops import elementwise_binary as elementwise_binary
    from netcl.ops import manual_seed as manual_seed
    from netcl.ops import matmul as matmul
    from netcl.ops import reduce_sum as reduce_sum
    from netcl.ops import relu as relu
    from netcl.ops import softmax as softmax

# shortcut name -> module that defines it
_SHORTCUTS: dict[str, str] = {
    "Tensor": "netcl.core.tensor",
    "KernelSpec": "netcl.core.kernels.primitives",
    "matmul": "netcl.ops",
    "build_matmul_kernel": "netcl.ops",
    "bias_add": "netcl.ops",
    "elementwise_binary": "netcl.ops",
    "manual_seed": "netcl.ops",
    "relu": "netcl.ops",
    "reduce_sum": "netcl.ops",
    "softmax": "netcl.ops",
    "conv2d": "netcl.ops",
}

__all__ = [
    "KernelSpec",
    "Tensor",
    "__version__",
    "bias_add",
    "build_matmul_kernel",
    "conv2d",
    "elementwise_binary",
    "manual_seed",
    "matmul",
    "reduce_sum",
    "relu",
    "softmax",
]


def __getattr__(name: str) -> Any:
    module = _SHORTCUTS.get(name)
    if module is None:
        raise AttributeError(f"module 'netcl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SHORTCUTS))
