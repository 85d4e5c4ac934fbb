"""Batch norm (training and eval, optionally fused with ReLU) and layer norm, with their backward
computations. Batch-norm statistics are per-channel partial sums over several work-groups
per channel, added in order by a second launch (NOTE [ Batch norm kernels ] in
``._norm_kernels``); layer norm's are one work-group per row on GPUs, one work-item per row on
OpenCL CPU devices (NOTE [ Layer norm on CPU devices ]). Normalizing is one kernel.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from netcl.core.kernel_selector import KernelVariant, get_kernel_selector
from netcl.core.kernels.primitives import launch
from netcl.core.recording import numpy_update
from netcl.core.tensor import Tensor

from ._common import check_tensor, empty, launch_1d, same_device
from ._dtype_policy import kernel_scalar, np_compute
from ._elementwise import relu
from ._elementwise_dispatch import host, np_results
from ._launch import view_args
from ._norm_kernels import (
    GROUP,
    LNP_COLUMNS,
    LNP_ROWS,
    LNW_ROWS,
    bn_geometry,
    bn_lanes,
    bn_launch_2d,
    bn_splits,
    ln_param_splits,
    ln_per_row,
    ln_warp_rows,
    normalization_family,
)
from ._split_sync import ptx_fence, tickets

__all__ = ["batch_norm", "batch_norm_backward", "layer_norm", "layer_norm_backward"]

def _check_affine(op: str, weight: Tensor | None, bias: Tensor | None) -> None:
    """The kernels apply weight and bias together: one alone would be ignored, so refuse it."""
    if (weight is None) != (bias is None):
        given, missing = ("weight", "bias") if bias is None else ("bias", "weight")
        raise ValueError(
            f"{op}: weight and bias are applied together; got a {given} and no {missing} "
            f"(pass ones for the weight or zeros for the bias)"
        )


def _or(t: Tensor | None, placeholder: Tensor) -> Tensor:
    """``t``, or a placeholder buffer for a kernel argument the kernel will not read."""
    return placeholder if t is None else t


def _check_bn(op: str, x: Tensor, *params: Tensor | None) -> tuple[int, int, int]:
    check_tensor(op, x)
    if x.ndim < 2:
        raise ValueError(f"{op}: input must be (N, C, ...), got shape {x.shape}")
    if not x.is_floating_point:
        raise TypeError(f"{op}: input must be floating point, got {x.dtype}")
    n, c = x.shape[0], x.shape[1]
    for p in params:
        if p is not None:
            same_device(op, x, p)
            if p.shape != (c,):
                raise ValueError(f"{op}: per-channel tensors must have shape ({c},) for input "
                                 f"{x.shape}, got {p.shape}")
    _check_dtypes(op, x, *params)
    return n, c, math.prod(x.shape[2:])


def _check_dtypes(op: str, x: Tensor, *others: Tensor | None) -> None:
    # The kernels read every tensor argument as x's storage type T: a float32 weight next to a
    # float16 input would be read as halves (garbage), so mixed dtypes are refused up front.
    for t in others:
        if t is not None and t.dtype != x.dtype:
            raise TypeError(f"{op}: every tensor must have the input's dtype {x.dtype}, got "
                            f"{t.dtype} (cast the input or the parameters first)")


@functools.cache  # a hot lookup: batch norm asks for it on every call
def stat_dtype(dtype: str) -> str:
    """The dtype of the statistics (mean, 1/std, gradient sums) for inputs of ``dtype``: the
    kernels' compute type, float64 for float64 and float32 otherwise (float16 included)."""
    return str(np_compute(dtype).name)


def _check_stats(op: str, x: Tensor, count: int, **stats: Tensor) -> None:
    """The statistics a forward returned: ``(count,)`` tensors of ``stat_dtype(x.dtype)`` (the
    kernels read them as the compute type, so another dtype would be garbage)."""
    want = stat_dtype(x.dtype)
    for name, t in stats.items():
        check_tensor(op, t, name)
        same_device(op, x, t)
        if t.dtype != want or t.shape != (count,):
            raise TypeError(f"{op}: {name} must be a ({count},) {want} tensor for a {x.dtype} "
                            f"input (what the forward returned), got {t.dtype} {t.shape}")


def _channel_view(a: np.ndarray[Any, Any], ndim: int) -> np.ndarray[Any, Any]:
    return a.reshape((1, -1) + (1,) * (ndim - 2))


def batch_norm(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = True,
               momentum: float = 0.1, eps: float = 1e-5, fuse_relu: bool = False) -> Any:
    """Batch normalization over (N, C, ...) input.

    Training: normalizes with the batch statistics, updates ``running_mean``/``running_var``
    in place (unbiased variance, as PyTorch), and returns ``(y, mean, invstd)``, the
    per-channel statistics the backward needs, in :func:`stat_dtype` (float64 for a float64
    input, float32 otherwise). Eval: normalizes with the running statistics and
    returns ``y``. ``fuse_relu`` applies ReLU in the same kernel (the BATCHNORM_FUSED variant).
    ``weight`` and ``bias`` come together or not at all (``ValueError`` otherwise).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.array([[1.0], [3.0]]))
        >>> rm, rv = Tensor.from_host(q, np.zeros(1)), Tensor.from_host(q, np.ones(1))
        >>> y, mean, invstd = batch_norm(x, rm, rv)
        >>> [round(v, 3) for v in y.to_host().reshape(-1).tolist()], rm.to_host().tolist()
        ([-1.0, 1.0], [0.20000000298023224])
    """
    op = "batch_norm"
    _check_affine(op, weight, bias)
    n, c, hw = _check_bn(op, x, running_mean, running_var, weight, bias)
    if not training and (running_mean is None or running_var is None):
        raise ValueError(f"{op}: eval mode needs running_mean and running_var")
    if training and n * hw < 2:
        raise ValueError(f"{op}: training needs more than one value per channel, got input "
                         f"{x.shape}")
    # NumPy skips the selector (a per-call cost) where it could refuse nothing: it refuses only
    # empty sizes and non-bool flags, on every backend alike
    if (x.array is not None and min(n, c, hw) >= 1 and isinstance(training, bool)
            and isinstance(fuse_relu, bool)):
        return _batch_norm_numpy(x, running_mean, running_var, weight, bias, training, momentum,
                                 eps, fuse_relu)
    cfg = get_kernel_selector(x.device).select_batchnorm_kernel(n, c, hw, training, fuse_relu,
                                                               x.dtype)
    fused = fuse_relu and cfg.variant is KernelVariant.BATCHNORM_FUSED
    if x.array is not None:
        return _batch_norm_numpy(x, running_mean, running_var, weight, bias, training, momentum,
                                 eps, fuse_relu)
    q = x.queue
    sdt = stat_dtype(x.dtype)
    mean = empty(q, (c,), sdt)
    invstd = empty(q, (c,), sdt)
    kernels = normalization_family(x.context, x.dtype, ptx_fence(x.queue.device)).kernels
    if training:
        groups, chunk = bn_splits(q.device, c, n * hw)
        part = empty(q, (c * groups * 2,), sdt)
        lanes = bn_lanes(chunk)
        upd = running_mean is not None and running_var is not None
        launch(q, kernels["bn_stats"], (c * groups * lanes,), (lanes,),
               *view_args(x, x, mean, part, invstd, _or(running_mean, x), _or(running_var, x),
                          mean, mean, x, x), tickets(q, c), n, c, hw, groups, chunk,
               kernel_scalar(op, eps, sdt), kernel_scalar(op, momentum, sdt), int(upd), 0)
    y = empty(q, x.shape, x.dtype)
    affine = weight is not None and bias is not None
    vec, items = bn_geometry(hw, x, y)
    bn_launch_2d(q, kernels["bn_apply"], items, n * c, x, y, mean, invstd,
                 _or(running_mean, x), _or(running_var, x), _or(weight, x), _or(bias, x),
                 n * c, c, hw, kernel_scalar(op, eps, sdt), int(not training), int(affine),
                 int(fused), int(vec))
    if fuse_relu and not fused:
        y = relu(y)
    return (y, mean, invstd) if training else y


# NOTE [ Batch norm on NumPy ]
# The NumPy path computes in the kernels' compute type (float32, float64 for float64) as
# (N, C, HW) views: per-channel sums are einsums (one pass, no temporaries), the variance
# is taken about the mean (two passes, no cancellation), and normalizing is one scale and one
# shift per channel. Converting to float64 first made the digits CNN's batch norms several
# full-size passes slower (forward and backward together about a fifth of a NumPy step).


def _rows3(a: np.ndarray[Any, Any], ct: Any) -> np.ndarray[Any, Any]:
    """``(N, C, HW)`` view of ``a`` in the compute type (a copy only when it converts)."""
    return a.astype(ct, copy=False).reshape(a.shape[0], a.shape[1], math.prod(a.shape[2:]))


def _per_channel(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return a[:, None]


def _batch_norm_numpy(x: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
                      weight: Tensor | None, bias: Tensor | None, training: bool,
                      momentum: float, eps: float, relu: bool) -> Any:
    sdt = stat_dtype(x.dtype)
    w, b = _array(weight), _array(bias)
    if training:  # NOTE [ NumPy work under a recorder ]: the statistics, then their update
        y, mu, var, invstd = np_results(x, (x.dtype, sdt, sdt, sdt), _bn_train_np, host(x), w,
                                        b, np.dtype(sdt), eps, relu)
        if running_mean is not None and running_var is not None:
            numpy_update(_bn_running_np, running_mean.array, running_var.array, mu.array,
                         var.array, momentum, x.size // max(x.shape[1], 1))
        return y, mu, invstd
    (y,) = np_results(x, (x.dtype,), _bn_eval_np, host(x), w, b, _array(running_mean),
                      _array(running_var), np.dtype(sdt), eps, relu)
    return y


def _array(t: Tensor | None) -> Any:
    return None if t is None else t.array


def _bn_train_np(x: Any, w: Any, b: Any, ct: np.dtype[Any], eps: float, relu: bool
                 ) -> tuple[Any, ...]:
    xr = _rows3(x, ct)
    m = xr.shape[0] * xr.shape[2]
    mu = np.einsum("nch->c", xr) / ct.type(m)
    xc = xr - _per_channel(mu)
    var = np.einsum("nch,nch->c", xc, xc) / ct.type(m)
    invstd = ct.type(1) / np.sqrt(var + ct.type(eps))
    return _bn_affine(x, xc, invstd, w, b, ct, relu), mu, var, invstd


def _bn_eval_np(x: Any, w: Any, b: Any, rm: Any, rv: Any, ct: np.dtype[Any], eps: float,
                relu: bool) -> tuple[Any]:
    mu = rm.astype(ct)
    invstd = ct.type(1) / np.sqrt(rv.astype(ct) + ct.type(eps))
    xc = _rows3(x, ct) - _per_channel(mu)
    return (_bn_affine(x, xc, invstd, w, b, ct, relu),)


def _bn_affine(x: Any, xc: Any, invstd: Any, w: Any, b: Any, ct: np.dtype[Any], relu: bool
               ) -> Any:
    scale = invstd if w is None else invstd * w
    y = xc  # x - mean is this call's own buffer: normalize in place
    np.multiply(y, _per_channel(scale), out=y)
    if b is not None:
        np.add(y, _per_channel(b.astype(ct, copy=False)), out=y)
    if relu:
        np.maximum(y, 0, out=y)
    return y.reshape(x.shape)


def _bn_running_np(rm: Any, rv: Any, mu: Any, var: Any, momentum: float, m: int) -> None:
    rm[...] = (1 - momentum) * rm + momentum * mu
    rv[...] = (1 - momentum) * rv + momentum * var * (m / max(m - 1, 1))


def batch_norm_backward(grad: Tensor, x: Tensor, mean: Tensor, invstd: Tensor,
                        weight: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of training-mode :func:`batch_norm` (without ReLU): ``(dx, dweight, dbias)``
    given the ``mean``/``invstd`` it returned."""
    op = "batch_norm_backward"
    n, c, hw = _check_bn(op, x, weight)
    _check_dtypes(op, x, grad)
    _check_stats(op, x, c, mean=mean, invstd=invstd)
    m = n * hw
    if x.array is not None:
        return _batch_norm_backward_numpy(grad, x, mean, invstd, weight)
    q = x.queue
    sdt = stat_dtype(x.dtype)
    kernels = normalization_family(x.context, x.dtype, ptx_fence(x.queue.device)).kernels
    groups, chunk = bn_splits(q.device, c, m)
    part = empty(q, (c * groups * 2,), sdt)
    lanes = bn_lanes(chunk)
    sum_g_t, sum_gx_t = empty(q, (c,), sdt), empty(q, (c,), sdt)
    wdt = x.dtype if weight is None else weight.dtype  # the same (_check_dtypes)
    dw, db = empty(q, (c,), wdt), empty(q, (c,), wdt)
    launch(q, kernels["bn_stats"], (c * groups * lanes,), (lanes,),
           *view_args(x, grad, mean, part, invstd, x, x, sum_g_t, sum_gx_t, dw, db),
           tickets(q, c), n, c, hw, groups, chunk, kernel_scalar(op, 0.0, sdt),
           kernel_scalar(op, 0.0, sdt), 0, 1)
    dx_t = empty(q, x.shape, x.dtype)
    vec, items = bn_geometry(hw, grad, x, dx_t)
    bn_launch_2d(q, kernels["bn_backward_dx"], items, n * c, grad, x, dx_t, mean, invstd,
                 sum_g_t, sum_gx_t, _or(weight, x), n * c, c, hw, m, int(weight is not None),
                 int(vec))
    return dx_t, dw, db


def _batch_norm_backward_numpy(grad: Tensor, x: Tensor, mean: Tensor, invstd: Tensor,
                               weight: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    wdt = x.dtype if weight is None else weight.dtype
    dx, dw, db = np_results(x, (x.dtype, wdt, wdt), _bn_backward_np, host(grad), host(x),
                            mean.array, invstd.array, _array(weight),
                            np.dtype(stat_dtype(x.dtype)))
    return dx, dw, db


def _bn_backward_np(g: Any, x: Any, mean: Any, invstd: Any, w: Any, ct: np.dtype[Any]
                    ) -> tuple[Any, Any, Any]:
    """``dx = scale * (g - mean(g) - xhat * mean(g * xhat))`` per channel, ``scale = w/std``,
    as three per-channel coefficients (NOTE [ Batch norm on NumPy ])."""
    gr, xr = _rows3(g, ct), _rows3(x, ct)
    m = ct.type(xr.shape[0] * xr.shape[2])
    inv = invstd.astype(ct, copy=False)
    xc = xr - _per_channel(mean.astype(ct, copy=False))
    sum_g = np.einsum("nch->c", gr)
    sum_gxhat = np.einsum("nch,nch->c", gr, xc) * inv
    scale = inv if w is None else inv * w
    np.multiply(xc, _per_channel(scale * inv * sum_gxhat / m), out=xc)
    dx = gr * _per_channel(scale)
    dx -= xc
    dx -= _per_channel(scale * sum_g / m)
    return dx.reshape(x.shape), sum_gxhat, sum_g


def _ln_rows(op: str, x: Tensor, normalized_shape: int | Sequence[int]) -> tuple[int, int]:
    check_tensor(op, x)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not shape or x.shape[x.ndim - len(shape):] != shape:
        raise ValueError(f"{op}: normalized_shape {shape} must be the trailing dims of input "
                         f"{x.shape}")
    if not x.is_floating_point:
        raise TypeError(f"{op}: input must be floating point, got {x.dtype}")
    d = math.prod(shape)
    return (x.size // d if d else 0), d


def layer_norm(x: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> tuple[Tensor, Tensor, Tensor]:
    """Normalize over the trailing ``normalized_shape`` dims; returns ``(y, mean, rstd)`` with
    per-row statistics in :func:`stat_dtype` (float64 for float64 input, float32 otherwise).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.array([[1.0, 3.0]]))
        >>> [round(v, 3) for v in layer_norm(x, 2)[0].to_host().reshape(-1).tolist()]
        [-1.0, 1.0]
    """
    op = "layer_norm"
    _check_affine(op, weight, bias)
    rows, d = _ln_rows(op, x, normalized_shape)
    for p in (weight, bias):
        if p is not None and p.size != d:
            raise ValueError(f"{op}: weight/bias must have {d} elements, got shape {p.shape}")
    _check_dtypes(op, x, weight, bias)
    if x.array is not None:
        sdt = stat_dtype(x.dtype)
        affine = weight is not None and bias is not None
        y, mu, rstd = np_results(x, (x.dtype, sdt, sdt), _ln_np, x.array, rows, d,
                                 _array(weight) if affine else None,
                                 _array(bias) if affine else None, eps)
        return y, mu, rstd
    q = x.queue
    sdt = stat_dtype(x.dtype)
    y_t, mean_t, rstd_t = empty(q, x.shape, x.dtype), empty(q, (rows,), sdt), empty(
        q, (rows,), sdt)
    kernels = normalization_family(x.context, x.dtype, ptx_fence(x.queue.device)).kernels
    affine = weight is not None and bias is not None
    args = view_args(x, y_t, mean_t, rstd_t, _or(weight, x), _or(bias, x))
    if rows and ln_per_row(q.device):
        launch_1d(q, kernels["ln_forward_row"], rows, *args, rows, d,
                  kernel_scalar(op, eps, sdt), int(affine))
    elif rows and ln_warp_rows(d):
        launch(q, kernels["ln_forward_warp"], (-(-rows // LNW_ROWS) * 32 * LNW_ROWS,),
               (32 * LNW_ROWS,), *args, rows, d, kernel_scalar(op, eps, sdt), int(affine))
    elif rows:
        launch(q, kernels["ln_forward"], (rows * GROUP,), (GROUP,), *args, d,
               kernel_scalar(op, eps, sdt), int(affine))
    return y_t, mean_t, rstd_t


def layer_norm_backward(grad: Tensor, x: Tensor, normalized_shape: int | Sequence[int],
                        mean: Tensor, rstd: Tensor, weight: Tensor | None = None
                        ) -> tuple[Tensor, Tensor, Tensor]:
    """Gradients of :func:`layer_norm`: ``(dx, dweight, dbias)`` (dweight/dbias shaped like
    ``normalized_shape``)."""
    op = "layer_norm_backward"
    rows, d = _ln_rows(op, x, normalized_shape)
    _check_dtypes(op, x, grad, weight)
    _check_stats(op, x, rows, mean=mean, rstd=rstd)
    pshape = x.shape[x.ndim - (1 if isinstance(normalized_shape, int)
                               else len(tuple(normalized_shape))):]
    if x.array is not None:
        dx, gw, gb = np_results(x, (x.dtype, x.dtype, x.dtype), _ln_backward_np, grad.array,
                                x.array, rows, d, mean.array, rstd.array, _array(weight),
                                tuple(pshape))
        return dx, gw, gb
    q = x.queue
    dx_t = empty(q, x.shape, x.dtype)
    gw_t, gb_t = empty(q, pshape, x.dtype), empty(q, pshape, x.dtype)
    if rows:
        kernels = normalization_family(x.context, x.dtype, ptx_fence(x.queue.device)).kernels
        args = view_args(grad, x, dx_t, mean, rstd, _or(weight, x))
        if ln_per_row(q.device):
            launch_1d(q, kernels["ln_backward_dx_row"], rows, *args, rows, d,
                      int(weight is not None))
        elif ln_warp_rows(d):
            launch(q, kernels["ln_backward_dx_warp"], (-(-rows // LNW_ROWS) * 32 * LNW_ROWS,),
                   (32 * LNW_ROWS,), *args, rows, d, int(weight is not None))
        else:
            launch(q, kernels["ln_backward_dx"], (rows * GROUP,), (GROUP,), *args, d,
                   int(weight is not None))
        splits, chunk = ln_param_splits(q.device, rows, d)
        part = empty(q, (2 * splits * d if splits > 1 else 1,), stat_dtype(x.dtype))
        tiles = -(-d // LNP_COLUMNS)
        launch(q, kernels["ln_backward_params"], (tiles * LNP_COLUMNS, splits * LNP_ROWS),
               (LNP_COLUMNS, LNP_ROWS), *view_args(grad, x, mean, rstd, gw_t, gb_t, part),
               tickets(q, tiles), rows, d, splits, chunk)
    return dx_t, gw_t, gb_t


def _ln_np(x: Any, rows: int, d: int, w: Any, b: Any, eps: float) -> tuple[Any, Any, Any]:
    xa = x.reshape(rows, d).astype(np.float64)
    mu = xa.mean(axis=1)
    rstd = 1.0 / np.sqrt(xa.var(axis=1) + eps)
    y = (xa - mu[:, None]) * rstd[:, None]
    if w is not None and b is not None:
        y = y * w.reshape(1, d) + b.reshape(1, d)
    return y.reshape(x.shape), mu, rstd


def _ln_backward_np(g: Any, x: Any, rows: int, d: int, mean: Any, rstd: Any, w: Any,
                    pshape: tuple[int, ...]) -> tuple[Any, Any, Any]:
    g = g.reshape(rows, d).astype(np.float64)
    xa = x.reshape(rows, d).astype(np.float64)
    mu, inv = mean[:, None], rstd[:, None]
    xhat = (xa - mu) * inv
    wr = 1.0 if w is None else w.reshape(1, d)
    dxh = g * wr
    dx = inv * (dxh - dxh.mean(axis=1, keepdims=True)
                - xhat * (dxh * xhat).mean(axis=1, keepdims=True))
    return dx.reshape(x.shape), (g * xhat).sum(axis=0).reshape(pshape), g.sum(axis=0).reshape(
        pshape)
