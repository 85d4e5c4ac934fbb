"""``netcl.onnx.export``: a model's forward, traced op by op, as an ONNX graph.

The model runs once in eval mode under ``no_grad`` with the example input while
:func:`netcl.onnx._trace.trace` records its functional calls; each call becomes one or a few ONNX
nodes (:data:`_EMITTERS`), parameters and buffers become initializers under their
``state_dict`` names, and the graph is checked with ``onnx.checker`` before it is written
(atomically). A call the exporter has no rule for, or a tensor that comes from an untraced op,
fails the export with :class:`OnnxExportError` naming the op.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from netcl.autograd import no_grad
from netcl.core.tensor import Tensor
from netcl.io._atomic import atomic_write
from netcl.nn import Module

from ._trace import Call, trace

__all__ = ["DEFAULT_OPSET", "OnnxExportError", "export"]

DEFAULT_OPSET = 17


class OnnxExportError(ValueError):
    """A model the exporter cannot write: an unsupported op or argument, named."""

    __module__ = "netcl.onnx"


def _pair(v: Any) -> list[int]:
    return [int(v), int(v)] if isinstance(v, (int, np.integer)) else [int(x) for x in v]


class _Graph:
    """The nodes, initializers and tensor names of the graph being built."""

    def __init__(self, onnx: Any, names: dict[int, str], opset: int = DEFAULT_OPSET) -> None:
        self.onnx, self.names, self.opset = onnx, dict(names), opset
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def constant(self, value: np.ndarray[Any, Any], stem: str = "const") -> str:
        name = self.fresh(stem)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(value), name))
        return name

    def scalar(self, value: float, like: Tensor) -> str:
        """A 0-d constant of ``like``'s dtype."""
        return self.constant(np.array(value, dtype=like.dtype))

    def ints(self, values: Sequence[int], stem: str = "shape") -> str:
        """A 1-D int64 constant (shapes, axes, sizes)."""
        return self.constant(np.array(list(values), np.int64), stem)

    def name(self, value: Any, op: str, like: Any = None) -> str:
        """The graph name of an op's input (a constant for a Python number)."""
        if isinstance(value, Tensor):
            found = self.names.get(id(value))
            if found is None:
                raise OnnxExportError(
                    f"export: an input of {op} ({value.shape}, {value.dtype}) comes from an op "
                    f"the exporter does not trace (not the model's input, a parameter, a buffer "
                    f"or the output of a traced op)")
            return found
        if isinstance(value, (int, float, np.number)):
            dtype = like.dtype if isinstance(like, Tensor) else "float32"
            return self.constant(np.array(value, dtype=dtype))
        raise OnnxExportError(f"export: {op} got a {type(value).__name__} input")

    def node(self, op_type: str, inputs: Sequence[str], output: Any, **attrs: Any) -> str:
        name = self.fresh(op_type.lower())
        self.names[id(output)] = name
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [name], **attrs))
        return name

    def intermediate(self, op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        name = self.fresh(op_type.lower())
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [name], **attrs))
        return name


def _conv2d(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x, w, b = a.get("input", a.get("x")), a["weight"], a.get("bias")
    kh, kw = w.shape[2], w.shape[3]
    dil = _pair(a.get("dilation", 1))
    pads = _conv_pads("conv2d", a.get("padding", 0), [kh, kw], dil)
    inputs = [g.name(x, "conv2d"), g.name(w, "conv2d")] + ([g.name(b, "conv2d")] if b is not None
                                                         else [])
    g.node("Conv", inputs, out, strides=_pair(a.get("stride", 1)), pads=pads,
           dilations=dil, group=int(a.get("groups", 1)), kernel_shape=[kh, kw])


def _conv_pads(op: str, pad: Any, kernel: list[int], dilation: list[int]) -> list[int]:
    """ONNX ``pads`` (all begins, then all ends) of a conv's ``padding``: ints, ``"valid"``,
    or ``"same"`` with the odd extra row or column at the end (PyTorch's and F.conv2d's)."""
    if isinstance(pad, str):
        if pad not in ("valid", "same"):
            raise OnnxExportError(f"export: {op} padding {pad!r}")
        totals = [0 if pad == "valid" else d * (k - 1) for k, d in zip(kernel, dilation)]
        return [t // 2 for t in totals] + [t - t // 2 for t in totals]
    p = [int(pad)] * len(kernel) if isinstance(pad, (int, np.integer)) else [int(v) for v in pad]
    return p + p


def _linear(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x: Any = a.get("x", a.get("input"))
    w, b = a["weight"], a.get("bias")
    if x.ndim != 2:
        y = g.intermediate("MatMul", [g.name(x, "linear"), g.intermediate(
            "Transpose", [g.name(w, "linear")], perm=[1, 0])])
        if b is None:
            g.node("Identity", [y], out)
        else:
            g.node("Add", [y, g.name(b, "linear")], out)
        return
    inputs = [g.name(x, "linear"), g.name(w, "linear")] + ([g.name(b, "linear")] if b is not None
                                                         else [])
    g.node("Gemm", inputs, out, transB=1)


def _batch_norm(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x: Any = a.get("x", a.get("input"))
    if a.get("training"):
        raise OnnxExportError("export: batch_norm in training mode (call model.eval() first)")
    mean, var = a.get("running_mean"), a.get("running_var")
    if mean is None or var is None:
        raise OnnxExportError("export: batch_norm without running statistics")
    c = x.shape[1]
    w, b = a.get("weight"), a.get("bias")
    wn = g.name(w, "batch_norm") if w is not None else g.constant(np.ones(c, np.float32))
    bn = g.name(b, "batch_norm") if b is not None else g.constant(np.zeros(c, np.float32))
    g.node("BatchNormalization", [g.name(x, "batch_norm"), wn, bn, g.name(mean, "batch_norm"),
                                  g.name(var, "batch_norm")], out,
           epsilon=float(a.get("eps", 1e-5)))


def _unary(op_type: str) -> Callable[[_Graph, dict[str, Any], Tensor], None]:
    def emit(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
        x = next(iter(a.values()))
        g.node(op_type, [g.name(x, op_type)], out)
    return emit


def _binary(op_type: str) -> Callable[[_Graph, dict[str, Any], Tensor], None]:
    def emit(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
        lhs, rhs = list(a.values())[:2]
        like = lhs if isinstance(lhs, Tensor) else rhs
        g.node(op_type, [g.name(lhs, op_type, like), g.name(rhs, op_type, like)], out)
    return emit


def _axis(a: dict[str, Any], default: int = -1) -> int:
    for key in ("dim", "axis"):
        if a.get(key) is not None:
            return int(a[key])
    return default


def _softmax(op_type: str) -> Callable[[_Graph, dict[str, Any], Tensor], None]:
    def emit(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
        x = a.get("input", a.get("x"))
        g.node(op_type, [g.name(x, op_type)], out, axis=_axis(a))
    return emit


def _leaky_relu(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x: Any = a.get("input", a.get("x"))
    slope = a.get("negative_slope", 0.01)
    g.node("LeakyRelu", [g.name(x, "leaky_relu")], out, alpha=float(slope))


def _pool(op_type: str) -> Callable[[_Graph, dict[str, Any], Tensor], None]:
    def emit(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
        x = a.get("input", a.get("x"))
        k = _pair(a.get("kernel_size"))
        stride = a.get("stride")
        p = _pair(a.get("padding", 0))
        attrs: dict[str, Any] = {"kernel_shape": k, "strides": _pair(stride) if stride else k,
                                 "pads": [p[0], p[1], p[0], p[1]]}
        if a.get("ceil_mode"):
            attrs["ceil_mode"] = 1
        if op_type == "MaxPool" and _pair(a.get("dilation", 1)) != [1, 1]:
            attrs["dilations"] = _pair(a["dilation"])
        if op_type == "AveragePool":
            attrs["count_include_pad"] = int(bool(a.get("count_include_pad", True)))
        g.node(op_type, [g.name(x, op_type)], out, **attrs)
    return emit


def _adaptive_avg_pool(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x: Any = a.get("input", a.get("x"))
    if tuple(out.shape[-2:]) != (1, 1):
        raise OnnxExportError(f"export: adaptive_avg_pool2d to {tuple(out.shape[-2:])} (only "
                              f"(1, 1), GlobalAveragePool, is supported)")
    g.node("GlobalAveragePool", [g.name(x, "adaptive_avg_pool2d")], out)


def _flatten(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x: Any = a.get("input", a.get("x"))
    start, end = int(a.get("start_dim", 0)), int(a.get("end_dim", -1))
    if end not in (-1, x.ndim - 1):
        raise OnnxExportError(f"export: flatten with end_dim {end} (only the trailing axes)")
    g.node("Flatten", [g.name(x, "flatten")], out, axis=start % max(1, x.ndim))


def _reshape(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x = next(iter(a.values()))
    dims = list(out.shape)
    if dims and x.ndim and dims[0] == x.shape[0]:
        dims[0] = 0  # copied from the input: the batch axis stays dynamic
    g.node("Reshape", [g.name(x, "reshape"), g.ints(dims)], out)


def _transpose(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x: Any = a.get("x", a.get("input"))
    if "dims" in a:
        perm = [int(d) % x.ndim for d in a["dims"]]
    else:
        perm = list(range(x.ndim))
        i, j = int(a.get("dim0", -2)) % x.ndim, int(a.get("dim1", -1)) % x.ndim
        perm[i], perm[j] = perm[j], perm[i]
    g.node("Transpose", [g.name(x, "transpose")], out, perm=perm)


def _dropout(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x = next(iter(a.values()))
    if a.get("training", False) and float(a.get("p", 0.0)) > 0.0:
        raise OnnxExportError("export: dropout in training mode (call model.eval() first)")
    g.node("Identity", [g.name(x, "dropout")], out)


def _matmul(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    lhs, rhs = list(a.values())[:2]
    names = [g.name(lhs, "matmul"), g.name(rhs, "matmul")]
    for i, key in enumerate(("transpose_a", "transpose_b")):
        if a.get(key):
            t = (lhs, rhs)[i]
            perm = list(range(t.ndim))
            perm[-2:] = perm[-1], perm[-2]
            names[i] = g.intermediate("Transpose", [names[i]], perm=perm)
    g.node("MatMul", names, out)


def _concat(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    values = list(a.values())
    tensors = values[0]
    g.node("Concat", [g.name(t, "concat") for t in tensors], out, axis=_axis(a, 0))


# -- the layers of issue 17: convolutions, normalizations, resampling, activations ----------------


def _x(a: dict[str, Any]) -> Any:
    """The traced call's tensor input (``input`` in F's signatures, ``x`` in autograd's)."""
    return a["input"] if "input" in a else a.get("x", next(iter(a.values())))


def _conv1d(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x, w, b = _x(a), a["weight"], a.get("bias")
    dil = [int(a.get("dilation", 1))]
    pads = _conv_pads("conv1d", a.get("padding", 0), [w.shape[2]], dil)
    inputs = [g.name(x, "conv1d"), g.name(w, "conv1d")] + ([g.name(b, "conv1d")] if b is not None
                                                         else [])
    g.node("Conv", inputs, out, strides=[int(a.get("stride", 1))], pads=pads, dilations=dil,
           group=int(a.get("groups", 1)), kernel_shape=[w.shape[2]])


def _conv_transpose2d(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x, w, b = _x(a), a["weight"], a.get("bias")
    p = _pair(a.get("padding", 0))
    inputs = [g.name(x, "conv_transpose2d"), g.name(w, "conv_transpose2d")] + (
        [g.name(b, "conv_transpose2d")] if b is not None else [])
    g.node("ConvTranspose", inputs, out, strides=_pair(a.get("stride", 1)),
           pads=[p[0], p[1], p[0], p[1]], output_padding=_pair(a.get("output_padding", 0)),
           dilations=_pair(a.get("dilation", 1)), group=int(a.get("groups", 1)),
           kernel_shape=[w.shape[2], w.shape[3]])


def _affine(g: _Graph, a: dict[str, Any], x: Tensor, op: str) -> tuple[str, str]:
    """Names of ``weight`` and ``bias`` over ``x``'s normalized shape, ones and zeros where
    the call has none (LayerNormalization and GroupNormalization want a scale)."""
    shape = tuple(int(d) for d in np.atleast_1d(a.get("normalized_shape", x.shape[1])))
    w, b = a.get("weight"), a.get("bias")
    wn = g.name(w, op) if w is not None else g.constant(np.ones(shape, x.dtype))
    bn = g.name(b, op) if b is not None else g.constant(np.zeros(shape, x.dtype))
    return wn, bn


def _layer_norm(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x = _x(a)
    if g.opset < 17:
        raise OnnxExportError(f"export: layer_norm needs opset 17 (LayerNormalization), got "
                              f"opset {g.opset}")
    axes = len(np.atleast_1d(a["normalized_shape"]))
    wn, bn = _affine(g, a, x, "layer_norm")
    g.node("LayerNormalization", [g.name(x, "layer_norm"), wn, bn], out, axis=-axes,
           epsilon=float(a.get("eps", 1e-5)))


# NOTE [ GroupNorm in ONNX ]
# GroupNormalization came in opset 18 with a scale and bias per *group*, which is not what
# PyTorch's and netcl's per-channel affine computes; opset 21 made them per channel and the
# checker rejects the opset-18 form. So at opset >= 21 group_norm is one GroupNormalization
# node, and below it the decomposition every runtime has: Reshape to (N, G, -1) (0 keeps the
# batch dynamic), InstanceNormalization with unit scale over that view (each group's mean and
# variance), Reshape back to the input's Shape, then Mul and Add by the per-channel weight and
# bias reshaped to (C, 1, ...).


def _group_norm(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x, groups, eps = _x(a), int(a["num_groups"]), float(a.get("eps", 1e-5))
    xn = g.name(x, "group_norm")
    if g.opset >= 21:
        wn, bn = _affine(g, a, x, "group_norm")
        g.node("GroupNormalization", [xn, wn, bn], out, num_groups=groups, epsilon=eps)
        return
    grouped = g.intermediate("Reshape", [xn, g.ints([0, groups, -1])])
    normed = g.intermediate("InstanceNormalization", [
        grouped, g.constant(np.ones(groups, x.dtype)), g.constant(np.zeros(groups, x.dtype))],
        epsilon=eps)
    channel = [x.shape[1]] + [1] * (x.ndim - 2)
    steps: list[tuple[str, list[str], dict[str, Any]]] = [
        ("Reshape", [normed, g.intermediate("Shape", [xn])], {})]
    for op, t in (("Mul", a.get("weight")), ("Add", a.get("bias"))):
        if t is not None:
            param = g.intermediate("Reshape", [g.name(t, "group_norm"), g.ints(channel)])
            steps.append((op, ["$", param], {}))
    _chain(g, out, steps)

def _interpolate(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    """Resize: nearest as PyTorch's ``floor(dst * in / out)`` (asymmetric, floor), the linear
    modes as ``half_pixel`` or ``align_corners``; a ``scale_factor`` as Resize's scales (the
    source index is ``dst / scale``, as F.interpolate's), a ``size`` as its sizes, the batch
    and channel dims taken from the input's Shape so that the batch stays dynamic."""
    x, mode = _x(a), str(a.get("mode", "nearest"))
    attrs: dict[str, Any] = {"mode": "nearest" if mode == "nearest" else "linear"}
    if mode == "nearest":
        attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:
        attrs["coordinate_transformation_mode"] = ("align_corners" if a.get("align_corners")
                                                   else "half_pixel")
    xn = g.name(x, "interpolate")
    factor = a.get("scale_factor")
    if factor is not None and not a.get("recompute_scale_factor"):
        spatial = x.ndim - 2
        factors = ([float(factor)] * spatial if isinstance(factor, (int, float))
                   else [float(f) for f in factor])
        scales = g.constant(np.array([1.0, 1.0, *factors], np.float32), "scales")
        g.node("Resize", [xn, "", scales], out, **attrs)
        return
    lead = g.intermediate("Slice", [g.intermediate("Shape", [xn]), g.ints([0]), g.ints([2])])
    sizes = g.intermediate("Concat", [lead, g.ints(out.shape[2:])], axis=0)
    g.node("Resize", [xn, "", "", sizes], out, **attrs)


def _chain(g: _Graph, out: Tensor, steps: Sequence[tuple[str, list[str], dict[str, Any]]],
           ) -> None:
    """Nodes in order, each step's ``"$"`` input the previous step's output; the last one
    writes ``out``."""
    prev = ""
    for i, (op, inputs, attrs) in enumerate(steps):
        names = [prev if n == "$" else n for n in inputs]
        if i == len(steps) - 1:
            g.node(op, names, out, **attrs)
        else:
            prev = g.intermediate(op, names, **attrs)


def _gelu(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    """Gelu at opset >= 20; below, ``x * (1 + erf(x / sqrt 2)) / 2`` or, for
    ``approximate="tanh"``, ``x * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2``."""
    x, approximate = _x(a), str(a.get("approximate", "none"))
    xn = g.name(x, "gelu")
    if g.opset >= 20:
        g.node("Gelu", [xn], out, approximate=approximate)
        return
    if approximate == "tanh":
        cube = g.intermediate("Mul", [g.intermediate("Mul", [xn, xn]), xn])
        inner = g.intermediate("Add", [xn, g.intermediate("Mul", [
            cube, g.scalar(0.044715, x)])])
        head: list[tuple[str, list[str], dict[str, Any]]] = [
            ("Mul", [inner, g.scalar(math.sqrt(2.0 / math.pi), x)], {}), ("Tanh", ["$"], {})]
    else:
        head = [("Mul", [xn, g.scalar(1.0 / math.sqrt(2.0), x)], {}), ("Erf", ["$"], {})]
    _chain(g, out, [*head, ("Add", ["$", g.scalar(1.0, x)], {}), ("Mul", ["$", xn], {}),
                    ("Mul", ["$", g.scalar(0.5, x)], {})])


def _clip(lo_key: str, hi_key: str, lo: float | None = None, hi: float | None = None
          ) -> Callable[[_Graph, dict[str, Any], Tensor], None]:
    """Clip between the call's ``lo_key``/``hi_key`` arguments (or fixed bounds)."""
    def emit(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
        x = _x(a)
        bounds = [a.get(lo_key, lo), a.get(hi_key, hi)]
        names = [g.scalar(float(v), x) if v is not None else "" for v in bounds]
        while names and not names[-1]:
            names.pop()
        g.node("Clip", [g.name(x, "clamp"), *names], out)
    return emit


def _elu(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    g.node("Elu", [g.name(_x(a), "elu")], out, alpha=float(a.get("alpha", 1.0)))


def _prelu(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    x, w = _x(a), a["weight"]
    slope = g.name(w, "prelu")
    if w.size > 1 and x.ndim > 2:  # one slope per channel, broadcast over the positions
        slope = g.intermediate("Reshape", [slope, g.ints([w.size] + [1] * (x.ndim - 2))])
    g.node("PRelu", [g.name(x, "prelu"), slope], out)


def _hardswish(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    xn = g.name(_x(a), "hardswish")
    if g.opset >= 14:
        g.node("HardSwish", [xn], out)
    else:
        _chain(g, out, [("HardSigmoid", [xn], {"alpha": 1.0 / 6.0, "beta": 0.5}),
                        ("Mul", [xn, "$"], {})])


def _hardsigmoid(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    g.node("HardSigmoid", [g.name(_x(a), "hardsigmoid")], out, alpha=1.0 / 6.0, beta=0.5)


def _softplus(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    """``Softplus(beta x) / beta``, and ``x`` where ``beta x > threshold`` (F.softplus)."""
    x, beta = _x(a), float(a.get("beta", 1.0))
    xn = g.name(x, "softplus")
    scaled = xn if beta == 1.0 else g.intermediate("Mul", [xn, g.scalar(beta, x)])
    soft = g.intermediate("Softplus", [scaled])
    if beta != 1.0:
        soft = g.intermediate("Mul", [soft, g.scalar(1.0 / beta, x)])
    above = g.intermediate("Greater", [scaled, g.scalar(float(a.get("threshold", 20.0)), x)])
    g.node("Where", [above, xn, soft], out)


def _mish(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    xn = g.name(_x(a), "mish")
    if g.opset >= 18:
        g.node("Mish", [xn], out)
    else:
        _chain(g, out, [("Softplus", [xn], {}), ("Tanh", ["$"], {}), ("Mul", [xn, "$"], {})])


def _silu(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    xn = g.name(_x(a), "silu")
    _chain(g, out, [("Sigmoid", [xn], {}), ("Mul", [xn, "$"], {})])


def _embedding(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    g.node("Gather", [g.name(a["weight"], "embedding"), g.name(a["indices"], "embedding")], out,
           axis=0)


def _rsqrt(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    _chain(g, out, [("Sqrt", [g.name(_x(a), "rsqrt")], {}), ("Reciprocal", ["$"], {})])


def _reduce(op_type: str) -> Callable[[_Graph, dict[str, Any], Tensor], None]:
    """ReduceMean/ReduceSum over the call's ``axis``/``dim`` (all axes by default); the axes
    are an input from opset 18 (ReduceSum: 13), an attribute before."""
    def emit(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
        x = _x(a)
        axis = a.get("dim") if a.get("dim") is not None else a.get("axis")
        axes = list(range(x.ndim)) if axis is None else [int(v) for v in np.atleast_1d(axis)]
        keep = int(bool(a.get("keepdim") or a.get("keepdims")))
        xn = g.name(x, op_type)
        if g.opset >= (13 if op_type == "ReduceSum" else 18):
            g.node(op_type, [xn, g.ints(axes, "axes")], out, keepdims=keep)
        else:
            g.node(op_type, [xn], out, axes=axes, keepdims=keep)
    return emit


def _squeeze_like(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
    """squeeze/unsqueeze/view as a Reshape to the output's shape (batch kept dynamic)."""
    _reshape(g, {"x": _x(a)}, out)


def _global_pool(op_type: str) -> Callable[[_Graph, dict[str, Any], Tensor], None]:
    def emit(g: _Graph, a: dict[str, Any], out: Tensor) -> None:
        x = _x(a)
        if tuple(out.shape[2:]) != (1,) * (x.ndim - 2):
            raise OnnxExportError(f"export: adaptive pooling to {tuple(out.shape[2:])} (only "
                                  f"(1, 1), {op_type}, is supported)")
        g.node(op_type, [g.name(x, op_type)], out)
    return emit


_EMITTERS: dict[str, Callable[[_Graph, dict[str, Any], Tensor], None]] = {
    "conv2d": _conv2d, "linear": _linear, "batch_norm": _batch_norm,
    "relu": _unary("Relu"), "sigmoid": _unary("Sigmoid"), "tanh": _unary("Tanh"),
    "leaky_relu": _leaky_relu, "softmax": _softmax("Softmax"),
    "log_softmax": _softmax("LogSoftmax"), "add": _binary("Add"), "sub": _binary("Sub"),
    "mul": _binary("Mul"), "matmul": _matmul, "max_pool2d": _pool("MaxPool"),
    "avg_pool2d": _pool("AveragePool"), "adaptive_avg_pool2d": _adaptive_avg_pool,
    "flatten": _flatten, "reshape": _reshape, "dropout": _dropout, "concat": _concat,
    "cat": _concat,
    # the layers of issue 17 and the elementwise and movement ops they are built from
    "conv1d": _conv1d, "conv_transpose2d": _conv_transpose2d, "layer_norm": _layer_norm,
    "group_norm": _group_norm, "interpolate": _interpolate, "gelu": _gelu, "elu": _elu,
    "prelu": _prelu, "hardswish": _hardswish, "hardsigmoid": _hardsigmoid,
    "relu6": _clip("", "", 0.0, 6.0), "hardtanh": _clip("min_val", "max_val", -1.0, 1.0),
    "clamp": _clip("min", "max"), "softplus": _softplus, "mish": _mish, "silu": _silu,
    "embedding": _embedding, "div": _binary("Div"), "pow": _binary("Pow"),
    "maximum": _binary("Max"), "minimum": _binary("Min"), "exp": _unary("Exp"),
    "log": _unary("Log"), "sqrt": _unary("Sqrt"), "neg": _unary("Neg"), "abs": _unary("Abs"),
    "reciprocal": _unary("Reciprocal"), "rsqrt": _rsqrt, "mean": _reduce("ReduceMean"),
    "sum": _reduce("ReduceSum"), "transpose": _transpose, "permute": _transpose,
    "squeeze": _squeeze_like, "unsqueeze": _squeeze_like, "view": _squeeze_like,
    "dropout2d": _dropout, "global_avg_pool2d": _global_pool("GlobalAveragePool"),
    "adaptive_max_pool2d": _global_pool("GlobalMaxPool"),
}


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise ImportError("netcl.onnx needs the onnx package: pip install 'netcl[onnx]'"
                          ) from None
    return onnx


def export(model: Module, example_input: Tensor, path: str | os.PathLike[str], *,
           opset: int = DEFAULT_OPSET, input_name: str = "input", output_name: str = "output",
           dynamic_batch: bool = True) -> Path:
    """Trace ``model``'s forward on ``example_input`` (eval mode, no gradients) and write it as
    an ONNX model checked by ``onnx.checker``; returns the path.

    Supported: conv1d/conv2d, conv_transpose2d, linear, matmul, batch_norm (eval), layer_norm
    (LayerNormalization, opset >= 17), group_norm (GroupNormalization at opset >= 21, an
    InstanceNormalization decomposition below: NOTE [ GroupNorm in ONNX ]), interpolate
    (Resize: nearest, linear, bilinear), relu/relu6/hardtanh/clamp (Clip), sigmoid, tanh,
    leaky_relu, elu, prelu, gelu (Gelu at opset >= 20, the erf or tanh formula below),
    silu, hardswish, hardsigmoid, softplus, mish (Mish at opset >= 18), softmax/log_softmax,
    add/sub/mul/div/pow/maximum/minimum, exp/log/sqrt/rsqrt/neg/abs/reciprocal, mean/sum,
    embedding (Gather), max/avg pooling, global average/max pooling, flatten/reshape/view/
    squeeze/unsqueeze, transpose/permute, dropout/dropout2d (eval: identity), concat.
    ``dynamic_batch`` names the first axis ``batch`` so any batch size runs.

    Raises:
        OnnxExportError: an op or argument the exporter has no rule for, named.
        ImportError: without the ``onnx`` package (``pip install 'netcl[onnx]'``).

    Examples:
        >>> import numpy as np, os, tempfile
        >>> import netcl.nn as nn
        >>> from netcl.core.tensor import Tensor
        >>> m = nn.Sequential(nn.Linear(4, 3, device="cpu"), nn.ReLU())
        >>> x = Tensor.from_host(m[0].weight.queue, np.ones((2, 4), np.float32))
        >>> p = export(m, x, os.path.join(tempfile.mkdtemp(), "m.onnx"))
        >>> import onnx; [n.op_type for n in onnx.load(p).graph.node]
        ['Gemm', 'Relu', 'Identity']
    """
    onnx = _onnx()
    if not isinstance(example_input, Tensor):
        raise TypeError(f"export: example_input must be a netcl Tensor, got "
                        f"{type(example_input).__name__}")
    was_training = model.training
    model.eval()
    names = {id(t): name for name, t in model.state_dict().items()}
    tensors = dict(model.state_dict())
    names[id(example_input)] = input_name
    try:
        with no_grad(), trace() as calls:
            output = model(example_input)
    finally:
        model.train(was_training)
    if not isinstance(output, Tensor):
        raise OnnxExportError(f"export: the model returned a {type(output).__name__}; one "
                              f"Tensor is supported")
    graph = _Graph(onnx, names, opset)
    for call in calls:
        _emit(graph, call)
    final = graph.names.get(id(output))
    if final is None:
        raise OnnxExportError("export: the model's output does not come from a traced op")
    graph.nodes.append(onnx.helper.make_node("Identity", [final], [output_name]))
    used = {i for n in graph.nodes for i in n.input}
    inits = [onnx.numpy_helper.from_array(t.to_host(), name) for name, t in tensors.items()
             if name in used] + graph.initializers
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(example_input.dtype))
    out_elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(output.dtype))

    def shape(t: Tensor) -> list[Any]:
        dims: list[Any] = list(t.shape)
        if dynamic_batch and dims:
            dims[0] = "batch"
        return dims

    g = onnx.helper.make_graph(
        graph.nodes, "netcl", [onnx.helper.make_tensor_value_info(input_name, elem,
                                                                  shape(example_input))],
        [onnx.helper.make_tensor_value_info(output_name, out_elem, shape(output))], inits)
    proto = onnx.helper.make_model(g, producer_name="netcl",
                                   opset_imports=[onnx.helper.make_opsetid("", opset)])
    proto.ir_version = min(proto.ir_version, 9)
    onnx.checker.check_model(proto, full_check=True)
    target = Path(path)
    atomic_write(target, proto.SerializeToString())
    return target


def _emit(graph: _Graph, call: Call) -> None:
    emitter = _EMITTERS.get(call.name)
    if emitter is None:
        raise OnnxExportError(f"export: no ONNX rule for {call.name}")
    if not isinstance(call.output, Tensor):
        raise OnnxExportError(f"export: {call.name} returned a {type(call.output).__name__}")
    emitter(graph, call.args, call.output)
