"""DataLoader: determinism across worker counts, worker errors and death, clean shutdown."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from netcl.data import ArrayDataset, DataLoader, augment
from netcl.data.shared_batch import segment_prefix

HAS_FORK = "fork" in mp.get_all_start_methods()
needs_fork = pytest.mark.skipif(not HAS_FORK, reason="the fork start method is not available")


def cifar_like(n: int = 100, seed: int = 0) -> ArrayDataset:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, 3, 12, 12), dtype=np.uint8)
    return ArrayDataset(images, np.arange(n, dtype=np.int64))


PIPELINE = augment.Compose(
    [
        augment.RandomCrop(12, padding=2),
        augment.RandomHorizontalFlip(),
        augment.ColorJitter(0.3, 0.3, 0.3),
        augment.Normalize((0.5, 0.4, 0.3), (0.2, 0.2, 0.2)),
        augment.RandomErasing(p=0.5),
    ]
)


def collect(loader: DataLoader) -> list[Any]:
    return list(loader)


def assert_same_batches(a: list[Any], b: list[Any]) -> None:
    assert len(a) == len(b)
    for (xa, ya), (xb, yb) in zip(a, b, strict=True):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(ya, yb)


# -- determinism --------------------------------------------------------------------------------


@needs_fork
def test_batches_identical_for_every_worker_count() -> None:
    ds = cifar_like()
    runs = [
        collect(
            DataLoader(
                ds,
                16,
                shuffle=True,
                seed=7,
                num_workers=w,
                transform=PIPELINE,
                multiprocessing_context="fork",
                timeout=30,
            )
        )
        for w in (0, 1, 2)
    ]
    assert_same_batches(runs[0], runs[1])
    assert_same_batches(runs[0], runs[2])
    assert [len(y) for _, y in runs[0]] == [16] * 6 + [4]
    assert runs[0][0][0].dtype == np.float32
    # The order is a permutation of the dataset.
    labels = np.concatenate([y for _, y in runs[0]])
    assert sorted(labels.tolist()) == list(range(100))


def test_epochs_differ_and_set_epoch_reproduces() -> None:
    loader = DataLoader(cifar_like(), 10, shuffle=True, seed=1, transform=PIPELINE)
    epoch0 = collect(loader)
    epoch1 = collect(loader)
    assert loader.epoch == 2
    assert not np.array_equal(epoch0[0][1], epoch1[0][1])
    loader.set_epoch(1)
    assert_same_batches(collect(loader), epoch1)
    loader.set_epoch(0)
    assert_same_batches(collect(loader), epoch0)


def test_same_seed_same_batches_other_seed_other_batches() -> None:
    a = collect(DataLoader(cifar_like(), 10, shuffle=True, seed=3, transform=PIPELINE))
    b = collect(DataLoader(cifar_like(), 10, shuffle=True, seed=3, transform=PIPELINE))
    c = collect(DataLoader(cifar_like(), 10, shuffle=True, seed=4, transform=PIPELINE))
    assert_same_batches(a, b)
    assert not np.array_equal(a[0][1], c[0][1])


def test_no_seed_draws_one_and_keeps_it() -> None:
    loader = DataLoader(cifar_like(), 10, shuffle=True)
    assert isinstance(loader.seed, int)
    again = DataLoader(cifar_like(), 10, shuffle=True, seed=loader.seed)
    assert_same_batches(collect(loader), collect(again))


@pytest.mark.parametrize("drop_last", [False, True])
def test_len_and_drop_last(drop_last: bool) -> None:
    loader = DataLoader(cifar_like(25), 10, drop_last=drop_last)
    sizes = [len(y) for _, y in loader]
    assert sizes == ([10, 10] if drop_last else [10, 10, 5])
    assert len(loader) == len(sizes)


def test_unshuffled_order_and_empty_dataset() -> None:
    labels = [y.tolist() for _, y in DataLoader(cifar_like(5), 2, num_workers=1)]
    assert labels == [[0, 1], [2, 3], [4]]
    assert collect(DataLoader(ArrayDataset(np.zeros((0, 3))), 4, num_workers=2)) == []


@needs_fork
@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_fork_and_other_start_methods_agree(method: str) -> None:
    if method not in mp.get_all_start_methods():
        pytest.skip(f"no {method} start method")
    ds = cifar_like(48)
    kwargs: dict[str, Any] = dict(shuffle=True, seed=5, num_workers=2, transform=PIPELINE)
    forked = collect(DataLoader(ds, 16, multiprocessing_context="fork", **kwargs))
    other = collect(DataLoader(ds, 16, multiprocessing_context=method, timeout=60, **kwargs))
    assert_same_batches(forked, other)


class ListDataset:
    """Items from a list, collated item by item (no get_batch)."""

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> Any:
        return self.items[index]


@needs_fork
def test_nested_batches_come_back_whole() -> None:
    items = [
        {"x": np.full((2, 2), i, np.float32), "meta": (i, float(i), f"s{i}")} for i in range(7)
    ]
    ds = ListDataset(items)
    for workers in (0, 2):
        batches = collect(
            DataLoader(ds, 3, num_workers=workers, multiprocessing_context="fork", timeout=30)
        )
        first = batches[0]
        assert first["x"].shape == (3, 2, 2)
        ints, floats, strings = first["meta"]
        assert ints.dtype == np.int64 and floats.dtype == np.float32
        assert strings == ["s0", "s1", "s2"]


# -- the shared-memory ring ---------------------------------------------------------------------


@needs_fork
def test_batches_travel_through_shared_memory_not_pickle() -> None:
    loader = DataLoader(
        cifar_like(),
        8,
        num_workers=2,
        transform=PIPELINE,
        multiprocessing_context="fork",
        timeout=30,
    )
    it = iter(loader)
    batches = list(it)
    assert len(batches) == 13
    assert it.pickled_batches == 0


def _big_collate(items: Sequence[Any]) -> npt.NDArray[np.float64]:
    # Much bigger than the slot size guessed from item 0: the first use of each slot overflows.
    return np.stack([np.full(40_000, int(x[1])) for x in items]).astype(np.float64)


@needs_fork
def test_slot_grows_when_a_batch_does_not_fit() -> None:
    loader = DataLoader(
        cifar_like(64),
        8,
        num_workers=2,
        prefetch=2,
        collate_fn=_big_collate,
        multiprocessing_context="fork",
        timeout=30,
    )
    it = iter(loader)
    batches = list(it)
    assert [b[:, 0].tolist() for b in batches] == [list(range(k, k + 8)) for k in range(0, 64, 8)]
    assert 1 <= it.pickled_batches <= 4  # once per slot at most, then the slot is big enough
    again = iter(loader)
    assert len(list(again)) == 8
    assert again.pickled_batches == 0  # the next epoch starts with slots of the learnt size


# -- errors in workers --------------------------------------------------------------------------


class FailingDataset(ListDataset):
    def __getitem__(self, index: int) -> Any:
        if index == 13:
            raise KeyError(f"item {index} is corrupt")
        return super().__getitem__(index)


class TwoArgError(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")


class UnpicklableErrorDataset(ListDataset):
    def __getitem__(self, index: int) -> Any:
        raise TwoArgError(3, "cannot be rebuilt from its message")


def _items(n: int) -> list[npt.NDArray[np.float32]]:
    return [np.full(3, i, np.float32) for i in range(n)]


@needs_fork
def test_worker_exception_reraised_in_parent_with_traceback() -> None:
    loader = DataLoader(
        FailingDataset(_items(20)), 4, num_workers=2, multiprocessing_context="fork", timeout=30
    )
    delivered = []
    with pytest.raises(KeyError, match="item 13 is corrupt") as info:
        for x in loader:
            delivered.append(x[:, 0].astype(int).tolist())
    # The error surfaces in batch order: every batch before the bad one is delivered first.
    assert delivered == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    cause = str(info.value.__cause__)
    assert "Traceback (most recent call last)" in cause
    assert "FailingDataset" in cause or "__getitem__" in cause
    notes = getattr(info.value, "__notes__", [])
    if hasattr(info.value, "add_note"):
        assert any("DataLoader worker" in n and "batch 3" in n for n in notes)


@needs_fork
def test_exception_that_cannot_be_pickled_becomes_runtime_error() -> None:
    loader = DataLoader(
        UnpicklableErrorDataset(_items(4)),
        2,
        num_workers=1,
        multiprocessing_context="fork",
        timeout=30,
    )
    with pytest.raises(RuntimeError, match=r"TwoArgError.*3: cannot be rebuilt"):
        collect(loader)


def _boom(worker_id: int) -> None:
    raise OSError(f"worker {worker_id} cannot open its files")


@needs_fork
def test_worker_init_fn_error_is_reported() -> None:
    loader = DataLoader(
        cifar_like(8),
        4,
        num_workers=1,
        worker_init_fn=_boom,
        multiprocessing_context="fork",
        timeout=30,
    )
    with pytest.raises(OSError, match="worker 0 cannot open its files"):
        collect(loader)


def _divide_by_zero(items: Sequence[Any]) -> Any:
    return 1 / 0


@pytest.mark.parametrize("workers", [0, 2])
def test_collate_fn_error_names_collate_and_batch(workers: int) -> None:
    loader = DataLoader(
        cifar_like(8), 4, num_workers=workers, collate_fn=_divide_by_zero, timeout=30
    )
    with pytest.raises(
        RuntimeError,
        match=r"collate_fn _divide_by_zero .*ZeroDivisionError "
        r"on batch 0 of epoch 0 \(4 items",
    ):
        collect(loader)


@pytest.mark.parametrize("workers", [0, 2])
def test_inconsistent_item_shapes_raise_value_error(workers: int) -> None:
    ds = ListDataset([np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((3, 5)), np.zeros((3, 4))])
    loader = DataLoader(ds, 4, num_workers=workers, timeout=30)
    with pytest.raises(
        ValueError,
        match=r"default_collate: .*item 0 has shape \(3, 4\) and "
        r"item 2 has shape \(3, 5\)",
    ):
        collect(loader)


class SuicideDataset(ListDataset):
    def __getitem__(self, index: int) -> Any:
        if index == 9:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(index)


@needs_fork
def test_worker_that_kills_itself_is_detected() -> None:
    loader = DataLoader(
        SuicideDataset(_items(40)), 4, num_workers=2, multiprocessing_context="fork"
    )  # no timeout: must not hang
    start = time.monotonic()
    with pytest.raises(
        RuntimeError,
        match=r"worker \d \(pid \d+\) exited unexpectedly with "
        r"signal SIGKILL while batches \[2",
    ):
        collect(loader)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_worker_killed_from_outside_is_detected(method: str) -> None:
    if method not in mp.get_all_start_methods():
        pytest.skip(f"no {method} start method")
    loader = DataLoader(
        cifar_like(400),
        4,
        num_workers=2,
        prefetch=1,
        transform=PIPELINE,
        multiprocessing_context=method,
    )
    it = iter(loader)
    next(it)
    os.kill(it.worker_pids[0], signal.SIGKILL)
    with pytest.raises(RuntimeError, match="exited unexpectedly with signal SIGKILL"):
        for _ in it:
            pass


@needs_fork
def test_ctrl_c_reaches_the_parent_only() -> None:
    # Ctrl-C in a terminal signals the whole process group: workers ignore it and go on.
    loader = DataLoader(
        cifar_like(200), 4, num_workers=2, multiprocessing_context="fork", timeout=30
    )
    it = iter(loader)
    next(it), next(it)  # batches 0 and 1 come from workers 0 and 1: both are in their loop
    for pid in it.worker_pids:
        os.kill(pid, signal.SIGINT)
    assert len(list(it)) == 48


class SlowDataset(ListDataset):
    def __getitem__(self, index: int) -> Any:
        if mp.parent_process() is not None:  # slow in workers only (the parent probes item 0)
            time.sleep(5)
        return super().__getitem__(index)


@needs_fork
def test_timeout_raises_instead_of_waiting() -> None:
    loader = DataLoader(
        SlowDataset(_items(4)), 2, num_workers=1, timeout=0.2, multiprocessing_context="fork"
    )
    with pytest.raises(
        RuntimeError,
        match=r"batch 0 of epoch 0 did not arrive within "
        r"timeout=0.2s",
    ):
        collect(loader)


# -- clean shutdown -----------------------------------------------------------------------------


def shm_count() -> int:
    return sum(1 for name in os.listdir("/dev/shm") if name.startswith(segment_prefix()))


needs_dev_shm = pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")


@needs_dev_shm
@needs_fork
def test_break_stops_workers_and_unlinks_segments() -> None:
    before = shm_count()
    loader = DataLoader(cifar_like(), 4, num_workers=2, multiprocessing_context="fork")
    for _ in loader:
        assert shm_count() >= before + 4  # 2 workers x prefetch 2, and one per held batch
        assert len(mp.active_children()) == 2
        break
    assert shm_count() == before
    assert mp.active_children() == []


@needs_dev_shm
@needs_fork
def test_exception_in_loop_body_cleans_up() -> None:
    before = shm_count()
    loader = DataLoader(cifar_like(), 4, num_workers=2, multiprocessing_context="fork")
    with pytest.raises(ZeroDivisionError):
        for _ in loader:
            _ = 1 / 0
    assert shm_count() == before
    assert mp.active_children() == []


@needs_dev_shm
@needs_fork
def test_garbage_collection_cleans_up_a_cycle() -> None:
    before = shm_count()
    it: Any = iter(DataLoader(cifar_like(), 4, num_workers=2, multiprocessing_context="fork"))
    next(it)
    pids = it.worker_pids
    it.self_reference = it  # only the cycle collector can free it now
    del it
    gc.collect()
    assert shm_count() == before
    assert mp.active_children() == []
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@needs_dev_shm
@needs_fork
def test_close_and_exhaustion_release_everything() -> None:
    before = shm_count()
    loader = DataLoader(cifar_like(20), 4, num_workers=2, multiprocessing_context="fork")
    it = iter(loader)
    next(it)
    it.close()
    assert shm_count() == before and mp.active_children() == []
    with pytest.raises(StopIteration):
        next(it)
    assert len(collect(loader)) == 5
    assert shm_count() == before and mp.active_children() == []


@needs_dev_shm
def test_batches_live_in_the_ring_and_outlive_their_epoch() -> None:
    before = shm_count()
    loader = DataLoader(cifar_like(40), 4, num_workers=2, transform=PIPELINE, seed=2, timeout=30)
    reference = collect(DataLoader(cifar_like(40), 4, transform=PIPELINE, seed=2))
    it = iter(loader)
    kept = [next(it) for _ in range(3)]  # more batches held than a worker has in flight
    view = kept[0][0][1:3]  # a view: keeps its slot alive after the batch itself is dropped
    del kept[0]
    gc.collect()
    rest = list(it)  # the ring grows instead of reusing the slot of the view
    np.testing.assert_array_equal(view, reference[0][0][1:3])
    assert_same_batches(kept + rest, reference[1:])
    assert shm_count() == before  # the epoch ended: segments are unlinked, still mapped for `kept`
    kept[1][0][...] = 0  # the arrays are the caller's to change
    del kept, rest, view
    gc.collect()


class Interrupted(Exception):
    pass


def _interrupt(signum: int, frame: Any) -> None:
    raise Interrupted


@needs_dev_shm
@needs_fork
def test_interrupt_while_waiting_cleans_up() -> None:
    before = shm_count()
    previous = signal.signal(signal.SIGALRM, _interrupt)
    try:
        loader = DataLoader(
            SlowDataset(_items(8)), 2, num_workers=2, multiprocessing_context="fork"
        )
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(Interrupted):
            collect(loader)  # blocked waiting for a slow worker when the signal lands
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert shm_count() == before
    assert mp.active_children() == []


# -- bad arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"batch_size": 0}, ValueError, r"DataLoader: batch_size must be >= 1, got 0"),
        ({"batch_size": 2.5}, TypeError, r"batch_size must be an integer, got float"),
        ({"num_workers": -1}, ValueError, r"num_workers must be >= 0, got -1"),
        ({"prefetch": 0}, ValueError, r"prefetch_factor must be >= 1, got 0"),
        ({"prefetch_factor": 0}, ValueError, r"prefetch_factor must be >= 1, got 0"),
        ({"prefetch_factor": 2, "prefetch": 2}, ValueError, r"prefetch_factor and prefetch are"),
        ({"seed": -3}, ValueError, r"seed\) must be >= 0, got -3"),
        ({"generator": 1, "seed": 1}, ValueError, r"generator and seed are one option"),
        ({"generator": "x"}, TypeError, r"generator \(seed\) must be an integer, got str"),
        ({"collate_fn": 3}, TypeError, r"collate_fn must be callable or None, got int"),
        ({"transform": "crop"}, TypeError, r"transform must be callable or None, got str"),
        ({"multiprocessing_context": "threads"}, ValueError, r"must be one of .* got 'threads'"),
        ({"multiprocessing_context": 4}, TypeError, r"start-method name or a multiprocessing"),
        ({"timeout": -1}, ValueError, r"timeout must be None or a number >= 0, got -1"),
        ({"pin_memory": 1}, TypeError, r"pin_memory and persistent_workers must be bools"),
        ({"sampler": [0, 1], "shuffle": True}, ValueError, r"sampler is mutually exclusive"),
        ({"sampler": 5}, TypeError, r"sampler must be an iterable of indices, got int"),
        ({"batch_sampler": [[0]]}, ValueError, r"batch_sampler is mutually exclusive with"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    args: dict[str, Any] = {"batch_size": 4, **kwargs}
    with pytest.raises(error, match=match):
        DataLoader(cifar_like(8), **args)


def test_bad_dataset_and_epoch() -> None:
    with pytest.raises(TypeError, match=r"dataset must define __len__ and __getitem__, got int"):
        DataLoader(3, 4)
    loader = DataLoader(cifar_like(8), 4)
    with pytest.raises(ValueError, match=r"epoch must be >= 0, got -1"):
        loader.set_epoch(-1)


def test_transform_needs_an_array_input() -> None:
    ds = ListDataset([{"x": np.zeros(3)}] * 4)
    with pytest.raises(TypeError, match=r"transform applies to the batch's inputs.*got dict"):
        collect(DataLoader(ds, 2, transform=PIPELINE))


@needs_fork
def test_spawn_with_unpicklable_collate_says_what_to_do() -> None:
    loader = DataLoader(
        cifar_like(8),
        4,
        num_workers=1,
        multiprocessing_context="spawn",
        collate_fn=lambda items: items,
    )
    with pytest.raises(
        RuntimeError,
        match=r"could not start worker 0 with the 'spawn' start "
        r"method.*picklable",
    ):
        collect(loader)
