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

import netcl.ops as R
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


def _pads_n(attrs: dict[str, Any], op: str, n: int) -> tuple[list[int], list[int]]:
    """The begin and end ``pads`` of an ``n``-D window op."""
    pads = [int(p) for p in attrs.get("pads", [0] * (2 * n))]
    if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise OnnxImportError(f"load: {op} auto_pad={attrs['auto_pad']!r} is not supported")
    if len(pads) != 2 * n:
        raise OnnxImportError(f"load: {op} pads {pads} for a {n}-D window")
    return pads[:n], pads[n:]


def _pads(attrs: dict[str, Any], op: str) -> tuple[int, int]:
    begin, end = _pads_n(attrs, op, 2)
    if begin != end:
        raise OnnxImportError(f"load: {op} with asymmetric pads {begin + end}")
    return begin[0], begin[1]


# Float inputs that are settings, not data: kept on the host, never Parameters.
_HOST_INPUTS: dict[str, tuple[int, ...]] = {"Resize": (1, 2), "Clip": (1, 2)}


class OnnxModule(Module):
    """An ONNX graph run with netcl ops (:func:`load` builds it)."""

    def __init__(self, onnx: Any, model: Any, queue: Any, dtype: str) -> None:
        super().__init__()
        graph = model.graph
        self._onnx = onnx
        self._nodes = list(graph.node)
        self._consts: dict[str, np.ndarray[Any, Any]] = {}
        self._params: dict[str, str] = {}  # ONNX name -> attribute name
        host = {n.input[k] for n in self._nodes for k in _HOST_INPUTS.get(n.op_type, ())
                if k < len(n.input)}
        for i, init in enumerate(graph.initializer):
            arr = onnx.numpy_helper.to_array(init)
            if arr.dtype.kind == "f" and init.name not in host:
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
    if x.ndim == 3:
        return _conv1d(a, at, m)
    b = a[2] if len(a) > 2 else None
    dil = list(at.get("dilations", [1, 1]))
    begin, end = _pads_n(at, "Conv", 2)
    if begin != end:  # padding="same" with an even kernel: the extra row/column at the end
        x = A.pad(x, (begin[1], end[1], begin[0], end[0]))
        begin = [0, 0]
    return F.conv2d(x, w, b, stride=tuple(at.get("strides", [1, 1])),
                    padding=(begin[0], begin[1]),
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


def _binary(fn: Callable[[Any, Any], Tensor], host: Callable[[Any, Any], Any] | None = None,
            ) -> Callable[[list[Any], dict[str, Any], OnnxModule], Any]:
    """A binary op on device tensors (a host constant operand uploaded in the other's dtype),
    or with ``host`` (NumPy) on two host constants: shape arithmetic."""
    def run(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Any:
        lhs, rhs = a[0], a[1]
        if not isinstance(lhs, Tensor) and not isinstance(rhs, Tensor):
            if host is None:
                raise OnnxImportError(f"load: {fn.__name__} of two constants is not supported")
            return host(np.asarray(lhs), np.asarray(rhs))
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


def _concat(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Any:
    if not any(isinstance(t, Tensor) for t in a):  # shape arithmetic: host constants
        return np.concatenate([np.atleast_1d(t) for t in a], int(at["axis"]))
    like = next(t for t in a if isinstance(t, Tensor))
    return A.concat([_tensor(m, t, like) for t in a], int(at["axis"]))


def _global_avg(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    return F.adaptive_avg_pool2d(a[0], 1)


# -- the layers of issue 17 and the shape arithmetic PyTorch's exporter writes around them -------


def _text(at: dict[str, Any], key: str, default: str) -> str:
    """A string attribute (bytes in the proto)."""
    value = at.get(key, default)
    return value.decode() if isinstance(value, bytes) else str(value)


def _host(v: Any, op: str) -> np.ndarray[Any, Any]:
    """A host constant input (shapes, axes, scales), or the error naming the op."""
    if isinstance(v, Tensor):
        raise OnnxImportError(f"load: {op} with a computed (device tensor) shape or axes "
                              f"input is not supported")
    return np.asarray(v)


def _conv1d(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x, w = a[0], a[1]
    b = a[2] if len(a) > 2 else None
    begin, end = _pads_n(at, "Conv", 1)
    if begin != end:
        x, begin = A.pad(x, (begin[0], end[0])), [0]
    return F.conv1d(x, w, b, stride=int(at.get("strides", [1])[0]), padding=begin[0],
                    dilation=int(at.get("dilations", [1])[0]), groups=int(at.get("group", 1)))


def _conv_transpose(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x, w = a[0], a[1]
    b = a[2] if len(a) > 2 else None
    if x.ndim != 4 or "output_shape" in at:
        raise OnnxImportError(f"load: ConvTranspose on {x.ndim}-D input or with output_shape "
                              f"(only 2-D with pads) is not supported")
    return F.conv_transpose2d(x, w, b, stride=tuple(at.get("strides", [1, 1])),
                              padding=_pads(at, "ConvTranspose"),
                              output_padding=tuple(at.get("output_padding", [0, 0])),
                              groups=int(at.get("group", 1)),
                              dilation=tuple(at.get("dilations", [1, 1])))


def _layer_norm(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x = a[0]
    shape = tuple(x.shape[int(at.get("axis", -1)) % x.ndim:])

    def full(v: Any) -> Tensor:
        t = _tensor(m, v, x)
        return t if t.shape == shape else A.broadcast_to(t, shape)

    bias = full(a[2]) if len(a) > 2 and a[2] is not None else None
    return F.layer_norm(x, shape, full(a[1]), bias, float(at.get("epsilon", 1e-5)))


def _instance_norm(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x, scale, bias = a[0], _tensor(m, a[1], a[0]), _tensor(m, a[2], a[0])
    return F.group_norm(x, x.shape[1], scale, bias, float(at.get("epsilon", 1e-5)))


def _group_norm(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    """GroupNormalization of opset 21: per-channel scale and bias (the checker rejects
    opset 18's per-group form: NOTE [ GroupNorm in ONNX ])."""
    x, groups = a[0], int(at["num_groups"])
    scale, bias = _tensor(m, a[1], x), _tensor(m, a[2], x)
    if scale.size != x.shape[1] or bias.size != x.shape[1]:
        raise OnnxImportError(f"load: GroupNormalization scale {scale.shape} and bias "
                              f"{bias.shape} must have one value per channel of {x.shape}")
    return F.group_norm(x, groups, scale, bias, float(at.get("epsilon", 1e-5)))


def _resize(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    """Resize as F.interpolate: nearest (asymmetric, floor: PyTorch's), linear/bilinear
    (``half_pixel``, ``pytorch_half_pixel`` above size 1, ``align_corners``)."""
    x = a[0]
    mode = _text(at, "mode", "nearest")
    ctm = _text(at, "coordinate_transformation_mode", "half_pixel")
    nearest = _text(at, "nearest_mode", "round_prefer_floor")
    scales = _host(a[2], "Resize") if len(a) > 2 and a[2] is not None else np.zeros(0)
    sizes = _host(a[3], "Resize") if len(a) > 3 and a[3] is not None else np.zeros(0)
    axes = [int(v) % x.ndim for v in at.get("axes", range(x.ndim))]
    if x.ndim not in (3, 4) or at.get("antialias", 0) or sorted(axes) != axes:
        raise OnnxImportError(f"load: Resize of {x.ndim}-D input (antialias, axes {axes}) is "
                              f"not supported (3-D or 4-D, no antialias)")
    full_scale, full_size = [1.0] * x.ndim, list(x.shape)
    for k, ax in enumerate(axes):
        if scales.size:
            full_scale[ax] = float(scales[k])
        if sizes.size:
            full_size[ax] = int(sizes[k])
    if (scales.size and full_scale[:2] != [1.0, 1.0]) or full_size[:2] != list(x.shape[:2]):
        raise OnnxImportError("load: Resize of the batch or channel dims is not supported")
    align: bool | None = None
    if mode == "nearest":
        if ctm != "asymmetric" or nearest != "floor":
            raise OnnxImportError(f"load: Resize nearest with {ctm}/{nearest} (only "
                                  f"asymmetric/floor, PyTorch's) is not supported")
        kind = "nearest"
    elif mode == "linear" and ctm in ("half_pixel", "pytorch_half_pixel", "align_corners"):
        kind, align = ("linear" if x.ndim == 3 else "bilinear"), ctm == "align_corners"
        if ctm == "pytorch_half_pixel" and sizes.size and min(full_size[2:]) == 1:
            raise OnnxImportError("load: Resize pytorch_half_pixel to size 1 is not supported")
    else:
        raise OnnxImportError(f"load: Resize mode {mode} with {ctm} is not supported")
    if sizes.size:
        return F.interpolate(x, size=full_size[2:], mode=kind, align_corners=align)
    return F.interpolate(x, scale_factor=full_scale[2:], mode=kind, align_corners=align)


def _prelu(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    x, slope = a[0], _tensor(m, a[1], a[0])
    channels = x.shape[1] if x.ndim >= 2 else 1
    lead = [d for d in slope.shape if d != 1]
    if slope.size not in (1, channels) or (slope.size > 1 and slope.shape[0] != channels
                                           and x.ndim > 2) or len(lead) > 1:
        raise OnnxImportError(f"load: PRelu slope {slope.shape} on input {x.shape} (one slope or "
                              f"one per channel) is not supported")
    return F.prelu(x, A.reshape(slope, (slope.size,)))


def _hard_sigmoid(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    alpha, beta = float(at.get("alpha", 0.2)), float(at.get("beta", 0.5))
    return A.clamp(A.add(A.mul(a[0], alpha), beta), 0.0, 1.0)


def _clip(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    bounds = [float(v.to_host() if isinstance(v, Tensor) else np.asarray(v))
              if v is not None else None
              for v in [*a[1:], None, None][:2]]
    return A.clamp(a[0], bounds[0], bounds[1])


def _gather(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Any:
    data, index, axis = a[0], a[1], int(at.get("axis", 0))
    if not isinstance(data, Tensor):
        return np.take(data, _host(index, "Gather"), axis=axis)
    if not isinstance(index, Tensor):
        index = Tensor.from_host(data.queue, np.asarray(index, np.int64))
    if axis % data.ndim == 0 and data.ndim == 2:
        return A.embedding(index, data)
    if index.ndim == 1:
        return A.index_select(data, axis % data.ndim, index)
    raise OnnxImportError(f"load: Gather of {data.shape} at axis {axis} with {index.ndim}-D "
                          f"indices is not supported")


def _axes(a: list[Any], at: dict[str, Any], op: str) -> list[int] | None:
    """Axes from the attribute (older opsets) or the second input (newer)."""
    if "axes" in at:
        return [int(v) for v in at["axes"]]
    if len(a) > 1 and a[1] is not None:
        return [int(v) for v in _host(a[1], op).ravel()]
    return None


def _unsqueeze(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Any:
    x, axes = a[0], _axes(a, at, "Unsqueeze") or []
    rank = x.ndim + len(axes)
    shape = list(x.shape)
    for ax in sorted(v % rank for v in axes):
        shape.insert(ax, 1)
    return A.reshape(x, tuple(shape)) if isinstance(x, Tensor) else np.reshape(x, shape)


def _squeeze(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Any:
    x, axes = a[0], _axes(a, at, "Squeeze")
    drop = ({v % x.ndim for v in axes} if axes is not None
            else {i for i, d in enumerate(x.shape) if d == 1})
    shape = tuple(d for i, d in enumerate(x.shape) if i not in drop)
    return A.reshape(x, shape) if isinstance(x, Tensor) else np.reshape(x, shape)


def _reduce(fn: Callable[..., Tensor]) -> Callable[[list[Any], dict[str, Any], OnnxModule],
                                                    Tensor]:
    def run(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
        axes = _axes(a, at, "Reduce") or None  # none or empty: all axes
        if axes is None and at.get("noop_with_empty_axes", 0):
            x: Tensor = a[0]
            return x
        return fn(a[0], tuple(axes) if axes is not None else None,
                  bool(at.get("keepdims", 1)))
    return run


def _slice(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Any:
    x = a[0]
    starts, ends = (_host(v, "Slice").ravel().tolist() for v in a[1:3])
    axes = _host(a[3], "Slice").ravel().tolist() if len(a) > 3 and a[3] is not None else None
    steps = _host(a[4], "Slice").ravel().tolist() if len(a) > 4 and a[4] is not None else None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if isinstance(x, Tensor):
        return A.slice(x, starts, ends, steps, [v % x.ndim for v in axes])
    key = [slice(None)] * np.ndim(x)
    for s, e, ax, st in zip(starts, ends, axes, steps):
        key[ax] = slice(s, e, st)
    return np.asarray(x)[tuple(key)]


def _where(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Tensor:
    cond, lhs, rhs = a
    like = lhs if isinstance(lhs, Tensor) else rhs
    return A.where(_tensor(m, cond, cond) if isinstance(cond, Tensor) else
                   Tensor.from_host(like.queue, np.asarray(cond, np.uint8)), lhs, rhs)


def _compare(fn: Callable[[Any, Any], Any], host: Callable[[Any, Any], Any]
             ) -> Callable[[list[Any], dict[str, Any], OnnxModule], Any]:
    def run(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Any:
        lhs, rhs = a
        if not isinstance(lhs, Tensor) and not isinstance(rhs, Tensor):
            return host(lhs, rhs)
        if isinstance(rhs, Tensor) and not isinstance(lhs, Tensor):
            raise OnnxImportError("load: a comparison with a constant on the left is not "
                                  "supported")
        return fn(lhs, rhs if isinstance(rhs, Tensor) else float(np.asarray(rhs)))
    return run


def _cast(a: list[Any], at: dict[str, Any], m: OnnxModule) -> Any:
    dtype = m._onnx.helper.tensor_dtype_to_np_dtype(int(at["to"]))
    x = a[0]
    return A.cast(x, np.dtype(dtype).name) if isinstance(x, Tensor) else np.asarray(x, dtype)


_RUNNERS: dict[str, Callable[[list[Any], dict[str, Any], OnnxModule], Any]] = {
    "Conv": _conv, "Gemm": _gemm, "BatchNormalization": _batchnorm,
    "MaxPool": _pool("MaxPool"), "AveragePool": _pool("AveragePool"),
    "GlobalAveragePool": _global_avg,
    "Relu": lambda a, at, m: F.relu(a[0]), "Sigmoid": lambda a, at, m: A.sigmoid(a[0]),
    "Tanh": lambda a, at, m: A.tanh(a[0]),
    "LeakyRelu": lambda a, at, m: F.leaky_relu(a[0], float(at.get("alpha", 0.01))),
    "Softmax": _softmax(False), "LogSoftmax": _softmax(True),
    "Add": _binary(A.add, np.add), "Sub": _binary(A.sub, np.subtract),
    "Mul": _binary(A.mul, np.multiply), "MatMul": _binary(A.matmul), "Flatten": _flatten,
    "Reshape": _reshape,
    "Transpose": _transpose, "Concat": _concat,
    "Identity": lambda a, at, m: a[0], "Dropout": lambda a, at, m: a[0],
    "Constant": lambda a, at, m: None,
    # the layers of issue 17, and what netcl's exporter and PyTorch's write around them
    "ConvTranspose": _conv_transpose, "LayerNormalization": _layer_norm,
    "InstanceNormalization": _instance_norm, "GroupNormalization": _group_norm,
    "Resize": _resize, "GlobalMaxPool": lambda a, at, m: F.adaptive_max_pool2d(a[0], 1),
    "Gelu": lambda a, at, m: F.gelu(a[0], approximate=_text(at, "approximate", "none")),
    "Erf": lambda a, at, m: A.elementwise("erf", a[0]),
    "Elu": lambda a, at, m: F.elu(a[0], float(at.get("alpha", 1.0))), "PRelu": _prelu,
    "HardSwish": lambda a, at, m: F.hardswish(a[0]), "HardSigmoid": _hard_sigmoid,
    "Clip": _clip, "Softplus": lambda a, at, m: A.elementwise("softplus", a[0]),
    "Mish": lambda a, at, m: F.mish(a[0]), "Gather": _gather,
    "Div": _binary(A.div, np.divide), "Pow": _binary(A.pow, np.power),
    "Max": _binary(A.maximum, np.maximum), "Min": _binary(A.minimum, np.minimum),
    "Exp": lambda a, at, m: A.exp(a[0]), "Log": lambda a, at, m: A.log(a[0]),
    "Sqrt": lambda a, at, m: A.sqrt(a[0]), "Neg": lambda a, at, m: A.neg(a[0]),
    "Abs": lambda a, at, m: A.abs(a[0]), "Reciprocal": lambda a, at, m: A.reciprocal(a[0]),
    "ReduceMean": _reduce(A.mean), "ReduceSum": _reduce(A.sum),
    "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Slice": _slice, "Where": _where,
    "Greater": _compare(R.gt, np.greater), "Less": _compare(R.lt, np.less), "Cast": _cast,
    "Shape": lambda a, at, m: np.array(a[0].shape, np.int64)[
        int(at.get("start", 0)):at.get("end")],
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
