"""netcl.onnx: export checked by onnx.checker and run by onnxruntime against netcl's own
outputs, import of netcl's files and PyTorch's, and the errors for what it cannot do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import netcl.nn as nn
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import available_devices
from netcl.nn import functional as F
from netcl.trainer._digits import digits_cnn

onnx = pytest.importorskip("onnx", reason="the netcl[onnx] extra")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the exported files")

from netcl.onnx import OnnxExportError, OnnxImportError, export, load  # noqa: E402

DEVICES = available_devices()


def _rel(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> float:
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))


def _mlp(q: Any) -> nn.Module:
    rng = np.random.default_rng(1)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 33, queue=q, rng=rng), nn.ReLU(),
                         nn.Dropout(0.5), nn.Linear(33, 10, queue=q, rng=rng),
                         nn.LogSoftmax(dim=1))


def _resnet(q: Any) -> nn.Module:
    model = nn.resnet18(num_classes=7, stem="cifar", width=4, queue=q, seed=3)
    rng = np.random.default_rng(4)
    state = {}
    for name, t in model.state_dict().items():  # running statistics away from 0 and 1
        arr = t.to_host()
        if name.endswith("running_mean"):
            arr = rng.standard_normal(arr.shape).astype(arr.dtype) * 0.1
        elif name.endswith("running_var"):
            arr = rng.uniform(0.5, 1.5, arr.shape).astype(arr.dtype)
        state[name] = arr
    model.load_state_dict(state)
    return model


MODELS = {"mlp": (_mlp, (5, 1, 8, 8)), "digits_cnn": (lambda q: digits_cnn(q, seed=2),
                                                       (5, 1, 8, 8)),
          "resnet18": (_resnet, (3, 3, 11, 11))}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_export_runs_in_onnxruntime_and_loads_back(dev: DeviceHandle, name: str,
                                                   tmp_path: Path) -> None:
    build, shape = MODELS[name]
    model = build(dev.queue)
    model.eval()
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    xt = Tensor.from_host(dev.queue, x)
    want = model(xt).to_host()
    path = export(model, xt, tmp_path / f"{name}.onnx")
    onnx.checker.check_model(onnx.load(path), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x})[0]
    assert got.shape == want.shape
    assert _rel(got, want) <= 1e-5
    batch = np.concatenate([x, x[:1]])  # another batch size: the batch axis is dynamic
    assert session.run(None, {"input": batch})[0].shape[0] == len(batch)
    back = load(path, queue=dev.queue)
    again = back(xt).to_host()
    assert _rel(again, want) <= 1e-5
    assert model.training is False  # export leaves the mode as it found it


def test_export_restores_training_mode(tmp_path: Path) -> None:
    model = _mlp(None)
    model.train()
    export(model, Tensor.from_host(None, np.ones((2, 1, 8, 8), np.float32)), tmp_path / "m.onnx")
    assert model.training is True


class _Var(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.var(x, dim=1)


def test_unsupported_op_is_named(tmp_path: Path) -> None:
    x = Tensor.from_host(None, np.ones((2, 3), np.float32))
    with pytest.raises(OnnxExportError, match="no ONNX rule for var"):
        export(_Var(), x, tmp_path / "v.onnx")
    assert not (tmp_path / "v.onnx").exists()


def test_unsupported_onnx_op_is_named(tmp_path: Path) -> None:
    node = onnx.helper.make_node("Hardmax", ["input"], ["output"])
    graph = onnx.helper.make_graph(
        [node], "g", [onnx.helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("output", onnx.TensorProto.FLOAT, [2])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "hardmax.onnx")
    with pytest.raises(OnnxImportError, match="ONNX op Hardmax"):
        load(tmp_path / "hardmax.onnx")


@pytest.mark.parametrize("kind", ["cnn", "mlp"])
def test_loads_a_torch_onnx_export(tmp_path: Path, kind: str) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    if kind == "cnn":
        net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 16, 3, stride=2, padding=1),
            torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
            torch.nn.Linear(16, 10)).eval()
        x = torch.randn(4, 3, 16, 16)
    else:
        net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 33), torch.nn.Tanh(),
                                  torch.nn.Dropout(0.3), torch.nn.Linear(33, 10),
                                  torch.nn.LogSoftmax(dim=1)).eval()
        x = torch.randn(5, 1, 8, 8)
    path = tmp_path / "torch.onnx"
    try:
        torch.onnx.export(net, (x,), str(path), input_names=["input"], output_names=["output"],
                          opset_version=17, dynamo=False)
    except Exception as err:  # torch's exporter needs packages of its own
        pytest.skip(f"torch.onnx.export unavailable: {err}")
    with torch.no_grad():
        want = net(x).numpy()
    for dev in DEVICES:
        got = load(path, queue=dev.queue)(Tensor.from_host(dev.queue, x.numpy())).to_host()
        assert _rel(got, want) <= 1e-5, dev.device_name
