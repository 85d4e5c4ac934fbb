"""The record of a kernel's last arguments (NOTE [ Arguments set once ] in
netcl.core.kernels.primitives) on every OpenCL device: it keeps no buffer alive (a buffer
dropped by its owner, or by a pool that does not cache it, is freed), a new buffer in a dead
one's place is set, a launch with the same buffers sets nothing again, and a changed scalar
is set alone, by its bytes."""

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
    calls: list[tuple[str, int]] = []
    originals = {name: getattr(kernel, name) for name in ("set_arg", "_set_arg_buf")
                 if hasattr(kernel, name)}

    def counting(name: str) -> Any:
        def call(i: int, v: Any) -> None:
            calls.append((name, i))
            originals[name](i, v)
        return call

    for name in originals:
        setattr(kernel, name, counting(name))
    try:
        launch(cl_dev.queue, kernel, (64,), None, out, x, np.float32(2.0), np.int32(N))
        assert calls == []
        out2 = _buffer(cl_dev)
        launch(cl_dev.queue, kernel, (64,), None, out2, x, np.float32(4.0), np.int32(N))
        # the buffer through set_arg, the scalar by its bytes (NOTE [ Setting one scalar ])
        scalar = "_set_arg_buf" if "_set_arg_buf" in originals else "set_arg"
        assert calls == [("set_arg", 0), (scalar, 2)]
    finally:
        for name in originals:
            delattr(kernel, name)
    np.testing.assert_array_equal(_read(cl_dev, out2), np.full(N, 4.0, np.float32))
    assert buffer_token(out2) is buffer_token(out2) and buffer_token(out2) is not buffer_token(x)


ECHO = KernelSpec("echo_scalars", src="""
__kernel void echo_scalars(__global long* out, const long a, const ulong b, const uint c,
                           const short d, const float e) {
    out[0] = a; out[1] = (long)b; out[2] = c; out[3] = d; out[4] = (long)(e * 4.0f);
}""")


def test_changed_scalars_of_every_width_arrive(cl_dev: DeviceHandle) -> None:
    kernel = ECHO.build(cl_dev.queue).kernel
    out = _buffer(cl_dev)
    for a, b, c, d, e in [(-5, 7, 9, -3, 0.5), (2**40, 2**62 + 1, 2**31 + 3, 300, -1.25),
                          (2**40, 2**62 + 1, 4, 300, -1.25), (-1, 0, 0, -32768, 8.0)]:
        launch(cl_dev.queue, kernel, (1,), None, out, np.int64(a), np.uint64(b), np.uint32(c),
               np.int16(d), np.float32(e))
        got = np.empty(N // 2, np.int64)
        cl().enqueue_copy(cl_dev.queue, got, out)
        assert got[:5].tolist() == [a, b, c, d, int(e * 4)]
