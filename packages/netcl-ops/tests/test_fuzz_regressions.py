"""Minimal cases of the bugs the ops fuzz suite (``test_fuzz*.py``) found, on every backend.

Each test is the smallest example Hypothesis shrank a failure to. A test marked ``xfail`` is a
bug not fixed yet (its reason says what is wrong); the fuzz suite leaves that case out until the
test passes (its ``KNOWN:`` comments name the test), and ``strict`` turns the fix into a
failure here so that the mark and the exclusion are removed together.
"""

from __future__ import annotations

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor


def _xfail_on(request: pytest.FixtureRequest, dev: DeviceHandle, backends: tuple[str, ...],
              reason: str) -> None:
    """Mark this run strict-xfail where ``dev``'s backend is one of ``backends``."""
    if dev.backend in backends:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


def test_gelu_of_a_0d_tensor(dev: DeviceHandle, request: pytest.FixtureRequest) -> None:
    _xfail_on(request, dev, ("cpu",), "gelu on the NumPy backend: _erf assigns into np.sign(x), "
              "a NumPy scalar for 0-d x: TypeError 'numpy.float32' object does not support "
              "item assignment (ops/_elementwise.py)")
    x = Tensor.from_host(dev.queue, np.array(0.5, dtype=np.float32))
    y = ops.gelu(x)
    assert y.shape == ()
    np.testing.assert_allclose(y.to_host(), 0.345731, rtol=1e-5)


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
