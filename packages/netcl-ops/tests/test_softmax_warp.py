"""``softmax_warp`` (NOTE [ Warp-per-row softmax ] in netcl.ops._softmax_warp) forced on every
OpenCL device present, its shuffles emulated in local memory (the same kernel an NVIDIA GPU
runs with ``shfl.sync``): rows of 1..4096 elements from aligned and unaligned offsets, in
4-vectors and scalars, one warp, part of one and several warps per row, partial last
work-groups, NaN / +inf / -inf / all -inf rows, float32 and float16, softmax and
log_softmax, against NumPy in float64 from the stored values; ``NETCL_SOFTMAX_KERNEL`` and
``NETCL_SOFTMAX_SHUFFLE``; the GPU default rule; :func:`warp_plan`. The sweeps of lengths and
plans run on GPUs and one OpenCL CPU device (Intel's where present: PoCL compiles the kernel
anew for each work-group size at its first launch; CPU devices never run it by default)."""

from __future__ import annotations

import doctest
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.kernels.cache import KernelBuildError
from netcl.core.tensor import Tensor, narrow_view
from netcl.core.testing import supports_dtype
from netcl.ops import _launch, _softmax_warp, _split_sync
from netcl.ops import _softmax as softmax_mod
from netcl.ops._softmax import ROW_PATHS, softmax_rows
from netcl.ops._softmax_warp import (
    KERNEL_ENV,
    MATH_ENV,
    REGS_ENV,
    SHUFFLE_ENV,
    forced_kernel,
    register_cap,
    warp_plan,
)
from netcl.ops.testing import check_op, skip_unless_one_opencl_cpu_device

LENGTHS = [1, 7, 33, 255, 256, 257, 1000, 1024, 1025, 4095, 4096]
DTYPES = ["float32", "float16"]
TOL = {"float32": (1e-4, 1e-6), "float16": (2e-2, 2e-3)}
ROWS = 6  # rows per test tensor: with 4 rows a work-group, a partial last group


def _x(shape: tuple[int, ...]) -> Any:
    return np.random.default_rng(sum(shape)).standard_normal(shape) * 4.0


def _softmax(a: Any) -> Any:
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _log_softmax(a: Any) -> Any:
    z = a - a.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _needs_cl(dev: DeviceHandle, dtype: str = "float32") -> None:
    if dev.backend != "cl":
        pytest.skip("softmax_warp is an OpenCL kernel")
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")


def _special_rows(n: int, offset: int) -> Any:
    """ROWS rows of n from ``offset`` in a flat array: row 1 all -inf, row 3 a NaN, row 4 a
    +inf (both NaN rows; for n > 1, row 5 every third element -inf: zeros in the softmax)."""
    host = _x((ROWS * n + offset,))
    host[offset + n: offset + 2 * n] = -np.inf
    host[offset + 3 * n + n // 2] = np.nan
    host[offset + 4 * n + (n - 1) // 3] = np.inf
    if n > 1:
        host[offset + 5 * n: offset + 6 * n: 3] = -np.inf
    return host


def _check(dev: DeviceHandle, n: int, offset: int, dtype: str,
           tol: tuple[float, float] | None = None, **plan: Any) -> None:
    host = _special_rows(n, offset)
    x = narrow_view(Tensor.from_host(dev.queue, host, dtype=dtype), offset, (ROWS, n))
    assert x.dtype == dtype
    a = host[offset:].astype(dtype).astype(np.float64).reshape(ROWS, n)
    rtol, atol = tol or TOL[x.dtype]
    for take_log, ref in ((False, _softmax), (True, _log_softmax)):
        got = softmax_rows(x, take_log, **plan).to_host()
        with np.errstate(all="ignore"):
            want = ref(a)
        where = f"n={n} offset={offset} {dtype} log={take_log} {plan}"
        for r in (1, 3, 4):
            assert np.isnan(got[r]).all(), (where, r)
        np.testing.assert_allclose(got.astype(np.float64)[[0, 2, 5]], want[[0, 2, 5]],
                                   rtol=rtol, atol=atol, err_msg=where)


@pytest.mark.parametrize("dtype", DTYPES)
def test_warp_rows(dev: DeviceHandle, dtype: str) -> None:
    """Every length from offsets 0 and 4 (4-vectors, a scalar head and tail where the rows
    are not 4-aligned) and 1, 3 (scalars), with the default plan (one warp up to 1024, two
    and four beyond)."""
    _needs_cl(dev, dtype)
    skip_unless_one_opencl_cpu_device(dev)
    for n in LENGTHS:
        for offset in (0, 1, 3, 4):
            _check(dev, n, offset, dtype, kernel="warp", shuffle="emulate")


def test_warp_paths_and_plans(dev: DeviceHandle) -> None:
    """Forced scalars from an aligned offset (path 6), part of a warp per row (8, 16 lanes),
    several warps per row (64..1024 lanes: the exchange of warp values), rows per group."""
    _needs_cl(dev)
    skip_unless_one_opencl_cpu_device(dev)
    for n, plans in ((200, [(8, 4), (16, 2)]), (257, [(16, 2), (64, 1), (32, 1)]),
                     (1000, [(64, 2), (128, 1), (256, 1), (1024, 1), (32, 8)]),
                     (4095, [(128, 2), (512, 1)])):
        for lanes, rows in plans:
            for path in (5, 6):
                for offset in (0, 4) if path == 5 else (0, 3):
                    _check(dev, n, offset, "float32", lanes=lanes, rows=rows, path=path)


def test_rows_bitwise_identical(dev: DeviceHandle) -> None:
    """Every lane of a row scales by the same max and sum (a butterfly leaves the same bits
    in each lane): the same row at each position of a tensor gives the same bits, and a
    second run too."""
    _needs_cl(dev)
    for n, dtype in ((1000, "float32"), (4096, "float32"), (2500, "float16")):
        if not supports_dtype(dev, dtype):
            continue
        x = Tensor.from_host(dev.queue, np.tile(_x((n,)), (9, 1)), dtype=dtype)
        for take_log in (False, True):
            got = softmax_rows(x, take_log, kernel="warp").to_host()
            assert (got == got[0]).all(), n
            assert got.tobytes() == softmax_rows(x, take_log, kernel="warp").to_host().tobytes()


def test_fast_math(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """NETCL_SOFTMAX_MATH=fast (native_exp, a reciprocal: NOTE [ Softmax arithmetic ]) builds
    softmax_warp and softmax_row with SM_FAST; both agree with float64 NumPy to the accuracy
    of the device's native_exp (OpenCL leaves it to the device: PoCL's is near 1e-4 relative,
    NVIDIA's ex2.approx 2^-22), NaN, +inf and all -inf rows included; float64 and the
    default stay exact; a bad value raises."""
    _needs_cl(dev)
    monkeypatch.setenv(MATH_ENV, "fast")
    assert _softmax_warp.fast_math("float32") and not _softmax_warp.fast_math("float64")
    assert "#define SM_FAST 1" in softmax_mod.softmax_family.source(
        "softmax_warp", "float32", False, 1024, "", False, 8, 0, True).program
    for offset in (0, 3):
        _check(dev, 1000, offset, "float32", (1e-3, 1e-6), kernel="warp", shuffle="emulate")
        _check(dev, 1000, offset, "float32", (1e-3, 1e-6), kernel="row")
    planned: list[int] = []  # a remembered call sees the switch too: it plans anew
    real = softmax_mod._row_launch

    def spy(*args: Any, **kwargs: Any) -> Any:
        planned.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(softmax_mod, "_row_launch", spy)
    x = Tensor.from_host(dev.queue, _x((3, 1000)).astype(np.float32))
    monkeypatch.delenv(MATH_ENV)
    with force_variant(KernelVariant.REDUCTION_PARALLEL):  # the row kernels, not softmax_col
        exact = ops.softmax(x).to_host()
        assert ops.softmax(x).to_host().tobytes() == exact.tobytes() and len(planned) == 1
        monkeypatch.setenv(MATH_ENV, "fast")
        np.testing.assert_allclose(ops.softmax(x).to_host(), exact, rtol=1e-3)
        assert len(planned) == 2
    monkeypatch.setenv(MATH_ENV, "quick")
    with pytest.raises(ValueError, match="NETCL_SOFTMAX_MATH must be one of"):
        _softmax_warp.fast_math("float32")


def _count_warp(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one at each softmax_warp launch planned."""
    calls: list[int] = []
    real = softmax_mod._warp_launch

    def spy(*args: Any, **kwargs: Any) -> Any:
        planned = real(*args, **kwargs)
        calls.append(1)
        return planned

    monkeypatch.setattr(softmax_mod, "_warp_launch", spy)
    return calls


def test_environment_forces_the_kernel(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    """NETCL_SOFTMAX_KERNEL=warp runs ops.softmax and log_softmax on softmax_warp (also rows
    the reduction rule gives one item each, and after a remembered launch of another kernel);
    rows longer than it holds and float64 keep softmax_row; =row does not run it; a bad value
    raises."""
    _needs_cl(dev)
    half = "float16" if supports_dtype(dev, "float16") else "float32"
    calls = _count_warp(monkeypatch)
    x = _x((5, 999))
    check_op(dev, ops.softmax, _softmax, (x,), scale=4.0)  # remembered: the default kernel
    assert not calls
    monkeypatch.setenv(KERNEL_ENV, "warp")
    monkeypatch.setenv(SHUFFLE_ENV, "emulate")
    for n in (7, 200, 1000, 4096):
        check_op(dev, ops.softmax, _softmax, (_x((5, n)),), scale=4.0)
        check_op(dev, ops.log_softmax, _log_softmax, (_x((5, n)),), dtype=half, scale=4.0)
    check_op(dev, ops.softmax, _softmax, (x,), scale=4.0)
    assert len(calls) == 9
    with force_variant(KernelVariant.REDUCTION_PARALLEL):
        check_op(dev, ops.softmax, _softmax, (_x((3, 30000)),), scale=4.0)  # 1024 lanes a row
        assert len(calls) == 10
        check_op(dev, ops.softmax, _softmax, (_x((3, 40001)),), scale=4.0)  # too long for it
    if supports_dtype(dev, "float64"):
        check_op(dev, ops.softmax, _softmax, (x,), dtype="float64", scale=4.0)
        assert len(calls) == 10
    monkeypatch.setenv(KERNEL_ENV, "row")
    check_op(dev, ops.softmax, _softmax, (x,), scale=4.0)
    assert len(calls) == 10
    monkeypatch.setenv(KERNEL_ENV, "wrap")
    with pytest.raises(ValueError, match="NETCL_SOFTMAX_KERNEL must be one of"):
        ops.softmax(Tensor.from_host(dev.queue, _x((2, 9)).astype(np.float32)))


def test_gpu_default(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an NVIDIA GPU runs by default, here with emulated shuffles: softmax_warp for
    float32 and float16 rows of 32..512 (an offset view too), not for 31 (softmax_mrow),
    513 or 1000 (softmax_row) or float64."""
    _needs_cl(dev)
    half = "float16" if supports_dtype(dev, "float16") else "float32"
    monkeypatch.setitem(_launch._gpus, dev.cl_device, True)
    monkeypatch.setattr(softmax_mod, "ptx_fence", lambda device: True)
    monkeypatch.setattr(_launch, "_remembered", {})  # launches planned for a CPU
    monkeypatch.setenv(SHUFFLE_ENV, "emulate")
    calls = _count_warp(monkeypatch)
    with force_variant(KernelVariant.REDUCTION_PARALLEL):
        for n in (32, 255, 512):
            check_op(dev, ops.softmax, _softmax, (_x((9, n)),), scale=4.0)
            check_op(dev, ops.log_softmax, _log_softmax, (_x((9, n)),), dtype=half, scale=4.0)
        assert len(calls) == 6
        for n in (31, 513, 1000):
            check_op(dev, ops.softmax, _softmax, (_x((9, n)),), scale=4.0)
        if supports_dtype(dev, "float64"):
            check_op(dev, ops.softmax, _softmax, (_x((9, 500)),), dtype="float64", scale=4.0)
        assert len(calls) == 6
        host = _x((6 * 500 + 3,))
        view = narrow_view(Tensor.from_host(dev.queue, host.astype(np.float32)), 3, (6, 500))
        want = _softmax(host[3:].astype(np.float32).astype(np.float64).reshape(6, 500))
        np.testing.assert_allclose(ops.softmax(view).to_host(), want, rtol=1e-4, atol=1e-7)
        assert len(calls) == 7


def test_gpu_default_falls_back_when_the_driver_refuses(dev: DeviceHandle,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """A driver that does not build softmax_warp: the default rule warns once and runs
    softmax_row from then on; a forced softmax_warp raises the build error."""
    _needs_cl(dev)
    monkeypatch.setitem(_launch._gpus, dev.cl_device, True)
    monkeypatch.setattr(softmax_mod, "ptx_fence", lambda device: True)
    monkeypatch.setattr(_launch, "_remembered", {})
    monkeypatch.setattr(softmax_mod, "_warp_refused", set())
    attempts: list[int] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        raise KernelBuildError("softmax_warp", dev.device_name, "", "ptxas: no", Path("x.cl"))

    monkeypatch.setattr(softmax_mod, "_warp_launch", refuse)
    with force_variant(KernelVariant.REDUCTION_PARALLEL):
        with pytest.warns(RuntimeWarning, match="softmax_warp does not build"):
            check_op(dev, ops.softmax, _softmax, (_x((9, 500)),), scale=4.0)
        check_op(dev, ops.log_softmax, _log_softmax, (_x((9, 300)),), scale=4.0)
        assert len(attempts) == 1
        x = Tensor.from_host(dev.queue, _x((2, 1000)).astype(np.float32))
        with pytest.raises(KernelBuildError):
            softmax_rows(x, False, kernel="warp")
        monkeypatch.setenv(KERNEL_ENV, "warp")
        with pytest.raises(KernelBuildError):
            ops.softmax(x)


def test_forcing_errors(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """float64, a plan that cannot run, unknown names, and the hardware shuffle on a device
    without NVIDIA's PTX raise."""
    _needs_cl(dev)
    x = Tensor.from_host(dev.queue, _x((3, 100)).astype(np.float32))
    with pytest.raises(ValueError, match="warp plan"):
        softmax_rows(x, False, lanes=16, rows=1, kernel="warp")  # 16 items: not a warp
    with pytest.raises(ValueError, match="warp plan"):
        softmax_rows(Tensor.from_host(dev.queue, _x((3, 300)).astype(np.float32)), False,
                     lanes=8, path=5)  # 37.5 elements a lane
    with pytest.raises(ValueError, match="kernel must be one of"):
        softmax_rows(x, False, kernel="warps")
    with pytest.raises(ValueError, match="shuffle must be one of"):
        softmax_rows(x, False, kernel="warp", shuffle="ptx")
    if supports_dtype(dev, "float64"):
        x64 = Tensor.from_host(dev.queue, _x((3, 100)), dtype="float64")
        with pytest.raises(ValueError, match="softmax_warp runs float32 and float16"):
            softmax_rows(x64, False, kernel="warp")
    if not _split_sync.ptx_fence(dev.cl_device):
        with pytest.raises(RuntimeError, match="needs NVIDIA's OpenCL"):
            softmax_rows(x, False, kernel="warp", shuffle="hardware")
        monkeypatch.setenv(SHUFFLE_ENV, "hardware")
        with pytest.raises(RuntimeError, match="needs NVIDIA's OpenCL"):
            softmax_rows(x, False, kernel="warp")


def test_numpy_backend_ignores_the_switch(dev: DeviceHandle,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The switches choose OpenCL row kernels only: every backend gives the same values."""
    monkeypatch.setenv(KERNEL_ENV, "warp")
    monkeypatch.setenv(SHUFFLE_ENV, "emulate")
    for n in (33, 1025):
        check_op(dev, ops.softmax, _softmax, (_x((4, n)),), scale=4.0)
        check_op(dev, ops.log_softmax, _log_softmax, (_x((4, n)),), scale=4.0)


def test_warp_plan() -> None:
    assert warp_plan(256, 0, 1024) == (32, 4, True, 2)
    assert warp_plan(257, 0, 1024) == (32, 4, True, 4)
    assert warp_plan(1000, 2, 1024) == (32, 4, False, 8)
    assert warp_plan(1025, 0, 1024) == (64, 2, True, 8)
    assert warp_plan(4096, 0, 1024) == (128, 1, True, 8)
    assert warp_plan(7, 0, 1024) == (32, 4, True, 1)
    assert warp_plan(30000, 0, 1024) == (1024, 1, True, 8)
    assert warp_plan(1000, 0, 64) == (32, 2, True, 8)  # a device with smaller groups
    assert warp_plan(100, 0, 1024, lanes=8, rows=4, vec=False) == (8, 4, False, 4)
    for bad in ({"lanes": 4}, {"lanes": 24}, {"lanes": 16}, {"lanes": 8, "rows": 2},
                {"vec": True}, {"lanes": 2048, "rows": 1}):
        with pytest.raises(ValueError, match="warp plan"):
            warp_plan(1000, 1, 1024, **bad)
    with pytest.raises(ValueError, match="warp plan"):
        warp_plan(40000, 0, 1024)


def test_forced_kernel_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert forced_kernel() is None
    monkeypatch.setenv(KERNEL_ENV, " Warp ")
    assert forced_kernel() == "warp"
    assert forced_kernel("row") == "row"  # the argument first
    monkeypatch.setenv(KERNEL_ENV, "auto")
    assert forced_kernel() is None
    assert ROW_PATHS[5:] == ("warp4", "warp1")


def test_register_cap(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """NETCL_SOFTMAX_WARP_REGS: an integer from 16 to 255 (the PTX build's
    -cl-nv-maxrregcount; the emulated kernel is built without it), else ValueError."""
    assert register_cap() == 0
    monkeypatch.setenv(REGS_ENV, " 64 ")
    assert register_cap() == 64
    if dev.backend == "cl":
        _check(dev, 1000, 0, "float32", kernel="warp")
    for bad in ("8", "256", "lots"):
        monkeypatch.setenv(REGS_ENV, bad)
        with pytest.raises(ValueError, match="NETCL_SOFTMAX_WARP_REGS must be an integer"):
            register_cap()


def test_doctests() -> None:
    assert doctest.testmod(_softmax_warp).failed == 0
