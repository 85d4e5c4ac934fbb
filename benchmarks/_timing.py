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


def cuda_event_samples(torch: Any, fn: Callable[[], Any], repeat: int, inner: int
                       ) -> list[float]:
    """``repeat`` samples of seconds per call of a PyTorch CUDA ``fn``: CUDA events around
    ``inner`` back-to-back calls, after one warm-up call."""
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeat):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        samples.append(begin.elapsed_time(end) / 1e3 / inner)
    return samples


def device_samples(profile: Callable[[], Any], fn: Callable[[], Any], repeat: int, inner: int
                   ) -> tuple[list[float], list[str]]:
    """``repeat`` samples of seconds of device time per call of a netcl ``fn`` (the profiling
    events of every kernel it launches, summed; ``profile`` is ``netcl.runtime.profile``), and
    the kernels of one call (``name x launches: us``), after one warm-up call (builds).

    Raises:
        RuntimeError: no profiling events (NETCL_PROFILE_EVENTS=1 was set too late).
    """
    fn()
    samples: list[float] = []
    kernels: list[str] = []
    for _ in range(repeat):
        with profile() as prof:
            for _ in range(inner):
                fn()
        if not prof.device_timed:
            raise RuntimeError("no profiling events: NETCL_PROFILE_EVENTS=1 was not set before "
                               "the device was first used")
        stats = prof.summary()
        samples.append(float(sum(s.device_us or 0.0 for s in stats)) / 1e6 / inner)
        kernels = [f"{s.name}x{s.launches // inner}:{(s.device_us or 0.0) / inner:.1f}us"
                   for s in stats]
    return samples, kernels
