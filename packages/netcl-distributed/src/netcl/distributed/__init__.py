"""netcl.distributed: Collectives and the data-parallel step."""

from .__about__ import __version__ as __version__

__all__ = ["__version__"]
