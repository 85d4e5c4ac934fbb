"""netcl.onnx on the layers of issue 17 and layer norm: each exported alone (at the opsets where
its ONNX form changes), checked by onnx.checker, run by onnxruntime and loaded back into netcl,
on every device; a transformer-ish block, a decoder-ish upsampler and an embedding model whole;
and the errors for what stays unsupported."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import netcl.nn as nn
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.nn import functional as F

onnx = pytest.importorskip("onnx", reason="the netcl[onnx] extra")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the exported files")

from netcl.onnx import OnnxExportError, OnnxImportError, export, load  # noqa: E402

TOL = 1e-5  # relative to the largest output, float32


def _rel(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> float:
    """The largest error relative to the largest output (the issue's measure), or, where it
    is larger, relative to each element of at least a tenth of the largest output (so that a
    slightly wrong constant cannot hide behind a large output)."""
    scale = max(float(np.abs(want).max()), 1e-30)
    err = np.abs(got.astype(np.float64) - want)
    return float(max(err.max() / scale, (err / np.maximum(np.abs(want), 1e-1 * scale)).max()))


def _randomize(model: nn.Module, seed: int) -> nn.Module:
    """Every parameter and buffer random (variances positive), so that no unit scale or zero
    bias hides a missing Mul or Add."""
    rng = np.random.default_rng(seed)
    state = {}
    for name, t in model.state_dict().items():
        arr = t.to_host()
        if arr.dtype.kind == "f":
            arr = rng.standard_normal(arr.shape).astype(arr.dtype) * 0.5
            if name.endswith("running_var"):
                arr = np.abs(arr) + 0.5
        state[name] = arr
    model.load_state_dict(state)
    return model


def _check(model: nn.Module, x: np.ndarray[Any, Any], dev: DeviceHandle, path: Path,
           opset: int = 17) -> Any:
    """Export at ``opset``; onnxruntime and the loaded module both agree with netcl within TOL,
    also for another batch size. Returns the exported model."""
    model.eval()
    xt = Tensor.from_host(dev.queue, x)
    want = model(xt).to_host()
    export(model, xt, path, opset=opset)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x})[0]
    assert got.shape == want.shape
    assert _rel(got, want) <= TOL, ("onnxruntime", _rel(got, want))
    back = load(path, queue=dev.queue)
    again = back(xt).to_host()
    assert again.shape == want.shape
    assert _rel(again, want) <= TOL, ("netcl.onnx.load", _rel(again, want))
    if x.shape[0] > 1:  # the batch axis stays dynamic: one sample alone gives its own row
        one = session.run(None, {"input": x[:1]})[0]
        assert _rel(one, want[:1]) <= TOL
    return proto


def _q(dev: DeviceHandle) -> Any:
    return dev.queue


# name -> (build(queue), input shape, opsets); odd sizes throughout (1, 7, 33)
LAYERS: dict[str, tuple[Callable[[Any], nn.Module], tuple[int, ...], tuple[int, ...]]] = {
    "layer_norm": (lambda q: nn.LayerNorm(33, queue=q), (2, 7, 33), (17,)),
    "layer_norm_2d": (lambda q: nn.LayerNorm((7, 33), queue=q), (2, 7, 33), (17,)),
    "group_norm": (lambda q: nn.GroupNorm(3, 9, queue=q), (2, 9, 7, 1), (17, 21)),
    "group_norm_no_affine": (lambda q: nn.GroupNorm(1, 7, affine=False, queue=q), (3, 7, 33),
                             (17, 21)),
    "conv1d": (lambda q: nn.Conv1d(3, 7, 3, stride=2, padding=1, queue=q), (2, 3, 33), (17,)),
    "conv1d_same_even": (lambda q: nn.Conv1d(3, 5, 4, padding="same", dilation=2, queue=q),
                         (2, 3, 33), (17,)),
    "conv2d_same_even": (lambda q: nn.Conv2d(3, 5, 4, padding="same", queue=q), (2, 3, 7, 7),
                         (17,)),
    "conv_transpose2d": (lambda q: nn.ConvTranspose2d(4, 7, 3, stride=2, padding=1,
                                                      output_padding=1, queue=q),
                         (2, 4, 7, 1), (17,)),
    "conv_transpose2d_groups": (lambda q: nn.ConvTranspose2d(4, 6, (2, 3), stride=(1, 2),
                                                             groups=2, dilation=2, queue=q),
                                (2, 4, 7, 7), (17,)),
    "upsample_nearest_x2": (lambda q: nn.Upsample(scale_factor=2), (2, 3, 7, 1), (17,)),
    "upsample_nearest_size": (lambda q: nn.Upsample(size=(5, 33)), (2, 3, 7, 7), (17,)),
    "upsample_nearest_1d": (lambda q: nn.Upsample(scale_factor=2.5), (2, 3, 7), (17,)),
    "upsample_bilinear": (lambda q: nn.Upsample(size=(33, 1), mode="bilinear"), (2, 3, 7, 7),
                          (17,)),
    "upsample_bilinear_align": (lambda q: nn.Upsample(scale_factor=2, mode="bilinear",
                                                      align_corners=True), (2, 3, 7, 1),
                                (17,)),
    "upsample_linear": (lambda q: nn.Upsample(size=33, mode="linear"), (2, 3, 7), (17,)),
    "gelu": (lambda q: nn.GELU(), (2, 7, 33), (17, 20)),
    "gelu_tanh": (lambda q: nn.GELU(approximate="tanh"), (2, 7, 33), (17, 20)),
    "elu": (lambda q: nn.ELU(0.7), (2, 7, 33), (17,)),
    "prelu": (lambda q: nn.PReLU(7, queue=q), (2, 7, 1, 33), (17,)),
    "prelu_single": (lambda q: nn.PReLU(queue=q), (2, 33), (17,)),
    "hardswish": (lambda q: nn.Hardswish(), (2, 7, 33), (13, 17)),
    "hardsigmoid": (lambda q: nn.Hardsigmoid(), (2, 7, 33), (17,)),
    "relu6": (lambda q: nn.ReLU6(), (2, 7, 33), (17,)),
    "hardtanh": (lambda q: nn.Hardtanh(-0.5, 2.0), (2, 7, 33), (17,)),
    "softplus": (lambda q: nn.Softplus(), (2, 7, 33), (17,)),
    "softplus_beta": (lambda q: nn.Softplus(beta=2.0, threshold=3.0), (2, 7, 33), (17,)),
    "mish": (lambda q: nn.Mish(), (2, 7, 33), (17, 18)),
    "silu": (lambda q: nn.SiLU(), (2, 7, 33), (17,)),
}

CASES = [(name, opset) for name, (_, _, opsets) in LAYERS.items() for opset in opsets]


@pytest.mark.parametrize(("name", "opset"), CASES, ids=[f"{n}-opset{o}" for n, o in CASES])
def test_layer_exports_runs_and_loads_back(dev: DeviceHandle, name: str, opset: int,
                                           tmp_path: Path) -> None:
    build, shape, _ = LAYERS[name]
    model = _randomize(nn.Sequential(build(_q(dev))), seed=len(name))
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32) * 3
    _check(model, x, dev, tmp_path / f"{name}.onnx", opset)


def _op_types(proto: Any) -> set[str]:
    return {n.op_type for n in proto.graph.node}


@pytest.mark.parametrize(("name", "opset", "present", "absent"), [
    ("gelu", 17, {"Erf"}, {"Gelu"}), ("gelu", 20, {"Gelu"}, {"Erf"}),
    ("gelu_tanh", 17, {"Tanh"}, {"Gelu"}), ("mish", 17, {"Softplus", "Tanh"}, {"Mish"}),
    ("mish", 18, {"Mish"}, {"Softplus"}),
    ("group_norm", 17, {"InstanceNormalization"}, {"GroupNormalization"}),
    ("group_norm", 21, {"GroupNormalization"}, {"InstanceNormalization"}),
    ("hardswish", 13, {"HardSigmoid"}, {"HardSwish"}), ("relu6", 17, {"Clip"}, set()),
    ("layer_norm", 17, {"LayerNormalization"}, set()),
    ("conv_transpose2d", 17, {"ConvTranspose"}, set()),
    ("upsample_bilinear", 17, {"Resize"}, set())])
def test_opset_decides_the_onnx_form(name: str, opset: int, present: set[str],
                                     absent: set[str], tmp_path: Path) -> None:
    build, shape, _ = LAYERS[name]
    x = Tensor.from_host(None, np.ones(shape, np.float32))
    proto = onnx.load(export(nn.Sequential(build(None)), x, tmp_path / "m.onnx", opset=opset))
    assert present <= _op_types(proto) and not absent & _op_types(proto)


class _Block(nn.Module):
    """Pre-norm MLP block of a transformer (no attention) and a pooled head."""

    def __init__(self, q: Any) -> None:
        super().__init__()
        rng = np.random.default_rng(3)
        self.norm1 = nn.LayerNorm(33, queue=q)
        self.fc1 = nn.Linear(33, 7, queue=q, rng=rng)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(7, 33, queue=q, rng=rng)
        self.norm2 = nn.LayerNorm(33, queue=q)
        self.head = nn.Linear(33, 5, queue=q, rng=rng)

    def forward(self, x: Tensor) -> Tensor:
        x = F.add(x, self.fc2(self.act(self.fc1(self.norm1(x)))))
        pooled = F.mean(self.norm2(x), dim=1)
        return F.softmax(F.div(self.head(pooled), 2.0), dim=-1)


class _Decoder(nn.Module):
    """Upsampling decoder: transposed conv, group norm, nearest and bilinear upsampling."""

    def __init__(self, q: Any) -> None:
        super().__init__()
        rng = np.random.default_rng(4)
        self.up1 = nn.ConvTranspose2d(8, 6, 4, stride=2, padding=1, queue=q, rng=rng)
        self.norm1 = nn.GroupNorm(3, 6, queue=q)
        self.up2 = nn.Upsample(scale_factor=2)
        self.conv = nn.Conv2d(6, 4, 3, padding=1, queue=q, rng=rng)
        self.norm2 = nn.GroupNorm(2, 4, queue=q)
        self.up3 = nn.Upsample(size=(33, 7), mode="bilinear")
        self.out = nn.Conv2d(4, 1, 1, queue=q, rng=rng)

    def forward(self, x: Tensor) -> Tensor:
        x = F.silu(self.norm1(self.up1(x)))
        x = F.relu(self.norm2(self.conv(self.up2(x))))
        return F.tanh(self.out(self.up3(x)))


@pytest.mark.parametrize("opset", [17, 21])
def test_transformer_block(dev: DeviceHandle, opset: int, tmp_path: Path) -> None:
    model = _randomize(_Block(dev.queue), seed=11)
    x = np.random.default_rng(8).standard_normal((3, 7, 33)).astype(np.float32)
    proto = _check(model, x, dev, tmp_path / "block.onnx", opset)
    assert {"LayerNormalization", "ReduceMean", "Div"} <= _op_types(proto)


@pytest.mark.parametrize("opset", [17, 21])
def test_decoder(dev: DeviceHandle, opset: int, tmp_path: Path) -> None:
    model = _randomize(_Decoder(dev.queue), seed=12)
    x = np.random.default_rng(9).standard_normal((2, 8, 3, 1)).astype(np.float32)
    proto = _check(model, x, dev, tmp_path / "decoder.onnx", opset)
    assert {"ConvTranspose", "Resize"} <= _op_types(proto)


class _Tagger(nn.Module):
    """Token ids to per-token class scores: Embedding (Gather), LayerNorm, Linear."""

    def __init__(self, q: Any) -> None:
        super().__init__()
        self.embed = nn.Embedding(33, 7, queue=q, rng=np.random.default_rng(5))
        self.norm = nn.LayerNorm(7, queue=q)
        self.head = nn.Linear(7, 3, queue=q, rng=np.random.default_rng(6))

    def forward(self, ids: Tensor) -> Tensor:
        out: Tensor = self.head(F.gelu(self.norm(self.embed(ids))))
        return out


def test_embedding_model(dev: DeviceHandle, tmp_path: Path) -> None:
    model = _randomize(_Tagger(dev.queue), seed=13)
    ids = np.random.default_rng(10).integers(0, 33, (2, 7))
    proto = _check(model, ids, dev, tmp_path / "tagger.onnx")
    assert "Gather" in _op_types(proto)
    assert proto.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT


class _Attention(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.scaled_dot_product_attention(x, x, x)


def test_still_unsupported_ops_are_named(tmp_path: Path) -> None:
    x = Tensor.from_host(None, np.ones((2, 3, 7), np.float32))
    with pytest.raises(OnnxExportError, match="no ONNX rule for scaled_dot_product_attention"):
        export(_Attention(), x, tmp_path / "a.onnx")
    with pytest.raises(OnnxExportError, match=r"layer_norm needs opset 17.*opset 16"):
        export(nn.LayerNorm(7), x, tmp_path / "l.onnx", opset=16)
    with pytest.raises(OnnxExportError, match=r"adaptive pooling to \(2, 2\)"):
        export(nn.AdaptiveMaxPool2d(2), Tensor.from_host(None, np.ones((1, 1, 4, 4), np.float32)),
               tmp_path / "p.onnx")
    assert not list(tmp_path.iterdir())


def _resize_model(path: Path, **attrs: Any) -> None:
    scales = onnx.numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    node = onnx.helper.make_node("Resize", ["input", "", "scales"], ["output"], **attrs)
    graph = onnx.helper.make_graph(
        [node], "g",
        [onnx.helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 1, 3, 3])],
        [onnx.helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, [1, 1, 6, 6])],
        [scales])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]),
              path)


def test_load_names_unsupported_resize(tmp_path: Path) -> None:
    _resize_model(tmp_path / "cubic.onnx", mode="cubic")
    with pytest.raises(OnnxImportError, match="Resize mode cubic"):
        load(tmp_path / "cubic.onnx")(Tensor.from_host(None, np.ones((1, 1, 3, 3), np.float32)))
    _resize_model(tmp_path / "round.onnx", mode="nearest")  # round_prefer_floor, half_pixel
    with pytest.raises(OnnxImportError, match="Resize nearest with half_pixel"):
        load(tmp_path / "round.onnx")(Tensor.from_host(None, np.ones((1, 1, 3, 3), np.float32)))
