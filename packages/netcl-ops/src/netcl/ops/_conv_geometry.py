"""A convolution's geometry: the checked shapes, stride, padding, dilation and groups that the
conv2d kernels (direct, im2col + GEMM, Winograd) and their applicability rules read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ConvGeometry", "IntPair", "conv_geometry"]

IntPair = int | Sequence[int]


@dataclass(frozen=True)
class ConvGeometry:
    """Shapes of one convolution: input ``(n, c, h, w)``, weight ``(k, cg, r, s)``, output
    ``(n, k, oh, ow)``, and stride, padding, dilation, groups (``kg = k // groups``)."""

    n: int
    c: int
    h: int
    w: int
    k: int
    cg: int
    r: int
    s: int
    oh: int
    ow: int
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    groups: int

    @property
    def kg(self) -> int:
        """Output channels per group."""
        return self.k // self.groups

    @property
    def pixels(self) -> int:
        """Output pixels per plane."""
        return self.oh * self.ow

    @property
    def crs(self) -> int:
        """Rows of one group's im2col matrix: ``cg * r * s``."""
        return self.cg * self.r * self.s

    @property
    def pointwise(self) -> bool:
        """A 1x1 kernel with stride 1 and no padding: the input already is the im2col matrix."""
        return (self.r, self.s, self.stride, self.padding) == (1, 1, (1, 1), (0, 0))

    def scalars(self) -> tuple[int, ...]:
        """``H, W, R, S, OH, OW, SH, SW, PH, PW, DH, DW`` (the kernels' geometry arguments)."""
        return (self.h, self.w, self.r, self.s, self.oh, self.ow, *self.stride, *self.padding,
                *self.dilation)


def _pair(op: str, name: str, value: Any, minimum: int) -> tuple[int, int]:
    items = (value, value) if isinstance(value, (int, np.integer)) else value
    try:
        pair = tuple(items)
    except TypeError:
        pair = ()
    if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, (int, np.integer))
                             for v in pair):
        raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")
    if min(pair) < minimum:
        raise ValueError(f"{op}: {name} must be an int >= {minimum} or a pair of them, "
                         f"got {value!r}")
    return int(pair[0]), int(pair[1])


def _output_size(size: int, pad: int, dil: int, kernel: int, stride: int) -> int:
    """Output positions along one axis: the dilated windows that fit in the padded input."""
    return (size + 2 * pad - dil * (kernel - 1) - 1) // stride + 1


# NOTE [ Remembered geometries ]
# Every conv2d call checks its shapes and arguments (three _pair parses, the output size): 12%
# of an eager conv2d's host time on PoCL. A training step repeats the same few convolutions,
# so the checked geometry is remembered by the arguments' repr (which tells 1 from True and
# 1.0, so a cached entry never lets a bad argument through); bounded, cleared when full.
_GEOMETRIES: dict[tuple[str, str], ConvGeometry] = {}
_MAX_GEOMETRIES = 4096


def conv_geometry(
    op: str, x_shape: Sequence[int], w_shape: Sequence[int], stride: IntPair = 1,
    padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1,
) -> ConvGeometry:
    """Check a convolution's shapes and arguments and return its :class:`ConvGeometry`
    (remembered: NOTE [ Remembered geometries ]).

    Raises:
        TypeError: non-integer stride, padding, dilation or groups.
        ValueError: wrong ranks, channels that do not match the weight, groups that do not
            divide the channels, non-positive stride or dilation, negative padding, zero
            channels or kernel sizes, an input too small for the kernel. An empty batch
            (N = 0) is allowed.

    Examples:
        >>> conv_geometry("conv2d", (8, 3, 32, 32), (16, 3, 3, 3), padding=1).oh
        32
    """
    key = (op, repr((x_shape, w_shape, stride, padding, dilation, groups)))
    known = _GEOMETRIES.get(key)
    if known is not None:
        return known
    g = _checked(op, tuple(x_shape), tuple(w_shape), stride, padding, dilation, groups)
    if len(_GEOMETRIES) >= _MAX_GEOMETRIES:
        _GEOMETRIES.clear()
    _GEOMETRIES[key] = g
    return g


def _checked(op: str, x_shape: tuple[int, ...], w_shape: tuple[int, ...], stride: IntPair,
             padding: IntPair, dilation: IntPair, groups: int) -> ConvGeometry:
    if len(x_shape) != 4:
        raise ValueError(f"{op}: input must be 4-D (N, C, H, W), got shape {x_shape}")
    if len(w_shape) != 4:
        raise ValueError(f"{op}: weight must be 4-D (K, C/groups, R, S), got shape {w_shape}")
    if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
        raise TypeError(f"{op}: groups must be an int, got {groups!r}")
    if groups < 1:
        raise ValueError(f"{op}: groups must be positive, got {groups}")
    n, c, h, w = x_shape
    k, cg, r, s = w_shape
    if c % groups or k % groups:
        raise ValueError(f"{op}: groups={groups} must divide input channels {c} and output "
                         f"channels {k}")
    if cg * groups != c:
        extra = f" with groups={groups}" if groups != 1 else ""
        raise ValueError(f"{op} requires input channels to match weight, got input {x_shape} "
                         f"and weight {w_shape}{extra}")
    st = _pair(op, "stride", stride, 1)
    pad = _pair(op, "padding", padding, 0)
    dil = _pair(op, "dilation", dilation, 1)
    if n < 0 or min(c, k, r, s) < 1:
        raise ValueError(f"{op}: channels and kernel sizes must be >= 1 (the batch >= 0), got "
                         f"input {x_shape} and weight {w_shape}")
    oh, ow = (_output_size(*axis) for axis in zip((h, w), pad, dil, (r, s), st))
    if oh < 1 or ow < 1 or h < 1 or w < 1:
        raise ValueError(f"{op}: input {h}x{w} is too small for a {r}x{s} kernel with stride "
                         f"{st}, padding {pad} and dilation {dil} (the output would be empty; "
                         f"input {x_shape}, weight {w_shape})")
    return ConvGeometry(n, c, h, w, k, cg, r, s, oh, ow, st, pad, dil, int(groups))
