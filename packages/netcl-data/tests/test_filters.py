"""Image filters against a direct per-pixel correlation."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from netcl.data import filters

Array = npt.NDArray[Any]

MODES = {"reflect": "reflect", "replicate": "edge", "zeros": "constant"}


def ref_correlate(x: Array, kernel: Array, padding: str) -> Array:
    """Per-pixel loops in float64: the plain statement of a 'same' correlation."""
    kh, kw = kernel.shape
    pads = ((0, 0), (0, 0), ((kh - 1) // 2, kh // 2), ((kw - 1) // 2, kw // 2))
    xp = np.pad(x.astype(np.float64), pads, mode=MODES[padding])  # type: ignore[call-overload]
    out = np.zeros(x.shape)
    for i in range(x.shape[2]):
        for j in range(x.shape[3]):
            out[:, :, i, j] = np.einsum("ncij,ij->nc", xp[:, :, i : i + kh, j : j + kw], kernel)
    return out


def images() -> Array:
    return np.random.default_rng(0).integers(0, 256, (3, 2, 7, 9), dtype=np.uint8)


@pytest.mark.parametrize("padding", ["reflect", "replicate", "zeros"])
def test_filter2d_matches_direct_correlation(padding: Any) -> None:
    x = images()
    kernel = np.random.default_rng(1).normal(size=(3, 4))
    out = filters.filter2d(x, kernel, padding=padding)
    assert out.dtype == np.float32 and out.shape == x.shape
    np.testing.assert_allclose(out, ref_correlate(x, kernel, padding), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("size", [1, 3, 4])
def test_box_blur(size: int) -> None:
    x = images().astype(np.float64)
    out = filters.box_blur(x, size)
    assert out.dtype == np.float64
    expected = ref_correlate(x, np.full((size, size), 1.0 / size**2), "reflect")
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-9)


def test_gaussian_blur_is_a_normalised_separable_gaussian() -> None:
    x = images()
    taps = filters.gaussian_kernel1d(1.2)
    assert len(taps) == 2 * 4 + 1 and np.isclose(taps.sum(), 1.0)
    out = filters.gaussian_blur(x, 1.2)
    np.testing.assert_allclose(out, ref_correlate(x, np.outer(taps, taps), "reflect"), atol=1e-3)
    flat = np.full((1, 1, 6, 6), 7.0, np.float32)
    np.testing.assert_allclose(filters.gaussian_blur(flat, 0.8), flat, rtol=1e-6)


def test_sharpen_and_sobel() -> None:
    x = images()
    kernel = np.array([[0, -0.5, 0], [-0.5, 3.0, -0.5], [0, -0.5, 0]])
    np.testing.assert_allclose(
        filters.sharpen(x, 0.5), ref_correlate(x, kernel, "reflect"), atol=1e-3
    )
    gx = ref_correlate(x, np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]), "reflect")
    gy = ref_correlate(x, np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]]), "reflect")
    np.testing.assert_allclose(filters.sobel_edges(x), np.hypot(gx, gy), rtol=1e-5, atol=1e-3)
    np.testing.assert_array_equal(filters.sobel_edges(np.ones((1, 1, 4, 4))), 0.0)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: filters.box_blur(np.zeros((2, 2))), ValueError, r"box_blur: expected a batch"),
        (lambda: filters.box_blur(np.zeros((1, 1, 2, 2)), 0), ValueError, r"size must be >= 1"),
        (
            lambda: filters.gaussian_blur(np.zeros((1, 1, 2, 2)), 0.0),
            ValueError,
            r"sigma must be > 0, got 0.0",
        ),
        (lambda: filters.sharpen(np.zeros((1, 1, 2, 2)), -1), ValueError, r"amount must be >= 0"),
        (
            lambda: filters.filter2d(np.zeros((1, 1, 2, 2)), [1, 2]),
            ValueError,
            r"kernel must be a non-empty 2-D array, got shape \(2,\)",
        ),
        (
            lambda: filters.filter2d(np.zeros((1, 1, 2, 2)), [[1]], padding="wrap"),  # type: ignore[arg-type]
            ValueError,
            r"padding must be one of \['reflect', 'replicate', 'zeros'\], got 'wrap'",
        ),
    ],
)
def test_bad_input(call: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()
