"""``softmax_row`` (NOTE [ Softmax kernels ] in netcl.ops._softmax) on each of its paths: rows
held in registers (at most 32 elements per lane), longer rows through the online max and
rescaled sum, in scalars or 4-vectors; every path forced at several lane counts; odd
lengths, special values, offset views, float16/float64, and bitwise-equal repeated runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.tensor import Tensor
from netcl.core.testing import supports_dtype
from netcl.ops._softmax import row_plan, softmax_rows
from netcl.ops.testing import check_op

PAR = KernelVariant.REDUCTION_PARALLEL
FLOATS = ["float32", "float16", "float64"]
# beyond 32 per lane at the kernel's most lanes (1024 where it can) the online path:
# 4-vectors for 40000, scalars for 40001
LENGTHS = [1, 7, 33, 257, 1000, 4095, 4097, 9001, 40000, 40001]


def _x(shape: tuple[int, ...]) -> Any:
    return np.random.default_rng(sum(shape)).standard_normal(shape) * 4.0


def _softmax(a: Any) -> Any:
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _log_softmax(a: Any) -> Any:
    z = a - a.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("dtype", FLOATS)
def test_row_lengths(dev: DeviceHandle, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    with force_variant(PAR):
        for n in LENGTHS:
            x = _x((3, n))
            check_op(dev, ops.softmax, _softmax, (x,), dtype=dtype, scale=4.0)
            check_op(dev, ops.log_softmax, _log_softmax, (x,), dtype=dtype, scale=4.0)


def test_special_values_on_the_online_path(dev: DeviceHandle) -> None:
    """A NaN makes the row NaN; +inf too (inf - inf); -inf elements are 0; an all -inf row is
    NaN -- on every path (rows of 1000, 40000 and 40001 elements)."""
    for n in (1000, 40000, 40001):
        _special(dev, n)


def _special(dev: DeviceHandle, n: int) -> None:
    x = _x((5, n))
    x[0, n - 7] = np.nan
    x[1, 17] = np.inf
    x[2, ::3] = -np.inf
    x[3, :] = -np.inf
    with force_variant(PAR), np.errstate(all="ignore"):
        for op, ref in ((ops.softmax, _softmax), (ops.log_softmax, _log_softmax)):
            got = op(Tensor.from_host(dev.queue, x)).to_host()
            want = ref(x)
            assert np.isnan(got[0]).all() and np.isnan(got[1]).all() and np.isnan(got[3]).all()
            np.testing.assert_allclose(got[2], want[2], rtol=1e-4, atol=1e-7)
            np.testing.assert_allclose(got[4], want[4], rtol=1e-4, atol=1e-7)


def test_offset_view(dev: DeviceHandle) -> None:
    host = _x((6 * 4097 + 3,))
    x = Tensor.from_host(dev.queue, host.astype(np.float32))
    with force_variant(PAR):
        for rows, n in ((6, 4097), (24, 1024)):
            view = ops.reshape(ops.getitem(x, (slice(3, 3 + rows * n),)), (rows, n))
            want = _softmax(host[3:3 + rows * n].astype(np.float32).astype(np.float64)
                            .reshape(rows, n))
            np.testing.assert_allclose(ops.softmax(view).to_host(), want, rtol=1e-4, atol=1e-7)


def test_bitwise_reproducible(dev: DeviceHandle) -> None:
    for n in (1000, 9001):
        x = Tensor.from_host(dev.queue, _x((7, n)).astype(np.float32))
        for op in (ops.softmax, ops.log_softmax):
            assert op(x).to_host().tobytes() == op(x).to_host().tobytes()


@pytest.mark.parametrize("path", [0, 1, 2], ids=lambda p: ["registers", "online", "online4"][p])
def test_forced_paths_and_lanes(dev: DeviceHandle, path: int) -> None:
    if dev.backend != "cl":
        pytest.skip("softmax_row is an OpenCL kernel")
    for n in (4, 7, 1000, 1001, 4096):
        x = _x((3, n))
        xt = Tensor.from_host(dev.queue, x.astype(np.float32))
        for lanes in (1, 32, 64, 256, 1024):
            if (path == 0 and n > 32 * lanes) or (path == 2 and n % 4):
                with pytest.raises(ValueError, match="row plan"):
                    softmax_rows(xt, False, lanes, path)
                continue
            for take_log, ref in ((False, _softmax), (True, _log_softmax)):
                got = softmax_rows(xt, take_log, lanes, path).to_host()
                np.testing.assert_allclose(got, ref(x.astype(np.float32).astype(np.float64)),
                                           rtol=1e-4, atol=1e-6)


def test_row_plan() -> None:
    assert row_plan(1024, 0, 1024) == (32, 0)
    assert row_plan(4096, 0, 1024) == (128, 0)
    assert row_plan(8193, 0, 256) == (256, 1)
    assert row_plan(9000, 2, 256) == (256, 1)  # an unaligned start: scalars
    assert row_plan(40000, 0, 1024) == (1024, 2)
    with pytest.raises(ValueError, match="row plan"):
        row_plan(100, 0, 256, lanes=48)
