"""matmul, conv2d, pooling, batch norm and layer norm: forward and gradients against NumPy
float64 references, on every backend."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd import ops
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close

rng = np.random.default_rng(11)


def r(*shape: int) -> np.ndarray[Any, Any]:
    return rng.standard_normal(shape)


# Axes of an NCHW input whose elements the finite differences step together: an output element
# depends only on inputs of its own sample (conv2d, layer_norm) and, pooling, its own channel.
BATCH, PLANES = (0,), (0, 1)


def pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


# -- matmul ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shapes, ta, tb", [
    (((3, 5), (5, 4)), False, False),
    (((5, 3), (5, 4)), True, False),
    (((3, 5), (4, 5)), False, True),
    (((5, 3), (4, 5)), True, True),
    (((2, 3, 5), (5, 7)), False, False),      # batch broadcast over b
    (((1, 3, 5), (2, 5, 7)), False, False),   # batch broadcast over a
], ids=["nn", "tn", "nt", "tt", "batch_b", "batch_a"])
def test_matmul(dev: DeviceHandle, shapes: Any, ta: bool, tb: bool) -> None:
    def ref(a: Any, b: Any) -> Any:
        return np.matmul(np.swapaxes(a, -1, -2) if ta else a, np.swapaxes(b, -1, -2) if tb else b)

    check_grad(dev, lambda a, b: ops.matmul(a, b, transpose_a=ta, transpose_b=tb), ref,
               (r(*shapes[0]), r(*shapes[1])), scale=5.0)


@pytest.mark.parametrize("xs, axis", [((3, 4), None), ((2, 3, 4, 5), None), ((2, 5, 3), 2)],
                         ids=["features", "nchw", "axis2"])
def test_bias_add(dev: DeviceHandle, xs: tuple[int, ...], axis: int | None) -> None:
    ax = (1 if len(xs) >= 3 else len(xs) - 1) if axis is None else axis
    view = (xs[ax],) + (1,) * (len(xs) - ax - 1)
    check_grad(dev, lambda x, b: ops.bias_add(x, b, axis), lambda x, b: x + b.reshape(view),
               (r(*xs), r(xs[ax])))


# -- conv2d ---------------------------------------------------------------------------------


def conv_ref(x: Any, w: Any, b: Any = None, stride: Any = 1, padding: Any = 0,
             dilation: Any = 1, groups: int = 1) -> Any:
    (sh, sw), (ph, pw), (dh, dw) = pair(stride), pair(padding), pair(dilation)
    n, _, h, wd = x.shape
    k, cg, kr, ks = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    # window starts counted (every stride-th padded position whose dilated window fits)
    oh = len(range(0, h + 2 * ph - dh * (kr - 1), sh))
    ow = len(range(0, wd + 2 * pw - dw * (ks - 1), sw))
    out = np.zeros((n, k, oh, ow))
    kg = k // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kr):
            for j in range(ks):
                patch = xs[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                           j * dw:j * dw + sw * (ow - 1) + 1:sw]
                out[:, g * kg:(g + 1) * kg] += np.einsum(
                    "ncij,kc->nkij", patch, w[g * kg:(g + 1) * kg, :, i, j])
    return out if b is None else out + b.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("kwargs, xs, ws, bias", [
    ({}, (2, 3, 5, 5), (4, 3, 3, 3), True),
    ({"stride": 2, "padding": 1}, (1, 2, 7, 6), (3, 2, 3, 3), False),
    ({"dilation": 2, "padding": (2, 1)}, (1, 2, 6, 5), (2, 2, 3, 2), True),
    ({"groups": 2, "stride": (1, 2)}, (2, 4, 5, 5), (6, 2, 2, 3), True),
    ({"groups": 3, "padding": 1}, (1, 3, 4, 4), (3, 1, 3, 3), False),  # depthwise
], ids=["plain_bias", "stride_pad", "dilation", "groups", "depthwise"])
def test_conv2d(dev: DeviceHandle, kwargs: dict[str, Any], xs: Any, ws: Any, bias: bool) -> None:
    args: tuple[Any, ...] = (r(*xs), r(*ws)) + ((r(ws[0]),) if bias else ())
    check_grad(dev, lambda *a: ops.conv2d(*a, **kwargs), lambda *a: conv_ref(*a, **kwargs),
               args, scale=5.0, independent={0: BATCH})


# -- pooling --------------------------------------------------------------------------------


def windows(x: Any, k: Any, s: Any, p: Any, fill: float) -> Any:
    (kh, kw), (sh, sw), (ph, pw) = pair(k), pair(s), pair(p)
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    oh = (x.shape[2] + 2 * ph - kh) // sh + 1
    ow = (x.shape[3] + 2 * pw - kw) // sw + 1
    return np.stack([np.stack([xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
                               for j in range(ow)], axis=2) for i in range(oh)], axis=2)


def test_max_pool2d(dev: DeviceHandle) -> None:
    x = rng.permutation(np.arange(2 * 3 * 7 * 6) * 0.01).reshape(2, 3, 7, 6)
    check_grad(dev, lambda t: ops.max_pool2d(t, 3, stride=2, padding=1),
               lambda a: windows(a, 3, 2, 1, -np.inf).max(axis=(-1, -2)), (x,),
               independent={0: PLANES})


def test_max_pool2d_ties_go_to_the_first_maximum(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.array([[[[1.0, 1.0], [1.0, 0.0]]]]))
    x.requires_grad = True
    with ag.Tape() as tape:
        y = ops.sum(ops.max_pool2d(x, 2))
    tape.backward(y)
    assert x.grad is not None
    assert x.grad.to_host().tolist() == [[[[1.0, 0.0], [0.0, 0.0]]]]


@pytest.mark.parametrize("include", [True, False])
def test_avg_pool2d(dev: DeviceHandle, include: bool) -> None:
    def ref(a: Any) -> Any:
        win = windows(a, (3, 2), 2, 1, 0.0)
        if include:
            return win.mean(axis=(-1, -2))
        ones = windows(np.ones_like(a), (3, 2), 2, 1, 0.0)
        return win.sum(axis=(-1, -2)) / ones.sum(axis=(-1, -2))

    check_grad(dev, lambda t: ops.avg_pool2d(t, (3, 2), 2, 1, count_include_pad=include), ref,
               (r(1, 2, 7, 5),), independent={0: PLANES})


def avg_pool_ceil_ref(a: Any, k: Any, s: Any, p: Any, include: bool) -> Any:
    """PyTorch's ceil_mode average pooling, loop for loop: the last window may overhang the
    padded input; the divisor is the window clipped to it (``include``) or to the input."""
    (kh, kw), (sh, sw), (ph, pw) = pair(k), pair(s), pair(p)
    h, w = a.shape[2:]

    def size(n: int, k_: int, s_: int, p_: int) -> int:
        out = -(-(n + 2 * p_ - k_) // s_) + 1
        return out - 1 if (out - 1) * s_ >= n + p_ else out

    y = np.zeros((*a.shape[:2], size(h, kh, sh, ph), size(w, kw, sw, pw)))
    for i in range(y.shape[2]):
        for j in range(y.shape[3]):
            r0, c0 = i * sh - ph, j * sw - pw
            r1, c1 = min(r0 + kh, h + ph), min(c0 + kw, w + pw)
            padded = (r1 - r0) * (c1 - c0)
            r0, c0, r1, c1 = max(r0, 0), max(c0, 0), min(r1, h), min(c1, w)
            total = a[:, :, r0:r1, c0:c1].sum(axis=(-1, -2))
            y[:, :, i, j] = total / (padded if include else (r1 - r0) * (c1 - c0))
    return y


@pytest.mark.parametrize("include", [True, False])
@pytest.mark.parametrize("xs, k, s, p", [((2, 3, 7, 7), 2, 2, 0), ((1, 2, 8, 7), (3, 2), 2, 1),
                                         ((1, 1, 1, 7), (1, 2), (1, 2), 0)], ids=str)
def test_avg_pool2d_ceil_mode(dev: DeviceHandle, xs: Any, k: Any, s: Any, p: Any,
                              include: bool) -> None:
    """ceil_mode trains: the backward divides by the forward's divisor (the issue's case
    first: 2x3x7x7, k2 s2, whose last row and column of windows overhang the input)."""
    check_grad(dev, lambda t: ops.avg_pool2d(t, k, s, p, include, ceil_mode=True),
               lambda a: avg_pool_ceil_ref(a, k, s, p, include), (r(*xs),),
               independent={0: PLANES})


def test_adaptive_and_global_avg_pool2d(dev: DeviceHandle) -> None:
    def ref(a: Any, out: tuple[int, int]) -> Any:
        h, w = a.shape[2:]
        rows = []
        for i in range(out[0]):
            h0, h1 = (i * h) // out[0], math.ceil((i + 1) * h / out[0])
            rows.append([a[:, :, h0:h1, (j * w) // out[1]:math.ceil((j + 1) * w / out[1])]
                         .mean(axis=(-1, -2)) for j in range(out[1])])
        return np.moveaxis(np.array(rows), (0, 1), (2, 3))

    x = r(2, 3, 7, 5)
    check_grad(dev, lambda t: ops.adaptive_avg_pool2d(t, (3, 2)), lambda a: ref(a, (3, 2)), (x,),
               independent={0: PLANES})
    check_grad(dev, ops.global_avg_pool2d, lambda a: a.mean(axis=(2, 3), keepdims=True), (x,),
               independent={0: PLANES})


# -- normalization --------------------------------------------------------------------------


def bn_ref(x: Any, w: Any = None, b: Any = None, eps: float = 1e-5) -> Any:
    axes = (0, *range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return y if w is None else y * w.reshape(shape) + b.reshape(shape)


def test_batch_norm_training(dev: DeviceHandle) -> None:
    check_grad(dev, lambda x, w, b: ops.batch_norm(x, None, None, w, b, training=True),
               bn_ref, (r(4, 3, 2, 5), r(3), r(3)), scale=10.0)
    check_grad(dev, lambda x: ops.batch_norm(x, None, None, training=True), bn_ref,
               (r(6, 2),), scale=10.0)


def test_batch_norm_updates_running_stats_and_eval_uses_them(dev: DeviceHandle) -> None:
    x = r(8, 3, 4)
    rm = Tensor.from_host(dev.queue, np.zeros(3))
    rv = Tensor.from_host(dev.queue, np.ones(3))
    ops.batch_norm(Tensor.from_host(dev.queue, x), rm, rv, training=True, momentum=0.5)
    want_mean = 0.5 * x.mean(axis=(0, 2))
    want_var = 0.5 + 0.5 * x.var(axis=(0, 2), ddof=1)
    assert_close(rm.to_host(), want_mean, "float32")
    assert_close(rv.to_host(), want_var, "float32")
    mean, var = rm.to_host().astype(np.float64), rv.to_host().astype(np.float64)

    def eval_ref(a: Any, w: Any, b: Any) -> Any:
        y = (a - mean.reshape(1, 3, 1)) / np.sqrt(var.reshape(1, 3, 1) + 1e-5)
        return y * w.reshape(1, 3, 1) + b.reshape(1, 3, 1)

    check_grad(dev, lambda a, w, b: ops.batch_norm(a, rm, rv, w, b, training=False), eval_ref,
               (r(2, 3, 4), r(3), r(3)), scale=5.0)


def ln_ref(x: Any, w: Any = None, b: Any = None, dims: int = 1, eps: float = 1e-5) -> Any:
    axes = tuple(range(x.ndim - dims, x.ndim))
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return y if w is None else y * w + b


def test_layer_norm(dev: DeviceHandle) -> None:
    check_grad(dev, lambda x, w, b: ops.layer_norm(x, 7, w, b), ln_ref, (r(3, 7), r(7), r(7)),
               scale=10.0, independent={0: BATCH})
    check_grad(dev, lambda x: ops.layer_norm(x, (2, 5)), lambda x: ln_ref(x, dims=2),
               (r(3, 2, 5),), scale=10.0, independent={0: BATCH})
