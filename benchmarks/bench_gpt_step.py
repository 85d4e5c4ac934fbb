"""A GPT-small-like training step (the charlm job's GPT at 6 layers, width 384, 6 heads,
sequence 256, batch 32), captured and replayed, beside PyTorch CUDA in the same run.

    python benchmarks/bench_gpt_step.py [--device cl] [--batch 32] [--steps 5] [--eager]
    python benchmarks/bench_gpt_step.py --device cpu --quick     # small shapes, a smoke run

One row per precision (float32; AMP: float16 autocast with a GradScaler) and mode (the step
captured with :func:`netcl.runtime.capture` and replayed; ``--eager``: eager steps too;
the NumPy backend replays its calls): ``step ms`` is the
time per step of back-to-back steps until the queue finished, ``tok/s`` the tokens trained
per second, ``TFLOP/s`` the model's training FLOPs (6 per parameter-token of the matmuls plus
the causal attention) over the step time. The step is the Trainer's: forward, the mean
cross entropy of every next token, backward, AdamW (weight decay 0.01), zero_grad. The
reference is PyTorch on the same machine in the same run (CUDA when present: the same model
with the same initial weights, ``F.scaled_dot_product_attention``, AdamW, TF32 off), and
``vs torch`` its step time over netcl's (higher is better, 1.0 = parity). The first-step
losses of both are printed too (float32: equal up to rounding).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from _gpt_torch import gpt_flops, load_netcl_weights, torch_gpt

import netcl.autograd as ag
from netcl.core import Tensor
from netcl.core.device import DeviceHandle, manager
from netcl.nn.amp import GradScaler, autocast
from netcl.optim import AdamW
from netcl.runtime import CaptureError, CaptureFallbackWarning, capture, profile
from netcl.trainer._charlm_model import GPT

VOCAB = 128


def make_step(model: GPT, amp: bool) -> Callable[[Tensor, Tensor], Tensor]:
    opt = AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    scaler = GradScaler(enabled=amp)

    def step(x: Tensor, y: Tensor) -> Tensor:
        with ag.Tape() as tape:
            with autocast(enabled=amp):
                logits = model(x)
            if amp:
                logits = ag.ops.cast(logits, "float32")
            loss = ag.cross_entropy(ag.ops.reshape(logits, (-1, VOCAB)), ag.ops.reshape(y, (-1,)))
            scaled = scaler.scale(loss)
        tape.backward(scaled)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        return loss

    return step


def _batch(batch: int, seq: int) -> np.ndarray[Any, Any]:
    return np.random.default_rng(0).integers(0, VOCAB, (batch, seq + 1)).astype(np.int32)


def time_netcl(dev: DeviceHandle, shape: dict[str, int], amp: bool, captured: bool,
               steps: int, kernels: bool = False) -> dict[str, Any]:
    model = GPT(VOCAB, shape["seq"], shape["layers"], shape["width"], shape["heads"],
                queue=dev.queue, seed=0)
    step: Any = make_step(model, amp)
    if captured:
        step = capture(step)
    ids = _batch(shape["batch"], shape["seq"])
    x = Tensor.from_host(dev.queue, np.ascontiguousarray(ids[:, :-1]))
    y = Tensor.from_host(dev.queue, np.ascontiguousarray(ids[:, 1:]))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CaptureFallbackWarning)
            first = float(step(x, y).to_host())
            for _ in range(2):  # capture, one replay
                step(x, y)
    except CaptureError as err:
        return {"error": f"{type(err).__name__}: {err}"}
    dev.queue.finish()
    start = time.perf_counter()
    for _ in range(steps):
        step(x, y)
    dev.queue.finish()
    seconds = (time.perf_counter() - start) / steps
    found: dict[str, Any] = {"step_ms": seconds * 1e3, "first_loss": first,
                             "mode": step.mode if captured else "eager"}
    if kernels:  # one more step under the profiler: its kernels by device time
        with profile() as prof:
            step(x, y)
            dev.queue.finish()
        if prof.device_timed:
            found["device_ms"] = sum(k.device_us or 0.0 for k in prof.summary()) / 1e3
        found["table"] = prof.table(limit=25)
    return found


def time_torch(shape: dict[str, int], amp: bool, steps: int,
               where: str = "cuda") -> dict[str, Any] | None:
    """PyTorch's step on ``where`` (``cpu``: float32 only, a check of this code)."""
    try:
        import torch
    except ImportError:
        return None
    if (where == "cuda" and not torch.cuda.is_available()) or (where == "cpu" and amp):
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cuda = torch.device(where)
    sync = torch.cuda.synchronize if where == "cuda" else (lambda: None)
    model = torch_gpt(torch, VOCAB, shape["seq"], shape["layers"], shape["width"],
                      shape["heads"])
    load_netcl_weights(torch, model, GPT(VOCAB, shape["seq"], shape["layers"], shape["width"],
                                         shape["heads"], queue=manager.default("cpu").queue,
                                         seed=0))
    model = model.to(cuda)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    scaler = torch.amp.GradScaler(where, enabled=amp)
    ids = torch.from_numpy(_batch(shape["batch"], shape["seq"]).astype(np.int64)).to(cuda)
    x, y = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    def step() -> Any:
        with torch.autocast(where, dtype=torch.float16, enabled=amp):
            logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        return loss

    first = step().item()
    for _ in range(2):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return {"step_ms": (time.perf_counter() - start) / steps * 1e3, "first_loss": first,
            "device": torch.cuda.get_device_name() if where == "cuda" else "cpu"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--device", default="cl")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--heads", type=int, default=6)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--precision", choices=("float32", "amp", "both"), default="both")
    parser.add_argument("--eager", action="store_true", help="eager rows too")
    parser.add_argument("--kernels", action="store_true",
                        help="print one step's kernels by device time (NETCL_PROFILE_EVENTS=1)")
    parser.add_argument("--torch-device", choices=("cuda", "cpu"), default="cuda",
                        help="where the PyTorch reference runs (cpu: float32 only)")
    parser.add_argument("--quick", action="store_true",
                        help="batch 4, sequence 64, 2 layers of 64: a smoke run")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    if args.quick:
        args.batch, args.seq, args.layers, args.width, args.heads = 4, 64, 2, 64, 2
        args.steps = min(args.steps, 3)
    dev = manager.default(args.device)
    if dev is None:
        raise SystemExit(f"bench_gpt_step: no device {args.device!r}")
    shape = {"batch": args.batch, "seq": args.seq, "layers": args.layers,
             "width": args.width, "heads": args.heads}
    tokens = args.batch * args.seq
    flops = gpt_flops(tokens, args.seq, args.layers, args.width, VOCAB)
    precisions = {"float32": [False], "amp": [True], "both": [False, True]}[args.precision]
    modes = [("netcl eager", False)] if args.eager else []
    modes.append(("netcl replay", True))
    print(f"{str(dev)[:50]}, GPT {args.layers} layers x {args.width} ({args.heads} heads), "
          f"sequence {args.seq}, batch {args.batch}, vocab {VOCAB}; "
          f"{flops / 1e9:.1f} GFLOP per step")
    print(f"{'precision':<9} {'who':<14} {'step ms':>8} {'tok/s':>9} {'TFLOP/s':>8} "
          f"{'vs torch':>8} {'1st loss':>9}")
    rows: list[dict[str, Any]] = []
    for amp in precisions:
        precision = "amp" if amp else "float32"
        ref = time_torch(shape, amp, args.steps, args.torch_device)
        for who, captured in modes:
            row = time_netcl(dev, shape, amp, captured, args.steps, args.kernels)
            rows.append({"precision": precision, "who": who, **shape, **row})
            if "error" in row:
                print(f"{precision:<9} {who:<14} {row['error'][:100]}")
                continue
            ratio = f"{ref['step_ms'] / row['step_ms']:.2f}x" if ref else "-"
            print(f"{precision:<9} {who:<14} {row['step_ms']:>8.2f} "
                  f"{tokens / row['step_ms'] * 1e3:>9.0f} "
                  f"{flops / row['step_ms'] / 1e9:>8.2f} {ratio:>8} {row['first_loss']:>9.4f}")
            if "table" in row:
                print(f"  one step's kernels (device {row.get('device_ms', float('nan')):.2f} ms):")
                print("\n".join("  " + line for line in row.pop("table").splitlines()))
        if ref is not None:
            rows.append({"precision": precision, "who": "pytorch", **shape, **ref})
            print(f"{precision:<9} {'pytorch':<14} {ref['step_ms']:>8.2f} "
                  f"{tokens / ref['step_ms'] * 1e3:>9.0f} "
                  f"{flops / ref['step_ms'] / 1e9:>8.2f} {'':>8} {ref['first_loss']:>9.4f}")
    print("vs torch: PyTorch's step time over netcl's (higher is better, 1.0 = parity)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    manager.discover()
    main()
