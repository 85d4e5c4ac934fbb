"""``gradcheck``: the backward pass against central finite differences in float64 on the host.

The backward runs where the inputs live (any device, any float dtype); the finite differences
run the same function on NumPy-backend float64 copies of the inputs, so devices without fp64
are checked too. Both are compared in random directions: for a random cotangent ``v`` of the
output and random perturbations ``d_i`` of the inputs,

    sum_i <grad_i, d_i>   vs   (<v, f(x + eps d)> - <v, f(x - eps d)>) / (2 eps)

where ``grad_i`` is what ``tape.backward(f(x), grad=v)`` accumulates into ``x_i.grad``.

``netcl.core.testing.central_difference`` is the one finite-difference routine of netcl:
``gradcheck`` takes it in random directions, ``netcl.core.testing.numeric_grad`` element by
element (or along independent axes together). Tolerances come from the one table,
``netcl.core.testing.tolerance``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from netcl.core.device import manager
from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.tensor import Tensor, reshape
from netcl.core.testing import central_difference, tolerance

from ._tape import Tape, no_grad

__all__ = ["GradcheckError", "gradcheck"]


class GradcheckError(AssertionError):
    """The analytic and numerical directional derivatives disagree."""


def _host_value(value: Any) -> Any:
    """A Tensor's values on the host (floats as float64); other arguments pass through."""
    if not isinstance(value, Tensor):
        return value
    arr = value.to_host()
    return arr.astype(np.float64) if value.dtype in FLOAT_DTYPES else arr


def _on_numpy_backend(arr: Any, like: Any) -> Any:
    """Host values back as a NumPy-backend Tensor where ``like`` is a Tensor (floats in
    float64, others in their dtype); other arguments pass through."""
    if not isinstance(like, Tensor):
        return arr
    handle = manager.default("cpu")
    if handle is None:
        raise RuntimeError("gradcheck: the NumPy backend is not available")
    dtype = "float64" if like.dtype in FLOAT_DTYPES else like.dtype
    out = Tensor.from_host(handle.queue, arr, dtype=dtype)
    return out if out.shape == like.shape else reshape(out, like.shape)


def _output(op: str, out: Any) -> Tensor:
    if not isinstance(out, Tensor) or out.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: fn must return a floating-point Tensor, got "
                        f"{getattr(out, 'dtype', type(out).__name__)}")
    return out


def gradcheck(
    fn: Callable[..., Tensor],
    inputs: Sequence[Any],
    *,
    eps: float = 1e-6,
    rtol: float | None = None,
    atol: float | None = None,
    directions: int = 3,
    seed: int = 0,
    check_forward: bool = True,
    raise_exception: bool = True,
) -> bool:
    """Check the gradients of ``fn`` with respect to every input with ``requires_grad``.

    ``fn`` must compute only from its arguments (every Tensor it uses is in ``inputs``) with
    differentiable ops, so that it can run again on the host. The inputs' ``.grad`` are left
    as they were.

    Args:
        fn: a function of ``inputs`` returning one floating-point Tensor.
        inputs: Tensors (those with ``requires_grad`` are checked) and other arguments.
        eps: the finite-difference step (in float64).
        rtol, atol: tolerances; default: the gradient tolerance of the output's dtype in the
            one table, ``netcl.core.testing.tolerance(dtype, grad=True)`` (float32: 2e-3, 2e-4).
        directions: how many random directions to try.
        seed: seed of the random cotangent and directions.
        check_forward: also compare ``fn``'s output with its float64 host evaluation.
        raise_exception: raise :class:`GradcheckError` on a mismatch (else return False).

    Returns:
        True when every check passes.

    Raises:
        ValueError: no input requires grad.
        GradcheckError: a mismatch (with ``raise_exception``).

    Examples:
        >>> import numpy as np
        >>> import netcl.autograd as ag
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([0.5, -1.0, 2.0]))
        >>> x.requires_grad = True
        >>> gradcheck(lambda t: ag.ops.mul(ag.ops.tanh(t), t), [x])
        True
    """
    wrt = [i for i, v in enumerate(inputs) if isinstance(v, Tensor) and v.requires_grad]
    if not wrt:
        raise ValueError("gradcheck: no input has requires_grad=True; nothing to check")
    rng = np.random.default_rng(seed)
    saved = [inputs[i].grad for i in wrt]
    try:
        for i in wrt:
            inputs[i].grad = None
        with Tape() as tape:
            out = _output("gradcheck", fn(*inputs))
        dtype = out.dtype
        v = rng.standard_normal(out.shape)
        seed_grad = Tensor.from_host(out.queue, v, dtype=dtype)
        if seed_grad.shape != out.shape:  # from_host gives 0-d data shape (1,)
            seed_grad = reshape(seed_grad, out.shape)
        tape.backward(out, grad=seed_grad)
        grads = [
            np.zeros(inputs[i].shape) if inputs[i].grad is None
            else inputs[i].grad.to_host().astype(np.float64)
            for i in wrt
        ]
        device_out = out.to_host().astype(np.float64)
    finally:
        for i, g in zip(wrt, saved):
            inputs[i].grad = g
    r, a = tolerance(dtype, grad=True)
    rtol, atol = (r if rtol is None else rtol), (a if atol is None else atol)
    host = [_host_value(value) for value in inputs]

    def evaluate(*values: Any) -> np.ndarray[Any, Any]:
        args = [_on_numpy_backend(x, like) for x, like in zip(values, inputs)]
        with no_grad():
            result = _output("gradcheck", fn(*args))
        return result.to_host().astype(np.float64)

    if check_forward:
        ref = evaluate(*host)
        if ref.shape != device_out.shape:
            return _fail(raise_exception, f"gradcheck: fn gives shape {device_out.shape} on the "
                                          f"device and {ref.shape} on the host")
        if not np.allclose(device_out, ref, rtol, atol):
            worst = float(np.max(np.abs(device_out - ref)))
            return _fail(raise_exception, f"gradcheck: forward differs from its float64 host "
                                          f"evaluation by up to {worst:.3g}")
    for k in range(directions):
        ds = {i: rng.standard_normal(inputs[i].shape) for i in wrt}
        numeric = float(np.sum(v * central_difference(evaluate, host, ds, eps)))
        terms = [g * ds[i] for g, i in zip(grads, wrt)]
        analytic = float(sum(np.sum(t) for t in terms))
        scale = max(abs(numeric), float(sum(np.sum(np.abs(t)) for t in terms)))
        if not abs(numeric - analytic) <= atol + rtol * scale:
            return _fail(raise_exception,
                         f"gradcheck: direction {k}: backward gives {analytic!r}, finite "
                         f"differences give {numeric!r} (difference {abs(numeric - analytic):.3g}"
                         f" > atol {atol} + rtol {rtol} * {scale:.3g})")
    return True


def _fail(raise_exception: bool, message: str) -> bool:
    if raise_exception:
        raise GradcheckError(message)
    return False
