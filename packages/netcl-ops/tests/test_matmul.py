"""matmul, build_matmul_kernel and bias_add: every GEMM variant (forced) against float64 NumPy,
on every backend, over odd sizes, transposes, broadcast batch dimensions and the typed errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle, manager
from netcl.core.kernel_selector import (
    KernelConfig,
    KernelVariant,
    force_variant,
    get_kernel_selector,
)
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor
from netcl.core.testing import supports_dtype
from netcl.ops import _matmul as impl
from netcl.ops import _matmul_launch as launch_impl
from netcl.ops import bias_add, build_matmul_kernel, matmul
from netcl.ops._matmul_family import uses_fma
from netcl.ops.testing import OpInfo, check_error, check_op, offset_view, one_opencl_cpu_device

RNG = np.random.default_rng(0)


def arr(*shape: int) -> np.ndarray[Any, Any]:
    return RNG.standard_normal(shape)


def ref_matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Any:
    return np.matmul(np.swapaxes(a, -1, -2) if transpose_a else a,
                     np.swapaxes(b, -1, -2) if transpose_b else b)


NT = {"transpose_b": True}
TN = {"transpose_a": True}
TT = {"transpose_a": True, "transpose_b": True}

MATMUL = OpInfo(
    name="matmul",
    op=matmul,
    ref=ref_matmul,
    samples=[
        ((arr(1, 1), arr(1, 1)), {}),
        ((arr(7, 33), arr(33, 5)), {}),
        ((arr(33, 7), arr(33, 257)), TN),
        ((arr(7, 33), arr(257, 33)), NT),
        ((arr(33, 7), arr(5, 33)), TT),
        ((arr(64, 36), arr(36, 44)), {}),  # multiples of 4: the vector load paths
        ((arr(36, 64), arr(44, 36)), TT),
        ((arr(65, 20), arr(20, 68)), {}),
        ((arr(2, 1, 5, 7), arr(3, 7, 4)), {}),  # broadcast batch dims
        ((arr(3, 6, 4), arr(4, 9)), {}),
        ((arr(6, 4), arr(2, 3, 6, 5)), TN),
        ((arr(5, 0), arr(0, 3)), {}),  # an empty sum is zeros
    ],
    errors=[
        ((arr(3, 4), arr(5, 6)), {}, ValueError,
         r"matmul: inner dimensions differ: a is \(3, 4\), b is \(5, 6\)"),
        ((arr(3, 4), arr(3, 4)), NT | {"transpose_b": False}, ValueError, "inner dimensions"),
        ((arr(4), arr(4, 2)), {}, ValueError, r"a must be at least 2-D, got shape \(4,\)"),
        ((arr(2, 3, 4), arr(3, 4, 5)), {}, ValueError, "batch dimensions do not broadcast"),
        ((np.ones((2, 2), np.int32), np.ones((2, 2), np.int32)), {}, TypeError,
         "a must be a float tensor, got dtype int32"),
        ((arr(2, 2), "b"), {}, TypeError, "b must be a netcl Tensor, got str"),
    ],
    scale=10.0,
)

VARIANTS = [None, KernelVariant.MATMUL_NAIVE, KernelVariant.MATMUL_TILED,
            KernelVariant.MATMUL_REGISTER_TILED, KernelVariant.MATMUL_VECTORIZED]


# Samples each variant runs on OpenCL. Every (transposes, alignment) pair is one more kernel
# build (seconds on PoCL), so each variant gets the pairs its code distinguishes: the scalar
# kernels (naive, tiled) differ only by transposes, the vector ones also by alignment.
_SCALAR_SAMPLES = {0, 1, 4, 8, 11}
_PER_VARIANT = {
    None: {1, 4, 5, 8, 10},
    KernelVariant.MATMUL_NAIVE: _SCALAR_SAMPLES,
    KernelVariant.MATMUL_TILED: _SCALAR_SAMPLES,
    KernelVariant.MATMUL_REGISTER_TILED: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11},
    KernelVariant.MATMUL_VECTORIZED: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11},
}


def _vid(v: Any) -> str:
    return "selected" if v is None else v.name


@pytest.mark.parametrize("variant", VARIANTS, ids=_vid)
@pytest.mark.parametrize("sample", range(len(MATMUL.samples)), ids=lambda i: f"sample{i}")
def test_matmul_float32(dev: DeviceHandle, variant: Any, sample: int) -> None:
    if dev.backend == "cpu" and variant is not None:
        pytest.skip("the NumPy backend has no kernel variants")
    if dev.backend == "cl" and sample not in _PER_VARIANT[variant]:
        pytest.skip("covered by another sample with the same kernel build")
    args, kwargs = MATMUL.samples[sample]
    with force_variant(*([variant] if variant else [])):
        check_op(dev, MATMUL.op, MATMUL.ref, args, kwargs, "float32", MATMUL.scale)


@pytest.mark.parametrize("variant", VARIANTS, ids=_vid)
@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_matmul_other_dtypes(dev: DeviceHandle, variant: Any, dtype: str) -> None:
    """At the float32 test's scale (10x the table): a float64 result rounded through float32
    even once is 6e-8 off, well outside float64's 1e-9 (a scale of 1e3 let it through)."""
    if dev.backend == "cpu" and variant is not None:
        pytest.skip("the NumPy backend has no kernel variants")
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    # unaligned, broadcast batch dims and, for the variants with vector loads (vloada_halfN
    # for float16, doubleN for float64), 4-aligned: two builds for those, one for the others
    vector = variant in (KernelVariant.MATMUL_REGISTER_TILED, KernelVariant.MATMUL_VECTORIZED)
    with force_variant(*([variant] if variant else [])):
        for index in (1, 8, 5) if vector else (1, 8):
            args, kwargs = MATMUL.samples[index]
            check_op(dev, MATMUL.op, MATMUL.ref, args, kwargs, dtype, MATMUL.scale)


@pytest.mark.parametrize("row", range(len(MATMUL.errors)), ids=lambda i: f"error{i}")
def test_matmul_errors(dev: DeviceHandle, row: int) -> None:
    args, kwargs, exc, pattern = MATMUL.errors[row]
    check_error(dev, MATMUL.op, args, kwargs, exc, pattern)


def test_matmul_dtype_mismatch_and_devices(dev: DeviceHandle) -> None:
    a = Tensor.from_host(dev.queue, arr(2, 2), dtype="float32")
    b = Tensor.from_host(dev.queue, arr(2, 2), dtype="float64")
    with pytest.raises(TypeError, match="matmul: dtypes differ: a is float32, b is float64"):
        matmul(a, b)
    other = manager.default("cl" if dev.backend == "cpu" else "cpu")
    if other is None:
        pytest.skip("only one backend present")
    c = Tensor.from_host(other.queue, arr(2, 2))
    with pytest.raises(ValueError, match="matmul: tensors are on different devices"):
        matmul(a, c)


@pytest.mark.parametrize("n", [1, 7, 33, 257])
def test_matmul_square_sizes_one_launch(dev: DeviceHandle, n: int) -> None:
    a, b = arr(n, n), arr(n, n)
    with count_launches() as launches:
        got = check_op(dev, matmul, ref_matmul, (a, b), scale=10.0)
    assert got.shape == (n, n)
    assert launches[0] == (0 if dev.backend == "cpu" else 1)


def test_build_matmul_kernel_runs_each_variant(dev: DeviceHandle) -> None:
    a, b = arr(9, 17), arr(17, 6)
    ta = Tensor.from_host(dev.queue, a)
    tb = Tensor.from_host(dev.queue, b)
    for variant in (None, *VARIANTS[1:], "matmul_tiled"):
        mm = build_matmul_kernel(dev.queue, variant)
        np.testing.assert_allclose(mm(ta, tb).to_host(), a @ b, rtol=1e-4, atol=1e-4)
        if dev.backend == "cl" and variant is not None:
            assert mm.kernel is not None and "__kernel" in mm.source
    with pytest.raises(ValueError, match="CONV2D_WINOGRAD is not a matmul kernel"):
        build_matmul_kernel(dev.queue, KernelVariant.CONV2D_WINOGRAD)
    with pytest.raises(ValueError, match="no kernel variant 'fast'"):
        build_matmul_kernel(dev.queue, "fast")
    with pytest.raises(TypeError, match="built for float64, got float32"):
        build_matmul_kernel(dev.queue, None, "float64")(ta, tb)


def ref_bias_add(x: Any, bias: Any, axis: int | None = None) -> Any:
    ax = (1 if x.ndim >= 3 else x.ndim - 1) if axis is None else axis % x.ndim
    return x + bias.reshape((-1,) + (1,) * (x.ndim - ax - 1))


BIAS_ADD = OpInfo(
    name="bias_add",
    op=bias_add,
    ref=ref_bias_add,
    samples=[
        ((arr(7, 33), arr(33)), {}),
        ((arr(2, 5, 3, 7), arr(5)), {}),
        ((arr(3, 4, 6), arr(6)), {"axis": -1}),
        ((arr(9), arr(9)), {}),
        ((arr(2, 3, 4), arr(2)), {"axis": 0}),
    ],
    errors=[
        ((arr(2, 5, 3), arr(3)), {}, ValueError,
         r"bias_add: bias must have shape \(5,\) to match axis 1 of input \(2, 5, 3\)"),
        ((arr(2, 5), arr(5)), {"axis": 2}, IndexError, "axis 2 is out of range"),
        ((np.ones((2, 3), np.int32), np.ones(3, np.int32)), {}, TypeError, "float dtype"),
    ],
)


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_bias_add(dev: DeviceHandle, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    for args, kwargs in BIAS_ADD.samples:
        check_op(dev, BIAS_ADD.op, BIAS_ADD.ref, args, kwargs, dtype)
    for args, kwargs, exc, pattern in BIAS_ADD.errors:
        check_error(dev, BIAS_ADD.op, args, kwargs, exc, pattern)


# Register-tiled configurations the GPU rules pick (tiles, rows x columns per work-item, warp
# layout, split K), forced on every device over odd sizes and all four transpose layouts:
# unaligned (scalar loads, clamped indices), 4-aligned (vector loads) and a K tail.
_RT_CONFIGS = [
    (128, 128, 8, 8, 8, 8, 0),  # NVIDIA, many tiles
    (128, 64, 16, 8, 4, 8, 0),  # NVIDIA, fewer tiles
    (64, 64, 16, 4, 4, 8, 3),  # split K into 3 slices (the last one shorter)
]


@pytest.mark.parametrize("cfg", _RT_CONFIGS, ids=lambda c: "x".join(map(str, c)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_register_tiled_configs(dev: DeviceHandle, cfg: tuple[int, ...], dtype: str) -> None:
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend has no kernel variants")
    if dtype == "float64" and one_opencl_cpu_device(dev) is not None:  # PoCL: 100 s more
        pytest.skip("float64 configurations run on the first OpenCL CPU device")
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} unsupported on {dev.device_name}")
    bm, bn, bk, wm, wn, warp, split = cfg
    config = KernelConfig(KernelVariant.MATMUL_REGISTER_TILED, tile_m=bm, tile_n=bn, tile_k=bk,
                          work_per_thread=wm,
                          extra={"micro_n": wn, "warp_n": warp, "split_k": split})
    mm = build_matmul_kernel(dev.queue, config, dtype)
    for (M, N, K) in [(33, 130, 70), (132, 68, 36)]:
        for ta, tb in ((False, False), (False, True), (True, False), (True, True)):
            a = arr(K, M) if ta else arr(M, K)
            b = arr(N, K) if tb else arr(K, N)
            got = mm(Tensor.from_host(dev.queue, a, dtype=dtype),
                     Tensor.from_host(dev.queue, b, dtype=dtype), ta, tb).to_host()
            want = ref_matmul(a, b, ta, tb)
            tol = 1e-4 if dtype == "float32" else 1e-10
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max(),
                                       err_msg=f"{cfg} {(M, N, K)} ta={ta} tb={tb}")


@pytest.mark.parametrize("merge", ["group", "launch"])
def test_split_k_launches(dev: DeviceHandle, merge: str) -> None:
    """A split K runs in one launch whose last group per tile merges the slices, or (forced)
    the slices (one launch, a second for a shorter last slice) and a sum."""
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend has no kernel variants")
    config = KernelConfig(KernelVariant.MATMUL_REGISTER_TILED, tile_m=64, tile_n=64, tile_k=16,
                          work_per_thread=4, extra={"split_k": 4, "split_merge": merge})
    mm = build_matmul_kernel(dev.queue, config)
    a, b = arr(20, 128), arr(128, 12)
    ta, tb = Tensor.from_host(dev.queue, a), Tensor.from_host(dev.queue, b)
    with count_launches() as launches:
        got = mm(ta, tb).to_host()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
    # 4 slices of 32: one launch, or one GEMM launch and the sum
    assert launches[0] == (1 if merge == "group" else 2)


def test_matmul_remembers_its_plan(dev: DeviceHandle) -> None:
    """A repeated OpenCL matmul (same shapes, dtypes, offsets, transposes, queue and selector
    epoch) runs its remembered plan: other tensors give their own product, views at an offset
    theirs, a forced variant makes a new plan, and a released operand raises every call."""
    if dev.backend == "cpu":
        pytest.skip("the plan is OpenCL's")
    q = dev.queue
    for _ in range(2):  # batched, broadcast B, transposed A: the second call is the plan's
        a, b = arr(2, 3, 9, 7), arr(3, 9, 5)
        got = matmul(Tensor.from_host(q, a, dtype="float32"),
                     Tensor.from_host(q, b, dtype="float32"), transpose_a=True).to_host()
        np.testing.assert_allclose(got, ref_matmul(a, b, True), rtol=1e-4, atol=1e-4)
    plans = len(impl._plans)
    for _ in range(2):
        a, b = arr(6, 4), arr(4, 3)
        out = matmul(offset_view(dev, a, 5, "float32"), offset_view(dev, b, 3, "float32"))
        np.testing.assert_allclose(out.to_host(), a @ b, rtol=1e-4, atol=1e-4)
    assert len(impl._plans) == plans + 1
    with force_variant(KernelVariant.MATMUL_NAIVE), count_launches() as launches:
        out = matmul(offset_view(dev, a, 5, "float32"), offset_view(dev, b, 3, "float32"))
    np.testing.assert_allclose(out.to_host(), a @ b, rtol=1e-4, atol=1e-4)
    assert len(impl._plans) == plans + 2 and launches[0] == 1
    ta, tb = Tensor.from_host(q, a, dtype="float32"), Tensor.from_host(q, b, dtype="float32")
    matmul(ta, tb)
    ta.release()
    for _ in range(2):
        with pytest.raises(ValueError, match="tensor was released"):
            matmul(ta, tb)


def test_gpu_selection_counts_the_batch_rows(dev: DeviceHandle,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU selects a batch of matrices of >= 128 rows as one product of all their rows; an
    OpenCL CPU device (panels follow M) and smaller matrices select per matrix."""
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend selects nothing")
    sel = get_kernel_selector(dev.queue.device)
    t = Tensor.from_host(dev.queue, arr(2, 2))
    rows = 1536 if uses_fma(dev.queue.device) else 256
    assert impl._select(t, 256, 64, 64, (3, 2)) is sel.select_matmul_kernel(rows, 64, 64)
    monkeypatch.setattr(launch_impl, "uses_fma", lambda device: True)
    assert impl._select(t, 256, 64, 64, (3, 2)) is sel.select_matmul_kernel(1536, 64, 64)
    assert impl._select(t, 100, 64, 64, (3, 2)) is sel.select_matmul_kernel(100, 64, 64)
