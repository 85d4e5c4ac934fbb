"""``bias_add``: add a per-channel bias along one axis (channels of NCHW, features of 2-D)."""

from __future__ import annotations

import math

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.kernels.family import KernelSource, kernel_family
from netcl.core.tensor import Tensor

from ._common import check_tensor, empty, launch_1d, normalize_axis, same_device
from ._elementwise_dispatch import host, np_result

__all__ = ["bias_add"]

_SRC = """
__kernel void bias_add(__global const T* x, __global const T* bias, __global T* y,
                       const int offx, const int offb, const int total, const int channels,
                       const int inner) {
    const int i = get_global_id(0);
    if (i >= total) return;
    ST(y, i, LD(x, offx + i) + LD(bias, offb + (i / inner) % channels));
}
"""


def _bias_golden() -> list[tuple[str, tuple[str]]]:
    return [(f"bias/bias_add-{dt}", (dt,)) for dt in FLOAT_DTYPES]


@kernel_family("ops.bias", golden=_bias_golden)
def bias_family(dtype: str) -> KernelSource:
    """``bias_add`` for ``dtype``: one work item per element (``launch_1d``)."""
    return KernelSource(_SRC, ("bias_add",), dtype)


def bias_add(x: Tensor, bias: Tensor, axis: int | None = None) -> Tensor:
    """``x + bias`` with ``bias`` broadcast along ``axis``.

    Args:
        x: any shape.
        bias: ``(x.shape[axis],)``, same dtype as ``x``.
        axis: the channel axis; default 1 for 3-D and higher (NCHW), the last axis otherwise.

    Raises:
        TypeError: non-Tensors, non-float or differing dtypes.
        IndexError: ``axis`` out of range.
        ValueError: ``bias`` of the wrong shape, tensors on different devices.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.zeros((2, 3)))
        >>> bias_add(x, Tensor.from_host(q, np.arange(3.0))).to_host().tolist()
        [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]
    """
    op = "bias_add"
    check_tensor(op, x)
    check_tensor(op, bias, "bias")
    same_device(op, x, bias)
    if x.dtype not in FLOAT_DTYPES or bias.dtype != x.dtype:
        raise TypeError(f"{op}: input and bias must share a float dtype, got {x.dtype} and "
                        f"{bias.dtype}")
    if x.ndim == 0:
        raise ValueError(f"{op}: input must have at least 1 dimension, got a scalar")
    ax = normalize_axis(op, (1 if x.ndim >= 3 else x.ndim - 1) if axis is None else axis, x.ndim)
    channels = x.shape[ax]
    if bias.shape != (channels,):
        raise ValueError(f"{op}: bias must have shape ({channels},) to match axis {ax} of "
                         f"input {x.shape}, got {bias.shape}")
    inner = math.prod(x.shape[ax + 1:])
    if x.array is not None:
        view = (channels,) + (1,) * (x.ndim - ax - 1)
        return np_result(x, x.dtype, np.add, host(x), host(bias).reshape(view))
    out = empty(x.queue, x.shape, x.dtype)
    kernel = bias_family(x.context, x.dtype).kernel
    x.wait()
    bias.wait()
    launch_1d(x.queue, kernel, x.size, x.buffer, bias.buffer, out, np.int32(x.offset),
              np.int32(bias.offset), np.int32(x.size), np.int32(channels), np.int32(max(inner, 1)))
    return out
