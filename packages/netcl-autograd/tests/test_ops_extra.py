"""conv_transpose2d against a NumPy float64 scatter (PyTorch's definition) with finite-difference
gradients on every backend, and against PyTorch when it is installed; backward_hook."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd import backward_hook, conv_transpose2d
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor

Array = np.ndarray[Any, Any]


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def ref_conv_transpose2d(x: Array, w: Array, b: Array | None = None, stride: Any = 1,
                         padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                         dilation: Any = 1) -> Array:
    """Every input pixel scatters ``x * w`` into the (uncropped) output, then ``padding`` is
    cropped from each side."""
    (sh, sw), (ph, pw) = _pair(stride), _pair(padding)
    (oph, opw), (dh, dw) = _pair(output_padding), _pair(dilation)
    n, cin, h, wd = x.shape
    _, cout_g, kh, kw = w.shape
    full = np.zeros((n, cout_g * groups, (h - 1) * sh + dh * (kh - 1) + 1 + oph,
                     (wd - 1) * sw + dw * (kw - 1) + 1 + opw))
    cin_g = cin // groups
    for g in range(groups):
        xs = x[:, g * cin_g:(g + 1) * cin_g]
        ws = w[g * cin_g:(g + 1) * cin_g]
        for i in range(kh):
            for j in range(kw):
                contrib = np.einsum("nchw,co->nohw", xs, ws[:, :, i, j])
                full[:, g * cout_g:(g + 1) * cout_g,
                     i * dh:i * dh + (h - 1) * sh + 1:sh,
                     j * dw:j * dw + (wd - 1) * sw + 1:sw] += contrib
    out = full[:, :, ph:full.shape[2] - ph, pw:full.shape[3] - pw]
    return out if b is None else out + b.reshape(1, -1, 1, 1)


_R = np.random.default_rng(0)
CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], bool, dict[str, Any]]] = {
    "plain": ((1, 3, 4, 5), (3, 2, 3, 3), True, {}),
    "stride_pad_outpad": ((2, 3, 3, 5), (3, 5, 3, 2), True,
                          {"stride": 2, "padding": 1, "output_padding": 1}),
    "rect_stride_dilation": ((1, 2, 5, 3), (2, 3, 2, 3), False,
                             {"stride": (1, 3), "padding": (0, 1), "dilation": (2, 1)}),
    "groups": ((1, 4, 3, 3), (4, 1, 3, 3), True, {"groups": 2, "stride": 2}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_transpose2d(dev: DeviceHandle, name: str) -> None:
    xs, ws, bias, kw = CASES[name]
    out_channels = ws[1] * kw.get("groups", 1)
    args: tuple[Any, ...] = (_R.standard_normal(xs), _R.standard_normal(ws))
    if bias:
        args += (_R.standard_normal(out_channels),)
    check_grad(dev, conv_transpose2d, ref_conv_transpose2d, args, kw, scale=4)


def test_conv_transpose2d_errors(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.zeros((1, 3, 4, 4), np.float32))
    w = Tensor.from_host(dev.queue, np.zeros((2, 2, 3, 3), np.float32))
    with pytest.raises(ValueError, match="weight's dim 0 must equal the input channels"):
        conv_transpose2d(x, w)
    w3 = Tensor.from_host(dev.queue, np.zeros((3, 2, 3, 3), np.float32))
    with pytest.raises(ValueError, match="output_padding"):
        conv_transpose2d(x, w3, stride=2, output_padding=2)
    with pytest.raises(ValueError, match="bias must have shape"):
        conv_transpose2d(x, w3, Tensor.from_host(dev.queue, np.zeros(3, np.float32)))
    with pytest.raises(ValueError, match="stride must be"):
        conv_transpose2d(x, w3, stride=0)


def test_backward_hook_replaces_the_gradient(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.array([1.0, 2.0, 3.0], np.float32))
    x.requires_grad = True
    with ag.Tape() as tape:
        y = ag.ops.sum(ag.ops.mul(backward_hook(x, lambda g: ag.ops.mul(g, 2.0)), 3.0))
    tape.backward(y)
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.to_host(), [6.0, 6.0, 6.0])
    with ag.Tape() as tape:
        y = ag.ops.sum(backward_hook(x, lambda g: Tensor.from_host(dev.queue, np.ones(2))))
    with pytest.raises(ValueError, match="replacement gradient"):
        tape.backward(y)


def test_reference_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    for xs, ws, bias, kw in CASES.values():
        x, w = _R.standard_normal(xs), _R.standard_normal(ws)
        b = _R.standard_normal(ws[1] * kw.get("groups", 1)) if bias else None
        want = torch.nn.functional.conv_transpose2d(
            torch.from_numpy(x), torch.from_numpy(w), None if b is None else torch.from_numpy(b),
            **kw).numpy()
        np.testing.assert_allclose(ref_conv_transpose2d(x, w, b, **kw), want, atol=1e-12)
