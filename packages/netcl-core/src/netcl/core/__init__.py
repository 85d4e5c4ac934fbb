"""netcl.core: Devices, Tensor, buffer pools, OpenCL and NumPy backends, kernel codegen and selection."""

from .__about__ import __version__ as __version__

__all__ = ["__version__"]
