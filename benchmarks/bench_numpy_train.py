"""The README's digits CNN on the NumPy backend beside PyTorch CPU, measured in the same run.

    python benchmarks/bench_numpy_train.py                 # step + 10 epochs, both frameworks
    python benchmarks/bench_numpy_train.py --profile 40    # + cProfile of 40 NumPy steps

Two figures, each as netcl NumPy / PyTorch CPU (issue #15 asks for at most 1.5x):

- ``step``: one training step (forward, cross entropy, backward, Adam update, zero_grad) on a
  fixed batch of 64 digits, the model of ``netcl.trainer._digits.digits_cnn``; the minimum
  over ``--repeat`` samples of ``--steps`` steps each (the machine may be shared).
- ``epochs``: ``netcl train --device cpu`` end to end (``train_digits``: 10 epochs, batch 64,
  Adam 1e-2 with cosine annealing, held-out evaluation every epoch) against the same loop in
  PyTorch (``bench_train.py``'s reference: same architecture, split, optimizer, schedule).

PyTorch runs with as many threads as NumPy's BLAS gets (``--threads``, default the CPUs this
process may use), set through ``torch.set_num_threads``; without torch the reference is
skipped and only netcl's figures are printed.

Measured (Intel Xeon host, ``taskset`` to 2 cores, NumPy 2.5 / OpenBLAS, torch 2.11, 2 threads;
minimum of 3 alternating runs): before the NumPy fast paths 17.6 ms/step and 4.49 s for 10
epochs, after them 8.3 ms/step and 2.23 s; PyTorch CPU 2.9 ms/step and 0.93 s in the same
runs (2.8x and 2.4x). At batch 2 (Python overhead) 2.9 -> 2.0 ms/step, PyTorch 1.4.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _min_per_step(step: Callable[[], None], steps: int, repeat: int) -> float:
    """Seconds per step: the fastest of ``repeat`` samples of ``steps`` steps (after warm-up)."""
    for _ in range(3):
        step()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        best = min(best, (time.perf_counter() - start) / steps)
    return best


def _digits_batch(batch: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    from netcl.data import DigitsDataset

    data = DigitsDataset()
    x = np.stack([data[i][0] for i in range(batch)]).astype(np.float32)
    y = np.array([data[i][1] for i in range(batch)])
    return x, y


def netcl_step(batch: int, captured: bool = False) -> Callable[[], None]:
    """One NumPy-backend training step of the digits CNN, as ``Trainer._train_step`` runs it
    (``captured``: through ``netcl.runtime.capture``, which replays its NumPy calls)."""
    import netcl.autograd as ag
    from netcl.core.device import manager
    from netcl.core.tensor import Tensor
    from netcl.optim import Adam
    from netcl.runtime import capture
    from netcl.trainer._digits import digits_cnn

    q = manager.default("cpu").queue
    model = digits_cnn(q, seed=0)
    opt = Adam(model.parameters(), lr=1e-2)
    x, y = _digits_batch(batch)
    xt, yt = Tensor.from_host(q, x, dtype="float32"), Tensor.from_host(q, y)

    def step(x: Tensor, y: Tensor) -> Tensor:
        with ag.Tape() as tape:
            loss = ag.cross_entropy(model(x), y)
        tape.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    run = capture(step) if captured else step

    def call() -> None:
        run(xt, yt)

    return call


def torch_model(torch: Any) -> Any:
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(512, 10))


def torch_step(torch: Any, batch: int) -> Callable[[], None]:
    torch.manual_seed(0)
    model = torch_model(torch)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = _digits_batch(batch)
    xt, yt = torch.tensor(x), torch.tensor(y)

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(xt), yt)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def netcl_epochs(epochs: int, batch: int) -> dict[str, Any]:
    from netcl.trainer._digits import DigitsConfig, train_digits

    start = time.perf_counter()
    _, history, _ = train_digits(DigitsConfig(device="cpu", epochs=epochs, batch_size=batch,
                                              progress=False))
    return {"seconds": time.perf_counter() - start, "accuracy": history[-1].val_accuracy}


def torch_epochs(torch: Any, epochs: int, batch: int, lr: float = 1e-2,
                 seed: int = 0) -> dict[str, Any]:
    from netcl.data import DigitsDataset, random_split

    torch.manual_seed(seed)
    data = DigitsDataset()
    train, test = random_split(data, [0.8, 0.2], seed=seed)
    xtr = torch.tensor(np.stack([train[i][0] for i in range(len(train))]))
    ytr = torch.tensor(np.array([train[i][1] for i in range(len(train))]))
    xte = torch.tensor(np.stack([test[i][0] for i in range(len(test))]))
    yte = torch.tensor(np.array([test[i][1] for i in range(len(test))]))
    model = torch_model(torch)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    rng = np.random.default_rng(seed)
    acc = 0.0
    start = time.perf_counter()
    for _ in range(epochs):
        model.train()
        order = torch.tensor(rng.permutation(len(xtr)))
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            loss = torch.nn.functional.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        model.eval()
        with torch.no_grad():
            acc = float((model(xte).argmax(1) == yte).float().mean())
    return {"seconds": time.perf_counter() - start, "accuracy": acc}


def _import_torch(threads: int) -> Any:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    return torch


def _ratio(ours: float, ref: float | None) -> str:
    return "" if ref is None else f"  ({ours / ref:.2f}x PyTorch CPU)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20, help="steps per timing sample")
    parser.add_argument("--repeat", type=int, default=5, help="samples (the minimum is kept)")
    parser.add_argument("--runs", type=int, default=2,
                        help="end-to-end runs of each framework, alternating (minimum kept)")
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--tasks", default="step,epochs", help="comma list: step, epochs")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="also cProfile this many NumPy steps and print the top functions")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    tasks = set(args.tasks.split(","))
    torch = _import_torch(args.threads)
    if torch is None:
        print("torch is not installed: PyTorch CPU reference skipped")
    report: dict[str, Any] = {"threads": args.threads, "batch": args.batch_size}

    if "step" in tasks:
        ours = _min_per_step(netcl_step(args.batch_size), args.steps, args.repeat)
        replayed = _min_per_step(netcl_step(args.batch_size, captured=True), args.steps,
                                 args.repeat)
        ref = (None if torch is None
               else _min_per_step(torch_step(torch, args.batch_size), args.steps, args.repeat))
        report["step_ms"] = {"netcl_numpy": ours * 1e3, "netcl_numpy_captured": replayed * 1e3,
                             "torch_cpu": ref and ref * 1e3}
        print(f"step   netcl NumPy {ours * 1e3:7.2f} ms/step   captured {replayed * 1e3:7.2f} "
              f"ms/step   PyTorch CPU {'-' if ref is None else f'{ref * 1e3:.2f}'} ms/step"
              f"{_ratio(replayed, ref)}")

    if "epochs" in tasks:
        best: dict[str, dict[str, Any]] = {}
        for _ in range(args.runs):  # alternate, so a burst of load hits both
            runs = {"netcl_numpy": netcl_epochs(args.epochs, args.batch_size)}
            if torch is not None:
                runs["torch_cpu"] = torch_epochs(torch, args.epochs, args.batch_size)
            for name, r in runs.items():
                if name not in best or r["seconds"] < best[name]["seconds"]:
                    best[name] = r
        report["epochs"] = best
        ours_s = best["netcl_numpy"]["seconds"]
        ref_s = best["torch_cpu"]["seconds"] if "torch_cpu" in best else None
        print(f"{args.epochs} epochs netcl NumPy {ours_s:6.2f} s (val acc "
              f"{best['netcl_numpy']['accuracy']:.3f})   PyTorch CPU "
              f"{'-' if ref_s is None else f'{ref_s:.2f} s'}{_ratio(ours_s, ref_s)}")

    if args.profile:
        step = netcl_step(args.batch_size)
        step()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.profile):
            step()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)

    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
