"""persistent_workers: the same worker processes serve every epoch, the batches equal those of
a loader that starts workers per epoch, an epoch left early does not leak into the next, a
worker that died between epochs is replaced, and close() / garbage collection stop them."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import time
from typing import Any

import numpy as np
import pytest

from netcl.data import ArrayDataset, DataLoader, augment

needs_fork = pytest.mark.skipif("fork" not in mp.get_all_start_methods(),
                                reason="the fork start method is not available")

PIPELINE = augment.Compose([augment.RandomCrop(8, padding=1), augment.RandomHorizontalFlip()])


def _ds(n: int = 61) -> ArrayDataset:
    rng = np.random.default_rng(0)
    return ArrayDataset(rng.integers(0, 256, (n, 3, 8, 8), dtype=np.uint8), np.arange(n))


def _loader(persistent: bool, **kw: Any) -> DataLoader:
    return DataLoader(_ds(), batch_size=7, shuffle=True, generator=3, num_workers=2,
                      transform=PIPELINE, multiprocessing_context="fork", timeout=30,
                      persistent_workers=persistent, **kw)


def _epoch(loader: DataLoader) -> list[tuple[Any, Any]]:
    return [(x.copy(), y.copy()) for x, y in loader]


def _same(a: list[tuple[Any, Any]], b: list[tuple[Any, Any]]) -> None:
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)


@needs_fork
def test_same_workers_and_same_batches_every_epoch() -> None:
    fresh, kept = _loader(False), _loader(True, prefetch_factor=3)
    pids = []
    for _ in range(3):
        _same(_epoch(fresh), _epoch(kept))
        pids.append(kept.worker_pids)
    assert len(pids[0]) == 2 and pids[0] == pids[1] == pids[2]
    assert all(p.pid in pids[0] for p in mp.active_children())
    kept.close()
    assert kept.worker_pids == [] and mp.active_children() == []
    _same(_epoch(fresh), _epoch(kept))  # after close() the next epoch starts new workers
    assert kept.worker_pids and kept.worker_pids != pids[0]
    kept.close()


@needs_fork
def test_an_epoch_left_early_does_not_leak_into_the_next() -> None:
    fresh, kept = _loader(False), _loader(True)
    want = [_epoch(fresh) for _ in range(4)]
    it = iter(kept)
    next(it)
    del it  # tasks still in flight: their replies are read and dropped
    kept.set_epoch(1)
    _same(_epoch(kept), want[1])
    it = iter(kept)
    next(it)
    _same(_epoch(kept), want[3])  # a new iter ends the running one (epoch 2)
    del it
    kept.close()


@needs_fork
def test_a_worker_killed_between_epochs_is_replaced() -> None:
    kept = _loader(True)
    first = _epoch(kept)
    os.kill(kept.worker_pids[0], signal.SIGKILL)
    time.sleep(0.2)
    kept.set_epoch(0)
    _same(_epoch(kept), first)
    kept.close()


@needs_fork
def test_garbage_collection_stops_persistent_workers() -> None:
    kept = _loader(True)
    _epoch(kept)
    assert len(mp.active_children()) == 2
    del kept
    gc.collect()
    assert mp.active_children() == []


class _Faulty:
    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> Any:
        if i == 7:
            raise KeyError(f"item {i} is missing")
        return np.full(2, i, np.float32), np.int64(i)


@needs_fork
def test_an_error_stops_persistent_workers_and_the_next_epoch_starts_new_ones() -> None:
    loader = DataLoader(_Faulty(), batch_size=3, num_workers=2, persistent_workers=True,
                        multiprocessing_context="fork", timeout=30)
    for _ in range(2):
        with pytest.raises(KeyError, match="item 7 is missing"):
            list(loader)
        assert mp.active_children() == [] and loader.worker_pids == []
    loader.close()
