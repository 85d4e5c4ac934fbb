"""``DistributedSampler``: each of ``num_replicas`` processes its own shard of every epoch.

PyTorch's ``torch.utils.data.distributed.DistributedSampler`` semantics: the epoch's order (a
permutation drawn from ``(seed, epoch)``, or ``0..n-1`` without ``shuffle``) is padded by
repeating its head to a multiple of ``num_replicas`` (or cut down to one with ``drop_last``),
and rank ``r`` takes the positions ``r, r + R, r + 2R, ...``. Read rank-interleaved (rank 0's
first index, rank 1's first, ...), the shards give back the one-process order; so with a
per-rank batch of ``B / R``, the union of the ranks' k-th batches is the one-process k-th batch
of size ``B``.

# NOTE [ One order for one process and for R ]
The permutation is drawn from the stream :class:`~netcl.data.RandomSampler` draws pass
``epoch`` from (``order_rng(seed, epoch)``), so a data-parallel run sees exactly the batches a
one-process ``DataLoader(shuffle=True, seed=seed)`` sees, split across the ranks (when
``len(dataset)`` is a multiple of ``R``; otherwise the padding repeats a few indices).
"""

from __future__ import annotations

import numbers
from collections.abc import Sized

import numpy as np

from ._samplers import IndexArray, Sampler

__all__ = ["DistributedSampler"]


def _check_int(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"DistributedSampler: {name} must be an integer, got "
                        f"{type(value).__name__}")
    if value < low:
        raise ValueError(f"DistributedSampler: {name} must be >= {low}, got {value}")
    return int(value)


class DistributedSampler(Sampler):
    """Rank ``rank``'s shard of each epoch's order, out of ``num_replicas`` shards.

    Args:
        dataset: the dataset (only its ``len`` is used) or its length.
        num_replicas: the number of processes (the world size).
        rank: this process's rank, ``0 <= rank < num_replicas``.
        shuffle: draw a new permutation each epoch (else ``0..n-1``).
        seed: the seed of the permutations; the same on every rank.
        drop_last: cut the order to a multiple of ``num_replicas`` instead of padding it.

    Each ``iter`` draws the next epoch (as the other samplers); :meth:`set_epoch` picks it,
    and the :class:`~netcl.data.DataLoader` calls it before each epoch.

    Raises:
        TypeError: a non-integer ``num_replicas``, ``rank`` or ``seed``, or a dataset
            without ``len``.
        ValueError: ``rank`` out of range, ``num_replicas < 1`` or ``seed < 0``.

    Examples:
        >>> shards = [list(DistributedSampler(10, 3, r, shuffle=False)) for r in range(3)]
        >>> shards
        [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
        >>> [list(DistributedSampler(10, 3, r, shuffle=False, drop_last=True))
        ...  for r in range(3)]
        [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
        >>> from netcl.data import RandomSampler
        >>> one = list(RandomSampler(range(8), generator=5))
        >>> two = [list(DistributedSampler(8, 2, r, seed=5)) for r in range(2)]
        >>> [i for pair in zip(*two) for i in pair] == one
        True
    """

    def __init__(self, dataset: Sized | int, num_replicas: int, rank: int,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if isinstance(dataset, numbers.Integral) and not isinstance(dataset, bool):
            self.dataset_len = _check_int("dataset length", dataset, 0)
        elif isinstance(dataset, Sized):
            self.dataset_len = len(dataset)
        else:
            raise TypeError("DistributedSampler: dataset must have a len() or be a length, got "
                            f"{type(dataset).__name__}")
        self.num_replicas = _check_int("num_replicas", num_replicas, 1)
        self.rank = _check_int("rank", rank, 0)
        if self.rank >= self.num_replicas:
            raise ValueError(f"DistributedSampler: rank must be in [0, {self.num_replicas}), "
                             f"got {rank}")
        if not isinstance(shuffle, bool) or not isinstance(drop_last, bool):
            raise TypeError(f"DistributedSampler: shuffle and drop_last must be bools, got "
                            f"{shuffle!r} and {drop_last!r}")
        self.shuffle, self.drop_last = shuffle, drop_last
        self._init_random("DistributedSampler", _check_int("seed", seed, 0))

    @property
    def num_samples(self) -> int:
        """Indices per rank and epoch."""
        n, r = self.dataset_len, self.num_replicas
        return n // r if self.drop_last else -(-n // r)

    @property
    def total_size(self) -> int:
        """Indices per epoch over all ranks (``num_samples * num_replicas``)."""
        return self.num_samples * self.num_replicas

    def global_order(self) -> IndexArray:
        """This epoch's padded (or cut) order over all ranks; advances the epoch like ``iter``."""
        n, total = self.dataset_len, self.total_size
        rng = self._rng()
        order = (rng.permutation(n).astype(np.int64) if self.shuffle
                 else np.arange(n, dtype=np.int64))
        if total <= n:
            return order[:total]
        if n == 0:
            return np.zeros(0, np.int64)
        reps = -(-(total - n) // n)
        return np.concatenate([order, *([order] * reps)])[:total]

    def order(self) -> IndexArray:
        return self.global_order()[self.rank::self.num_replicas]

    def __len__(self) -> int:
        return self.num_samples
