"""The float32 matmul precision mode (netcl.ops._precision) and the TF32 tensor-core GEMM it
opts into (netcl.ops._matmul_mma_tf32): the setting and its errors, exact float32 wherever
there are no tensor cores, the kernel with emulated PTX on every OpenCL device, and the real
TF32 kernel through ``matmul`` where a GPU passes the mma probe (NVIDIA only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.ops import _precision, get_float32_matmul_precision, matmul, set_float32_matmul_precision
from netcl.ops._matmul_mma import mma_available
from netcl.ops._matmul_mma_tf32 import Tf32Config, matmul_tf32, tf32_applicable, tf32_config
from netcl.ops._matmul_mma_tf32_source import tf32_gemm_source, tf32_kernel_name
from netcl.ops._precision import PRECISION_ENV, tf32_allowed

RNG = np.random.default_rng(32)

EMULATED = Tf32Config(bm=32, bn=32, bk=16, warps_m=1, warps_n=2, emulate=True)

# (batch, M, N, K, transpose_a, transpose_b): odd sizes, every layout.
CASES = [
    (1, 7, 13, 21, False, False),
    (1, 33, 9, 40, False, True),
    (2, 17, 35, 8, True, False),
    (3, 5, 6, 19, True, True),
]


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    before = _precision._state[0]
    yield
    _precision._state[0] = before


def is_opencl(dev: DeviceHandle) -> bool:
    return dev.backend != "cpu"


def tf32_round(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """float32 values rounded to TF32 as cvt.rna does (to nearest, ties away)."""
    u = x.astype(np.float32).view(np.uint32)
    rounded: np.ndarray[Any, Any] = ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000))
    return rounded.view(np.float32)


def operands(batch: int, M: int, N: int, K: int, ta: bool, tb: bool
             ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    a = RNG.standard_normal((batch, K, M) if ta else (batch, M, K)).astype(np.float32)
    b = RNG.standard_normal((batch, N, K) if tb else (batch, K, N)).astype(np.float32)
    return a, b


def product(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any], ta: bool, tb: bool
            ) -> np.ndarray[Any, Any]:
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    return (np.swapaxes(fa, -1, -2) if ta else fa) @ (np.swapaxes(fb, -1, -2) if tb else fb)


def test_default_is_highest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    _precision._state[0] = None  # as a fresh process
    assert get_float32_matmul_precision() == "highest"
    assert not tf32_allowed()


@pytest.mark.parametrize("mode", ["highest", "high", "medium"])
def test_set_and_get(mode: str) -> None:
    set_float32_matmul_precision(mode)
    assert get_float32_matmul_precision() == mode
    assert tf32_allowed() is (mode != "highest")


@pytest.mark.parametrize("bad", ["fast", "HIGH", "", None, 3])
def test_bad_value_names_function_and_choices(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"set_float32_matmul_precision: precision must be one "
                                         r"of 'highest', 'high', 'medium', got "):
        set_float32_matmul_precision(bad)
    assert get_float32_matmul_precision() in ("highest", "high", "medium")


def test_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PRECISION_ENV, "high")
    _precision._state[0] = None
    assert get_float32_matmul_precision() == "high"
    monkeypatch.setenv(PRECISION_ENV, "turbo")
    _precision._state[0] = None
    with pytest.raises(ValueError, match=f"{PRECISION_ENV}: precision must be one of"):
        tf32_allowed()


def test_exact_float32_without_tensor_cores(dev: DeviceHandle) -> None:
    """"high" changes nothing where no tensor cores run: the same bits as "highest"."""
    if is_opencl(dev) and mma_available(dev.queue):
        pytest.skip("this device has tensor cores (the GPU test covers it)")
    a, b = operands(1, 19, 23, 37, False, False)
    ta, tb = (Tensor.from_host(dev.queue, x[0]) for x in (a, b))
    exact = matmul(ta, tb).to_host()
    set_float32_matmul_precision("high")
    assert not tf32_applicable(ta, tb)
    np.testing.assert_array_equal(matmul(ta, tb).to_host(), exact)
    np.testing.assert_allclose(exact, product(a[0], b[0], False, False), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("config", [
    Tf32Config(), Tf32Config(bm=64, bn=64, warps_m=2, warps_n=2, trans_a=True),
    Tf32Config(bk=32, bm=64, bn=64, warps_m=2, warps_n=2, trans_b=True),
    Tf32Config(trans_a=True, trans_b=True),
], ids=lambda c: c.label())
def test_source_text(config: Tf32Config) -> None:
    src = tf32_gemm_source(config)
    assert f"#define KERNEL_NAME {tf32_kernel_name(config)}\n" in src
    assert src.count("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") == 1
    assert "cvt.rna.tf32.f32" in src
    assert src.count("{") == src.count("}")
    assert "__asm__" not in tf32_gemm_source(Tf32Config(**{**config.__dict__, "emulate": True}))


@pytest.mark.parametrize(("changes", "rule"), [
    ({"bk": 12}, "bk must be a multiple of 8"),
    ({"warps_m": 3}, "bm / warps_m must be a multiple of 16"),
    ({"bk": 64}, "the two stages must fit in 48 KiB"),
    ({"bm": 96, "trans_a": True}, "stored rows must divide"),
])
def test_bad_configs_name_the_rule(changes: dict[str, Any], rule: str) -> None:
    with pytest.raises(ValueError, match=rule):
        Tf32Config(**changes).check()


def test_config_choice() -> None:
    assert tf32_config(4096, 4096, 4096).bm == 128
    assert tf32_config(128, 128, 4096).bm == 64
    assert tf32_config(64, 64, 64, batch=512).bm == 128


@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:4])) + "_"
                         + ("t" if c[4] else "n") + ("t" if c[5] else "n"))
def test_emulated_kernel_rounds_to_tf32(dev: DeviceHandle, case: tuple[Any, ...]) -> None:
    if not is_opencl(dev):
        pytest.skip("emulated PTX runs on OpenCL devices; the NumPy backend has no kernels")
    batch, M, N, K, ta, tb = case
    a, b = operands(batch, M, N, K, ta, tb)
    squeeze = batch == 1
    xa, xb = (Tensor.from_host(dev.queue, x[0] if squeeze else x) for x in (a, b))
    got = matmul_tf32(xa, xb, transpose_a=ta, transpose_b=tb, config=EMULATED).to_host()
    want = product(tf32_round(a), tf32_round(b), ta, tb)  # TF32 inputs, exact products
    want = want[0] if squeeze else want
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(K))
    exact = product(a, b, ta, tb)
    err = float(np.abs(got - (exact[0] if squeeze else exact)).max())
    assert err > 1e-6  # the rounding happened (float32 inputs would be closer)


def test_errors(dev: DeviceHandle) -> None:
    x16 = Tensor.from_host(dev.queue, np.ones((8, 8)), dtype="float16")
    x32 = Tensor.from_host(dev.queue, np.ones((8, 8), np.float32))
    with pytest.raises(TypeError, match="matmul_tf32: needs float32 tensors, got float16"):
        matmul_tf32(x16, x32, config=EMULATED)
    assert not tf32_applicable(x16, x32)
    if not is_opencl(dev):
        with pytest.raises(RuntimeError, match="the NumPy backend has no tensor cores"):
            matmul_tf32(x32, x32, config=EMULATED)
        return
    y = Tensor.from_host(dev.queue, np.ones((8, 12), np.float32))
    with pytest.raises(ValueError, match="equal inner dimensions"):
        matmul_tf32(y, y, config=EMULATED)


def test_tf32_on_tensor_cores(dev: DeviceHandle) -> None:
    """GPU only: ``matmul`` under "high" runs TF32 (close to float64 within 1e-2 relative,
    but not float32-exact); "highest" is float32 again."""
    if not is_opencl(dev) or not mma_available(dev.queue):
        pytest.skip("no tensor cores on this device (NVIDIA's OpenCL driver only)")
    for batch, M, N, K, ta, tb in [*CASES, (1, 256, 384, 1024, False, False),
                                   (2, 129, 67, 513, True, False)]:
        a, b = operands(batch, M, N, K, ta, tb)
        xa, xb = (Tensor.from_host(dev.queue, x) for x in (a, b))
        want = product(a, b, ta, tb)
        set_float32_matmul_precision("high")
        got = matmul(xa, xb, transpose_a=ta, transpose_b=tb).to_host()
        scale = float(np.abs(want).max())
        assert float(np.abs(got - want).max()) <= 1e-2 * scale
        np.testing.assert_allclose(got, product(tf32_round(a), tf32_round(b), ta, tb),
                                   rtol=1e-4, atol=1e-5 * np.sqrt(K) * scale)
        set_float32_matmul_precision("highest")
        exact = matmul(xa, xb, transpose_a=ta, transpose_b=tb).to_host()
        assert float(np.abs(exact - want).max()) <= 1e-5 * scale * np.sqrt(K)
