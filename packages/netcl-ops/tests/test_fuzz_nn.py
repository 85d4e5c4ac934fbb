"""Property-based fuzzing of matmul, bias_add, conv2d, pooling and normalization on every
backend, forward and backward, against the float64 references of their test modules.

Geometries are drawn whole: batch dims that broadcast (or not), inner sizes that match (or not),
transposes, groups, kernel sizes, strides, paddings, dilations, ``ceil_mode``,
``count_include_pad``, optional affine parameters; on OpenCL each kernel variant is forced now
and then. Inputs are offset views now and then. See ``fuzz_support`` for example counts.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import netcl.ops as ops
from netcl.core.device import DeviceHandle, manager
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close
from netcl.ops.testing import check_op

if TYPE_CHECKING:
    import fuzz_support as fz
else:
    _spec = importlib.util.spec_from_file_location(
        "netcl_ops_fuzz_support", Path(__file__).with_name("fuzz_support.py"))
    fz = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(fz)

report_examples = fz.report_examples
MM = fz.sibling("test_matmul")
CV = fz.sibling("test_conv")
PL = fz.sibling("test_pooling")
Errors = tuple[type[Exception], ...]
SMALL = st.sampled_from([1, 1, 2, 3, 4, 5, 7, 9])


def _variant(data: st.DataObject, dev: DeviceHandle, variants: list[Any]) -> list[Any]:
    """``force_variant``'s arguments: on OpenCL now and then one of ``variants`` forced."""
    if dev.backend == "cpu":
        return []
    forced = data.draw(st.sampled_from([None, *variants]), label="variant")
    return [] if forced is None else [forced]


def _pair(data: st.DataObject, values: st.SearchStrategy[int]) -> int | tuple[int, int]:
    first = data.draw(values)
    return first if data.draw(st.booleans()) else (first, data.draw(values))


def _two(v: int | tuple[int, int]) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else v


# -- matmul, bias_add -------------------------------------------------------------------------


@given(data=st.data())
@fz.fuzz_settings(8)
def test_matmul(dev: DeviceHandle, data: st.DataObject) -> None:
    """Batch dims that broadcast (or not), M/K/N from 0 up, transposes, inner sizes that now
    and then differ, 1-d or integer operands now and then, each GEMM variant."""
    (ba, bb), broadcasts = data.draw(fz.broadcast_shapes(2, max_dims=2), label="batch")
    m, k, n = (data.draw(st.sampled_from(fz.SIDES), label=s) for s in "MKN")
    kb = k + 1 if data.draw(st.integers(0, 7), label="mismatch") == 0 else k
    ta, tb = data.draw(st.booleans(), label="ta"), data.draw(st.booleans(), label="tb")
    a_shape = (*ba, *((k, m) if ta else (m, k)))
    b_shape = (*bb, *((n, kb) if tb else (kb, n)))
    if data.draw(st.integers(0, 9), label="1-d") == 0:
        a_shape = a_shape[-1:]
    dtype = data.draw(fz.dtypes(dev), label="dtype")
    integer = data.draw(st.integers(0, 9), label="int32") == 0
    a, b = (data.draw(fz.values(s, "int32" if integer else "float64")) for s in (a_shape,
                                                                                b_shape))
    offsets = [data.draw(fz.OFFSETS, label="offset") for _ in range(2)]
    forced = _variant(data, dev, MM.VARIANTS[1:])
    fz.ran("matmul", dev)
    allowed: Errors = () if broadcasts and kb == k and len(a_shape) > 1 else (ValueError,)
    if integer:
        allowed += (TypeError,)
    with force_variant(*forced):
        fz.outcome("matmul", lambda: check_op(
            dev, fz.shifted(dev, MM.MATMUL.op, offsets), MM.MATMUL.ref, (a, b),
            {"transpose_a": ta, "transpose_b": tb}, dtype, MM.MATMUL.scale), allowed)


@given(data=st.data())
@fz.fuzz_settings(6)
def test_bias_add(dev: DeviceHandle, data: st.DataObject) -> None:
    """Any input rank, axis ``None`` or in/out of range, bias of the axis' size or not."""
    shape = data.draw(fz.shapes(min_dims=1), label="shape")
    n = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-n - 1, n)), label="axis")
    dtype = data.draw(fz.dtypes(dev), label="dtype")
    in_range = axis is None or -n <= axis < n
    size = shape[(1 if n >= 3 else n - 1) if axis is None else axis % n] if in_range else 1
    wrong = data.draw(st.integers(0, 7), label="wrong size") == 0
    x = data.draw(fz.values(shape, "float64"), label="x")
    bias = data.draw(fz.values((size + 1 if wrong else size,), "float64"), label="bias")
    offsets = [data.draw(fz.OFFSETS, label="offset") for _ in range(2)]
    fz.ran("bias_add", dev)
    allowed: Errors = () if in_range and not wrong else (ValueError, IndexError)
    fz.outcome("bias_add", lambda: check_op(
        dev, fz.shifted(dev, MM.BIAS_ADD.op, offsets), MM.BIAS_ADD.ref, (x, bias),
        {"axis": axis}, dtype), allowed)


# -- conv2d and its backward computations -----------------------------------------------------


@st.composite
def conv_geometry(draw: st.DrawFn) -> dict[str, Any]:
    """Input and weight shapes, stride, padding, dilation, groups (now and then ones that do
    not divide the channels, or an input too small for the kernel)."""
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    c, k = groups * draw(st.integers(1, 3)), groups * draw(st.integers(1, 2))
    if draw(st.integers(0, 9)) == 0:
        c += 1  # groups no longer divides the input channels
    return {"x": (draw(st.sampled_from([0, 1, 2, 3])), c, draw(SMALL), draw(SMALL)),
            "w": (k, max(c // groups, 1), draw(st.integers(1, 4)), draw(st.integers(1, 4))),
            "stride": draw(st.sampled_from([1, 1, 2, 3, (1, 2), (2, 1)])),
            "padding": draw(st.sampled_from([0, 0, 1, 2, (0, 1), (2, 0)])),
            "dilation": draw(st.sampled_from([1, 1, 1, 2, (1, 2)])), "groups": groups}


def _conv_out(g: dict[str, Any]) -> tuple[int, ...] | None:
    """The output shape, or ``None`` for a geometry conv2d must refuse."""
    (n, c, h, w), (k, cg, r, s) = g["x"], g["w"]
    (sh, sw), (ph, pw), (dh, dw) = (_two(g[key]) for key in ("stride", "padding", "dilation"))
    # Counted, not computed: the window starts (every stride-th padded position) at which the
    # dilated window still ends inside the padded input.
    oh = len(range(0, h + 2 * ph - dh * (r - 1), sh))
    ow = len(range(0, w + 2 * pw - dw * (s - 1), sw))
    if c != cg * g["groups"] or oh < 1 or ow < 1:
        return None
    return n, k, oh, ow


@pytest.mark.parametrize("which", ["forward", "backward_data", "backward_weight"])
@given(data=st.data())
@fz.fuzz_settings(5)
def test_conv2d(dev: DeviceHandle, which: str, data: st.DataObject) -> None:
    """conv2d (bias or not) and both backward computations over drawn geometries."""
    g = data.draw(conv_geometry(), label="geometry")
    out = _conv_out(g)
    dtype = data.draw(fz.dtypes(dev), label="dtype")
    geo = {key: g[key] for key in ("stride", "padding", "dilation", "groups")}
    x, w = data.draw(fz.values(g["x"], "float64")), data.draw(fz.values(g["w"], "float64"))
    gy = data.draw(fz.values(out or (1, 1, 1, 1), "float64"))
    offsets = [data.draw(fz.OFFSETS, label="offset") for _ in range(3)]
    forced = _variant(data, dev, CV.VARIANTS[1:] if which == "forward" else [])
    fz.ran(f"conv2d:{which}", dev)
    allowed: Errors = () if out else (ValueError,)
    if which == "forward":
        bias = data.draw(fz.values(g["w"][:1], "float64")) if data.draw(st.booleans()) else None
        args = (x, w) if bias is None else (x, w, bias)
        op, ref = ops.conv2d, lambda *a, **kw: CV.ref_conv(*a, **kw)
    elif which == "backward_data":
        args, op = (gy, w), lambda gt, wt, **kw: ops.conv2d_backward_data(gt, wt, g["x"], **kw)
        ref = lambda ga, wa, **kw: CV.ref_backward(  # noqa: E731
            np.zeros(g["x"]), wa, ga, kw["stride"], kw["padding"], kw["dilation"],
            kw["groups"])[0]
    else:
        args, op = (x, gy), lambda xt, gt, **kw: ops.conv2d_backward_weight(xt, gt, g["w"], **kw)
        ref = lambda xa, ga, **kw: CV.ref_backward(  # noqa: E731
            xa, np.zeros(g["w"]), ga, kw["stride"], kw["padding"], kw["dilation"],
            kw["groups"])[1]
    with force_variant(*forced):
        fz.outcome("conv2d" if which == "forward" else f"conv2d_{which}", lambda: check_op(
            dev, fz.shifted(dev, op, offsets), ref, args, geo, dtype, CV.CONV2D.scale), allowed)


# -- pooling ----------------------------------------------------------------------------------


@st.composite
def pool_geometry(draw: st.DrawFn, dilation: bool) -> dict[str, Any]:
    """Kernel, stride (``None``: the kernel), padding (now and then more than half the
    kernel), dilation, ``ceil_mode`` and an NCHW shape (N from 0)."""
    kernels: list[int | tuple[int, int]] = [1, 2, 3, 4, (1, 2), (3, 2)]
    k = draw(st.sampled_from(kernels))
    pad_max = min(_two(k)) // 2
    return {"shape": (draw(st.sampled_from([0, 1, 2])), draw(st.integers(1, 3)), draw(SMALL),
                      draw(SMALL)),
            "k": k, "s": draw(st.sampled_from([None, 1, 2, 3, (2, 1)])),
            "p": draw(st.integers(0, pad_max + (1 if draw(st.integers(0, 7)) == 0 else 0))),
            "d": draw(st.sampled_from([1, 1, 2])) if dilation else 1,
            "ceil": draw(st.booleans())}


def _pool_out(g: dict[str, Any]) -> tuple[int, int] | None:
    """PyTorch's output size (``None``: the geometry must be refused)."""
    (kh, kw), (ph, pw), (dh, dw) = _two(g["k"]), _two(g["p"]), _two(g["d"])
    sh, sw = _two(g["k"] if g["s"] is None else g["s"])
    if ph > kh // 2 or pw > kw // 2:
        return None
    sizes = []
    for n, k, s, p, d in ((g["shape"][2], kh, sh, ph, dh), (g["shape"][3], kw, sw, pw, dw)):
        span = n + 2 * p - d * (k - 1) - 1
        out = (-(-span // s) if g["ceil"] else span // s) + 1
        if g["ceil"] and (out - 1) * s >= n + p:
            out -= 1
        if out < 1:
            return None
        sizes.append(out)
    return sizes[0], sizes[1]


def _padding_only(g: dict[str, Any], size: tuple[int, int]) -> bool:
    """Whether some max_pool2d window holds no input element (dilation steps over it)."""
    (kh, kw), (ph, pw), (dh, dw) = _two(g["k"]), _two(g["p"]), _two(g["d"])
    sh, sw = _two(g["k"] if g["s"] is None else g["s"])
    return any(
        not any(0 <= i * s - p + a * d < n for a in range(k))
        for n, k, s, p, d, out in ((g["shape"][2], kh, sh, ph, dh, size[0]),
                                   (g["shape"][3], kw, sw, pw, dw, size[1]))
        for i in range(out))


def _ref_max(x: Any, g: dict[str, Any], size: tuple[int, int]) -> tuple[Any, Any]:
    """test_pooling's ref_max; with ceil_mode, over an input extended by -inf rows and
    columns that the last windows reach (their flat indices mapped back)."""
    (kh, kw), (ph, pw), (dh, dw) = _two(g["k"]), _two(g["p"]), _two(g["d"])
    sh, sw = _two(g["k"] if g["s"] is None else g["s"])
    h, w = x.shape[2:]
    eh = max(0, (size[0] - 1) * sh + dh * (kh - 1) + 1 - (h + 2 * ph))
    ew = max(0, (size[1] - 1) * sw + dw * (kw - 1) + 1 - (w + 2 * pw))
    xe = np.pad(x, ((0, 0), (0, 0), (0, eh), (0, ew)), constant_values=-np.inf)
    y, idx = PL.ref_max(xe, g["k"], g["s"], g["p"], g["d"])
    y, idx = y[:, :, :size[0], :size[1]], idx[:, :, :size[0], :size[1]]
    return y, (idx // (w + ew)) * w + idx % (w + ew)


@pytest.mark.parametrize("which", ["max", "max_backward", "avg", "avg_backward"])
@given(data=st.data())
@fz.fuzz_settings(5)
def test_pool2d(dev: DeviceHandle, which: str, data: st.DataObject) -> None:
    """max_pool2d (values and indices) and avg_pool2d (``count_include_pad``), forward and
    backward, over drawn geometries with ``ceil_mode``."""
    g = data.draw(pool_geometry(which.startswith("max")), label="geometry")
    size = _pool_out(g)
    shape, dtype = g["shape"], data.draw(fz.dtypes(dev), label="dtype")
    x = data.draw(fz.values(shape, "float64"), label="x")
    gy = data.draw(fz.values((*shape[:2], *(size or (1, 1))), "float64"), label="grad")
    offsets = [data.draw(fz.OFFSETS, label="offset") for _ in range(2)]
    include = data.draw(st.booleans(), label="count_include_pad")
    k, s, p, d, ceil = g["k"], g["s"], g["p"], g["d"], g["ceil"]
    # ref_max does not model windows of padding only (index -1, no gradient):
    # test_fuzz_regressions.py::test_max_pool2d_window_of_padding_only checks them
    assume(not (which.startswith("max") and size and _padding_only(g, size)))
    fz.ran(f"pool2d:{which}", dev)
    allowed: Errors = () if size else (ValueError,)
    if which == "max":
        op: Any = lambda t: ops.max_pool2d(t, k, s, p, d, True, ceil)  # noqa: E731
        ref: Any = lambda a: _ref_max(a, g, size or (0, 0))  # noqa: E731
        args: tuple[Any, ...] = (x,)
    elif which == "max_backward":
        if not size:
            return
        idx = _ref_max(x, g, size)[1]
        op = lambda gt, it: ops.max_pool2d_backward(gt, it, shape, k, s, p, d)  # noqa: E731
        ref, args = lambda ga, ia: _scatter(shape, ga, ia), (gy, idx)
    elif which == "avg":
        op = lambda t: ops.avg_pool2d(t, k, s, p, include, ceil)  # noqa: E731
        ref, args = lambda a: PL.ref_avg(a, k, s, p, include, ceil), (x,)
    else:
        op = lambda gt: ops.avg_pool2d_backward(gt, shape, k, s, p, include, ceil)  # noqa: E731
        ref, args = lambda ga: PL._avg_adjoint(shape, k, s, p, include, ceil, ga) if x.size \
            else np.zeros(shape), (gy,)
    name = which.split("_")[0] + "_pool2d" + ("_backward" if "backward" in which else "")
    fz.outcome(name, lambda: check_op(
        dev, fz.shifted(dev, op, offsets), ref, args, dtype=dtype), allowed)


def _scatter(shape: tuple[int, ...], g: Any, idx: Any) -> Any:
    """max_pool2d's gradient: each output's gradient added at its input index."""
    n, c = shape[:2]
    dx = np.zeros((n * c, shape[2] * shape[3]))
    rows = np.repeat(np.arange(n * c), idx[0, 0].size if idx.size else 0)
    np.add.at(dx, (rows, idx.reshape(-1)), g.reshape(-1))
    return dx.reshape(shape)


def _adaptive(a: Any, out: tuple[int, int]) -> Any:
    """PyTorch's adaptive windows: [floor(i h / o), ceil((i + 1) h / o))."""
    h, w = a.shape[2:]
    rows = [(i * h // out[0], -(-(i + 1) * h // out[0])) for i in range(out[0])]
    cols = [(j * w // out[1], -(-(j + 1) * w // out[1])) for j in range(out[1])]
    y = np.zeros((*a.shape[:2], *out))
    for i, (r0, r1) in enumerate(rows):
        for j, (c0, c1) in enumerate(cols):
            y[:, :, i, j] = a[:, :, r0:r1, c0:c1].mean(axis=(2, 3))
    return y


@given(data=st.data())
@fz.fuzz_settings(5)
def test_adaptive_avg_pool2d(dev: DeviceHandle, data: st.DataObject) -> None:
    """Any output size (larger than the input too, or 0 now and then) and global pooling."""
    shape = (data.draw(st.sampled_from([0, 1, 2])), data.draw(st.integers(1, 3)),
             data.draw(SMALL), data.draw(SMALL))
    out = _two(_pair(data, st.integers(0, 10)))
    dtype = data.draw(fz.dtypes(dev), label="dtype")
    x = data.draw(fz.values(shape, "float64"), label="x")
    offsets = [data.draw(fz.OFFSETS, label="offset")]
    fz.ran("adaptive_avg_pool2d", dev)
    fz.outcome("adaptive_avg_pool2d", lambda: check_op(
        dev, fz.shifted(dev, lambda t: ops.adaptive_avg_pool2d(t, out), offsets),
        lambda a: _adaptive(a, out), (x,), dtype=dtype), () if min(out) > 0 else (ValueError,))
    check_op(dev, fz.shifted(dev, ops.global_avg_pool2d, offsets),
             lambda a: a.mean(axis=(2, 3), keepdims=True), (x,), dtype=dtype)


# -- normalization ----------------------------------------------------------------------------


def _norm(x: Any, axes: tuple[int, ...], view: tuple[int, ...], w: Any, b: Any, eps: float,
          mean: Any = None, var: Any = None) -> Any:
    """(x - mean) / sqrt(var + eps) [* w] [+ b] over ``axes`` (batch statistics by default)."""
    mean = x.mean(axis=axes, keepdims=True) if mean is None else mean.reshape(view)
    var = x.var(axis=axes, keepdims=True) if var is None else var.reshape(view)
    y = (x - mean) / np.sqrt(var + eps)
    y = y if w is None else y * w.reshape(view)
    return y if b is None else y + b.reshape(view)


@given(data=st.data())
@fz.fuzz_settings(6)
def test_batch_norm(dev: DeviceHandle, data: st.DataObject) -> None:
    """Training or eval, weight and bias each optional, fused ReLU, eps, offset views; the
    running statistics of training (unbiased variance, momentum)."""
    shape = data.draw(fz.shapes(min_dims=2, max_dims=4, min_side=1, max_size=1024))
    training, relu = data.draw(st.booleans(), label="training"), data.draw(st.booleans())
    eps, momentum = data.draw(st.sampled_from([1e-5, 1e-3, 0.5])), data.draw(fz.numbers(0, 1))
    dtype = data.draw(fz.dtypes(dev), label="dtype")
    c, axes = shape[1], (0, *range(2, len(shape)))
    view = (1, c) + (1,) * (len(shape) - 2)
    x = data.draw(fz.values(shape, "float64", -4, 6), label="x")
    w, b = (data.draw(st.one_of(st.none(), fz.values((c,), "float64"))) for _ in "wb")
    # refused alone: test_fuzz_regressions.py::test_norms_refuse_a_weight_or_a_bias_given_alone
    assume((w is None) == (b is None))
    rm, rv = data.draw(fz.values((c,), "float64")), data.draw(fz.values((c,), "float64", 0.2, 3))
    rm, rv = (a.astype(dtype).astype(np.float64) for a in (rm, rv))
    params = [a for a in (w, b) if a is not None]
    offsets = [data.draw(fz.OFFSETS, label="offset") for _ in range(5)]
    rmt, rvt = (fz.on_device(dev, a, dtype, o) for a, o in zip((rm, rv), offsets[3:]))
    forced = _variant(data, dev, [KernelVariant.BATCHNORM_NAIVE, KernelVariant.BATCHNORM_FUSED])
    fz.ran("batch_norm", dev)

    def op(t: Any, *ps: Any) -> Any:
        it = iter(ps)
        wt, bt = (next(it) if a is not None else None for a in (w, b))
        y = ops.batch_norm(t, rmt, rvt, wt, bt, training, momentum, eps, relu)
        return y[0] if training else y

    def ref(a: Any, *ps: Any) -> Any:
        it = iter(ps)
        wa, ba = (next(it) if p is not None else None for p in (w, b))
        y = _norm(a, axes, view, wa, ba, eps, None if training else rm,
                  None if training else rv)
        return np.maximum(y, 0) if relu else y

    allowed: Errors = (ValueError,) if training and x.size // c < 2 else ()
    with force_variant(*forced):
        err = fz.outcome("batch_norm", lambda: check_op(dev, fz.shifted(dev, op, offsets[:3]),
                                                        ref, (x, *params), dtype=dtype,
                                                        scale=4.0), allowed)
    if err is None and training:  # check_op ran the op once: the statistics moved once
        xr, m = x.astype(dtype).astype(np.float64), x.size // c
        assert_close(rmt.to_host(), (1 - momentum) * rm + momentum * xr.mean(axis=axes),
                        dtype, 4.0)
        assert_close(rvt.to_host(), (1 - momentum) * rv + momentum * xr.var(axis=axes) * m
                        / (m - 1), dtype, 4.0)


@given(data=st.data())
@fz.fuzz_settings(6)
def test_layer_norm(dev: DeviceHandle, data: st.DataObject) -> None:
    """normalized_shape the trailing 1-2 dims (now and then not), weight and bias each
    optional, eps, offset views."""
    shape = data.draw(fz.shapes(min_dims=1, max_dims=4, min_side=1, max_size=1024))
    count = data.draw(st.integers(1, min(2, len(shape))), label="trailing dims")
    norm = shape[len(shape) - count:]
    wrong = data.draw(st.integers(0, 7), label="wrong") == 0
    arg = (norm[0] + 1, *norm[1:]) if wrong else norm
    eps, dtype = data.draw(st.sampled_from([1e-5, 0.5])), data.draw(fz.dtypes(dev))
    x = data.draw(fz.values(shape, "float64", -4, 6), label="x")
    w, b = (data.draw(st.one_of(st.none(), fz.values(norm, "float64"))) for _ in "wb")
    # refused alone: test_fuzz_regressions.py::test_norms_refuse_a_weight_or_a_bias_given_alone
    assume((w is None) == (b is None))
    params = [a for a in (w, b) if a is not None]
    offsets = [data.draw(fz.OFFSETS, label="offset") for _ in range(3)]
    axes = tuple(range(len(shape) - count, len(shape)))
    view = (1,) * (len(shape) - count) + norm
    fz.ran("layer_norm", dev)

    def op(t: Any, *ps: Any) -> Any:
        it = iter(ps)
        wt, bt = (next(it) if a is not None else None for a in (w, b))
        return ops.layer_norm(t, arg, wt, bt, eps)[0]

    def ref(a: Any, *ps: Any) -> Any:
        it = iter(ps)
        wa, ba = (next(it) if p is not None else None for p in (w, b))
        return _norm(a, axes, view, wa, ba, eps)

    fz.outcome("layer_norm", lambda: check_op(dev, fz.shifted(dev, op, offsets), ref,
                                              (x, *params), dtype=dtype, scale=4.0),
               (ValueError,) if wrong else ())


def _on_numpy(op: Any, *arrays: Any) -> Any:
    """``op`` on the NumPy backend in float64: the reference the OpenCL kernels answer to,
    for the backward ops that have no formula of their own in the test tables."""
    q = manager.default("cpu").queue  # type: ignore[union-attr]
    out = op(*(Tensor.from_host(q, a, dtype="float64") for a in arrays))
    return tuple(t.to_host() for t in out) if isinstance(out, tuple) else out.to_host()


@pytest.mark.parametrize("name", ["batch_norm_backward", "layer_norm_backward",
                                  "adaptive_avg_pool2d_backward"])
@given(data=st.data())
@fz.fuzz_settings(5)
def test_backward_against_numpy(dev: DeviceHandle, name: str, data: st.DataObject) -> None:
    """The backward ops with statistics or windows from the forward, any dtype and offset
    views: the NumPy backend's float64 result."""
    shape = data.draw(fz.shapes(min_dims=2, max_dims=4, min_side=1, max_size=512))
    if name == "adaptive_avg_pool2d_backward":
        shape = (*shape, 1, 1)[:4] if len(shape) < 4 else shape
    dtype = data.draw(fz.dtypes(dev), label="dtype")
    x, g = (data.draw(fz.values(shape, "float64", -4, 6)) for _ in "xg")
    c = shape[1]
    weight = data.draw(st.one_of(st.none(), fz.values((c,) if name == "batch_norm_backward"
                                                      else shape[-1:], "float64")))
    offsets = [data.draw(fz.OFFSETS, label="offset") for _ in range(3)]
    fz.ran(name, dev)
    if name == "adaptive_avg_pool2d_backward":
        out = _two(_pair(data, st.integers(1, 6)))
        gy = data.draw(fz.values((*shape[:2], *out), "float64"))
        check_op(dev, fz.shifted(dev, lambda gt: ops.adaptive_avg_pool2d_backward(gt, shape),
                                 offsets), lambda ga: _on_numpy(
            lambda t: ops.adaptive_avg_pool2d_backward(t, shape), ga), (gy,), dtype=dtype)
        return
    assume(name != "batch_norm_backward" or x.size // c >= 2)
    forward = ops.batch_norm if name == "batch_norm_backward" else (
        lambda t, *_: ops.layer_norm(t, shape[-1]))
    backward = ops.batch_norm_backward if name == "batch_norm_backward" else (
        lambda gt, t, m, r, w=None: ops.layer_norm_backward(gt, t, shape[-1], m, r, w))

    # one set of statistics for both: the device's (in float64 for the reference); a layer
    # of two nearly equal values has a gradient of nearly 0 whose float32 error is relative
    _, mean, rstd = forward(Tensor.from_host(dev.queue, x, dtype=dtype), None, None)
    stats = [t.to_host().astype(np.float64) for t in (mean, rstd)]

    def run(gt: Any, xt: Any, *w: Any) -> Any:
        return backward(gt, xt, mean, rstd, *w)

    def ref(ga: Any, xa: Any, *w: Any) -> Any:
        return _on_numpy(backward, ga, xa, *stats, *w)

    args = (g, x) if weight is None else (g, x, weight)
    check_op(dev, fz.shifted(dev, run, offsets), ref, args, dtype=dtype, scale=10.0)
