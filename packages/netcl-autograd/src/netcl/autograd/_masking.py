"""Differentiable ``triu``, ``tril`` and ``masked_fill``: the gradient passes where the
element was kept and is 0 where it was zeroed or filled."""

from __future__ import annotations

import netcl.ops as _ops
from netcl.core.tensor import Tensor

from ._function import differentiable
from ._tape import Backward

__all__ = ["masked_fill", "tril", "triu"]


@differentiable("triu")
def triu(x: Tensor, diagonal: int = 0) -> tuple[Tensor, Backward]:
    """:func:`netcl.ops.triu` recorded under a tape (the gradient is ``triu`` of the output's).

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((2, 2)))
        >>> x.requires_grad = True
        >>> with ag.Tape() as tape:
        ...     y = ag.ops.sum(triu(x))
        >>> tape.backward(y)
        >>> x.grad.to_host().tolist()
        [[1.0, 1.0], [0.0, 1.0]]
    """
    out = _ops.triu(x, diagonal)
    return out, lambda g, needs: (_ops.triu(g, diagonal),)


@differentiable("tril")
def tril(x: Tensor, diagonal: int = 0) -> tuple[Tensor, Backward]:
    """:func:`netcl.ops.tril` recorded under a tape (the gradient is ``tril`` of the output's).

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((2, 2)))
        >>> x.requires_grad = True
        >>> with ag.Tape() as tape:
        ...     y = ag.ops.sum(tril(x))
        >>> tape.backward(y)
        >>> x.grad.to_host().tolist()
        [[1.0, 0.0], [1.0, 1.0]]
    """
    out = _ops.tril(x, diagonal)
    return out, lambda g, needs: (_ops.tril(g, diagonal),)


@differentiable("masked_fill")
def masked_fill(x: Tensor, mask: Tensor, value: float) -> tuple[Tensor, Backward]:
    """:func:`netcl.ops.masked_fill` recorded under a tape: the gradient reaches ``x`` where
    ``mask`` is 0 (the uint8 mask gets none).

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([1.0, 2.0]))
        >>> x.requires_grad = True
        >>> with ag.Tape() as tape:
        ...     y = ag.ops.sum(masked_fill(x, Tensor.from_host(q, np.array([True, False])), 0.0))
        >>> tape.backward(y)
        >>> x.grad.to_host().tolist()
        [0.0, 1.0]
    """
    out = _ops.masked_fill(x, mask, value)

    def backward(g: Tensor, needs: tuple[bool, ...]) -> tuple[Tensor | None, None]:
        return (_ops.masked_fill(g, mask, 0.0) if needs[0] else None), None

    return out, backward
