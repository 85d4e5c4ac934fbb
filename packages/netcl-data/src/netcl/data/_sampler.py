"""Batch order and per-batch random generators, derived from (seed, epoch) only.

# NOTE [ Determinism across worker counts ]
Everything random in a batch comes from a generator seeded by ``(seed, epoch, batch index)``
(``batch_rng``), and the order of samples from ``(seed, epoch)`` (``batch_indices``). No state
lives in a worker, so which process builds a batch, and in what order batches finish, cannot
change what the batch holds.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

# Distinct spawn-key tags keep the shuffle stream and the per-batch streams independent.
_SHUFFLE_TAG = 0
_BATCH_TAG = 1


def fresh_seed() -> int:
    """Return a seed drawn from the OS entropy pool (used when the caller gives none)."""
    return int(np.random.SeedSequence().entropy) & ((1 << 63) - 1)  # type: ignore[arg-type]


def batch_indices(
    n: int, batch_size: int, *, shuffle: bool, drop_last: bool, seed: int, epoch: int
) -> list[npt.NDArray[np.int64]]:
    """Split ``range(n)`` (shuffled by ``(seed, epoch)`` if asked) into batches of indices."""
    if shuffle:
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(epoch, _SHUFFLE_TAG)))
        order = rng.permutation(n).astype(np.int64)
    else:
        order = np.arange(n, dtype=np.int64)
    stop = (n // batch_size) * batch_size if drop_last else n
    return [order[i : i + batch_size] for i in range(0, stop, batch_size)]


def batch_rng(seed: int, epoch: int, batch_index: int) -> np.random.Generator:
    """Return the generator that a batch's transform draws from."""
    return np.random.default_rng(
        np.random.SeedSequence(seed, spawn_key=(epoch, _BATCH_TAG, batch_index))
    )
