"""A released tensor passed to an op raises netcl's one error on every backend and every op path.

Each op first runs on the live tensor, so its plans and the elementwise fast path's entry exist
(NOTE [ Elementwise fast path ]), then the tensor is released and the same call must raise
``ValueError("tensor was released: ...")`` (NOTE [ Released tensors ] in netcl.core.tensor):
before, OpenCL died with SIGSEGV and NumPy raised an AttributeError.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor, reshape

Other = Callable[[tuple[int, ...]], Tensor]  # a live operand of a shape on the same device

# op -> (shape of the tensor that gets released, the call with it as ``x``)
CASES: dict[str, tuple[tuple[int, ...], Callable[[Tensor, Other], Any]]] = {
    "relu": ((7,), lambda x, o: ops.relu(x)),
    "exp": ((3, 5), lambda x, o: ops.exp(x)),
    "gelu": ((7,), lambda x, o: ops.gelu(x)),
    "leaky_relu": ((7,), lambda x, o: ops.leaky_relu(x, 0.1)),
    "clamp": ((7,), lambda x, o: ops.clamp(x, 0, 1)),
    "add": ((3, 5), lambda x, o: ops.add(x, o((3, 5)))),
    "add_second": ((3, 5), lambda x, o: ops.add(o((3, 5)), x)),
    "add_broadcast": ((5,), lambda x, o: ops.add(o((3, 5)), x)),
    "mul_scalar": ((7,), lambda x, o: ops.mul(x, 2.0)),
    "gt": ((7,), lambda x, o: ops.gt(x, o((7,)))),
    "where": ((7,), lambda x, o: ops.where(ops.gt(o((7,)), 0.0), x, 0.0)),
    "cast": ((7,), lambda x, o: ops.cast(x, "float16")),
    "fill": ((7,), lambda x, o: ops.fill(x, 1.0)),
    "sum": ((3, 5), lambda x, o: ops.sum(x)),
    "mean_axis": ((3, 5), lambda x, o: ops.mean(x, axis=1)),
    "max": ((3, 5), lambda x, o: ops.max(x, axis=0)),
    "argmax": ((3, 5), lambda x, o: ops.argmax(x, axis=1)),
    "var": ((3, 5), lambda x, o: ops.var(x)),
    "matmul": ((3, 4), lambda x, o: ops.matmul(x, o((4, 5)))),
    "matmul_second": ((4, 5), lambda x, o: ops.matmul(o((3, 4)), x)),
    "conv2d": ((1, 2, 6, 6), lambda x, o: ops.conv2d(x, o((3, 2, 3, 3)), padding=1)),
    "conv2d_weight": ((3, 2, 3, 3), lambda x, o: ops.conv2d(o((1, 2, 6, 6)), x)),
    "conv2d_bias": ((3,), lambda x, o: ops.conv2d(o((1, 2, 6, 6)), o((3, 2, 3, 3)), x)),
    "bias_add": ((3,), lambda x, o: ops.bias_add(o((2, 3, 4)), x)),
    "max_pool2d": ((1, 2, 4, 4), lambda x, o: ops.max_pool2d(x, 2)),
    "avg_pool2d": ((1, 2, 4, 4), lambda x, o: ops.avg_pool2d(x, 2)),
    "global_avg_pool2d": ((1, 2, 4, 4), lambda x, o: ops.global_avg_pool2d(x)),
    "softmax": ((3, 5), lambda x, o: ops.softmax(x)),
    "log_softmax": ((3, 5), lambda x, o: ops.log_softmax(x, axis=0)),
    "layer_norm": ((3, 5), lambda x, o: ops.layer_norm(x, 5)),
    "batch_norm": ((2, 3, 4), lambda x, o: ops.batch_norm(x, None, None)),
    "reshape": ((3, 4), lambda x, o: ops.reshape(x, (4, 3))),
    "core_reshape": ((3, 4), lambda x, o: reshape(x, (12,))),
    "transpose": ((3, 4), lambda x, o: ops.transpose(x)),
    "permute": ((2, 3, 4), lambda x, o: ops.permute(x, (2, 0, 1))),
    "getitem": ((3, 4), lambda x, o: ops.getitem(x, np.s_[1:, ::2])),
    "copy": ((3, 4), lambda x, o: ops.copy(x)),
    "concat": ((3, 4), lambda x, o: ops.concat([o((2, 4)), x])),
    "stack": ((3, 4), lambda x, o: ops.stack([x, o((3, 4))])),
    "pad": ((3, 4), lambda x, o: ops.pad(x, (1, 2))),
    "broadcast_to": ((1, 4), lambda x, o: ops.broadcast_to(x, (3, 4))),
    "index_select": ((5, 3), lambda x, o: ops.index_select(
        x, 0, Tensor.from_host(x.queue, np.array([4, 0], dtype=np.int64)))),
    "dropout": ((7,), lambda x, o: ops.dropout(x, 0.5, seed=1)),
    "to_host": ((7,), lambda x, o: x.to_host()),
}


@pytest.mark.parametrize("name", CASES)
def test_released_operand_raises(dev: DeviceHandle, name: str) -> None:
    shape, call = CASES[name]
    rng = np.random.default_rng(len(name))

    def other(s: tuple[int, ...]) -> Tensor:
        return Tensor.from_host(dev.queue, rng.standard_normal(s))

    x = other(shape)
    call(x, other)  # warm: plans, kernels and the fast path's entry for this call exist
    x.release()
    with pytest.raises(ValueError, match=r"tensor was released: shape \(.*float32, on "):
        call(x, other)


def test_released_base_fails_its_views(dev: DeviceHandle) -> None:
    """A view shares the released storage; on OpenCL it would read the next owner's data."""
    x = Tensor.from_host(dev.queue, np.arange(12.0))
    view = ops.reshape(x, (3, 4))
    np.testing.assert_array_equal(ops.relu(view).to_host(), np.arange(12.0).reshape(3, 4))
    x.release()
    with pytest.raises(ValueError, match=r"tensor was released: shape \(3, 4\)"):
        ops.relu(view)
    with pytest.raises(ValueError, match=r"tensor was released: shape \(3, 4\)"):
        ops.matmul(view, Tensor.from_host(dev.queue, np.ones((4, 2))))


def test_fast_path_itself_refuses_a_released_operand(dev: DeviceHandle) -> None:
    """``apply`` already stops at ``x.array``; the fast path's own buffer read is guarded too."""
    if dev.backend != "cl":
        pytest.skip("the elementwise fast path is OpenCL's")
    from netcl.ops import _elementwise, _elementwise_base

    x = Tensor.from_host(dev.queue, np.ones(9))
    ops.exp(x)
    assert _elementwise_base.run_fast(_elementwise.OPS["exp"], [x]) is not None  # an entry
    x.release()
    with pytest.raises(ValueError, match="tensor was released"):
        _elementwise_base.run_fast(_elementwise.OPS["exp"], [x])


def test_contiguous_hands_back_the_released_tensor_itself(dev: DeviceHandle) -> None:
    """``contiguous`` of a tensor at offset 0 is that tensor, data untouched: released or not,
    it is returned as it is, and its first use raises."""
    x = Tensor.from_host(dev.queue, np.ones(3))
    x.release()
    assert ops.contiguous(x) is x
    with pytest.raises(ValueError, match="tensor was released"):
        ops.relu(ops.contiguous(x))


def test_fresh_tensors_of_a_released_shape_still_work(dev: DeviceHandle) -> None:
    """The fast path's entry outlives the release; new tensors of that shape reuse it."""
    x = Tensor.from_host(dev.queue, np.arange(5.0) - 2)
    ops.relu(x)
    x.release()
    with pytest.raises(ValueError, match="tensor was released"):
        ops.relu(x)
    y = Tensor.from_host(dev.queue, np.arange(5.0) - 1)
    np.testing.assert_array_equal(ops.relu(y).to_host(), [0, 0, 1, 2, 3])
