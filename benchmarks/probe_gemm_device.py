"""Device time (profiling events) of ops.matmul on tall-skinny and square shapes, and the kernels
it launches (split-K or not), autotuning off; bench_ops_linalg times wall clock per call.

    python benchmarks/probe_gemm_device.py      # on the GPU machine, netcl on PYTHONPATH
"""

from __future__ import annotations

import os

os.environ["NETCL_PROFILE_EVENTS"] = "1"  # before the device is first used
os.environ["NETCL_AUTOTUNE"] = "off"

import numpy as np

from netcl.core.device import manager
from netcl.core.kernel_selector import get_kernel_selector
from netcl.core.tensor import Tensor
from netcl.ops import matmul
from netcl.runtime import profile


def main() -> None:
    h = manager.default("cl")
    if h is None:
        raise SystemExit("probe_gemm_device: needs an OpenCL device")
    q = h.queue
    for m, n, k in [(128, 4096, 4096), (4096, 128, 4096), (1024, 1024, 1024)]:
        a = Tensor.from_host(q, np.random.rand(m, k).astype(np.float32))
        b = Tensor.from_host(q, np.random.rand(k, n).astype(np.float32))
        cfg = get_kernel_selector(h.cl_device).select_matmul_kernel(m, n, k)
        print(m, n, k, cfg.variant.name, cfg.tile_m, cfg.tile_n, cfg.extra.get("split_k"))
        matmul(a, b).to_host()
        for _ in range(2):
            with profile() as p:
                for _ in range(10):
                    c = matmul(a, b)
                c.to_host()
            print("  ", [(s.name, s.launches, round((s.device_us or 0) / 10, 1))
                         for s in p.summary()][:6])


if __name__ == "__main__":
    main()
