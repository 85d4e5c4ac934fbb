"""Buffer pools: buckets, leases, caps and hit rates, on host blocks and on each OpenCL device."""

from __future__ import annotations

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.memory import (
    BufferHandle,
    BufferPool,
    PersistentBufferPool,
    PinnedBufferPool,
    PoolStats,
    get_persistent_pool,
    get_pinned_pool,
    has_svm_support,
    is_integrated_gpu,
)


def test_buckets_are_powers_of_two(dev: DeviceHandle) -> None:
    pool = BufferPool(dev.context)
    for n, cap in [(1, 1024), (1024, 1024), (1025, 2048), (33 * 1024 + 1, 64 * 1024)]:
        h = pool.allocate(n)
        assert (h.nbytes, h.capacity) == (n, cap)
        h.release()


def test_reuse_counts_hits(dev: DeviceHandle) -> None:
    pool = BufferPool(dev.context)
    a = pool.allocate(3000)
    buf = a.buffer
    a.release()
    b = pool.allocate(4000)
    assert b.buffer is buf
    assert (pool.stats.hits, pool.stats.misses) == (1, 1)
    assert pool.stats.hit_rate == 0.5


def test_release_twice_is_harmless_use_after_release_raises(dev: DeviceHandle) -> None:
    pool = BufferPool(dev.context)
    h = pool.allocate(100)
    h.release()
    h.release()
    assert pool.stats.releases == 1
    with pytest.raises(RuntimeError, match="use after release"):
        _ = h.buffer


def test_bad_sizes() -> None:
    pool = BufferPool(None)
    for bad in (-1, 2.5, "8"):
        with pytest.raises(ValueError, match="nbytes must be an integer >= 0"):
            pool.allocate(bad)  # type: ignore[arg-type]


def test_persistent_pool_respects_caps() -> None:
    pool = PersistentBufferPool(None, max_cached_bytes=10 * 1024, max_per_bucket=2)
    leases = [pool.allocate(1024) for _ in range(5)]
    for h in leases:
        h.release()
    assert pool.get_stats()["buckets"] == {1024: 2}
    big = [pool.allocate(4096) for _ in range(3)]
    for h in big:
        h.release()
    assert pool.stats.bytes_cached <= 10 * 1024


def test_persistent_pool_never_caches_above_256mb() -> None:
    pool = PersistentBufferPool(None, max_cached_bytes=2**40)
    assert pool._bucket_for(300 * 2**20) == 300 * 2**20
    assert not pool._may_cache(300 * 2**20)


def test_env_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_MAX_CACHED_GB", "0.5")
    assert PersistentBufferPool(None).max_cached_bytes == 500_000_000
    monkeypatch.setenv("NETCL_MAX_CACHED_GB", "lots")
    with pytest.raises(ValueError, match="NETCL_MAX_CACHED_GB must be a number, got 'lots'"):
        PersistentBufferPool(None)


def test_hundred_thousand_cycles_stay_within_cap() -> None:
    cap = 8 * 2**20
    pool = PersistentBufferPool(None, max_cached_bytes=cap, max_per_bucket=8)
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 256 * 1024, size=100_000)
    held: list[BufferHandle] = []
    for i, n in enumerate(sizes):
        held.append(pool.allocate(int(n)))
        if len(held) > 16 or rng.random() < 0.5:
            held.pop(int(rng.integers(len(held)))).release()
        if i % 997 == 0:
            assert pool.stats.bytes_cached <= cap
    for h in held:
        h.release()
    stats = pool.get_stats()
    assert stats["bytes_cached"] <= cap
    assert sum(c * n for c, n in stats["buckets"].items()) == stats["bytes_cached"]
    assert stats["hit_rate"] > 0.9, stats


def test_device_pool_cycles(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("OpenCL only")
    pool = PersistentBufferPool(dev.context, max_cached_bytes=4 * 2**20)
    rng = np.random.default_rng(1)
    for n in rng.integers(1, 64 * 1024, size=2000):
        pool.allocate(int(n)).release()
    assert pool.stats.hit_rate > 0.9
    assert pool.stats.bytes_cached <= 4 * 2**20


def test_pool_stats_hit_rate_empty() -> None:
    assert PoolStats().hit_rate == 0.0


def test_process_pools_and_probes(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        assert get_persistent_pool(dev.queue) is get_persistent_pool(dev.queue)
        return
    assert get_persistent_pool(dev.queue) is get_persistent_pool(dev.queue)
    pinned = get_pinned_pool(dev.queue)
    assert isinstance(pinned, PinnedBufferPool)
    pinned.allocate(10).release()
    assert isinstance(is_integrated_gpu(dev.queue), bool)
    assert isinstance(has_svm_support(dev.queue), bool)
    if dev.device_type == "cpu":
        assert is_integrated_gpu(dev.queue)
