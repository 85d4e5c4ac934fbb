"""Agreement of netcl with torchvision's own ResNets, per model and backend (issue 18's figures).

For each torchvision model (random weights, running statistics moved by a few training-mode
forwards, saved with ``torch.save(model.state_dict())``) and each netcl device: load the file
into netcl's model with one call, run both in eval mode on the same images and print the largest
absolute and relative differences of the logits; then the same model through
``torch.onnx.export`` into ``netcl.onnx.load``, and ``netcl.io.from_torch``/``to_torch`` both
ways. Needs torch and torchvision (not netcl dependencies); onnx for the ONNX rows.

Run: ``python benchmarks/check_torchvision.py [--models resnet18,resnet50] [--size 224]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import available_devices, device_id
from netcl.io import from_torch, to_torch
from netcl.nn import ResNet, resnet18, resnet34, resnet50

BUILDERS: dict[str, Callable[..., ResNet]] = {
    "resnet18": resnet18, "resnet34": resnet34, "resnet50": resnet50}


def _errors(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any]) -> tuple[float, float]:
    diff = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
    return diff, diff / max(float(np.abs(want).max()), 1e-30)


def _row(model: str, route: str, dev: str, got: np.ndarray[Any, Any],
         want: np.ndarray[Any, Any], seconds: float) -> None:
    abs_err, rel_err = _errors(got, want)
    same = float((got.argmax(1) == want.argmax(1)).mean())
    print(f"{model:9s} {route:22s} {dev:28s} {abs_err:9.2e} {rel_err:9.2e} {same:6.2f} "
          f"{seconds:7.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,resnet50")
    parser.add_argument("--size", type=int, default=224, help="image side")
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()

    import torch
    import torchvision

    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal(
        (args.batch, 3, args.size, args.size)).astype(np.float32)
    devices: list[DeviceHandle] = available_devices()
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}; images "
          f"{x.shape}; devices: {', '.join(device_id(d) for d in devices)}")
    print(f"{'model':9s} {'route':22s} {'netcl device':28s} {'max abs':>9s} {'max rel':>9s} "
          f"{'argmax':>6s} {'s':>7s}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            net = getattr(torchvision.models, name)(weights=None)
            net.train()
            with torch.no_grad():
                for _ in range(2):
                    net(torch.randn(4, 3, args.size, args.size))
            net.eval()
            with torch.no_grad():
                want = net(torch.from_numpy(x)).numpy()
            path = Path(tmp) / f"{name}.pth"
            torch.save(net.state_dict(), path)
            onnx_path = Path(tmp) / f"{name}.onnx"
            torch.onnx.export(net, (torch.from_numpy(x),), str(onnx_path), opset_version=17,
                              input_names=["input"], output_names=["output"], dynamo=False)
            for dev in devices:
                start = time.perf_counter()
                mine = BUILDERS[name](weights=str(path), queue=dev.queue)
                mine.eval()
                got = mine(Tensor.from_host(dev.queue, x)).to_host()
                _row(name, "torch.save -> weights=", device_id(dev), got, want,
                     time.perf_counter() - start)

                from netcl.onnx import load

                start = time.perf_counter()
                got = load(onnx_path, queue=dev.queue)(Tensor.from_host(dev.queue, x)).to_host()
                _row(name, "torch.onnx -> load", device_id(dev), got, want,
                     time.perf_counter() - start)

                start = time.perf_counter()
                mine = BUILDERS[name](queue=dev.queue)
                mine.load_state_dict(from_torch(net.state_dict(), queue=dev.queue))
                back = getattr(torchvision.models, name)(weights=None)
                back.load_state_dict(to_torch(mine.state_dict()))
                back.eval()
                with torch.no_grad():
                    again = back(torch.from_numpy(x)).numpy()
                _row(name, "from_torch -> to_torch", device_id(dev), again, want,
                     time.perf_counter() - start)


if __name__ == "__main__":
    main()
