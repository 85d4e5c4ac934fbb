"""netcl.data: DataLoader with worker processes and a shared-memory ring; augmentation on CPU and device."""

from .__about__ import __version__ as __version__

__all__ = ["__version__"]
