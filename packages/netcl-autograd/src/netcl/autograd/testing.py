"""The one helper every gradient test uses (CONVENTIONS 5-7).

:func:`check_grad` runs a differentiable function on a device inside a Tape, then checks the
output against a float64 NumPy reference and every input gradient against central finite
differences of that reference (:func:`~netcl.core.testing.numeric_grad`, in float64 on the
host, through the one finite-difference routine
:func:`~netcl.core.testing.central_difference`, which ``gradcheck`` uses too), within the one
tolerance table of :mod:`netcl.core.testing` (gradients get
``assert_close(..., grad=True)``: the table times :data:`GRAD_SCALE`, above what finite
differences resolve). ``numeric_grad``, ``central_difference`` and ``GRAD_SCALE`` are
``netcl.core.testing``'s, importable from here too.

Examples:
    >>> import numpy as np
    >>> import netcl.autograd as ag
    >>> from netcl.core.device import manager
    >>> x = np.array([[0.5, -1.0], [2.0, 0.25]])
    >>> _ = check_grad(manager.default("cpu"), ag.ops.tanh, np.tanh, (x,))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from netcl.core.device import DeviceHandle
from netcl.core.dtypes import canonical_dtype
from netcl.core.tensor import Tensor, reshape
from netcl.core.testing import GRAD_SCALE, assert_close, central_difference, numeric_grad

from ._tape import Tape

__all__ = ["GRAD_SCALE", "central_difference", "check_grad", "numeric_grad", "upload"]


def upload(queue: Any, array: np.ndarray[Any, Any], dtype: str) -> Tensor:
    """``array`` as a Tensor of ``dtype`` on ``queue``, keeping 0-d shapes 0-d."""
    t = Tensor.from_host(queue, array, dtype=dtype)
    return t if t.shape == array.shape else reshape(t, array.shape)


def _is_float(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def check_grad(
    dev: DeviceHandle,
    fn: Callable[..., Tensor],
    ref: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any] | None = None,
    dtype: str = "float32",
    scale: float = 1.0,
    wrt: Sequence[int] | None = None,
    seed: int = 0,
    elementwise: bool = False,
    independent: dict[int, Sequence[int]] | None = None,
) -> list[np.ndarray[Any, Any] | None]:
    """Check ``fn`` (netcl) against ``ref`` (NumPy, float64): output and input gradients.

    Args:
        dev: the device to run on.
        fn: the differentiable function; takes Tensors where ``args`` has float arrays.
        ref: the reference; takes the float64 arrays (rounded through ``dtype``).
        args: float ndarrays (become ``dtype`` Tensors), integer ndarrays (kept, no grad),
            boolean ndarrays (uint8 masks), anything else (passed through to both).
        kwargs: passed to both ``fn`` and ``ref``.
        dtype: the float dtype tested.
        scale: tolerance multiplier (ops that sum many terms).
        wrt: positions of the arguments to differentiate (default: every float array).
        seed: seed of the random output cotangent.
        elementwise: ``ref`` is elementwise (with broadcasting), so its finite differences
            step every element at once (see :func:`numeric_grad`).
        independent: per argument position, the axes along which its finite differences
            step elements together (see :func:`numeric_grad`).

    Returns:
        The device gradients, one per argument (``None`` for those not checked).

    Raises:
        AssertionError: shape, dtype or value mismatches.
    """
    kwargs = kwargs or {}
    dtype = canonical_dtype(dtype)
    floats = [i for i, a in enumerate(args) if _is_float(a)]
    wrt = floats if wrt is None else list(wrt)
    rounded = [a.astype(dtype).astype(np.float64) if _is_float(a) else a for a in args]
    dev_args: list[Any] = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            kept = "uint8" if a.dtype.kind == "b" else a.dtype.name  # masks as uint8
            t = upload(dev.queue, a, dtype if _is_float(a) else kept)
            t.requires_grad = i in wrt
            dev_args.append(t)
        else:
            dev_args.append(a)
    with Tape() as tape:
        out = fn(*dev_args, **kwargs)
    want = np.asarray(ref(*rounded, **kwargs), dtype=np.float64)
    if not isinstance(out, Tensor):
        raise AssertionError(f"fn returned {type(out).__name__}, expected a Tensor")
    if out.shape != want.shape:
        raise AssertionError(f"output shape {out.shape} != reference {want.shape}")
    if out.dtype != dtype:
        raise AssertionError(f"output dtype {out.dtype} != {dtype}")
    assert_close(out.to_host(), want, dtype, scale, err_msg="forward")
    v = np.random.default_rng(seed).standard_normal(want.shape)
    tape.backward(out, grad=upload(dev.queue, v, dtype))
    grads: list[np.ndarray[Any, Any] | None] = [None] * len(args)
    for i in wrt:
        t = dev_args[i]
        expected = numeric_grad(lambda *a: ref(*a, **kwargs), rounded, i, v,
                                elementwise=elementwise,
                                independent=(independent or {}).get(i, ()))
        got = np.zeros(t.shape) if t.grad is None else t.grad.to_host().astype(np.float64)
        if got.shape != expected.shape:
            raise AssertionError(f"grad of argument {i}: shape {got.shape} != {expected.shape}")
        assert_close(got, expected, dtype, scale, grad=True,
                     err_msg=f"gradient of argument {i}")
        grads[i] = got
    return grads
