"""The layers: Linear, Conv2d, normalization, embedding, dropout, pooling, activations, Flatten.

Every forward goes through :mod:`netcl.nn.functional` (the differentiable ops of
:mod:`netcl.autograd`), so every layer is differentiable and follows
:func:`netcl.nn.amp.autocast`.
Parameters are created on ``device`` (PyTorch's keyword: a selector string such as ``"cpu"``
or ``"cl"``, a DeviceHandle or a queue; ``queue=`` is netcl's older spelling of the same), else
on the active device (``with netcl.core.device.device(...)``), in ``dtype`` (float32 by
default), and initialised as PyTorch does. ``repr`` shows each layer's settings as PyTorch's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import netcl.ops as _raw
from netcl.core.tensor import Tensor, copy_from_host
from netcl.ops import Generator

from . import functional as F
from . import init
from ._counter import count_up
from ._module import Module, Parameter, placement

__all__ = [
    "AdaptiveAvgPool2d",
    "AvgPool2d",
    "BatchNorm1d",
    "BatchNorm2d",
    "Conv2d",
    "Dropout",
    "Embedding",
    "Flatten",
    "GELU",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "MaxPool2d",
    "ReLU",
    "SiLU",
    "Sigmoid",
    "Tanh",
]

IntPair = int | tuple[int, int]


def _param(where: tuple[Any, str], shape: Sequence[int], fill: float | None = None
           ) -> Parameter:
    """A parameter of ``shape`` on ``where`` = :func:`placement`'s ``(queue, dtype)``."""
    return Parameter.from_shape(where[0], tuple(shape), where[1], fill=fill)


def _pair(value: IntPair) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def _positive(layer: str, **values: int) -> None:
    for name, v in values.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{layer}: {name} must be a positive int, got {v!r}")


class Linear(Module):
    """``y = x @ W.T + b`` with ``W`` of shape (out_features, in_features).

    Initialised like PyTorch: ``W`` kaiming-uniform with ``a = sqrt(5)``, ``b`` uniform in
    ``+-1/sqrt(in_features)``.

    Shape:
        input ``(*, in_features)``, output ``(*, out_features)``.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> layer = Linear(4, 3, queue=q, rng=np.random.default_rng(0))
        >>> layer(Tensor.from_host(q, np.ones((2, 4)))).shape
        (2, 3)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 queue: Any = None, rng: np.random.Generator | None = None, *,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        _positive("Linear", in_features=in_features, out_features=out_features)
        where = placement("Linear", device, dtype, queue)
        self.in_features, self.out_features = in_features, out_features
        self.weight = _param(where, (out_features, in_features))
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), rng=rng)
        self.bias: Parameter | None = None
        if bias:
            self.bias = _param(where, (out_features,))
            bound = 1 / math.sqrt(in_features)
            init.uniform_(self.bias, -bound, bound, rng)

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1:] != (self.in_features,):
            raise ValueError(f"Linear: expected input (*, {self.in_features}), got {x.shape}")
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Conv2d(Module):
    """2-D convolution over NCHW input, with stride, padding, dilation and groups.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> conv = Conv2d(3, 8, 3, padding=1, queue=q, rng=np.random.default_rng(0))
        >>> conv(Tensor.from_host(q, np.ones((2, 3, 7, 7)))).shape
        (2, 8, 7, 7)
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: IntPair,
                 stride: IntPair = 1, padding: IntPair | str = 0, dilation: IntPair = 1,
                 groups: int = 1, bias: bool = True, queue: Any = None,
                 rng: np.random.Generator | None = None, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _positive("Conv2d", in_channels=in_channels, out_channels=out_channels, groups=groups)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: groups={groups} must divide in_channels={in_channels} "
                             f"and out_channels={out_channels}")
        where = placement("Conv2d", device, dtype, queue)
        kh, kw = _pair(kernel_size)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.dilation = (kh, kw), _pair(stride), _pair(dilation)
        self.padding: tuple[int, int] | str = (
            F.check_padding_mode("Conv2d", padding, self.stride) if isinstance(padding, str)
            else _pair(padding))
        self.weight = _param(where, (out_channels, in_channels // groups, kh, kw))
        init.kaiming_uniform_(self.weight, a=math.sqrt(5), rng=rng)
        self.bias: Parameter | None = None
        if bias:
            self.bias = _param(where, (out_channels,))
            bound = 1 / math.sqrt(in_channels // groups * kh * kw)
            init.uniform_(self.bias, -bound, bound, rng)

    def forward(self, x: Tensor) -> Tensor:
        # F.conv2d takes padding strings; mypy sees the star-imported autograd signature
        return F.conv2d(x, self.weight, self.bias, stride=self.stride,
                        padding=self.padding,  # type: ignore[arg-type]
                        dilation=self.dilation, groups=self.groups)

    def extra_repr(self) -> str:
        return conv_repr(self)


def conv_repr(conv: Any) -> str:
    """PyTorch's convolution ``extra_repr``: sizes, kernel and stride always, the rest when
    not the default."""
    text = (f"{conv.in_channels}, {conv.out_channels}, kernel_size={conv.kernel_size}, "
            f"stride={conv.stride}")
    zero = (0,) * len(conv.stride)
    if conv.padding != zero:
        text += f", padding={conv.padding!r}"
    if conv.dilation != (1,) * len(conv.stride):
        text += f", dilation={conv.dilation}"
    if getattr(conv, "output_padding", zero) != zero:
        text += f", output_padding={conv.output_padding}"
    if conv.groups != 1:
        text += f", groups={conv.groups}"
    if conv.bias is None:
        text += ", bias=False"
    return text


class _BatchNorm(Module):
    expected_ndim: tuple[int, ...] = ()
    running_mean: Tensor
    running_var: Tensor
    num_batches_tracked: Tensor

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = True, queue: Any = None, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        _positive(type(self).__name__, num_features=num_features)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine = affine
        where = placement(type(self).__name__, device, dtype, queue)
        q, dt = where
        self.weight: Parameter | None = None
        self.bias: Parameter | None = None
        if affine:
            self.weight = _param(where, (num_features,), fill=1)
            self.bias = _param(where, (num_features,), fill=0)
        self.register_buffer("running_mean", Tensor.from_shape(q, (num_features,), dt, fill=0))
        self.register_buffer("running_var", Tensor.from_shape(q, (num_features,), dt, fill=1))
        # PyTorch's count of training forwards, a 0-d int64 buffer (torchvision state dicts
        # carry it): one single-work-item kernel per training forward (as PyTorch's add_),
        # which a captured step replays too; netcl's batch norm does not read it.
        self.register_buffer("num_batches_tracked", Tensor.from_shape(q, (), "int64", fill=0))

    def forward(self, x: Tensor) -> Tensor:
        name = type(self).__name__
        if x.ndim not in self.expected_ndim or x.shape[1] != self.num_features:
            raise ValueError(f"{name}: expected input of {self.expected_ndim} dims with "
                             f"{self.num_features} channels at dim 1, got {x.shape}")
        if self.training:
            count_up(self.num_batches_tracked)
        return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            training=self.training, momentum=self.momentum, eps=self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats=True")


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L) input, with running statistics for eval mode."""

    expected_ndim = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W) input, with running statistics for eval mode.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> bn = BatchNorm2d(3, queue=q)
        >>> y = bn(Tensor.from_host(q, np.random.default_rng(0).normal(size=(4, 3, 5, 5))))
        >>> bool(abs(y.to_host().mean()) < 1e-5)
        True
    """

    expected_ndim = (4,)


class LayerNorm(Module):
    """Normalize over the last ``len(normalized_shape)`` dims, with learnable scale and shift."""

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, queue: Any = None, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(
            normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        where = placement("LayerNorm", device, dtype, queue)
        self.weight: Parameter | None = None
        self.bias: Parameter | None = None
        if elementwise_affine:
            self.weight = _param(where, shape, fill=1)
            self.bias = _param(where, shape, fill=0)

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, eps=self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim`` (N(0, 1) init).

    With ``padding_idx`` (keyword; PyTorch's third argument, netcl's is ``queue``) that row
    starts at zero and gets no gradient: positions holding it output zeros (PyTorch outputs
    the row itself, which stays zero unless set by hand).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> emb = Embedding(5, 2, padding_idx=0, device=q)
        >>> emb(Tensor.from_host(q, np.array([0, 3]))).to_host()[0].tolist()
        [0.0, 0.0]
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, queue: Any = None,
                 rng: np.random.Generator | None = None, *, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        _positive("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx must be in [-{num_embeddings}, "
                                 f"{num_embeddings}), got {padding_idx}")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.weight = _param(placement("Embedding", device, dtype, queue),
                             (num_embeddings, embedding_dim))
        init.normal_(self.weight, rng=rng)
        if padding_idx is not None:
            rows = self.weight.to_host()
            rows[padding_idx] = 0
            copy_from_host(self.weight, rows)

    def forward(self, indices: Tensor) -> Tensor:
        out = F.embedding(indices, self.weight)
        if self.padding_idx is None:
            return out
        keep = _raw.cast(_raw.ne(indices, self.padding_idx), out.dtype)
        return F.mul(out, _raw.reshape(keep, (*indices.shape, 1)))

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class Dropout(Module):
    """Zero elements with probability ``p`` in training mode (scaled by ``1/(1-p)``); identity
    in eval mode.

    Masks come from the default generator (:func:`netcl.nn.manual_seed`), which every call
    advances: successive calls, and different Dropout layers, draw different masks, and
    ``manual_seed(s)`` replays a whole run. With ``seed`` the layer keeps a Philox stream of
    its own instead (the same masks whatever else draws random numbers). Either way the masks
    are the same on every backend, and a step captured with :func:`netcl.runtime.capture`
    draws, replay after replay, the masks eager calls would draw.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> from netcl.nn import manual_seed
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.ones(1000))
        >>> _ = manual_seed(0)
        >>> a, b = Dropout(0.5)(x).to_host(), Dropout(0.5)(x).to_host()
        >>> bool((a != b).any())  # two layers, two masks
        True
        >>> _ = manual_seed(0)
        >>> bool((Dropout(0.5)(x).to_host() == a).all())  # replayed
        True
    """

    def __init__(self, p: float = 0.5, inplace: bool = False, seed: int | None = None) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace
        self.generator = None if seed is None else Generator(seed)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if self.generator is None:
            return F.dropout(x, self.p)
        return F.dropout(x, self.p, seed=self.generator.seed,
                         offset=self.generator.take(x.size))

    def extra_repr(self) -> str:
        return f"p={self.p}"


class _Pool(Module):
    def __init__(self, kernel_size: IntPair, stride: IntPair | None = None,
                 padding: IntPair = 0, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        stride = self.kernel_size if self.stride is None else self.stride
        return (f"kernel_size={self.kernel_size}, stride={stride}, padding={self.padding}, "
                f"ceil_mode={self.ceil_mode}")


class MaxPool2d(_Pool):
    """Max over ``kernel_size`` windows (ties send the gradient to the first maximum);
    ``ceil_mode`` adds a last, partial window where the input does not divide evenly."""

    def forward(self, x: Tensor) -> Tensor:
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding,
                            ceil_mode=self.ceil_mode)


class AvgPool2d(_Pool):
    """Mean over ``kernel_size`` windows, PyTorch's divisor (:func:`netcl.ops.avg_pool2d`).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> x = Tensor.from_host(manager.default("cpu").queue, np.arange(9.0).reshape(1, 1, 3, 3))
        >>> AvgPool2d(2, ceil_mode=True)(x).to_host().reshape(-1).tolist()
        [2.0, 3.5, 6.5, 8.0]
    """

    def __init__(self, kernel_size: IntPair, stride: IntPair | None = None,
                 padding: IntPair = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode)
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding,
                            ceil_mode=self.ceil_mode, count_include_pad=self.count_include_pad)


class AdaptiveAvgPool2d(Module):
    """Mean pooling to a fixed ``output_size``; ``1`` is global average pooling."""

    def __init__(self, output_size: IntPair) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class Flatten(Module):
    """Merge dims ``start_dim..end_dim`` (default: all but the batch dim)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return F.flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class ReLU(Module):
    """``max(x, 0)``. ``inplace`` is accepted for PyTorch code and ignored (netcl computes out
    of place)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    """``x`` if positive else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class GELU(Module):
    """Gaussian error linear unit (``approximate`` = "none" or "tanh")."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    """``x * sigmoid(x)`` (``inplace`` ignored, as in :class:`ReLU`)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)
