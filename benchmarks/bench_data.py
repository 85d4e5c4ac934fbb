"""Batches per second of netcl.data's DataLoader beside PyTorch's, doing the same work.

The work: CIFAR-shaped uint8 images (N x 3 x 32 x 32) in memory, shuffled into batches of
128, each batch randomly cropped with 4 pixels of zero padding, randomly flipped left to right,
and normalised to float32 -- at 0, 1 and 2 worker processes. Every epoch starts its workers
afresh in both frameworks (netcl's loader has no persistent workers; torch's default is the
same), and the time of an epoch includes that start.

The loaders take turns, one epoch each per round, so that load from other processes on a shared
machine falls on all of them alike; the table shows each loader's best epoch (its least
disturbed one) and the JSON also keeps the median and every epoch time.

PyTorch runs two ways, since both are common:

* ``torch per-sample``: a Dataset whose ``__getitem__`` pads, crops, flips and normalises one
  image with torch ops (what torchvision-style transforms do), collated by the default collate;
* ``torch batched``: a Dataset indexed by a whole batch of indices (``BatchSampler`` as the
  sampler), gathering the batch and transforming it with vectorized torch ops, as netcl does.

Torch runs one thread per process (``torch.set_num_threads(1)``), like NumPy here and like
torch's own worker processes.

Torch is optional: without it the torch columns are left out. Prints a table and writes JSON.

    PYTHONPATH=packages/netcl-data/src python benchmarks/bench_data.py --json bench_data.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

try:
    import netcl.data  # noqa: F401
except ImportError:  # running from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "packages/netcl-data/src"))

from netcl.data import ArrayDataset, DataLoader, augment

MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
PAD = 4
SIZE = 32


def netcl_loader(images: np.ndarray, labels: np.ndarray, batch: int, workers: int) -> DataLoader:
    pipeline = augment.Compose(
        [
            augment.RandomCrop(SIZE, padding=PAD),
            augment.RandomHorizontalFlip(),
            augment.Normalize(MEAN, STD),
        ]
    )
    return DataLoader(
        ArrayDataset(images, labels),
        batch,
        shuffle=True,
        num_workers=workers,
        seed=0,
        transform=pipeline,
    )


def torch_loaders(
    images: np.ndarray, labels: np.ndarray, batch: int
) -> dict[str, Callable[[int], Iterable[Any]]] | None:
    """Factories of the two torch loaders by worker count, or None without torch."""
    try:
        import torch
        import torch.nn.functional as F
        from torch.utils.data import BatchSampler, Dataset, RandomSampler
        from torch.utils.data import DataLoader as TorchLoader
    except ImportError:
        return None

    # One thread per process, as NumPy here and torch's own workers run: torch's default pool
    # of one thread per core only oversubscribes a small machine when workers run beside it.
    torch.set_num_threads(1)
    x_all = torch.from_numpy(images)
    y_all = torch.from_numpy(labels)
    mean = torch.tensor(MEAN).view(3, 1, 1)
    std = torch.tensor(STD).view(3, 1, 1)

    class PerSample(Dataset[tuple[Any, Any]]):
        def __len__(self) -> int:
            return len(x_all)

        def __getitem__(self, i: int) -> tuple[Any, Any]:
            img = F.pad(x_all[i], (PAD, PAD, PAD, PAD))
            top, left = torch.randint(0, 2 * PAD + 1, (2,)).tolist()
            img = img[:, top : top + SIZE, left : left + SIZE]
            if torch.rand(()) < 0.5:
                img = img.flip(-1)
            return img.float().div_(255).sub_(mean).div_(std), y_all[i]

    arange = torch.arange(SIZE)

    class Batched(Dataset[tuple[Any, Any]]):
        def __len__(self) -> int:
            return len(x_all)

        def __getitem__(self, idx: list[int]) -> tuple[Any, Any]:  # type: ignore[override]
            x = F.pad(x_all[idx], (PAD, PAD, PAD, PAD))
            n = x.shape[0]
            off = torch.randint(0, 2 * PAD + 1, (n, 2))
            rows = (off[:, 0:1] + arange)[:, None, :, None]
            cols = (off[:, 1:2] + arange)[:, None, None, :]
            x = x[
                torch.arange(n)[:, None, None, None],
                torch.arange(3)[None, :, None, None],
                rows,
                cols,
            ]
            flip = torch.rand(n) < 0.5
            x[flip] = x[flip].flip(-1)
            return x.float().div_(255).sub_(mean).div_(std), y_all[idx]

    def per_sample(workers: int) -> Iterable[Any]:
        return TorchLoader(PerSample(), batch_size=batch, shuffle=True, num_workers=workers)

    def batched(workers: int) -> Iterable[Any]:
        ds = Batched()
        sampler = BatchSampler(RandomSampler(ds), batch_size=batch, drop_last=False)
        return TorchLoader(ds, batch_size=None, sampler=sampler, num_workers=workers)

    return {"torch per-sample": per_sample, "torch batched": batched}


def one_epoch(loader: Iterable[Any]) -> tuple[float, int, tuple[Any, ...]]:
    """Seconds for one epoch, its batch count, and (shape, dtype) of its first batch."""
    first: tuple[Any, ...] = ()
    count = 0
    start = time.perf_counter()
    for x, _y in loader:
        if not first:
            first = (tuple(x.shape), str(x.dtype))
        count += 1
    return time.perf_counter() - start, count, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_240, help="images in the dataset")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=5, help="epochs per loader (best kept)")
    parser.add_argument("--workers", default="0,1,2", help="comma-separated worker counts")
    parser.add_argument("--json", default="bench_data.json", help="where to write results")
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (args.samples, 3, SIZE, SIZE), dtype=np.uint8)
    labels = rng.integers(0, 10, args.samples).astype(np.int64)
    workers = [int(w) for w in args.workers.split(",")]
    torch_factories = torch_loaders(images, labels, args.batch_size)
    if torch_factories is None:
        print("torch is not installed: the torch columns are left out", file=sys.stderr)
    names = ["netcl", *(torch_factories or {})]

    loaders: dict[tuple[str, int], Iterable[Any]] = {}
    for w in workers:
        loaders["netcl", w] = netcl_loader(images, labels, args.batch_size, w)
        for name, factory in (torch_factories or {}).items():
            loaders[name, w] = factory(w)
    times: dict[tuple[str, int], list[float]] = {key: [] for key in loaders}
    counts: dict[tuple[str, int], int] = {}
    firsts: dict[tuple[str, int], tuple[Any, ...]] = {}
    for round_ in range(args.epochs):  # one epoch of each loader in turn
        for key, loader in loaders.items():
            seconds, counts[key], firsts[key] = one_epoch(loader)
            times[key].append(seconds)
        print(f"round {round_ + 1}/{args.epochs} done", file=sys.stderr, flush=True)

    rows: list[dict[str, Any]] = []
    for w in workers:
        row: dict[str, Any] = {"workers": w, "batches": counts["netcl", w]}
        for name in names:
            row[name] = counts[name, w] / min(times[name, w])
            row[f"{name} (median epoch)"] = counts[name, w] / statistics.median(times[name, w])
            row[f"{name} epoch seconds"] = times[name, w]
            row[f"{name} first batch"] = firsts[name, w]
        rows.append(row)

    header = f"{'workers':>7}  " + "  ".join(f"{n + ' b/s':>20}" for n in names)
    if torch_factories:
        header += "  " + "  ".join(f"{'netcl / ' + n.split()[-1]:>18}" for n in names[1:])
    print(
        f"\nCIFAR-shaped uint8 {args.batch_size}x3x32x32, crop(pad 4) + flip + normalise, "
        f"{args.samples} samples, best of {args.epochs} epochs (worker start included)"
    )
    print(header)
    for row in rows:
        line = f"{row['workers']:>7}  " + "  ".join(f"{row[n]:>20.1f}" for n in names)
        if torch_factories:
            line += "  " + "  ".join(f"{row['netcl'] / row[n]:>18.2f}" for n in names[1:])
        print(line)

    result = {
        "benchmark": "bench_data",
        "work": "CIFAR-shaped uint8, random crop (padding 4) + horizontal flip + normalise",
        "unit": "batches per second in the best epoch (and the median one); worker start included",
        "config": vars(args),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "torch": _torch_version(),
        },
        "results": rows,
    }
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.json}")
    return 0


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return str(torch.__version__)


if __name__ == "__main__":
    sys.exit(main())
