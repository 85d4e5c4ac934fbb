"""Issue 21's GPU check: two shared-memory ranks on one GPU (OpenCL ``cl``), all_reduce of
netcl Tensors checked and timed for 1, 16 and 128 MB, beside the NumPy-array rows and NumPy's
copy bandwidth (``benchmarks/bench_allreduce.py``). Runs from the repo root with plain
``python3 scripts/gpu/dist_one_gpu.py`` once ``scripts/gpu/gpu_run.sh``'s setup is done (or as
its step: ``bash scripts/gpu/gpu_run.sh scripts/gpu/dist_one_gpu.py``); < 40 s.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_allreduce.py"

if __name__ == "__main__":
    raise SystemExit(subprocess.call(
        [sys.executable, str(BENCH), "--ranks", "2", "--backends", "shm",
         "--tensor-device", "cl", "--sizes-mb", "1", "16", "128", "--repeat", "5"]))
