"""Digits training throughput (samples/s) data-parallel over 1, 2 and 4 processes, in one run.

Each configuration is ``netcl.trainer._parallel.train_digits_parallel`` (shared-memory process
group, DistributedDataParallel, DistributedSampler) with the same global batch; the figure is
the training samples of an epoch over the epoch's seconds as rank 0 measured them (the second
epoch: the first one builds kernels and warms caches). Process start-up is not counted.

    python benchmarks/bench_data_parallel.py [--device cpu] [--procs 1 2 4] [--batch 64]

``--device`` defaults to ``NETCL_DEVICE`` (else the NumPy backend ``cpu``), so
``NETCL_DEVICE=cl bash scripts/gpu/gpu_run.sh benchmarks/bench_data_parallel.py`` measures the
ranks sharing the GPU.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from netcl.trainer._digits import DigitsConfig
from netcl.trainer._parallel import train_digits_parallel

TRAIN_SAMPLES = 1438  # the 80% split of scikit-learn's 1,797 digits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=os.environ.get("NETCL_DEVICE", "cpu"))
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--batch", type=int, default=64)
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


if __name__ == "__main__":
    main()
