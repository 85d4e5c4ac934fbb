"""Tensor construction, transfer, views and bad input on every backend present."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle, manager
from netcl.core.tensor import Tensor, check_same_device, reshape
from netcl.core.testing import supports_dtype

SHAPES = [(1,), (7,), (33,), (257,), (3, 5), (2, 7, 33), (1, 1, 1, 1)]
DTYPES = ["float32", "float16", "float64", "int32", "int64", "uint8"]


def _data(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 50).astype(dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_is_exact(dev: DeviceHandle, shape: tuple[int, ...], dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev} has no {dtype}")
    host = _data(shape, dtype)
    t = Tensor.from_host(dev.queue, host, dtype=dtype)
    assert t.shape == shape and t.dtype == dtype and t.size == math.prod(shape)
    assert t.backend == dev.backend
    back = t.to_host()
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(back, host)


@pytest.mark.parametrize("async_copy", [True, False])
@pytest.mark.parametrize("use_pinned", [True, False])
def test_upload_modes(dev: DeviceHandle, async_copy: bool, use_pinned: bool) -> None:
    host = _data((257,), "float32")
    t = Tensor.from_host(dev.queue, host, async_copy=async_copy, use_pinned=use_pinned)
    host[:] = 0  # the tensor must not alias the caller's array
    t.wait()
    t.wait()  # idempotent
    assert t.pending_event is None and t.pending_release is None
    np.testing.assert_array_equal(t.to_host(), _data((257,), "float32"))


def test_discrete_upload_paths(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """Exercise the pooled/pinned upload path even on integrated devices such as PoCL."""
    if dev.backend != "cl":
        pytest.skip("OpenCL only")
    from netcl.core.tensor import _backend_for

    be = _backend_for(dev.queue)
    monkeypatch.setattr(be, "integrated", False)
    for pinned in (True, False):
        for async_copy in (True, False):
            host = _data((33, 7), "float32", seed=3)
            t = Tensor.from_host(dev.queue, host, async_copy=async_copy, use_pinned=pinned)
            assert t.pool_handle is not None
            if async_copy and pinned:
                assert t.pending_release is not None
            np.testing.assert_array_equal(t.to_host(), host)
            assert t.pending_release is None


def test_env_defaults_for_uploads(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_ASYNC_H2D", "0")
    monkeypatch.setenv("NETCL_PINNED_H2D", "0")
    t = Tensor.from_host(dev.queue, np.arange(7.0))
    assert t.pending_event is None
    np.testing.assert_array_equal(t.to_host(), np.arange(7.0))


@pytest.mark.parametrize("fill", [0, 1.5, -3])
def test_from_shape_fill(dev: DeviceHandle, fill: float) -> None:
    t = Tensor.from_shape(dev.queue, (7, 33), dtype="float32", fill=fill)
    np.testing.assert_array_equal(t.to_host(), np.full((7, 33), fill, np.float32))
    if dev.backend == "cl":
        assert t.pool_handle is not None


def test_from_shape_int_and_half(dev: DeviceHandle) -> None:
    np.testing.assert_array_equal(
        Tensor.from_shape(dev.queue, (5,), "int64", fill=7).to_host(), np.full(5, 7)
    )
    np.testing.assert_array_equal(
        Tensor.from_shape(dev.queue, (5,), "half", fill=0.5).to_host(), np.full(5, 0.5)
    )


def test_zero_size(dev: DeviceHandle) -> None:
    t = Tensor.from_shape(dev.queue, (3, 0, 2))
    assert t.size == 0 and t.pool_handle is None
    assert t.to_host().shape == (3, 0, 2)
    e = Tensor.from_host(dev.queue, np.zeros((0, 4)))
    assert e.to_host().shape == (0, 4)


def test_default_dtypes(dev: DeviceHandle) -> None:
    assert Tensor.from_host(dev.queue, np.eye(3)).dtype == "float32"
    assert Tensor.from_host(dev.queue, [1, 2, 3]).dtype == "float32"
    assert Tensor.from_host(dev.queue, np.array([1, 2], np.int64)).dtype == "int64"
    assert Tensor.from_host(dev.queue, np.zeros(4, np.uint8)).dtype == "uint8"
    assert Tensor.from_host(dev.queue, np.ones(2), dtype="double").dtype == "float64" or (
        not supports_dtype(dev, "float64")
    )


def test_reshape_is_a_view(dev: DeviceHandle) -> None:
    flat = Tensor.from_host(dev.queue, np.arange(12, dtype=np.float32))
    mat = reshape(flat, (3, 4))
    assert mat.shape == (3, 4) and mat._base is flat
    if dev.backend == "cl":
        assert mat.buffer is flat.buffer
    else:
        assert np.shares_memory(mat.array, flat.array)
    np.testing.assert_array_equal(mat.to_host(), np.arange(12).reshape(3, 4))
    del flat
    np.testing.assert_array_equal(mat.to_host(), np.arange(12).reshape(3, 4))


def test_buffer_goes_back_to_pool_on_del(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("OpenCL only")
    t = Tensor.from_shape(dev.queue, (1000,))
    handle = t.pool_handle
    assert handle is not None
    del t
    assert handle.released


def test_persistent_tensor_is_not_recycled(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("OpenCL only")
    t = Tensor.from_shape(dev.queue, (1000,))
    t.persistent = True
    handle = t.pool_handle
    assert handle is not None
    del t
    assert not handle.released


def test_array_protocol_and_repr(dev: DeviceHandle) -> None:
    t = Tensor.from_host(dev.queue, np.arange(4.0))
    np.testing.assert_array_equal(np.asarray(t), np.arange(4.0))
    text = repr(t)
    assert "shape=(4,)" in text and "float32" in text and "data=" in text
    assert "data=" not in repr(Tensor.from_shape(dev.queue, (100,)))


# -- bad input --------------------------------------------------------------------------


def test_unsupported_dtype_names_it(dev: DeviceHandle) -> None:
    with pytest.raises(ValueError, match=r"unsupported dtype 'complex64'.*float32"):
        Tensor.from_host(dev.queue, np.ones(2), dtype="complex64")
    with pytest.raises(ValueError, match="unsupported dtype 'bfloat16'"):
        Tensor.from_shape(dev.queue, (2,), dtype="bfloat16")


@pytest.mark.parametrize("shape", [(-1, 2), (2, -5)], ids=str)
def test_negative_shape(dev: DeviceHandle, shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"shape entries must be >= 0, got \("):
        Tensor.from_shape(dev.queue, shape)


@pytest.mark.parametrize("shape", [(2.5, 2), ("3",), (True,)], ids=str)
def test_non_integer_shape(dev: DeviceHandle, shape: Any) -> None:
    with pytest.raises(TypeError, match="shape entries must be integers"):
        Tensor.from_shape(dev.queue, shape)


def test_object_arrays_rejected(dev: DeviceHandle) -> None:
    with pytest.raises(TypeError, match="NumPy dtype object"):
        Tensor.from_host(dev.queue, np.array([1, "a"], dtype=object))


COMPLEX = r"of NumPy dtype complex\d+ cannot go on a device: netcl has no complex dtype"


@pytest.mark.parametrize("data", [np.array([1 + 2j, 3 - 1j]), np.array([1 + 0j]), [2j], 1j,
                                  np.ones(2, np.complex64)], ids=repr)
def test_complex_data_is_refused_not_truncated(dev: DeviceHandle, data: Any) -> None:
    """Before, the imaginary part was dropped (with only NumPy's ComplexWarning)."""
    with pytest.raises(TypeError, match="Tensor.from_host: data " + COMPLEX):
        Tensor.from_host(dev.queue, data)
    with pytest.raises(TypeError, match="Tensor.from_host: data " + COMPLEX):
        Tensor.from_host(dev.queue, data, dtype="float32")


def test_complex_goes_through_the_same_rule_everywhere(dev: DeviceHandle) -> None:
    from netcl.core.tensor import copy_from_host

    t = Tensor.from_shape(dev.queue, (2,))
    with pytest.raises(TypeError, match="copy_from_host: data " + COMPLEX):
        copy_from_host(t, np.array([1 + 2j, 3]))
    with pytest.raises(TypeError, match="Tensor.from_shape: fill " + COMPLEX):
        Tensor.from_shape(dev.queue, (2,), fill=1j)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"fill of NumPy dtype <U1 cannot go on a device; pass"):
        Tensor.from_shape(dev.queue, (2,), fill="a")  # type: ignore[arg-type]
    # a complex dtype *name* is an unsupported dtype like any other (the spec's ValueError)
    with pytest.raises(ValueError, match=r"unsupported dtype <class 'numpy\.complex128'>"):
        Tensor.from_shape(dev.queue, (2,), dtype=np.complex128)  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", ["M8[s]", "m8[s]", "U3", "S3", "V4"])
def test_non_numeric_data_is_refused(dev: DeviceHandle, dtype: str) -> None:
    with pytest.raises(TypeError, match=r"data of NumPy dtype \S+ cannot go on a device; pass"):
        Tensor.from_host(dev.queue, np.zeros(2, dtype=dtype))


# -- allocations a device cannot hold: netcl's MemoryError on every backend ----------------


def _cannot_allocate(size: str, shape: tuple[int, ...], dtype: str = "float32") -> str:
    return (rf"cannot allocate {size} for a tensor of shape {re.escape(str(shape))} and dtype "
            rf"{dtype} on (cpu|cl:.+): ")


def _host_refuses_huge_allocations() -> bool:
    """Whether malloc fails for 4 TB here (Linux without 'always overcommit'): with it, NumPy
    would get the memory and fill it until the OOM killer came."""
    try:
        with open("/proc/sys/vm/overcommit_memory") as f:
            return f.read().strip() in ("0", "2")
    except OSError:
        return False


@pytest.mark.parametrize("shape", [(10**12,), (2**80,), (2**40, 2**40)], ids=str)
def test_huge_shape_raises_memory_error(dev: DeviceHandle, shape: tuple[int, ...]) -> None:
    if dev.backend == "cpu" and shape == (10**12,) and not _host_refuses_huge_allocations():
        pytest.skip("this host may overcommit 4 TB")
    size = "3.64 TiB" if shape == (10**12,) else "4 YiB"
    if dev.backend == "cl":
        limits = (r"one buffer there holds at most \S+ \S+ \(CL_DEVICE_MAX_MEM_ALLOC_SIZE\), "
                  r"and its global memory is \S+ \S+$")
    elif shape == (10**12,):
        limits = r"NumPy could not get it from the host"
    else:
        limits = r"one NumPy array spans at most 8 EiB$"
    with pytest.raises(MemoryError, match=_cannot_allocate(size, shape) + limits):
        Tensor.from_shape(dev.queue, shape)
    with pytest.raises(MemoryError, match=_cannot_allocate(size, shape)):
        Tensor.from_shape(dev.queue, shape, fill=None)  # what ops allocate outputs with


def test_more_than_the_largest_buffer(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    if dev.backend != "cl":
        pytest.skip("OpenCL's CL_DEVICE_MAX_MEM_ALLOC_SIZE")
    from netcl.core.memory import format_bytes
    from netcl.core.tensor import _backend_for

    device = dev.queue.device
    n = int(device.max_mem_alloc_size) * 3 // 2 // 4
    limits = (f"one buffer there holds at most {format_bytes(device.max_mem_alloc_size)} "
              f"(CL_DEVICE_MAX_MEM_ALLOC_SIZE), and its global memory is "
              f"{format_bytes(device.global_mem_size)}")
    with pytest.raises(MemoryError, match=_cannot_allocate(r"\S+ \S+", (n,)) + re.escape(limits)):
        Tensor.from_shape(dev.queue, (n,))
    # uploads are checked before anything is copied or allocated (a small limit stands in)
    monkeypatch.setattr(_backend_for(dev.queue), "max_alloc", 1024)
    with pytest.raises(MemoryError, match=_cannot_allocate("3.91 KiB", (1000,))):
        Tensor.from_host(dev.queue, np.zeros(1000, np.float32))
    assert Tensor.from_host(dev.queue, np.zeros(256, np.float32)).size == 256


def test_numpy_value_errors_are_only_taken_for_size() -> None:
    from netcl.core.backend.cpu import CPUBackend

    with pytest.raises(ValueError, match="could not broadcast"):
        CPUBackend().from_shape((2,), "float32", fill=[1, 2, 3])  # type: ignore[arg-type]


def test_reshape_element_count(dev: DeviceHandle) -> None:
    t = Tensor.from_shape(dev.queue, (12,))
    msg = r"cannot view 12 elements of shape \(12,\) as shape \(5, 3\)"
    with pytest.raises(ValueError, match=msg):
        reshape(t, (5, 3))
    with pytest.raises(ValueError, match=">= 0"):
        reshape(t, (-1, 12))


def test_mixing_devices_names_both() -> None:
    handles = [manager.default("cpu"), *manager.all_handles()[:-1]]
    if len(handles) < 2:
        pytest.skip("needs an OpenCL device beside NumPy")
    a = Tensor.from_host(handles[0].queue, np.ones(3))  # type: ignore[union-attr]
    b = Tensor.from_host(handles[1].queue, np.ones(3))  # type: ignore[union-attr]
    msg = r"matmul: tensors are on different devices: \(3,\) on cpu"
    with pytest.raises(ValueError, match=msg):
        check_same_device("matmul", a, b)
    assert check_same_device("add", a, a) is a.queue


def test_float64_needs_the_extension(dev: DeviceHandle) -> None:
    if supports_dtype(dev, "float64"):
        t = Tensor.from_host(dev.queue, np.ones(3), dtype="float64")
        assert t.to_host().dtype == np.float64
    else:
        with pytest.raises(ValueError, match="cl_khr_fp64"):
            Tensor.from_host(dev.queue, np.ones(3), dtype="float64")


def test_copy_from_host_in_place(dev: DeviceHandle) -> None:
    from netcl.core.tensor import copy_from_host

    t = Tensor.from_shape(dev.queue, (7, 3))
    buffer, array = t.buffer, t.array
    copy_from_host(t, np.arange(21).reshape(7, 3))
    np.testing.assert_array_equal(t.to_host(), np.arange(21).reshape(7, 3))
    assert t.buffer is buffer and t.array is array
    with pytest.raises(ValueError, match=r"data of shape \(3, 7\) does not fit .* \(7, 3\)"):
        copy_from_host(t, np.zeros((3, 7)))
