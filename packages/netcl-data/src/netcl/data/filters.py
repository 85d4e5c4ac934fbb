"""Image filters on batches ``(N, C, H, W)``, vectorized: each channel is filtered on its own.

The loops run over kernel taps (9 for a 3x3 kernel), never over images. Integer input is
filtered in float32 (no rescaling); float64 stays float64. Borders are padded by ``padding``:
``"reflect"`` (mirror, not repeating the edge), ``"replicate"`` (repeat the edge) or ``"zeros"``.

Examples:
    >>> import numpy as np
    >>> from netcl.data import filters
    >>> x = np.zeros((1, 1, 5, 5), np.float32); x[0, 0, 2, 2] = 9
    >>> filters.box_blur(x)[0, 0, 1:4, 1:4].tolist()
    [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    >>> filters.sobel_edges(np.tile(np.arange(4, dtype=np.float32), (1, 1, 4, 1)))[0, 0, 1]
    array([0., 8., 8., 0.], dtype=float32)
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .augment import check_batch

__all__ = [
    "box_blur",
    "filter2d",
    "gaussian_blur",
    "gaussian_kernel1d",
    "sharpen",
    "sobel_edges",
]

Padding = Literal["reflect", "replicate", "zeros"]
_NUMPY_PAD_MODE = {"reflect": "reflect", "replicate": "edge", "zeros": "constant"}


def _float_batch(op: str, x: npt.NDArray[Any]) -> npt.NDArray[np.floating[Any]]:
    check_batch(op, x)
    return x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)


def _pad(
    op: str, x: npt.NDArray[Any], kh: int, kw: int, padding: str
) -> npt.NDArray[np.floating[Any]]:
    mode = _NUMPY_PAD_MODE.get(padding)
    if mode is None:
        raise ValueError(f"{op}: padding must be one of {list(_NUMPY_PAD_MODE)}, got {padding!r}")
    pads = ((0, 0), (0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2))
    return np.pad(x, pads, mode=mode)  # type: ignore[call-overload,no-any-return]


def _correlate(
    op: str, x: npt.NDArray[np.floating[Any]], kernel: npt.NDArray[Any], padding: str
) -> npt.NDArray[np.floating[Any]]:
    kh, kw = kernel.shape
    _, _, height, width = x.shape
    xp = _pad(op, x, kh, kw, padding)
    taps = kernel.astype(x.dtype)
    out = np.zeros_like(x)
    for i in range(kh):
        for j in range(kw):
            if taps[i, j] != 0:
                out += taps[i, j] * xp[:, :, i : i + height, j : j + width]
    return out


def filter2d(
    x: npt.NDArray[Any], kernel: npt.ArrayLike, padding: Padding = "reflect"
) -> npt.NDArray[np.floating[Any]]:
    """Correlate every channel of every image with a 2-D ``kernel`` (same-size output).

    Args:
        x: a batch ``(N, C, H, W)``.
        kernel: a 2-D array of weights (odd sizes centre on the pixel).
        padding: how borders are filled.

    Raises:
        ValueError: ``kernel`` is not a non-empty 2-D array, or ``padding`` is unknown.

    Examples:
        >>> import numpy as np
        >>> x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
        >>> filter2d(x, [[0, 0, 0], [0, 2, 0], [0, 0, 0]])[0, 0, 0].tolist()
        [0.0, 2.0, 4.0]
    """
    k = np.asarray(kernel, dtype=np.float64)
    if k.ndim != 2 or k.size == 0:
        raise ValueError(f"filter2d: kernel must be a non-empty 2-D array, got shape {k.shape}")
    return _correlate("filter2d", _float_batch("filter2d", x), k, padding)


def _separable(
    op: str, x: npt.NDArray[Any], taps: npt.NDArray[np.float64], padding: str
) -> npt.NDArray[np.floating[Any]]:
    xf = _float_batch(op, x)
    vertical = _correlate(op, xf, taps[:, None], padding)
    return _correlate(op, vertical, taps[None, :], padding)


def box_blur(
    x: npt.NDArray[Any], size: int = 3, padding: Padding = "reflect"
) -> npt.NDArray[np.floating[Any]]:
    """The mean over a ``size`` x ``size`` window around each pixel (separable).

    Raises:
        ValueError: ``size`` < 1.
    """
    if size < 1:
        raise ValueError(f"box_blur: size must be >= 1, got {size}")
    return _separable("box_blur", x, np.full(size, 1.0 / size), padding)


def gaussian_kernel1d(sigma: float, size: int | None = None) -> npt.NDArray[np.float64]:
    """Normalised 1-D Gaussian taps; ``size`` defaults to ``2 * ceil(3 * sigma) + 1``.

    Raises:
        ValueError: ``sigma`` <= 0 or ``size`` < 1.

    Examples:
        >>> gaussian_kernel1d(1.0, 3).round(3).tolist()
        [0.274, 0.452, 0.274]
    """
    if not sigma > 0:
        raise ValueError(f"gaussian_blur: sigma must be > 0, got {sigma}")
    size = 2 * math.ceil(3 * sigma) + 1 if size is None else size
    if size < 1:
        raise ValueError(f"gaussian_blur: size must be >= 1, got {size}")
    r = np.arange(size) - (size - 1) / 2
    taps = np.exp(-0.5 * (r / sigma) ** 2)
    return taps / taps.sum()  # type: ignore[no-any-return]


def gaussian_blur(
    x: npt.NDArray[Any], sigma: float, size: int | None = None, padding: Padding = "reflect"
) -> npt.NDArray[np.floating[Any]]:
    """Blur with a Gaussian of standard deviation ``sigma`` pixels (separable).

    Raises:
        ValueError: ``sigma`` <= 0 or ``size`` < 1.
    """
    return _separable("gaussian_blur", x, gaussian_kernel1d(sigma, size), padding)


def sharpen(
    x: npt.NDArray[Any], amount: float = 1.0, padding: Padding = "reflect"
) -> npt.NDArray[np.floating[Any]]:
    """Subtract ``amount`` times the 4-neighbour Laplacian: ``x + amount * (4x - neighbours)``.

    Raises:
        ValueError: ``amount`` < 0.
    """
    if amount < 0:
        raise ValueError(f"sharpen: amount must be >= 0, got {amount}")
    a = float(amount)
    kernel = np.array([[0.0, -a, 0.0], [-a, 1.0 + 4.0 * a, -a], [0.0, -a, 0.0]])
    return _correlate("sharpen", _float_batch("sharpen", x), kernel, padding)


_SOBEL_X = np.array([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]])


def sobel_edges(x: npt.NDArray[Any], padding: Padding = "reflect") -> npt.NDArray[np.floating[Any]]:
    """The gradient magnitude ``sqrt(gx**2 + gy**2)`` from the 3x3 Sobel operators."""
    xf = _float_batch("sobel_edges", x)
    gx = _correlate("sobel_edges", xf, _SOBEL_X, padding)
    gy = _correlate("sobel_edges", xf, _SOBEL_X.T, padding)
    magnitude: npt.NDArray[np.floating[Any]] = np.sqrt(gx * gx + gy * gy)
    return magnitude
