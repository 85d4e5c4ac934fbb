"""The tensor-core attention kernels (attn_fwd_mma, attn_bwd_fused_mma, attn_bwd_dq_mma,
attn_bwd_dkdv_mma) with their PTX emulated in plain C, in every load variant of
NETCL_ATTN_MMA_LOADS (cp.async or register copies, ldmatrix or scalar fragments), against the
float64 reference: odd lengths (1, 7, 33, 257), head dims 16 to 128, causal, bool and float
masks, several double-buffered key tiles. The GPU runs the instructions; here the tiling,
swizzle, fragment maps, staging order, masking and softmax are checked. The backward tests
of both NETCL_ATTENTION_BWD values run the hardware kernels where the device has tensor
cores (an NVIDIA GPU), the emulated ones on the OpenCL CPU device."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernels.family import KernelFamily
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close
from netcl.ops import (
    _attention_fused,
    _attention_kernels,
    _attention_mma,
    _attention_mma_backward,
    _attention_plan,
    _attention_prepared,
)
from netcl.ops._matmul_mma import mma_available
from netcl.ops.testing import one_opencl_cpu_device

if TYPE_CHECKING:
    import test_attention_reference as ref
else:
    _spec = importlib.util.spec_from_file_location(
        "netcl_ops_attention_mma_reference",
        Path(__file__).with_name("test_attention_reference.py"))
    ref = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(ref)


def _rand(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> Any:
    return np.random.default_rng(seed).standard_normal(shape) * scale


def _up(dev: DeviceHandle, a: Any, dtype: str) -> Tensor:
    return Tensor.from_host(dev.queue, np.asarray(a), dtype=dtype)


@pytest.fixture
def emulated(dev: DeviceHandle) -> DeviceHandle:
    """One OpenCL CPU device (the emulated kernels are the same program on each)."""
    if dev.backend == "cpu" or one_opencl_cpu_device(dev) is not None:
        pytest.skip("an emulated OpenCL kernel: one OpenCL CPU device")
    return dev


def _with_loads(monkeypatch: pytest.MonkeyPatch, loads: str) -> None:
    """Build the attention programs afresh with ``NETCL_ATTN_MMA_LOADS=loads``."""
    monkeypatch.setenv("NETCL_ATTN_MMA_LOADS", loads)
    family = KernelFamily("ops.attention_loads", _attention_kernels.attention_family.builder)
    monkeypatch.setattr(_attention_fused, "attention_family", family)


# (L, S, E, Ev, causal, mask kind): one query row over five key tiles; 128-wide heads (32-key
# tiles, forward only); a causal diagonal across tiles; a single key; a 16-wide head; inner
# query tiles of the dK/dV kernel beside keys past S under a mask
CASES = [(1, 257, 64, 64, False, "float"), (33, 70, 128, 128, True, "bool"),
         (70, 129, 64, 32, True, None), (7, 1, 32, 16, False, "bool"),
         (33, 33, 16, 64, False, None), (130, 40, 32, 32, False, "bool")]


def _check(dev: DeviceHandle, case: Any) -> None:
    L, S, E, Ev, causal, kind = case
    q = _rand((2, L, E), 1).astype(np.float16)
    k = _rand((2, S, E), 2).astype(np.float16)
    v = _rand((2, S, Ev), 3).astype(np.float16)
    mask = None
    if kind == "bool":
        mask = np.random.default_rng(4).random((L, S)) > 0.3
        mask[:, 0] = True
    elif kind == "float":
        mask = _rand((2, 1, S), 4, 0.5).astype(np.float16)
    tm = None
    if mask is not None:
        tm = (_up(dev, mask.astype(np.uint8), "uint8") if mask.dtype == bool
              else _up(dev, mask, "float16"))
    plan = _attention_plan.plan_attention(_up(dev, q, "float16"), _up(dev, k, "float16"),
                                          _up(dev, v, "float16"), tm, 0.0, causal, None, False)
    out, lse = _attention_fused.fused_forward(plan, 0, 0, mma="emulate")
    g = _rand(out.shape, 5).astype(np.float16)
    want, wgrads = ref.sdpa(q, k, v, mask, causal, grad=g)
    assert_close(out.to_host(), want, "float16", 1)
    plain_lse = _attention_fused.fused_forward(plan, 0, 0, mma="off")[1].to_host()
    assert_close(lse.to_host(), plain_lse, "float32", 10)
    if not _attention_mma.mma_backward_ok(E, Ev):
        return
    got = _attention_fused.fused_backward(plan, _up(dev, g, "float16"), out, lse, 0, 0,
                                          mma="emulate")
    for name, t, w in zip(("dq", "dk", "dv"), got, wgrads[:3]):
        assert w is not None and t.shape == w.shape, (name, t.shape)
        assert_close(t.to_host(), w, "float16", 3, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=[f"L{c[0]}-S{c[1]}-E{c[2]}" for c in CASES])
def test_fast_loads(emulated: DeviceHandle, monkeypatch: pytest.MonkeyPatch,
                    case: Any) -> None:
    """cp.async copies into the two stages and ldmatrix fragments (the default)."""
    _with_loads(monkeypatch, "fast")
    _check(emulated, case)


@pytest.mark.parametrize("loads", ["legacy", "sync", "scalar"])
def test_other_loads(emulated: DeviceHandle, monkeypatch: pytest.MonkeyPatch,
                     loads: str) -> None:
    """The variants the GPU comparison forces read the same tiles the same way."""
    _with_loads(monkeypatch, loads)
    _check(emulated, CASES[2] if loads == "legacy" else CASES[3])


def test_four_warps(emulated: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """NETCL_ATTN_MMA_WARPS=4: 64 rows per work-group (the geometry before 8 warps)."""
    _with_loads(monkeypatch, "fast")
    for module in (_attention_mma, _attention_fused):
        monkeypatch.setattr(module, "MMA_THREADS", 128)
        monkeypatch.setattr(module, "MMA_ROWS", 64)
    _check(emulated, CASES[2])


def test_loads_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_ATTN_MMA_LOADS", "legacy")
    src = _attention_mma.mma_source("attn_fwd_mma", emulate=False)
    assert "#define ATTN_ASYNC" not in src and "#define ATTN_LDSM" not in src
    monkeypatch.setenv("NETCL_ATTN_MMA_LOADS", "")
    src = _attention_mma.mma_source("attn_fwd_mma", emulate=False)
    assert "#define ATTN_ASYNC" in src and "#define ATTN_LDSM" in src
    assert "cp.async.wait_group 1;" in src
    monkeypatch.setenv("NETCL_ATTN_MMA_LOADS", "tma")
    with pytest.raises(ValueError, match=r"NETCL_ATTN_MMA_LOADS must be one of .*'tma'"):
        _attention_mma.mma_loads()


def test_local_memory_fits() -> None:
    """Two stages plus the kept rows stay within NVIDIA's 48 KiB for every head dim taken."""
    from netcl.ops._matmul_mma_source import LOCAL_MEMORY_LIMIT

    dims = range(16, 129, 16)
    for e, ev in ((e, ev) for e in dims for ev in dims):
        assert _attention_mma.mma_local_bytes(e, ev, False) <= LOCAL_MEMORY_LIMIT, (e, ev)
        if _attention_mma.mma_backward_ok(e, ev):
            assert _attention_mma.mma_local_bytes(e, ev, True) <= LOCAL_MEMORY_LIMIT, (e, ev)
            assert _attention_mma.mma_fused_local_bytes(e, ev) <= LOCAL_MEMORY_LIMIT, (e, ev)
    assert _attention_mma.mma_local_bytes(128, 128, False) == 32768


@pytest.fixture
def mma_mode(dev: DeviceHandle) -> str:
    """``"hardware"`` on a device with tensor cores (the GPU runs the PTX), else
    ``"emulate"`` on one OpenCL CPU device (or a GPU without them)."""
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend runs no OpenCL kernels")
    if mma_available(dev.queue):
        return "hardware"
    if one_opencl_cpu_device(dev) is not None:
        pytest.skip("an emulated OpenCL kernel: one OpenCL CPU device")
    return "emulate"


# (L, S, E, Ev, causal, mask kind): one query row over three key blocks of 128, causal with
# L > S and nine query tiles of 32 (float masks), no mask, a 32-wide head with a bool mask
# and the causal diagonal across key blocks. The (E, Ev, mask) of CASES: the forward and
# split programs are those of test_fast_loads, the fused ones three more.
BWD_CASES = [(1, 257, 64, 64, False, "float"), (257, 33, 64, 64, True, "float"),
             (70, 129, 64, 32, False, None), (33, 257, 32, 32, True, "bool")]


@pytest.mark.parametrize("case", BWD_CASES, ids=[f"L{c[0]}-S{c[1]}-E{c[2]}-{c[5]}"
                                                 + ("-causal" if c[4] else "")
                                                 for c in BWD_CASES])
def test_forward_backward_fused_and_split(dev: DeviceHandle, mma_mode: str,
                                          monkeypatch: pytest.MonkeyPatch, case: Any) -> None:
    """attn_fwd_mma, then attn_bwd_fused_mma (NETCL_ATTENTION_BWD=fused: dQ by atomic adds
    into float32) and the two split kernels (the default), each against the float64
    reference; the launches recorded name the kernels that ran. The fused call's record,
    repeated by the remembered path (a fresh float32 workspace), gives the same gradients."""
    L, S, E, Ev, causal, kind = case
    q = _rand((2, L, E), 1).astype(np.float16)
    k = _rand((2, S, E), 2).astype(np.float16)
    v = _rand((2, S, Ev), 3).astype(np.float16)
    mask = None
    tm = None
    if kind == "bool":
        mask = np.random.default_rng(4).random((L, S)) > 0.3
        mask[:, 0] = True
        tm = _up(dev, mask.astype(np.uint8), "uint8")
    elif kind == "float":
        mask = _rand((2, 1, S), 4, 0.5).astype(np.float16)
        tm = _up(dev, mask, "float16")
    g = _rand((2, L, Ev), 5).astype(np.float16)
    want, wgrads = ref.sdpa(q, k, v, mask, causal, grad=g)
    tq, tk, tv, tg = (_up(dev, a, "float16") for a in (q, k, v, g))
    plan = _attention_plan.plan_attention(tq, tk, tv, tm, 0.0, causal, None, False)
    out, lse = _attention_fused.fused_forward(plan, 0, 0, mma=mma_mode)
    assert_close(out.to_host(), want, "float16", 1)
    monkeypatch.setenv("NETCL_ATTENTION_BWD", "fused")
    for bwd, ran in (("fused", "attn_bwd_fused_mma"), ("split", "attn_bwd_dq_mma")):
        if bwd == "split":
            monkeypatch.delenv("NETCL_ATTENTION_BWD")
        record = _attention_prepared.Record()
        record.tensors.update(q=tq, k=tk, v=tv)
        if tm is not None:
            record.tensors["mask"] = tm
        got = _attention_fused.fused_backward(plan, tg, out, lse, 0, 0, mma=mma_mode,
                                              record=record)
        names = [step[0].function_name for step in record.steps]
        assert ran in names, (bwd, names)
        for name, t, w in zip(("dq", "dk", "dv"), got, wgrads[:3]):
            assert w is not None and t.shape == w.shape, (name, t.shape)
            assert_close(t.to_host(), w, "float16", 3, err_msg=f"{bwd} {name}")
        if bwd == "fused" and case == BWD_CASES[0]:
            assert record.scratch == ["dqw"]
            key = ("test_forward_backward_fused_and_split", id(record))
            _attention_prepared.remember(key, record, (("dd", (2, L)), ("dq", q.shape),
                                                       ("dk", k.shape), ("dv", v.shape)), 0)
            entry = _attention_prepared.lookup(key)
            assert entry is not None and entry.outputs[-1] == ("dqw", (2, L, E), "float32")
            given = {"grad": tg, "q": tq, "k": tk, "v": tv, "out": out, "lse": lse}
            if tm is not None:
                given["mask"] = tm
            made = _attention_prepared.run(entry, dev.queue, given, 0, 0)
            _attention_prepared.forget()
            for name, t, w in zip(("dq", "dk", "dv"), made[1:], wgrads[:3]):
                assert_close(t.to_host(), w, "float16", 3, err_msg=f"repeated {name}")


def test_backward_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """NETCL_ATTENTION_BWD picks the tensor-core backward, is part of a remembered call's key
    and names the op and the choices when it is wrong."""
    assert "NETCL_ATTENTION_BWD" in _attention_prepared.ENV_SWITCHES
    monkeypatch.setenv("NETCL_ATTENTION_BWD", " Split ")
    assert _attention_fused.backward_choice() == "split"
    assert _attention_fused.backward_choice("fused") == "fused"
    monkeypatch.setenv("NETCL_ATTENTION_BWD", "both")
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention: NETCL_ATTENTION_BWD "
                                         r"must be one of fused, split, got 'both'"):
        _attention_fused.backward_choice()
    with pytest.raises(ValueError, match=r"bwd must be one of fused, split, got 'fast'"):
        _attention_fused.backward_choice("fast")
    monkeypatch.delenv("NETCL_ATTENTION_BWD")
    assert _attention_fused.backward_choice() == "split"


def test_fused_atomics_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """red.global.add.f32 by default; the vector red only with NETCL_ATTN_MMA_RED=v2; the
    emulated twin a compare-and-swap loop."""
    src = _attention_mma.mma_source("attn_bwd_fused_mma", emulate=False)
    assert "#define ATTN_RED_V2" not in src and "red.global.add.f32 [%0]" in src
    assert "atomic_cmpxchg" in _attention_mma.mma_source("attn_bwd_fused_mma", emulate=True)
    monkeypatch.setenv("NETCL_ATTN_MMA_RED", "v2")
    assert "#define ATTN_RED_V2" in _attention_mma.mma_source("attn_bwd_fused_mma", False)
    assert "#define ATTN_RED_V2" not in _attention_mma.mma_source("attn_bwd_fused_mma", True)
    monkeypatch.setenv("NETCL_ATTN_MMA_RED", "v4")
    with pytest.raises(ValueError, match=r"NETCL_ATTN_MMA_RED must be one of f32, v2, got 'v4'"):
        _attention_mma_backward.mma_red()
