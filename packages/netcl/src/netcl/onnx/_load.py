"""``netcl.onnx.load``: an ONNX model as a netcl Module that runs on any netcl device.

:class:`OnnxModule` keeps the graph's float initializers as Parameters (trainable, moved by
``.to``) and runs the nodes in order with netcl's functional ops; integer initializers (shapes,
axes) stay host constants. The op set is the exporter's plus what ``torch.onnx.export`` writes
for the same layers (Gemm with ``transB``, Constant, Transpose, Dropout, Shape-free Reshape).
A node outside it fails the load with :class:`OnnxImportError` naming the op.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from netcl.autograd import ops as A
from netcl.core.device import DeviceHandle, get_active_device, manager
from netcl.core.dtypes import canonical_dtype
from netcl.core.tensor import Tensor
from netcl.nn import Module, Parameter
from netcl.nn import functional as F

__all__ = ["OnnxImportError", "OnnxModule", "load"]


class OnnxImportError(ValueError):
    """An ONNX model netcl cannot run: an op, attribute or input it has no rule for, named."""

    __module__ = "netcl.onnx"


def _attrs(onnx: Any, node: Any) -> dict[str, Any]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _pads(attrs: dict[str, Any], op: str) -> tuple[int, int]:
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise OnnxImportError(f"load: {op} auto_pad={attrs['auto_pad']!r} is not supported")
    if len(pads) != 4 or pads[0] != pads[2] or pads[1] != pads[3]:
        raise OnnxImportError(f"load: {op} with asymmetric pads {pads}")
    return int(pads[0]), int(pads[1])


class OnnxModule(Module):
    """An ONNX graph run with netcl ops (:func:`load` builds it)."""

    def __init__(self, onnx: Any, model: Any, queue: Any, dtype: str) -> None:
        super().__init__()
        graph = model.graph
        self._onnx = onnx
        self._nodes = list(graph.node)
        self._consts: dict[str, np.ndarray[Any, Any]] = {}
        self._params: dict[str, str] = {}  # ONNX name -> attribute name
        for i, init in enumerate(graph.initializer):
            arr = onnx.numpy_helper.to_array(init)
            if arr.dtype.kind == "f":
                attr = f"p{i}"
                setattr(self, attr, Parameter.from_host(queue, arr.astype(dtype)))
                self._params[init.name] = attr
            else:
                self._consts[init.name] = arr
        inits = {i.name for i in graph.initializer}
        self.input_names = [i.name for i in graph.input if i.name not in inits]
        self.output_names = [o.name for o in graph.output]
        for node in self._nodes:
            if node.op_type not in _RUNNERS:
                raise OnnxImportError(f"load: ONNX op {node.op_type} (node {node.name!r}) is "
                                      f"not supported")
            if node.op_type == "Constant":
                self._consts[node.output[0]] = onnx.numpy_helper.to_array(
                    _attrs(onnx, node)["value"])

    def forward(self, *inputs: Tensor) -> Any:
        if len(inputs) != len(self.input_names):
            raise TypeError(f"OnnxModule: the graph takes {len(self.input_names)} inputs "
                            f"({', '.join(self.input_names)}), got {len(inputs)}")
        env: dict[str, Any] = dict(zip(self.input_names, inputs))
        for name, attr in self._params.items():
            env[name] = getattr(self, attr)
        env.update(self._consts)
        for node in self._nodes:
            if node.op_type == "Constant":
                continue
            args = [env[n] if n else None for n in node.input]
            out = _RUNNERS[node.op_type](args, _attrs(self._onnx, node), self)
            env[node.output[0]] = out
        outs = [env[n] for n in self.output_names]
        return outs[0] if len(outs) == 1 else tuple(outs)


def _tensor(module: OnnxModule, v: Any, like: Tensor) -> Tensor:
    if isinstance(v, Tensor):
        return v
    return Tensor.from_host(like.queue, np.asarray(v, dtype=like.dtype))


def _conv(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x, w = a[0], a[1]
    b = a[2] if len(a) > 2 else None
    dil = list(at.get("dilations", [1, 1]))
    return F.conv2d(x, w, b, stride=tuple(at.get("strides", [1, 1])), padding=_pads(at, "Conv"),
                    dilation=tuple(dil), groups=int(at.get("group", 1)))


def _gemm(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x, w = a[0], a[1]
    b = a[2] if len(a) > 2 else None
    if at.get("transA", 0) or at.get("alpha", 1.0) != 1.0 or at.get("beta", 1.0) != 1.0:
        raise OnnxImportError("load: Gemm with transA, alpha or beta is not supported")
    if at.get("transB", 0):
        return F.linear(x, w, b)
    y = A.matmul(x, w)
    return y if b is None else A.add(y, b)


def _batchnorm(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x, scale, bias, mean, var = a[:5]
    return F.batch_norm(x, mean, var, scale, bias, training=False,
                        eps=float(at.get("epsilon", 1e-5)))


def _pool(kind: str) -> Callable[[list[Any], dict[str, Any], OnnxModule], Tensor]:
    def run(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
        k = tuple(at["kernel_shape"])
        stride = tuple(at.get("strides", k))
        pad = _pads(at, kind)
        ceil = bool(at.get("ceil_mode", 0))
        if kind == "MaxPool":
            return F.max_pool2d(a[0], k, stride, pad, ceil_mode=ceil)
        return F.avg_pool2d(a[0], k, stride, pad, ceil_mode=ceil,
                            count_include_pad=bool(at.get("count_include_pad", 0)))
    return run


def _binary(fn: Callable[[Any, Any], Tensor]) -> Callable[[list[Any], dict[str, Any],
                                                             OnnxModule], Tensor]:
    def run(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
        lhs, rhs = a[0], a[1]
        like = lhs if isinstance(lhs, Tensor) else rhs
        return fn(_tensor(m, lhs, like), _tensor(m, rhs, like))
    return run


def _flatten(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x = a[0]
    axis = int(at.get("axis", 1)) % max(1, x.ndim)
    lead = int(np.prod(x.shape[:axis])) if axis else 1
    return A.reshape(x, (lead, -1))


def _reshape(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x, shape = a[0], a[1]
    if isinstance(shape, Tensor):
        raise OnnxImportError("load: Reshape to a computed shape is not supported")
    dims = [int(d) for d in np.asarray(shape)]
    dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return A.reshape(x, tuple(dims))


def _transpose(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x = a[0]
    perm = tuple(at.get("perm", reversed(range(x.ndim))))
    return A.permute(x, perm)


def _softmax(log: bool) -> Callable[[list[Any], dict[str, Any], OnnxModule], Tensor]:
    def run(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
        axis = int(at.get("axis", -1))
        return F.log_softmax(a[0], dim=axis) if log else F.softmax(a[0], dim=axis)
    return run


def _concat(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    return A.concat(list(a), int(at["axis"]))


def _global_avg(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    return F.adaptive_avg_pool2d(a[0], 1)


_RUNNERS: dict[str, Callable[[list[Any], dict[str, Any], OnnxModule], Any]] = {
    "Conv": _conv, "Gemm": _gemm, "BatchNormalization": _batchnorm,
    "MaxPool": _pool("MaxPool"), "AveragePool": _pool("AveragePool"),
    "GlobalAveragePool": _global_avg,
    "Relu": lambda a, at, m: F.relu(a[0]), "Sigmoid": lambda a, at, m: A.sigmoid(a[0]),
    "Tanh": lambda a, at, m: A.tanh(a[0]),
    "LeakyRelu": lambda a, at, m: F.leaky_relu(a[0], float(at.get("alpha", 0.01))),
    "Softmax": _softmax(False), "LogSoftmax": _softmax(True),
    "Add": _binary(A.add), "Sub": _binary(A.sub), "Mul": _binary(A.mul),
    "MatMul": _binary(A.matmul), "Flatten": _flatten, "Reshape": _reshape,
    "Transpose": _transpose, "Concat": _concat,
    "Identity": lambda a, at, m: a[0], "Dropout": lambda a, at, m: a[0],
    "Constant": lambda a, at, m: None,
}


def load(path: str | os.PathLike[str], *, device: Any = None, dtype: Any = None,
         queue: Any = None) -> OnnxModule:
    """Read an ONNX model (checked by ``onnx.checker``) as an :class:`OnnxModule` on
    ``device`` (or ``queue``; the default device otherwise), its weights in ``dtype``
    (float32 by default).

    Raises:
        OnnxImportError: a node, attribute or input netcl has no rule for, named.
        ImportError: without the ``onnx`` package (``pip install 'netcl[onnx]'``).
    """
    try:
        import onnx
    except ImportError:
        raise ImportError("netcl.onnx needs the onnx package: pip install 'netcl[onnx]'"
                          ) from None
    model = onnx.load(os.fspath(path))
    onnx.checker.check_model(model)
    if device is not None and queue is not None:
        raise TypeError("netcl.onnx.load: give device= or queue=, not both")
    if queue is None:
        handle = device if isinstance(device, DeviceHandle) else (
            get_active_device() if device is None else manager.default(device))
        if handle is None:
            raise ValueError(f"netcl.onnx.load: device {device!r} matches no device")
        queue = handle.queue
    dt = "float32" if dtype is None else canonical_dtype(dtype, op="netcl.onnx.load")
    module = OnnxModule(onnx, model, queue, dt)
    module.eval()
    return module
