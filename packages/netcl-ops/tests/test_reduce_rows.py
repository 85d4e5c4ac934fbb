"""Row reductions (NOTE [ Row reductions ] in netcl.ops._reduce): ``red_vec``'s scalar head,
4-vector body and scalar tail on odd lengths and unaligned offsets, rows split over several
work-groups, var's squared deviations, integer dtypes, and bitwise-equal repeated runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.tensor import Tensor
from netcl.core.testing import supports_dtype
from netcl.ops.testing import check_op

ROW_VARIANTS = [KernelVariant.REDUCTION_PARALLEL, KernelVariant.REDUCTION_WORKGROUP]
FLOATS = ["float32", "float16", "float64"]
LENGTHS = [1, 7, 33, 257, 4095, 4097, 70001]
Kind = tuple[str, Callable[..., Any], Callable[..., Any]]
KINDS: list[Kind] = [("sum", ops.sum, np.sum), ("mean", ops.mean, np.mean),
                     ("max", ops.max, np.max), ("min", ops.min, np.min)]


def _x(shape: tuple[int, ...]) -> Any:
    return np.random.default_rng(sum(shape)).uniform(-2.0, 3.0, size=shape)


def _need(dev: DeviceHandle, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", ROW_VARIANTS, ids=lambda v: v.name)
def test_whole_tensor_odd_lengths(dev: DeviceHandle, variant: KernelVariant, dtype: str) -> None:
    _need(dev, dtype)
    with force_variant(variant):
        for n in LENGTHS:
            for _, op, ref in KINDS:
                check_op(dev, op, ref, (_x((n,)),), dtype=dtype, scale=10.0)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", ROW_VARIANTS, ids=lambda v: v.name)
def test_last_axes(dev: DeviceHandle, variant: KernelVariant, dtype: str) -> None:
    """Rows of odd lengths start at every residue mod 4; (7, 33, 5) reduces two axes."""
    _need(dev, dtype)
    cases = [((3, 4095), 1), ((5, 1023), -1), ((7, 33, 5), (1, 2)), ((9, 1), 1), ((2, 70001), 1)]
    with force_variant(variant):
        for shape, axis in cases:
            for _, op, ref in KINDS:
                check_op(dev, op, ref, (_x(shape),), {"axis": axis}, dtype=dtype, scale=10.0)
            if shape[-1] == 1:
                continue  # var of one value per row is 0/0
            check_op(dev, lambda t, a=axis: ops.var(t, axis=a),
                     lambda a, ax=axis: np.var(a, axis=ax, ddof=1), (_x(shape) + 100.0,),
                     dtype=dtype, scale=10.0)


@pytest.mark.parametrize("variant", ROW_VARIANTS, ids=lambda v: v.name)
def test_unaligned_views(dev: DeviceHandle, variant: KernelVariant) -> None:
    """Views starting 1, 2 and 3 elements into the buffer: the head covers the misalignment."""
    host = _x((8195,)).astype(np.float32)
    x = Tensor.from_host(dev.queue, host)
    with force_variant(variant):
        for start in (1, 2, 3, 5):
            view = ops.getitem(x, (slice(start, None),))
            want = host[start:].astype(np.float64)
            np.testing.assert_allclose(ops.sum(view).to_host(), want.sum(), rtol=1e-5)
            np.testing.assert_allclose(ops.max(view).to_host(), want.max())
            rows = ops.reshape(ops.getitem(x, (slice(start, start + 8190),)), (10, 819))
            np.testing.assert_allclose(ops.sum(rows, axis=1).to_host(),
                                       want[:8190].reshape(10, 819).sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("variant", ROW_VARIANTS, ids=lambda v: v.name)
def test_integer_rows(dev: DeviceHandle, variant: KernelVariant) -> None:
    ints = np.random.default_rng(3).integers(-1000, 1000, size=(3, 5001)).astype(np.int32)
    small = np.random.default_rng(4).integers(0, 255, size=(4, 1027)).astype(np.uint8)
    with force_variant(variant):
        check_op(dev, ops.sum, np.sum, (ints,), {"axis": 1}, out_dtype="int64")
        check_op(dev, ops.sum, np.sum, (ints,), out_dtype="int64")
        check_op(dev, ops.max, np.max, (small,), {"axis": 1})
        check_op(dev, ops.min, np.min, (small,))


def test_nan_in_split_rows(dev: DeviceHandle) -> None:
    host = _x((2, 20001))
    host[0, 17001] = np.nan
    x = Tensor.from_host(dev.queue, host)
    with force_variant(KernelVariant.REDUCTION_WORKGROUP):
        for op in (ops.max, ops.min, ops.sum):
            got = op(x, axis=1).to_host()
            assert np.isnan(got[0]) and not np.isnan(got[1])


@pytest.mark.parametrize("variant", [*ROW_VARIANTS, None], ids=str)
def test_bitwise_reproducible(dev: DeviceHandle, variant: KernelVariant | None) -> None:
    """The same input twice gives the same bits (fixed split; a split row's last group merges
    the partials in index order whichever group finishes last)."""
    x = Tensor.from_host(dev.queue, _x((300_007,)).astype(np.float32))
    rows = Tensor.from_host(dev.queue, _x((33, 4097)).astype(np.float32))

    def run() -> list[Any]:
        return [ops.sum(x).to_host(), ops.mean(x).to_host(), ops.sum(rows, axis=1).to_host(),
                ops.var(rows, axis=1).to_host()]

    if variant is None:
        first, second = run(), run()
    else:
        with force_variant(variant):
            first, second = run(), run()
    for a, b in zip(first, second, strict=True):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_split_rows_reset_their_tickets(dev: DeviceHandle) -> None:
    """A split row's counter returns to 0 after every launch: many launches of differently
    split shapes in a row (1, 2 and 5 rows; sum, max, var) keep their results."""
    shapes = [(200_003,), (2, 90_001), (5, 40_000)]
    hosts = [_x(s).astype(np.float32) for s in shapes]
    xs = [Tensor.from_host(dev.queue, h) for h in hosts]
    with force_variant(KernelVariant.REDUCTION_WORKGROUP):
        for _ in range(6):
            for h, x in zip(hosts, xs, strict=True):
                axis = -1 if h.ndim > 1 else None
                np.testing.assert_allclose(ops.sum(x, axis=axis).to_host(),
                                           h.astype(np.float64).sum(axis=axis), rtol=1e-5)
                np.testing.assert_allclose(ops.max(x, axis=axis).to_host(), h.max(axis=axis))
                if h.ndim > 1:
                    np.testing.assert_allclose(ops.var(x, axis=-1).to_host(),
                                               h.astype(np.float64).var(axis=-1, ddof=1),
                                               rtol=1e-4)


@pytest.mark.parametrize("variant", ROW_VARIANTS, ids=lambda v: v.name)
def test_columns_split_over_work_groups(dev: DeviceHandle, variant: KernelVariant) -> None:
    """Column reductions (inner > 1) split R into enough chunks to fill the device in both
    work-group variants: the last group of each column tile merges the partials (argmax: a
    second stage); the same bits on a second run; var and float16 through the same path."""
    with force_variant(variant):
        for shape, axis in (((4097, 65), 0), ((3, 2049, 40), 1), ((1000, 7), 0)):
            for _, op, ref in KINDS:
                check_op(dev, op, ref, (_x(shape),), {"axis": axis}, scale=10.0)
            check_op(dev, lambda t, a=axis: ops.var(t, axis=a),
                     lambda a, ax=axis: np.var(a, axis=ax, ddof=1), (_x(shape) + 100.0,),
                     scale=10.0)
            check_op(dev, ops.sum, np.sum, (_x(shape),), {"axis": axis}, dtype="float16",
                     scale=10.0)
            check_op(dev, ops.argmax, lambda a, axis: np.argmax(a, axis=axis),
                     (np.round(_x(shape)),), {"axis": axis})
        x = Tensor.from_host(dev.queue, _x((4097, 65)).astype(np.float32))
        assert ops.sum(x, axis=0).to_host().tobytes() == ops.sum(x, axis=0).to_host().tobytes()
