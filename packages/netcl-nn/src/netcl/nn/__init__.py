"""netcl.nn: Modules, layers, ResNet and AMP."""

from .__about__ import __version__ as __version__

__all__ = ["__version__"]
