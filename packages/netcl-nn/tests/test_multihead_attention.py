"""MultiheadAttention and functional.multi_head_attention_forward on every backend against a
float64 NumPy transcription of PyTorch's formulas (values, attention weights, and gradients by
finite differences of the reference): self- and cross-attention, kdim/vdim, odd sizes, bool
and float masks, key padding, bias_k/bias_v and the zero position, batch_first both ways,
unbatched input, the fused (need_weights=False) and materialized paths; PyTorch's layer's
state_dict loading (values and gradients against torch when installed); initialisation,
dropout, autocast, and the errors."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.nn import MultiheadAttention, autocast, manual_seed
from netcl.nn import functional as F

Array = np.ndarray[Any, Any]


# -- NumPy reference (PyTorch's multi_head_attention_forward, seq-first) ----------------------

def ref_additive(mask: Array | None) -> Array | None:
    if mask is None:
        return None
    return np.where(mask, -np.inf, 0.0) if mask.dtype == bool else mask.astype(np.float64)


def ref_mha(query: Array, key: Array, value: Array, w_q: Array, w_k: Array, w_v: Array,
            b_in: Array | None, w_out: Array, b_out: Array | None, num_heads: int,
            attn_mask: Array | None = None, key_padding_mask: Array | None = None,
            bias_k: Array | None = None, bias_v: Array | None = None,
            add_zero_attn: bool = False, batch_first: bool = False,
            average: bool = True, static_k: Array | None = None,
            static_v: Array | None = None) -> tuple[Any, Any]:
    """(output, weights) for batched input, float64."""
    if batch_first:
        query, key, value = (np.swapaxes(t, 0, 1) for t in (query, key, value))
    e = w_q.shape[0]
    b = np.zeros(3 * e) if b_in is None else b_in
    q, k, v = query @ w_q.T + b[:e], key @ w_k.T + b[e:2 * e], value @ w_v.T + b[2 * e:]
    length, n = q.shape[:2]
    d = e // num_heads

    def heads(t: Array) -> Any:
        return t.reshape(t.shape[0], n, num_heads, d).transpose(1, 2, 0, 3)

    q, k, v = heads(q), heads(k), heads(v)
    if static_k is not None:
        k = static_k.reshape(n, num_heads, -1, d)
    if static_v is not None:
        v = static_v.reshape(n, num_heads, -1, d)
    source = k.shape[2]
    mask = np.zeros((n, num_heads, length, source))
    am = ref_additive(attn_mask)
    if am is not None:
        mask = mask + (am if am.ndim == 2 else am.reshape(n, num_heads, length, source))
    kpm = ref_additive(key_padding_mask)
    if kpm is not None:
        mask = mask + kpm[:, None, None, :]
    if bias_k is not None and bias_v is not None:
        k = np.concatenate([k, np.broadcast_to(bias_k.reshape(1, num_heads, 1, d),
                                               (n, num_heads, 1, d))], axis=2)
        v = np.concatenate([v, np.broadcast_to(bias_v.reshape(1, num_heads, 1, d),
                                               (n, num_heads, 1, d))], axis=2)
        mask = np.pad(mask, ((0, 0), (0, 0), (0, 0), (0, 1)))
    if add_zero_attn:
        k = np.pad(k, ((0, 0), (0, 0), (0, 1), (0, 0)))
        v = np.pad(v, ((0, 0), (0, 0), (0, 1), (0, 0)))
        mask = np.pad(mask, ((0, 0), (0, 0), (0, 0), (0, 1)))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(d) + mask
    s = np.exp(s - s.max(-1, keepdims=True))
    weights = s / s.sum(-1, keepdims=True)
    out = (weights @ v).transpose(2, 0, 1, 3).reshape(length, n, e)
    out = out @ w_out.T + (0.0 if b_out is None else b_out)
    if batch_first:
        out = np.swapaxes(out, 0, 1)
    return out, (weights.mean(1) if average else weights)


# -- cases ----------------------------------------------------------------------------------------

_R = np.random.default_rng(0)


def _case(name: str) -> dict[str, Any]:
    """Arrays in the seq-first layout; (L, S, N, E, heads) odd where possible."""
    length, source, n, e, h = 5, 7, 3, 6, 3
    kdim = vdim = e
    case: dict[str, Any] = {"heads": h, "self": False}
    if name == "self":
        source, case["self"] = length, True
    if name == "kvdim":
        kdim, vdim = 4, 5

    def x(*s: int) -> Array:
        return _R.standard_normal(s)

    case.update(query=x(length, n, e), key=x(source, n, kdim), value=x(source, n, vdim),
                w_q=x(e, e) * 0.5, w_k=x(e, kdim) * 0.5, w_v=x(e, vdim) * 0.5, b_in=x(3 * e),
                w_out=x(e, e) * 0.5, b_out=x(e))
    if case["self"]:
        case["key"] = case["value"] = case["query"]
    if name == "bool_masks":
        case["attn_mask"] = np.triu(np.ones((length, source), bool), 3)
        kpm = np.zeros((n, source), bool)
        kpm[0, -2:] = kpm[2, 0] = True
        case["key_padding_mask"] = kpm
    if name == "float_mask":
        case["attn_mask"] = x(n * h, length, source)
    if name == "bias_kv_zero":
        case.update(bias_k=x(1, 1, e), bias_v=x(1, 1, e), add_zero_attn=True,
                    key_padding_mask=np.eye(n, source, dtype=bool))
    return case


CASES = ["self", "cross", "kvdim", "bool_masks", "float_mask", "bias_kv_zero"]


def _tensor(dev: DeviceHandle, a: Array | None, dtype: str = "float32") -> Tensor | None:
    if a is None:
        return None
    return Tensor.from_host(dev.queue, a, dtype="uint8" if a.dtype == bool else dtype)


def _layer_from(dev: DeviceHandle, c: dict[str, Any], batch_first: bool,
                dtype: str = "float32") -> MultiheadAttention:
    e, kdim, vdim = c["w_q"].shape[0], c["w_k"].shape[1], c["w_v"].shape[1]
    mha = MultiheadAttention(e, c["heads"], kdim=kdim, vdim=vdim, batch_first=batch_first,
                             add_bias_kv="bias_k" in c, add_zero_attn=c.get("add_zero_attn",
                                                                              False),
                             device=dev, dtype=dtype)
    state = {"in_proj_bias": c["b_in"], "out_proj.weight": c["w_out"], "out_proj.bias": c["b_out"]}
    if mha.in_proj_weight is not None:
        state["in_proj_weight"] = np.concatenate([c["w_q"], c["w_k"], c["w_v"]])
    else:
        state.update(q_proj_weight=c["w_q"], k_proj_weight=c["w_k"], v_proj_weight=c["w_v"])
    if "bias_k" in c:
        state.update(bias_k=c["bias_k"], bias_v=c["bias_v"])
    mha.load_state_dict(state)
    return mha


def _ref(c: dict[str, Any], batch_first: bool, average: bool = True) -> tuple[Any, Any]:
    args: dict[str, Any] = {k: c.get(k) for k in ("attn_mask", "key_padding_mask", "bias_k",
                                                  "bias_v")}
    query, key, value = (np.swapaxes(c[n], 0, 1) if batch_first else c[n]
                         for n in ("query", "key", "value"))
    return ref_mha(query, key, value, c["w_q"], c["w_k"], c["w_v"], c["b_in"], c["w_out"],
                   c["b_out"], c["heads"], add_zero_attn=c.get("add_zero_attn", False),
                   batch_first=batch_first, average=average, **args)


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("name", CASES)
def test_layer_matches_reference(dev: DeviceHandle, name: str, batch_first: bool) -> None:
    c = _case(name)
    mha = _layer_from(dev, c, batch_first)
    want, want_w = _ref(c, batch_first)
    qkv = [c["query"], c["key"], c["value"]]
    if batch_first:
        qkv = [np.swapaxes(t, 0, 1) for t in qkv]
    query = _tensor(dev, qkv[0])
    key, value = (query, query) if c["self"] else (_tensor(dev, qkv[1]), _tensor(dev, qkv[2]))
    assert query is not None and key is not None and value is not None
    masks = {k: _tensor(dev, c.get(k)) for k in ("attn_mask", "key_padding_mask")}
    out, weights = mha(query, key, value, **masks)
    np.testing.assert_allclose(out.to_host(), want, rtol=1e-4, atol=1e-4)
    assert weights is not None
    np.testing.assert_allclose(weights.to_host(), want_w, rtol=1e-4, atol=1e-5)
    fused, none = mha(query, key, value, need_weights=False, **masks)
    assert none is None
    np.testing.assert_allclose(fused.to_host(), want, rtol=1e-4, atol=1e-4)
    _, per_head = mha(query, key, value, average_attn_weights=False, **masks)
    assert per_head is not None
    np.testing.assert_allclose(per_head.to_host(), _ref(c, batch_first, average=False)[1],
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "weights"])
@pytest.mark.parametrize("name", ["cross", "kvdim", "bool_masks", "bias_kv_zero"])
def test_functional_gradients(dev: DeviceHandle, name: str, need_weights: bool) -> None:
    """Every input and weight's gradient against finite differences of the reference."""
    c = _case(name)
    separate = name == "kvdim"
    extra: dict[str, Any] = {k: c[k] for k in ("attn_mask", "key_padding_mask") if k in c}
    bias_kv = "bias_k" in c
    zero = c.get("add_zero_attn", False)

    def fn(query: Tensor, key: Tensor, value: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor,
           b_in: Tensor, w_out: Tensor, b_out: Tensor, *kv: Tensor, **masks: Any) -> Tensor:
        masks = {k: None if m is None else _tensor(dev, m) for k, m in masks.items()}
        w_in = None if separate else ag.ops.concat([w_q, w_k, w_v])
        bk, bv = kv if kv else (None, None)
        out, _ = F.multi_head_attention_forward(
            query, key, value, 6, c["heads"], w_in, b_in, bk, bv, zero, 0.0,
            w_out, b_out, need_weights=need_weights, use_separate_proj_weight=separate,
            q_proj_weight=w_q, k_proj_weight=w_k, v_proj_weight=w_v, **masks)
        return out

    def ref(query: Array, key: Array, value: Array, w_q: Array, w_k: Array, w_v: Array,
            b_in: Array, w_out: Array, b_out: Array, *kv: Array, **masks: Any) -> Any:
        bk, bv = kv if kv else (None, None)
        return ref_mha(query, key, value, w_q, w_k, w_v, b_in, w_out, b_out, c["heads"],
                       bias_k=bk, bias_v=bv, add_zero_attn=zero, **masks)[0]

    names = ["query", "key", "value", "w_q", "w_k", "w_v", "b_in", "w_out", "b_out"]
    args = [c[k] for k in names] + ([c["bias_k"], c["bias_v"]] if bias_kv else [])
    check_grad(dev, fn, ref, args, kwargs=extra, dtype="float64" if dev.backend == "cpu"
               else "float32", scale=4.0)


def test_unbatched_and_is_causal(dev: DeviceHandle) -> None:
    c = _case("self")
    mha = _layer_from(dev, c, False)
    x = c["query"][:, 1]  # (L, E)
    causal = np.triu(np.ones((5, 5), bool), 1)
    t, m = _tensor(dev, x), _tensor(dev, causal)
    assert t is not None and m is not None
    want, want_w = ref_mha(x[:, None], x[:, None], x[:, None], c["w_q"], c["w_k"], c["w_v"],
                           c["b_in"], c["w_out"], c["b_out"], 3, attn_mask=causal)
    out, weights = mha(t, t, t, attn_mask=m)
    assert out.shape == (5, 6) and weights is not None and weights.shape == (5, 5)
    np.testing.assert_allclose(out.to_host(), want[:, 0], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(weights.to_host(), want_w[0], rtol=1e-4, atol=1e-5)
    hinted, _ = mha(t, t, t, attn_mask=m, need_weights=False, is_causal=True)
    np.testing.assert_allclose(hinted.to_host(), want[:, 0], rtol=1e-4, atol=1e-4)
    with pytest.raises(RuntimeError, match=r"is_causal is a hint.*give attn_mask"):
        mha(t, t, t, is_causal=True)


def test_initialisation_and_state_dict_names(dev: DeviceHandle) -> None:
    manual_seed(0)
    mha = MultiheadAttention(10, 2, add_bias_kv=True, device=dev)
    assert {k: v.shape for k, v in mha.state_dict().items()} == {
        "in_proj_weight": (30, 10), "in_proj_bias": (30,), "bias_k": (1, 1, 10),
        "bias_v": (1, 1, 10), "out_proj.weight": (10, 10), "out_proj.bias": (10,)}
    assert mha.in_proj_weight is not None and mha.out_proj.bias is not None
    w = mha.in_proj_weight.to_host()
    bound = math.sqrt(6 / 40)  # xavier-uniform over (3E, E)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.8 * bound
    np.testing.assert_array_equal(mha.out_proj.bias.to_host(), 0.0)
    assert mha.in_proj_bias is not None
    np.testing.assert_array_equal(mha.in_proj_bias.to_host(), 0.0)
    no_bias = MultiheadAttention(4, 4, bias=False, kdim=3, device=dev)
    assert sorted(no_bias.state_dict()) == ["k_proj_weight", "out_proj.weight",
                                            "q_proj_weight", "v_proj_weight"]


def test_dropout_train_and_eval(dev: DeviceHandle) -> None:
    c = _case("self")
    mha = MultiheadAttention(6, 3, dropout=0.4, device=dev)
    x = _tensor(dev, c["query"])
    assert x is not None
    mha.eval()
    a, _ = mha(x, x, x)
    b, _ = mha(x, x, x, need_weights=False)
    np.testing.assert_allclose(a.to_host(), b.to_host(), rtol=1e-5, atol=1e-5)
    mha.train()
    manual_seed(3)
    t1, w1 = mha(x, x, x)
    assert w1 is not None and not np.allclose(t1.to_host(), a.to_host())
    # the weights come back after dropout (PyTorch's): rows no longer sum to 1
    assert (w1.to_host() >= 0).all() and not np.allclose(w1.to_host().sum(-1), 1.0)


def test_autocast_float16(dev: DeviceHandle) -> None:
    c = _case("bool_masks")
    mha = _layer_from(dev, c, False)
    q, k, v = (_tensor(dev, c[n]) for n in ("query", "key", "value"))
    am, kpm = _tensor(dev, c["attn_mask"]), _tensor(dev, c["key_padding_mask"])
    assert q is not None and k is not None and v is not None
    want, _ = _ref(c, False)
    with autocast():
        out, _ = mha(q, k, v, attn_mask=am, key_padding_mask=kpm, need_weights=False)
        out_w, weights = mha(q, k, v, attn_mask=am, key_padding_mask=kpm)
    assert out.dtype == "float16" and out_w.dtype == "float16"
    assert weights is not None and weights.dtype == "float32"
    np.testing.assert_allclose(out.to_host(), want, rtol=3e-2, atol=3e-2)
    np.testing.assert_allclose(out_w.to_host(), want, rtol=3e-2, atol=3e-2)


def test_errors(dev: DeviceHandle) -> None:
    with pytest.raises(ValueError, match=r"MultiheadAttention: embed_dim must be divisible "
                                         r"by num_heads, got embed_dim=10 and num_heads=3"):
        MultiheadAttention(10, 3, device=dev)
    with pytest.raises(ValueError, match="MultiheadAttention: dropout must be in"):
        MultiheadAttention(4, 2, dropout=1.5, device=dev)
    mha = MultiheadAttention(6, 3, device=dev)
    x = Tensor.from_host(dev.queue, np.ones((5, 2, 6)))
    bad = Tensor.from_host(dev.queue, np.ones((5, 2, 4)))
    with pytest.raises(ValueError, match=r"MultiheadAttention: query's last dim must be "
                                         r"embed_dim=6, got query \(5, 2, 4\)"):
        mha(bad, bad, bad)
    with pytest.raises(ValueError, match=r"MultiheadAttention: attn_mask must be \(L, S\) = "
                                         r"\(5, 5\) or "
                                         r"\(N\*num_heads, L, S\) = \(6, 5, 5\), got \(4, 5\)"):
        mha(x, x, x, attn_mask=Tensor.from_host(dev.queue, np.zeros((4, 5), bool)))
    with pytest.raises(ValueError, match=r"key_padding_mask must be \(N, S\) = \(2, 5\), got"):
        mha(x, x, x, key_padding_mask=Tensor.from_host(dev.queue, np.zeros((5, 2), bool)))
    with pytest.raises(TypeError, match="attn_mask must be bool \\(uint8\\) or floating point, "
                                        "got int64"):
        mha(x, x, x, attn_mask=Tensor.from_host(dev.queue, np.zeros((5, 5), np.int64)))
    other = Tensor.from_host(dev.queue, np.ones((7, 3, 6)))
    with pytest.raises(ValueError, match="query and key must have the same batch size"):
        mha(x, other, other)


@pytest.mark.parametrize("need_weights", [False, True])
def test_static_key_and_value(dev: DeviceHandle, need_weights: bool) -> None:
    """static_k/static_v (N*heads, S', head_dim) replace the projected keys and values; the
    key-padding mask and add_zero_attn follow their length S' (PyTorch's semantics)."""
    rng = np.random.default_rng(5)
    length, source, n, e, h = 5, 7, 2, 6, 3
    d, s2 = e // h, 9
    query, key = rng.normal(size=(length, n, e)), rng.normal(size=(source, n, e))
    w_in, w_out = rng.normal(size=(3 * e, e)) / 3, rng.normal(size=(e, e)) / 3
    b_in = rng.normal(size=3 * e)
    sk, sv = rng.normal(size=(n * h, s2, d)), rng.normal(size=(n * h, s2, d))
    kpm = np.zeros((n, s2), bool)
    kpm[1, -3:] = True
    want, want_w = ref_mha(query, key, key, w_in[:e], w_in[e:2 * e], w_in[2 * e:], b_in, w_out,
                           None, h, key_padding_mask=kpm, add_zero_attn=True, static_k=sk,
                           static_v=sv)

    def t(a: Array, dtype: str = "float32") -> Tensor:
        return Tensor.from_host(dev.queue, a, dtype=dtype)

    out, weights = F.multi_head_attention_forward(
        t(query), t(key), t(key), e, h, t(w_in), t(b_in), None, None, True, 0.0, t(w_out),
        None, key_padding_mask=t(kpm, "uint8"), need_weights=need_weights, static_k=t(sk),
        static_v=t(sv))
    np.testing.assert_allclose(out.to_host(), want, rtol=1e-4, atol=1e-5)
    if need_weights:
        assert weights is not None
        np.testing.assert_allclose(weights.to_host(), want_w, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match=r"static_k must be \(batch \* num_heads, S, "
                                         r"head_dim\) = \(6, S, 2\), got \(6, 9, 3\)"):
        F.multi_head_attention_forward(t(query), t(key), t(key), e, h, t(w_in), None, None,
                                       None, False, 0.0, t(w_out), None,
                                       static_k=t(np.zeros((6, 9, 3))))
    with pytest.raises(ValueError, match="bias_k/bias_v cannot be added to a static key"):
        F.multi_head_attention_forward(t(query), t(key), t(key), e, h, t(w_in), None,
                                       t(np.zeros((1, 1, e))), t(np.zeros((1, 1, e))), False,
                                       0.0, t(w_out), None, static_k=t(sk))
    with pytest.raises(ValueError, match="keys and values must have the same length"):
        F.multi_head_attention_forward(t(query), t(key), t(key), e, h, t(w_in), None, None,
                                       None, False, 0.0, t(w_out), None, static_k=t(sk))


# -- PyTorch ----------------------------------------------------------------------------------

@pytest.mark.parametrize("config", [
    {}, {"kdim": 4, "vdim": 5}, {"add_bias_kv": True, "add_zero_attn": True},
    {"bias": False, "batch_first": True}])
def test_torch_state_dict_outputs_and_gradients(dev: DeviceHandle, config: dict[str, Any]
                                                ) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = torch.nn.MultiheadAttention(6, 3, dtype=torch.float64, **config)
    dtype, tol = ("float64", 1e-9) if dev.backend == "cpu" else ("float32", 2e-5)
    mha = MultiheadAttention(6, 3, device=dev, dtype=dtype, **config)
    mha.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    bf = config.get("batch_first", False)

    def shape(s: int, d: int) -> tuple[int, int, int]:
        return (3, s, d) if bf else (s, 3, d)

    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(shape(5, 6)), rng.standard_normal(shape(7, config.get(
        "kdim", 6))), rng.standard_normal(shape(7, config.get("vdim", 6)))]
    kpm = np.zeros((3, 7), bool)
    kpm[1, 3:] = True
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in arrays)
    want, want_w = ref(tq, tk, tv, key_padding_mask=torch.tensor(kpm))
    want.sum().backward()
    q, k, v = (Tensor.from_host(dev.queue, a, dtype=dtype) for a in arrays)
    for t in (q, k, v):
        t.requires_grad = True
    with ag.Tape() as tape:
        out, weights = mha(q, k, v, key_padding_mask=Tensor.from_host(dev.queue, kpm))
        loss = ag.ops.sum(out)
    tape.backward(loss)
    np.testing.assert_allclose(out.to_host(), want.detach().numpy(), rtol=tol, atol=tol)
    assert weights is not None
    np.testing.assert_allclose(weights.to_host(), want_w.detach().numpy(), atol=tol)
    for got, t in zip((q, k, v), (tq, tk, tv)):
        assert got.grad is not None
        np.testing.assert_allclose(got.grad.to_host(), t.grad.numpy(), rtol=tol, atol=tol)
    grads = {n: p.grad for n, p in ref.named_parameters()}
    for name, p in mha.named_parameters():
        assert p.grad is not None
        np.testing.assert_allclose(p.grad.to_host(), grads[name].numpy(), rtol=tol,
                                   atol=tol * 10, err_msg=name)
