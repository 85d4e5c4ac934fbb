"""Activation modules beside ReLU/GELU/SiLU/...: Softmax, LogSoftmax, ELU, PReLU, Hardswish,
ReLU6, each the :mod:`netcl.nn.functional` function of the same name with its settings.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((1, 4)))
    >>> Softmax(dim=1)(x).to_host().tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    >>> Softmax(dim=1), ELU(alpha=0.5), PReLU(device="cpu")
    (Softmax(dim=1), ELU(alpha=0.5), PReLU(num_parameters=1))
"""

from __future__ import annotations

import math
from typing import Any

from netcl.autograd import ops as _ops
from netcl.core.tensor import Tensor

from . import functional as F
from ._module import Module, Parameter, placement

__all__ = ["ELU", "Hardsigmoid", "Hardswish", "Hardtanh", "LogSoftmax", "Mish", "PReLU", "ReLU6",
           "Softmax", "Softplus", "Unflatten"]


class Softmax(Module):
    """Softmax along ``dim`` (PyTorch asks for it explicitly; ``None`` is the last dim)."""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """Log-softmax along ``dim`` (``None``: the last dim)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)


class ELU(Module):
    """``x`` if positive else ``alpha * (exp(x) - 1)`` (``inplace`` ignored)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha, self.inplace = float(alpha), inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Hardswish(Module):
    """``x * relu6(x + 3) / 6`` (``inplace`` ignored)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.hardswish(x)


class ReLU6(Hardswish):
    """``min(max(x, 0), 6)`` (``inplace`` ignored)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.relu6(x)


class Hardsigmoid(Hardswish):
    """``relu6(x + 3) / 6`` (``inplace`` ignored)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.hardsigmoid(x)


class Mish(Hardswish):
    """``x * tanh(softplus(x))`` (``inplace`` ignored)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.mish(x)


class Hardtanh(Module):
    """``clamp(x, min_val, max_val)`` (``inplace`` ignored)."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val {min_val} must not exceed max_val {max_val}")
        self.min_val, self.max_val, self.inplace = float(min_val), float(max_val), inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.hardtanh(x, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class Softplus(Module):
    """``log(1 + exp(beta x)) / beta``, linear above ``threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = float(beta), float(threshold)

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (a view; PyTorch's ``nn.Unflatten``).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.zeros((2, 12)))
        >>> Unflatten(1, (3, 4))(x).shape
        (2, 3, 4)
    """

    def __init__(self, dim: int, unflattened_size: tuple[int, ...]) -> None:
        super().__init__()
        self.dim, self.unflattened_size = int(dim), tuple(int(d) for d in unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        dim = self.dim % x.ndim
        if math.prod(self.unflattened_size) != x.shape[dim]:
            raise ValueError(f"Unflatten: {self.unflattened_size} does not split dim {dim} of "
                             f"size {x.shape[dim]} (input {x.shape})")
        return _ops.reshape(x, (*x.shape[:dim], *self.unflattened_size, *x.shape[dim + 1:]))

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class PReLU(Module):
    """``x`` if positive else ``a * x`` with a learnable slope ``a``: one shared, or one per
    channel (``num_parameters`` = the channels, dim 1), initialised to ``init``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> PReLU(2, init=0.5, device=q)(Tensor.from_host(q, np.array([[-2.0, -4.0]]))).to_host()
        array([[-1., -2.]], dtype=float32)
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, queue: Any = None, *,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if isinstance(num_parameters, bool) or not isinstance(num_parameters, int) or \
                num_parameters < 1:
            raise ValueError(f"PReLU: num_parameters must be a positive int, got "
                             f"{num_parameters!r}")
        q, dt = placement("PReLU", device, dtype, queue)
        self.num_prelu_parameters = num_parameters
        self.weight = Parameter.from_shape(q, (num_parameters,), dt, fill=float(init))

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_prelu_parameters}"
