"""``bias_add``: add a per-channel bias along one axis (channels of NCHW, features of 2-D).

# NOTE [ Bias add on CPU devices ]
# ``bias_add`` (one work-item per element, the channel from a division and a modulo) suits
# GPUs; on OpenCL CPU devices it costs ~2 to 9 ns per element (PoCL pthread: 8.9 ms for
# 4096 x 256 float32, Intel CPU: 2.9 ms). There ``bias_add_rows`` gives each work-item one
# contiguous run sharing a bias pattern (a row of ``channels`` where ``inner == 1``, else a
# plane of ``inner`` under one channel) and loops over it: 0.2 ms and 0.4 ms for that shape
# (``vec_type_hint(float4)`` stops Intel's compiler from vectorizing across work-items,
# which turned the rows' loads into strided gathers: 1.1 ms without it).
# :func:`~netcl.ops._norm_kernels.ln_per_row` (is it a CPU device) picks the kernel.
"""

from __future__ import annotations

import math

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.kernels.family import KernelSource, kernel_family
from netcl.core.tensor import Tensor

from ._common import check_tensor, empty, launch_1d, normalize_axis, same_device
from ._elementwise_dispatch import host, np_result
from ._norm_kernels import ln_per_row

__all__ = ["bias_add"]

_SRC = """
__kernel void bias_add(__global const T* x, __global const T* bias, __global T* y,
                       const int offx, const int offb, const int total, const int channels,
                       const int inner) {
    const int i = get_global_id(0);
    if (i >= total) return;
    ST(y, i, LD(x, offx + i) + LD(bias, offb + (i / inner) % channels));
}

// CPU devices (NOTE [ Bias add on CPU devices ]): one work-item per contiguous run of ``run``
// elements sharing one bias pattern, a serial loop without a division per element. The
// vec_type_hint keeps Intel's compiler from vectorizing across work-items (strided gathers).
__kernel __attribute__((vec_type_hint(float4)))
void bias_add_rows(__global const T* x, __global const T* bias, __global T* y,
                   const int offx, const int offb, const int rows, const int run,
                   const int channels, const int inner) {
    const int r = get_global_id(0);
    if (r >= rows) return;
    const __global T* xr = x + offx + (long)r * run;
    __global T* yr = y + (long)r * run;
    const __global T* b = bias + offb;
    if (inner == 1) {
        for (int j = 0; j < run; ++j) ST(yr, j, LD(xr, j) + LD(b, j));
    } else {
        const CT v = LD(b, r % channels);
        for (int j = 0; j < run; ++j) ST(yr, j, LD(xr, j) + v);
    }
}

"""


def _bias_golden() -> list[tuple[str, tuple[str]]]:
    return [(f"bias/bias_add-{dt}", (dt,)) for dt in FLOAT_DTYPES]


@kernel_family("ops.bias", golden=_bias_golden)
def bias_family(dtype: str) -> KernelSource:
    """``bias_add`` for ``dtype``: one work item per element (``launch_1d``), and
    ``bias_add_rows`` for CPU devices (NOTE [ Bias add on CPU devices ])."""
    return KernelSource(_SRC, ("bias_add", "bias_add_rows"), dtype)


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
    kernels = bias_family(x.context, x.dtype).kernels
    x.wait()
    bias.wait()
    if ln_per_row(x.queue.device):
        run = channels if inner == 1 else inner
        rows = x.size // run if run else 0
        launch_1d(x.queue, kernels["bias_add_rows"], rows, x.buffer, bias.buffer, out,
                  np.int32(x.offset), np.int32(bias.offset), np.int32(rows), np.int32(run),
                  np.int32(channels), np.int32(inner))
        return out
    launch_1d(x.queue, kernels["bias_add"], x.size, x.buffer, bias.buffer, out,
              np.int32(x.offset), np.int32(bias.offset), np.int32(x.size), np.int32(channels),
              np.int32(max(inner, 1)))
    return out
