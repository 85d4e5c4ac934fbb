"""Fixtures of the netcl package's tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest


@pytest.fixture
def digits_subset(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """``use(n)``: ``netcl train`` (and the digits job) sees only the first ``n`` digits (80% to
    train on), so a CLI test trains in a second."""

    def use(n: int) -> None:
        from netcl.data import ArrayDataset, DigitsDataset

        full = DigitsDataset()
        monkeypatch.setattr("netcl.trainer._digits.DigitsDataset",
                            lambda: ArrayDataset(full.images[:n], full.labels[:n]))

    return use
