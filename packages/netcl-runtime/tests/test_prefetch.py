"""Prefetcher: batches uploaded on a second queue while slow kernels read the batch before
(large batches, a slow producer, depth 1 and 2, a partial last batch, an early stop) give the
same results as plain synchronous uploads, bitwise, on every OpenCL device; the NumPy backend
passes the batches through."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import KernelSpec
from netcl.runtime import Prefetcher

# Each item reads REPS entries of x scattered over the batch: slow enough that the next upload
# runs while it does, and it reads the whole batch (a copy into the wrong slot shows).
WORK = KernelSpec("prefetch_work", src="""
__kernel void prefetch_work(__global const float* x, __global const long* y,
                            __global float* out, const int n, const int m, const int reps) {
    int i = get_global_id(0);
    if (i >= n) return;
    float acc = 0.0f;
    for (int r = 0; r < reps; ++r) {
        acc = acc * 0.5f + x[(i * 7 + r * 131) % n];
    }
    out[i] = acc + (float)y[i % m];
}""", workgroup_size=64)

Batches = list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]


def _batches(count: int, rows: int, last: int, seed: int = 0) -> Batches:
    rng = np.random.default_rng(seed)
    sizes = [rows] * (count - 1) + [last]
    return [(rng.standard_normal((r, 33, 31)), rng.integers(0, 10, r)) for r in sizes]


def _run(dev: DeviceHandle, pairs: Iterator[tuple[Tensor, ...]]) -> list[np.ndarray[Any, Any]]:
    """Enqueue the slow kernel per batch; read every result back only at the end."""
    outs = []
    for x, y in pairs:
        n, m = x.size, y.size
        out = Tensor.from_shape(dev.queue, (n,), fill=None)
        WORK.run(dev.queue, (-(-n // 64) * 64,), None, x, y, out, n, m, 64)
        outs.append(out)
    return [o.to_host() for o in outs]


def _plain(dev: DeviceHandle, batches: Batches) -> Iterator[tuple[Tensor, ...]]:
    for x, y in batches:
        yield Tensor.from_host(dev.queue, x, dtype="float32"), Tensor.from_host(dev.queue, y)


def _slow(batches: Batches) -> Iterator[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    for x, y in batches:
        time.sleep(0.002)
        yield x, y


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("the copy queue is OpenCL's")
    return dev


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("slow_producer", [False, True], ids=["fast", "slow"])
def test_prefetched_batches_equal_plain_uploads(cl_dev: DeviceHandle, depth: int,
                                                slow_producer: bool) -> None:
    batches = _batches(9, 129, 37)
    expected = _run(cl_dev, _plain(cl_dev, batches))
    pre = Prefetcher(cl_dev.queue, depth=depth, dtypes=("float32", None))
    for _ in range(2):  # a second pass reuses the slots
        source = _slow(batches) if slow_producer else batches
        got = _run(cl_dev, pre(source))
        assert len(got) == len(expected)
        for a, b in zip(expected, got):
            np.testing.assert_array_equal(a, b)


def test_early_stop_then_a_new_pass(cl_dev: DeviceHandle) -> None:
    batches = _batches(6, 65, 65, seed=1)
    pre = Prefetcher(cl_dev.queue, depth=2, dtypes=("float32", None))
    first = pre(batches)
    partial = _run(cl_dev, (next(first) for _ in range(2)))
    first.close()  # two batches uploaded ahead are dropped
    expected = _run(cl_dev, _plain(cl_dev, batches))
    for a, b in zip(expected, partial):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(expected, _run(cl_dev, pre(batches))):
        np.testing.assert_array_equal(a, b)


def test_dtypes_follow_from_host(dev: DeviceHandle) -> None:
    pre = Prefetcher(dev.queue)
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    flags = np.array([True, False])
    (tx, ty, tf), = list(pre([(x, np.arange(2, dtype=np.int32), flags)]))
    assert (tx.dtype, ty.dtype, tf.dtype) == ("float32", "int32", "uint8")
    np.testing.assert_array_equal(tx.to_host(), x.astype(np.float32))
    np.testing.assert_array_equal(tf.to_host(), [1, 0])


def test_numpy_backend_passes_through(dev: DeviceHandle) -> None:
    if dev.backend != "cpu":
        pytest.skip("the NumPy backend's pass-through")
    batches = _batches(3, 4, 3)
    got = list(Prefetcher(dev.queue, dtypes=("float32", None))(batches))
    for (x, y), (tx, ty) in zip(batches, got):
        np.testing.assert_array_equal(tx.to_host(), x.astype(np.float32))
        np.testing.assert_array_equal(ty.to_host(), y)


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="depth must be >= 1, got 0"):
        Prefetcher(depth=0)
