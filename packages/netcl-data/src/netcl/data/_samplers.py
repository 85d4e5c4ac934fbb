"""Samplers with PyTorch's names and semantics (``torch.utils.data.*Sampler``).

A sampler is an iterable of dataset indices (a batch sampler: of lists of indices) with a
``len``. The random ones draw from a NumPy generator instead of a ``torch.Generator``:

* ``generator=None`` or an int: each pass is drawn from a stream seeded by ``(seed, epoch)``,
  the epoch counting the passes (or set by :meth:`RandomSampler.set_epoch`, which the
  :class:`~netcl.data.DataLoader` calls before each epoch), so a run resumed at epoch ``e``
  draws what the uninterrupted run drew (NOTE [ Determinism across worker counts ] in
  ``_sampler``). ``None`` picks the seed from the OS once.
* a :class:`numpy.random.Generator`: each pass draws from it, advancing it (as PyTorch's
  samplers advance a ``torch.Generator``); ``set_epoch`` then changes nothing.

The streams are NumPy's, so the orders differ from PyTorch's for the same seed; what each
sampler yields (a permutation, draws with replacement, weighted draws, batches) is PyTorch's.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any

import numpy as np
import numpy.typing as npt

from ._sampler import fresh_seed, order_rng

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]

IndexArray = npt.NDArray[np.int64]


def _check_positive(op: str, name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{op}: {name} must be an integer, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{op}: {name} must be a positive integer, got {value}")
    return int(value)


class Sampler:
    """Base class: ``__iter__`` yields indices; ``set_epoch`` picks the pass to draw."""

    _seed: int | None = None
    _generator: np.random.Generator | None = None
    _epoch = 0

    def _init_random(self, op: str, generator: int | np.random.Generator | None) -> None:
        if isinstance(generator, np.random.Generator):
            self._generator = generator
        elif generator is None:
            self._seed = fresh_seed()
        elif isinstance(generator, numbers.Integral) and not isinstance(generator, bool) \
                and generator >= 0:
            self._seed = int(generator)
        else:
            raise TypeError(f"{op}: generator must be None, a seed (int >= 0) or a "
                            f"numpy.random.Generator, got {generator!r}")
        self._epoch = 0

    @property
    def seed(self) -> int | None:
        """The seed of the per-epoch streams (None when drawing from a Generator)."""
        return self._seed

    def set_epoch(self, epoch: int) -> None:
        """Draw pass ``epoch`` next (no effect with a Generator or without randomness)."""
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) or epoch < 0:
            raise ValueError(f"{type(self).__name__}.set_epoch: epoch must be an integer >= 0, "
                             f"got {epoch!r}")
        self._epoch = int(epoch)

    def _rng(self) -> np.random.Generator:
        """The generator of this pass; advances the pass counter."""
        if self._generator is not None:
            return self._generator
        epoch, self._epoch = self._epoch, self._epoch + 1
        return order_rng(int(self._seed or 0), epoch)

    def order(self) -> IndexArray:
        """This pass's indices as one int64 array (what ``iter`` yields, one by one)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def __iter__(self) -> Iterator[int]:
        return iter(self.order().tolist())

    def __len__(self) -> int:
        raise NotImplementedError  # pragma: no cover - abstract


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``.

    Examples:
        >>> list(SequentialSampler(range(4)))
        [0, 1, 2, 3]
    """

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def order(self) -> IndexArray:
        return np.arange(len(self.data_source), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random permutation of the dataset's indices each pass, or ``num_samples`` draws.

    Without replacement and ``num_samples`` > ``len(data_source)``, whole permutations follow
    one another (the last one cut), as in PyTorch.

    Args:
        data_source: what is sampled (only its ``len`` is used).
        replacement: draw with replacement.
        num_samples: indices per pass (default ``len(data_source)``).
        generator: ``None``, a seed, or a :class:`numpy.random.Generator` (module docstring).

    Raises:
        TypeError: ``replacement`` is not a bool, or a bad ``generator``.
        ValueError: ``num_samples`` is not positive.

    Examples:
        >>> s = RandomSampler(range(5), generator=0)
        >>> a, b = list(s), list(s)  # pass 0, then pass 1
        >>> sorted(a), a != b
        ([0, 1, 2, 3, 4], True)
        >>> s.set_epoch(0); list(s) == a
        True
    """

    def __init__(self, data_source: Sized, replacement: bool = False,
                 num_samples: int | None = None,
                 generator: int | np.random.Generator | None = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError("RandomSampler: replacement must be a bool, got "
                            f"{type(replacement).__name__}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = (None if num_samples is None
                             else _check_positive("RandomSampler", "num_samples", num_samples))
        self._init_random("RandomSampler", generator)

    @property
    def num_samples(self) -> int:
        """Indices per pass."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def order(self) -> IndexArray:
        n, count = len(self.data_source), self.num_samples
        rng = self._rng()
        if n == 0:
            return np.zeros(0, np.int64)
        if self.replacement:
            return rng.integers(0, n, count, dtype=np.int64)
        rounds = [rng.permutation(n).astype(np.int64) for _ in range(-(-count // n))]
        return np.concatenate(rounds)[:count]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order each pass.

    Examples:
        >>> sorted(SubsetRandomSampler([3, 9, 4], generator=1))
        [3, 4, 9]
    """

    def __init__(self, indices: Sequence[int] | npt.ArrayLike,
                 generator: int | np.random.Generator | None = None) -> None:
        arr = np.asarray(indices)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise TypeError("SubsetRandomSampler: indices must be a 1-D sequence of integers, "
                            f"got shape {arr.shape} dtype {arr.dtype}")
        self.indices = arr.astype(np.int64)
        self._init_random("SubsetRandomSampler", generator)

    def order(self) -> IndexArray:
        return self.indices[self._rng().permutation(len(self.indices))]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``.

    Args:
        weights: one non-negative weight per index (need not sum to 1).
        num_samples: indices per pass.
        replacement: with replacement (default); without it, ``num_samples`` must not exceed
            the number of non-zero weights.
        generator: ``None``, a seed, or a :class:`numpy.random.Generator`.

    Raises:
        ValueError: weights not 1-D, negative or not finite, all zero, or too few for
            ``num_samples`` without replacement.

    Examples:
        >>> s = WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], num_samples=6, generator=0)
        >>> set(s) <= {1, 3}, len(s)
        (True, 6)
    """

    def __init__(self, weights: Sequence[float] | npt.ArrayLike, num_samples: int,
                 replacement: bool = True,
                 generator: int | np.random.Generator | None = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError("WeightedRandomSampler: replacement must be a bool, got "
                            f"{type(replacement).__name__}")
        w = np.asarray(weights, dtype=np.float64)
        if w.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights must be 1-D, got shape {w.shape}")
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
            raise ValueError("WeightedRandomSampler: weights must be finite, >= 0 and not all "
                             "zero")
        self.num_samples = _check_positive("WeightedRandomSampler", "num_samples", num_samples)
        if not replacement and self.num_samples > int(np.count_nonzero(w)):
            raise ValueError(f"WeightedRandomSampler: without replacement, num_samples "
                             f"({self.num_samples}) cannot exceed the {np.count_nonzero(w)} "
                             "non-zero weights")
        self.weights = w
        self.replacement = replacement
        self._p = w / w.sum()
        self._init_random("WeightedRandomSampler", generator)

    def order(self) -> IndexArray:
        rng = self._rng()
        return rng.choice(len(self._p), self.num_samples, replace=self.replacement,
                          p=self._p).astype(np.int64)

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``.

    Args:
        sampler: any iterable of indices (a :class:`Sampler`, a list, a range).
        batch_size: indices per batch.
        drop_last: drop the last batch when it is short.

    Examples:
        >>> list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=False))
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
        >>> list(BatchSampler(range(10), batch_size=3, drop_last=True))
        [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    """

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(drop_last, bool):
            raise TypeError("BatchSampler: drop_last must be a bool, got "
                            f"{type(drop_last).__name__}")
        self.sampler = sampler
        self.batch_size = _check_positive("BatchSampler", "batch_size", batch_size)
        self.drop_last = drop_last

    def set_epoch(self, epoch: int) -> None:
        """Passed on to ``sampler`` when it has ``set_epoch``."""
        super().set_epoch(epoch)
        inner = getattr(self.sampler, "set_epoch", None)
        if callable(inner):
            inner(epoch)

    def index_batches(self) -> list[IndexArray]:
        """This pass's batches as int64 arrays (vectorized for a :class:`Sampler`)."""
        sampler = self.sampler
        if isinstance(sampler, Sampler) and type(sampler).__iter__ is Sampler.__iter__ \
                and type(sampler).order is not Sampler.order:
            order = sampler.order()
        else:
            order = np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        n, size = len(order), self.batch_size
        stop = (n // size) * size if self.drop_last else n
        return [order[i: i + size] for i in range(0, stop, size)]

    def __iter__(self) -> Iterator[list[int]]:  # type: ignore[override]
        return iter([b.tolist() for b in self.index_batches()])

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def index_batches(batch_sampler: Any) -> list[IndexArray]:
    """A batch sampler's next pass as int64 arrays (any iterable of index lists works)."""
    if isinstance(batch_sampler, BatchSampler):
        return batch_sampler.index_batches()
    batches = []
    for k, batch in enumerate(batch_sampler):
        arr = np.asarray(batch)
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise TypeError(f"DataLoader: batch_sampler must yield lists of integer indices, "
                            f"batch {k} is {type(batch).__name__} of shape {arr.shape} "
                            f"dtype {arr.dtype}")
        batches.append(arr.astype(np.int64))
    return batches
