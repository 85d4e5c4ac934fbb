"""Gradient clipping by global norm: ``clip_grad_norm`` (returns a float, one host read) and
``clip_grad_norm_device`` (no host synchronisation: the norm and the scale stay on the device);
and ``clip_grad_value_`` (PyTorch's: clamp every gradient element, on the device).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from netcl.core.recording import numpy_call, numpy_update
from netcl.core.tensor import Tensor

from ._kernels import NORM_GROUPS, clamp_values, clip_factor, scale_by_factor, sum_squares_into

__all__ = ["clip_grad_norm", "clip_grad_norm_device", "clip_grad_value_"]


def _grads(params: Iterable[Tensor], op: str) -> list[Tensor]:
    grads = [p.grad for p in params if p.grad is not None]
    if grads and len({g.backend for g in grads}) > 1:
        raise ValueError(f"{op}: gradients live on different backends")
    return grads


def clip_grad_norm_device(params: Iterable[Tensor], max_norm: float) -> Tensor:
    """Scale all gradients so their global L2 norm is at most ``max_norm``, on the device.

    Returns a 2-element float32 Tensor ``[total_norm, scale]`` that stays on the device (read it
    only when you need it). On the NumPy backend the same happens with NumPy.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> w = Tensor.from_host(q, np.zeros(2)); w.grad = Tensor.from_host(q, [3.0, 4.0])
        >>> [round(float(v), 4) for v in clip_grad_norm_device([w], 1.0).to_host()]
        [5.0, 0.2]
        >>> [round(float(v), 4) for v in w.grad.to_host()]
        [0.6, 0.8]
    """
    if max_norm <= 0:
        raise ValueError(f"clip_grad_norm_device: max_norm must be > 0, got {max_norm}")
    grads = _grads(params, "clip_grad_norm_device")
    if not grads:
        raise ValueError("clip_grad_norm_device: no parameter has a gradient")
    queue = grads[0].queue
    arrays = [g.array for g in grads if g.array is not None]
    if arrays:  # the norm, then the scaling: recordable by a NumPy capture
        exact, factors = numpy_call(_norm_np, arrays, float(max_norm))
        numpy_update(_scale_np, arrays, exact)
        return Tensor(shape=(2,), dtype="float32", queue=queue, array=factors,
                      _backend=grads[0]._backend)
    partial = Tensor.from_shape(queue, (NORM_GROUPS * len(grads),), "float32", fill=None)
    for i, g in enumerate(grads):
        sum_squares_into(g, partial, i * NORM_GROUPS)
    out = Tensor.from_shape(queue, (2,), "float32", fill=None)
    clip_factor(partial, out, max_norm)
    for g in grads:
        scale_by_factor(g, out)
    return out


def clip_grad_norm(params: Iterable[Tensor], max_norm: float) -> float:
    """Like :func:`clip_grad_norm_device`, and return the total norm as a Python float."""
    result: Any = clip_grad_norm_device(params, max_norm).to_host()
    return float(result[0])


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float) -> None:
    """Clamp every gradient element to ``[-clip_value, clip_value]`` in place, on the device
    (PyTorch's ``torch.nn.utils.clip_grad_value_``; NaN stays NaN). Parameters without a
    gradient are skipped.

    Raises:
        ValueError: ``clip_value`` is negative.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> w = Tensor.from_host(q, np.zeros(3)); w.grad = Tensor.from_host(q, [-3.0, 0.5, 4.0])
        >>> clip_grad_value_([w], 1.0)
        >>> w.grad.to_host().tolist()
        [-1.0, 0.5, 1.0]
    """
    if clip_value < 0:
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    params = [parameters] if isinstance(parameters, Tensor) else parameters
    for g in _grads(params, "clip_grad_value_"):
        if g.array is not None:
            numpy_update(_clamp_np, g.array, float(clip_value))
        else:
            clamp_values(g, clip_value)


# -- NumPy backend (NOTE [ NumPy work under a recorder ] in netcl.core.recording) -------------

def _norm_np(arrays: list[Any], max_norm: float) -> tuple[Any, Any]:
    """``[total_norm, scale]`` in float64 (what scales) and float32 (what is returned)."""
    total = float(np.sqrt(sum(float(np.sum(np.square(a, dtype=np.float64))) for a in arrays)))
    exact = np.array([total, min(1.0, max_norm / (total + 1e-6))], np.float64)
    return exact, exact.astype(np.float32)


def _scale_np(arrays: list[Any], exact: np.ndarray[Any, Any]) -> None:
    scale = float(exact[1])
    for a in arrays:  # float16 is scaled in float32 and rounded once, as on the device
        np.multiply(a, scale, out=a, dtype=np.promote_types(a.dtype, np.float32),
                    casting="same_kind")


def _clamp_np(a: Any, limit: float) -> None:
    np.clip(a, -limit, limit, out=a)
