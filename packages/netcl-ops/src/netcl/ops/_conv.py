"""``conv2d`` (NCHW, stride, padding, dilation, groups) and its two backward computations.

NumPy: stride-1 convolutions build "wide" im2col columns from contiguous slices of the
flattened padded input and run one BLAS GEMM per chunk of images for the forward and each
gradient (NOTE [ Wide im2col on NumPy ]); other strides take im2col through a strided window
view and batched matmuls. Both are chunked over images to bound the column buffer. OpenCL: the
:class:`~netcl.core.kernel_selector.KernelSelector`, by ``_conv_rule``'s rule, picks one of

- ``CONV2D_NAIVE``: one work-item per output, a gather over the window;
- ``CONV2D_IM2COL``: an im2col kernel into a pooled scratch buffer, then the GEMM family;
- ``CONV2D_IMPLICIT_GEMM``: the GEMM family reading its B operand straight from the input;
- ``CONV2D_TILED_LOCAL``: direct convolution over input patches staged in local memory;
- ``CONV2D_WINOGRAD``: F(2x2, 3x3) (3x3, stride 1, dilation 1, one group; forced onto any
  other geometry it gives way to the rule's choice);
- ``CONV2D_WINOGRAD_F4``: F(4x4, 3x3), the same geometries (6x6 tiles, 36 GEMMs);
- ``CONV2D_IMPLICIT_TILED``: a register-tiled implicit GEMM of its own (``_conv_igemm``).

The gradients are chosen by the same selector (a query of direction ``"data"`` or
``"weight"``) from two variants. ``CONV2D_IM2COL``, the column path: ``conv2d_backward_data``
(a transposed convolution) is ``W^T @ grad_out`` through the GEMM family, then a col2im
*gather* (no atomics); ``conv2d_backward_weight`` is im2col, one GEMM per image into partial
sums, and a reduction over the images. ``CONV2D_IMPLICIT_TILED``: one implicit-GEMM kernel
each, gathering the operands from the tensors (the weight gradient's reduction split over
work-groups, its partial sums added in a fixed order). Both Winograd variants compute both
gradients of their geometries too (``_conv_winograd``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from netcl.core.dtypes import FLOAT_DTYPES
from netcl.core.kernel_selector import (
    AnyVariant,
    KernelConfig,
    KernelVariant,
    get_kernel_selector,
)
from netcl.core.kernels.primitives import launch
from netcl.core.tensor import Tensor

from . import _conv_kernels as ck
from ._common import check_tensor, empty, same_device
from ._conv_family import PlaneGeometry, TileGeometry, conv2d_family, geometry_of
from ._conv_geometry import ConvGeometry, IntPair, conv_geometry
from ._conv_igemm import (
    igemm_backward_data,
    igemm_backward_data_phase,
    igemm_backward_weight,
    igemm_forward,
)
from ._conv_mma import conv2d_mma, conv2d_mma_applicable
from ._conv_rule import CONV2D_FAMILY, IMPLICIT_TILED, PHASE_DATA, WINOGRAD_F4, ConvQuery
from ._conv_winograd import conv2d_winograd, conv2d_winograd_weight, data_geometry
from ._elementwise_dispatch import host, np_result
from ._matmul_launch import Operand, operand, run_gemm
from ._movement import contiguous

__all__ = ["DATA_RUNNERS", "RUNNERS", "WEIGHT_RUNNERS", "conv2d", "conv2d_backward_data",
           "conv2d_backward_weight"]

# Column buffers (im2col, Winograd transforms) are filled a chunk of images at a time so the
# scratch stays below this many elements (and every kernel index below 2**31).
SCRATCH_ELEMENTS = 1 << 25


def _check_dtypes(op: str, **tensors: Tensor | None) -> str:
    present = {name: t for name, t in tensors.items() if t is not None}
    dtypes = {t.dtype for t in present.values()}
    first = next(iter(present.values()))
    if first.dtype not in FLOAT_DTYPES or len(dtypes) != 1:
        listed = ", ".join(f"{name} {t.dtype}" for name, t in present.items())
        raise TypeError(f"{op}: tensors must share one float dtype, got {listed}")
    return first.dtype


# -- NumPy ------------------------------------------------------------------------------------


def _chunk(n: int, per_image: int) -> int:
    return max(1, min(n, SCRATCH_ELEMENTS // max(1, per_image)))


def _compute(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """float16 computes in float32 (NumPy has no float16 BLAS)."""
    return a.astype(np.float32) if a.dtype == np.float16 else a


def _im2col_np(x: np.ndarray[Any, Any], g: ConvGeometry) -> np.ndarray[Any, Any]:
    """``(n, groups, cg*r*s, oh*ow)`` columns of images ``x`` (a copy unless pointwise)."""
    n = x.shape[0]
    if g.pointwise:
        return x.reshape(n, g.groups, g.cg, g.pixels)
    ph, pw = g.padding
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
    sn, sc, sh, sw = padded.strides
    view = np.lib.stride_tricks.as_strided(
        padded, (n, g.c, g.r, g.s, g.oh, g.ow),
        (sn, sc, sh * g.dilation[0], sw * g.dilation[1], sh * g.stride[0], sw * g.stride[1]),
        writeable=False,
    )
    return view.reshape(n, g.groups, g.crs, g.pixels)


# NOTE [ Wide im2col on NumPy ]
# A stride-1 convolution reads, for kernel tap (r, s), the padded plane shifted by
# ``r*dh*Wp + s*dw`` elements (``Wp`` the padded width). Computing the output on the padded
# width (``OH x Wp``, the last ``Wp - OW`` columns of each row garbage) makes every tap's
# columns one contiguous slice of the flattened padded plane, so im2col is R*S slice copies
# with runs of ``OH*Wp`` elements instead of an element-wise strided gather (3x faster for the
# digits CNN's 16-channel 8x8 3x3 layer: 0.27 ms against 0.78 ms at batch 64). The columns are
# laid out channel-major, ``(C*R*S, N*OH*Wp)``, so the forward, the weight gradient and the
# data gradient are each one GEMM over the whole chunk of images (not one per image), and
# col2im is R*S contiguous slice additions. The garbage columns cost ``Wp/OW`` more GEMM work;
# the gradients see zeros there (``_grad_wide``), so nothing leaks into the results.


@functools.lru_cache(maxsize=64)
def _wide(g: ConvGeometry) -> tuple[int, int, int, tuple[int, ...]]:
    """``(Hp, Wp, tail, offsets)`` of the wide path: padded sizes, the slack after each
    flattened plane that the last tap's slice runs into, and each tap's start, in (r, s)
    order."""
    hp, wp = g.h + 2 * g.padding[0], g.w + 2 * g.padding[1]
    dh, dw = g.dilation
    offsets = tuple(r * dh * wp + s * dw for r in range(g.r) for s in range(g.s))
    return hp, wp, (g.s - 1) * dw, offsets


def _use_wide(g: ConvGeometry) -> bool:
    return g.stride == (1, 1) and not g.pointwise


def _padded_cmajor(x: np.ndarray[Any, Any], g: ConvGeometry) -> np.ndarray[Any, Any]:
    """``(C, m, Hp*Wp + tail)``: images ``x`` zero-padded, flattened, channel-major."""
    hp, wp, tail, _ = _wide(g)
    ph, pw = g.padding
    m = x.shape[0]
    buf = np.zeros((g.c, m, hp * wp + tail), dtype=x.dtype)
    planes = buf[:, :, :hp * wp].reshape(g.c, m, hp, wp)
    planes[:, :, ph:ph + g.h, pw:pw + g.w] = x.transpose(1, 0, 2, 3)
    return buf


def _cols_wide(x: np.ndarray[Any, Any], g: ConvGeometry) -> np.ndarray[Any, Any]:
    """``(groups, cg*R*S, m*OH*Wp)`` wide columns of images ``x`` (NOTE [ Wide im2col ])."""
    _, wp, _, offsets = _wide(g)
    m, span = x.shape[0], g.oh * wp
    padded = _padded_cmajor(x, g)
    cols = np.empty((g.c, g.r * g.s, m, span), dtype=x.dtype)
    for tap, off in enumerate(offsets):
        cols[:, tap] = padded[:, :, off:off + span]
    return cols.reshape(g.groups, g.crs, m * span)


def _grad_wide(gy: np.ndarray[Any, Any], g: ConvGeometry) -> np.ndarray[Any, Any]:
    """``(groups, kg, m*OH*Wp)``: ``gy`` channel-major on the padded width, zeros in the
    garbage columns."""
    _, wp, _, _ = _wide(g)
    m = gy.shape[0]
    out = np.zeros((g.k, m, g.oh, wp), dtype=gy.dtype)  # faster than zeroing the slice after
    out[..., :g.ow] = gy.transpose(1, 0, 2, 3)
    return out.reshape(g.groups, g.kg, m * g.oh * wp)


def _gemm(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """``a @ b`` over a leading groups axis (a plain 2-D GEMM for one group)."""
    if a.shape[0] == 1:
        return np.asarray(np.matmul(a[0], b[0]))[None]
    return np.asarray(np.matmul(a, b))


def _conv_np(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any], b: Any,
             g: ConvGeometry) -> np.ndarray[Any, Any]:
    x, w = _compute(x), _compute(w)
    wm = w.reshape(g.groups, g.kg, g.crs)
    if not _use_wide(g):
        return _conv_strided_np(x, wm, b, g)
    _, wp, _, _ = _wide(g)
    y = np.empty((g.n, g.k, g.oh, g.ow), dtype=x.dtype)
    step = _chunk(g.n, g.c * g.r * g.s * g.oh * wp)
    for n0 in range(0, g.n, step):
        m = min(step, g.n - n0)
        # out^T = cols^T @ W^T: OpenBLAS runs (m*OH*Wp, crs) @ (crs, kg) faster than the
        # transposed product (1.4 ms against 1.9 ms at batch 64, 32 <- 16 channels, 8x8)
        cols = _cols_wide(x[n0:n0 + m], g)
        wide = _gemm(cols.transpose(0, 2, 1), wm.transpose(0, 2, 1))  # (G, m*OH*Wp, kg)
        planes = wide.reshape(g.groups, m, g.oh, wp, g.kg)[:, :, :, :g.ow].transpose(1, 0, 4, 2, 3)
        dest = y[n0:n0 + m].reshape(m, g.groups, g.kg, g.oh, g.ow)
        if b is None:
            dest[...] = planes
        else:  # the bias rides on the copy out of the wide layout
            np.add(planes, _compute(b).reshape(1, g.groups, g.kg, 1, 1), out=dest)
    return y


def _conv_strided_np(x: np.ndarray[Any, Any], wm: np.ndarray[Any, Any], b: Any,
                     g: ConvGeometry) -> np.ndarray[Any, Any]:
    out = np.empty((g.n, g.groups, g.kg, g.pixels), dtype=x.dtype)
    step = _chunk(g.n, g.c * g.r * g.s * g.pixels)
    for n0 in range(0, g.n, step):
        cols = _im2col_np(x[n0:n0 + step], g)
        np.matmul(wm, cols, out=out[n0:n0 + step])
    y = out.reshape(g.n, g.k, g.oh, g.ow)
    if b is not None:
        y += _compute(b).reshape(1, g.k, 1, 1)
    return y


def _conv_backward_data_np(gy: np.ndarray[Any, Any], w: np.ndarray[Any, Any],
                           g: ConvGeometry) -> np.ndarray[Any, Any]:
    gy, w = _compute(gy), _compute(w)
    wt = w.reshape(g.groups, g.kg, g.crs).swapaxes(-1, -2)  # (G, crs, kg)
    if _use_wide(g):
        return _conv_backward_data_wide(gy, wt, g)
    gm = gy.reshape(g.n, g.groups, g.kg, g.pixels)
    if g.pointwise:
        return np.asarray(np.matmul(wt, gm)).reshape(g.n, g.c, g.h, g.w)
    ph, pw = g.padding
    (sh, sw), (dh, dw) = g.stride, g.dilation
    dxp = np.zeros((g.n, g.c, g.h + 2 * ph + sh, g.w + 2 * pw + sw), dtype=gy.dtype)
    step = _chunk(g.n, g.c * g.r * g.s * g.pixels)
    for n0 in range(0, g.n, step):
        cols = np.matmul(wt, gm[n0:n0 + step]).reshape(-1, g.c, g.r, g.s, g.oh, g.ow)
        for r in range(g.r):
            for s in range(g.s):
                h0, w0 = r * dh, s * dw
                dxp[n0:n0 + step, :, h0:h0 + g.oh * sh:sh, w0:w0 + g.ow * sw:sw] += cols[:, :, r, s]
    return dxp[:, :, ph:ph + g.h, pw:pw + g.w]


def _conv_backward_data_wide(gy: np.ndarray[Any, Any], wt: np.ndarray[Any, Any],
                             g: ConvGeometry) -> np.ndarray[Any, Any]:
    """``W^T @ grad`` on the padded width, then col2im as R*S slice additions."""
    hp, wp, tail, offsets = _wide(g)
    ph, pw = g.padding
    span = g.oh * wp
    dx = np.empty((g.n, g.c, g.h, g.w), dtype=gy.dtype)
    step = _chunk(g.n, g.c * g.r * g.s * span)
    for n0 in range(0, g.n, step):
        m = min(step, g.n - n0)
        dcols = _gemm(wt, _grad_wide(gy[n0:n0 + m], g)).reshape(g.c, g.r * g.s, m, span)
        dxp = np.zeros((g.c, m, hp * wp + tail), dtype=gy.dtype)
        for tap, off in enumerate(offsets):
            dxp[:, :, off:off + span] += dcols[:, tap]
        planes = dxp[:, :, :hp * wp].reshape(g.c, m, hp, wp)
        dx[n0:n0 + m].transpose(1, 0, 2, 3)[...] = planes[:, :, ph:ph + g.h, pw:pw + g.w]
    return dx


def _conv_backward_weight_np(x: np.ndarray[Any, Any], gy: np.ndarray[Any, Any],
                             g: ConvGeometry) -> np.ndarray[Any, Any]:
    x, gy = _compute(x), _compute(gy)
    dw = np.zeros((g.groups, g.kg, g.crs), dtype=x.dtype)
    if _use_wide(g):
        _, wp, _, _ = _wide(g)
        step = _chunk(g.n, g.c * g.r * g.s * g.oh * wp)
        for n0 in range(0, g.n, step):
            cols = _cols_wide(x[n0:n0 + step], g)  # (G, crs, m*OH*Wp)
            # dW^T = cols @ grad^T (twice as fast in OpenBLAS as grad @ cols^T here)
            dw += _gemm(cols, _grad_wide(gy[n0:n0 + step], g).transpose(0, 2, 1)).transpose(
                0, 2, 1)
        return dw.reshape(g.k, g.cg, g.r, g.s)
    gm = gy.reshape(g.n, g.groups, g.kg, g.pixels)
    step = _chunk(g.n, g.c * g.r * g.s * g.pixels)
    for n0 in range(0, g.n, step):
        cols = _im2col_np(x[n0:n0 + step], g)  # (m, G, crs, P)
        m = cols.shape[0]
        # one GEMM per group over all images of the chunk: (kg, m*P) @ (m*P, crs)
        a = gm[n0:n0 + m].transpose(1, 2, 0, 3).reshape(g.groups, g.kg, m * g.pixels)
        b = cols.transpose(1, 0, 3, 2).reshape(g.groups, m * g.pixels, g.crs)
        dw += np.matmul(a, b)
    return dw.reshape(g.k, g.cg, g.r, g.s)


# -- OpenCL -----------------------------------------------------------------------------------


def _scratch(queue: Any, elements: int, dtype: str) -> Tensor:
    """A pooled, uninitialized scratch buffer (no fresh driver allocation per call)."""
    return Tensor.from_shape(queue, (elements,), dtype, fill=None)


def _im2col(x: Tensor, cols: Tensor, g: ConvGeometry, n0: int, m: int) -> None:
    built = conv2d_family(x.context, "im2col", x.dtype)
    x.wait()
    planes = geometry_of(built, PlaneGeometry)
    for row0, gsize in planes.blocks(g.ow, g.oh, m * g.c * g.r * g.s):
        launch(x.queue, built.kernel, gsize, None, x.buffer, cols,
               np.int32(x.offset + n0 * g.c * g.h * g.w), np.int32(row0), np.int32(g.c),
               *(np.int32(v) for v in g.scalars()))


def _columns(x: Tensor, g: ConvGeometry, n0: int, m: int, cols: Tensor | None) -> Operand:
    """The B operand (``crs x P`` per image and group) for images ``[n0, n0 + m)``."""
    if cols is None:  # pointwise: the input itself
        return operand(x, g.pixels, g.c * g.pixels, g.cg * g.pixels, offset=n0 * g.c * g.pixels)
    _im2col(x, cols, g, n0, m)
    return operand(cols, g.pixels, g.c * g.r * g.s * g.pixels, g.crs * g.pixels)


def _conv_gemm(x: Tensor, weight: Tensor, bias: Tensor | None, g: ConvGeometry, out: Tensor,
               config: KernelConfig | None) -> None:
    """im2col (``config is None``: tiles chosen for the GEMM) or implicit GEMM (``config``)."""
    queue = x.queue
    a = operand(weight, g.crs, 0, g.kg * g.crs)
    bias_args: dict[str, Any] = {}
    if bias is not None:
        bias = contiguous(bias)  # NOTE [ Offset views in conv2d ]
        bias.wait()
        bias_args = {"bias": bias.buffer, "bias_mode": 1, "sbias": g.kg}
    if config is not None and not g.pointwise:  # implicit GEMM: B gathered from x directly
        run_gemm(queue, config, x.dtype, a,
                 operand(x, 0, g.c * g.h * g.w, g.cg * g.h * g.w),
                 operand(out, g.pixels, g.k * g.pixels, g.kg * g.pixels),
                 g.kg, g.pixels, g.crs, batch=(g.n, g.groups),
                 b_loader=ck.IMPLICIT_B_LOADER, extra_params=ck.IMPLICIT_PARAMS,
                 extra_args=[np.int32(v) for v in (g.h, g.w, g.ow, g.r, g.s, *g.stride,
                                                   *g.padding, *g.dilation)],
                 **bias_args)
        return
    if config is None:
        config = get_kernel_selector(queue.device).select_matmul_kernel(
            g.kg, g.pixels, g.crs, x.dtype)
    per_image = g.c * g.r * g.s * g.pixels
    step = g.n if g.pointwise else _chunk(g.n, per_image)
    cols = None if g.pointwise else _scratch(queue, step * per_image, x.dtype)
    for n0 in range(0, g.n, step):
        m = min(step, g.n - n0)
        b = _columns(x, g, n0, m, cols)
        c = operand(out, g.pixels, g.k * g.pixels, g.kg * g.pixels, offset=n0 * g.k * g.pixels)
        run_gemm(queue, config, x.dtype, a, b, c, g.kg, g.pixels, g.crs, batch=(m, g.groups),
                 **bias_args)


def _conv_naive(x: Tensor, weight: Tensor, bias: Tensor | None, g: ConvGeometry,
                out: Tensor) -> None:
    built = conv2d_family(x.context, "naive", x.dtype)
    built.launch(x.queue, out.size, x, weight, x if bias is None else bias, out,
                 np.int32(out.size), np.int32(g.c), np.int32(g.h), np.int32(g.w),
                 np.int32(g.k), np.int32(g.r), np.int32(g.s), np.int32(g.oh), np.int32(g.ow),
                 *(np.int32(v) for v in (*g.stride, *g.padding, *g.dilation)),
                 np.int32(g.groups), np.int32(bias is not None))


def _conv_tiled_local(x: Tensor, weight: Tensor, bias: Tensor | None, g: ConvGeometry,
                      out: Tensor) -> None:
    window = (g.r, g.s, *g.stride, *g.dilation)
    built = conv2d_family(x.context, "tiled_local", x.dtype, window)
    gsize, lsize = geometry_of(built, TileGeometry).grid(g)
    launch(x.queue, built.kernel, gsize, lsize, x, weight, x if bias is None else bias, out,
           *(np.int32(v) for v in (g.c, g.h, g.w, g.k, g.oh, g.ow, *g.padding, g.groups)),
           np.int32(bias is not None))


# NOTE [ Offset views in conv2d ]
# A tensor may start some elements into its buffer (a slice of a bigger one). The GEMM paths
# pass x's and the weight's offsets to the kernels, but the direct kernels (naive, tiled local)
# and Winograd's weight and output transforms take whole buffers, and the GEMM epilogue reads
# the bias from element 0: those get copies at offset 0 (``contiguous``; no copy for offset 0,
# the usual case).


def _whole(t: Tensor | None) -> Any:
    """``t`` at offset 0 of its own buffer (a copy only when it starts elsewhere)."""
    return None if t is None else contiguous(t)


ConvRunner = Callable[[Tensor, Tensor, "Tensor | None", ConvGeometry, Tensor, KernelConfig],
                      None]

# How each conv2d variant runs: ``conv2d`` calls ``RUNNERS[config.variant]`` with the config the
# selector returned, which names only a variant that applies to the geometry (_conv_rule). A
# variant added with ``netcl.core.kernel_selector.register_variant`` gets its runner here.
RUNNERS: dict[AnyVariant, ConvRunner] = {
    KernelVariant.CONV2D_NAIVE:
        lambda x, w, b, g, out, cfg: _conv_naive(_whole(x), _whole(w), _whole(b), g, out),
    KernelVariant.CONV2D_TILED_LOCAL:
        lambda x, w, b, g, out, cfg: _conv_tiled_local(_whole(x), _whole(w), _whole(b), g, out),
    KernelVariant.CONV2D_WINOGRAD:
        lambda x, w, b, g, out, cfg: conv2d_winograd(x, _whole(w), _whole(b), g, out),
    WINOGRAD_F4:
        lambda x, w, b, g, out, cfg: conv2d_winograd(x, _whole(w), _whole(b), g, out, tile=4),
    KernelVariant.CONV2D_IM2COL: lambda x, w, b, g, out, cfg: _conv_gemm(x, w, b, g, out, None),
    KernelVariant.CONV2D_IMPLICIT_GEMM: _conv_gemm,
    IMPLICIT_TILED:
        lambda x, w, b, g, out, cfg: igemm_forward(_whole(x), _whole(w), _whole(b), g, out, cfg),
}


def _conv_cl(x: Tensor, weight: Tensor, bias: Tensor | None, g: ConvGeometry) -> Tensor:
    out = empty(x.queue, (g.n, g.k, g.oh, g.ow), x.dtype)
    if conv2d_mma_applicable(x.queue, g, x.dtype, "forward"):  # float16 on tensor cores
        conv2d_mma("forward", x, weight, g, out, bias=bias)
        return out
    config = get_kernel_selector(x.queue.device).select(CONV2D_FAMILY, ConvQuery(g, x.dtype))
    RUNNERS[config.variant](x, weight, bias, g, out, config)
    return out


# -- the ops ----------------------------------------------------------------------------------


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: IntPair = 1,
           padding: IntPair = 0, dilation: IntPair = 1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation, as in PyTorch) of an NCHW input.

    Args:
        x: ``(N, C, H, W)``.
        weight: ``(K, C / groups, R, S)``; ``groups == C == K`` is a depthwise convolution.
        bias: ``(K,)`` or None.
        stride, padding, dilation: an int or an ``(h, w)`` pair.
        groups: channel groups; must divide ``C`` and ``K``.

    Returns:
        ``(N, K, OH, OW)`` with ``OH = (H + 2*pad - dil*(R-1) - 1) // stride + 1``.

    Raises:
        TypeError: non-Tensors, non-float or differing dtypes, non-integer arguments.
        ValueError: wrong ranks, mismatched channels or groups, bad stride/padding/dilation,
            zero channels or kernel sizes, an input smaller than the kernel, a bias of the
            wrong shape, tensors on different devices. (An empty batch gives an empty
            output.)

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.ones((1, 1, 3, 3)))
        >>> w = Tensor.from_host(q, np.ones((2, 1, 2, 2)))
        >>> conv2d(x, w, stride=1, padding=0).to_host()[:, :, 0, 0].tolist()
        [[4.0, 4.0]]
    """
    op = "conv2d"
    check_tensor(op, x)
    check_tensor(op, weight, "weight")
    same_device(op, x, weight)
    if bias is not None:
        check_tensor(op, bias, "bias")
        same_device(op, x, bias)
    _check_dtypes(op, input=x, weight=weight, bias=bias)
    g = conv_geometry(op, x.shape, weight.shape, stride, padding, dilation, groups)
    if bias is not None and bias.shape != (g.k,):
        raise ValueError(f"{op}: bias must have shape ({g.k},), got {bias.shape}")
    if g.n == 0:  # an empty batch: no kernel launches on a zero-size grid
        return empty(x.queue, (0, g.k, g.oh, g.ow), x.dtype)
    if x.array is not None:
        b = None if bias is None else host(bias)
        return np_result(x, x.dtype, _conv_np, x.array, host(weight), b, g)
    return _conv_cl(x, weight, bias, g)


def conv2d_backward_data(grad_out: Tensor, weight: Tensor, input_shape: Sequence[int],
                         stride: IntPair = 1, padding: IntPair = 0, dilation: IntPair = 1,
                         groups: int = 1) -> Tensor:
    """Gradient of :func:`conv2d` with respect to its input (a transposed convolution).

    Args:
        grad_out: ``(N, K, OH, OW)``, the gradient of the convolution's output.
        weight: ``(K, C / groups, R, S)``.
        input_shape: ``(N, C, H, W)`` of the convolution's input.

    Raises:
        TypeError, ValueError: as :func:`conv2d`; ``grad_out`` of the wrong shape.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> gy = Tensor.from_host(q, np.ones((1, 1, 2, 2)))
        >>> w = Tensor.from_host(q, np.ones((1, 1, 2, 2)))
        >>> conv2d_backward_data(gy, w, (1, 1, 3, 3)).to_host()[0, 0].tolist()
        [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    op = "conv2d_backward_data"
    check_tensor(op, grad_out, "grad_out")
    check_tensor(op, weight, "weight")
    same_device(op, grad_out, weight)
    _check_dtypes(op, grad_out=grad_out, weight=weight)
    g = conv_geometry(op, input_shape, weight.shape, stride, padding, dilation, groups)
    _check_grad_shape(op, grad_out, g)
    if g.n == 0:
        return empty(grad_out.queue, (0, g.c, g.h, g.w), grad_out.dtype)
    if grad_out.array is not None:
        return np_result(grad_out, grad_out.dtype, _conv_backward_data_np, grad_out.array,
                         host(weight), g)
    queue, dtype = grad_out.queue, grad_out.dtype
    dx = empty(queue, (g.n, g.c, g.h, g.w), dtype)
    if conv2d_mma_applicable(queue, g, dtype, "data"):  # float16 on tensor cores
        conv2d_mma("data", grad_out, weight, g, dx)
        return dx
    config = get_kernel_selector(queue.device).select(CONV2D_FAMILY, ConvQuery(g, dtype, "data"))
    DATA_RUNNERS.get(config.variant, _data_columns)(grad_out, weight, g, dx, config)
    return dx


def _data_columns(grad_out: Tensor, weight: Tensor, g: ConvGeometry, dx: Tensor,
                  _: KernelConfig) -> None:
    """The column path: ``W^T @ grad_out`` through the GEMM family, then col2im."""
    queue, dtype = grad_out.queue, grad_out.dtype
    config = get_kernel_selector(queue.device).select_matmul_kernel(g.crs, g.pixels, g.kg, dtype)
    a = operand(weight, g.crs, 0, g.kg * g.crs)  # W^T through trans_a
    per_image = g.c * g.r * g.s * g.pixels
    step = g.n if g.pointwise else _chunk(g.n, per_image)
    dcols = None if g.pointwise else _scratch(queue, step * per_image, dtype)
    col2im = conv2d_family(queue.context, "col2im", dtype)
    planes = geometry_of(col2im, PlaneGeometry)
    for n0 in range(0, g.n, step):
        m = min(step, g.n - n0)
        b = operand(grad_out, g.pixels, g.k * g.pixels, g.kg * g.pixels,
                    offset=n0 * g.k * g.pixels)
        if dcols is None:
            c = operand(dx, g.pixels, g.c * g.pixels, g.cg * g.pixels, offset=n0 * g.c * g.pixels)
        else:
            c = operand(dcols, g.pixels, per_image, g.crs * g.pixels)
        run_gemm(queue, config, dtype, a, b, c, g.crs, g.pixels, g.kg, trans_a=True,
                 batch=(m, g.groups))
        for row0, gsize in planes.blocks(g.w, g.h, m * g.c if dcols is not None else 0):
            launch(queue, col2im.kernel, gsize, None, dcols, dx.buffer,
                   np.int32(dx.offset + n0 * g.c * g.h * g.w), np.int32(row0),
                   np.int32(g.c), *(np.int32(v) for v in g.scalars()))


def conv2d_backward_weight(x: Tensor, grad_out: Tensor, weight_shape: Sequence[int],
                           stride: IntPair = 1, padding: IntPair = 0, dilation: IntPair = 1,
                           groups: int = 1) -> Tensor:
    """Gradient of :func:`conv2d` with respect to its weight.

    Args:
        x: ``(N, C, H, W)``, the convolution's input.
        grad_out: ``(N, K, OH, OW)``, the gradient of its output.
        weight_shape: ``(K, C / groups, R, S)``.

    Raises:
        TypeError, ValueError: as :func:`conv2d`; ``grad_out`` of the wrong shape.

    Examples:
        >>> import numpy as np
        >>> from netcl.core.device import manager
        >>> q = manager.default("cpu").queue
        >>> x = Tensor.from_host(q, np.arange(9.0).reshape(1, 1, 3, 3))
        >>> gy = Tensor.from_host(q, np.ones((1, 1, 2, 2)))
        >>> conv2d_backward_weight(x, gy, (1, 1, 2, 2)).to_host()[0, 0].tolist()
        [[8.0, 12.0], [20.0, 24.0]]
    """
    op = "conv2d_backward_weight"
    check_tensor(op, x)
    check_tensor(op, grad_out, "grad_out")
    same_device(op, x, grad_out)
    _check_dtypes(op, input=x, grad_out=grad_out)
    g = conv_geometry(op, x.shape, weight_shape, stride, padding, dilation, groups)
    _check_grad_shape(op, grad_out, g)
    if g.n == 0:  # the sum over no images
        return Tensor.from_shape(x.queue, (g.k, g.cg, g.r, g.s), x.dtype, fill=0)
    if x.array is not None:
        return np_result(x, x.dtype, _conv_backward_weight_np, x.array, host(grad_out), g)
    queue, dtype = x.queue, x.dtype
    dw = empty(queue, (g.k, g.cg, g.r, g.s), dtype)
    if conv2d_mma_applicable(queue, g, dtype, "weight"):  # float16 on tensor cores
        conv2d_mma("weight", x, grad_out, g, dw)
        return dw
    config = get_kernel_selector(queue.device).select(CONV2D_FAMILY,
                                                      ConvQuery(g, dtype, "weight"))
    WEIGHT_RUNNERS.get(config.variant, _weight_columns)(x, grad_out, g, dw, config)
    return dw


def _weight_columns(x: Tensor, grad_out: Tensor, g: ConvGeometry, dw: Tensor,
                    _: KernelConfig) -> None:
    """The column path: im2col, one GEMM per image into partial sums, their sum."""
    queue, dtype = x.queue, x.dtype
    config = get_kernel_selector(queue.device).select_matmul_kernel(
        g.kg, g.crs, g.pixels, dtype)
    per_image = g.c * g.r * g.s * g.pixels
    step = max(1, min(_chunk(g.n, per_image), _chunk(g.n, g.k * g.crs)))
    cols = None if g.pointwise else _scratch(queue, step * per_image, dtype)
    parts = _scratch(queue, step * g.k * g.crs, dtype)
    reduce = conv2d_family(queue.context, "sum_batch", dtype)
    for n0 in range(0, g.n, step):
        m = min(step, g.n - n0)
        b = _columns(x, g, n0, m, cols)  # (crs x P), read transposed
        a = operand(grad_out, g.pixels, g.k * g.pixels, g.kg * g.pixels,
                    offset=n0 * g.k * g.pixels)
        c = Operand(parts.buffer, 0, g.crs, g.k * g.crs, g.kg * g.crs)
        run_gemm(queue, config, dtype, a, b, c, g.kg, g.crs, g.pixels, trans_b=True,
                 batch=(m, g.groups))
        size = g.k * g.crs
        reduce.launch(queue, size, parts, dw, np.int32(size), np.int32(m), np.int32(n0 > 0))


def _weight_igemm(x: Tensor, grad_out: Tensor, g: ConvGeometry, dw: Tensor,
                  config: KernelConfig) -> None:
    units = get_kernel_selector(x.queue.device).profile.compute_units
    igemm_backward_weight(_whole(x), _whole(grad_out), g, dw, config, units)


GradRunner = Callable[[Tensor, Tensor, ConvGeometry, Tensor, KernelConfig], None]

# How each variant computes a gradient (the selector names one that applies to the direction):
# DATA_RUNNERS[v](grad_out, weight, g, dx, config), WEIGHT_RUNNERS[v](x, grad_out, g, dw, config).
# A variant registered elsewhere that claims to apply to gradients but has no runner here (a
# forward-only kernel whose ``applies`` ignores the direction) gets the column path.
DATA_RUNNERS: dict[AnyVariant, GradRunner] = {
    KernelVariant.CONV2D_IM2COL: _data_columns,
    KernelVariant.CONV2D_WINOGRAD: lambda gy, w, g, dx, cfg: conv2d_winograd(
        gy, _whole(w), None, data_geometry(g), dx, flipped=True),
    WINOGRAD_F4: lambda gy, w, g, dx, cfg: conv2d_winograd(
        gy, _whole(w), None, data_geometry(g), dx, flipped=True, tile=4),
    IMPLICIT_TILED: lambda gy, w, g, dx, cfg: igemm_backward_data(_whole(gy), _whole(w), g, dx,
                                                                  cfg),
    PHASE_DATA: lambda gy, w, g, dx, cfg: igemm_backward_data_phase(_whole(gy), _whole(w), g,
                                                                    dx, cfg),
}
WEIGHT_RUNNERS: dict[AnyVariant, GradRunner] = {
    KernelVariant.CONV2D_IM2COL: _weight_columns,
    KernelVariant.CONV2D_WINOGRAD: lambda x, gy, g, dw, cfg: conv2d_winograd_weight(x, gy, g, dw),
    WINOGRAD_F4: lambda x, gy, g, dw, cfg: conv2d_winograd_weight(x, gy, g, dw, tile=4),
    IMPLICIT_TILED: _weight_igemm,
}


def _check_grad_shape(op: str, grad_out: Tensor, g: ConvGeometry) -> None:
    want = (g.n, g.k, g.oh, g.ow)
    if grad_out.shape != want:
        raise ValueError(f"{op}: grad_out must have shape {want} (the convolution's output), "
                         f"got {grad_out.shape}")
