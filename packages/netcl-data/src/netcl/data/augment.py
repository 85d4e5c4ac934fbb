"""Batch augmentation on the CPU, vectorized over ``(N, C, H, W)``, with explicit generators.

Every transform splits into two steps:

* ``draw(rng, shape)`` draws all the randomness for a batch of ``shape`` on the host (crop
  offsets, flip flags, erase boxes, jitter factors) and returns it as a small params object;
* ``apply(x, params)`` is deterministic given those params.

``transform(x, rng)`` is ``transform.apply(x, transform.draw(rng, x.shape))``. The split is what
lets :mod:`netcl.data.augment_gpu` run the same transform on a device batch and agree with the
CPU: draw once, hand the params to both. No transform loops over images in Python.

Integer images are read as ``value / max`` of their dtype (``/ 255`` for uint8) by the
transforms that compute in floating point (:class:`Normalize`, :class:`ColorJitter`), which
return float32; the others keep the dtype.

Examples:
    >>> import numpy as np
    >>> from netcl.data import augment
    >>> x = np.random.default_rng(0).integers(0, 256, (4, 3, 32, 32), dtype=np.uint8)
    >>> pipeline = augment.Compose([
    ...     augment.RandomCrop(32, padding=4),
    ...     augment.RandomHorizontalFlip(),
    ...     augment.Normalize(mean=(0.49, 0.48, 0.45), std=(0.25, 0.24, 0.26)),
    ... ])
    >>> y = pipeline(x, np.random.default_rng(1))
    >>> y.shape, y.dtype
    ((4, 3, 32, 32), dtype('float32'))
    >>> params = pipeline.draw(np.random.default_rng(1), x.shape)
    >>> bool(np.array_equal(pipeline.apply(x, params), y))
    True
"""

from __future__ import annotations

import abc
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

__all__ = [
    "ColorJitter",
    "Compose",
    "CropParams",
    "EraseParams",
    "FlipParams",
    "JitterParams",
    "Normalize",
    "RandomCrop",
    "RandomErasing",
    "RandomHorizontalFlip",
    "Transform",
    "gray_weights",
    "unit_scale",
]

Shape = tuple[int, int, int, int]
P = TypeVar("P")


class Transform(Protocol[P]):
    """What :class:`Compose`, the DataLoader and :mod:`netcl.data.augment_gpu` expect."""

    def draw(self, rng: np.random.Generator, shape: Shape) -> P:
        """Draw the random parameters for a batch of ``shape``."""
        ...

    def apply(self, x: npt.NDArray[Any], params: P) -> npt.NDArray[Any]:
        """Transform batch ``x`` with parameters from :meth:`draw`."""
        ...

    def output_shape(self, shape: Shape) -> Shape:
        """The shape of ``apply``'s result for an input of ``shape``."""
        ...

    def __call__(self, x: npt.NDArray[Any], rng: np.random.Generator) -> npt.NDArray[Any]:
        """``apply(x, draw(rng, x.shape))``."""
        ...


# -- shared checks and helpers ----------------------------------------------------------------


def check_batch(op: str, x: object) -> Shape:
    """Return the shape of ``x`` after checking it is a numeric ``(N, C, H, W)`` array."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{op}: expected a numpy batch (N, C, H, W), got {type(x).__name__}")
    if x.ndim != 4:
        raise ValueError(f"{op}: expected a batch of shape (N, C, H, W), got shape {x.shape}")
    if x.dtype.kind not in "uif":
        raise TypeError(f"{op}: expected an integer or floating batch, got dtype {x.dtype}")
    n, c, h, w = x.shape
    return (n, c, h, w)


def _check_params(op: str, name: str, arr: npt.NDArray[Any], shape: tuple[int, ...]) -> None:
    if arr.shape != shape:
        raise ValueError(
            f"{op}: {name} must have shape {shape} for this batch, got {arr.shape} "
            "(were the params drawn for a batch of another size?)"
        )


def unit_scale(dtype: np.dtype[Any]) -> float:
    """What one unit of ``dtype`` is worth on the ``[0, 1]`` scale: ``1/255`` for uint8."""
    return 1.0 / float(np.iinfo(dtype).max) if dtype.kind in "iu" else 1.0


def gray_weights(channels: int) -> npt.NDArray[np.float32]:
    """Luma weights: ITU-R 601 for 3 channels, the plain mean otherwise."""
    if channels == 3:
        return np.array([0.299, 0.587, 0.114], dtype=np.float32)
    return np.full(channels, 1.0 / channels, dtype=np.float32)


def _gray(y: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    weights = gray_weights(y.shape[1])
    g: npt.NDArray[np.float32] = y[:, 0:1] * weights[0]
    for k in range(1, y.shape[1]):  # a loop over channels, summed in the kernel's order
        g = g + y[:, k : k + 1] * weights[k]
    return g


def cast_scalar(op: str, name: str, value: float, dtype: np.dtype[Any]) -> Any:
    """``value`` as a ``dtype`` scalar, refusing values the dtype cannot hold exactly."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if float(value) != math.floor(float(value)) or not info.min <= value <= info.max:
            raise ValueError(
                f"{op}: {name} must be an integer in [{info.min}, {info.max}] for {dtype} "
                f"images, got {value}"
            )
        return dtype.type(int(value))
    return dtype.type(value)


def _pair(op: str, name: str, value: int | Sequence[int]) -> tuple[int, int]:
    pair: tuple[Any, ...] = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, numbers.Integral) and int(v) > 0 for v in pair):
        raise ValueError(f"{op}: {name} must be a positive int or (height, width), got {value!r}")
    return int(pair[0]), int(pair[1])


def _check_probability(op: str, p: float) -> float:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: p must be in [0, 1], got {p}")
    return float(p)


class _Augmentation(abc.ABC, Generic[P]):
    op = "augment"

    @abc.abstractmethod
    def draw(self, rng: np.random.Generator, shape: Shape) -> P:
        """Every random draw this augmentation needs for a batch of ``shape``, on the host."""

    @abc.abstractmethod
    def apply(self, x: npt.NDArray[Any], params: P) -> npt.NDArray[Any]:
        """The deterministic transform given the draws."""

    def output_shape(self, shape: Shape) -> Shape:
        return shape

    def __call__(self, x: npt.NDArray[Any], rng: np.random.Generator) -> npt.NDArray[Any]:
        return self.apply(x, self.draw(rng, check_batch(self.op, x)))


# -- random crop with padding -----------------------------------------------------------------


@dataclass(frozen=True)
class CropParams:
    """``offsets[n] = (top, left)`` of image n's crop, in padded coordinates."""

    offsets: npt.NDArray[np.int64]


class RandomCrop(_Augmentation[CropParams]):
    """Pad each image by ``padding`` (with ``fill``) and cut a random ``size`` window from it.

    Args:
        size: ``(height, width)`` of the crop, or one int for a square.
        padding: pixels added on every side before cropping.
        fill: the value of the padding (must fit the batch dtype).

    Examples:
        >>> import numpy as np
        >>> x = np.arange(2 * 1 * 4 * 4, dtype=np.uint8).reshape(2, 1, 4, 4)
        >>> crop = RandomCrop(4, padding=1)
        >>> y = crop.apply(x, CropParams(np.array([[1, 1], [0, 0]])))
        >>> bool(np.array_equal(y[0], x[0])), y[1, 0, 0].tolist()
        (True, [0, 0, 0, 0])
    """

    op = "random_crop"

    def __init__(self, size: int | Sequence[int], padding: int = 0, fill: float = 0) -> None:
        self.size = _pair(self.op, "size", size)
        if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
            raise ValueError(f"{self.op}: padding must be an int >= 0, got {padding!r}")
        self.padding: int = padding
        self.fill: float = fill

    def _room(self, shape: Shape) -> tuple[int, int]:
        _, _, height, width = shape
        ph, pw = height + 2 * self.padding, width + 2 * self.padding
        if self.size[0] > ph or self.size[1] > pw:
            raise ValueError(
                f"{self.op}: the crop {self.size} must fit in the padded image ({ph}, {pw}) "
                f"(image ({height}, {width}) with padding {self.padding})"
            )
        return ph - self.size[0] + 1, pw - self.size[1] + 1

    def draw(self, rng: np.random.Generator, shape: Shape) -> CropParams:
        rows, cols = self._room(shape)
        top = rng.integers(0, rows, size=shape[0], dtype=np.int64)
        left = rng.integers(0, cols, size=shape[0], dtype=np.int64)
        return CropParams(np.stack([top, left], axis=1))

    def output_shape(self, shape: Shape) -> Shape:
        return (shape[0], shape[1], self.size[0], self.size[1])

    def check_params(self, shape: Shape, params: CropParams) -> npt.NDArray[np.int64]:
        """The offsets, checked against a batch of ``shape`` (shared with the device path)."""
        rows, cols = self._room(shape)
        offsets = np.asarray(params.offsets, dtype=np.int64)
        _check_params(self.op, "offsets", offsets, (shape[0], 2))
        if offsets.size and (
            offsets.min() < 0 or offsets[:, 0].max() >= rows or offsets[:, 1].max() >= cols
        ):
            raise ValueError(
                f"{self.op}: offsets must lie in [0, {rows}) x [0, {cols}), got "
                f"rows {offsets[:, 0].min()}..{offsets[:, 0].max()} and "
                f"columns {offsets[:, 1].min()}..{offsets[:, 1].max()}"
            )
        return offsets

    def apply(self, x: npt.NDArray[Any], params: CropParams) -> npt.NDArray[Any]:
        shape = check_batch(self.op, x)
        offsets = self.check_params(shape, params)
        fill = cast_scalar(self.op, "fill", self.fill, x.dtype)
        pad = self.padding
        padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
        windows = sliding_window_view(padded, self.size, axis=(2, 3))
        # Advanced indices on axes 0, 2, 3 around a slice: the result is (N, C, h, w).
        out = windows[np.arange(shape[0]), :, offsets[:, 0], offsets[:, 1]]
        return np.ascontiguousarray(out)


# -- horizontal flip --------------------------------------------------------------------------


@dataclass(frozen=True)
class FlipParams:
    """``flags[n]`` is True where image n is mirrored left to right."""

    flags: npt.NDArray[np.bool_]


class RandomHorizontalFlip(_Augmentation[FlipParams]):
    """Mirror each image left to right with probability ``p``.

    Examples:
        >>> import numpy as np
        >>> x = np.arange(6, dtype=np.float32).reshape(2, 1, 1, 3)
        >>> RandomHorizontalFlip().apply(x, FlipParams(np.array([True, False]))).tolist()
        [[[[2.0, 1.0, 0.0]]], [[[3.0, 4.0, 5.0]]]]
    """

    op = "random_horizontal_flip"

    def __init__(self, p: float = 0.5) -> None:
        self.p = _check_probability(self.op, p)

    def draw(self, rng: np.random.Generator, shape: Shape) -> FlipParams:
        return FlipParams(rng.random(shape[0]) < self.p)

    def check_params(self, shape: Shape, params: FlipParams) -> npt.NDArray[np.bool_]:
        """The flags, checked against a batch of ``shape`` (shared with the device path)."""
        flags = np.asarray(params.flags, dtype=np.bool_)
        _check_params(self.op, "flags", flags, (shape[0],))
        return flags

    def apply(self, x: npt.NDArray[Any], params: FlipParams) -> npt.NDArray[Any]:
        flags = self.check_params(check_batch(self.op, x), params)
        out = np.array(x, copy=True, order="C")
        out[flags] = x[flags, :, :, ::-1]
        return out


# -- normalisation ----------------------------------------------------------------------------


class Normalize(_Augmentation[None]):
    """``(x * scale - mean[c]) / std[c]`` per channel, as float32.

    Computed as ``x * a[c] + b[c]`` with ``a = scale / std`` and ``b = -mean / std`` (see
    :meth:`coefficients`), so the device kernel can match it exactly.

    Args:
        mean: one value per channel (or one for all).
        std: one value per channel (or one for all), each > 0.
        scale: what the input is multiplied by first; None means :func:`unit_scale` of the
            input dtype (``1/255`` for uint8, 1 for floats).

    Examples:
        >>> import numpy as np
        >>> x = np.full((1, 2, 1, 1), 255, dtype=np.uint8)
        >>> Normalize(mean=(0.5, 0.0), std=(0.5, 2.0))(x, np.random.default_rng()).ravel()
        array([1. , 0.5], dtype=float32)
    """

    op = "normalize"

    def __init__(
        self,
        mean: float | Sequence[float],
        std: float | Sequence[float],
        scale: float | None = None,
    ) -> None:
        self.mean = np.atleast_1d(np.asarray(mean, dtype=np.float64))
        self.std = np.atleast_1d(np.asarray(std, dtype=np.float64))
        if self.mean.ndim != 1 or self.std.ndim != 1:
            raise ValueError(f"{self.op}: mean and std must be 1-D, got {mean!r} and {std!r}")
        if np.any(self.std <= 0):
            raise ValueError(f"{self.op}: std must be > 0, got {self.std.tolist()}")
        self.scale = scale

    def coefficients(
        self, dtype: np.dtype[Any], channels: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """The float32 ``(a, b)`` of ``x * a[c] + b[c]`` for a batch of ``dtype``."""
        for name, values in (("mean", self.mean), ("std", self.std)):
            if len(values) not in (1, channels):
                raise ValueError(
                    f"{self.op}: {name} needs one value or one per channel ({channels}), "
                    f"got {len(values)}: {values.tolist()}"
                )
        scale = unit_scale(dtype) if self.scale is None else float(self.scale)
        a = np.broadcast_to(scale / self.std, (channels,)).astype(np.float32)
        b = np.broadcast_to(-self.mean / self.std, (channels,)).astype(np.float32)
        return a, b

    def draw(self, rng: np.random.Generator, shape: Shape) -> None:
        return None

    def apply(self, x: npt.NDArray[Any], params: None = None) -> npt.NDArray[np.float32]:
        shape = check_batch(self.op, x)
        a, b = self.coefficients(x.dtype, shape[1])
        # One float32 ufunc (inputs cast to float32 first, as the kernel does) into a fresh
        # array: several times faster than astype() then multiply.
        out: npt.NDArray[np.float32] = np.empty(shape, dtype=np.float32)
        np.multiply(x, a[:, None, None], out=out, dtype=np.float32, casting="unsafe")
        out += b[:, None, None]
        return out


# -- random erasing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EraseParams:
    """``boxes[n] = (top, left, height, width)`` erased in image n; height 0 erases nothing."""

    boxes: npt.NDArray[np.int64]


class RandomErasing(_Augmentation[EraseParams]):
    """With probability ``p``, fill a random rectangle of each image with ``value``.

    The rectangle covers a fraction ``scale`` of the image with aspect ratio ``ratio`` (drawn
    log-uniformly); of ``attempts`` candidates per image the first that fits is used, and none
    is erased if none fits (as torchvision does, without a Python loop per image).

    Examples:
        >>> import numpy as np
        >>> x = np.ones((1, 1, 3, 3), dtype=np.float32)
        >>> RandomErasing().apply(x, EraseParams(np.array([[1, 0, 2, 2]])))[0, 0].tolist()
        [[1.0, 1.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]
    """

    op = "random_erasing"

    def __init__(
        self,
        p: float = 0.5,
        scale: tuple[float, float] = (0.02, 0.33),
        ratio: tuple[float, float] = (0.3, 3.3),
        value: float = 0.0,
        attempts: int = 10,
    ) -> None:
        self.p = _check_probability(self.op, p)
        if not 0.0 < scale[0] <= scale[1] <= 1.0:
            raise ValueError(f"{self.op}: scale must satisfy 0 < lo <= hi <= 1, got {scale}")
        if not 0.0 < ratio[0] <= ratio[1]:
            raise ValueError(f"{self.op}: ratio must satisfy 0 < lo <= hi, got {ratio}")
        if attempts < 1:
            raise ValueError(f"{self.op}: attempts must be >= 1, got {attempts}")
        self.scale = (float(scale[0]), float(scale[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        self.value = value
        self.attempts = int(attempts)

    def draw(self, rng: np.random.Generator, shape: Shape) -> EraseParams:
        n, _, height, width = shape
        erase = rng.random(n) < self.p
        u = rng.random((n, self.attempts, 4))
        target = height * width * (self.scale[0] + u[..., 0] * (self.scale[1] - self.scale[0]))
        log_lo, log_hi = math.log(self.ratio[0]), math.log(self.ratio[1])
        aspect = np.exp(log_lo + u[..., 1] * (log_hi - log_lo))
        hs = np.rint(np.sqrt(target * aspect)).astype(np.int64)
        ws = np.rint(np.sqrt(target / aspect)).astype(np.int64)
        fits = (hs >= 1) & (ws >= 1) & (hs < height) & (ws < width)
        pick = np.argmax(fits, axis=1)
        rows = np.arange(n)
        h, w = hs[rows, pick], ws[rows, pick]
        top = np.floor(u[rows, pick, 2] * (height - h + 1)).astype(np.int64)
        left = np.floor(u[rows, pick, 3] * (width - w + 1)).astype(np.int64)
        keep = (erase & fits.any(axis=1)).astype(np.int64)
        return EraseParams(np.stack([top, left, h, w], axis=1) * keep[:, None])

    def check_params(self, shape: Shape, params: EraseParams) -> npt.NDArray[np.int64]:
        """The boxes, checked against a batch of ``shape`` (shared with the device path)."""
        boxes = np.asarray(params.boxes, dtype=np.int64)
        _check_params(self.op, "boxes", boxes, (shape[0], 4))
        if boxes.size and boxes.min() < 0:
            raise ValueError(f"{self.op}: boxes must be >= 0, got minimum {boxes.min()}")
        return boxes

    def apply(self, x: npt.NDArray[Any], params: EraseParams) -> npt.NDArray[Any]:
        shape = check_batch(self.op, x)
        _, _, height, width = shape
        boxes = self.check_params(shape, params)
        value = cast_scalar(self.op, "value", self.value, x.dtype)
        top, left, h, w = (boxes[:, k, None, None] for k in range(4))
        r = np.arange(height)[None, :, None]
        c = np.arange(width)[None, None, :]
        inside = (r >= top) & (r < top + h) & (c >= left) & (c < left + w)
        return np.where(inside[:, None], value, x)


# -- colour jitter ----------------------------------------------------------------------------


@dataclass(frozen=True)
class JitterParams:
    """``factors[n] = (brightness, contrast, saturation)`` multipliers of image n."""

    factors: npt.NDArray[np.float32]


class ColorJitter(_Augmentation[JitterParams]):
    """Random brightness, contrast and saturation, applied in that order, as float32 in [0, 1].

    Each factor is drawn uniformly from ``[max(0, 1 - v), 1 + v]``. Brightness scales the
    image; contrast blends it with the mean of its gray image; saturation blends each pixel
    with its gray value; every step clips to ``[0, 1]``. Gray is the ITU-R 601 luma for three
    channels and the channel mean otherwise. Integer input is scaled by :func:`unit_scale`.

    Examples:
        >>> import numpy as np
        >>> x = np.full((1, 3, 2, 2), 0.5, dtype=np.float32)
        >>> y = ColorJitter(0.5).apply(x, JitterParams(np.array([[1.5, 1, 1]], np.float32)))
        >>> float(y.max())
        0.75
    """

    op = "color_jitter"

    def __init__(self, brightness: float = 0.0, contrast: float = 0.0, saturation: float = 0.0):
        amounts = (brightness, contrast, saturation)
        if any(v < 0 for v in amounts):
            raise ValueError(
                f"{self.op}: brightness, contrast and saturation must be >= 0, got {amounts}"
            )
        self.amounts = tuple(float(v) for v in amounts)

    def draw(self, rng: np.random.Generator, shape: Shape) -> JitterParams:
        lo = np.array([max(0.0, 1.0 - v) for v in self.amounts])
        hi = np.array([1.0 + v for v in self.amounts])
        u = rng.random((shape[0], 3))
        return JitterParams((lo + u * (hi - lo)).astype(np.float32))

    def check_params(self, shape: Shape, params: JitterParams) -> npt.NDArray[np.float32]:
        """The factors, checked against a batch of ``shape`` (shared with the device path)."""
        factors = np.asarray(params.factors, dtype=np.float32)
        _check_params(self.op, "factors", factors, (shape[0], 3))
        return factors

    def apply(self, x: npt.NDArray[Any], params: JitterParams) -> npt.NDArray[np.float32]:
        factors = self.check_params(check_batch(self.op, x), params)
        fb, fc, fs = (factors[:, k, None, None, None] for k in range(3))
        # In-place float32 steps, each rounded as the kernel rounds it (no fused multiply-add).
        y: npt.NDArray[np.float32] = np.multiply(
            x, np.float32(unit_scale(x.dtype)), dtype=np.float32, casting="unsafe"
        )
        y *= fb
        np.clip(y, 0.0, 1.0, out=y)
        mean = _gray(y).mean(axis=(2, 3), keepdims=True, dtype=np.float32)
        y -= mean
        y *= fc
        y += mean
        np.clip(y, 0.0, 1.0, out=y)
        g = _gray(y)
        y -= g
        y *= fs
        y += g
        np.clip(y, 0.0, 1.0, out=y)
        return y


# -- composition ------------------------------------------------------------------------------


class Compose(_Augmentation[tuple[Any, ...]]):
    """Run transforms one after another; ``draw`` returns one params entry per transform.

    Examples:
        >>> import numpy as np
        >>> t = Compose([RandomCrop(24), RandomHorizontalFlip()])
        >>> t.output_shape((8, 3, 32, 32))
        (8, 3, 24, 24)
        >>> t(np.zeros((8, 3, 32, 32), np.uint8), np.random.default_rng(0)).shape
        (8, 3, 24, 24)
    """

    op = "compose"

    def __init__(self, transforms: Sequence[Transform[Any]]) -> None:
        for k, t in enumerate(transforms):
            if not all(callable(getattr(t, m, None)) for m in ("draw", "apply", "output_shape")):
                raise TypeError(
                    f"{self.op}: transform {k} ({type(t).__name__}) needs draw, apply and "
                    "output_shape methods (see netcl.data.augment.Transform)"
                )
        self.transforms: tuple[Transform[Any], ...] = tuple(transforms)

    def draw(self, rng: np.random.Generator, shape: Shape) -> tuple[Any, ...]:
        params = []
        for t in self.transforms:
            params.append(t.draw(rng, shape))
            shape = t.output_shape(shape)
        return tuple(params)

    def output_shape(self, shape: Shape) -> Shape:
        for t in self.transforms:
            shape = t.output_shape(shape)
        return shape

    def apply(self, x: npt.NDArray[Any], params: tuple[Any, ...]) -> npt.NDArray[Any]:
        if len(params) != len(self.transforms):
            raise ValueError(
                f"{self.op}: needs one params entry per transform ({len(self.transforms)}), "
                f"got {len(params)}"
            )
        for t, p in zip(self.transforms, params, strict=True):
            x = t.apply(x, p)
        return x
