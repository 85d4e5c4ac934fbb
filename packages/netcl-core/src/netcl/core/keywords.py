"""PyTorch's keyword names next to netcl's: ``dim``/``axis`` and ``keepdim``/``keepdims``.

The reductions and the softmax family take both spellings; these helpers turn the pair a
function received into one value, and refuse both spellings given at once (a ``TypeError``
naming the op), so ``sum(x, axis=0, dim=1)`` cannot silently pick one.

Examples:
    >>> resolve_dim("sum", None, 1), resolve_dim("sum", 0, None), resolve_dim("sum", None, None)
    (1, 0, None)
    >>> resolve_keepdim("sum", None, True), resolve_keepdim("sum", None, None)
    (True, False)
    >>> resolve_dim("sum", 0, 1)
    Traceback (most recent call last):
    ...
    TypeError: sum: got both axis=0 and dim=1; give one (dim is PyTorch's name for axis)
"""

from __future__ import annotations

from typing import Any

__all__ = ["resolve_dim", "resolve_keepdim"]


def resolve_dim(op: str, axis: Any, dim: Any, default: Any = None) -> Any:
    """The axis argument of ``op`` given as ``axis`` (netcl) or ``dim`` (PyTorch).

    ``None`` for both gives ``default``.

    Raises:
        TypeError: both ``axis`` and ``dim`` are given.
    """
    if dim is None:
        return default if axis is None else axis
    if axis is not None:
        raise TypeError(f"{op}: got both axis={axis!r} and dim={dim!r}; give one (dim is "
                        "PyTorch's name for axis)")
    return dim


def resolve_keepdim(op: str, keepdims: bool | None, keepdim: bool | None) -> bool:
    """The keep-dimensions flag of ``op`` given as ``keepdims`` (NumPy) or ``keepdim``
    (PyTorch); ``False`` when neither is given.

    Raises:
        TypeError: both are given.
    """
    if keepdim is None:
        return bool(keepdims)
    if keepdims is not None:
        raise TypeError(f"{op}: got both keepdims={keepdims!r} and keepdim={keepdim!r}; give "
                        "one (keepdim is PyTorch's name)")
    return bool(keepdim)
