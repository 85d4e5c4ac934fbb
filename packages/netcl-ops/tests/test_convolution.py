"""conv2d and its two backward computations against a naive float64 loop, on every backend,
over strides, padding, dilation and groups (depthwise included)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.testing import supports_dtype
from netcl.ops import conv2d, conv2d_backward_data, conv2d_backward_weight
from netcl.ops.testing import check_error, check_op

CASES = [  # x shape, weight shape, stride, padding, dilation, groups
    ((1, 1, 5, 5), (1, 1, 3, 3), 1, 0, 1, 1),
    ((2, 3, 7, 9), (4, 3, 3, 3), 1, 1, 1, 1),
    ((1, 4, 9, 7), (6, 2, 3, 1), (2, 1), (1, 0), 1, 2),
    ((2, 3, 8, 8), (3, 1, 3, 3), 2, 1, 1, 3),  # depthwise
    ((1, 2, 9, 9), (3, 2, 3, 3), 1, 2, 2, 1),  # dilated
    ((2, 5, 6, 6), (7, 5, 1, 1), 1, 0, 1, 1),  # 1x1
]


def _p(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else v


def ref_conv(x: Any, w: Any, stride: Any, padding: Any, dilation: Any, groups: int) -> Any:
    (sh, sw), (ph, pw), (dh, dw) = _p(stride), _p(padding), _p(dilation)
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    oh = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (s - 1) - 1) // sw + 1
    y = np.zeros((n, k, oh, ow))
    kg = k // groups
    for ko in range(k):
        g = ko // kg
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * sh:i * sh + dh * (r - 1) + 1:dh,
                           j * sw:j * sw + dw * (s - 1) + 1:dw]
                y[:, ko, i, j] = (patch * w[ko]).sum(axis=(1, 2, 3))
    return y


def _dtypes(dev: DeviceHandle, dtypes: tuple[str, ...] = ("float32", "float16", "float64")
            ) -> list[str]:
    return [d for d in dtypes if supports_dtype(dev, d)]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_conv2d_forward(dev: DeviceHandle, case: Any) -> None:
    xs, ws, st, pad, dil, g = case
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    for dtype in _dtypes(dev):
        check_op(dev, lambda xt, wt, bt: conv2d(xt, wt, bt, st, pad, dil, g),
                 lambda xa, wa, ba: ref_conv(xa, wa, st, pad, dil, g) + ba.reshape(1, -1, 1, 1),
                 (x, w, b), dtype=dtype, scale=4)
    check_op(dev, lambda xt, wt: conv2d(xt, wt, None, st, pad, dil, g),
             lambda xa, wa: ref_conv(xa, wa, st, pad, dil, g), (x, w), scale=4)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_conv2d_backward(dev: DeviceHandle, case: Any) -> None:
    """By linearity: dx = J^T g and dw = J_w^T g, with J built from the reference (J_x as
    one batched call: row b of the batch is basis vector b). J is built from the float64
    x and w, which float64 sees unrounded (float32's rounding of them is far inside its
    tolerance)."""
    xs, ws, st, pad, dil, g = case
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    gy = rng.standard_normal(ref_conv(x, w, st, pad, dil, g).shape)
    jac_x = ref_conv(np.eye(x.size).reshape(-1, *xs[1:]), w, st, pad, dil, g)
    jac_x = jac_x.reshape(x.size, *gy.shape)
    jac_w = np.stack([ref_conv(x, e.reshape(ws), st, pad, dil, g) for e in np.eye(w.size)])
    for dtype in _dtypes(dev, ("float32", "float64")):  # float16: test_conv.py
        check_op(dev, lambda gt, wt: conv2d_backward_data(gt, wt, xs, st, pad, dil, g),
                 lambda g_, _w: np.tensordot(jac_x, g_, g_.ndim).reshape(xs), (gy, w),
                 dtype=dtype, scale=4)
        check_op(dev, lambda xt, gt: conv2d_backward_weight(xt, gt, ws, st, pad, dil, g),
                 lambda _x, g_: np.tensordot(jac_w, g_, g_.ndim).reshape(ws), (x, gy),
                 dtype=dtype, scale=4)


def test_conv2d_errors(dev: DeviceHandle) -> None:
    x, w = np.zeros((8, 3, 8, 8)), np.zeros((16, 4, 3, 3))
    check_error(dev, conv2d, (x, w), {}, ValueError,
                r"conv2d requires input channels to match weight, got input \(8, 3, 8, 8\) and "
                r"weight \(16, 4, 3, 3\)")
    check_error(dev, lambda a, b: conv2d(a, b, groups=2), (x, np.zeros((4, 1, 3, 3))), {},
                ValueError, "groups=2 must divide input channels 3")
    check_error(dev, lambda a, b: conv2d(a, b, stride=0), (x, np.zeros((4, 3, 3, 3))), {},
                ValueError, "stride must be an int >= 1")
    check_error(dev, conv2d, (np.zeros((1, 3, 2, 2)), np.zeros((4, 3, 3, 3))), {}, ValueError,
                "too small for a 3x3 kernel")
    check_error(dev, conv2d, (np.zeros((3, 8, 8)), np.zeros((4, 3, 3, 3))), {}, ValueError,
                "must be 4-D")
