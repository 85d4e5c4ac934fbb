"""Minimal cases of the bugs the ops fuzz suite (``test_fuzz*.py``) found, on every backend.

Each test is the smallest example Hypothesis shrank a failure to. A test marked ``xfail`` is a
bug not fixed yet (its reason says what is wrong); the fuzz suite leaves that case out until the
test passes (its ``KNOWN:`` comments name the test), and ``strict`` turns the fix into a
failure here so that the mark and the exclusion are removed together.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close


def _xfail_on(request: pytest.FixtureRequest, dev: DeviceHandle, backends: tuple[str, ...],
              reason: str) -> None:
    """Mark this run strict-xfail where ``dev``'s backend is one of ``backends``."""
    if dev.backend in backends:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


def test_gelu_of_a_0d_tensor(dev: DeviceHandle) -> None:
    """Was TypeError on the NumPy backend: erf assigned into np.sign(x), a scalar for 0-d x."""
    x = Tensor.from_host(dev.queue, np.array(0.5, dtype=np.float32))
    y = ops.gelu(x)
    assert y.shape == ()
    assert_close(y.to_host(), 0.345731, "float32", scale=0.1)  # gelu(0.5) to 6 digits


@pytest.mark.parametrize("axis", [0, -1])
def test_reductions_take_axis_0_of_a_0d_tensor(dev: DeviceHandle, axis: int) -> None:
    """As PyTorch (and softmax here): a 0-d tensor's axis 0 or -1 reduces nothing. Was
    NumPy's AxisError or 'tuple index out of range', naming no op (OpenCL's sum worked)."""
    x = Tensor.from_host(dev.queue, np.array(2.5, dtype=np.float32))
    for op, want in ((ops.sum, 2.5), (ops.mean, 2.5), (ops.max, 2.5), (ops.min, 2.5),
                     (ops.argmax, 0)):
        for keepdims in (False, True):
            y = op(x, axis=axis, keepdims=keepdims)
            assert y.shape == ()
            assert y.to_host() == want
    assert np.isnan(ops.var(x, axis=axis).to_host())  # one value, correction 1: 0/0
    with pytest.raises(IndexError, match="sum: axis 1 is out of range for a 0-d tensor"):
        ops.sum(x, axis=1)
    with pytest.raises(IndexError, match="sum: repeated axis"):
        ops.sum(x, axis=(0, -1))


@pytest.mark.parametrize("axis", [0, 1])
def test_max_min_argmax_of_an_empty_axis_into_an_empty_result(dev: DeviceHandle, axis: int
                                                               ) -> None:
    """(0, 0, 3) reduced over an empty axis leaves an empty result, so there is nothing to
    refuse: OpenCL gave it, the NumPy backend raised NumPy's own ValueError."""
    x = Tensor.from_host(dev.queue, np.zeros((0, 0, 3), dtype=np.float32))
    for op, dtype in ((ops.max, "float32"), (ops.min, "float32"), (ops.argmax, "int64")):
        y = op(x, axis=axis, keepdims=True)
        assert (y.shape, y.dtype) == ((1, 0, 3) if axis == 0 else (0, 1, 3), dtype)
        assert op(x, axis=axis).shape == (0, 3)
    with pytest.raises(ValueError, match="max: cannot reduce an empty axis"):
        ops.max(Tensor.from_host(dev.queue, np.zeros((0, 3), dtype=np.float32)), axis=0)


def test_0d_tensors_through_permute_transpose_and_squeeze(dev: DeviceHandle) -> None:
    """permute(x, ()) was (1,) on NumPy (np.ascontiguousarray makes 0-d arrays 1-d);
    transpose(x, 0, -1) and squeeze(x, 0) raised 'list/tuple index out of range' though
    axis 0 and -1 are valid for a 0-d tensor (as in PyTorch)."""
    x = Tensor.from_host(dev.queue, np.array(7, dtype=np.int32))
    for y in (ops.permute(x, ()), ops.transpose(x, 0, -1), ops.transpose(x, -1, -1),
              ops.squeeze(x, 0), ops.squeeze(x, -1), ops.squeeze(x)):
        assert (y.shape, y.to_host().tolist()) == ((), 7)
    with pytest.raises(IndexError, match="transpose: axis -2 is out of range for a 0-d"):
        ops.transpose(x)
    with pytest.raises(IndexError, match="squeeze: axis 1 is out of range"):
        ops.squeeze(x, 1)


def test_errors_name_the_op_called() -> None:
    """slice's errors named getitem, full's and pad's named fill, zeros' and ones' full."""
    from netcl.core.device import manager

    handle = manager.default("cpu")
    assert handle is not None
    x = Tensor.from_host(handle.queue, np.zeros(4, dtype=np.int32))
    with pytest.raises(ValueError, match=r"^slice: slice step must not be 0"):
        ops.slice(x, [0], [2], [0])
    with pytest.raises(TypeError, match=r"^pad: float value 0\.5 for an integer tensor"):
        ops.pad(x, (1, 1), 0.5)
    with pytest.raises(TypeError, match=r"^full: float value 1\.5 for an integer tensor"):
        ops.full(handle.queue, (2,), 1.5, "int32")
    with pytest.raises(ValueError, match=r"^full: scalar 300 is out of range for uint8"):
        ops.full(handle.queue, (2,), 300, "uint8")
    with pytest.raises(ValueError, match=r"^zeros: shape entries must be >= 0"):
        ops.zeros(handle.queue, (2, -1))
    with pytest.raises(ValueError, match=r"^ones: unsupported dtype"):
        ops.ones(handle.queue, 2, "complex64")


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8"])
def test_pad_pads_integer_tensors_by_default(dev: DeviceHandle, dtype: str) -> None:
    """The default value was the float 0.0, which fill refuses for an integer tensor."""
    x = Tensor.from_host(dev.queue, np.array([[1, 2]], dtype=dtype))
    y = ops.pad(x, (1, 0, 0, 1))
    assert y.dtype == dtype
    np.testing.assert_array_equal(y.to_host(), [[0, 1, 2], [0, 0, 0]])


def test_gathers_take_axis_0_of_a_0d_tensor(dev: DeviceHandle) -> None:
    """Were 'tuple index out of range': index_select of a 0-d tensor is 1-d and gather with a
    0-d index is 0-d, as in PyTorch."""
    x = Tensor.from_host(dev.queue, np.array(5.0, dtype=np.float32))
    y = ops.gather(x, 0, Tensor.from_host(dev.queue, np.array(0)))
    assert (y.shape, y.to_host().tolist()) == ((), 5.0)
    y = ops.index_select(x, -1, Tensor.from_host(dev.queue, np.array([0, 0], dtype=np.int32)))
    assert (y.shape, y.to_host().tolist()) == ((2,), [5.0, 5.0])


def test_embedding_errors_name_embedding() -> None:
    """Its out-of-range error named index_select, which it calls."""
    from netcl.core.device import manager

    handle = manager.default("cpu")
    assert handle is not None
    w = Tensor.from_host(handle.queue, np.zeros((3, 2)))
    with pytest.raises(IndexError, match=r"^embedding: index 3 is out of range for axis 0"):
        ops.embedding(Tensor.from_host(handle.queue, np.array([1, 3])), w)


def test_norms_refuse_a_weight_or_a_bias_given_alone(dev: DeviceHandle) -> None:
    """Was silently ignored on every backend (the kernels apply weight and bias together)."""
    x = Tensor.from_host(dev.queue, np.array([[1.0, 3.0], [3.0, 5.0]]))
    two = Tensor.from_host(dev.queue, np.array([2.0, 2.0]))
    with pytest.raises(ValueError, match=r"^batch_norm: weight and bias are applied together; "
                                         r"got a bias and no weight"):
        ops.batch_norm(x, None, None, None, two)
    with pytest.raises(ValueError, match=r"^layer_norm: weight and bias are applied together; "
                                         r"got a weight and no bias"):
        ops.layer_norm(x, 2, two, None)


@pytest.mark.parametrize("variant", [None, "CONV2D_NAIVE", "CONV2D_IM2COL", "CONV2D_IMPLICIT_GEMM",
                                     "CONV2D_TILED_LOCAL", "CONV2D_WINOGRAD"])
def test_conv2d_reads_views_with_an_element_offset(dev: DeviceHandle, variant: str | None
                                                   ) -> None:
    """On OpenCL the naive and tiled kernels refused any offset view ('conv2d_naive: Tensor
    argument has element offset 3'), Winograd an offset weight or bias, every GEMM path an
    offset bias ('conv2d: bias with an element offset is not supported')."""
    from netcl.core.kernel_selector import KernelVariant, force_variant
    from netcl.ops.testing import offset_view

    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 4, 6, 6)), rng.standard_normal((4, 4, 3, 3)), \
        rng.standard_normal(4)
    def tensor(a: np.ndarray[Any, Any], offset: int) -> Tensor:
        if offset:
            return offset_view(dev, a, offset, "float32")
        return Tensor.from_host(dev.queue, a, dtype="float32")

    want = ops.conv2d(tensor(x, 0), tensor(w, 0), tensor(b, 0)).to_host()
    forced = [] if variant is None or dev.backend == "cpu" else [KernelVariant[variant]]
    with force_variant(*forced):
        for ox, ow, ob in ((3, 0, 0), (0, 5, 0), (0, 0, 1), (7, 2, 3)):
            got = ops.conv2d(tensor(x, ox), tensor(w, ow), tensor(b, ob))
            assert_close(got.to_host(), want, "float32", scale=0.1)


def test_max_pool2d_window_of_padding_only(dev: DeviceHandle) -> None:
    """A window that dilation makes step over the whole input (1x1 input, kernel 2, padding
    1, dilation 2) holds padding only: -inf on every backend, but then one index (and one
    gradient) everywhere, and no crash."""
    from netcl.core.device import manager

    numpy_backend = manager.default("cpu")
    assert numpy_backend is not None
    results = []
    for handle in (dev, numpy_backend):
        x = Tensor.from_host(handle.queue, np.full((1, 1, 1, 1), 0.5, dtype=np.float32))
        y, idx = ops.max_pool2d(x, 2, None, 1, 2, return_indices=True)
        g = Tensor.from_host(handle.queue, np.ones((1, 1, 1, 1), dtype=np.float32))
        dx = ops.max_pool2d_backward(g, idx, (1, 1, 1, 1), 2, None, 1, 2)
        results.append((y.to_host().tolist(), idx.to_host().tolist(), dx.to_host().tolist()))
    assert results[0][0] == [[[[-np.inf]]]]
    assert results[0][1] == [[[[-1]]]]  # was -2 on NumPy, whose backward then raised
    assert results[0][2] == [[[[0.0]]]]
    assert results[0] == results[1]


def _huge_results(dev: DeviceHandle) -> dict[str, Any]:
    """Ops asked for results of 2**62 elements or more (no device or NumPy array holds them)."""
    q = dev.queue
    x = Tensor.from_host(q, np.ones((2, 1), dtype=np.float32))
    labels = Tensor.from_host(q, np.array([1, 2]))
    return {"zeros": lambda: ops.zeros(q, (2**62,)),
            "arange": lambda: ops.arange(q, 0, 2**62),
            "broadcast_to": lambda: ops.broadcast_to(x, (2, 2**61)),
            "one_hot": lambda: ops.one_hot(labels, 2**61),
            "uniform": lambda: ops.uniform(q, (2**31, 2**31), seed=1)}


def test_huge_results_raise_memory_error(dev: DeviceHandle,
                                         request: pytest.FixtureRequest) -> None:
    _xfail_on(request, dev, ("cpu",), "on the NumPy backend arange, broadcast_to, one_hot and "
              "the random ops build the result with NumPy itself, which raises its own "
              "ValueError 'array is too big; arr.size * arr.dtype.itemsize is larger than the "
              "maximum possible size.' instead of the MemoryError Tensor allocation gives "
              "(ops/_creation.py, _movement.py, _random.py)")
    for run in _huge_results(dev).values():
        with pytest.raises(MemoryError, match="cannot allocate"):
            run()


@pytest.mark.xfail(strict=True, reason="the MemoryError of a result too big to allocate names "
                   "the size and the device's limits but not the op ('cannot allocate 16 EiB "
                   "for a tensor of shape (4611686018427387904,) ...'): ops allocate through "
                   "ops/_common.empty, which does not pass the op's name to Tensor.from_shape")
def test_memory_errors_name_the_op(dev: DeviceHandle) -> None:
    for name, run in _huge_results(dev).items():
        with pytest.raises(MemoryError, match=f"^{name}: "):
            run()


def test_gelu_tanh_of_minus_inf(dev: DeviceHandle) -> None:
    """PoCL's float32 tanh stops at -0.99999994 (within OpenCL's 5 ulp), so 1 + tanh(u) was
    not 0 at u = -inf and gelu(-inf, approximate='tanh') was -inf there, NaN (-inf * 0) on
    NumPy and Intel's runtime; gelu_tanh(-20) was -6e-7, not -0. The C expression saturates
    its tanh from |u| >= 20 now: every backend agrees."""
    x = Tensor.from_host(dev.queue, np.array([-np.inf, np.inf, -20.0], dtype=np.float32))
    y = ops.gelu(x, approximate="tanh").to_host()
    assert np.isnan(y[0]) and y[1] == np.inf and y[2] == 0.0
