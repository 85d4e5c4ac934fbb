"""``netcl export``: a trained checkpoint's model as an ONNX file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from netcl.core.device import manager
from netcl.core.tensor import Tensor
from netcl.io import read_weights
from netcl.nn import Module
from netcl.onnx import DEFAULT_OPSET, export

from ._tune import MODELS

__all__ = ["add_export_parser", "export_command"]


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
    spec = MODELS[args.model]  # the built-in models of `netcl tune`, with a batch of one
    shape = (1, *spec.input_shape[1:])
    cpu = manager.default("cpu")  # the NumPy backend: always there, and exact
    if cpu is None:
        raise RuntimeError("export: the NumPy backend is missing")
    queue = cpu.queue
    model: Module = spec.build(queue)
    model.load_state_dict(read_weights(args.weights))
    x = Tensor.from_host(queue, np.zeros(shape, np.float32))
    path = export(model, x, args.output, opset=args.opset)
    print(f"wrote {path} ({args.model}, input {'x'.join(map(str, shape))} with a dynamic "
          f"batch axis, opset {args.opset})", file=out, flush=True)
    return 0
