"""Per-call timing shared by the benchmarks: batches of back-to-back calls, one sync each.

A single call followed by a sync measures launch-plus-synchronisation latency (tens of
microseconds on a GPU), not the op: a 16 M-element add takes about 0.1 ms on an H100. So a
sample is ``inner`` calls then one sync, with ``inner`` chosen from a first timing so a
sample lasts about ``target_s``; the per-call time is the sample over ``inner``. The host
side of every call (Python dispatch, argument setting) is still inside the sample: an op
whose dispatch is slower than its kernel shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def per_call_samples(fn: Callable[[], Any], sync: Callable[[], None], repeat: int,
                     target_s: float = 2e-3, max_inner: int = 64) -> list[float]:
    """``repeat`` samples of seconds per call of ``fn``, after one warm-up call (builds)."""
    fn()
    sync()
    start = time.perf_counter()
    fn()
    sync()
    once = time.perf_counter() - start
    inner = max(1, min(max_inner, int(target_s / max(once, 1e-7))))
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / inner)
    return samples
