"""A torchvision-layout ResNet's state dict (torch.save) loads into netcl's ResNet with one
call and agrees in eval mode on every backend; netcl's earlier parameter names still load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.io import read_weights, save_safetensors
from netcl.nn import resnet18, resnet50

torch = pytest.importorskip("torch", reason="PyTorch is the reference")
tnn = torch.nn


class _Basic(tnn.Module):  # type: ignore[misc,name-defined]  # torch is optional (Any)
    """torchvision.models.resnet.BasicBlock's names and forward."""

    expansion = 1

    def __init__(self, cin: int, planes: int, stride: int, downsample: Any) -> None:
        super().__init__()
        self.conv1 = tnn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(planes)
        self.relu = tnn.ReLU(inplace=True)
        self.conv2 = tnn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: Any) -> Any:
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + idt)


class _Bottleneck(tnn.Module):  # type: ignore[misc,name-defined]  # torch is optional (Any)
    """torchvision's Bottleneck (v1.5: the stride on the 3x3)."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int, downsample: Any) -> None:
        super().__init__()
        self.conv1 = tnn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = tnn.BatchNorm2d(planes)
        self.conv2 = tnn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = tnn.BatchNorm2d(planes)
        self.conv3 = tnn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = tnn.BatchNorm2d(planes * 4)
        self.relu = tnn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: Any) -> Any:
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + idt)


class _TorchResNet(tnn.Module):  # type: ignore[misc,name-defined]  # torch is optional (Any)
    """torchvision.models.ResNet's names and forward, with its width."""

    def __init__(self, block: Any, layers: list[int], classes: int, width: int) -> None:
        super().__init__()
        self.conv1 = tnn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = tnn.BatchNorm2d(width)
        self.relu = tnn.ReLU(inplace=True)
        self.maxpool = tnn.MaxPool2d(3, 2, 1)
        cin, planes = width, width
        for i, count in enumerate(layers):
            blocks = []
            for j in range(count):
                stride = 2 if i > 0 and j == 0 else 1
                down = None
                if stride != 1 or cin != planes * block.expansion:
                    down = tnn.Sequential(
                        tnn.Conv2d(cin, planes * block.expansion, 1, stride, bias=False),
                        tnn.BatchNorm2d(planes * block.expansion))
                blocks.append(block(cin, planes, stride, down))
                cin = planes * block.expansion
            setattr(self, f"layer{i + 1}", tnn.Sequential(*blocks))
            planes *= 2
        self.avgpool = tnn.AdaptiveAvgPool2d(1)
        self.fc = tnn.Linear(cin, classes)

    def forward(self, x: Any) -> Any:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def _trained_stats(net: Any, shape: tuple[int, ...]) -> None:
    """A few training-mode forwards so every running statistic and counter moves."""
    net.train()
    with torch.no_grad():
        for _ in range(2):
            net(torch.randn(*shape))
    net.eval()


def _rel(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> float:
    return float(np.abs(got - want).max() / max(float(np.abs(want).max()), 1e-30))


@pytest.mark.parametrize("depth", [18, 50])
def test_torch_state_dict_file_loads_with_one_call(dev: DeviceHandle, depth: int,
                                                   tmp_path: Path) -> None:
    torch.manual_seed(depth)
    block, layers = (_Basic, [2, 2, 2, 2]) if depth == 18 else (_Bottleneck, [3, 4, 6, 3])
    net = _TorchResNet(block, layers, classes=7, width=4)
    _trained_stats(net, (4, 3, 33, 33))
    path = tmp_path / "resnet.pth"
    torch.save(net.state_dict(), path)
    assert "bn1.num_batches_tracked" in net.state_dict()
    build = resnet18 if depth == 18 else resnet50
    mine = build(num_classes=7, width=4, queue=dev.queue, weights=str(path))
    mine.eval()
    x = np.random.default_rng(1).standard_normal((2, 3, 33, 33)).astype(np.float32)
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    got = mine(Tensor.from_host(dev.queue, x)).to_host()
    assert _rel(got, want) <= 1e-5, f"{dev.device_name}: {_rel(got, want):.2e}"


def test_names_match_torchvision_and_safetensors_round_trip(tmp_path: Path) -> None:
    torch.manual_seed(0)
    net = _TorchResNet(_Basic, [2, 2, 2, 2], classes=5, width=4)
    mine = resnet18(num_classes=5, width=4, queue=None)
    theirs = {k for k in net.state_dict() if not k.endswith("num_batches_tracked")}
    assert {k for k in mine.state_dict() if not k.endswith("num_batches_tracked")} == theirs
    save_safetensors(tmp_path / "w.safetensors", {k: v for k, v in net.state_dict().items()})
    state = read_weights(tmp_path / "w.safetensors")
    again = resnet18(num_classes=5, width=4, queue=None, weights=state)
    np.testing.assert_array_equal(again.state_dict()["layer2.0.downsample.0.weight"].to_host(),
                                  net.state_dict()["layer2.0.downsample.0.weight"].numpy())


def test_earlier_netcl_names_still_load() -> None:
    net = resnet18(num_classes=3, stem="cifar", width=2, queue=None, seed=1)
    old = {}
    for key, t in net.state_dict().items():
        key = key.replace("conv1.", "stem.0.", 1) if key.startswith("conv1.") else key
        key = key.replace("bn1.", "stem.1.", 1) if key.startswith("bn1.") else key
        old[key.replace(".downsample.", ".shortcut.")] = t.to_host()
    fresh = resnet18(num_classes=3, stem="cifar", width=2, queue=None, seed=2)
    fresh.load_state_dict(old)
    for key, t in net.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[key].to_host(), t.to_host())


def test_from_torch_and_to_torch_round_trip(dev: DeviceHandle) -> None:
    from netcl.io import from_torch, to_torch

    torch.manual_seed(3)
    net = _TorchResNet(_Basic, [2, 2, 2, 2], classes=5, width=4)
    _trained_stats(net, (2, 3, 17, 17))
    mine = resnet18(num_classes=5, width=4, queue=dev.queue)
    mine.load_state_dict(from_torch(net))
    mine.eval()
    back = _TorchResNet(_Basic, [2, 2, 2, 2], classes=5, width=4)
    back.load_state_dict(to_torch(mine))
    back.eval()
    x = torch.randn(2, 3, 17, 17)
    with torch.no_grad():
        want, again = net(x).numpy(), back(x).numpy()
    np.testing.assert_array_equal(again, want)
    got = mine(from_torch(x, dev.queue)).to_host()
    assert _rel(got, want) <= 1e-5
    assert isinstance(from_torch(x, dev.queue), Tensor)
    with pytest.raises(TypeError, match="expected a torch Module"):
        from_torch([1, 2])


def test_safetensors_round_trip_with_pytorch(tmp_path: Path) -> None:
    """safetensors.torch writes a torch state dict that netcl loads; netcl writes one that
    safetensors.torch reads into the torch model, bitwise both ways."""
    from safetensors.torch import load_file, save_file

    torch.manual_seed(5)
    net = _TorchResNet(_Basic, [2, 2, 2, 2], classes=5, width=4)
    _trained_stats(net, (2, 3, 17, 17))
    save_file(net.state_dict(), str(tmp_path / "torch.safetensors"))
    mine = resnet18(num_classes=5, width=4, queue=None,
                    weights=str(tmp_path / "torch.safetensors"))
    for key, value in net.state_dict().items():
        np.testing.assert_array_equal(mine.state_dict()[key].to_host(), value.numpy())
    save_safetensors(tmp_path / "netcl.safetensors", mine.state_dict())
    back = _TorchResNet(_Basic, [2, 2, 2, 2], classes=5, width=4)
    back.load_state_dict(load_file(str(tmp_path / "netcl.safetensors")))
    for key, value in net.state_dict().items():
        assert torch.equal(back.state_dict()[key], value), key


def test_torch_onnx_export_of_torchvision_layout_resnet18_loads(dev: DeviceHandle,
                                                                 tmp_path: Path) -> None:
    """An ONNX file torch.onnx.export writes for a torchvision-layout ResNet-18 (BatchNorm
    folded into the convolutions, Gemm classifier) runs in netcl."""
    from netcl.onnx import load

    pytest.importorskip("onnx", reason="the netcl[onnx] extra")
    torch.manual_seed(6)
    net = _TorchResNet(_Basic, [2, 2, 2, 2], classes=7, width=8)
    _trained_stats(net, (2, 3, 33, 33))
    x = torch.randn(3, 3, 33, 33)
    path = tmp_path / "resnet18.onnx"
    try:
        torch.onnx.export(net, (x,), str(path), input_names=["input"], output_names=["output"],
                          opset_version=17, dynamo=False)
    except Exception as err:  # torch's exporter needs packages of its own
        pytest.skip(f"torch.onnx.export unavailable: {err}")
    with torch.no_grad():
        want = net(x).numpy()
    got = load(path, queue=dev.queue)(Tensor.from_host(dev.queue, x.numpy())).to_host()
    assert _rel(got, want) <= 1e-5, f"{dev.device_name}: {_rel(got, want):.2e}"


@pytest.mark.parametrize("name", ["resnet18", "resnet50"])
def test_torchvision_model_itself_loads(dev: DeviceHandle, name: str, tmp_path: Path) -> None:
    """torchvision's own full-width model (where torchvision is installed), not a copy."""
    models = pytest.importorskip("torchvision.models", reason="torchvision is the reference")
    torch.manual_seed(3)
    net = getattr(models, name)(weights=None)
    _trained_stats(net, (2, 3, 32, 32))
    path = tmp_path / f"{name}.pth"
    torch.save(net.state_dict(), path)
    mine = (resnet18 if name == "resnet18" else resnet50)(queue=dev.queue, weights=str(path))
    mine.eval()
    x = np.random.default_rng(4).standard_normal((2, 3, 32, 32)).astype(np.float32)
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    got = mine(Tensor.from_host(dev.queue, x)).to_host()
    assert _rel(got, want) <= 1e-5, f"{dev.device_name}: {_rel(got, want):.2e}"
