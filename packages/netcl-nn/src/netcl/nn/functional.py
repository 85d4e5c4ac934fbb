"""The functional form of the layers: the differentiable ops and losses of netcl.autograd,
under the names PyTorch users reach for (``F.relu``, ``F.conv2d``, ``F.cross_entropy``...).

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> from netcl.nn import functional as F
    >>> F.relu(Tensor.from_host(manager.default("cpu").queue, np.array([-1.0, 2.0]))).to_host()
    array([0., 2.], dtype=float32)
"""

from netcl.autograd import binary_cross_entropy_with_logits as binary_cross_entropy_with_logits
from netcl.autograd import cross_entropy as cross_entropy
from netcl.autograd import mse_loss as mse_loss
from netcl.autograd import nll_loss as nll_loss
from netcl.autograd.ops import *  # noqa: F403  (the whole differentiable op set, by design)
from netcl.autograd.ops import __all__ as _ops_all

__all__ = [
    *_ops_all,
    "binary_cross_entropy_with_logits",
    "cross_entropy",
    "mse_loss",
    "nll_loss",
]
