"""netcl.autograd: the Tape, differentiable ops, losses, gradcheck and the elementwise JIT.

The training loop of the architecture page::

    with ag.Tape() as tape:
        logits = model(x)
        loss = ag.cross_entropy(logits, y)
    tape.backward(loss)

Ops record on the active tape when an input has ``requires_grad``; ``tape.backward(loss)``
accumulates into each leaf's ``.grad`` (until something resets it to ``None``). Outside a tape
they record too, as in PyTorch (``loss.backward()``; :func:`implicit_tape` ``(False)`` limits
recording to tapes); :func:`no_grad` turns recording off. The
differentiable ops are in :mod:`netcl.autograd.ops`, the JIT compiler that fuses elementwise
chains in :mod:`netcl.autograd.compiler`.

Examples:
    >>> import numpy as np
    >>> import netcl.autograd as ag
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> w = Tensor.from_host(q, np.array([[0.5, -0.5], [1.0, 0.0]]))
    >>> w.requires_grad = True
    >>> x = Tensor.from_host(q, np.array([[1.0, 2.0]]))
    >>> y = Tensor.from_host(q, np.array([1]))
    >>> with ag.Tape() as tape:
    ...     loss = ag.cross_entropy(ag.ops.matmul(x, w), y)
    >>> tape.backward(loss)
    >>> w.grad.shape
    (2, 2)
"""

from . import compiler as compiler
from . import ops as ops
from .__about__ import __version__ as __version__
from ._function import REGISTRY as REGISTRY
from ._function import Grads as Grads
from ._function import differentiable as differentiable
from ._function import sum_to_shape as sum_to_shape
from ._gradcheck import GradcheckError as GradcheckError
from ._gradcheck import gradcheck as gradcheck
from ._losses import binary_cross_entropy_with_logits as binary_cross_entropy_with_logits
from ._losses import cross_entropy as cross_entropy
from ._losses import mse_loss as mse_loss
from ._losses import nll_loss as nll_loss
from ._ops_extra import backward_hook as backward_hook
from ._ops_extra import conv_transpose2d as conv_transpose2d
from ._ops_extra_modes import inference_mode as inference_mode
from ._tape import Backward as Backward
from ._tape import Node as Node
from ._tape import Tape as Tape
from ._tape import current_tape as current_tape
from ._tape import detach as detach
from ._tape import enable_grad as enable_grad
from ._tape import implicit_tape as implicit_tape
from ._tape import is_recording as is_recording
from ._tape import no_grad as no_grad
from .compiler import jit as jit
from .compiler import register_primitive as register_primitive

__all__ = [
    "REGISTRY",
    "Backward",
    "GradcheckError",
    "Grads",
    "Node",
    "Tape",
    "__version__",
    "backward_hook",
    "binary_cross_entropy_with_logits",
    "compiler",
    "conv_transpose2d",
    "cross_entropy",
    "current_tape",
    "detach",
    "differentiable",
    "enable_grad",
    "gradcheck",
    "implicit_tape",
    "inference_mode",
    "is_recording",
    "jit",
    "mse_loss",
    "nll_loss",
    "no_grad",
    "ops",
    "register_primitive",
    "sum_to_shape",
]
