"""Batch order and per-batch random generators, derived from (seed, epoch) only.

# NOTE [ Determinism across worker counts ]
Everything random in a batch comes from a generator seeded by ``(seed, epoch, batch index)``
(``batch_rng``), and the order of samples from ``(seed, epoch)`` (``order_rng``, which the
samplers of ``_samplers`` draw from). No state
lives in a worker, so which process builds a batch, and in what order batches finish, cannot
change what the batch holds.
"""

from __future__ import annotations

import numpy as np

# Distinct spawn-key tags keep the shuffle stream and the per-batch streams independent.
_SHUFFLE_TAG = 0
_BATCH_TAG = 1
_SAMPLE_TAG = 2


# Set by :func:`seed_fresh_seeds`: then the seeds drawn for loaders and samplers built without
# one repeat from run to run (netcl.manual_seed calls it through netcl.data.manual_seed).
_seeds: np.random.Generator | None = None


def seed_fresh_seeds(seed: int) -> None:
    """Make every later :func:`fresh_seed` come from a generator seeded by ``seed``."""
    global _seeds
    _seeds = np.random.default_rng(seed)


def fresh_seed() -> int:
    """Return a seed for a caller that gives none: from the OS entropy pool, or from the
    generator :func:`seed_fresh_seeds` seeded."""
    if _seeds is not None:
        return int(_seeds.integers(0, 1 << 63))
    return int(np.random.SeedSequence().entropy) & ((1 << 63) - 1)  # type: ignore[arg-type]


def order_rng(seed: int, epoch: int) -> np.random.Generator:
    """Return the generator that the samplers draw epoch ``epoch``'s order from."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(epoch, _SHUFFLE_TAG)))


def batch_rng(seed: int, epoch: int, batch_index: int) -> np.random.Generator:
    """Return the generator that a batch's transform draws from."""
    return np.random.default_rng(
        np.random.SeedSequence(seed, spawn_key=(epoch, _BATCH_TAG, batch_index))
    )


def sample_rng(seed: int, epoch: int, batch_index: int) -> np.random.Generator:
    """Return the generator that a batch's per-sample transforms draw from, in item order."""
    return np.random.default_rng(
        np.random.SeedSequence(seed, spawn_key=(epoch, _SAMPLE_TAG, batch_index))
    )
