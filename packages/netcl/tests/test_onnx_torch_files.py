"""ONNX files that ``torch.onnx.export`` writes for models with the layers issue 17 added (layer
norm, GELU, ConvTranspose2d, GroupNorm, Upsample, SiLU, ELU, Hardswish) run in netcl and agree
with PyTorch (where torch is installed: it is the producer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor

torch = pytest.importorskip("torch", reason="PyTorch writes the ONNX files")
pytest.importorskip("onnx", reason="the netcl[onnx] extra")
tnn = torch.nn


class _Block(tnn.Module):  # type: ignore[misc,name-defined]  # torch is optional (Any)
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = tnn.LayerNorm(16), tnn.LayerNorm(16)
        self.up, self.act, self.down = tnn.Linear(16, 32), tnn.GELU(), tnn.Linear(32, 16)
        self.head = tnn.Linear(16, 5)

    def forward(self, x: Any) -> Any:
        y = self.ln2(x + self.down(self.act(self.up(self.ln1(x)))))
        return torch.softmax(self.head(y.mean(1)), -1)


class _Decoder(tnn.Module):  # type: ignore[misc,name-defined]  # torch is optional (Any)
    def __init__(self) -> None:
        super().__init__()
        self.ct, self.gn1 = tnn.ConvTranspose2d(4, 8, 3, 2, 1, 1), tnn.GroupNorm(2, 8)
        self.conv, self.gn2 = tnn.Conv2d(8, 3, 3, padding=1), tnn.GroupNorm(1, 3)
        self.up1 = tnn.Upsample(scale_factor=2, mode="nearest")
        self.up2 = tnn.Upsample(size=(33, 7), mode="bilinear", align_corners=False)
        self.silu, self.elu, self.hswish = tnn.SiLU(), tnn.ELU(), tnn.Hardswish()

    def forward(self, x: Any) -> Any:
        y = self.up1(self.silu(self.gn1(self.ct(x))))
        return self.hswish(self.up2(self.elu(self.gn2(self.conv(y)))))


@pytest.mark.parametrize("name", ["block", "decoder"])
def test_torch_onnx_files_of_the_new_layers_load(dev: DeviceHandle, name: str,
                                                 tmp_path: Path) -> None:
    from netcl.onnx import load

    torch.manual_seed(1)
    net, x = ((_Block(), torch.randn(3, 7, 16)) if name == "block"
              else (_Decoder(), torch.randn(2, 4, 5, 5)))
    net.eval()
    path = tmp_path / f"{name}.onnx"
    try:
        torch.onnx.export(net, (x,), str(path), opset_version=17, dynamo=False,
                          input_names=["input"], output_names=["output"])
    except Exception as err:  # torch's exporter needs packages of its own
        pytest.skip(f"torch.onnx.export unavailable: {err}")
    with torch.no_grad():
        want = net(x).numpy()
    got = load(path, queue=dev.queue)(Tensor.from_host(dev.queue, x.numpy())).to_host()
    rel = float(np.abs(got - want).max() / np.abs(want).max())
    assert rel <= 1e-5, f"{dev.device_name}: {rel:.2e}"
