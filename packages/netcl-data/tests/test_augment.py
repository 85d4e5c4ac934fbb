"""CPU augmentation: each transform against a per-image reference, reproducibility, errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from netcl.data import augment

Array = npt.NDArray[Any]


def batch(dtype: type = np.uint8, shape: tuple[int, int, int, int] = (7, 3, 9, 11)) -> Array:
    rng = np.random.default_rng(42)
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    return x if dtype == np.uint8 else (x / 255.0).astype(dtype)


DTYPES = [np.uint8, np.float32]

# -- per-image references (loops on purpose: they are the plain statement of each rule) ---------


def ref_crop(x: Array, offsets: Array, size: tuple[int, int], pad: int, fill: float) -> Array:
    out = []
    for img, (top, left) in zip(x, offsets, strict=True):
        padded = np.full(
            (img.shape[0], img.shape[1] + 2 * pad, img.shape[2] + 2 * pad), fill, dtype=img.dtype
        )
        padded[:, pad : pad + img.shape[1], pad : pad + img.shape[2]] = img
        out.append(padded[:, top : top + size[0], left : left + size[1]])
    return np.stack(out)


def ref_erase(x: Array, boxes: Array, value: float) -> Array:
    out: Array = x.copy()
    for img, (top, left, h, w) in zip(out, boxes, strict=True):
        img[:, top : top + h, left : left + w] = value
    return out


def ref_jitter(x: Array, factors: Array) -> Array:
    out = []
    weights = augment.gray_weights(x.shape[1]).astype(np.float64)
    for img, (fb, fc, fs) in zip(
        x.astype(np.float64) * augment.unit_scale(x.dtype), factors, strict=True
    ):
        y = np.clip(img * fb, 0, 1)
        mean = np.tensordot(weights, y, axes=1).mean()
        y = np.clip((y - mean) * fc + mean, 0, 1)
        gray = np.tensordot(weights, y, axes=1)
        out.append(np.clip((y - gray) * fs + gray, 0, 1))
    return np.stack(out)


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_crop_matches_reference(dtype: type) -> None:
    x = batch(dtype)
    fill = 5 if dtype == np.uint8 else 0.25
    crop = augment.RandomCrop((8, 10), padding=3, fill=fill)
    params = crop.draw(np.random.default_rng(0), x.shape)
    assert params.offsets[:, 0].max() <= 9 + 6 - 8 and params.offsets.min() >= 0
    out = crop.apply(x, params)
    assert out.dtype == x.dtype and out.flags.c_contiguous
    np.testing.assert_array_equal(out, ref_crop(x, params.offsets, (8, 10), 3, fill))
    assert crop.output_shape(x.shape) == (7, 3, 8, 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_flip_matches_reference(dtype: type) -> None:
    x = batch(dtype)
    flip = augment.RandomHorizontalFlip(p=0.5)
    params = flip.draw(np.random.default_rng(3), x.shape)
    assert 0 < params.flags.sum() < len(x)
    out = flip.apply(x, params)
    for img, got, flag in zip(x, out, params.flags, strict=True):
        np.testing.assert_array_equal(got, img[:, :, ::-1] if flag else img)
    rng = np.random.default_rng(0)
    assert not augment.RandomHorizontalFlip(p=0.0).draw(rng, x.shape).flags.any()
    assert augment.RandomHorizontalFlip(p=1.0).draw(rng, x.shape).flags.all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_normalize_matches_reference(dtype: type) -> None:
    x = batch(dtype)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.3, 0.25)
    out = augment.Normalize(mean, std).apply(x)
    scale = 1 / 255 if dtype == np.uint8 else 1.0
    expected = (x * scale - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    custom = augment.Normalize(0.0, 1.0, scale=2.0).apply(x)
    np.testing.assert_allclose(custom, x.astype(np.float64) * 2.0, rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_erasing_matches_reference(dtype: type) -> None:
    x = batch(dtype, (50, 3, 16, 16))
    erase = augment.RandomErasing(p=0.7, value=3)
    params = erase.draw(np.random.default_rng(1), x.shape)
    boxes = params.boxes
    erased = boxes[:, 2] > 0
    assert 20 < erased.sum() < 50  # about p of the images
    h, w = boxes[erased, 2], boxes[erased, 3]
    area = h * w / 256
    assert (h < 16).all() and (w < 16).all() and (area > 0.01).all() and (area < 0.4).all()
    assert (boxes[erased, 0] + h <= 16).all() and (boxes[erased, 1] + w <= 16).all()
    out = erase.apply(x, params)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(out, ref_erase(x, boxes, 3))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_color_jitter_matches_reference(dtype: type, channels: int) -> None:
    x = batch(dtype, (6, channels, 8, 8))
    jitter = augment.ColorJitter(brightness=0.6, contrast=0.6, saturation=0.6)
    params = jitter.draw(np.random.default_rng(2), x.shape)
    assert params.factors.min() >= 0.4 and params.factors.max() <= 1.6
    out = jitter.apply(x, params)
    assert out.dtype == np.float32 and out.min() >= 0 and out.max() <= 1
    np.testing.assert_allclose(out, ref_jitter(x, params.factors), atol=1e-5)
    still = augment.ColorJitter()
    identity = still.apply(x, still.draw(np.random.default_rng(), x.shape))
    np.testing.assert_allclose(identity, x * augment.unit_scale(x.dtype), atol=1e-6)


def test_compose_draws_in_order_and_reproduces() -> None:
    x = batch()
    crop, flip = augment.RandomCrop(6, padding=1), augment.RandomHorizontalFlip()
    pipeline = augment.Compose([crop, flip, augment.Normalize(0.5, 0.5)])
    params = pipeline.draw(np.random.default_rng(9), x.shape)
    rng = np.random.default_rng(9)
    by_hand = (crop.draw(rng, x.shape), flip.draw(rng, (7, 3, 6, 6)), None)
    np.testing.assert_array_equal(params[0].offsets, by_hand[0].offsets)
    np.testing.assert_array_equal(params[1].flags, by_hand[1].flags)
    a = pipeline(x, np.random.default_rng(9))
    b = pipeline(x, np.random.default_rng(9))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, pipeline.apply(x, params))
    assert not np.array_equal(a, pipeline(x, np.random.default_rng(10)))
    assert a.shape == pipeline.output_shape(x.shape) == (7, 3, 6, 6)


def test_input_is_never_modified() -> None:
    x = batch()
    before = x.copy()
    pipeline = augment.Compose([augment.RandomHorizontalFlip(1.0), augment.RandomErasing(1.0)])
    pipeline(x, np.random.default_rng(0))
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: augment.RandomCrop(4)(np.zeros((3, 8, 8)), np.random.default_rng()),
            ValueError,
            r"random_crop: expected a batch of shape \(N, C, H, W\), got shape \(3, 8, 8\)",
        ),
        (
            lambda: augment.RandomCrop(4)([1, 2], np.random.default_rng()),  # type: ignore[arg-type]
            TypeError,
            r"random_crop: expected a numpy batch .* got list",
        ),
        (
            lambda: augment.RandomCrop(12, padding=1)(
                np.zeros((1, 1, 8, 8)), np.random.default_rng()
            ),
            ValueError,
            r"crop \(12, 12\) must fit in the padded image \(10, 10\)",
        ),
        (
            lambda: augment.RandomCrop(4, fill=300)(
                np.zeros((1, 1, 8, 8), np.uint8), np.random.default_rng()
            ),
            ValueError,
            r"fill must be an integer in \[0, 255\] for uint8 images, got 300",
        ),
        (lambda: augment.RandomCrop(0), ValueError, r"size must be a positive int"),
        (lambda: augment.RandomCrop(4, padding=-1), ValueError, r"padding must be an int >= 0"),
        (lambda: augment.RandomHorizontalFlip(1.5), ValueError, r"p must be in \[0, 1\], got 1.5"),
        (
            lambda: augment.RandomHorizontalFlip().apply(
                np.zeros((2, 1, 2, 2)), augment.FlipParams(np.zeros(3, bool))
            ),
            ValueError,
            r"flags must have shape \(2,\) for this batch, got \(3,\)",
        ),
        (
            lambda: augment.RandomCrop(2).apply(
                np.zeros((1, 1, 4, 4)), augment.CropParams(np.array([[3, 0]]))
            ),
            ValueError,
            r"offsets must lie in \[0, 3\) x \[0, 3\)",
        ),
        (
            lambda: augment.Normalize((0.5, 0.5), 1.0).apply(np.zeros((1, 3, 2, 2))),
            ValueError,
            r"mean needs one value or one per channel \(3\), got 2",
        ),
        (lambda: augment.Normalize(0.5, 0.0), ValueError, r"std must be > 0, got \[0.0\]"),
        (lambda: augment.ColorJitter(brightness=-1), ValueError, r"must be >= 0, got \(-1"),
        (lambda: augment.RandomErasing(scale=(0.5, 0.1)), ValueError, r"scale must satisfy"),
        (
            lambda: augment.RandomErasing(value=0.5).apply(
                np.zeros((1, 1, 2, 2), np.uint8), augment.EraseParams(np.zeros((1, 4), np.int64))
            ),
            ValueError,
            r"value must be an integer in \[0, 255\] for uint8 images, got 0.5",
        ),
        (
            lambda: augment.Compose([augment.RandomCrop(2), "flip"]),  # type: ignore[list-item]
            TypeError,
            r"transform 1 \(str\) needs draw, apply and output_shape",
        ),
        (
            lambda: augment.Compose([augment.RandomCrop(2)]).apply(np.zeros((1, 1, 4, 4)), ()),
            ValueError,
            r"needs one params entry per transform \(1\), got 0",
        ),
        (
            lambda: augment.RandomCrop(2)(
                np.zeros((1, 1, 4, 4), np.complex64), np.random.default_rng()
            ),
            TypeError,
            r"integer or floating batch, got dtype complex64",
        ),
    ],
)
def test_bad_input_raises_typed_errors(call: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()
