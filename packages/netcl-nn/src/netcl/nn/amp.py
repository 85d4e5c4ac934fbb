"""Automatic mixed precision: :func:`autocast` regions and :class:`GradScaler` loss scaling.

Inside ``with autocast():`` linear layers, matmuls and convolutions run on float16 tensors
(inputs and the float32 master weights cast per call; the kernels accumulate in float32, so
this works on devices without ``cl_khr_fp16``), while softmax, losses, normalization and sums
run in float32 (NOTE [ Autocast op lists ] in :mod:`netcl.nn.functional`). ``GradScaler``
multiplies the loss so small float16 gradients do not flush to zero, divides the float32
gradients back on the device, and skips the optimizer step when one of them is inf or NaN. The
scale and that decision stay on the device (a ``netcl.optim`` optimizer takes the found-inf flag
in ``step(found_inf=...)``), so an AMP training step reads nothing back and can be captured by
``netcl.runtime.capture``; ``GradScaler.found_inf`` tells, on the device, whether a step was
skipped.

Examples:
    >>> import numpy as np
    >>> import netcl.autograd as ag
    >>> from netcl.core import Tensor, manager
    >>> from netcl.nn import Conv2d, Flatten, Linear, ReLU, Sequential
    >>> from netcl.nn import functional as F
    >>> from netcl.optim import SGD
    >>> q = manager.default("cpu").queue
    >>> rng = np.random.default_rng(0)
    >>> model = Sequential(Conv2d(1, 4, 3, queue=q, rng=rng), ReLU(), Flatten(),
    ...                    Linear(4 * 5 * 5, 3, queue=q, rng=rng))
    >>> opt, scaler = SGD(model.parameters(), lr=0.05), GradScaler()
    >>> x = Tensor.from_host(q, rng.normal(size=(8, 1, 7, 7)))
    >>> y = Tensor.from_host(q, rng.integers(0, 3, 8))
    >>> for _ in range(3):
    ...     opt.zero_grad()
    ...     with ag.Tape() as tape:
    ...         with autocast():
    ...             logits = model(x)
    ...             loss = F.cross_entropy(logits, y)
    ...         scaled = scaler.scale(loss)
    ...     tape.backward(scaled)
    ...     scaler.step(opt)
    ...     scaler.update()
    >>> logits.dtype, loss.dtype, model[0].weight.grad.dtype
    ('float16', 'float32', 'float32')
"""

from ._autocast import autocast as autocast
from ._autocast import get_autocast_dtype as get_autocast_dtype
from ._autocast import is_autocast_enabled as is_autocast_enabled
from ._autocast import runs_in_autocast_dtype as runs_in_autocast_dtype
from ._autocast import runs_in_float32 as runs_in_float32
from ._grad_scaler import GradScaler as GradScaler

__all__ = [
    "GradScaler",
    "autocast",
    "get_autocast_dtype",
    "is_autocast_enabled",
    "runs_in_autocast_dtype",
    "runs_in_float32",
]
