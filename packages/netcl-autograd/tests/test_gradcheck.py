"""gradcheck: passes correct gradients, catches wrong ones, leaves .grad alone."""

from __future__ import annotations

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.ops
from netcl.autograd import ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor


@ag.differentiable("test_wrong_square")
def wrong_square(x: Tensor) -> tuple[Tensor, ag.Backward]:
    """x**2 whose backward forgets the factor 2."""

    def backward(g: Tensor, needs: tuple[bool, ...]) -> ag.Grads:
        return (netcl.ops.mul(g, x),)

    return netcl.ops.mul(x, x), backward


def param(dev: DeviceHandle, values: object) -> Tensor:
    t = Tensor.from_host(dev.queue, np.asarray(values, dtype=np.float64))
    t.requires_grad = True
    return t


def test_gradcheck_passes_a_composite(dev: DeviceHandle) -> None:
    x = param(dev, np.linspace(-1.0, 1.5, 12).reshape(3, 4))
    w = param(dev, np.linspace(0.5, -0.5, 4))
    labels = Tensor.from_host(dev.queue, np.array([0, 3, 1]))
    before = w.grad = Tensor.from_host(dev.queue, np.ones(4))

    def f(x: Tensor, w: Tensor, y: Tensor) -> Tensor:
        return ag.cross_entropy(ops.mul(ops.tanh(x), w), y, label_smoothing=0.1)

    assert ag.gradcheck(f, [x, w, labels], directions=4)
    assert w.grad is before and x.grad is None  # left as they were


def test_gradcheck_catches_a_wrong_backward(dev: DeviceHandle) -> None:
    x = param(dev, [0.5, -1.0, 2.0])
    with pytest.raises(ag.GradcheckError, match="direction 0: backward gives"):
        ag.gradcheck(wrong_square, [x])
    assert not ag.gradcheck(wrong_square, [x], raise_exception=False)


def test_gradcheck_needs_an_input_that_requires_grad(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.ones(2))
    with pytest.raises(ValueError, match="no input has requires_grad"):
        ag.gradcheck(ops.exp, [x])
