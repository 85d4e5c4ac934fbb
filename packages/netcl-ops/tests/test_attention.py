"""scaled_dot_product_attention on every backend: forward and backward against a float64
NumPy reference (causal, bool and float masks, broadcast batch dims, odd L != S, head dims
32/64/128, grouped-query, dropout regenerated in the backward), float16, and typed errors."""

from __future__ import annotations

import doctest
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops import _attention, _attention_fused, _attention_plain, _attention_plan
from netcl.ops.testing import one_opencl_cpu_device, skip_unless_one_opencl_cpu_device

if TYPE_CHECKING:
    import test_attention_reference as ref
else:
    _spec = importlib.util.spec_from_file_location(
        "netcl_ops_attention_reference", Path(__file__).with_name("test_attention_reference.py"))
    ref = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(ref)


def _fused_once(dev: DeviceHandle) -> None:
    """Run on NumPy (the plain path), a GPU and one OpenCL CPU device only: the fused kernels
    are the same program on every OpenCL CPU device, and slow to build (CI time)."""
    if dev.backend != "cpu":
        skip_unless_one_opencl_cpu_device(dev)


def _rand(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> Any:
    return np.random.default_rng(seed).standard_normal(shape) * scale


def _up(dev: DeviceHandle, a: Any, dtype: str = "float32") -> Tensor:
    return Tensor.from_host(dev.queue, np.asarray(a), dtype=dtype)


def _mask_up(dev: DeviceHandle, m: Any, dtype: str) -> Tensor:
    return _up(dev, m.astype(np.uint8), "uint8") if m.dtype == bool else _up(dev, m, dtype)


# (q shape, k shape, v shape, mask shape or None, mask kind, causal)
CASES = [
    ((1, 1, 8), (1, 1, 8), (1, 1, 8), None, None, False),          # L = S = 1
    ((2, 7, 32), (2, 33, 32), (2, 33, 16), None, None, False),     # odd, L != S, Ev != E
    ((2, 3, 33, 64), (2, 3, 7, 64), (2, 3, 7, 64), None, None, True),   # causal, L > S
    ((3, 7, 32), (3, 33, 32), (3, 33, 32), None, None, True),      # causal, L < S
    ((2, 2, 9, 32), (2, 2, 11, 32), (2, 2, 11, 16), (2, 1, 1, 11), "bool", False),  # padding
    ((2, 9, 32), (2, 9, 32), (2, 9, 32), (9, 9), "float", True),    # float mask + causal
    ((2, 1, 7, 32), (1, 3, 5, 32), (1, 3, 5, 32), (7, 5), "float", False),  # batch broadcast
    ((1, 5, 128), (1, 6, 128), (1, 6, 128), (1, 5, 6), "bool", False),   # head dim 128
]


def _make(case: Any, seed: int = 0) -> tuple[Any, ...]:
    qs, ks, vs, ms, kind, causal = case
    q, k, v = _rand(qs, seed), _rand(ks, seed + 1), _rand(vs, seed + 2)
    mask = None
    if kind == "bool":
        mask = np.random.default_rng(seed + 3).random(ms) > 0.3
        mask[..., 0] = True  # every row keeps a key (a fully masked row is tested apart)
    elif kind == "float":
        mask = _rand(ms, seed + 3, 0.5)
    return q, k, v, mask, causal


def _grads_close(got: Any, want: Any, dtype: str, scale: float) -> None:
    for name, g, w in zip(("dq", "dk", "dv", "dmask"), got, want):
        if w is None:
            assert g is None, name
            continue
        assert g.shape == w.shape, (name, g.shape, w.shape)
        assert_close(g.to_host(), w, dtype, scale, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_forward_backward(dev: DeviceHandle, case: Any) -> None:
    _fused_once(dev)
    q, k, v, mask, causal = _make(case)
    tq, tk, tv = _up(dev, q), _up(dev, k), _up(dev, v)
    tm = None if mask is None else _mask_up(dev, mask, "float32")
    out, lse, stream = ops.scaled_dot_product_attention_forward(tq, tk, tv, tm,
                                                                is_causal=causal)
    g = _rand(out.shape, 9)
    want, wgrads = ref.sdpa(q, k, v, mask, causal, grad=g)
    assert out.shape == want.shape and out.dtype == "float32"
    assert_close(out.to_host(), want, "float32", 10)
    got = ops.scaled_dot_product_attention_backward(
        _up(dev, g), tq, tk, tv, out, lse, tm, is_causal=causal, stream=stream,
        mask_grad=True)
    _grads_close(got, wgrads, "float32", 20)


def test_scale_and_forward_only(dev: DeviceHandle) -> None:
    q, k, v = _rand((2, 5, 32), 1), _rand((2, 6, 32), 2), _rand((2, 6, 32), 3)
    out = ops.scaled_dot_product_attention(_up(dev, q), _up(dev, k), _up(dev, v), scale=0.3)
    assert_close(out.to_host(), ref.sdpa(q, k, v, scale=0.3)[0], "float32", 10)


def test_float64(dev: DeviceHandle) -> None:
    _fused_once(dev)
    if not supports_dtype(dev, "float64"):
        pytest.skip("no float64 on this device")
    q, k, v = _rand((2, 7, 8), 1), _rand((2, 5, 8), 2), _rand((2, 5, 4), 3)
    tq, tk, tv = (_up(dev, a, "float64") for a in (q, k, v))
    out, lse, stream = ops.scaled_dot_product_attention_forward(tq, tk, tv, is_causal=True)
    g = _rand(out.shape, 4)
    want, wgrads = ref.sdpa(q, k, v, causal=True, grad=g)
    assert_close(out.to_host(), want, "float64", 10)
    got = ops.scaled_dot_product_attention_backward(_up(dev, g, "float64"), tq, tk, tv, out,
                                                    lse, is_causal=True, stream=stream)
    _grads_close(got, wgrads, "float64", 100)


def test_float16(dev: DeviceHandle) -> None:
    q, k, v = _rand((2, 2, 33, 64), 1), _rand((2, 2, 17, 64), 2), _rand((2, 2, 17, 64), 3)
    q, k, v = (a.astype(np.float16) for a in (q, k, v))
    tq, tk, tv = (_up(dev, a, "float16") for a in (q, k, v))
    out, lse, stream = ops.scaled_dot_product_attention_forward(tq, tk, tv, is_causal=True)
    assert out.dtype == "float16"
    g = _rand(out.shape, 4).astype(np.float16)
    want, wgrads = ref.sdpa(q, k, v, causal=True, grad=g)
    assert_close(out.to_host(), want, "float16", 1)
    got = ops.scaled_dot_product_attention_backward(_up(dev, g, "float16"), tq, tk, tv, out,
                                                    lse, is_causal=True, stream=stream)
    _grads_close(got, wgrads, "float16", 3)


def test_fully_masked_row_gives_zero(dev: DeviceHandle) -> None:
    _fused_once(dev)
    q, k, v = _rand((1, 3, 32), 1), _rand((1, 4, 32), 2), _rand((1, 4, 16), 3)
    mask = np.ones((3, 4), bool)
    mask[1] = False
    tq, tk, tv = _up(dev, q), _up(dev, k), _up(dev, v)
    tm = _mask_up(dev, mask, "float32")
    out, lse, stream = ops.scaled_dot_product_attention_forward(tq, tk, tv, tm)
    host = out.to_host()
    assert (host[0, 1] == 0).all() and np.isneginf(lse.to_host()[0, 1])
    assert_close(host, ref.sdpa(q, k, v, mask)[0], "float32", 10)
    g = np.ones(out.shape)
    grads = ops.scaled_dot_product_attention_backward(_up(dev, g), tq, tk, tv, out, lse, tm,
                                                      stream=stream)
    assert np.isfinite(grads[0].to_host()).all() and (grads[0].to_host()[0, 1] == 0).all()


def test_grouped_query(dev: DeviceHandle) -> None:
    _fused_once(dev)
    q, k, v = _rand((2, 6, 5, 32), 1), _rand((2, 2, 7, 32), 2), _rand((2, 2, 7, 16), 3)
    tq, tk, tv = _up(dev, q), _up(dev, k), _up(dev, v)
    out, lse, stream = ops.scaled_dot_product_attention_forward(tq, tk, tv, is_causal=True,
                                                                enable_gqa=True)
    kr, vr = np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1)
    g = _rand(out.shape, 4)
    want, (dq, dk, dv, _) = ref.sdpa(q, kr, vr, causal=True, grad=g)
    assert_close(out.to_host(), want, "float32", 10)
    got = ops.scaled_dot_product_attention_backward(
        _up(dev, g), tq, tk, tv, out, lse, is_causal=True, enable_gqa=True, stream=stream)
    assert dk is not None and dv is not None
    want_grads = [dq, dk.reshape(2, 2, 3, 7, 32).sum(2), dv.reshape(2, 2, 3, 7, 16).sum(2)]
    _grads_close(got[:3], want_grads, "float32", 20)


def test_dropout_mask_regenerated(dev: DeviceHandle) -> None:
    q, k, v = _rand((2, 9, 32), 1), _rand((2, 11, 32), 2), _rand((2, 11, 16), 3)
    tq, tk, tv = _up(dev, q), _up(dev, k), _up(dev, v)
    p, seed, offset = 0.3, 1234, 8
    out, lse, stream = ops.scaled_dot_product_attention_forward(
        tq, tk, tv, dropout_p=p, is_causal=True, seed=seed, offset=offset)
    assert stream == (seed, offset)
    keep = ref.dropout_keep((2, 9, 11), p, seed, offset)
    g = _rand(out.shape, 4)
    want, wgrads = ref.sdpa(q, k, v, causal=True, keep=keep, p=p, grad=g)
    assert_close(out.to_host(), want, "float32", 10)
    got = ops.scaled_dot_product_attention_backward(_up(dev, g), tq, tk, tv, out, lse,
                                                    dropout_p=p, is_causal=True, stream=stream)
    _grads_close(got, wgrads, "float32", 20)


def test_dropout_draws_from_the_default_generator(dev: DeviceHandle) -> None:
    _fused_once(dev)
    t = _up(dev, _rand((1, 6, 32), 1))
    ops.manual_seed(5)
    a = ops.scaled_dot_product_attention(t, t, t, dropout_p=0.5).to_host()
    b = ops.scaled_dot_product_attention(t, t, t, dropout_p=0.5).to_host()
    ops.manual_seed(5)
    assert (ops.scaled_dot_product_attention(t, t, t, dropout_p=0.5).to_host() == a).all()
    assert not (a == b).all()


# (L, S, E, Ev, causal, mask kind): several row groups and key tiles, odd lengths
MMA_CASES = [(67, 70, 32, 16, True, None), (19, 70, 32, 16, False, "bool"),
             (33, 7, 16, 32, True, "float")]


@pytest.mark.parametrize("case", MMA_CASES, ids=["causal", "bool", "float"])
def test_tensor_core_forward_emulated(dev: DeviceHandle, case: Any) -> None:
    """attn_fwd_mma, attn_bwd_dq_mma and attn_bwd_dkdv_mma with their PTX emulated in plain
    C (the tiling, fragment maps, masking and online softmax; the GPU runs the instructions)
    against the float64 reference."""
    if dev.backend == "cpu" or one_opencl_cpu_device(dev) is not None:
        pytest.skip("an emulated OpenCL kernel: one OpenCL CPU device")
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
    tm = None if mask is None else _mask_up(dev, mask, "float16")
    plan = _attention_plan.plan_attention(_up(dev, q, "float16"), _up(dev, k, "float16"),
                                          _up(dev, v, "float16"), tm, 0.0, causal, None, False)
    out, lse = _attention_fused.fused_forward(plan, 0, 0, mma="emulate")
    g = _rand(out.shape, 5).astype(np.float16)
    want, wgrads = ref.sdpa(q, k, v, mask, causal, grad=g)
    assert_close(out.to_host(), want, "float16", 1)
    plain_lse = _attention_fused.fused_forward(plan, 0, 0, mma="off")[1].to_host()
    assert_close(lse.to_host(), plain_lse, "float32", 10)
    got = _attention_fused.fused_backward(plan, _up(dev, g, "float16"), out, lse, 0, 0,
                                          mma="emulate")
    _grads_close(got, wgrads[:3], "float16", 3)


def test_causal_keep(dev: DeviceHandle) -> None:
    got = _attention_plain.causal_keep(dev.queue, 3, 5).to_host()
    assert (got.astype(bool) == np.tri(3, 5, dtype=bool)).all()


ERRORS = [
    (((2, 3, 8), (2, 4, 7), (2, 4, 8)), {}, ValueError, "same last dimension E"),
    (((2, 3, 8), (2, 4, 8), (2, 5, 8)), {}, ValueError, "same length S"),
    (((2, 3, 8), (3, 4, 8), (3, 4, 8)), {}, ValueError, r"batch dimensions .* must broadcast"),
    (((8,), (4, 8), (4, 8)), {}, ValueError, "at least 2 dimensions"),
    (((3, 8), (4, 8), (4, 8)), {"dropout_p": 1.0}, ValueError, r"dropout_p must be in \[0, 1\)"),
    (((3, 8), (4, 8), (4, 8)), {"dropout_p": -0.1}, ValueError, "dropout_p"),
    (((3, 8), (4, 8), (4, 8)), {"scale": float("nan")}, ValueError, "scale must be finite"),
    (((3, 8), (4, 8), (4, 8)), {"mask": (3, 5)}, ValueError, r"\(3, 5\) does not broadcast"),
    (((3, 8), (4, 8), (4, 8)), {"mask": (3, 4), "mask_dtype": "int32"}, TypeError,
     "boolean .* or float"),
    (((3, 8), (4, 8), (4, 8)), {"mask": (3, 4), "mask_dtype": "float64"}, TypeError,
     "query's dtype float32"),
    (((2, 6, 3, 8), (2, 4, 4, 8), (2, 4, 4, 8)), {"enable_gqa": True}, ValueError,
     "heads that divide"),
]


@pytest.mark.parametrize("err", ERRORS, ids=[e[3][:20] for e in ERRORS])
def test_errors(dev: DeviceHandle, err: Any) -> None:
    shapes, kw, exc, pattern = err
    kw = dict(kw)
    args = [_up(dev, np.zeros(s)) for s in shapes]
    if "mask" in kw:
        ms, dt = kw.pop("mask"), kw.pop("mask_dtype", "float32")
        if dt == "float64" and not supports_dtype(dev, "float64"):
            pytest.skip("no float64 on this device")
        kw["attn_mask"] = _up(dev, np.zeros(ms), dt)
    with pytest.raises(exc, match=f"scaled_dot_product_attention: .*{pattern}"):
        ops.scaled_dot_product_attention(args[0], args[1], args[2], **kw)


def test_type_errors(dev: DeviceHandle) -> None:
    t = _up(dev, np.zeros((3, 4)))
    i = _up(dev, np.zeros((3, 4)), "int32")
    with pytest.raises(TypeError, match="scaled_dot_product_attention: key must be a netcl"):
        ops.scaled_dot_product_attention(t, np.zeros((3, 4)), t)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="scaled_dot_product_attention: value must be a float"):
        ops.scaled_dot_product_attention(t, t, i)
    with pytest.raises(TypeError, match="share a dtype"):
        ops.scaled_dot_product_attention(t, t, _up(dev, np.zeros((3, 4)), "float16"))
    with pytest.raises(TypeError, match="dropout_p must be a float"):
        ops.scaled_dot_product_attention(t, t, t, dropout_p=True)


def test_torch_agrees(dev: DeviceHandle) -> None:
    _fused_once(dev)
    torch = pytest.importorskip("torch")
    for case in CASES[1:6]:
        q, k, v, mask, causal = _make(case, 3)
        tm = None if mask is None else _mask_up(dev, mask, "float32")
        got = ops.scaled_dot_product_attention(_up(dev, q), _up(dev, k), _up(dev, v), tm,
                                               is_causal=False if mask is not None else causal)
        args = [torch.tensor(a, dtype=torch.float64) for a in (q, k, v)]
        m = None if mask is None else torch.tensor(mask)
        want = torch.nn.functional.scaled_dot_product_attention(
            *args, attn_mask=m, is_causal=False if mask is not None else causal)
        assert_close(got.to_host(), want.numpy(), "float32", 10)


def test_doctests() -> None:
    assert doctest.testmod(_attention).failed == 0
