"""augment_gpu.apply takes netcl Tensors (the issue's ``x must be a pyopencl.array.Array, got
Tensor``): on every netcl device the result is a Tensor equal to the CPU pipeline for the same
draws, computed from the tensor's buffer (views with an offset too). Skipped where netcl-core
is not installed (netcl-data's own env)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.data import augment

pytest.importorskip("pyopencl")
augment_gpu = pytest.importorskip("netcl.data.augment_gpu")
core = pytest.importorskip("netcl.core", reason="netcl-core is not installed in this env")
testing = pytest.importorskip("netcl.core.testing")

PIPELINE = augment.Compose([
    augment.RandomCrop(11, padding=2),
    augment.RandomHorizontalFlip(),
    augment.RandomErasing(p=0.7),
    augment.Normalize((0.5, 0.4, 0.3), (0.2, 0.3, 0.25)),
])


@pytest.fixture(params=testing.available_devices(), ids=testing.device_id)
def netcl_dev(request: pytest.FixtureRequest) -> Any:
    return request.param


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_tensor_in_tensor_out_equals_cpu(netcl_dev: Any, dtype: type) -> None:
    x: np.ndarray[Any, Any] = np.random.default_rng(3).integers(0, 256, (5, 3, 13, 11)).astype(
        dtype)
    params = PIPELINE.draw(np.random.default_rng(4), x.shape)
    t = core.Tensor.from_host(netcl_dev.queue, x)
    out = augment_gpu.apply(None, PIPELINE, t, params)
    assert isinstance(out, core.Tensor) and out.shape == (5, 3, 11, 11)
    assert out.dtype == "float32"
    np.testing.assert_allclose(out.to_host(), PIPELINE.apply(x, params), rtol=1e-6, atol=1e-6)
    flip = augment.RandomHorizontalFlip()  # one stage, dtype kept
    fp = flip.draw(np.random.default_rng(5), x.shape)
    same = augment_gpu.apply(netcl_dev.queue, flip, t, fp)
    assert same.dtype == np.dtype(dtype).name
    np.testing.assert_array_equal(same.to_host(), flip.apply(x, fp))


def test_tensor_view_with_an_offset(netcl_dev: Any) -> None:
    if netcl_dev.backend != "cl":
        pytest.skip("offsets are an OpenCL buffer matter")
    x = np.random.default_rng(6).random((4, 3, 9, 9)).astype(np.float32)
    t = core.Tensor.from_host(netcl_dev.queue, x)
    second = t[2:]  # rows 2 and 3: a view into the same buffer
    crop = augment.RandomCrop(7)
    params = crop.draw(np.random.default_rng(7), (2, 3, 9, 9))
    out = augment_gpu.apply(None, crop, second, params)
    np.testing.assert_array_equal(out.to_host(), crop.apply(x[2:], params))


def test_bad_tensor_dtype_and_missing_queue(netcl_dev: Any) -> None:
    if netcl_dev.backend != "cl":
        pytest.skip("the NumPy backend runs the CPU transform")
    t = core.Tensor.from_host(netcl_dev.queue, np.zeros((1, 1, 2, 2), np.int32))
    with pytest.raises(TypeError, match="x must be uint8 or float32, got int32"):
        augment_gpu.apply(None, augment.RandomHorizontalFlip(), t, np.array([True]))
    with pytest.raises(TypeError, match="queue is None and x is not a netcl Tensor"):
        augment_gpu.apply(None, augment.RandomHorizontalFlip(), np.zeros((1, 1, 2, 2)), None)
