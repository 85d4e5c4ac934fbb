"""The register-tiled attention kernels (NOTE [ Register-tiled attention kernels ]) forced on
every OpenCL device: forward and backward against the float64 NumPy reference (odd lengths,
head dims 16 .. 128, causal, bool and float masks with broadcasting, grouped-query, float16
storage), dropout against the row kernels with the same stream, and the selection switch."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close
from netcl.ops import _attention_fused, _attention_plan, _attention_tiled

if TYPE_CHECKING:
    import test_attention_reference as ref
else:
    _spec = importlib.util.spec_from_file_location(
        "netcl_ops_attention_reference_tiled",
        Path(__file__).with_name("test_attention_reference.py"))
    ref = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(ref)


def _opencl(dev: DeviceHandle) -> None:
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend runs no OpenCL kernels")


def _rand(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> Any:
    return np.random.default_rng(seed).standard_normal(shape) * scale


def _up(dev: DeviceHandle, a: Any, dtype: str = "float32") -> Tensor:
    return Tensor.from_host(dev.queue, np.asarray(a), dtype=dtype)


def _mask(kind: str | None, shape: tuple[int, ...], seed: int) -> Any:
    if kind == "bool":
        m = np.random.default_rng(seed).random(shape) > 0.3
        m[..., 0] = True  # every row keeps a key
        return m
    if kind == "float":
        return _rand(shape, seed, 0.5)
    return None


def _plan(dev: DeviceHandle, q: Any, k: Any, v: Any, mask: Any, causal: bool,
          dtype: str = "float32", p: float = 0.0, gqa: bool = False) -> Any:
    tm = None
    if mask is not None:
        tm = _up(dev, mask.astype(np.uint8), "uint8") if mask.dtype == bool else _up(
            dev, mask, dtype)
    return _attention_plan.plan_attention(_up(dev, q, dtype), _up(dev, k, dtype),
                                          _up(dev, v, dtype), tm, p, causal, None, gqa)


# (q shape, k shape, v shape, mask kind, mask shape, causal): several row groups and key
# tiles, odd lengths, every head dim family
CASES = [
    ((1, 1, 16), (1, 1, 16), (1, 1, 16), None, None, False),                 # L = S = 1
    ((2, 7, 32), (2, 33, 32), (2, 33, 16), None, None, True),                # causal, L < S
    ((2, 2, 65, 64), (2, 2, 7, 64), (2, 2, 7, 64), "bool", (2, 1, 1, 7), True),  # padding
    ((1, 257, 64), (1, 65, 64), (1, 65, 64), "float", (257, 65), False),     # shared mask
    ((2, 33, 80), (2, 65, 80), (2, 65, 48), "bool", (1, 33, 65), False),     # E 80, Ev 48
    ((1, 2, 40, 128), (1, 2, 70, 128), (1, 2, 70, 128), None, None, True),   # head dim 128
]


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_tiled_forward_backward(dev: DeviceHandle, case: Any) -> None:
    _opencl(dev)
    qs, ks, vs, kind, ms, causal = case
    q, k, v = _rand(qs, 1), _rand(ks, 2), _rand(vs, 3)
    mask = _mask(kind, ms, 4) if kind else None
    plan = _plan(dev, q, k, v, mask, causal)
    assert _attention_fused.kernel_choice(plan, "tiled") == "tiled"
    out, lse = _attention_fused.fused_forward(plan, 0, 0, kernel="tiled")
    g = _rand(out.shape, 5)
    want, wgrads = ref.sdpa(q, k, v, mask, causal, grad=g)
    assert_close(out.to_host(), want, "float32", 10)
    scores = ref._scores(q, k, mask, causal, 1.0 / np.sqrt(qs[-1]))
    top = scores.max(axis=-1, keepdims=True)
    want_lse = (top + np.log(np.exp(scores - top).sum(axis=-1, keepdims=True)))[..., 0]
    assert_close(lse.to_host(), want_lse, "float32", 10)
    got = _attention_fused.fused_backward(plan, _up(dev, g), out, lse, 0, 0, kernel="tiled")
    for name, a, w in zip(("dq", "dk", "dv"), got, wgrads):
        assert w is not None and a.shape == w.shape, name
        assert_close(a.to_host(), w, "float32", 20, err_msg=name)


@pytest.mark.parametrize("block", ["8x2", "2x4"])
def test_tiled_preferred_block(dev: DeviceHandle, block: str,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``NETCL_ATTENTION_TILED_BLOCK`` picks another register block (GPU trials): the same
    results with other tile shapes."""
    _opencl(dev)
    monkeypatch.setenv("NETCL_ATTENTION_TILED_BLOCK", block)
    q, k, v = _rand((2, 67, 32), 1), _rand((2, 70, 32), 2), _rand((2, 70, 16), 3)
    mask = _mask("bool", (67, 70), 4)
    plan = _plan(dev, q, k, v, mask, True)
    out, lse = _attention_fused.fused_forward(plan, 0, 0, kernel="tiled")
    g = _rand(out.shape, 5)
    want, wgrads = ref.sdpa(q, k, v, mask, True, grad=g)
    assert_close(out.to_host(), want, "float32", 10)
    got = _attention_fused.fused_backward(plan, _up(dev, g), out, lse, 0, 0, kernel="tiled")
    for name, a, w in zip(("dq", "dk", "dv"), got, wgrads):
        assert_close(a.to_host(), w, "float32", 20, err_msg=name)


def test_tiled_grouped_query_float16(dev: DeviceHandle) -> None:
    _opencl(dev)
    q = _rand((2, 6, 9, 32), 1).astype(np.float16)
    k = _rand((2, 2, 35, 32), 2).astype(np.float16)
    v = _rand((2, 2, 35, 16), 3).astype(np.float16)
    plan = _plan(dev, q, k, v, None, True, "float16", gqa=True)
    out, lse = _attention_fused.fused_forward(plan, 0, 0, mma="off", kernel="tiled")
    assert out.dtype == "float16" and out.shape == (2, 2, 3, 9, 16)  # (batch, groups, ...)
    g = _rand((2, 6, 9, 16), 4).astype(np.float16)
    kr, vr = np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1)
    want, (dq, dk, dv, _) = ref.sdpa(q, kr, vr, causal=True, grad=g)
    assert_close(out.to_host().reshape(want.shape), want, "float16", 1)
    got = _attention_fused.fused_backward(plan, _up(dev, g.reshape(out.shape), "float16"),
                                          out, lse, 0, 0, mma="off", kernel="tiled")
    assert dq is not None and dk is not None and dv is not None
    wants = [dq, dk.reshape(2, 2, 3, 35, 32).sum(2), dv.reshape(2, 2, 3, 35, 16).sum(2)]
    for name, a, w in zip(("dq", "dk", "dv"), got, wants):
        assert_close(a.to_host().reshape(w.shape), w, "float16", 3, err_msg=name)


def test_tiled_dropout_matches_rows(dev: DeviceHandle) -> None:
    """Both families keep the same elements of the same Philox stream: their outputs and
    gradients agree to rounding, and both match the reference with that keep mask."""
    _opencl(dev)
    q, k, v = _rand((2, 33, 32), 1), _rand((2, 70, 32), 2), _rand((2, 70, 16), 3)
    p, seed, offset = 0.3, 1234, 8
    plan = _plan(dev, q, k, v, None, True, p=p)
    g = _rand((2, 33, 16), 4)
    keep = ref.dropout_keep((2, 33, 70), p, seed, offset)
    want, wgrads = ref.sdpa(q, k, v, causal=True, keep=keep, p=p, grad=g)
    results = {}
    for kernel in ("rows", "tiled"):
        out, lse = _attention_fused.fused_forward(plan, seed, offset, kernel=kernel)
        grads = _attention_fused.fused_backward(plan, _up(dev, g), out, lse, seed, offset,
                                                kernel=kernel)
        results[kernel] = [out.to_host(), *(t.to_host() for t in grads)]
        assert_close(results[kernel][0], want, "float32", 10)
        for name, a, w in zip(("dq", "dk", "dv"), results[kernel][1:], wgrads):
            assert_close(a, w, "float32", 20, err_msg=f"{kernel} {name}")
    for a, b in zip(results["rows"], results["tiled"]):
        assert_close(b, a, "float32", 10)


def test_tiled_fully_masked_row(dev: DeviceHandle) -> None:
    _opencl(dev)
    q, k, v = _rand((1, 3, 32), 1), _rand((1, 4, 32), 2), _rand((1, 4, 16), 3)
    mask = np.ones((3, 4), bool)
    mask[1] = False
    plan = _plan(dev, q, k, v, mask, False)
    out, lse = _attention_fused.fused_forward(plan, 0, 0, kernel="tiled")
    host = out.to_host()
    assert (host[0, 1] == 0).all() and np.isneginf(lse.to_host()[0, 1])
    grads = _attention_fused.fused_backward(plan, _up(dev, np.ones(out.shape)), out, lse, 0,
                                            0, kernel="tiled")
    assert all(np.isfinite(t.to_host()).all() for t in grads)
    assert (grads[0].to_host()[0, 1] == 0).all()


def test_selection(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """``NETCL_ATTENTION_KERNEL`` forces a family through the public op; ``auto`` keeps the
    row kernels on CPU devices; head dims beyond 128 fall back to the rows; a bad value names
    the variable."""
    _opencl(dev)
    q, k, v = _rand((1, 5, 32), 1), _rand((1, 6, 32), 2), _rand((1, 6, 32), 3)
    plan = _plan(dev, q, k, v, None, False)
    gpu = dev.device_type.lower() == "gpu"
    assert _attention_fused.kernel_choice(plan) == ("tiled" if gpu else "rows")
    assert _attention_fused.kernel_choice(plan, "rows") == "rows"
    wide = _plan(dev, _rand((1, 2, 160), 1), _rand((1, 2, 160), 2), _rand((1, 2, 8), 3), None,
                 False)
    assert _attention_fused.kernel_choice(wide, "tiled") == "rows"
    calls: list[str] = []
    real = _attention_fused._tiled_kernels

    def spy(plan: Any, names: tuple[str, ...], *args: Any) -> Any:
        calls.extend(names)
        return real(plan, names, *args)

    monkeypatch.setattr(_attention_fused, "_tiled_kernels", spy)
    monkeypatch.setenv("NETCL_ATTENTION_KERNEL", "Tiled")
    got = ops.scaled_dot_product_attention(_up(dev, q), _up(dev, k), _up(dev, v))
    assert calls == ["attn_fwd_tiled"]
    assert_close(got.to_host(), ref.sdpa(q, k, v)[0], "float32", 10)
    monkeypatch.setenv("NETCL_ATTENTION_KERNEL", "rows")
    ops.scaled_dot_product_attention(_up(dev, q), _up(dev, k), _up(dev, v))
    assert calls == ["attn_fwd_tiled"]
    monkeypatch.setenv("NETCL_ATTENTION_KERNEL", "fast")
    with pytest.raises(ValueError, match="NETCL_ATTENTION_KERNEL must be one of auto, rows"):
        _attention_fused.kernel_choice(plan)


def test_tiled_config() -> None:
    for name in _attention_tiled.TILED_KERNELS:
        for e in (16, 64, 80, 128):
            block = _attention_tiled.tiled_config(name, e, e, 49152)
            assert block is not None, (name, e)
            assert _attention_tiled.tiled_local_bytes(name, e, e, *block) <= 49152
        assert _attention_tiled.tiled_config(name, 129, 64, 1 << 20) is None
        assert _attention_tiled.tiled_config(name, 64, 64, 4096) is None


def test_refused_build_falls_back(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch,
                                  tmp_path: Path) -> None:
    """A GPU driver that refuses the tiled programs: the default choice warns once and runs
    the row kernels from then on; a forced tiled family raises the build error."""
    _opencl(dev)
    from netcl.core.kernels.cache import KernelBuildError

    def refuse(*args: Any) -> Any:
        raise KernelBuildError("attn_fwd_tiled", "gpu", "", "no", tmp_path / "x.cl")

    monkeypatch.setattr(_attention_fused, "tiled_family", refuse)
    monkeypatch.setattr(_attention_fused, "is_gpu", lambda device: True)
    monkeypatch.setattr(_attention_fused, "_tiled_refused", set())
    q, k, v = _rand((1, 5, 32), 1), _rand((1, 6, 32), 2), _rand((1, 6, 32), 3)
    plan = _plan(dev, q, k, v, None, False)
    assert _attention_fused.kernel_choice(plan) == "tiled"
    with pytest.raises(KernelBuildError):
        _attention_fused.fused_forward(plan, 0, 0, kernel="tiled")
    with pytest.warns(RuntimeWarning, match="tiled attention kernels do not build"):
        out, _ = _attention_fused.fused_forward(plan, 0, 0)
    assert_close(out.to_host(), ref.sdpa(q, k, v)[0], "float32", 10)
    assert _attention_fused.kernel_choice(plan) == "rows"
