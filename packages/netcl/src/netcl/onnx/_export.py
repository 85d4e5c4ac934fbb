"""``netcl.onnx.export``: a model's forward, traced op by op, as an ONNX graph.

The model runs once in eval mode under ``no_grad`` with the example input while
:func:`netcl.onnx._trace.trace` records its functional calls; each call becomes one or a few ONNX
nodes (:data:`_EMITTERS`), parameters and buffers become initializers under their
``state_dict`` names, and the graph is checked with ``onnx.checker`` before it is written
(atomically). A call the exporter has no rule for, or a tensor that comes from an untraced op,
fails the export with :class:`OnnxExportError` naming the op.
"""

from __future__ import annotations

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

    def __init__(self, onnx: Any, names: dict[int, str]) -> None:
        self.onnx, self.names = onnx, dict(names)
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
    pad = a.get("padding", 0)
    if isinstance(pad, str):
        if pad == "valid":
            pad = 0
        elif pad == "same":
            pad = ((kh - 1) * dil[0] // 2, (kw - 1) * dil[1] // 2)
        else:
            raise OnnxExportError(f"export: conv2d padding {pad!r}")
    p = _pair(pad)
    inputs = [g.name(x, "conv2d"), g.name(w, "conv2d")] + ([g.name(b, "conv2d")] if b is not None
                                                         else [])
    g.node("Conv", inputs, out, strides=_pair(a.get("stride", 1)), pads=[p[0], p[1], p[0], p[1]],
           dilations=dil, group=int(a.get("groups", 1)), kernel_shape=[kh, kw])


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
    shape = g.constant(np.array(out.shape, np.int64), "shape")
    g.node("Reshape", [g.name(x, "reshape"), shape], out)


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


_EMITTERS: dict[str, Callable[[_Graph, dict[str, Any], Tensor], None]] = {
    "conv2d": _conv2d, "linear": _linear, "batch_norm": _batch_norm,
    "relu": _unary("Relu"), "sigmoid": _unary("Sigmoid"), "tanh": _unary("Tanh"),
    "leaky_relu": _leaky_relu, "softmax": _softmax("Softmax"),
    "log_softmax": _softmax("LogSoftmax"), "add": _binary("Add"), "sub": _binary("Sub"),
    "mul": _binary("Mul"), "matmul": _matmul, "max_pool2d": _pool("MaxPool"),
    "avg_pool2d": _pool("AveragePool"), "adaptive_avg_pool2d": _adaptive_avg_pool,
    "flatten": _flatten, "reshape": _reshape, "dropout": _dropout, "concat": _concat,
    "cat": _concat,
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

    Supported: conv2d, linear, batch_norm (eval), relu/sigmoid/tanh/leaky_relu,
    softmax/log_softmax, add/sub/mul, matmul, max/avg pooling, global average pooling,
    flatten/reshape, dropout (eval: identity), concat. ``dynamic_batch`` names the first axis
    ``batch`` so any batch size runs.

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
    graph = _Graph(onnx, names)
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

    def shape(t: Tensor) -> list[Any]:
        dims: list[Any] = list(t.shape)
        if dynamic_batch and dims:
            dims[0] = "batch"
        return dims

    g = onnx.helper.make_graph(
        graph.nodes, "netcl", [onnx.helper.make_tensor_value_info(input_name, elem,
                                                                  shape(example_input))],
        [onnx.helper.make_tensor_value_info(output_name, elem, shape(output))], inits)
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
