"""netcl.core: devices, Tensor, buffer pools, OpenCL and NumPy backends, kernel codegen.

Importing it touches no OpenCL driver and works without pyopencl.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> Tensor.from_host(q, np.ones(3)).to_host().tolist()
    [1.0, 1.0, 1.0]
"""

from .__about__ import __version__ as __version__
from .device import DeviceHandle as DeviceHandle
from .device import DeviceManager as DeviceManager
from .device import manager as manager
from .kernels.primitives import KernelSpec as KernelSpec
from .memory import BufferHandle as BufferHandle
from .memory import BufferPool as BufferPool
from .tensor import Tensor as Tensor

__all__ = [
    "BufferHandle",
    "BufferPool",
    "DeviceHandle",
    "DeviceManager",
    "KernelSpec",
    "Tensor",
    "__version__",
    "manager",
]
