"""netcl.core.shapes: broadcasting, strides, merged iteration dims (pure functions)."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest

from netcl.core import shapes
from netcl.core.shapes import (
    MAX_DIMS,
    BroadcastError,
    DimensionLimitError,
    broadcast_shapes,
    broadcast_strides,
    check_merged_dims,
    collapse,
    contiguous_strides,
)


def test_doctests() -> None:
    result = doctest.testmod(shapes)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("a,b", [((3, 1), (4,)), ((), (2, 3)), ((2, 1, 4), (5, 1)),
                                 ((1,), (0,)), ((0, 3), (1, 3))])
def test_broadcast_matches_numpy(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    assert broadcast_shapes("add", a, b) == np.broadcast_shapes(a, b)


def test_broadcast_error_is_a_typed_value_error() -> None:
    with pytest.raises(ValueError, match=r"mul: shapes \(2, 3\) and \(4,\) cannot be broadcast "
                                         r"together: dimension -1 is 3 in one and 4 in another"):
        broadcast_shapes("mul", (2, 3), (4,))
    with pytest.raises(BroadcastError) as info:
        broadcast_shapes("where", (5, 2), (1, 2), (3, 1))
    assert (info.value.op, info.value.dim, info.value.shapes) == (
        "where", -2, ((5, 2), (1, 2), (3, 1)))


def test_strides() -> None:
    for shape in [(2, 3, 4), (5,), (1, 7), ()]:
        want = tuple(s // 8 for s in np.empty(shape).strides)
        assert contiguous_strides(shape) == want
    assert broadcast_strides((4, 1), (2, 4, 3)) == (0, 1, 0)
    assert broadcast_strides((), (2, 3)) == (0, 0)


def _elements(shape: tuple[int, ...], strides: tuple[int, ...]) -> list[int]:
    return [sum(i * s for i, s in zip(idx, strides))
            for idx in itertools.product(*(range(d) for d in shape))]


@pytest.mark.parametrize("shape,operand", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (3, 1)),
                                           ((4, 1, 5), (1, 1, 5)), ((1, 1), (1, 1)),
                                           ((6, 2, 2), (6, 1, 2))])
def test_collapse_keeps_every_element_address(shape: tuple[int, ...],
                                              operand: tuple[int, ...]) -> None:
    sets = [contiguous_strides(shape), broadcast_strides(operand, shape)]
    dims, merged = collapse(shape, sets)
    assert np.prod(dims) == np.prod(shape)
    for before, after in zip(sets, merged):
        assert _elements(shape, before) == _elements(dims, after)


def test_collapse_merges_contiguous_dims() -> None:
    assert collapse((2, 3, 4), [contiguous_strides((2, 3, 4))]) == ((24,), [(1,)])
    assert collapse((4, 1, 8), [(8, 8, 1), (0, 0, 1)]) == ((4, 8), [(8, 1), (0, 1)])


def test_dimension_limit() -> None:
    check_merged_dims("add", (2,) * MAX_DIMS, (2,) * MAX_DIMS)
    with pytest.raises(DimensionLimitError, match=r"relu: 9-d iteration shape .* keeps 9 dims "
                                                  r"after merging contiguous ones; fused kernels"
                                                  r" take at most 8"):
        check_merged_dims("relu", (2,) * 9, (2,) * 9, what="fused kernels")
