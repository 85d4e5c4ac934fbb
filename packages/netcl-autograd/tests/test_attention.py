"""Differentiable scaled_dot_product_attention on every backend: output and gradients (query,
key, value, float mask) against central differences of a float64 NumPy reference; causal,
bool and float masks, broadcast batch dims, odd L != S, grouped-query, dropout; PyTorch's
autograd where torch is installed."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.ops as ops
from netcl.autograd import _ops_attention
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close
from netcl.ops.testing import skip_unless_one_opencl_cpu_device


def _ref(q: Any, k: Any, v: Any, mask: Any = None, dropout_p: float = 0.0,
         is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Any:
    """float64 attention (no dropout)."""
    if enable_gqa:
        rep = q.shape[-3] // k.shape[-3]
        k, v = np.repeat(k, rep, axis=-3), np.repeat(v, rep, axis=-3)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if is_causal:
        s = np.where(np.tri(*s.shape[-2:]) > 0, s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.matmul(e / e.sum(axis=-1, keepdims=True), v)


def _fused_once(dev: DeviceHandle) -> None:
    """NumPy, a GPU and one OpenCL CPU device (the fused kernels are slow to build)."""
    if dev.backend != "cpu":
        skip_unless_one_opencl_cpu_device(dev)


def _r(shape: tuple[int, ...], seed: int) -> Any:
    return np.random.default_rng(seed).standard_normal(shape)


CASES: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "odd-L-ne-S": ((_r((2, 5, 8), 1), _r((2, 7, 8), 2), _r((2, 7, 3), 3)), {}),
    "causal-4d": ((_r((1, 2, 7, 8), 1), _r((1, 2, 5, 8), 2), _r((1, 2, 5, 8), 3)),
                  {"is_causal": True}),
    "bool-mask": ((_r((2, 3, 4), 1), _r((2, 5, 4), 2), _r((2, 5, 4), 3),
                   np.array([[1, 1, 0, 1, 0]] * 3, bool)), {}),
    "float-mask-broadcast": ((_r((2, 1, 3, 4), 1), _r((1, 2, 5, 4), 2), _r((1, 2, 5, 4), 3),
                              _r((1, 3, 5), 4) * 0.5), {}),
    "scale": ((_r((3, 4, 6), 1), _r((3, 4, 6), 2), _r((3, 4, 6), 3)),
              {"scale": 0.7, "is_causal": True}),
    "gqa": ((_r((1, 4, 3, 4), 1), _r((1, 2, 5, 4), 2), _r((1, 2, 5, 4), 3)),
            {"enable_gqa": True}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gradients(dev: DeviceHandle, name: str) -> None:
    _fused_once(dev)
    args, kwargs = CASES[name]
    check_grad(dev, ag.ops.scaled_dot_product_attention, _ref, args, kwargs, scale=10)


@pytest.mark.parametrize("E", [32, 64, 128])
def test_head_dims(dev: DeviceHandle, E: int) -> None:
    _fused_once(dev)
    args = (_r((1, 2, 9, E), 1), _r((1, 2, 7, E), 2), _r((1, 2, 7, E), 3))
    check_grad(dev, ag.ops.scaled_dot_product_attention, _ref, args, {"is_causal": True},
               scale=10, independent={0: (0, 1), 1: (0, 1), 2: (0, 1)})


def _up(dev: DeviceHandle, a: Any) -> Tensor:
    t = Tensor.from_host(dev.queue, np.asarray(a), dtype="float32")
    t.requires_grad = True
    return t


def test_dropout_backward_uses_the_forward_mask(dev: DeviceHandle) -> None:
    """With dropout the op is linear in v for a fixed mask: d sum(out) / dv is the column
    sum of the dropped probabilities, and the same mask gives out = P_dropped @ v."""
    q, k, v = _r((2, 6, 8), 1), _r((2, 9, 8), 2), _r((2, 9, 8), 3)
    tq, tk, tv = _up(dev, q), _up(dev, k), _up(dev, v)
    ops.manual_seed(11)
    with ag.Tape() as tape:
        out = ag.ops.scaled_dot_product_attention(tq, tk, tv, dropout_p=0.4)
        loss = ag.ops.sum(out)
    tape.backward(loss)
    # out = Pd @ v for every v: two probes with unit v give Pd's rows
    ops.manual_seed(11)
    eye = Tensor.from_host(dev.queue, np.broadcast_to(np.eye(9), (2, 9, 9)).copy(),
                           dtype="float32")
    pd = ops.scaled_dot_product_attention(tq, tk, eye, dropout_p=0.4).to_host()
    assert ((pd == 0).sum() > 0) and np.isfinite(pd).all()
    assert_close(out.to_host(), np.matmul(pd, v), "float32", 10)
    assert tv.grad is not None
    assert_close(tv.grad.to_host(), np.broadcast_to(pd.sum(axis=1)[..., None], v.shape),
                 "float32", 10)


def test_bool_mask_gets_no_gradient(dev: DeviceHandle) -> None:
    q = _up(dev, _r((2, 3, 4), 1))
    mask = Tensor.from_host(dev.queue, np.ones((3, 3), np.uint8), dtype="uint8")
    with ag.Tape() as tape:
        loss = ag.ops.sum(ag.ops.scaled_dot_product_attention(q, q, q, mask))
    tape.backward(loss)
    assert q.grad is not None and mask.grad is None


def test_torch_autograd_agrees(dev: DeviceHandle) -> None:
    _fused_once(dev)
    torch = pytest.importorskip("torch")
    q, k, v = _r((2, 2, 7, 16), 1), _r((2, 2, 9, 16), 2), _r((2, 2, 9, 16), 3)
    m = _r((7, 9), 4)
    ts = [_up(dev, a) for a in (q, k, v, m)]
    with ag.Tape() as tape:
        out = ag.ops.scaled_dot_product_attention(ts[0], ts[1], ts[2], ts[3])
    g = _r(out.shape, 5)
    tape.backward(out, grad=Tensor.from_host(dev.queue, g, dtype="float32"))
    tt = [torch.tensor(a, requires_grad=True) for a in (q, k, v, m)]
    want = torch.nn.functional.scaled_dot_product_attention(*tt[:3], attn_mask=tt[3])
    want.backward(torch.tensor(g))
    assert_close(out.to_host(), want.detach().numpy(), "float32", 10)
    for t, w in zip(ts, tt):
        assert t.grad is not None and w.grad is not None
        assert_close(t.grad.to_host(), w.grad.numpy(), "float32", 30)


def test_doctests() -> None:
    assert doctest.testmod(_ops_attention).failed == 0
