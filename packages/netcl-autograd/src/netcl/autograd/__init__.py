"""netcl.autograd: The Tape, differentiable ops, losses, gradcheck and the elementwise JIT compiler."""

from .__about__ import __version__ as __version__

__all__ = ["__version__"]
