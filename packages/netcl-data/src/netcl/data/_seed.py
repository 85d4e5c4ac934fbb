"""``manual_seed``: make everything netcl.data draws without an explicit seed repeatable."""

from __future__ import annotations

import numbers

from . import transforms
from ._sampler import seed_fresh_seeds


def manual_seed(seed: int) -> None:
    """Seed what netcl.data draws when no seed is given, as ``torch.manual_seed`` does for
    PyTorch's loaders: the seed of a :class:`~netcl.data.DataLoader` or random sampler built
    without ``generator=`` (so its shuffle order repeats from run to run), and the generator of
    :mod:`netcl.data.transforms` outside a loader. ``netcl.manual_seed`` calls it.

    Raises:
        TypeError: ``seed`` is not an integer >= 0.

    Examples:
        >>> import numpy as np
        >>> from netcl.data import ArrayDataset, DataLoader, manual_seed
        >>> ds = ArrayDataset(np.arange(6))
        >>> manual_seed(0); a = [b[0].tolist() for b in DataLoader(ds, 3, shuffle=True)]
        >>> manual_seed(0); b = [b[0].tolist() for b in DataLoader(ds, 3, shuffle=True)]
        >>> a == b
        True
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise TypeError(f"manual_seed: seed must be an integer >= 0, got {seed!r}")
    seed_fresh_seeds(int(seed))
    transforms.manual_seed(int(seed))
