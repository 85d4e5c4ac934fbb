"""netcl.ops: Forward-only ops: each a real OpenCL kernel family and a vectorized NumPy path."""

from .__about__ import __version__ as __version__

__all__ = ["__version__"]
