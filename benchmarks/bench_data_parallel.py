"""Digits training throughput (samples/s) data-parallel over 1, 2 and 4 processes, in one run.

Each configuration is ``netcl.trainer._parallel.train_digits_parallel`` (shared-memory process
group, DistributedDataParallel, DistributedSampler) with the same global batch; the figure is
the training samples of an epoch over the epoch's seconds as rank 0 measured them (the second
epoch: the first one builds kernels and warms caches). Process start-up is not counted.

    python benchmarks/bench_data_parallel.py [--device cpu] [--procs 1 2 4] [--batch 64]

``--overlap`` adds a second table: one training step of an 8-layer 1024-wide MLP (32 MB of
float32 gradients, 4 MB buckets) on 2 ranks, with DistributedDataParallel (buckets reduced
while the backward runs) against backward first and then the same bucketed reduction
(``GradBucketer.reduce``), milliseconds per step on rank 0.

``--staging`` adds a third: the host staging of one step's gradients of that MLP on one
rank, ``GradBucketer.reduce`` (each gradient copied from the device straight into its bucket
slice, the bucket reduced, the slices copied back) against the same done the way it was before
(``Tensor.to_host`` per gradient into the flat array, ``copy_from_host`` back), interleaved,
median milliseconds per step and their ratio.

``--device`` defaults to ``NETCL_DEVICE`` (else the NumPy backend ``cpu``), so
``NETCL_DEVICE=cl bash scripts/gpu/gpu_run.sh benchmarks/bench_data_parallel.py`` measures the
ranks sharing the GPU.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import tempfile
import time
import uuid
from typing import Any

import numpy as np

import netcl.distributed as dist
from netcl.core.device import device
from netcl.core.tensor import Tensor, copy_from_host
from netcl.nn import Linear, Module, ReLU, Sequential
from netcl.trainer._digits import DigitsConfig
from netcl.trainer._parallel import train_digits_parallel

TRAIN_SAMPLES = 1438  # the 80% split of scikit-learn's 1,797 digits


def _mlp(queue: Any) -> Module:
    rng = np.random.default_rng(0)
    layers: list[Module] = []
    for _ in range(8):
        layers += [Linear(1024, 1024, queue=queue, rng=rng), ReLU()]
    return Sequential(*layers)


def _overlap_rank(rank: int, job: str, dev_name: str, steps: int, out: Any) -> None:
    group = dist.init_process_group("shm", rank=rank, world_size=2, dist_id=job)
    with device(dev_name) as dev:
        x = Tensor.from_host(dev.queue, np.ones((64, 1024), np.float32))
        results = {}
        for mode in ("after backward", "during backward (DDP)"):
            model = _mlp(dev.queue)
            ddp = dist.DistributedDataParallel(model, group, bucket_cap_mb=4)
            bucketer = dist.GradBucketer(model.parameters(), group, bucket_cap_mb=4)
            times = []
            for _ in range(steps + 1):
                model.zero_grad()
                group.backend.barrier()
                start = time.perf_counter()
                if mode.startswith("during"):
                    ddp(x).sum().backward()
                else:
                    model(x).sum().backward()
                    bucketer.reduce()
                model[0].weight.grad.to_host()  # the device queue is drained
                times.append(time.perf_counter() - start)
            results[mode] = float(np.median(times[1:]) * 1e3)
        if rank == 0:
            out.put(results)
    dist.destroy_process_group()


def overlap(dev_name: str, steps: int = 5) -> None:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    job = uuid.uuid4().hex[:16]
    procs = [ctx.Process(target=_overlap_rank, args=(r, job, dev_name, steps, out))
             for r in range(2)]
    for p in procs:
        p.start()
    results = out.get(timeout=600)
    for p in procs:
        p.join()
    print(f"\nMLP 8x1024^2 (32 MB of gradients, 4 MB buckets), 2 ranks, device {dev_name}")
    for mode, ms in results.items():
        print(f"  gradients reduced {mode:<24} {ms:8.1f} ms per step")


def staging(dev_name: str, steps: int = 15) -> None:
    group = dist.init_process_group("shm", rank=0, world_size=1)
    with device(dev_name) as dev:
        model = _mlp(dev.queue)
        rng = np.random.default_rng(0)
        params = list(model.parameters())
        for p in params:
            p.grad = Tensor.from_host(dev.queue, rng.normal(size=p.shape).astype(np.float32))
        bucketer = dist.GradBucketer(params, group, bucket_cap_mb=4)
        def reference() -> None:  # what GradBucketer.reduce did before: a to_host per gradient
            for q in bucketer.params:
                bucketer.add(q, q.grad.to_host())
            bucketer.wait()
            for b in bucketer.buckets:
                b.filled.clear()
                for q in b.params:
                    copy_from_host(q.grad, bucketer.reduced(q))

        times: dict[str, list[float]] = {"to_host per gradient (before)": [],
                                         "persistent staging (GradBucketer)": []}
        for _ in range(steps + 1):
            for name, call in zip(times, (reference, bucketer.reduce)):
                start = time.perf_counter()
                call()
                times[name].append(time.perf_counter() - start)
    dist.destroy_process_group()
    medians = [float(np.median(t[1:]) * 1e3) for t in times.values()]
    print(f"\nhost staging of 32 MB of gradients (4 MB buckets), 1 rank, device {dev_name}")
    for name, ms in zip(times, medians):
        print(f"  {name:<36} {ms:8.1f} ms per step")
    print(f"  ratio persistent / before {medians[1] / medians[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=os.environ.get("NETCL_DEVICE", "cpu"))
    parser.add_argument("--procs", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--overlap", action="store_true")
    parser.add_argument("--staging", action="store_true")
    args = parser.parse_args()
    print(f"digits CNN, global batch {args.batch}, device {args.device}")
    print(f"{'procs':>5} {'epoch s':>8} {'samples/s':>10} {'val acc':>8}")
    for n in args.procs:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = DigitsConfig(device=args.device, epochs=2, batch_size=args.batch,
                               progress=False, checkpoint_dir=tmp)
            history = train_digits_parallel(cfg, n)
        last = history[-1]
        print(f"{n:>5} {last.seconds:>8.2f} {TRAIN_SAMPLES / last.seconds:>10.0f} "
              f"{last.val_accuracy or 0.0:>8.3f}", flush=True)
    if args.overlap:
        overlap(args.device)
    if args.staging:
        staging(args.device)


if __name__ == "__main__":
    main()
