"""More of ``torch.nn``'s layers: Conv1d, ConvTranspose2d, GroupNorm, Dropout2d, Upsample and
AdaptiveMaxPool2d, each over its :mod:`netcl.nn.functional` function (device ops only), with
``device=``/``dtype=`` and PyTorch's initialisation and ``repr``.

Examples:
    >>> import numpy as np
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> up = ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, device=q)
    >>> up
    ConvTranspose2d(4, 2, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1))
    >>> up(Tensor.from_host(q, np.ones((1, 4, 5, 5)))).shape
    (1, 2, 10, 10)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from netcl.core.tensor import Tensor

from . import functional as F
from . import init
from ._layers import IntPair, conv_repr
from ._module import Module, Parameter, placement

__all__ = ["AdaptiveMaxPool2d", "Conv1d", "ConvTranspose2d", "Dropout2d", "GroupNorm",
           "Upsample"]


def _positive(layer: str, **values: int) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{layer}: {name} must be a positive int, got {v!r}")


def _pair(value: IntPair) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _check_groups(layer: str, in_channels: int, out_channels: int, groups: int) -> None:
    _positive(layer, in_channels=in_channels, out_channels=out_channels, groups=groups)
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"{layer}: groups={groups} must divide in_channels={in_channels} and "
                         f"out_channels={out_channels}")


def _init_conv(weight: Parameter, bias: Parameter | None, rng: np.random.Generator | None
               ) -> None:
    """PyTorch's convolution init: kaiming-uniform ``a = sqrt(5)`` weight, bias uniform in
    ``+-1/sqrt(fan_in)`` (fan_in from the weight's dim 1 and kernel, as PyTorch computes it
    for transposed convolutions too)."""
    init.kaiming_uniform_(weight, a=math.sqrt(5), rng=rng)
    if bias is not None:
        bound = 1 / math.sqrt(math.prod(weight.shape[1:]))
        init.uniform_(bias, -bound, bound, rng)


class Conv1d(Module):
    """1-D convolution over ``(N, C, L)`` input (:func:`netcl.nn.functional.conv1d`: the 2-D
    kernels on a unit height), ``padding`` an int, ``'valid'`` or ``'same'`` (stride 1).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> conv = Conv1d(3, 5, 4, padding="same", device=q)
        >>> conv, conv(Tensor.from_host(q, np.ones((2, 3, 9)))).shape
        (Conv1d(3, 5, kernel_size=(4,), stride=(1,), padding='same'), (2, 5, 9))
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int | str = 0, dilation: int = 1, groups: int = 1, bias: bool = True,
                 queue: Any = None, rng: np.random.Generator | None = None, *,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        _check_groups("Conv1d", in_channels, out_channels, groups)
        _positive("Conv1d", kernel_size=kernel_size, stride=stride, dilation=dilation)
        where = placement("Conv1d", device, dtype, queue)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.dilation = (kernel_size,), (stride,), (dilation,)
        self.padding: tuple[int] | str = (
            F.check_padding_mode("Conv1d", padding, self.stride) if isinstance(padding, str)
            else (int(padding),))
        self.weight = Parameter.from_shape(where[0], (out_channels, in_channels // groups,
                                                      kernel_size), where[1], fill=None)
        self.bias: Parameter | None = None
        if bias:
            self.bias = Parameter.from_shape(where[0], (out_channels,), where[1], fill=None)
        _init_conv(self.weight, self.bias, rng)

    def forward(self, x: Tensor) -> Tensor:
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        return F.conv1d(x, self.weight, self.bias, self.stride[0], padding, self.dilation[0],
                        self.groups)

    def extra_repr(self) -> str:
        return conv_repr(self)


class ConvTranspose2d(Module):
    """Transposed 2-D convolution (:func:`netcl.nn.functional.conv_transpose2d`), weight
    ``(C_in, C_out / groups, kH, kW)`` as PyTorch's; stride, padding, ``output_padding``,
    dilation and groups.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair,
                 stride: IntPair = 1, padding: IntPair = 0, output_padding: IntPair = 0,
                 groups: int = 1, bias: bool = True, dilation: IntPair = 1, queue: Any = None,
                 rng: np.random.Generator | None = None, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _check_groups("ConvTranspose2d", in_channels, out_channels, groups)
        where = placement("ConvTranspose2d", device, dtype, queue)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _pair(kernel_size), _pair(stride)
        self.padding, self.output_padding = _pair(padding), _pair(output_padding)
        self.dilation = _pair(dilation)
        if any(o >= max(s, d) for o, s, d in zip(self.output_padding, self.stride,
                                                  self.dilation)):
            raise ValueError(f"ConvTranspose2d: output_padding {self.output_padding} must be "
                             f"smaller than stride {self.stride} or dilation {self.dilation}")
        self.weight = Parameter.from_shape(
            where[0], (in_channels, out_channels // groups, *self.kernel_size), where[1],
            fill=None)
        self.bias: Parameter | None = None
        if bias:
            self.bias = Parameter.from_shape(where[0], (out_channels,), where[1], fill=None)
        _init_conv(self.weight, self.bias, rng)

    def forward(self, x: Tensor) -> Tensor:
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)

    def extra_repr(self) -> str:
        return conv_repr(self)


class GroupNorm(Module):
    """Normalize ``num_groups`` groups of channels of ``(N, C, ...)`` input, then a learnable
    per-channel scale and shift (:func:`netcl.nn.functional.group_norm`).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> gn = GroupNorm(2, 4, device=q)
        >>> y = gn(Tensor.from_host(q, np.random.default_rng(0).normal(size=(3, 4, 5))))
        >>> gn, bool(abs(y.to_host()[:, :2].mean()) < 1e-5)
        (GroupNorm(2, 4, eps=1e-05, affine=True), True)
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, queue: Any = None, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _positive("GroupNorm", num_groups=num_groups, num_channels=num_channels)
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_groups={num_groups} must divide "
                             f"num_channels={num_channels}")
        q, dt = placement("GroupNorm", device, dtype, queue)
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups, num_channels, eps, affine)
        self.weight: Parameter | None = None
        self.bias: Parameter | None = None
        if affine:
            self.weight = Parameter.from_shape(q, (num_channels,), dt, fill=1)
            self.bias = Parameter.from_shape(q, (num_channels,), dt, fill=0)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected (N, {self.num_channels}, ...) input, got "
                             f"{x.shape}")
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class Dropout2d(Module):
    """Zero whole channels with probability ``p`` in training mode (the kept ones scaled by
    ``1 / (1 - p)``), identity in eval mode (:func:`netcl.nn.functional.dropout2d`; masks
    from the default generator, :func:`netcl.nn.manual_seed`). ``inplace`` is ignored."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout2d: p must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout2d(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class Upsample(Module):
    """Resize to ``size`` or by ``scale_factor``, ``mode`` ``"nearest"``, ``"linear"`` or
    ``"bilinear"`` (:func:`netcl.nn.functional.interpolate`).

    Examples:
        >>> Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        Upsample(scale_factor=2.0, mode='bilinear')
    """

    def __init__(self, size: int | tuple[int, ...] | None = None,
                 scale_factor: float | tuple[float, ...] | None = None, mode: str = "nearest",
                 align_corners: bool | None = None) -> None:
        super().__init__()
        if (size is None) == (scale_factor is None):
            raise ValueError("Upsample: give exactly one of size and scale_factor")
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = (float(scale_factor) if isinstance(scale_factor, (int, float))
                             else scale_factor)

    def forward(self, x: Tensor) -> Tensor:
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners)

    def extra_repr(self) -> str:
        what = (f"size={self.size}" if self.size is not None
                else f"scale_factor={self.scale_factor}")
        return f"{what}, mode={self.mode!r}"


class AdaptiveMaxPool2d(Module):
    """Max pooling to a fixed ``output_size`` over PyTorch's adaptive bins
    (:func:`netcl.nn.functional.adaptive_max_pool2d`)."""

    def __init__(self, output_size: int | tuple[int | None, int | None],
                 return_indices: bool = False) -> None:
        super().__init__()
        if return_indices:
            raise ValueError("AdaptiveMaxPool2d: return_indices is not supported")
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_max_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
