"""``netcl export``: a trained checkpoint's model as an ONNX file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from netcl.core.device import manager
from netcl.core.tensor import Tensor
from netcl.io import read_weights
from netcl.nn import Module, resnet18
from netcl.onnx import DEFAULT_OPSET, export
from netcl.trainer._digits import digits_cnn

__all__ = ["MODELS", "add_export_parser", "export_command"]

#: model name -> (builder on a queue, one example input's shape)
MODELS: dict[str, tuple[Any, tuple[int, ...]]] = {
    "digits-cnn": (lambda q: digits_cnn(q), (1, 1, 8, 8)),
    "resnet18": (lambda q: resnet18(num_classes=10, stem="cifar", queue=q), (1, 3, 32, 32)),
}


def add_export_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``export`` subcommand to ``netcl``'s subparsers; returns its parser."""
    ep: argparse.ArgumentParser = subparsers.add_parser(
        "export", help="write a trained checkpoint's model as an ONNX file",
        description="Load a model's weights (a netcl checkpoint such as CHECKPOINT_DIR/"
        "last.netcl, a .safetensors or a PyTorch .pt/.pth state dict) and write the model as "
        "ONNX, checked by onnx.checker (needs pip install 'netcl[onnx]').")
    ep.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                    help="on an error, print the full traceback too (or set NETCL_DEBUG=1)")
    ep.add_argument("weights", help="the checkpoint or weight file")
    ep.add_argument("output", help="the ONNX file to write")
    ep.add_argument("--model", default="digits-cnn", choices=sorted(MODELS),
                    help="the architecture the weights belong to (default digits-cnn, what "
                    "netcl train trains)")
    ep.add_argument("--opset", type=int, default=DEFAULT_OPSET,
                    help=f"ONNX opset (default {DEFAULT_OPSET})")
    return ep


def export_command(args: argparse.Namespace, out: Any = None) -> int:
    """Run ``netcl export`` for parsed ``args``; returns 0."""
    out = out if out is not None else sys.stdout
    build, shape = MODELS[args.model]
    cpu = manager.default("cpu")  # the NumPy backend: always there, and exact
    if cpu is None:
        raise RuntimeError("export: the NumPy backend is missing")
    queue = cpu.queue
    model: Module = build(queue)
    model.load_state_dict(read_weights(args.weights))
    x = Tensor.from_host(queue, np.zeros(shape, np.float32))
    path = export(model, x, args.output, opset=args.opset)
    print(f"wrote {path} ({args.model}, input {'x'.join(map(str, shape))} with a dynamic "
          f"batch axis, opset {args.opset})", file=out, flush=True)
    return 0
