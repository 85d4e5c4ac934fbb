"""Differentiable triu, tril and masked_fill on every backend: outputs and gradients against
central differences of the NumPy reference."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd import _masking
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle


def _x(shape: tuple[int, ...]) -> Any:
    return np.random.default_rng(sum(shape)).standard_normal(shape)


@pytest.mark.parametrize("diagonal", [-1, 0, 2])
def test_triu_tril_grads(dev: DeviceHandle, diagonal: int) -> None:
    x = _x((2, 5, 7))
    check_grad(dev, ag.ops.triu, np.triu, (x, diagonal), elementwise=True)
    check_grad(dev, ag.ops.tril, np.tril, (x, diagonal), elementwise=True)


def test_masked_fill_grad(dev: DeviceHandle) -> None:
    x = _x((3, 7))
    m = np.random.default_rng(2).random(7) > 0.5

    def ref(a: Any, mask: Any, value: float) -> Any:
        return np.where(mask.astype(bool), value, a)

    grads = check_grad(dev, ag.ops.masked_fill, ref, (x, m, -2.5), elementwise=True)
    assert grads[0] is not None and (grads[0][:, m] == 0).all()


def test_doctests() -> None:
    assert doctest.testmod(_masking).failed == 0
