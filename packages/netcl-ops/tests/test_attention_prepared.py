"""The fused attention backward's D = rowsum(dO * O) kernel (``attn_bwd_d`` through
``row_dot``) against NumPy float64 on every backend, and remembered attention calls (NOTE
[ Remembered attention launches ]): a repeat launches what the first call did, with no
planning, and gives the same bits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops import _attention, _attention_fused, _attention_plan, _attention_prepared
from netcl.ops._attention_fused import row_dot


def _fused_device(dev: DeviceHandle) -> None:
    if dev.backend == "cpu":
        pytest.skip("the fused kernels run on OpenCL devices")


def _up(dev: DeviceHandle, a: Any, dtype: str = "float32") -> Tensor:
    return Tensor.from_host(dev.queue, np.asarray(a), dtype=dtype)


_KEEP: list[Tensor] = []  # the buffers _at_offset's views read (else the pool reuses them)


def _at_offset(dev: DeviceHandle, a: Any, dtype: str, offset: int) -> Tensor:
    """``a`` stored from element ``offset`` of a larger buffer (a view, as a slice gives)."""
    flat = np.concatenate([np.full(offset, 7.0), np.asarray(a).reshape(-1), np.full(3, 7.0)])
    whole = _up(dev, flat, dtype)
    if whole.array is not None:
        return _up(dev, a, dtype)
    _KEEP.append(whole)  # the view does not own the buffer: its owner must outlive it
    return Tensor(shape=tuple(a.shape), dtype=whole.dtype, queue=whole.queue,
                  context=whole.context, buffer=whole.buffer, offset=offset,
                  _backend=whole._backend)


def _rounded(a: Any, dtype: str) -> Any:
    return np.asarray(a).astype(dtype).astype(np.float64)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("L", [1, 7, 33, 257])
@pytest.mark.parametrize("E", [32, 64, 80, 128])
def test_row_dot_matches_float64(dev: DeviceHandle, dtype: str, L: int, E: int) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} needs cl_khr_fp64")
    rng = np.random.default_rng(L * 1000 + E)
    # (B, L, H, E) activations seen as (B, H, L, E), as a transformer's heads are
    g = rng.standard_normal((2, L, 3, E)).transpose(0, 2, 1, 3)
    o = rng.standard_normal((2, L, 3, E)).transpose(0, 2, 1, 3)
    tg = ops.permute(_up(dev, g.transpose(0, 2, 1, 3), dtype), (0, 2, 1, 3))
    to = _at_offset(dev, np.ascontiguousarray(o), dtype, 5)  # odd: misaligned for vectors
    got = row_dot(tg, to)
    want = np.einsum("...e,...e->...", _rounded(g, dtype), _rounded(o, dtype))
    acc = "float64" if dtype == "float64" else "float32"
    assert got.shape == (2, 3, L) and got.dtype == acc
    assert_close(got.to_host(), want, acc, grad=True)
    # a fixed order: the same bits again
    np.testing.assert_array_equal(row_dot(tg, to).to_host(), got.to_host())


def test_row_dot_small_rows(dev: DeviceHandle) -> None:
    """Rows shorter than the kernel's lanes, and one row."""
    for shape in ((5, 3), (1, 8), (16,)):
        a = np.random.default_rng(1).standard_normal(shape)
        b = np.random.default_rng(2).standard_normal(shape)
        got = row_dot(_up(dev, a), _up(dev, b)).to_host()
        assert_close(got, (_rounded(a, "float32") * _rounded(b, "float32")).sum(-1),
                     grad=True)


def test_row_dot_errors(dev: DeviceHandle) -> None:
    a = _up(dev, np.ones((2, 4)))
    with pytest.raises(TypeError, match="share a float dtype"):
        row_dot(a, _up(dev, np.ones((2, 4)), "float16"))
    with pytest.raises(ValueError, match=r"one shape.*\(2, 4\) and \(2, 3\)"):
        row_dot(a, _up(dev, np.ones((2, 3))))
    with pytest.raises(TypeError, match="must be Tensors"):
        row_dot(a, np.ones((2, 4)))  # type: ignore[arg-type]


def _qkvg(dev: DeviceHandle, shape: tuple[int, ...], dtype: str = "float32",
          seed: int = 0) -> list[Tensor]:
    rng = np.random.default_rng(seed)
    return [_up(dev, rng.standard_normal(shape), dtype) for _ in range(4)]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_backward_launches_three_kernels(dev: DeviceHandle, dtype: str) -> None:
    """D in one launch: the fused backward is attn_bwd_d, dq and dk/dv, first call and
    repeats alike, and D from the ops (NETCL_ATTENTION_DELTA=ops) agrees."""
    _fused_device(dev)
    q, k, v, g = _qkvg(dev, (2, 2, 9, 32), dtype)
    out, lse, stream = ops.scaled_dot_product_attention_forward(q, k, v, is_causal=True)
    grads = []
    for _ in range(3):
        with count_launches() as launches:
            grads.append(ops.scaled_dot_product_attention_backward(
                g, q, k, v, out, lse, is_causal=True, stream=stream))
        assert launches[0] == 3
    for got in grads[1:]:
        for a, b in zip(got[:3], grads[0][:3]):
            np.testing.assert_array_equal(a.to_host(), b.to_host())
    plan = _attention_plan.plan_attention(q, k, v, None, 0.0, True, None, False)
    with count_launches() as launches:
        old = _attention_fused.fused_backward(plan, g, out, lse, 0, 0, delta="ops")
    assert launches[0] > 3  # the mul and the row sum (and two casts for float16)
    for a, b in zip(old, grads[0][:3]):
        assert_close(a.to_host(), b.to_host(), dtype, grad=True)
    with pytest.raises(ValueError, match="delta must be one of kernel, ops, got 'x'"):
        _attention_fused.fused_backward(plan, g, out, lse, 0, 0, delta="x")


def _planless(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any) -> None:
        raise AssertionError("a remembered call planned again")
    monkeypatch.setattr(_attention, "plan_attention", refuse)


@pytest.mark.parametrize("kernel", ["rows", "tiled"])
@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_remembered_calls_repeat_the_first(dev: DeviceHandle, mask: str | None, kernel: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat (no planning: plan_attention refuses) gives the first call's bits, into new
    tensors of the caller's shapes; other tensors of the same shapes give their own result.
    Both portable families (the switch is part of the key)."""
    _fused_device(dev)
    monkeypatch.setenv("NETCL_ATTENTION_KERNEL", kernel)
    q, k, v, g = _qkvg(dev, (2, 3, 7, 32))
    m = None
    if mask == "bool":
        m = _up(dev, np.random.default_rng(5).random((2, 1, 1, 7)) > 0.3, "uint8")
    elif mask == "float":
        m = _up(dev, np.random.default_rng(5).standard_normal((7, 7)))
    out, lse, stream = ops.scaled_dot_product_attention_forward(q, k, v, m, scale=0.3)
    first = ops.scaled_dot_product_attention_backward(g, q, k, v, out, lse, m, scale=0.3,
                                                      stream=stream)
    with monkeypatch.context() as patched:
        _planless(patched)
        out2, lse2, _ = ops.scaled_dot_product_attention_forward(q, k, v, m, scale=0.3)
        again = ops.scaled_dot_product_attention_backward(g, q, k, v, out2, lse2, m, scale=0.3,
                                                          stream=stream)
        assert out2.buffer is not out.buffer and out2.shape == out.shape
        np.testing.assert_array_equal(out2.to_host(), out.to_host())
        np.testing.assert_array_equal(lse2.to_host(), lse.to_host())
        for a, b in zip(again[:3], first[:3]):
            assert a.shape == b.shape
            np.testing.assert_array_equal(a.to_host(), b.to_host())
        assert again[3] is None
        q2, k2, v2, _ = _qkvg(dev, (2, 3, 7, 32), seed=9)
        other = ops.scaled_dot_product_attention_forward(q2, k2, v2, m, scale=0.3)[0]
    plan = _attention_plan.plan_attention(q2, k2, v2, m, 0.0, False, 0.3, False)
    want = _attention_fused.fused_forward(plan, 0, 0, kernel=kernel)[0]
    np.testing.assert_array_equal(other.to_host(), want.to_host().reshape(other.shape))


def test_remembered_keys(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a repeat must not share: another offset, scalar type, switch or a NumPy tensor
    plans again; calls that copied or summed a gradient are not kept."""
    _fused_device(dev)
    q, k, v, _ = _qkvg(dev, (2, 5, 32))
    ops.scaled_dot_product_attention_forward(q, k, v, scale=1)
    with pytest.raises(TypeError, match="scale must be a float"):
        ops.scaled_dot_product_attention_forward(q, k, v, scale=True)
    key = _attention_prepared.call_key("fwd", (q, k, v, None), 0.0, False, 1, False)
    assert _attention_prepared.lookup(key) is not None
    monkeypatch.setenv("NETCL_ATTENTION_KERNEL", "rows")
    assert _attention_prepared.call_key("fwd", (q, k, v, None), 0.0, False, 1, False) != key
    assert _attention_prepared.call_key("fwd", (q.to_host(), k, v, None), 0.0, False, 1,
                                        False) is None
    # an operand whose broadcast is materialized: planned every time
    qb, kb = _up(dev, np.ones((2, 1, 4, 3, 32))), _up(dev, np.ones((2, 3, 4, 3, 32)))
    ops.scaled_dot_product_attention_forward(qb, kb, kb)
    key = _attention_prepared.call_key("fwd", (qb, kb, kb, None), 0.0, False, None, False)
    assert _attention_prepared.lookup(key) is None
    # grouped-query: dk and dv are summed over the group, so the backward is not kept
    qg, kg = _up(dev, np.ones((1, 4, 3, 32))), _up(dev, np.ones((1, 2, 3, 32)))
    out, lse, _ = ops.scaled_dot_product_attention_forward(qg, kg, kg, enable_gqa=True)
    ops.scaled_dot_product_attention_backward(qg, qg, kg, kg, out, lse, enable_gqa=True)
    key = _attention_prepared.call_key("bwd", (qg, qg, kg, kg, out, lse, None), 0.0, False,
                                       None, True, False)
    assert _attention_prepared.lookup(key) is None


def test_remembered_dropout_draws_new_words(dev: DeviceHandle,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A remembered dropout call takes the default generator's next words (or the given
    stream), as the first call does."""
    _fused_device(dev)
    q, k, v, g = _qkvg(dev, (1, 2, 6, 32))
    ops.scaled_dot_product_attention_forward(q, k, v, dropout_p=0.3)
    with monkeypatch.context() as patched:
        _planless(patched)
        a, lse_a, sa = ops.scaled_dot_product_attention_forward(q, k, v, dropout_p=0.3)
        b, _, sb = ops.scaled_dot_product_attention_forward(q, k, v, dropout_p=0.3)
        assert sb[1] == sa[1] + 2 * 6 * 6 and sb[0] == sa[0]
        assert not np.array_equal(a.to_host(), b.to_host())
        seeded = ops.scaled_dot_product_attention_forward(q, k, v, dropout_p=0.3, seed=sa[0],
                                                          offset=sa[1])[0]
        np.testing.assert_array_equal(seeded.to_host(), a.to_host())
    # the backward of the first, planned and remembered, regenerates the first's mask
    want = ops.scaled_dot_product_attention_backward(g, q, k, v, a, lse_a, dropout_p=0.3,
                                                     stream=sa)
    with monkeypatch.context() as patched:
        _planless(patched)
        got = ops.scaled_dot_product_attention_backward(g, q, k, v, a, lse_a, dropout_p=0.3,
                                                        stream=sa)
        other = ops.scaled_dot_product_attention_backward(g, q, k, v, a, lse_a,
                                                          dropout_p=0.3, stream=sb)
    for x, y in zip(got[:3], want[:3]):
        np.testing.assert_array_equal(x.to_host(), y.to_host())
    assert not np.array_equal(other[0].to_host(), want[0].to_host())


def test_doctests() -> None:
    import doctest
    assert doctest.testmod(_attention_fused).failed == 0
