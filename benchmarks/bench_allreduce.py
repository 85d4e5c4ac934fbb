"""all_reduce bandwidth for 1, 16 and 128 MB on 2 and 4 ranks, shared memory and MPI, beside
NumPy's copy bandwidth, in one run.

Each configuration starts its ranks (``python -m netcl.distributed.launch`` for the
shared-memory backend, the env's ``mpiexec`` for MPI where mpi4py is installed) running this
file with ``--rank``; every rank all-reduces (sum) a float32 buffer of each size ``--repeat``
times after one warm-up call, with a barrier before each call, and rank 0 reports the best and
the median time. ``algbw`` is the buffer's bytes over the time; ``busbw`` is NCCL's bus
bandwidth, ``algbw * 2 (n - 1) / n``: the bytes each rank must move at least, comparable
across rank counts. The NumPy reference is ``np.copyto`` of 128 MB in this process: ``copy``
counts the bytes copied per second (read + write would be twice that).

With ``--tensor-device SELECTOR`` each rank also all-reduces a netcl Tensor on that device
(every rank shares it: one GPU for all ranks) through ``netcl.distributed.all_reduce``, which
stages it through the host; every result is checked (each rank sends rank + 1).
``--tensor-device rank`` puts each rank on its own device instead
(:func:`netcl.distributed.device_for_rank`: GPU k for rank k where there are several).

    python benchmarks/bench_allreduce.py [--ranks 2 4] [--sizes-mb 1 16 128] [--repeat 5]
    python benchmarks/bench_allreduce.py --ranks 2 --backends shm --tensor-device cl   # a GPU
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

import netcl.distributed as dist
from netcl.core.device import manager
from netcl.core.tensor import Tensor

HERE = Path(__file__).resolve()
MB = 1 << 20


def numpy_copy_gbs(size_mb: int = 128, repeat: int = 5) -> float:
    """Bytes copied per second by ``np.copyto`` (best of ``repeat``), GB/s."""
    src = np.ones(size_mb * MB // 4, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return src.nbytes / min(times) / 1e9


def rank_main(sizes_mb: list[int], repeat: int, tensor_device: str | None) -> None:
    """One rank: time all_reduce of each size (NumPy arrays through the backend, then netcl
    Tensors on ``tensor_device`` through ``dist.all_reduce``); rank 0 prints a JSON line per
    row. Raises if a result is wrong."""
    pg = dist.init_process_group()
    backend, world = pg.backend, pg.world_size
    expect = world * (world + 1) / 2  # every rank sends rank + 1
    for size in sizes_mb:
        buf = np.full(size * MB // 4, pg.rank + 1, np.float32)
        backend.all_reduce(buf, "sum")  # warm-up: pages touched, slots mapped
        _check(buf, expect, f"ndarray {size} MB")
        times = _times(partial(backend.all_reduce, buf, "sum"), backend, repeat)
        _report(pg, "ndarray", size, times)
    if tensor_device:
        dev = (dist.device_for_rank(pg.local_rank) if tensor_device == "rank"
               else manager.default(tensor_device))
        if dev is None:
            raise RuntimeError(f"no device {tensor_device!r}")
        for size in sizes_mb:
            t = Tensor.from_host(dev.queue, np.full(size * MB // 4, pg.rank + 1, np.float32))
            dist.all_reduce(t, "sum")
            _check(t.to_host(), expect, f"Tensor {size} MB on {dev}")
            times = _times(partial(dist.all_reduce, t, "sum"), backend, repeat)
            _report(pg, f"Tensor {dev}", size, times)
    dist.destroy_process_group()


def _check(host: np.ndarray[Any, Any], expect: float, what: str) -> None:
    if not np.all(host == expect):
        bad = host[host != expect]
        raise AssertionError(f"all_reduce {what}: expected {expect}, got {bad[:5]} "
                             f"({bad.size} wrong)")


def _times(call: Callable[[], Any], backend: dist.Backend, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        backend.barrier()
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times


def _report(pg: dist.ProcessGroup, data: str, size: int, times: list[float]) -> None:
    if pg.rank == 0:
        print("RESULT " + json.dumps({"backend": pg.backend.name, "ranks": pg.world_size,
                                      "data": data, "mb": size, "best_s": min(times),
                                      "median_s": float(np.median(times))}), flush=True)


def run(backend: str, ranks: int, sizes_mb: list[int], repeat: int,
        tensor_device: str | None) -> list[dict[str, Any]]:
    """Start ``ranks`` ranks on ``backend``; the results rank 0 reported."""
    worker = [str(HERE), "--rank", "--sizes-mb", *map(str, sizes_mb), "--repeat", str(repeat)]
    if tensor_device:
        worker += ["--tensor-device", tensor_device]
    if backend == "shm":
        cmd = [sys.executable, "-m", "netcl.distributed.launch", "-n", str(ranks),
               *worker]
    else:
        mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) \
            or shutil.which("mpiexec")
        if mpiexec is None:
            return []
        cmd = [mpiexec, "-n", str(ranks), sys.executable, *worker]
    device_env = "auto" if tensor_device == "rank" else tensor_device or "cpu"
    env = {**os.environ, "NETCL_DEVICE": device_env}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        print(f"{backend} x{ranks} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}",
              file=sys.stderr)
        return []
    return [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines()
            if line.startswith("RESULT ")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[1, 16, 128])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backends", nargs="+", default=["shm", "mpi"])
    parser.add_argument("--tensor-device", default=None,
                        help="also all-reduce netcl Tensors on this device (e.g. cl): every "
                             "rank shares it; 'rank': each rank on its own (device_for_rank)")
    parser.add_argument("--out", help="also write the rows as JSON here")
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank:
        rank_main(args.sizes_mb, args.repeat, args.tensor_device)
        return
    copy = numpy_copy_gbs()
    print(f"all_reduce (sum, float32) on {os.cpu_count()} CPUs; "
          f"NumPy copy: {copy:.2f} GB/s (bytes copied per second, 128 MB)")
    print(f"{'backend':>7} {'ranks':>5} {'data':>24} {'MB':>5} {'best ms':>9} {'median ms':>9} "
          f"{'algbw GB/s':>10} {'busbw GB/s':>10} {'busbw/copy':>10}")
    rows = []
    for backend in args.backends:
        if backend == "mpi" and importlib.util.find_spec("mpi4py") is None:
            print("mpi: skipped (mpi4py is not installed: pip install netcl-distributed[mpi])")
            continue
        for ranks in args.ranks:
            for r in run(backend, ranks, args.sizes_mb, args.repeat, args.tensor_device):
                algbw = r["mb"] * MB / r["best_s"] / 1e9
                busbw = algbw * 2 * (ranks - 1) / ranks
                r.update(algbw_gbs=algbw, busbw_gbs=busbw, numpy_copy_gbs=copy)
                rows.append(r)
                print(f"{backend:>7} {ranks:>5} {r['data'][:24]:>24} {r['mb']:>5} "
                      f"{r['best_s'] * 1e3:>9.2f} "
                      f"{r['median_s'] * 1e3:>9.2f} {algbw:>10.2f} {busbw:>10.2f} "
                      f"{busbw / copy:>10.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
