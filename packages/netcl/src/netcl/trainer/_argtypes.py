"""argparse ``type=`` parsers the ``netcl`` command's options share (bad values: exit 2).

Examples:
    >>> int_at_least(1)("3"), positive_float("0.5"), probability("0.1")
    (3, 0.5, 0.1)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["int_at_least", "positive_float", "probability"]


def int_at_least(low: int) -> Callable[[str], int]:
    """A parser of integers ``>= low``."""
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text}")
        return value
    return parse


def positive_float(text: str) -> float:
    """A positive finite float."""
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return value


def probability(text: str) -> float:
    """A float in [0, 1)."""
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value
