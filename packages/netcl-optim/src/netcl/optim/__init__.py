"""netcl.optim: Optimizers, LR schedulers and gradient clipping."""

from .__about__ import __version__ as __version__

__all__ = ["__version__"]
