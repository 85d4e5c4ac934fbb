"""Per-sample transforms with torchvision's names (``torchvision.transforms``), applied to one
item at a time by a dataset (``ArrayDataset(..., transform=)``, ``ImageFolder(transform=)``),
beside the vectorized batch augmentations of :mod:`netcl.data.augment`.

Images are NumPy arrays: :class:`ToTensor` turns an ``(H, W, C)`` or ``(H, W)`` image (or a
Pillow image) into a float32 ``(C, H, W)`` array in ``[0, 1]``, as torchvision's does; the
other transforms take ``(C, H, W)`` arrays (netcl's datasets already yield that layout: use
:class:`ConvertImageDtype` to scale their uint8 to float).

# NOTE [ Per-sample randomness ]
torchvision's random transforms draw from torch's global generator, so a batch depends on
which worker built it. Here they draw from :func:`get_rng`: inside a
:class:`~netcl.data.DataLoader`, a generator seeded by ``(seed, epoch, batch index)`` that is
set while the batch's items load (the items of a batch load in order in one process), so
batches are the same whatever ``num_workers`` is; outside a loader, a module generator that
:func:`manual_seed` seeds.

Examples:
    >>> import numpy as np
    >>> from netcl.data import transforms as T
    >>> pipeline = T.Compose([T.ToTensor(), T.RandomCrop(4, padding=1),
    ...                       T.RandomHorizontalFlip(), T.Normalize((0.5,), (0.25,))])
    >>> image = np.full((4, 4), 255, np.uint8)  # (H, W) grey image
    >>> T.manual_seed(0)
    >>> out = pipeline(image)
    >>> out.shape, out.dtype, sorted(set(out.ravel().tolist()))
    ((1, 4, 4), dtype('float32'), [-2.0, 2.0])
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np
import numpy.typing as npt

from ._sampler import sample_rng

__all__ = [
    "Compose",
    "ConvertImageDtype",
    "Lambda",
    "Normalize",
    "RandomCrop",
    "RandomHorizontalFlip",
    "ToTensor",
    "batch_scope",
    "get_rng",
    "manual_seed",
]

Array = npt.NDArray[Any]

_default_rng = np.random.default_rng()
# (seed, epoch, batch_index) of the batch loading now, and its generator once made
_scope: ContextVar[list[Any] | None] = ContextVar("netcl_data_sample_scope", default=None)


def manual_seed(seed: int) -> None:
    """Seed the generator that random transforms use outside a DataLoader."""
    global _default_rng
    _default_rng = np.random.default_rng(seed)


def get_rng() -> np.random.Generator:
    """The generator a random transform draws from now (NOTE [ Per-sample randomness ])."""
    scope = _scope.get()
    if scope is None:
        return _default_rng
    if scope[3] is None:  # made on first use: batches without random transforms pay nothing
        scope[3] = sample_rng(scope[0], scope[1], scope[2])
    rng: np.random.Generator = scope[3]
    return rng


@contextlib.contextmanager
def batch_scope(seed: int, epoch: int, batch_index: int) -> Iterator[None]:
    """While loading batch ``batch_index`` of ``epoch``: random transforms draw from its
    generator (the DataLoader enters this around every batch)."""
    token = _scope.set([seed, epoch, batch_index, None])
    try:
        yield
    finally:
        _scope.reset(token)


def _chw(op: str, x: Any) -> Array:
    if not isinstance(x, np.ndarray) or x.ndim != 3:
        shape = getattr(x, "shape", None)
        raise TypeError(f"{op}: expects a (C, H, W) NumPy array, got {type(x).__name__}"
                        f"{'' if shape is None else f' of shape {shape}'}")
    return x


def _ints(value: Any) -> tuple[Any, ...]:
    """``value`` as a tuple (one int becomes a 1-tuple)."""
    return (value,) if isinstance(value, numbers.Integral) else tuple(value)


def _pair(op: str, name: str, value: int | Sequence[int]) -> tuple[int, int]:
    pair = _ints(value)
    if len(pair) == 1:
        pair = pair * 2
    if len(pair) != 2 or not all(isinstance(v, numbers.Integral) and int(v) > 0 for v in pair):
        raise ValueError(f"{op}: {name} must be a positive int or (height, width), got {value!r}")
    return int(pair[0]), int(pair[1])


class Compose:
    """Apply ``transforms`` in order.

    Examples:
        >>> Compose([Lambda(lambda x: x + 1), Lambda(lambda x: x * 2)])(1)
        4
    """

    def __init__(self, transforms: Sequence[Callable[[Any], Any]]) -> None:
        for k, t in enumerate(transforms):
            if not callable(t):
                raise TypeError(f"Compose: transform {k} is not callable: {t!r}")
        self.transforms = list(transforms)

    def __call__(self, x: Any) -> Any:
        for t in self.transforms:
            x = t(x)
        return x

    def __repr__(self) -> str:
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        return f"Compose([{inner}\n])"


class Lambda:
    """Wrap a function as a transform (module-level functions pickle for spawn workers)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        if not callable(fn):
            raise TypeError(f"Lambda: fn must be callable, got {type(fn).__name__}")
        self.fn = fn

    def __call__(self, x: Any) -> Any:
        return self.fn(x)

    def __repr__(self) -> str:
        return f"Lambda({getattr(self.fn, '__qualname__', self.fn)!r})"


class ToTensor:
    """An ``(H, W, C)`` / ``(H, W)`` image (array or Pillow image) as float32 ``(C, H, W)``;
    uint8 is scaled to ``[0, 1]``, floats keep their values (torchvision's rule).

    Examples:
        >>> ToTensor()(np.array([[[0, 255]]], np.uint8)).tolist()  # (1, 1, 2) HWC
        [[[0.0]], [[1.0]]]
    """

    def __call__(self, image: Any) -> Array:
        arr = np.asarray(image)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if arr.ndim != 3:
            raise ValueError(f"ToTensor: expects an (H, W) or (H, W, C) image, got shape "
                             f"{arr.shape}")
        chw = arr.transpose(2, 0, 1)
        out: Array = np.ascontiguousarray(chw, dtype=np.float32)
        if arr.dtype == np.uint8:
            out /= np.float32(255)
        return out

    def __repr__(self) -> str:
        return "ToTensor()"


class ConvertImageDtype:
    """A ``(C, H, W)`` image in another dtype; integer to float scales to ``[0, 1]``.

    Examples:
        >>> ConvertImageDtype()(np.array([[[0, 51, 255]]], np.uint8)).tolist()
        [[[0.0, 0.20000000298023224, 1.0]]]
    """

    def __init__(self, dtype: npt.DTypeLike = np.float32) -> None:
        self.dtype = np.dtype(dtype)
        if self.dtype.kind != "f":
            raise TypeError(f"ConvertImageDtype: only float targets are supported, got "
                            f"{self.dtype}")

    def __call__(self, x: Any) -> Array:
        arr = np.asarray(x)
        out: Array = arr.astype(self.dtype)
        if arr.dtype.kind in "ui":
            out /= self.dtype.type(np.iinfo(arr.dtype).max)
        return out

    def __repr__(self) -> str:
        return f"ConvertImageDtype({self.dtype})"


class Normalize:
    """``(x - mean[c]) / std[c]`` per channel of a float ``(C, H, W)`` array.

    Raises:
        ValueError: a std is 0, or mean/std do not match the channels.
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float]) -> None:
        self.mean = np.asarray(mean, np.float32).reshape(-1)
        self.std = np.asarray(std, np.float32).reshape(-1)
        if self.mean.shape != self.std.shape or np.any(self.std == 0):
            raise ValueError(f"Normalize: mean and std need one value per channel and std != 0, "
                             f"got mean {mean!r} and std {std!r}")

    def __call__(self, x: Any) -> Array:
        arr = _chw("Normalize", x)
        if self.mean.size not in (1, arr.shape[0]):
            raise ValueError(f"Normalize: {self.mean.size} means for {arr.shape[0]} channels")
        if arr.dtype.kind != "f":
            raise TypeError(f"Normalize: expects a float image (use ToTensor or "
                            f"ConvertImageDtype first), got {arr.dtype}")
        out: Array = (arr - self.mean[:, None, None]) / self.std[:, None, None]
        return out.astype(arr.dtype, copy=False)

    def __repr__(self) -> str:
        return f"Normalize(mean={self.mean.tolist()}, std={self.std.tolist()})"


class RandomCrop:
    """A random ``size`` window of a ``(C, H, W)`` image, after optional padding.

    Args:
        size: ``(height, width)`` or one int for a square.
        padding: pixels added first: an int (all sides), ``(left/right, top/bottom)`` or
            ``(left, top, right, bottom)``, as torchvision.
        pad_if_needed: pad an image smaller than ``size`` up to it.
        fill: the value of constant padding.
        padding_mode: ``"constant"``, ``"edge"``, ``"reflect"`` or ``"symmetric"``.

    Raises:
        ValueError: bad arguments, or an image smaller than ``size`` without
            ``pad_if_needed``.
    """

    def __init__(self, size: int | Sequence[int], padding: int | Sequence[int] | None = None,
                 pad_if_needed: bool = False, fill: float = 0,
                 padding_mode: str = "constant") -> None:
        self.size = _pair("RandomCrop", "size", size)
        given = _ints(0 if padding is None else padding)
        if len(given) not in (1, 2, 4) or not all(isinstance(v, numbers.Integral)
                                                  for v in given):
            raise ValueError(f"RandomCrop: padding must be an int or 2 or 4 ints, got {padding!r}")
        sides = given * (4 // len(given))  # (all) or (left/right, top/bottom) to 4 sides
        pad = (int(sides[0]), int(sides[1]), int(sides[2]), int(sides[3]))
        if min(pad) < 0:
            raise ValueError(f"RandomCrop: padding must be >= 0, got {padding!r}")
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(f"RandomCrop: padding_mode must be constant, edge, reflect or "
                             f"symmetric, got {padding_mode!r}")
        self.padding, self.pad_if_needed = pad, bool(pad_if_needed)
        self.fill, self.padding_mode = fill, padding_mode

    def _pad(self, x: Array, left: int, top: int, right: int, bottom: int) -> Array:
        if not (left or top or right or bottom):
            return x
        widths = ((0, 0), (top, bottom), (left, right))
        if self.padding_mode == "constant":
            return np.pad(x, widths, constant_values=self.fill)
        return np.pad(x, widths, mode=self.padding_mode)  # type: ignore[call-overload, no-any-return]

    def __call__(self, x: Any) -> Array:
        arr = self._pad(_chw("RandomCrop", x), *self.padding)
        th, tw = self.size
        h, w = arr.shape[1:]
        if self.pad_if_needed and (h < th or w < tw):
            dh, dw = max(0, th - h), max(0, tw - w)
            arr = self._pad(arr, dw, dh, dw, dh)
            h, w = arr.shape[1:]
        if h < th or w < tw:
            raise ValueError(f"RandomCrop: crop size {self.size} is larger than the (padded) "
                             f"image {(h, w)}; pass pad_if_needed=True or a smaller size")
        rng = get_rng()
        i = int(rng.integers(0, h - th + 1))
        j = int(rng.integers(0, w - tw + 1))
        return np.ascontiguousarray(arr[:, i:i + th, j:j + tw])

    def __repr__(self) -> str:
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class RandomHorizontalFlip:
    """Mirror a ``(C, H, W)`` image left-right with probability ``p``."""

    def __init__(self, p: float = 0.5) -> None:
        if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 <= p <= 1.0:
            raise ValueError(f"RandomHorizontalFlip: p must be in [0, 1], got {p!r}")
        self.p: float = float(p)

    def __call__(self, x: Any) -> Array:
        arr = _chw("RandomHorizontalFlip", x)
        if get_rng().random() < self.p:
            return np.ascontiguousarray(arr[:, :, ::-1])
        return arr

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"
