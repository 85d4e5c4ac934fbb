"""Datasets: arrays, digits, image folders, subsets and random_split; collation."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from netcl.data import (
    ArrayDataset,
    DataLoader,
    Dataset,
    DigitsDataset,
    ImageFolder,
    Subset,
    default_collate,
    random_split,
)

# -- ArrayDataset -------------------------------------------------------------------------------


def test_array_dataset_items_and_batches() -> None:
    x = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    y = np.arange(6) * 10
    ds = ArrayDataset(x, y)
    assert isinstance(ds, Dataset)
    assert len(ds) == 6
    xi, yi = ds[-1]
    np.testing.assert_array_equal(xi, x[5])
    assert yi == 50
    xb, yb = ds.get_batch(np.array([4, 1]))
    np.testing.assert_array_equal(xb, x[[4, 1]])
    assert yb.tolist() == [40, 10]


def test_array_dataset_errors() -> None:
    with pytest.raises(ValueError, match=r"same length along axis 0, got lengths \[3, 4\]"):
        ArrayDataset(np.zeros(3), np.zeros(4))
    with pytest.raises(TypeError, match=r"argument 1 is list"):
        ArrayDataset(np.zeros(3), [1, 2, 3])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs at least one array"):
        ArrayDataset()
    ds = ArrayDataset(np.zeros(3))
    with pytest.raises(IndexError, match=r"index 3 is out of range for 3 items"):
        ds[3]
    with pytest.raises(IndexError, match=r"index 7 is out of range for 3 items"):
        ds.get_batch([0, 7])
    with pytest.raises(TypeError, match="index must be an integer, got str"):
        ds["0"]  # type: ignore[index]


# -- Subset and random_split --------------------------------------------------------------------


def test_subset_indexes_through() -> None:
    ds = ArrayDataset(np.arange(10) * 2)
    sub = Subset(ds, [9, 0, 3])
    assert len(sub) == 3
    assert int(sub[0][0]) == 18
    (batch,) = sub.get_batch(np.array([2, 1]))
    assert batch.tolist() == [6, 0]
    with pytest.raises(IndexError, match="Subset: index 10 is out of range for 10 items"):
        Subset(ds, [10])


def test_random_split_fractions_and_lengths() -> None:
    ds = ArrayDataset(np.arange(11))
    parts = random_split(ds, [0.5, 0.3, 0.2], seed=4)
    assert [len(p) for p in parts] == [6, 3, 2]  # floor 5, 3, 2 and the one left to the first
    everything = np.concatenate([p.indices for p in parts])
    assert sorted(everything.tolist()) == list(range(11))
    again = random_split(ds, [0.5, 0.3, 0.2], seed=4)
    assert all(np.array_equal(a.indices, b.indices) for a, b in zip(parts, again, strict=True))
    other = random_split(ds, [0.5, 0.3, 0.2], seed=5)
    assert not np.array_equal(parts[0].indices, other[0].indices)
    assert [len(p) for p in random_split(ds, [7, 4])] == [7, 4]


@pytest.mark.parametrize(
    ("lengths", "error", "match"),
    [
        ([5, 5], ValueError, r"must sum to the dataset length 11, got \[5, 5\] \(sum 10\)"),
        ([0.5, 0.6], ValueError, r"fractions must sum to 1"),
        ([-1, 12], ValueError, r"must be >= 0"),
        ([5, 0.5], TypeError, r"all integers or all fractions"),
        (["a"], TypeError, r"integers or fractions"),
        ([], ValueError, r"must not be empty"),
    ],
)
def test_random_split_errors(lengths: list[object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        random_split(ArrayDataset(np.arange(11)), lengths, seed=0)  # type: ignore[arg-type]


def test_split_subsets_feed_a_loader() -> None:
    train, _ = random_split(ArrayDataset(np.arange(20), np.arange(20)), [15, 5], seed=1)
    labels = np.concatenate([y for _, y in DataLoader(train, 4, num_workers=1, timeout=30)])
    assert sorted(labels.tolist()) == sorted(train.indices.tolist())


# -- collation ----------------------------------------------------------------------------------


def test_default_collate_structures() -> None:
    items = [{"a": (np.int64(1), 2.0), "b": "x"}, {"a": (np.int64(3), 4.0), "b": "y"}]
    batch = default_collate(items)
    (ints, floats) = batch["a"]
    assert ints.tolist() == [1, 3] and ints.dtype == np.int64
    assert floats.dtype == np.float32
    assert batch["b"] == ["x", "y"]
    assert default_collate([True, False]).dtype == np.bool_


@pytest.mark.parametrize(
    ("items", "error", "match"),
    [
        ([], ValueError, "at least one item, got 0 items"),
        ([(1, 2), (1,)], ValueError, "same number of fields, item 0 has 2 and item 1 has 1"),
        ([{"a": 1}, {"b": 1}], ValueError, r"same keys, item 0 has \['a'\] and item 1 has \['b'\]"),
        ([np.zeros(2, np.float32), np.zeros(2)], TypeError, "item 0 has dtype float32 and item 1"),
        ([1, "a"], TypeError, "item 0 is int and item 1 is str"),
        ([object()], TypeError, "cannot collate item of type object"),
    ],
)
def test_default_collate_errors(items: list[object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        default_collate(items)


# -- digits (scikit-learn) ----------------------------------------------------------------------


def test_digits_dataset() -> None:
    pytest.importorskip("sklearn")
    ds = DigitsDataset()
    assert len(ds) == 1797
    assert ds.images.shape == (1797, 1, 8, 8) and ds.images.dtype == np.float32
    assert ds.labels.dtype == np.int64 and set(ds.labels.tolist()) == set(range(10))
    assert ds.images.min() == 0.0 and ds.images.max() == 1.0
    x, y = next(iter(DataLoader(ds, 32)))
    assert x.shape == (32, 1, 8, 8) and y.shape == (32,)


def test_digits_without_sklearn_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match=r"pip install 'netcl-data\[digits\]'"):
        DigitsDataset()


# -- image folder (Pillow) ----------------------------------------------------------------------


def _write_images(root: Path) -> None:
    image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    for name, count in (("cat", 3), ("dog", 2)):
        (root / name).mkdir(parents=True)
        for k in range(count):
            pixels = rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)
            suffix = ".jpg" if k == 1 else ".png"
            image.fromarray(pixels).save(root / name / f"{k}{suffix}")
    (root / "dog" / "notes.txt").write_text("not an image")
    big = rng.integers(0, 256, (9, 7, 3), dtype=np.uint8)
    image.fromarray(big).save(root / "dog" / "big.png")


def test_image_folder(tmp_path: Path) -> None:
    _write_images(tmp_path)
    ds = ImageFolder(tmp_path)
    assert ds.classes == ["cat", "dog"]
    assert len(ds) == 6
    assert [label for _, label in ds.samples] == [0, 0, 0, 1, 1, 1]
    image, label = ds[0]
    assert image.shape == (3, 6, 5) and image.dtype == np.uint8 and label == 0
    gray = ImageFolder(tmp_path, mode="L", size=(4, 4))
    assert gray[5][0].shape == (1, 4, 4)
    resized = ImageFolder(tmp_path, size=(8, 8))
    x, y = next(iter(DataLoader(resized, 6, num_workers=1, timeout=30)))
    assert x.shape == (6, 3, 8, 8) and y.tolist() == [0, 0, 0, 1, 1, 1]


def test_image_folder_of_mixed_sizes_cannot_batch(tmp_path: Path) -> None:
    _write_images(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"default_collate: items must share one shape.*"
        r"\(3, 6, 5\).*\(3, 9, 7\)",
    ):
        list(DataLoader(ImageFolder(tmp_path), 6))


def test_image_folder_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("PIL")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        ImageFolder(tmp_path / "missing")
    with pytest.raises(ValueError, match="no class sub-folder"):
        ImageFolder(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no image with a suffix"):
        ImageFolder(tmp_path)
    with pytest.raises(ValueError, match="mode must be 'RGB' or 'L', got 'CMYK'"):
        ImageFolder(tmp_path, mode="CMYK")
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match=r"pip install 'netcl-data\[images\]'"):
        ImageFolder(tmp_path)
