"""DistributedSampler: shards cover the epoch, interleave to the one-process order, reshuffle
per epoch, and batch up to the one-process batches through DataLoader."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import netcl.data._distributed_sampler as module
from netcl.data import ArrayDataset, DataLoader, DistributedSampler, RandomSampler


def shards(n: int, world: int, **kw: object) -> list[list[int]]:
    return [list(DistributedSampler(n, world, r, **kw)) for r in range(world)]  # type: ignore[arg-type]


def interleave(parts: list[list[int]]) -> list[int]:
    return [i for group in zip(*parts) for i in group]


def test_docstring_examples() -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("n", [1, 7, 10, 257])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_shards_interleave_to_one_process_order(n: int, world: int) -> None:
    parts = shards(n, world, seed=11)
    assert len({len(p) for p in parts}) == 1 and len(parts[0]) == -(-n // world)
    one = list(RandomSampler(range(n), generator=11))
    merged = interleave(parts)
    assert merged == (one * world)[: len(merged)]  # padding repeats the head


@pytest.mark.parametrize("n", [7, 10, 257])
@pytest.mark.parametrize("world", [2, 3, 4])
def test_drop_last_disjoint_and_cut(n: int, world: int) -> None:
    parts = shards(n, world, seed=3, drop_last=True)
    flat = [i for p in parts for i in p]
    assert len(flat) == (n // world) * world == len(set(flat))
    assert interleave(parts) == list(RandomSampler(range(n), generator=3))[: len(flat)]


def test_without_shuffle_is_strided_range() -> None:
    assert shards(9, 4, shuffle=False) == [[0, 4, 8], [1, 5, 0], [2, 6, 1], [3, 7, 2]]


def test_epochs_reshuffle_and_set_epoch_replays() -> None:
    s = DistributedSampler(range(50), 2, 1, seed=4)
    first, second = list(s), list(s)
    assert first != second
    s.set_epoch(0)
    assert list(s) == first
    s.set_epoch(1)
    assert list(s) == second
    assert len(s) == 25 and s.total_size == 50


def test_loader_batches_union_is_global_batch() -> None:
    n, world, global_batch = 103, 4, 20
    data = ArrayDataset(np.arange(n, dtype=np.float32))
    one = DataLoader(data, batch_size=global_batch, shuffle=True, seed=9)
    per_rank = [DataLoader(data, batch_size=global_batch // world,
                           sampler=DistributedSampler(data, world, r, seed=9))
                for r in range(world)]
    for _ in range(2):  # two epochs: the loaders pass their epoch on to the samplers
        ranks = [[np.asarray(b[0] if isinstance(b, (tuple, list)) else b) for b in loader]
                 for loader in per_rank]
        full = [np.asarray(b[0] if isinstance(b, (tuple, list)) else b) for b in one]
        for k, batch in enumerate(full[: n // global_batch]):
            union = np.concatenate([r[k] for r in ranks])
            assert sorted(union.tolist()) == sorted(batch.tolist())


@pytest.mark.parametrize(("args", "error"), [
    ((10, 0, 0), ValueError),
    ((10, 2, 2), ValueError),
    ((10, 2, -1), ValueError),
    ((10, 2.0, 0), TypeError),
    ((object(), 2, 0), TypeError),
])
def test_bad_arguments(args: tuple[object, object, object], error: type[Exception]) -> None:
    with pytest.raises(error, match="DistributedSampler"):
        DistributedSampler(*args)  # type: ignore[arg-type]


def test_bad_seed() -> None:
    with pytest.raises(ValueError, match="seed"):
        DistributedSampler(10, 2, 0, seed=-1)
