"""The charlm job's epoch time (``netcl train --task charlm``) on the CPU beside the same
model, data and optimizer in PyTorch CPU, measured in the same run.

    python benchmarks/bench_charlm.py                       # NumPy + one OpenCL CPU device
    python benchmarks/bench_charlm.py --devices cpu --epochs 2 --train-chars 100000

An epoch is what the job's epoch line times: one pass over the training windows (the
default GPT: 2 layers, width 64, 4 heads, context 64, batch 32, AdamW) and the evaluation
of the validation windows. netcl runs through ``train_charlm`` (the Trainer: captured and
replayed steps on OpenCL, eager NumPy calls replayed on the NumPy backend); PyTorch runs the
same loop (the same windows in the same order, the same initial weights, AdamW with the same
settings, a cosine schedule per epoch) with ``torch.set_num_threads(--threads)``. Printed per
device: the fastest epoch (the first one includes kernel builds on OpenCL), the final
validation loss, and PyTorch's epoch time over netcl's (higher is better, 1.0 = parity).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from typing import Any

import numpy as np
from _gpt_torch import load_netcl_weights, torch_gpt

from netcl.core.device import DeviceHandle, manager
from netcl.data import CharDataset, DataLoader
from netcl.ops.testing import one_opencl_cpu_device
from netcl.trainer._charlm import CharLMConfig, CharLMData, charlm_data, train_charlm
from netcl.trainer._charlm_model import GPT


def netcl_epochs(dev: DeviceHandle, cfg: CharLMConfig, data: CharLMData) -> dict[str, Any]:
    cfg.device, cfg.progress, cfg.sample_chars = dev, False, 0
    result = train_charlm(cfg, data)
    seconds = [m.seconds for m in result.history]
    return {"who": f"netcl {dev.backend}", "device": str(dev), "epoch_s": min(seconds),
            "first_epoch_s": seconds[0], "val_loss": result.history[-1].val_loss,
            "unigram": result.unigram}


def torch_epochs(cfg: CharLMConfig, data: CharLMData, threads: int) -> dict[str, Any] | None:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    vocab = data.vocab
    model = torch_gpt(torch, len(vocab), cfg.context, cfg.layers, cfg.width, cfg.heads,
                      cfg.dropout)
    load_netcl_weights(torch, model, GPT(len(vocab), cfg.context, cfg.layers, cfg.width,
                                         cfg.heads, cfg.dropout, queue=manager.default("cpu")
                                         .queue, seed=cfg.seed))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=cfg.epochs)
    train = DataLoader(CharDataset(vocab.encode(data.train_text), cfg.context),
                       batch_size=cfg.batch_size, shuffle=True, seed=cfg.seed)
    val = DataLoader(CharDataset(vocab.encode(data.val_text), cfg.context),
                     batch_size=max(cfg.batch_size, 64))
    seconds, val_loss = [], math.nan
    for epoch in range(cfg.epochs):
        start = time.perf_counter()
        model.train()
        train.set_epoch(epoch)
        for x, y in train:
            logits = model(torch.from_numpy(x.astype(np.int64)))
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1),
                                                     torch.from_numpy(y.astype(np.int64))
                                                     .flatten())
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        model.eval()
        losses = []
        with torch.no_grad():
            for x, y in val:
                logits = model(torch.from_numpy(x.astype(np.int64)))
                losses.append(float(torch.nn.functional.cross_entropy(
                    logits.flatten(0, 1), torch.from_numpy(y.astype(np.int64)).flatten())))
        val_loss = float(np.mean(losses))
        seconds.append(time.perf_counter() - start)
    return {"who": "pytorch cpu", "device": f"torch {torch.__version__}, {threads} threads",
            "epoch_s": min(seconds), "first_epoch_s": seconds[0], "val_loss": val_loss}


def _devices(names: list[str]) -> list[DeviceHandle]:
    found: list[DeviceHandle] = []
    for name in names:
        if name == "cl-cpu":  # the machine's one OpenCL CPU device the tests use
            found += [d for d in manager.all_handles()
                      if d.backend == "cl" and d.device_type.lower() == "cpu"
                      and one_opencl_cpu_device(d) is None][:1]
        else:
            dev = manager.default(name)
            if dev is not None:
                found.append(dev)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--devices", default="cpu,cl-cpu",
                        help="comma-separated: cpu (NumPy), cl-cpu (one OpenCL CPU device) "
                        "or any --device selector")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--train-chars", type=int, default=None)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    cfg = CharLMConfig(epochs=args.epochs, train_chars=args.train_chars)
    data = charlm_data(cfg)
    print(f"charlm: {len(data.train_text)} training / {len(data.val_text)} validation chars, "
          f"GPT {cfg.layers}x{cfg.width} ({cfg.heads} heads), context {cfg.context}, "
          f"batch {cfg.batch_size}, {args.epochs} epoch(s)")
    rows: list[dict[str, Any]] = []
    ref = torch_epochs(CharLMConfig(epochs=args.epochs), data, args.threads)
    print(f"{'who':<14} {'epoch s':>8} {'1st epoch s':>11} {'val loss':>8} {'vs torch':>8}  "
          "device")
    for dev in _devices(args.devices.split(",")):
        row = netcl_epochs(dev, CharLMConfig(epochs=args.epochs), data)
        row["vs_torch"] = ref["epoch_s"] / row["epoch_s"] if ref else None
        rows.append(row)
        ratio = f"{row['vs_torch']:.2f}x" if ref else "-"
        print(f"{row['who']:<14} {row['epoch_s']:>8.1f} {row['first_epoch_s']:>11.1f} "
              f"{row['val_loss']:>8.4f} {ratio:>8}  {row['device']}")
    if ref is not None:
        rows.append(ref)
        print(f"{ref['who']:<14} {ref['epoch_s']:>8.1f} {ref['first_epoch_s']:>11.1f} "
              f"{ref['val_loss']:>8.4f} {'':>8}  {ref['device']}")
    if rows and "unigram" in rows[0]:
        print(f"unigram baseline {rows[0]['unigram']:.4f} nats/char; vs torch: PyTorch's epoch "
              "time over netcl's (higher is better)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    manager.discover()
    main()
