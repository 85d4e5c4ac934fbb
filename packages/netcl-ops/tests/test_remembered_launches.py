"""Ops that repeat a remembered launch (NOTE [ Remembered launches ] in netcl.ops._launch) on
every device: softmax and log_softmax called again with other tensors of one shape, along
each axis, on a view at an element offset and under a forced kernel variant, give NumPy's
results each call; each result is its own tensor; a released input raises every call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.core.kernel_selector import KernelVariant, force_variant


def _softmax(x: np.ndarray[Any, Any], axis: int, log: bool) -> np.ndarray[Any, Any]:
    x = x.astype(np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    lse = np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    out: np.ndarray[Any, Any] = shifted - lse if log else np.exp(shifted - lse)
    return out


def _inputs(dev: DeviceHandle) -> list[tuple[np.ndarray[Any, Any], Tensor]]:
    rng = np.random.default_rng(0)
    hosts = [rng.standard_normal((5, 33, 3)).astype(np.float32) for _ in range(3)]
    return [(h, Tensor.from_host(dev.queue, h)) for h in hosts]


@pytest.mark.parametrize("axis", [-1, 1, 0])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_repeated_softmax(dev: DeviceHandle, axis: int, log: bool) -> None:
    fn = ops.log_softmax if log else ops.softmax
    xs = _inputs(dev)
    for _ in range(2):
        for host, x in xs:
            np.testing.assert_allclose(fn(x, axis=axis).to_host(), _softmax(host, axis, log),
                                       rtol=1e-5, atol=1e-6)
    for variant in (KernelVariant.REDUCTION_SEQUENTIAL, KernelVariant.REDUCTION_PARALLEL):
        with force_variant(variant):  # another kernel for the same key but the epoch
            host, x = xs[1]
            np.testing.assert_allclose(fn(x, axis=axis).to_host(), _softmax(host, axis, log),
                                       rtol=1e-5, atol=1e-6)


def test_a_view_at_an_offset_and_fresh_results(dev: DeviceHandle) -> None:
    host = np.random.default_rng(1).standard_normal((4, 7)).astype(np.float32)
    x = Tensor.from_host(dev.queue, host)
    if dev.backend == "cl":  # rows 1.. of x, seven elements into its buffer
        tail = Tensor(buffer=x.buffer, shape=(3, 7), dtype="float32", context=x.context,
                      queue=x.queue, offset=7, _base=x, _backend=x._backend)
        for _ in range(2):
            np.testing.assert_allclose(ops.softmax(tail).to_host(),
                                       _softmax(host[1:], -1, False), rtol=1e-5, atol=1e-6)
            same = Tensor.from_host(dev.queue, host[1:])  # the same shape at offset 0
            np.testing.assert_allclose(ops.softmax(same).to_host(),
                                       _softmax(host[1:], -1, False), rtol=1e-5, atol=1e-6)
    first = ops.softmax(x)
    second = ops.softmax(x)
    first.release()
    np.testing.assert_allclose(second.to_host(), _softmax(host, -1, False), rtol=1e-5, atol=1e-6)


def test_a_released_input_raises_every_call(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.ones((3, 5), np.float32))
    ops.softmax(x)
    ops.softmax(x)
    x.release()
    for _ in range(2):
        with pytest.raises(ValueError, match="tensor was released"):
            ops.softmax(x)


@pytest.mark.parametrize("geometry", [dict(kernel_size=2), dict(kernel_size=3, stride=2,
                                                                  padding=1)], ids=str)
def test_repeated_max_pooling_and_its_gradient(dev: DeviceHandle, geometry: Any) -> None:
    rng = np.random.default_rng(2)
    hosts = [rng.standard_normal((2, 3, 9, 7)).astype(np.float32) for _ in range(2)]
    results: list[tuple[np.ndarray[Any, Any], ...]] = []
    for _ in range(2):  # the second round repeats remembered launches: the same answers
        for host in hosts:
            x = Tensor.from_host(dev.queue, host)
            y, idx = ops.max_pool2d(x, return_indices=True, **geometry)
            plain = ops.max_pool2d(x, **geometry)
            grad = Tensor.from_host(dev.queue, np.ones(y.shape, np.float32))
            dx = ops.max_pool2d_backward(grad, idx, x.shape, **geometry)
            np.testing.assert_array_equal(plain.to_host(), y.to_host())
            results.append((y.to_host(), idx.to_host(), dx.to_host()))
    for first, again in zip(results[:2], results[2:]):
        for a, b in zip(first, again):
            np.testing.assert_array_equal(a, b)
    hy, hidx, hdx = results[0]
    flat = hosts[0].reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, hidx.reshape(2, 3, -1), 2).reshape(
        hy.shape), hy)  # each maximum is where its index says
    assert hdx.sum() == hy.size and set(np.unique(hdx)) <= {0.0, 1.0, 2.0, 3.0, 4.0}


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_repeated_permutes_and_transposes(dev: DeviceHandle, dtype: Any) -> None:
    rng = np.random.default_rng(3)
    hosts = [(rng.standard_normal((3, 5, 7)) * 50).astype(dtype) for _ in range(2)]
    for _ in range(2):
        for host in hosts:
            x = Tensor.from_host(dev.queue, host)
            np.testing.assert_array_equal(ops.permute(x, (2, 0, 1)).to_host(),
                                          host.transpose(2, 0, 1))
            np.testing.assert_array_equal(ops.transpose(x).to_host(), host.swapaxes(-1, -2))
            np.testing.assert_array_equal(ops.transpose(x, 0, 2).to_host(),
                                          host.swapaxes(0, 2))
