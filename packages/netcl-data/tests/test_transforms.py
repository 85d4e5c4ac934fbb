"""Per-sample transforms: torchvision's formulas (ToTensor, ConvertImageDtype, Normalize,
RandomCrop with every padding mode, RandomHorizontalFlip), odd sizes, typed errors, and the
same batches for every worker count when a dataset applies them inside a DataLoader."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import numpy as np
import pytest

from netcl.data import ArrayDataset, DataLoader
from netcl.data import transforms as T

needs_fork = pytest.mark.skipif("fork" not in mp.get_all_start_methods(),
                                reason="the fork start method is not available")


def _image(c: int = 3, h: int = 7, w: int = 9, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).integers(0, 256, (c, h, w), dtype=np.uint8)


def test_to_tensor_and_convert_dtype_follow_torchvision() -> None:
    hwc = _image().transpose(1, 2, 0)
    out = T.ToTensor()(hwc)
    assert out.shape == (3, 7, 9) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_array_equal(out, hwc.transpose(2, 0, 1).astype(np.float32) / 255)
    grey = T.ToTensor()(hwc[:, :, 0])
    assert grey.shape == (1, 7, 9)
    floats = T.ToTensor()(hwc.astype(np.float64))  # floats keep their values
    np.testing.assert_array_equal(floats, hwc.transpose(2, 0, 1))
    conv = T.ConvertImageDtype()(_image())
    np.testing.assert_allclose(conv, _image() / np.float32(255), rtol=1e-7)
    with pytest.raises(ValueError, match=r"expects an \(H, W\) or \(H, W, C\) image"):
        T.ToTensor()(np.zeros((1, 2, 3, 4)))
    with pytest.raises(TypeError, match="only float targets"):
        T.ConvertImageDtype(np.int32)


def test_normalize_per_channel() -> None:
    x = T.ConvertImageDtype()(_image())
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    want = (x - np.array(mean, np.float32)[:, None, None]) / np.array(std, np.float32)[:, None,
                                                                                        None]
    np.testing.assert_allclose(T.Normalize(mean, std)(x), want, rtol=1e-6)
    with pytest.raises(ValueError, match="2 means for 3 channels"):
        T.Normalize((0.5, 0.5), (1.0, 1.0))(x)
    with pytest.raises(ValueError, match="std != 0"):
        T.Normalize((0.5,), (0.0,))
    with pytest.raises(TypeError, match="expects a float image"):
        T.Normalize((0.5,), (1.0,))(_image())
    with pytest.raises(TypeError, match=r"expects a \(C, H, W\) NumPy array, got list"):
        T.Normalize((0.5,), (1.0,))([1.0])


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize(("padding", "sides"), [(2, (2, 2, 2, 2)), ((1, 3), (1, 3, 1, 3)),
                                                ((1, 0, 2, 3), (1, 0, 2, 3))])
def test_random_crop_is_a_window_of_the_padded_image(mode: str, padding: Any,
                                                     sides: tuple[int, int, int, int]) -> None:
    x = _image()
    left, top, right, bottom = sides
    widths = ((0, 0), (top, bottom), (left, right))
    padded = (np.pad(x, widths, constant_values=7) if mode == "constant"
              else np.pad(x, widths, mode=mode))  # type: ignore[call-overload]
    crop = T.RandomCrop((5, 8), padding=padding, fill=7, padding_mode=mode)
    T.manual_seed(3)
    seen = set()
    for _ in range(40):
        out = crop(x)
        assert out.shape == (3, 5, 8)
        hits = [(i, j) for i in range(padded.shape[1] - 4) for j in range(padded.shape[2] - 7)
                if np.array_equal(padded[:, i:i + 5, j:j + 8], out)]
        assert hits, "the crop is no window of the padded image"
        seen.add(hits[0])
    assert len(seen) > 3  # the offsets vary


def test_random_crop_pad_if_needed_and_errors() -> None:
    small = _image(1, 3, 4)
    out = T.RandomCrop(5, pad_if_needed=True)(small)
    assert out.shape == (1, 5, 5)
    with pytest.raises(ValueError, match=r"crop size \(5, 5\) is larger than the"):
        T.RandomCrop(5)(small)
    with pytest.raises(ValueError, match="size must be a positive int"):
        T.RandomCrop(0)
    with pytest.raises(ValueError, match="padding must be an int or 2 or 4 ints"):
        T.RandomCrop(3, padding=(1, 2, 3))
    with pytest.raises(ValueError, match="padding_mode must be"):
        T.RandomCrop(3, padding_mode="wrap")


def test_horizontal_flip_probability() -> None:
    x = _image()
    np.testing.assert_array_equal(T.RandomHorizontalFlip(1.0)(x), x[:, :, ::-1])
    assert T.RandomHorizontalFlip(0.0)(x) is x
    T.manual_seed(0)
    flips = sum(not np.array_equal(T.RandomHorizontalFlip(0.3)(x), x) for _ in range(2000))
    assert 0.25 < flips / 2000 < 0.35
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        T.RandomHorizontalFlip(1.5)


def test_manual_seed_repeats_draws_outside_a_loader() -> None:
    pipe = T.Compose([T.RandomCrop(5, padding=2), T.RandomHorizontalFlip()])
    T.manual_seed(9)
    a = [pipe(_image()) for _ in range(5)]
    T.manual_seed(9)
    b = [pipe(_image()) for _ in range(5)]
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert "RandomCrop(size=(5, 5)" in repr(pipe)
    with pytest.raises(TypeError, match="transform 1 is not callable"):
        T.Compose([pipe, 3])  # type: ignore[list-item]


PIPE = T.Compose([T.ConvertImageDtype(), T.RandomCrop(6, padding=1), T.RandomHorizontalFlip(),
                  T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))])


def _target_plus_100(y: Any) -> Any:
    return y + 100


def _dataset(n: int = 29) -> ArrayDataset:
    images = np.random.default_rng(1).integers(0, 256, (n, 3, 6, 6), dtype=np.uint8)
    return ArrayDataset(images, np.arange(n), transform=PIPE, target_transform=_target_plus_100)


@needs_fork
def test_dataset_transforms_in_a_loader_are_the_same_for_every_worker_count() -> None:
    runs = []
    for workers in (0, 1, 3):
        loader = DataLoader(_dataset(), batch_size=4, shuffle=True, generator=5,
                            num_workers=workers, multiprocessing_context="fork", timeout=30)
        runs.append([[(x.copy(), y.copy()) for x, y in loader] for _ in range(2)])
    for other in runs[1:]:
        for epoch_a, epoch_b in zip(runs[0], other):
            for (xa, ya), (xb, yb) in zip(epoch_a, epoch_b, strict=True):
                np.testing.assert_array_equal(xa, xb)
                np.testing.assert_array_equal(ya, yb)
    first, second = runs[0]
    assert first[0][0].dtype == np.float32 and first[0][0].shape == (4, 3, 6, 6)
    assert sorted(np.concatenate([y for _, y in first]).tolist()) == list(range(100, 129))
    assert not all(np.array_equal(a[0], b[0]) for a, b in zip(first, second))  # per epoch


def test_dataset_transform_arguments() -> None:
    ds = _dataset(5)
    x, y = ds[2]
    assert x.shape == (3, 6, 6) and y == 102
    bx, by = ds.get_batch(np.array([0, 4]))
    assert bx.shape == (2, 3, 6, 6) and by.tolist() == [100, 104]
    with pytest.raises(TypeError, match="transform must be callable or None, got int"):
        ArrayDataset(np.zeros((2, 1)), transform=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="target_transform needs a second"):
        ArrayDataset(np.zeros((2, 1)), target_transform=_target_plus_100)
