"""``softmax_row`` (NOTE [ Softmax kernels ] in netcl.ops._softmax) on each of its paths: rows
held in registers (at most 32 elements per lane), longer rows through the online max and
rescaled sum, in scalars or 4-vectors; every path forced at several lane counts; odd
lengths, special values, offset views, float16/float64, and bitwise-equal repeated runs.
``softmax_mrow`` (NOTE [ Several rows per work-group ] in netcl.ops._softmax_rows) the same
way: every lanes x rows-per-group plan, 4-vectors and scalars, from aligned and unaligned
offsets, and as the GPU default."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.tensor import Tensor, narrow_view
from netcl.core.testing import supports_dtype
from netcl.ops import _launch
from netcl.ops import _softmax as softmax_mod
from netcl.ops._softmax import (
    _ROW_LANES_MAX,
    ROW_PATHS,
    _most_lanes,
    row_plan,
    softmax_family,
    softmax_rows,
)
from netcl.ops._softmax_rows import mrow_plan
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
    # the kernel's own limit: register use caps softmax_row at 256 lanes on an H200
    kernels = softmax_family(dev.queue.context, "softmax_row", "float32", False,
                             _ROW_LANES_MAX).kernels
    limit = _most_lanes(kernels["softmax_row" if path == 0 else "softmax_row_online"],
                        dev.queue.device)
    for n in (4, 7, 1000, 1001, 4096):
        x = _x((3, n))
        xt = Tensor.from_host(dev.queue, x.astype(np.float32))
        for lanes in (1, 32, 64, 256, 1024):
            if lanes > limit or (path == 0 and n > 32 * lanes):
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
    assert row_plan(8193, 0, 256) == (256, 2)  # 4-vectors between a scalar head and tail
    assert row_plan(9000, 2, 256) == (256, 1)  # an unaligned start: scalars
    assert row_plan(40000, 0, 1024) == (1024, 2)
    with pytest.raises(ValueError, match="row plan"):
        row_plan(40000, 1, 1024, path=2)
    with pytest.raises(ValueError, match="row plan"):
        row_plan(100, 0, 256, lanes=48)


def _view(dev: DeviceHandle, host: Any, offset: int, shape: tuple[int, ...], dtype: str
          ) -> Tensor:
    """``shape`` elements of a device copy of ``host`` from element ``offset`` (a view; float16
    is stored as float32 on a device without it)."""
    return narrow_view(Tensor.from_host(dev.queue, host.astype(dtype)), offset, shape)


MROW_LENGTHS = [1, 7, 33, 257, 1000, 4097]
TOL = {"float32": (1e-4, 1e-6), "float64": (1e-9, 1e-12), "float16": (2e-2, 2e-3)}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("path", [3, 4], ids=lambda p: ROW_PATHS[p])
def test_multirow_plans(dev: DeviceHandle, path: int, dtype: str) -> None:
    """softmax_mrow at lanes 8..1024 per row and 1..32 rows per group, rows of odd lengths
    from offsets 0, 4 (4-vectors and scalars) and 1, 3 (scalars: 4-vectors raise), 5 rows (a
    partial last group), -inf and NaN rows, against NumPy in float64 from the stored values."""
    if dev.backend != "cl":
        pytest.skip("softmax_mrow is an OpenCL kernel")
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    for n in MROW_LENGTHS:
        for offset in (0, 1, 3, 4):
            host = _x((5 * n + offset,))
            host[offset + n: offset + 2 * n] = -np.inf  # row 1: all -inf
            host[offset + 3 * n + n // 2] = np.nan  # row 3: a NaN
            x = _view(dev, host, offset, (5, n), dtype)  # stored as x.dtype
            a = host[offset:].astype(dtype).astype(x.dtype).astype(np.float64).reshape(5, n)
            rtol, atol = TOL[x.dtype]
            for lanes, rows in ((8, 1), (8, 32), (32, 8), (64, 4), (256, 1), (1024, 1),
                                (None, None), (None, 3)):
                try:
                    W, per, _ = mrow_plan(n, offset, 1024, lanes, rows, path == 3)
                except ValueError:
                    with pytest.raises(ValueError, match="multi-row plan"):
                        softmax_rows(x, False, lanes, path, rows)
                    continue
                for take_log, ref in ((False, _softmax), (True, _log_softmax)):
                    try:
                        got = softmax_rows(x, take_log, lanes, path, rows).to_host()
                    except ValueError:  # more lanes than the kernel runs on this device
                        assert W * per > softmax_mod._most_lanes(
                            softmax_mod.softmax_family(x.context, "softmax_row", x.dtype, False,
                                                    1024).kernels["softmax_mrow"],
                            dev.cl_device)
                        continue
                    with np.errstate(all="ignore"):
                        want = ref(a)
                    assert np.isnan(got[1]).all() and np.isnan(got[3]).all(), (n, lanes, rows)
                    np.testing.assert_allclose(got.astype(np.float64)[[0, 2, 4]],
                                               want[[0, 2, 4]], rtol=rtol, atol=atol,
                                               err_msg=f"n={n} offset={offset} W={W} rows={per}")


def test_online4_unaligned_rows(dev: DeviceHandle) -> None:
    """softmax_row_online's 4-vector path from any row start (offset a multiple of 4): a scalar
    head and tail around each row's aligned middle, within float32 rounding of NumPy; an
    unaligned offset cannot take it."""
    if dev.backend != "cl":
        pytest.skip("softmax_row is an OpenCL kernel")
    for n, offset in ((50257, 0), (40001, 4), (9003, 8)):
        host = _x((3 * n + offset,))
        x = _view(dev, host, offset, (3, n), "float32")
        a = host[offset:].astype(np.float32).astype(np.float64).reshape(3, n)
        for take_log, ref in ((False, _softmax), (True, _log_softmax)):
            got = softmax_rows(x, take_log, 256, 2).to_host()
            np.testing.assert_allclose(got, ref(a), rtol=1e-4, atol=1e-7)
        with pytest.raises(ValueError, match="row plan"):
            softmax_rows(_view(dev, host, 1, (2, n), "float32"), False, 256, 2)


def test_mrow_plan() -> None:
    assert mrow_plan(1024, 0, 1024) == (32, 8, True)
    assert mrow_plan(1000, 0, 1024) == (32, 8, True)
    assert mrow_plan(1000, 2, 1024) == (32, 8, False)
    assert mrow_plan(7, 0, 1024) == (8, 32, True)
    assert mrow_plan(4097, 0, 1024) == (256, 1, True)
    assert mrow_plan(30000, 0, 1024) == (1024, 1, True)
    assert mrow_plan(1024, 0, 128) == (32, 4, True)  # a device with smaller groups
    assert mrow_plan(1024, 4, 1024, lanes=64, rows=2, vec=False) == (64, 2, False)
    for bad in ({"lanes": 16}, {"lanes": 48}, {"lanes": 4}, {"rows": 64}, {"vec": True}):
        with pytest.raises(ValueError, match="multi-row plan"):
            mrow_plan(1000, 1, 1024, **bad)
    with pytest.raises(ValueError, match="multi-row plan"):
        mrow_plan(40000, 0, 1024)


def test_gpu_default_is_multirow(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a GPU runs by default (softmax_mrow for rows it holds, softmax_row's online path
    beyond), run here by taking this device for a GPU: ops.softmax and log_softmax on rows of
    odd lengths, an offset view, and the online path for 40001."""
    if dev.backend != "cl":
        pytest.skip("softmax_mrow is an OpenCL kernel")
    monkeypatch.setitem(_launch._gpus, dev.cl_device, True)
    monkeypatch.setattr(_launch, "_remembered", {})  # launches planned for a CPU
    with force_variant(PAR):
        for n in (7, 257, 1000, 1024, 4097, 40001):
            x = _x((9, n))
            check_op(dev, ops.softmax, _softmax, (x,), scale=4.0)
            check_op(dev, ops.log_softmax, _log_softmax, (x,), scale=4.0)
    for n in (33, 128, 255):  # the reduction rule's one item per row: on a GPU softmax_mrow
        x = _x((70, n))
        check_op(dev, ops.softmax, _softmax, (x,), scale=4.0)
        check_op(dev, ops.log_softmax, _log_softmax, (x,), scale=4.0)
    with force_variant(PAR):
        host = _x((6 * 1000 + 3,))
        view = _view(dev, host, 3, (6, 1000), "float32")
        want = _softmax(host[3:].astype(np.float32).astype(np.float64).reshape(6, 1000))
        np.testing.assert_allclose(ops.softmax(view).to_host(), want, rtol=1e-4, atol=1e-7)

