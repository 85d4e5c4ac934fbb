"""The one helper every gradient test uses (CONVENTIONS 5-7).

:func:`check_grad` runs a differentiable function on a device inside a Tape, then checks the
output against a float64 NumPy reference and every input gradient against central finite
differences of that reference (:func:`numeric_grad`, in float64 on the host, through the one
finite-difference routine :func:`central_difference`, which ``gradcheck`` uses too), within
the one tolerance table of :mod:`netcl.core.testing` (gradients get
``tolerance(dtype, scale, grad=True)``: the table times :data:`GRAD_SCALE`, above what finite
differences resolve).

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
from netcl.core.testing import GRAD_SCALE, assert_close

from ._gradcheck import central_difference
from ._tape import Tape

__all__ = ["GRAD_SCALE", "central_difference", "check_grad", "numeric_grad", "upload"]


def _sum_to(a: np.ndarray[Any, Any], shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """``a`` summed over the axes that broadcasting added to an array of ``shape``."""
    lead = a.ndim - len(shape)
    out = a.sum(axis=tuple(range(lead))) if lead else a
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and out.shape[k] != 1)
    return out.sum(axis=axes, keepdims=True) if axes else out


def numeric_grad(
    ref: Callable[..., Any], args: Sequence[Any], index: int, v: np.ndarray[Any, Any],
    eps: float = 1e-6, elementwise: bool = False, independent: Sequence[int] = (),
) -> np.ndarray[Any, Any]:
    """d/d args[index] of ``sum(v * ref(*args))`` by central differences in float64.

    Element by element (two calls of ``ref`` per element), except along structure the caller
    states, where elements are stepped together and their differences read apart:

    - ``elementwise``: ``ref``'s output element depends only on the input elements broadcast
      to it; every element is stepped at once and the differences are summed back over the
      broadcast axes (two calls in all).
    - ``independent``: axes of the input that the output has at the same positions, with an
      output element depending only on input elements of its own index along them (the batch
      axis of a convolution, batch and channel of a pooling): one step per index of the other
      axes.

    Examples:
        >>> x = np.array([[1.0, 2.0], [3.0, 4.0]])
        >>> numeric_grad(lambda a: a.sum(axis=0), [x], 0, np.ones(2)).round(6).tolist()
        [[1.0, 1.0], [1.0, 1.0]]
        >>> b = np.array([0.5, 2.0])
        >>> numeric_grad(np.multiply, [x, b], 1, np.ones((2, 2)), elementwise=True).round(6)
        array([4., 6.])
        >>> cumsum = lambda a: np.cumsum(a**2, axis=1)  # rows are independent
        >>> numeric_grad(cumsum, [x], 0, np.ones((2, 2)), independent=(0,)).round(6).tolist()
        [[4.0, 4.0], [12.0, 8.0]]
    """
    base = [np.array(a, dtype=np.float64) if _is_float(a) else a for a in args]
    x = base[index]
    if elementwise:
        diff = central_difference(ref, base, {index: np.ones_like(x)}, eps)
        return _sum_to(v * diff, x.shape).reshape(x.shape)
    kept = sorted(k % x.ndim for k in independent) if x.ndim else []
    free = [k for k in range(x.ndim) if k not in kept]
    grad = np.zeros_like(x)
    for position in np.ndindex(*(x.shape[k] for k in free)):
        where: list[Any] = [slice(None)] * x.ndim
        for k, p in zip(free, position):
            where[k] = p
        step = np.zeros_like(x)
        step[tuple(where)] = 1.0
        weighted = v * central_difference(ref, base, {index: step}, eps)
        summed = tuple(k for k in range(weighted.ndim) if k not in kept)
        grad[tuple(where)] = weighted.sum(axis=summed) if summed else weighted
    return grad


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
        # atol relative to the gradient's size: dividing both sides by it compares
        # |got - expected| <= atol * size + rtol * |expected|
        size = max(1.0, float(np.max(np.abs(expected)))) if expected.size else 1.0
        assert_close(got / size, expected / size, dtype, scale, grad=True,
                     err_msg=f"gradient of argument {i}")
        grads[i] = got
    return grads
