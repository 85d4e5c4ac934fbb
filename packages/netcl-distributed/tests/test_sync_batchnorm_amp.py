"""SyncBatchNorm under autocast normalises float16 input in float32, as F.batch_norm does:
the global statistics of large float16 activations stay finite and match float64."""

from __future__ import annotations

from typing import Any

import numpy as np

import netcl.distributed as dist
from netcl.core.device import manager
from netcl.core.tensor import Tensor
from netcl.distributed.testing import run_threads
from netcl.nn.amp import autocast


def test_float16_input_under_autocast_uses_float32_statistics() -> None:
    rng = np.random.default_rng(0)
    shards = [(rng.standard_normal((2, 3, 4, 4)) * 60 + 200).astype(np.float16)
              for _ in range(2)]

    def rank(b: Any) -> tuple[str, np.ndarray[Any, Any]]:
        handle = manager.default("cpu")
        assert handle is not None
        q = handle.queue
        bn = dist.SyncBatchNorm(3, queue=q, group=b)
        with autocast():
            y = bn(Tensor.from_host(q, shards[b.rank], dtype="float16"))
        return y.dtype, y.to_host()

    results = run_threads(rank, 2)
    whole = np.concatenate(shards).astype(np.float64)
    mean = whole.mean(axis=(0, 2, 3), keepdims=True)
    want = (whole - mean) / np.sqrt(whole.var(axis=(0, 2, 3), keepdims=True) + 1e-5)
    for r, (dtype, y) in enumerate(results):
        assert dtype == "float32"
        np.testing.assert_allclose(y, want[2 * r: 2 * r + 2], rtol=1e-3, atol=1e-3)
