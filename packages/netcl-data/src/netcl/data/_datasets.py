"""Datasets: arrays in memory, scikit-learn's digits, a folder of images, and subsets."""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ._collate import default_collate

IndexArray = npt.NDArray[np.int64]


@runtime_checkable
class Dataset(Protocol):
    """Anything with a length and integer indexing is a dataset.

    A dataset may also define ``get_batch(indices)`` returning an already collated batch; the
    :class:`~netcl.data.DataLoader` then uses it instead of indexing item by item (when no
    ``collate_fn`` is given), which is how :class:`ArrayDataset` batches with one gather.
    """

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Any: ...


def _check_index(op: str, index: int, n: int) -> int:
    if not isinstance(index, numbers.Integral) or isinstance(index, bool):
        raise TypeError(f"{op}: index must be an integer, got {type(index).__name__}")
    i = int(index)
    if not -n <= i < n:
        raise IndexError(f"{op}: index {i} is out of range for {n} items")
    return i + n if i < 0 else i


def _check_batch_indices(op: str, indices: npt.ArrayLike, n: int) -> IndexArray:
    idx = np.asarray(indices)
    if idx.ndim != 1 or not (idx.dtype.kind in "iu" or idx.size == 0):
        raise TypeError(
            f"{op}: indices must be a 1-D integer array, got shape {idx.shape} dtype {idx.dtype}"
        )
    idx = idx.astype(np.int64, copy=False)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        bad = idx[(idx < 0) | (idx >= n)][0]
        raise IndexError(f"{op}: index {int(bad)} is out of range for {n} items")
    return idx


SampleTransform = Callable[[Any], Any]


def _check_transforms(op: str, transform: Any, target_transform: Any) -> None:
    for name, fn in (("transform", transform), ("target_transform", target_transform)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{op}: {name} must be callable or None, got {type(fn).__name__}")


def _apply(item: tuple[Any, ...], transform: SampleTransform | None,
           target_transform: SampleTransform | None) -> tuple[Any, ...]:
    if transform is None and target_transform is None:
        return item
    first = item[0] if transform is None else transform(item[0])
    if len(item) < 2:
        return (first,)
    second = item[1] if target_transform is None else target_transform(item[1])
    return (first, second, *item[2:])


class ArrayDataset:
    """A dataset over NumPy arrays that share their first dimension.

    Item ``i`` is the tuple ``(arrays[0][i], arrays[1][i], ...)``. Batches are gathered with
    one fancy index per array (``get_batch``), not item by item, unless a per-sample transform
    is given.

    Args:
        *arrays: one or more arrays with the same length along axis 0.
        transform: applied to ``arrays[0][i]`` of each item (a :mod:`netcl.data.transforms`
            pipeline, torchvision-style: ``transform(x) -> x``).
        target_transform: applied to ``arrays[1][i]``.

    Raises:
        TypeError: an argument is not an array, or none is given.
        ValueError: the arrays differ in length.

    Examples:
        >>> import numpy as np
        >>> ds = ArrayDataset(np.zeros((10, 3)), np.arange(10))
        >>> len(ds), ds[2][1]
        (10, np.int64(2))
        >>> x, y = ds.get_batch(np.array([0, 5]))
        >>> x.shape, y.tolist()
        ((2, 3), [0, 5])
    """

    def __init__(self, *arrays: npt.NDArray[Any], transform: SampleTransform | None = None,
                 target_transform: SampleTransform | None = None) -> None:
        _check_transforms("ArrayDataset", transform, target_transform)
        if target_transform is not None and len(arrays) < 2:
            raise ValueError("ArrayDataset: target_transform needs a second (target) array")
        self.transform, self.target_transform = transform, target_transform
        if not arrays:
            raise TypeError("ArrayDataset: needs at least one array, got none")
        for k, arr in enumerate(arrays):
            if not isinstance(arr, np.ndarray):
                raise TypeError(
                    f"ArrayDataset: every argument must be a numpy.ndarray, "
                    f"argument {k} is {type(arr).__name__}"
                )
            if arr.ndim == 0:
                raise ValueError(f"ArrayDataset: argument {k} is 0-d; arrays need a first axis")
        lengths = [len(a) for a in arrays]
        if len(set(lengths)) != 1:
            raise ValueError(
                f"ArrayDataset: every array must have the same length along axis 0, "
                f"got lengths {lengths}"
            )
        self.arrays: tuple[npt.NDArray[Any], ...] = tuple(arrays)

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        i = _check_index("ArrayDataset", index, len(self))
        item = tuple(a[i] for a in self.arrays)
        return _apply(item, self.transform, self.target_transform)

    def get_batch(self, indices: npt.ArrayLike) -> tuple[npt.NDArray[Any], ...]:
        """Return the collated batch for ``indices`` (one gather per array, or item by item
        through the per-sample transforms)."""
        idx = _check_batch_indices("ArrayDataset.get_batch", indices, len(self))
        if self.transform is None and self.target_transform is None:
            return tuple(a[idx] for a in self.arrays)
        batch: tuple[npt.NDArray[Any], ...] = default_collate([self[int(i)] for i in idx])
        return batch


class DigitsDataset(ArrayDataset):
    """The 8x8 handwritten digits that scikit-learn ships (1797 samples, 10 classes).

    Items are ``(image, label)``: the image is float32 of shape ``(1, 8, 8)`` scaled to
    ``[0, 1]`` and the label an int64. Needs scikit-learn: ``pip install 'netcl-data[digits]'``.

    Args:
        transform: applied to each image (per sample, as in :class:`ArrayDataset`).
        target_transform: applied to each label.

    Raises:
        ImportError: scikit-learn is not installed.

    Examples:
        >>> ds = DigitsDataset()  # doctest: +SKIP
        >>> len(ds), ds.images.shape, ds.images.dtype  # doctest: +SKIP
        (1797, (1797, 1, 8, 8), dtype('float32'))
    """

    def __init__(self, transform: SampleTransform | None = None,
                 target_transform: SampleTransform | None = None) -> None:
        try:
            from sklearn.datasets import load_digits
        except ImportError as exc:
            raise ImportError(
                "DigitsDataset needs scikit-learn, which is not installed; install it with "
                "`pip install 'netcl-data[digits]'` (or `pip install scikit-learn`)"
            ) from exc
        bunch = load_digits()
        images = (np.asarray(bunch.images, dtype=np.float32) / np.float32(16.0))[:, None]
        labels = np.asarray(bunch.target, dtype=np.int64)
        super().__init__(np.ascontiguousarray(images), labels, transform=transform,
                         target_transform=target_transform)
        self.images: npt.NDArray[np.float32] = self.arrays[0]
        self.labels: npt.NDArray[np.int64] = self.arrays[1]


IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")


def _require_pillow(op: str) -> Any:
    try:
        from PIL import Image
    except ImportError as exc:
        raise ImportError(
            f"{op} needs Pillow, which is not installed; install it with "
            "`pip install 'netcl-data[images]'` (or `pip install Pillow`)"
        ) from exc
    return Image


class ImageFolder:
    """Images stored as ``root/<class name>/<file>``, read with Pillow.

    Classes are the sub-folder names in sorted order. Items are ``(image, label)``: the image a
    uint8 array ``(C, H, W)`` (C is 3 for ``mode="RGB"``, 1 for ``"L"``), the label an int64.
    Images of different sizes cannot be stacked into a batch unless ``size`` resizes them.
    Needs Pillow: ``pip install 'netcl-data[images]'``.

    Args:
        root: the folder holding one sub-folder per class.
        size: ``(height, width)`` to resize every image to (bilinear), or None to keep sizes.
        mode: a Pillow mode, ``"RGB"`` or ``"L"``.
        extensions: file suffixes (lower case) that count as images.
        transform: applied to each image, the uint8 ``(C, H, W)`` array (a
            :mod:`netcl.data.transforms` pipeline; start it with ``ConvertImageDtype()``).
        target_transform: applied to each label.

    Raises:
        ImportError: Pillow is not installed.
        FileNotFoundError: ``root`` is not a folder.
        ValueError: no class folder or no image was found, or ``mode``/``size`` is invalid.

    Examples:
        >>> ds = ImageFolder("photos", size=(32, 32))  # doctest: +SKIP
        >>> image, label = ds[0]  # doctest: +SKIP
        >>> image.shape, image.dtype  # doctest: +SKIP
        ((3, 32, 32), dtype('uint8'))
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        size: tuple[int, int] | None = None,
        mode: str = "RGB",
        extensions: Sequence[str] = IMAGE_EXTENSIONS,
        transform: SampleTransform | None = None,
        target_transform: SampleTransform | None = None,
    ) -> None:
        _require_pillow("ImageFolder")
        _check_transforms("ImageFolder", transform, target_transform)
        self.transform, self.target_transform = transform, target_transform
        if mode not in ("RGB", "L"):
            raise ValueError(f"ImageFolder: mode must be 'RGB' or 'L', got {mode!r}")
        if size is not None and (
            len(size) != 2 or not all(isinstance(s, int) and s > 0 for s in size)
        ):
            raise ValueError(f"ImageFolder: size must be (height, width) > 0, got {size!r}")
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(f"ImageFolder: root {str(self.root)!r} is not a folder")
        self.size = size
        self.mode = mode
        self.classes: list[str] = sorted(p.name for p in self.root.iterdir() if p.is_dir())
        if not self.classes:
            raise ValueError(f"ImageFolder: no class sub-folder in {str(self.root)!r}")
        self.class_to_index: dict[str, int] = {c: k for k, c in enumerate(self.classes)}
        suffixes = tuple(e.lower() for e in extensions)
        self.samples: list[tuple[Path, int]] = [
            (path, label)
            for label, name in enumerate(self.classes)
            for path in sorted((self.root / name).iterdir())
            if path.is_file() and path.suffix.lower() in suffixes
        ]
        if not self.samples:
            raise ValueError(
                f"ImageFolder: no image with a suffix in {list(suffixes)} under "
                f"{str(self.root)!r} (classes {self.classes})"
            )

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        path, label = self.samples[_check_index("ImageFolder", index, len(self))]
        image_module = _require_pillow("ImageFolder")
        with image_module.open(path) as img:
            img = img.convert(self.mode)
            if self.size is not None:
                img = img.resize((self.size[1], self.size[0]), image_module.Resampling.BILINEAR)
            arr = np.asarray(img, dtype=np.uint8)
        chw = arr[None] if arr.ndim == 2 else arr.transpose(2, 0, 1)
        return _apply((np.ascontiguousarray(chw), np.int64(label)), self.transform,
                      self.target_transform)


class Subset:
    """The items of ``dataset`` at ``indices``, in that order.

    Args:
        dataset: the dataset to draw from.
        indices: integer positions in ``dataset``.

    Raises:
        IndexError: an index is out of range.

    Examples:
        >>> import numpy as np
        >>> sub = Subset(ArrayDataset(np.arange(10)), [7, 2])
        >>> len(sub), int(sub[0][0])
        (2, 7)
    """

    def __init__(self, dataset: Dataset, indices: npt.ArrayLike) -> None:
        self.dataset = dataset
        self.indices: IndexArray = _check_batch_indices("Subset", indices, len(dataset))

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> Any:
        return self.dataset[int(self.indices[_check_index("Subset", index, len(self))])]

    def get_batch(self, indices: npt.ArrayLike) -> Any:
        """Collated batch, through the parent's ``get_batch`` when it has one."""
        idx = self.indices[_check_batch_indices("Subset.get_batch", indices, len(self))]
        get_batch = getattr(self.dataset, "get_batch", None)
        if callable(get_batch):
            return get_batch(idx)

        return default_collate([self.dataset[int(i)] for i in idx])


def random_split(
    dataset: Dataset, lengths: Sequence[int] | Sequence[float], seed: int = 0
) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets, reproducibly.

    Args:
        dataset: the dataset to split.
        lengths: sizes that sum to ``len(dataset)``, or fractions that sum to 1 (what is left
            after flooring goes one item at a time to the first subsets).
        seed: the permutation depends only on this seed and ``len(dataset)``.

    Returns:
        One :class:`Subset` per entry of ``lengths``.

    Raises:
        TypeError: ``lengths`` mixes integers and fractions or holds something else.
        ValueError: the lengths do not add up, or one is negative.

    Examples:
        >>> import numpy as np
        >>> train, val = random_split(ArrayDataset(np.arange(10)), [0.8, 0.2], seed=0)
        >>> len(train), len(val)
        (8, 2)
        >>> sorted(np.concatenate([train.indices, val.indices]).tolist()) == list(range(10))
        True
    """
    n = len(dataset)
    sizes = _split_sizes(lengths, n)
    perm = np.random.default_rng(seed).permutation(n).astype(np.int64)
    bounds = np.cumsum([0, *sizes])
    return [Subset(dataset, perm[bounds[k] : bounds[k + 1]]) for k in range(len(sizes))]


def _split_sizes(lengths: Sequence[int] | Sequence[float], n: int) -> list[int]:
    values = list(lengths)
    if not values:
        raise ValueError("random_split: lengths must not be empty")
    if any(isinstance(v, bool) or not isinstance(v, numbers.Real) for v in values):
        raise TypeError(f"random_split: lengths must be integers or fractions, got {values}")
    if any(v < 0 for v in values):
        raise ValueError(f"random_split: lengths must be >= 0, got {values}")
    if all(isinstance(v, numbers.Integral) for v in values):
        sizes = [int(v) for v in values]
        if sum(sizes) != n:
            raise ValueError(
                f"random_split: lengths must sum to the dataset length {n}, "
                f"got {sizes} (sum {sum(sizes)})"
            )
        return sizes
    if any(isinstance(v, numbers.Integral) for v in values):
        raise TypeError(
            f"random_split: lengths must be all integers or all fractions, got {values}"
        )
    if not math.isclose(sum(values), 1.0, abs_tol=1e-6):
        raise ValueError(f"random_split: fractions must sum to 1, got {values} (sum {sum(values)})")
    sizes = [math.floor(float(v) * n) for v in values]
    for k in range(n - sum(sizes)):
        sizes[k % len(sizes)] += 1
    return sizes
