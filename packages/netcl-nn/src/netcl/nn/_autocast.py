"""``autocast``: the mixed-precision region, and the two input policies its ops follow.

# NOTE [ Autocast state ]
# The state (enabled, dtype) is a ContextVar: each thread (and each asyncio task) starts with
# autocast off, and ``with autocast(...)`` sets it for the block and restores the outer value on
# exit, so regions nest and ``autocast(enabled=False)`` turns it off inside an enabled one.
# Nothing is read at import time and nothing global is patched: the ops that take part check
# the state when they are called (see NOTE [ Autocast op lists ] in ``functional.py``).
#
# NOTE [ float16 storage, float32 arithmetic ]
# netcl's OpenCL kernels load float16 with ``vload_half`` and compute in float32 whether or
# not the device has ``cl_khr_fp16`` (most NVIDIA OpenCL drivers do not); the NumPy backend
# computes float16 matmuls and convolutions in float32 too. So float16 under autocast means
# half the bytes moved and stored, with float32 accumulation, on every device.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, ParamSpec, TypeVar

from netcl.autograd import ops as _ag
from netcl.core.tensor import Tensor

__all__ = [
    "autocast",
    "get_autocast_dtype",
    "is_autocast_enabled",
    "runs_in_autocast_dtype",
    "runs_in_float32",
]

P = ParamSpec("P")
R = TypeVar("R")

_DTYPES = {"float16": "float16", "half": "float16"}


class _State(NamedTuple):
    enabled: bool
    dtype: str


_OFF = _State(False, "float16")
_STATE: contextvars.ContextVar[_State] = contextvars.ContextVar("netcl_autocast", default=_OFF)


def _check_dtype(dtype: Any) -> str:
    if not isinstance(dtype, str):
        raise TypeError(f"autocast: dtype must be a dtype name, got {type(dtype).__name__}")
    if dtype == "bfloat16":
        raise ValueError("autocast: dtype 'bfloat16' is not supported (netcl has no bfloat16 "
                         "storage); use 'float16'")
    if dtype not in _DTYPES:
        raise ValueError(f"autocast: dtype must be 'float16' (or 'half'), got {dtype!r}")
    return _DTYPES[dtype]


@contextlib.contextmanager
def autocast(enabled: bool = True, dtype: str = "float16") -> Iterator[None]:
    """Run the block in mixed precision: matmuls and convolutions in float16, the numerically
    sensitive ops (softmax, losses, normalization, sums) in float32.

    Inside the block, :class:`~netcl.nn.Linear`, :class:`~netcl.nn.Conv2d` and
    ``functional.linear``/``matmul``/``conv2d`` cast their float32 inputs and weights to
    float16 (a differentiable cast, so the float32 master weights get float32 gradients) and
    return float16; softmax, the losses, batch and layer norm, ``sum``/``mean``/``var`` and
    ``exp``/``log``/``pow`` cast float16 inputs up to float32. Everything else runs in the
    dtype it is given (elementwise ops on mixed float16/float32 promote to float32). The lists
    are in NOTE [ Autocast op lists ] of ``netcl.nn.functional``.

    Regions nest; ``enabled=False`` switches autocast off inside an enabled region. The state
    is per thread. Use it for the forward pass and the loss; run ``tape.backward`` after the
    block (backward ops run in the dtypes the forward recorded).

    Args:
        enabled: whether autocast is on inside the block.
        dtype: the lower-precision dtype: ``"float16"`` (alias ``"half"``).

    Raises:
        ValueError: ``dtype`` is not float16 (``"bfloat16"`` is not supported).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> from netcl.nn import Linear, functional as F
        >>> q = manager.default("cpu").queue
        >>> layer = Linear(4, 3, queue=q, rng=np.random.default_rng(0))
        >>> x = Tensor.from_host(q, np.ones((2, 4)))
        >>> with autocast():
        ...     y = layer(x)
        ...     loss = F.cross_entropy(y, Tensor.from_host(q, np.array([0, 2])))
        ...     with autocast(enabled=False):
        ...         y32 = layer(x)
        >>> y.dtype, loss.dtype, y32.dtype, layer.weight.dtype
        ('float16', 'float32', 'float32', 'float32')
    """
    token = _STATE.set(_State(bool(enabled), _check_dtype(dtype)))
    try:
        yield
    finally:
        _STATE.reset(token)


def is_autocast_enabled() -> bool:
    """Whether the calling code runs inside an enabled :func:`autocast` region.

    Examples:
        >>> with autocast():
        ...     inside = is_autocast_enabled()
        >>> inside, is_autocast_enabled()
        (True, False)
    """
    return _STATE.get().enabled


def get_autocast_dtype() -> str:
    """The lower-precision dtype of the innermost :func:`autocast` region (``"float16"``).

    Examples:
        >>> get_autocast_dtype()
        'float16'
    """
    return _STATE.get().dtype


def _with_policy(fn: Callable[P, R], target: Callable[[str, str], str | None]
                 ) -> Callable[P, R]:
    """``fn`` that, inside an enabled region, first casts each floating-point Tensor argument to
    ``target(its dtype, the autocast dtype)`` (``None``: leave it as it is)."""

    def cast(value: Any, low: str) -> Any:
        if isinstance(value, Tensor) and value.is_floating_point:
            dtype = target(value.dtype, low)
            if dtype is not None:
                return _ag.cast(value, dtype)
        return value

    @functools.wraps(fn)
    def op(*args: P.args, **kwargs: P.kwargs) -> R:
        state = _STATE.get()
        if not state.enabled:
            return fn(*args, **kwargs)
        cast_args = [cast(a, state.dtype) for a in args]
        cast_kwargs = {k: cast(v, state.dtype) for k, v in kwargs.items()}
        return fn(*cast_args, **cast_kwargs)

    return op


def _to_low(dtype: str, low: str) -> str | None:
    return low if dtype != low else None


def _to_float32(dtype: str, low: str) -> str | None:
    return "float32" if dtype == low else None


def runs_in_autocast_dtype(fn: Callable[P, R]) -> Callable[P, R]:
    """Make ``fn`` an op that autocast runs in float16: inside an enabled :func:`autocast`
    region its floating-point Tensor arguments are cast (differentiably) to the autocast dtype
    first; outside it is ``fn`` unchanged. For ops that gain from half the bytes (matmul,
    convolution) and accumulate in float32 anyway.

    Examples:
        >>> import numpy as np
        >>> from netcl.autograd import ops
        >>> from netcl.core import Tensor, manager
        >>> mm = runs_in_autocast_dtype(ops.matmul)
        >>> a = Tensor.from_host(manager.default("cpu").queue, np.ones((2, 2)))
        >>> with autocast():
        ...     inside = mm(a, a)
        >>> inside.dtype, mm(a, a).dtype
        ('float16', 'float32')
    """
    return _with_policy(fn, _to_low)


def runs_in_float32(fn: Callable[P, R]) -> Callable[P, R]:
    """Make ``fn`` an op that autocast runs in float32: inside an enabled :func:`autocast`
    region its float16 Tensor arguments are cast (differentiably) to float32 first; outside it
    is ``fn`` unchanged. For ops whose results need float32 range or precision (softmax,
    losses, normalization statistics, sums, ``exp``).

    Examples:
        >>> import numpy as np
        >>> from netcl.autograd import ops
        >>> from netcl.core import Tensor, manager
        >>> softmax = runs_in_float32(ops.softmax)
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones((1, 3)), dtype="float16")
        >>> with autocast():
        ...     inside = softmax(x)
        >>> inside.dtype, softmax(x).dtype
        ('float32', 'float16')
    """
    return _with_policy(fn, _to_float32)
