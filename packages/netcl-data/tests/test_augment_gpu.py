"""Device augmentation agrees with the CPU for the same draws, on every OpenCL device found."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from netcl.data import augment

cl = pytest.importorskip("pyopencl")
cl_array = pytest.importorskip("pyopencl.array")
augment_gpu = pytest.importorskip("netcl.data.augment_gpu")

Array = npt.NDArray[Any]

# How far the device may be from the CPU, per transform: the pointwise kernels round exactly
# as NumPy does; colour jitter sums its per-image mean in another order.
TOLERANCE: dict[type, float] = {
    augment.RandomCrop: 0.0,
    augment.RandomHorizontalFlip: 0.0,
    augment.RandomErasing: 0.0,
    augment.Normalize: 0.0,
    augment.ColorJitter: 1e-6,
    augment.Compose: 1e-5,
}


def batch(dtype: type, shape: tuple[int, int, int, int] = (5, 3, 13, 17)) -> Array:
    x = np.random.default_rng(7).integers(0, 256, shape, dtype=np.uint8)
    return x if dtype == np.uint8 else (x / 255.0).astype(np.float32)


def transforms(dtype: type) -> list[Any]:
    integer = dtype == np.uint8
    return [
        augment.RandomCrop((11, 16), padding=3, fill=9 if integer else 0.5),
        augment.RandomHorizontalFlip(),
        augment.RandomErasing(p=0.8, value=200 if integer else -1.0),
        augment.Normalize((0.5, 0.4, 0.3), (0.2, 0.3, 0.25)),
        augment.ColorJitter(0.5, 0.5, 0.5),
        augment.Compose(
            [
                augment.RandomCrop(13, padding=2),
                augment.RandomHorizontalFlip(),
                augment.RandomErasing(p=0.5),
                augment.ColorJitter(0.4, 0.4, 0.4),
                augment.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25)),
            ]
        ),
    ]


@pytest.mark.parametrize("dtype", [np.uint8, np.float32], ids=["uint8", "float32"])
@pytest.mark.parametrize(
    "index", range(6), ids=["crop", "flip", "erase", "normalize", "jitter", "compose"]
)
def test_device_matches_cpu(cl_queue: Any, dtype: type, index: int) -> None:
    transform = transforms(dtype)[index]
    x = batch(dtype)
    params = transform.draw(np.random.default_rng(index), x.shape)
    expected = transform.apply(x, params)
    got = augment_gpu.apply(cl_queue, transform, cl_array.to_device(cl_queue, x), params).get()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOLERANCE[type(transform)])


def test_channels_other_than_three_and_an_offset_input(cl_queue: Any) -> None:
    jitter = augment.ColorJitter(0.5, 0.5, 0.5)
    big = cl_array.to_device(cl_queue, batch(np.uint8, (6, 2, 8, 8)))
    x = big[1:]  # a view with a non-zero offset into its buffer
    params = jitter.draw(np.random.default_rng(0), x.shape)
    got = augment_gpu.apply(cl_queue, jitter, x, params).get()
    np.testing.assert_allclose(got, jitter.apply(x.get(), params), atol=1e-6)


def test_kernels_and_parameter_buffer_are_reused(cl_queue: Any) -> None:
    pipeline = transforms(np.uint8)[5]
    x = cl_array.to_device(cl_queue, batch(np.uint8))
    rng = np.random.default_rng(0)
    augment_gpu.apply(cl_queue, pipeline, x, pipeline.draw(rng, x.shape))
    kernels = augment_gpu._get_kernels(cl_queue.context, np.dtype(np.uint8))
    meta = augment_gpu._meta_buffer(cl_queue)
    device_buffer = meta.device
    augment_gpu.apply(cl_queue, pipeline, x, pipeline.draw(rng, x.shape))
    assert augment_gpu._get_kernels(cl_queue.context, np.dtype(np.uint8)) is kernels
    assert augment_gpu._meta_buffer(cl_queue).device is device_buffer  # no new allocation


def test_empty_batch(cl_queue: Any) -> None:
    crop = augment.RandomCrop(4, padding=1)
    x = cl_array.to_device(cl_queue, np.zeros((0, 3, 6, 6), np.uint8))
    out = augment_gpu.apply(cl_queue, crop, x, crop.draw(np.random.default_rng(), x.shape))
    assert out.shape == (0, 3, 4, 4)


def test_bad_input(cl_queue: Any) -> None:
    flip = augment.RandomHorizontalFlip()
    x = cl_array.to_device(cl_queue, batch(np.uint8))
    params = flip.draw(np.random.default_rng(), x.shape)
    with pytest.raises(TypeError, match=r"x must be a pyopencl.array.Array, got ndarray"):
        augment_gpu.apply(cl_queue, flip, x.get(), params)
    with pytest.raises(TypeError, match=r"x must be uint8 or float32, got int16"):
        augment_gpu.apply(cl_queue, flip, x.astype(np.int16), params)
    with pytest.raises(ValueError, match=r"x must be \(N, C, H, W\), got shape \(5, 3, 221\)"):
        augment_gpu.apply(cl_queue, flip, x.reshape(5, 3, 221), params)
    with pytest.raises(ValueError, match=r"flags must have shape \(4,\) for this batch"):
        augment_gpu.apply(cl_queue, flip, x[:4], params)
    with pytest.raises(TypeError, match=r"no device kernel for Blur; supported are"):
        augment_gpu.apply(cl_queue, Blur(), x, None)
    pipeline = augment.Compose([flip])
    with pytest.raises(ValueError, match=r"a Compose of 1 transforms needs a tuple of as many"):
        augment_gpu.apply(cl_queue, pipeline, x, params)
    assert augment_gpu.supported(pipeline) and not augment_gpu.supported(Blur())


def test_out_of_order_queue_is_refused(cl_queue: Any) -> None:
    props = cl.command_queue_properties.OUT_OF_ORDER_EXEC_MODE_ENABLE
    if not cl_queue.device.queue_properties & props:
        pytest.skip("the device has no out-of-order queues")
    queue = cl.CommandQueue(cl_queue.context, properties=props)
    flip = augment.RandomHorizontalFlip()
    x = cl_array.to_device(cl_queue, batch(np.uint8))
    with pytest.raises(ValueError, match="needs an in-order command queue"):
        augment_gpu.apply(queue, flip, x, flip.draw(np.random.default_rng(), x.shape))


class Blur:
    """A transform with the right methods but no kernel."""

    def draw(self, rng: np.random.Generator, shape: Any) -> None:
        return None

    def apply(self, x: Array, params: None) -> Array:
        return x

    def output_shape(self, shape: Any) -> Any:
        return shape

    def __call__(self, x: Array, rng: np.random.Generator) -> Array:
        return x
