"""The one helper every gradient test uses (CONVENTIONS 5-7).

:func:`check_grad` runs a differentiable function on a device inside a Tape, then checks the
output against a float64 NumPy reference and every input gradient against central finite
differences of that reference (element by element, in float64 on the host), within the
per-dtype tolerance table of :mod:`netcl.core.testing` (gradients get :data:`GRAD_SCALE`
times it: they pass through more rounding).

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
from netcl.core.testing import TOLERANCES

from ._tape import Tape

__all__ = ["GRAD_SCALE", "check_grad", "numeric_grad", "upload"]

#: Gradients are compared with this multiple of the forward tolerance.
GRAD_SCALE = 20.0


def numeric_grad(
    ref: Callable[..., Any], args: Sequence[Any], index: int, v: np.ndarray[Any, Any],
    eps: float = 1e-6,
) -> np.ndarray[Any, Any]:
    """d/d args[index] of ``sum(v * ref(*args))`` by central differences in float64."""
    base = [np.array(a, dtype=np.float64) if _is_float(a) else a for a in args]
    x = base[index]
    grad = np.zeros_like(x)
    flat, gflat = x.reshape(-1), grad.reshape(-1)
    for k in range(flat.size):
        keep = flat[k]
        flat[k] = keep + eps
        up = float(np.sum(v * np.asarray(ref(*base), dtype=np.float64)))
        flat[k] = keep - eps
        down = float(np.sum(v * np.asarray(ref(*base), dtype=np.float64)))
        flat[k] = keep
        gflat[k] = (up - down) / (2 * eps)
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
) -> list[np.ndarray[Any, Any] | None]:
    """Check ``fn`` (netcl) against ``ref`` (NumPy, float64): output and input gradients.

    Args:
        dev: the device to run on.
        fn: the differentiable function; takes Tensors where ``args`` has float arrays.
        ref: the reference; takes the float64 arrays (rounded through ``dtype``).
        args: float ndarrays (become ``dtype`` Tensors), integer ndarrays (kept, no grad),
            anything else (passed through to both).
        kwargs: passed to both ``fn`` and ``ref``.
        dtype: the float dtype tested.
        scale: tolerance multiplier (ops that sum many terms).
        wrt: positions of the arguments to differentiate (default: every float array).
        seed: seed of the random output cotangent.

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
            t = upload(dev.queue, a, dtype if _is_float(a) else a.dtype.name)
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
    rtol, atol = TOLERANCES[dtype]
    np.testing.assert_allclose(out.to_host().astype(np.float64), want, rtol=rtol * scale,
                               atol=atol * scale, err_msg="forward")
    v = np.random.default_rng(seed).standard_normal(want.shape)
    tape.backward(out, grad=upload(dev.queue, v, dtype))
    grads: list[np.ndarray[Any, Any] | None] = [None] * len(args)
    g_scale = scale * GRAD_SCALE
    for i in wrt:
        t = dev_args[i]
        expected = numeric_grad(lambda *a: ref(*a, **kwargs), rounded, i, v)
        got = np.zeros(t.shape) if t.grad is None else t.grad.to_host().astype(np.float64)
        if got.shape != expected.shape:
            raise AssertionError(f"grad of argument {i}: shape {got.shape} != {expected.shape}")
        bound = np.max(np.abs(expected)) if expected.size else 0.0
        # finite differences themselves are good to ~1e-9: the floor of the tolerance
        np.testing.assert_allclose(got, expected, rtol=max(rtol * g_scale, 1e-7),
                                   atol=max(atol * g_scale, 1e-8) * max(1.0, float(bound)),
                                   err_msg=f"gradient of argument {i}")
        grads[i] = got
    return grads
