"""The record of a kernel's last arguments (NOTE [ Arguments set once ] in
netcl.core.kernels.primitives) on every OpenCL device: it keeps no buffer alive (a buffer
dropped by its owner, or by a pool that does not cache it, is freed), a new buffer in a dead
one's place is set, and a launch with the same buffers sets nothing again."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

from netcl.core._cl import cl
from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import KernelSpec, buffer_token, launch
from netcl.core.memory import PersistentBufferPool

N = 33
SCALE = KernelSpec("scale_by", src="""
__kernel void scale_by(__global float* out, __global const float* x, const float k,
                       const int n) {
    int i = get_global_id(0);
    if (i < n) out[i] = k * x[i];
}""")


class Probe:
    """Hung on a buffer: its weak reference dies when the buffer object does."""


@pytest.fixture
def cl_dev(dev: DeviceHandle) -> DeviceHandle:
    if dev.backend != "cl":
        pytest.skip("kernel arguments are OpenCL's")
    return dev


def _kernel(dev: DeviceHandle) -> Any:
    return SCALE.build(dev.queue).kernel


def _buffer(dev: DeviceHandle, host: np.ndarray[Any, Any] | None = None) -> Any:
    mf = cl().mem_flags
    if host is None:
        return cl().Buffer(dev.context, mf.READ_WRITE, N * 4)
    return cl().Buffer(dev.context, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=host)


def _watch(buffer: Any) -> weakref.ref[Probe]:
    buffer._test_probe = Probe()
    return weakref.ref(buffer._test_probe)


def _read(dev: DeviceHandle, buffer: Any) -> np.ndarray[Any, Any]:
    out = np.empty(N, np.float32)
    cl().enqueue_copy(dev.queue, out, buffer)
    return out


def test_a_dropped_buffer_is_freed_and_its_successor_set(cl_dev: DeviceHandle) -> None:
    kernel = _kernel(cl_dev)
    host = np.arange(N, dtype=np.float32)
    x = _buffer(cl_dev, host)
    for k in (2.0, 3.0):  # the second launch goes through the record
        out = _buffer(cl_dev)
        launch(cl_dev.queue, kernel, (64,), None, out, x, np.float32(k), np.int32(N))
        np.testing.assert_array_equal(_read(cl_dev, out), k * host)
        alive = _watch(out)
        del out
        gc.collect()
        assert alive() is None, "the kernel's argument record kept a dropped buffer alive"
    other = _buffer(cl_dev, host + 1)  # a new input where a dead output was: set again
    out = _buffer(cl_dev)
    launch(cl_dev.queue, kernel, (64,), None, out, other, np.float32(3.0), np.int32(N))
    np.testing.assert_array_equal(_read(cl_dev, out), 3.0 * (host + 1))


def test_a_buffer_the_pool_does_not_cache_is_freed(cl_dev: DeviceHandle) -> None:
    pool = PersistentBufferPool(cl_dev.context, max_cached_bytes=0)
    kernel = _kernel(cl_dev)
    x = _buffer(cl_dev, np.ones(N, np.float32))
    for _ in range(2):
        handle = pool.allocate(N * 4)
        launch(cl_dev.queue, kernel, (64,), None, handle.buffer, x, np.float32(1.5), np.int32(N))
        np.testing.assert_array_equal(_read(cl_dev, handle.buffer), np.full(N, 1.5, np.float32))
        alive = _watch(handle.buffer)
        handle.release()
        gc.collect()
        assert alive() is None
        assert pool.get_stats()["bytes_cached"] == 0


def test_same_buffers_are_not_set_again(cl_dev: DeviceHandle) -> None:
    kernel = _kernel(cl_dev)
    x, out = _buffer(cl_dev, np.ones(N, np.float32)), _buffer(cl_dev)
    launch(cl_dev.queue, kernel, (64,), None, out, x, np.float32(2.0), np.int32(N))
    calls: list[int] = []
    set_arg = kernel.set_arg

    def counting(i: int, v: Any) -> None:
        calls.append(i)
        set_arg(i, v)

    kernel.set_arg = counting
    try:
        launch(cl_dev.queue, kernel, (64,), None, out, x, np.float32(2.0), np.int32(N))
        assert calls == []
        out2 = _buffer(cl_dev)
        launch(cl_dev.queue, kernel, (64,), None, out2, x, np.float32(4.0), np.int32(N))
        assert calls == [0, 2]
    finally:
        del kernel.set_arg
    np.testing.assert_array_equal(_read(cl_dev, out2), np.full(N, 4.0, np.float32))
    assert buffer_token(out2) is buffer_token(out2) and buffer_token(out2) is not buffer_token(x)
