"""Tensor.release(): the storage goes back at once, and every later use of the tensor, or of a
view of it, raises one ValueError on every backend (NOTE [ Released tensors ])."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor, copy_from_host, reshape

RELEASED = r"tensor was released: shape \(2, 3\), float32, on (cpu|cl:.+); its storage went back"

USES: dict[str, Callable[[Tensor], Any]] = {
    "to_host": lambda t: t.to_host(),
    "to_host_async": lambda t: t.to_host_async(),
    "numpy": lambda t: t.numpy(),
    "__array__": np.asarray,
    "reshape": lambda t: reshape(t, (6,)),
    "copy_from_host": lambda t: copy_from_host(t, np.zeros((2, 3))),
    "buffer": lambda t: t.buffer,
    "array": lambda t: t.array,
}


@pytest.mark.parametrize("use", USES)
def test_every_use_raises(dev: DeviceHandle, use: str) -> None:
    t = Tensor.from_host(dev.queue, np.arange(6.0).reshape(2, 3))
    USES[use](t)
    t.release()
    with pytest.raises(ValueError, match=RELEASED):
        USES[use](t)


def test_metadata_stays_and_release_is_idempotent(dev: DeviceHandle) -> None:
    t = Tensor.from_shape(dev.queue, (2, 3))
    assert not t.released
    t.release()
    t.release()
    t.wait()
    assert t.released and (t.shape, t.dtype, t.size, t.backend) == ((2, 3), "float32", 6,
                                                                    dev.backend)
    assert repr(t).endswith(", released)")


def test_pooled_buffer_goes_back(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("OpenCL pools")
    t = Tensor.from_shape(dev.queue, (1000,))
    handle = t.pool_handle
    assert handle is not None
    t.release()
    assert handle.released and t.pool_handle is None


def test_zero_size_and_pending_upload(dev: DeviceHandle) -> None:
    empty = Tensor.from_shape(dev.queue, (0, 3))
    empty.release()
    with pytest.raises(ValueError, match=r"tensor was released: shape \(0, 3\)"):
        empty.to_host()
    pending = Tensor.from_host(dev.queue, np.ones(1000), async_copy=True, use_pinned=True)
    pending.release()  # waits for the upload before the buffer goes back
    assert pending.pending_event is None and pending.pending_release is None
    with pytest.raises(ValueError, match="tensor was released"):
        pending.to_host()


def test_views_of_a_released_tensor_raise_too(dev: DeviceHandle) -> None:
    base = Tensor.from_host(dev.queue, np.arange(6.0))
    view = reshape(base, (2, 3))
    view_of_view = reshape(view, (3, 2))
    base.release()
    assert view.released and view_of_view.released
    with pytest.raises(ValueError, match=RELEASED):
        view.to_host()
    with pytest.raises(ValueError, match=r"tensor was released: shape \(3, 2\)"):
        view_of_view.to_host()


def test_releasing_a_view_leaves_its_base(dev: DeviceHandle) -> None:
    base = Tensor.from_host(dev.queue, np.arange(6.0))
    view = reshape(base, (2, 3))
    view.release()
    with pytest.raises(ValueError, match=RELEASED):
        view.to_host()
    np.testing.assert_array_equal(base.to_host(), np.arange(6.0))
    np.testing.assert_array_equal(reshape(base, (3, 2)).to_host(), np.arange(6.0).reshape(3, 2))


def test_view_references_stay_bounded(dev: DeviceHandle) -> None:
    base = Tensor.from_host(dev.queue, np.arange(6.0))
    keep = reshape(base, (2, 3))
    for _ in range(100):
        reshape(base, (3, 2))  # dropped at once, as autograd's detach views are
    gc.collect()
    assert base._views is not None and len(base._views) <= 17
    base.release()
    assert keep.released


def test_kernel_launch_with_a_released_tensor(dev: DeviceHandle) -> None:
    """Before, the kernel got a NULL buffer and the process died with SIGSEGV."""
    if dev.backend != "cl":
        pytest.skip("kernels need an OpenCL device")
    from netcl.core.kernels.primitives import KernelSpec

    spec = KernelSpec(name="twice", src="__kernel void twice(__global float* x) {"
                                         " x[get_global_id(0)] *= 2.0f; }")
    kernel = spec.build(dev.queue)
    x = Tensor.from_host(dev.queue, np.arange(6.0, dtype=np.float32).reshape(2, 3))
    kernel.run(dev.queue, (6,), None, x)
    np.testing.assert_array_equal(x.to_host(), 2 * np.arange(6.0).reshape(2, 3))
    x.release()
    with pytest.raises(ValueError, match=RELEASED):
        kernel.run(dev.queue, (6,), None, x)


def test_zero_copy_tensor_release_and_reuse(dev: DeviceHandle) -> None:
    """Integrated devices (every OpenCL CPU device) upload into zero-copy buffers: release
    retires the buffer and its host memory behind the queue; new tensors keep working."""
    for k in range(3):
        t = Tensor.from_host(dev.queue, np.full(33, float(k)))
        t.release()
        u = Tensor.from_host(dev.queue, np.full(33, float(k) + 1))
        np.testing.assert_array_equal(u.to_host(), np.full(33, float(k) + 1))
