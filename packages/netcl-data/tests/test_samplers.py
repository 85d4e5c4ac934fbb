"""Samplers yield what PyTorch's do (same kinds of index streams, same lengths and errors),
their seeded streams are reproducible per epoch, and the DataLoader takes them through
``sampler=`` / ``batch_sampler=``, with ``generator``/``prefetch_factor`` and the old names."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from netcl.data import (
    ArrayDataset,
    BatchSampler,
    DataLoader,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
    manual_seed,
)
from netcl.data import transforms as T

torch_data = pytest.importorskip("torch.utils.data", reason="PyTorch compares the semantics")
torch = pytest.importorskip("torch")


def test_sequential_and_batch_sampler_equal_pytorch() -> None:
    for n in (1, 7, 33):
        assert list(SequentialSampler(range(n))) == list(torch_data.SequentialSampler(range(n)))
        for size in (1, 4, 7, 50):
            for drop in (False, True):
                ours = BatchSampler(SequentialSampler(range(n)), size, drop)
                theirs = torch_data.BatchSampler(torch_data.SequentialSampler(range(n)), size,
                                                 drop)
                assert list(ours) == list(theirs)
                assert len(ours) == len(theirs)
    ranged = BatchSampler(range(10), 3, False)  # any iterable of indices, as in PyTorch
    assert list(ranged) == list(torch_data.BatchSampler(range(10), 3, False))


@pytest.mark.parametrize(("n", "num_samples", "replacement"),
                         [(7, None, False), (7, 17, False), (5, 3, False), (33, 100, True)])
def test_random_sampler_draws_like_pytorch(n: int, num_samples: int | None,
                                           replacement: bool) -> None:
    ours = RandomSampler(range(n), replacement=replacement, num_samples=num_samples,
                         generator=3)
    theirs = torch_data.RandomSampler(range(n), replacement=replacement,
                                      num_samples=num_samples,
                                      generator=torch.Generator().manual_seed(3))
    a, b = list(ours), list(theirs)
    assert len(a) == len(b) == len(ours) == len(theirs)
    assert all(0 <= i < n for i in a)
    if not replacement:  # whole permutations, the last one cut (PyTorch's rule)
        for start in range(0, len(a), n):
            chunk = a[start:start + n]
            assert len(set(chunk)) == len(chunk)
        for draws in (a, b):  # so every index appears k or k + 1 times in both
            counts = Counter(draws)
            assert max(counts.values()) - min(counts.values()) <= 1
            assert len(counts) == min(n, len(draws))


def test_subset_and_weighted_samplers() -> None:
    idx = [3, 9, 4, 11, 27]
    got = list(SubsetRandomSampler(idx, generator=0))
    assert sorted(got) == sorted(torch_data.SubsetRandomSampler(idx)) == sorted(idx)
    weights = [0.0, 1.0, 0.0, 3.0, 0.5]
    draws = list(WeightedRandomSampler(weights, 40_000, generator=1))
    freq = np.bincount(draws, minlength=5) / len(draws)
    np.testing.assert_allclose(freq, np.array(weights) / sum(weights), atol=0.01)
    unique = list(WeightedRandomSampler(weights, 3, replacement=False, generator=2))
    assert sorted(unique) == [1, 3, 4]
    with pytest.raises(ValueError, match="cannot exceed the 3 non-zero weights"):
        WeightedRandomSampler(weights, 4, replacement=False)
    # torch.multinomial documents this rule (its CPU kernel then returns a zero-weight index)
    with pytest.raises(ValueError, match="finite, >= 0 and not all zero"):
        WeightedRandomSampler([0.0, -1.0], 2)
    with pytest.raises(ValueError, match="num_samples must be a positive integer"):
        WeightedRandomSampler([1.0], 0)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        torch_data.WeightedRandomSampler([1.0], 0)  # the same type of error
    with pytest.raises(TypeError, match="indices must be a 1-D sequence of integers"):
        SubsetRandomSampler([0.5, 1.5])


def test_seeded_streams_are_per_epoch_and_generators_advance() -> None:
    s = RandomSampler(range(33), generator=5)
    passes = [list(s) for _ in range(3)]
    assert passes[0] != passes[1] != passes[2]
    s.set_epoch(1)
    assert list(s) == passes[1]
    assert list(RandomSampler(range(33), generator=5)) == passes[0]
    g1, g2 = np.random.default_rng(8), np.random.default_rng(8)
    a, b = RandomSampler(range(33), generator=g1), RandomSampler(range(33), generator=g2)
    assert [list(a) for _ in range(2)] == [list(b) for _ in range(2)]
    with pytest.raises(TypeError, match="generator must be None, a seed"):
        RandomSampler(range(3), generator=-1)
    with pytest.raises(TypeError, match="replacement must be a bool"):
        RandomSampler(range(3), replacement=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="epoch must be an integer >= 0"):
        s.set_epoch(-2)


def _labels(loader: DataLoader) -> list[list[int]]:
    return [y.tolist() for _, y in loader]


def _flat(batches: list[list[int]]) -> list[int]:
    return [i for b in batches for i in b]


def _ds(n: int = 23) -> ArrayDataset:
    return ArrayDataset(np.arange(n, dtype=np.float32)[:, None], np.arange(n))


def test_loader_generator_shuffle_is_deterministic() -> None:
    a = DataLoader(_ds(), batch_size=5, shuffle=True, generator=11)
    b = DataLoader(_ds(), batch_size=5, shuffle=True, seed=11)  # the old name
    first = [_labels(a), _labels(a)]
    assert first == [_labels(b), _labels(b)]
    assert first[0] != first[1]
    assert sorted(_flat(first[0])) == list(range(23))
    c = DataLoader(_ds(), batch_size=5, shuffle=True, generator=np.random.default_rng(4))
    d = DataLoader(_ds(), batch_size=5, shuffle=True, generator=np.random.default_rng(4))
    assert c.seed == d.seed and _labels(c) == _labels(d)
    a.set_epoch(1)
    assert _labels(a) == first[1]  # resume draws what the uninterrupted run drew
    assert a.prefetch_factor == a.prefetch == 2 and a.generator == 11
    assert DataLoader(_ds(), prefetch=3).prefetch_factor == 3


@pytest.mark.parametrize("workers", [0, 2])
def test_loader_with_sampler_and_batch_sampler(workers: int) -> None:
    kw: dict[str, Any] = dict(num_workers=workers, timeout=30)
    sub = DataLoader(_ds(), batch_size=4, sampler=SubsetRandomSampler([2, 5, 7, 11, 13],
                                                                     generator=0), **kw)
    got = _labels(sub)
    assert [len(b) for b in got] == [4, 1] and sorted(_flat(got)) == [2, 5, 7, 11, 13]
    weighted = DataLoader(_ds(5), batch_size=3, drop_last=True, sampler=WeightedRandomSampler(
        [0, 0, 1, 0, 1], 7, generator=1), **kw)
    assert len(weighted) == 2 and set(_flat(_labels(weighted))) <= {2, 4}
    batches = BatchSampler(RandomSampler(range(23), generator=2), 6, drop_last=False)
    by_batch = DataLoader(_ds(), batch_sampler=batches, **kw)
    assert len(by_batch) == 4
    e0, e1 = _labels(by_batch), _labels(by_batch)
    assert e0 != e1 and sorted(_flat(e0)) == list(range(23))
    by_batch.set_epoch(0)  # passed on to the batch sampler and its sampler
    assert _labels(by_batch) == e0
    plain = DataLoader(_ds(), batch_sampler=[[0, 22], [5]], **kw)
    assert _labels(plain) == [[0, 22], [5]]
    with pytest.raises(TypeError, match="lists of integer indices"):
        list(DataLoader(_ds(), batch_sampler=[[0.5]]))
    with pytest.raises(TypeError, match="len\\(\\) needs a sampler"):
        len(DataLoader(_ds(), sampler=iter([1, 2])))


def test_loader_sampler_order_equals_pytorch_for_sequential_batches() -> None:
    ours = DataLoader(_ds(), batch_size=4, drop_last=True)
    theirs = torch_data.DataLoader(torch_data.TensorDataset(torch.arange(23)), batch_size=4,
                                   drop_last=True)
    assert _labels(ours) == [b[0].tolist() for b in theirs]


def test_manual_seed_repeats_what_is_drawn_without_a_seed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # put the module state back afterwards: other tests expect unseeded draws
    monkeypatch.setattr("netcl.data._sampler._seeds", None)
    monkeypatch.setattr("netcl.data.transforms._default_rng", np.random.default_rng())
    def draw() -> tuple[Any, ...]:
        loader = DataLoader(_ds(), batch_size=5, shuffle=True)
        sampler = RandomSampler(range(9))
        return loader.seed, _labels(loader), list(sampler), T.RandomCrop(2)(np.zeros((1, 3, 3)))

    manual_seed(123)
    first = draw()
    manual_seed(123)
    again = draw()
    assert first[:3] == again[:3]
    np.testing.assert_array_equal(first[3], again[3])
    assert draw()[0] != first[0]  # the stream goes on: the next loader gets another seed
    with pytest.raises(TypeError, match="seed must be an integer >= 0"):
        manual_seed(-1)
