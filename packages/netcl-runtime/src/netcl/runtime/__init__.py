"""netcl.runtime: Program cache, graph replay and stream scheduling."""

from .__about__ import __version__ as __version__

__all__ = ["__version__"]
