"""cross_entropy's single recorded node (mean/sum, no label smoothing) against the composite
it replaces (log_softmax, nll_gather, sum, div through the differentiable ops), on every
backend: values and gradients agree, ignored rows get no gradient, all-ignored means NaN."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype


def _composite(logits: Tensor, labels: Tensor, reduction: str, ignore_index: int) -> Tensor:
    logp = ag.ops.log_softmax(logits, axis=1)
    total = ag.ops.sum(ag.ops.nll_gather(logp, labels, ignore_index=ignore_index))
    if reduction == "sum":
        return total
    valid = ops.cast(ops.ne(labels, ignore_index), logits.dtype)  # labels: no gradient
    return ag.ops.div(total, ag.ops.sum(valid))


def _value_and_grad(dev: DeviceHandle, fn: Any, x: Any, y: Any, dtype: str
                    ) -> tuple[Any, Any, int]:
    xt = Tensor.from_host(dev.queue, x, dtype=dtype)
    xt.requires_grad = True
    with ag.Tape() as tape:
        loss = fn(xt, Tensor.from_host(dev.queue, y))
    nodes = len(tape)
    tape.backward(loss)
    assert xt.grad is not None
    return loss.to_host(), xt.grad.to_host(), nodes


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_one_node_matches_the_composite(dev: DeviceHandle, dtype: str, reduction: str,
                                        ignore_index: int) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev} has no {dtype}")
    rng = np.random.default_rng(11)
    x = rng.standard_normal((7, 5)) * 3
    y = np.array([3, 0, 2, ignore_index, 1, 2, 4])  # ignore_index 2: three rows ignored
    loss, grad, nodes = _value_and_grad(
        dev, lambda a, b: ag.cross_entropy(a, b, reduction=reduction,
                                           ignore_index=ignore_index), x, y, dtype)
    want, want_grad, _ = _value_and_grad(
        dev, lambda a, b: _composite(a, b, reduction, ignore_index), x, y, dtype)
    assert nodes == 1
    assert_close(loss, want, dtype)
    assert_close(grad, want_grad, dtype, grad=True)
    assert not grad[y == ignore_index].any()  # ignored rows get nothing


def test_every_row_ignored_gives_nan_like_the_composite(dev: DeviceHandle) -> None:
    x, y = np.zeros((3, 4)), np.full(3, -100)
    with np.errstate(all="ignore"):
        loss, grad, _ = _value_and_grad(dev, ag.cross_entropy, x, y, "float32")
        want, want_grad, _ = _value_and_grad(
            dev, lambda a, b: _composite(a, b, "mean", -100), x, y, "float32")
    assert np.isnan(loss) and np.isnan(want)
    np.testing.assert_array_equal(np.isnan(grad), np.isnan(want_grad))
