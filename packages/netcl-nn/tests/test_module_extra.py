"""Module.apply, num_parameters, backward hooks, inference_mode, and the init functions
trunc_normal_ / orthogonal_ (against their definitions; PyTorch's when installed)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.nn import (
    BatchNorm1d,
    Conv2d,
    Linear,
    Module,
    ModuleDict,
    ReLU,
    Sequential,
    inference_mode,
    init,
)


def test_apply_visits_children_first_and_returns_the_module() -> None:
    net = Sequential(Linear(3, 4, device="cpu"), ReLU(), Sequential(Linear(4, 2, device="cpu")))
    seen: list[str] = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "ReLU", "Linear", "Sequential", "Sequential"]

    def init_linear(m: Module) -> None:
        if isinstance(m, Linear):
            init.ones_(m.weight)

    net.apply(init_linear)
    assert float(net[2][0].weight.to_host().min()) == 1.0  # type: ignore[index]


def test_num_parameters() -> None:
    bn = BatchNorm1d(8, device="cpu")
    net = Sequential(Conv2d(1, 8, 3, device="cpu"), bn, Linear(8, 10, bias=False, device="cpu"))
    assert net.num_parameters() == (8 * 9 + 8) + (8 + 8) + 80
    assert bn.weight is not None
    bn.weight.requires_grad = False
    assert net.num_parameters(trainable_only=True) == net.num_parameters() - 8
    shared = Linear(2, 2, device="cpu")
    assert Sequential(shared, shared).num_parameters() == 6  # each parameter once


def test_full_backward_hook(dev: DeviceHandle) -> None:
    rng = np.random.default_rng(0)
    lin = Linear(5, 3, device=dev)
    x = Tensor.from_host(dev.queue, rng.standard_normal((7, 5)).astype(np.float32))
    x.requires_grad = True
    calls: list[tuple[Any, ...]] = []

    def hook(m: Module, grad_in: tuple[Any, ...], grad_out: tuple[Any, ...]) -> Any:
        calls.append((m, grad_in[0].to_host(), grad_out[0].to_host()))
        return (ag.ops.mul(grad_in[0], 0.0),)  # replace grad_input

    handle = lin.register_full_backward_hook(hook)
    with ag.Tape() as tape:
        loss = ag.ops.sum(ag.ops.mul(lin(x), 2.0))
    tape.backward(loss)
    (module, grad_in, grad_out), = calls
    assert module is lin
    np.testing.assert_allclose(grad_out, np.full((7, 3), 2.0))
    np.testing.assert_allclose(grad_in, 2.0 * np.ones((7, 3)) @ lin.weight.to_host(), rtol=1e-5)
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.to_host(), 0.0)  # the hook's replacement
    assert lin.weight.grad is not None  # the weight's gradient is untouched
    handle.remove()
    x.grad = None
    with ag.Tape() as tape:
        loss = ag.ops.sum(lin(x))
    tape.backward(loss)
    assert len(calls) == 1 and x.grad is not None and float(abs(x.grad.to_host()).sum()) > 0


def test_backward_hook_on_an_input_without_grad(dev: DeviceHandle) -> None:
    lin = Linear(2, 2, device=dev)
    seen: list[Any] = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go[0].shape)))
    with ag.Tape() as tape:
        loss = ag.ops.sum(lin(Tensor.from_host(dev.queue, np.ones((3, 2), np.float32))))
    tape.backward(loss)
    assert seen == [((None,), (3, 2))]


def test_forward_hooks_still_run() -> None:
    lin = Linear(2, 2, device="cpu")
    lin.register_forward_pre_hook(lambda m, args: (ag.ops.mul(args[0], 0.0),))
    out = lin.register_forward_hook(lambda m, args, y: ag.ops.add(y, 1.0))
    y = lin(Tensor.from_host(lin.weight.queue, np.ones((1, 2), np.float32)))
    assert lin.bias is not None
    np.testing.assert_allclose(y.to_host(), lin.bias.to_host()[None] + 1.0)
    out.remove()


def test_inference_mode_records_nothing(dev: DeviceHandle) -> None:
    lin = Linear(2, 2, device=dev)
    x = Tensor.from_host(dev.queue, np.ones((1, 2), np.float32))
    with ag.Tape() as tape:
        with inference_mode():
            y = lin(x)
        with inference_mode(False):
            z = lin(x)
    assert not y.requires_grad and z.requires_grad
    assert len(tape) == 2  # z's matmul and bias_add only


def test_trunc_normal() -> None:
    w = Tensor.from_shape(Linear(1, 1, device="cpu").weight.queue, (200, 50), "float64")
    v = init.trunc_normal_(w, mean=0.5, std=1.0, a=0.0, b=1.5,
                           rng=np.random.default_rng(1)).to_host()
    assert v.min() >= 0.0 and v.max() <= 1.5

    # the mean of N(0.5, 1) truncated to [0, 1.5], i.e. [-0.5, 1] standard deviations around
    # its mean: mean + (pdf(alpha) - pdf(beta)) / (cdf(beta) - cdf(alpha))
    def pdf(z: float) -> float:
        return math.exp(-z * z / 2) / math.sqrt(2 * math.pi)

    def cdf(z: float) -> float:
        return (1 + math.erf(z / math.sqrt(2))) / 2

    alpha, beta = -0.5, 1.0
    want = 0.5 + (pdf(alpha) - pdf(beta)) / (cdf(beta) - cdf(alpha))
    assert abs(v.mean() - want) < 0.01
    with pytest.raises(ValueError, match="need a < b"):
        init.trunc_normal_(w, a=1.0, b=0.0)
    with pytest.raises(ValueError, match="too far in the tail"):
        init.trunc_normal_(w, a=40.0, b=41.0, rng=np.random.default_rng(0))


@pytest.mark.parametrize("shape", [(3, 7), (7, 3), (4, 2, 3, 3)], ids=str)
def test_orthogonal(shape: tuple[int, ...]) -> None:
    q = Linear(1, 1, device="cpu").weight.queue
    w = Tensor.from_shape(q, shape, "float64")
    m = init.orthogonal_(w, gain=2.0, rng=np.random.default_rng(0)).to_host()
    flat = m.reshape(shape[0], -1) / 2.0
    small = min(flat.shape)
    gram = flat @ flat.T if flat.shape[0] == small else flat.T @ flat
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-12)
    with pytest.raises(ValueError, match="at least 2 dims"):
        init.orthogonal_(Tensor.from_shape(q, (3,)))


def test_pytorch_module_conveniences() -> None:
    lin = Linear(3, 2, device="cpu")
    assert lin.requires_grad_(False) is lin and not lin.weight.requires_grad
    lin.requires_grad_()
    assert lin.weight.requires_grad
    assert lin.double().weight.dtype == "float64" and lin.half().weight.dtype == "float16"
    assert lin.float().weight.dtype == "float32" and lin.weight.requires_grad
    lin.weight.grad = Tensor.from_host(lin.weight.queue, np.ones((2, 3), np.float32))
    lin.zero_grad(set_to_none=False)
    assert lin.weight.grad is not None and float(lin.weight.grad.to_host().sum()) == 0.0
    lin.zero_grad()
    assert lin.weight.grad is None

    class WithScratch(Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("kept", Tensor.from_shape(lin.weight.queue, (2,)))
            self.register_buffer("scratch", Tensor.from_shape(lin.weight.queue, (2,)),
                                 persistent=False)

    m = WithScratch()
    assert sorted(m.state_dict()) == ["kept"]
    assert sorted(name for name, _ in m.named_buffers()) == ["kept", "scratch"]
    heads = ModuleDict({"cls": Linear(3, 2, device="cpu")})
    heads["box"] = Linear(3, 4, device="cpu")
    assert list(heads) == ["cls", "box"] and "box" in heads
    assert sorted(heads.state_dict()) == ["box.bias", "box.weight", "cls.bias", "cls.weight"]
    del heads["box"]
    assert len(heads) == 1 and heads.num_parameters() == 8
    seq = Sequential(Linear(3, 3, device="cpu")).append(ReLU())
    assert len(seq) == 2 and isinstance(seq[1], ReLU)
