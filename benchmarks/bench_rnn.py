"""Training-step time (forward + backward) of LSTM and GRU layers on netcl devices beside
PyTorch in the same run (CPU always, CUDA when present).

    python3 benchmarks/bench_rnn.py [--devices cpu,cl] [--seq 64] [--batch 32] [--input 128]
        [--hidden 256] [--layers 2] [--repeat 5] [--amp] [--capture] [--json out.json]

A step is ``out, _ = layer(x); loss = mean(out * out); loss.backward()`` (gradients reset
before each step). ``--amp`` runs netcl under ``autocast`` (float16 storage) and PyTorch CUDA
under its autocast; ``--capture`` adds netcl rows with the step captured and replayed
(``netcl.runtime.capture``). Prints one line per (cell, runner): median milliseconds per step
and the ratio to PyTorch CPU (``x torch_cpu``: above 1 is slower than PyTorch CPU). On a
shared machine, ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1`` gives comparable one-thread figures
(BLAS and PyTorch threads spinning on busy cores distort both sides).
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import netcl.nn as nn
from netcl.core import Tensor
from netcl.core.device import manager
from netcl.runtime import CaptureError, CaptureFallbackWarning, capture


def _median_ms(step: Callable[[], Any], sync: Callable[[], None], repeat: int) -> float:
    step()  # builds, plans
    step()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _weights(cell: str, args: argparse.Namespace) -> dict[str, np.ndarray[Any, Any]]:
    """One set of initial weights (PyTorch's names and init) that both frameworks load."""
    layer = (nn.LSTM if cell == "lstm" else nn.GRU)(
        args.input, args.hidden, num_layers=args.layers, device="cpu",
        rng=np.random.default_rng(0))
    return {k: v.to_host() for k, v in layer.state_dict().items()}


def time_netcl(device: str, cell: str, args: argparse.Namespace, x: np.ndarray[Any, Any],
               captured: bool) -> float | str:
    handle = manager.default(device)
    if handle is None:
        return f"no device {device!r}"
    q = handle.queue
    layer = (nn.LSTM if cell == "lstm" else nn.GRU)(
        args.input, args.hidden, num_layers=args.layers, device=q)
    layer.load_state_dict(_weights(cell, args))
    params = list(layer.parameters())
    xt = Tensor.from_host(q, x)

    def step(inp: Tensor) -> Tensor:
        for p in params:
            p.grad = None
        if args.amp:
            with nn.autocast():
                out, _ = layer(inp)
        else:
            out, _ = layer(inp)
        loss = nn.functional.mean(nn.functional.mul(out, out))
        loss.backward()
        return loss

    run: Any = capture(step) if captured else step
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CaptureFallbackWarning)
            return _median_ms(lambda: run(xt), q.finish, args.repeat)
    except CaptureError as err:
        return f"{type(err).__name__}: {err}"


def time_torch(device: str, cell: str, args: argparse.Namespace,
               x: np.ndarray[Any, Any]) -> float | str:
    try:
        import torch
    except ImportError:
        return "torch not installed"
    if device == "cuda" and not torch.cuda.is_available():
        return "no CUDA"
    cls = torch.nn.LSTM if cell == "lstm" else torch.nn.GRU
    layer = cls(args.input, args.hidden, num_layers=args.layers).to(device)
    layer.load_state_dict({k: torch.tensor(v) for k, v in _weights(cell, args).items()})
    xt = torch.tensor(x, device=device)
    amp = args.amp and device == "cuda"

    def step() -> None:
        layer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", enabled=amp) if device == "cuda" else _null():
            out, _ = layer(xt)
        (out.float() ** 2).mean().backward()

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return _median_ms(step, sync, args.repeat)


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _cell_rows(cell: str, args: argparse.Namespace, x: np.ndarray[Any, Any]
               ) -> list[dict[str, Any]]:
    """Time ``cell`` on every runner, print a line each, return the timed rows."""
    base = time_torch("cpu", cell, args, x)
    runners: list[tuple[str, Callable[[], float | str]]] = [
        ("torch cpu", lambda: base), ("torch cuda", lambda: time_torch("cuda", cell, args, x))]
    for dev in args.devices.split(","):
        handle = manager.default(dev)
        label = dev if handle is None else f"{dev} ({handle.device_name.strip()})"
        runners.append((f"netcl {label}", functools.partial(time_netcl, dev, cell, args, x,
                                                            False)))
        if args.capture:
            runners.append((f"netcl {label} captured",
                            functools.partial(time_netcl, dev, cell, args, x, True)))
    rows = []
    for who, fn in runners:
        ms = fn()
        if isinstance(ms, str):
            if who != "torch cuda":
                print(f"{cell:5s} {who:45s} {ms}")
            continue
        ratio = f"{ms / base:6.2f}x torch_cpu" if isinstance(base, float) else ""
        print(f"{cell:5s} {who:45s} {ms:9.2f} ms  {ratio}", flush=True)
        rows.append({"cell": cell, "runner": who, "ms": ms,
                     "vs_torch_cpu": ms / base if isinstance(base, float) else None})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default="cpu,cl", help="netcl devices, comma-separated")
    parser.add_argument("--cells", default="lstm,gru")
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--input", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--amp", action="store_true", help="netcl autocast (float16)")
    parser.add_argument("--capture", action="store_true", help="also captured netcl steps")
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args()
    x = np.random.default_rng(1).normal(size=(args.seq, args.batch, args.input)).astype(
        np.float32)
    print(f"seq {args.seq}, batch {args.batch}, input {args.input}, hidden {args.hidden}, "
          f"layers {args.layers}, forward+backward{', amp' if args.amp else ''}")
    rows = []
    for cell in args.cells.split(","):
        rows += _cell_rows(cell, args, x)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
