"""Shape arithmetic shared by every kernel family: broadcasting, strides, merged dimensions.

Pure functions of tuples of ints (no device, no Tensor), so ops, the autograd JIT and the
Tensor class compute shapes and strides one way. Strides count *elements*, row-major.

# NOTE [ Merged iteration dimensions ]
# A strided ("nd") kernel walks an iteration shape and reads operand ``k`` at
# ``o_k + sum_j c_j * s_k_j``: shapes and strides are scalar kernel arguments, so one kernel
# serves every shape with the same number of dims. :func:`collapse` drops size-1 dims and
# merges neighbours that are contiguous for *every* stride set, so most layouts need one or
# two dims and a kernel is generated per merged rank, not per tensor rank. At most
# :data:`MAX_DIMS` dims may remain (each costs three kernel arguments per operand); it is 8,
# the limit the autograd JIT had (the eager elementwise kernels had 6: they now take 8 too).

Examples:
    >>> broadcast_shapes("add", (3, 1), (4,))
    (3, 4)
    >>> contiguous_strides((2, 3, 4))
    (12, 4, 1)
    >>> collapse((2, 3, 4), [contiguous_strides((2, 3, 4))])
    ((24,), [(1,)])
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "MAX_DIMS",
    "BroadcastError",
    "DimensionLimitError",
    "broadcast_shapes",
    "broadcast_strides",
    "check_merged_dims",
    "collapse",
    "contiguous_strides",
]

MAX_DIMS = 8
"""The most dimensions a strided kernel iterates over, after :func:`collapse`."""


class BroadcastError(ValueError):
    """Shapes that NumPy broadcasting rejects; names the op, the shapes and the dimension.

    Attributes:
        op: the operation that broadcast.
        shapes: the shapes given.
        dim: the failing dimension, counted from the right (``-1`` is the last).
    """

    def __init__(self, op: str, shapes: Sequence[tuple[int, ...]], dim: int, first: int,
                 second: int) -> None:
        self.op = op
        self.shapes = tuple(shapes)
        self.dim = dim
        listed = " and ".join(str(s) for s in shapes)
        super().__init__(
            f"{op}: shapes {listed} cannot be broadcast together: dimension {dim} is "
            f"{first} in one and {second} in another"
        )


class DimensionLimitError(ValueError):
    """An iteration shape that keeps more than :data:`MAX_DIMS` dims after merging.

    Attributes:
        op: the operation.
        shape: the iteration shape.
        kept: how many dims remained after :func:`collapse`.
    """

    def __init__(self, op: str, shape: Sequence[int], kept: int, what: str) -> None:
        self.op = op
        self.shape = tuple(shape)
        self.kept = kept
        super().__init__(
            f"{op}: {len(self.shape)}-d iteration shape {self.shape} keeps {kept} dims after "
            f"merging contiguous ones; {what} take at most {MAX_DIMS}"
        )


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy broadcasting of ``shapes``.

    Raises:
        BroadcastError: (a ``ValueError``) two shapes differ in a dimension where neither is 1.

    Examples:
        >>> broadcast_shapes("add", (3, 1), (4,)), broadcast_shapes("neg", ())
        ((3, 4), ())
        >>> try:
        ...     broadcast_shapes("add", (2, 3), (4,))
        ... except BroadcastError as err:
        ...     print(err.dim, str(err)[:59])
        -1 add: shapes (2, 3) and (4,) cannot be broadcast together: d
    """
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for k, d in enumerate(shape, start=ndim - len(shape)):
            if d != out[k] and out[k] != 1 and d != 1:
                raise BroadcastError(op, shapes, k - ndim, out[k], d)
            if d != 1:
                out[k] = d
    return tuple(out)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides of ``shape`` (a 0-size dim counts as 1).

    Examples:
        >>> contiguous_strides((2, 3)), contiguous_strides(()), contiguous_strides((2, 0, 3))
        ((3, 1), (), (3, 3, 1))
    """
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * max(shape[k + 1], 1)
    return tuple(strides)


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides reading a contiguous ``shape`` broadcast to ``out_shape`` (0: repeat).

    Examples:
        >>> broadcast_strides((3, 1), (2, 3, 4))
        (0, 1, 0)
    """
    own = contiguous_strides(shape)
    lead = len(out_shape) - len(shape)
    return (0,) * lead + tuple(0 if d == 1 else s for d, s in zip(shape, own))


def collapse(
    shape: Sequence[int], strides: Sequence[Sequence[int]]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Drop size-1 dims of ``shape`` and merge neighbours contiguous for every stride set.

    Returns the merged dims and each stride set over them; a shape of one element gives
    ``(1,)`` with stride 1 for every set (any stride reads it). See NOTE [ Merged iteration
    dimensions ].

    Examples:
        >>> collapse((4, 1, 8), [(8, 8, 1), (0, 0, 1)])
        ((4, 8), [(8, 1), (0, 1)])
        >>> collapse((1, 1), [(1, 1)])
        ((1,), [(1,)])
    """
    dims: list[int] = []
    merged: list[list[int]] = [[] for _ in strides]
    for k, d in enumerate(shape):
        if d == 1:
            continue
        if dims and all(m[-1] == s[k] * d for m, s in zip(merged, strides)):
            dims[-1] *= d
            for m, s in zip(merged, strides):
                m[-1] = s[k]
        else:
            dims.append(d)
            for m, s in zip(merged, strides):
                m.append(s[k])
    if not dims:
        return (1,), [(1,) for _ in strides]
    return tuple(dims), [tuple(m) for m in merged]


def check_merged_dims(op: str, shape: Sequence[int], dims: Sequence[int],
                      what: str = "OpenCL kernels") -> None:
    """Raise unless the merged ``dims`` of iteration ``shape`` fit :data:`MAX_DIMS`.

    Raises:
        DimensionLimitError: (a ``ValueError``) more than ``MAX_DIMS`` dims remain; the message
            names ``op``, the shape and ``what`` has the limit.

    Examples:
        >>> try:
        ...     check_merged_dims("add", (2, 3) * 5, (2, 3) * 5)
        ... except DimensionLimitError as err:
        ...     print(err.kept, str(err)[-29:])
        10 OpenCL kernels take at most 8
    """
    if len(dims) > MAX_DIMS:
        raise DimensionLimitError(op, shape, len(dims), what)
