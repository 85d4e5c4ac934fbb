"""``inference_mode``: PyTorch's name for evaluation without recording, here
:func:`~netcl.autograd.no_grad`'s semantics (netcl tensors carry no version counters, so there
is nothing more for an inference mode to switch off).

Examples:
    >>> import numpy as np
    >>> import netcl.autograd as ag
    >>> from netcl.core import Tensor, manager
    >>> w = Tensor.from_host(manager.default("cpu").queue, np.ones(2))
    >>> w.requires_grad = True
    >>> with ag.Tape(), inference_mode():
    ...     y = ag.ops.mul(w, w)
    >>> y.requires_grad
    False
"""

from __future__ import annotations

import contextlib

from ._tape import no_grad

__all__ = ["inference_mode"]


class inference_mode(contextlib.ContextDecorator):  # noqa: N801  (PyTorch's name)
    """A context manager and decorator: ``no_grad`` while active when ``mode`` is true, else
    nothing (``torch.inference_mode(mode=True)``).

    Examples:
        >>> from netcl.autograd import Tape, is_recording
        >>> @inference_mode()
        ... def evaluate() -> bool:
        ...     return is_recording()
        >>> with Tape():
        ...     evaluate(), is_recording()
        (False, True)
    """

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)
        self._entered: list[bool] = []

    def __enter__(self) -> None:
        self._entered.append(self.mode)
        if self.mode:
            no_grad().__enter__()

    def __exit__(self, *exc: object) -> None:
        if self._entered.pop():
            no_grad().__exit__(*exc)
