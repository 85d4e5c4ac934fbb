"""Transformer layers on every backend against float64 NumPy transcriptions of PyTorch's
formulas, reading the layer's own state_dict (so the names are PyTorch's too): encoder and
decoder layers with norm_first and batch_first both ways, relu/gelu/callable activations,
causal, float and bool masks, key padding, odd sizes; input gradients by finite differences of
the reference; stacks (copies start equal and train apart), the full Transformer, the causal
mask helper, eval/train, autocast, errors; and, with torch installed, PyTorch's state_dict
loading with outputs and every gradient compared."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.nn import (
    GELU,
    LayerNorm,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
    autocast,
    manual_seed,
)

Array = np.ndarray[Any, Any]
S, T, N, E, H, FF = 7, 5, 3, 6, 3, 10  # source and target lengths, batch, width, heads, ffn


# -- NumPy reference (seq-first, float64) -------------------------------------------------------

def ref_layer_norm(x: Array, p: dict[str, Array], name: str, eps: float = 1e-5) -> Any:
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y * p[f"{name}.weight"] + p.get(f"{name}.bias", 0.0)


def ref_attention(x: Array, memory: Array, p: dict[str, Array], name: str,
                  mask: Array | None, kpm: Array | None) -> Any:
    """PyTorch's MultiheadAttention (packed in-projection), inputs (L, N, E), (S, N, E)."""
    w, b = p[f"{name}.in_proj_weight"], p.get(f"{name}.in_proj_bias", np.zeros(3 * E))
    q, k, v = x @ w[:E].T + b[:E], memory @ w[E:2 * E].T + b[E:2 * E], memory @ w[2 * E:].T \
        + b[2 * E:]

    def heads(t: Array) -> Any:
        return t.reshape(t.shape[0], N, H, E // H).transpose(1, 2, 0, 3)

    s = heads(q) @ np.swapaxes(heads(k), -1, -2) / math.sqrt(E // H)
    if mask is not None:
        s = s + (np.where(mask, -np.inf, 0.0) if mask.dtype == bool else mask)
    if kpm is not None:
        s = s + np.where(kpm, -np.inf, 0.0)[:, None, None, :]
    s = np.exp(s - s.max(-1, keepdims=True))
    out = (s / s.sum(-1, keepdims=True)) @ heads(v)
    out = out.transpose(2, 0, 1, 3).reshape(x.shape[0], N, E)
    return out @ p[f"{name}.out_proj.weight"].T + p.get(f"{name}.out_proj.bias", 0.0)


def ref_activation(x: Array, activation: str) -> Any:
    if activation == "relu":
        return np.maximum(x, 0.0)
    erf = np.vectorize(math.erf)
    return x * 0.5 * (1.0 + erf(x / math.sqrt(2.0)))


def ref_ff(x: Array, p: dict[str, Array], activation: str) -> Any:
    hidden = ref_activation(x @ p["linear1.weight"].T + p.get("linear1.bias", 0.0), activation)
    return hidden @ p["linear2.weight"].T + p.get("linear2.bias", 0.0)


def ref_encoder_layer(x: Array, p: dict[str, Array], norm_first: bool, activation: str,
                      mask: Array | None = None, kpm: Array | None = None) -> Any:
    if norm_first:
        h = ref_layer_norm(x, p, "norm1")
        x = x + ref_attention(h, h, p, "self_attn", mask, kpm)
        return x + ref_ff(ref_layer_norm(x, p, "norm2"), p, activation)
    x = ref_layer_norm(x + ref_attention(x, x, p, "self_attn", mask, kpm), p, "norm1")
    return ref_layer_norm(x + ref_ff(x, p, activation), p, "norm2")


def ref_decoder_layer(x: Array, memory: Array, p: dict[str, Array], norm_first: bool,
                      activation: str, tgt_mask: Array | None = None,
                      memory_kpm: Array | None = None, memory_mask: Array | None = None,
                      tgt_kpm: Array | None = None) -> Any:
    if norm_first:
        h = ref_layer_norm(x, p, "norm1")
        x = x + ref_attention(h, h, p, "self_attn", tgt_mask, tgt_kpm)
        x = x + ref_attention(ref_layer_norm(x, p, "norm2"), memory, p, "multihead_attn",
                              memory_mask, memory_kpm)
        return x + ref_ff(ref_layer_norm(x, p, "norm3"), p, activation)
    x = ref_layer_norm(x + ref_attention(x, x, p, "self_attn", tgt_mask, tgt_kpm), p,
                       "norm1")
    x = ref_layer_norm(x + ref_attention(x, memory, p, "multihead_attn", memory_mask,
                                         memory_kpm), p, "norm2")
    return ref_layer_norm(x + ref_ff(x, p, activation), p, "norm3")


def host_state(module: Any, prefix: str = "") -> dict[str, Array]:
    return {k[len(prefix):]: v.to_host().astype(np.float64)
            for k, v in module.state_dict().items() if k.startswith(prefix)}


def _randomize(module: Any, seed: int) -> None:
    """Non-trivial values everywhere (PyTorch zero-initialises the attention biases and sets
    the norms to 1/0, which would leave those formulas untested)."""
    rng = np.random.default_rng(seed)
    module.load_state_dict({k: rng.uniform(-0.5, 0.5, v.shape) + (1.0 if "norm" in k and
                                                                   k.endswith("weight") else 0.0)
                            for k, v in module.state_dict().items()})


_R = np.random.default_rng(0)
SRC, TGT = _R.standard_normal((S, N, E)), _R.standard_normal((T, N, E))
KPM = np.zeros((N, S), bool)
KPM[0, -3:] = KPM[2, 1] = True
CAUSAL = np.triu(np.full((T, T), -np.inf), 1)


def _bf(x: Array, batch_first: bool) -> Any:
    return np.swapaxes(x, 0, 1) if batch_first else x


def _t(dev: DeviceHandle, x: Array, dtype: str = "float32") -> Tensor:
    return Tensor.from_host(dev.queue, x, dtype="uint8" if x.dtype == bool else dtype)


# -- encoder and decoder layers -------------------------------------------------------------

@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer(dev: DeviceHandle, batch_first: bool, norm_first: bool,
                       activation: str) -> None:
    layer = TransformerEncoderLayer(E, H, FF, dropout=0.1, activation=activation,
                                    batch_first=batch_first, norm_first=norm_first, device=dev)
    _randomize(layer, 1)
    layer.eval()  # dropout off
    p = host_state(layer)
    mask = np.triu(np.ones((S, S), bool), 2)
    want = _bf(ref_encoder_layer(SRC, p, norm_first, activation, mask, KPM), batch_first)
    out = layer(_t(dev, _bf(SRC, batch_first)), src_mask=_t(dev, mask),
                src_key_padding_mask=_t(dev, KPM))
    np.testing.assert_allclose(out.to_host(), want, rtol=1e-4, atol=1e-4)

    def fn(src: Tensor) -> Tensor:
        return layer(src, src_mask=_t(dev, mask))  # type: ignore[no-any-return]

    def ref(src: Array) -> Any:
        return _bf(ref_encoder_layer(_bf(src, batch_first), p, norm_first, activation, mask),
                   batch_first)

    if dev.backend == "cpu" or not batch_first:  # one OpenCL layout keeps the file fast
        check_grad(dev, fn, ref, [_bf(SRC, batch_first)], scale=4.0)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post_norm", "pre_norm"])
def test_decoder_layer(dev: DeviceHandle, norm_first: bool) -> None:
    layer = TransformerDecoderLayer(E, H, FF, dropout=0.0, norm_first=norm_first, device=dev)
    _randomize(layer, 2)
    p = host_state(layer)
    assert {"multihead_attn.in_proj_weight", "norm3.weight"} <= set(p)
    want = ref_decoder_layer(TGT, SRC, p, norm_first, "relu", CAUSAL, KPM)
    out = layer(_t(dev, TGT), _t(dev, SRC), tgt_mask=_t(dev, CAUSAL),
                memory_key_padding_mask=_t(dev, KPM), tgt_is_causal=True)
    np.testing.assert_allclose(out.to_host(), want, rtol=1e-4, atol=1e-4)
    memory_mask = np.random.default_rng(7).standard_normal((T, S))  # a float (T, S) mask
    tgt_kpm = np.zeros((N, T), bool)
    tgt_kpm[1, -2:] = True
    want = ref_decoder_layer(TGT, SRC, p, norm_first, "relu", None, None, memory_mask, tgt_kpm)
    out = layer(_t(dev, TGT), _t(dev, SRC), memory_mask=_t(dev, memory_mask),
                tgt_key_padding_mask=_t(dev, tgt_kpm))
    np.testing.assert_allclose(out.to_host(), want, rtol=1e-4, atol=1e-4)

    def fn(tgt: Tensor, memory: Tensor) -> Tensor:
        return layer(tgt, memory, tgt_mask=_t(dev, CAUSAL),  # type: ignore[no-any-return]
                     tgt_is_causal=True)

    def ref(tgt: Array, memory: Array) -> Any:
        return ref_decoder_layer(tgt, memory, p, norm_first, "relu", CAUSAL)

    check_grad(dev, fn, ref, [TGT, SRC], scale=4.0)


def test_callable_activation_no_bias_and_unbatched(dev: DeviceHandle) -> None:
    layer = TransformerEncoderLayer(E, H, FF, dropout=0.0, activation=GELU(), bias=False,
                                    device=dev)
    assert "activation" in dict(layer.named_children())
    assert not any(k.endswith("bias") for k in layer.state_dict())
    _randomize(layer, 3)
    p = host_state(layer)
    x = SRC[:, 0]  # (S, E)
    want = ref_encoder_layer(x[:, None].repeat(N, 1), p, False, "gelu")[:, 0]
    np.testing.assert_allclose(layer(_t(dev, x)).to_host(), want, rtol=1e-4, atol=1e-4)


def test_stacks_copy_their_layer_and_train_apart(dev: DeviceHandle) -> None:
    layer = TransformerEncoderLayer(E, H, FF, dropout=0.0, device=dev)
    _randomize(layer, 4)
    encoder = TransformerEncoder(layer, 2, norm=LayerNorm(E, device=dev))
    keys = set(encoder.state_dict())
    assert {"layers.0.self_attn.in_proj_weight", "layers.1.linear2.bias", "norm.weight"} <= keys
    p0, p1 = host_state(encoder, "layers.0."), host_state(encoder, "layers.1.")
    assert all(np.array_equal(p0[k], p1[k]) for k in p0)  # every copy starts equal
    first, second = (cast(TransformerEncoderLayer, m) for m in encoder.layers)
    w0 = first.linear1.weight
    assert w0 is not second.linear1.weight and w0 is not layer.linear1.weight
    x = _t(dev, SRC)
    x.requires_grad = True
    with ag.Tape() as tape:
        out = encoder(x, src_key_padding_mask=_t(dev, KPM))
        loss = ag.ops.sum(ag.ops.mul(out, out))
    tape.backward(loss)
    want = ref_encoder_layer(ref_encoder_layer(SRC, p0, False, "relu", None, KPM), p1, False,
                             "relu", None, KPM)
    want = ref_layer_norm(want, host_state(encoder), "norm")
    np.testing.assert_allclose(out.to_host(), want, rtol=1e-4, atol=1e-4)
    g0, g1 = first.linear1.weight.grad, second.linear1.weight.grad
    assert g0 is not None and g1 is not None and not np.allclose(g0.to_host(), g1.to_host())
    assert layer.linear1.weight.grad is None  # the template is not part of the stack
    decoder = TransformerDecoder(TransformerDecoderLayer(E, H, FF, device=dev), 3)
    assert len(decoder.layers) == 3 and decoder.norm is None
    with pytest.raises(ValueError, match="num_layers must be a positive int, got 0"):
        TransformerEncoder(layer, 0)


def test_transformer_and_causal_mask(dev: DeviceHandle) -> None:
    mask = Transformer.generate_square_subsequent_mask(T, device=dev)
    np.testing.assert_array_equal(mask.to_host(), CAUSAL)
    manual_seed(0)
    model = Transformer(E, H, 2, 1, FF, dropout=0.0, batch_first=True, device=dev)
    p = host_state(model)
    bound = math.sqrt(6 / (3 * E + E))  # xavier-uniform over every matrix, in_proj too
    assert 0.8 * bound < np.abs(p["encoder.layers.0.self_attn.in_proj_weight"]).max() <= bound
    assert {"encoder.norm.weight", "decoder.norm.bias",
            "decoder.layers.0.multihead_attn.out_proj.weight"} <= set(p)
    _randomize(model, 5)
    p = host_state(model)
    memory = SRC
    for i in range(2):
        memory = ref_encoder_layer(memory, host_state(model, f"encoder.layers.{i}."), False,
                                   "relu")
    memory = ref_layer_norm(memory, p, "encoder.norm")
    want = ref_decoder_layer(TGT, memory, host_state(model, "decoder.layers.0."), False, "relu",
                             CAUSAL)
    want = np.swapaxes(ref_layer_norm(want, p, "decoder.norm"), 0, 1)
    out = model(_t(dev, _bf(SRC, True)), _t(dev, _bf(TGT, True)), tgt_mask=mask,
                tgt_is_causal=True)
    np.testing.assert_allclose(out.to_host(), want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"Transformer: src and tgt must have the same batch "
                                         r"size, got src \(3, 7, 6\) and tgt \(2, 5, 6\)"):
        model(_t(dev, _bf(SRC, True)), _t(dev, _bf(TGT, True)[:2]))


def test_dropout_eval_and_train(dev: DeviceHandle) -> None:
    layer = TransformerEncoderLayer(E, H, FF, dropout=0.3, device=dev)
    x = _t(dev, SRC)
    layer.eval()
    a, b = layer(x).to_host(), layer(x).to_host()
    np.testing.assert_array_equal(a, b)
    layer.train()
    manual_seed(1)
    c = layer(x).to_host()
    manual_seed(1)
    np.testing.assert_array_equal(layer(x).to_host(), c)  # the default generator replays
    assert not np.allclose(a, c)


def test_autocast_float16(dev: DeviceHandle) -> None:
    layer = TransformerEncoderLayer(E, H, FF, dropout=0.0, norm_first=True, device=dev)
    _randomize(layer, 6)
    x = _t(dev, SRC)
    want = layer(x, src_mask=_t(dev, np.triu(np.full((S, S), -np.inf), 1)),
                 is_causal=True).to_host()
    with autocast():
        out = layer(x, src_mask=_t(dev, np.triu(np.full((S, S), -np.inf), 1)), is_causal=True)
    assert out.dtype == "float32"  # the residual stream stays float32 (float32 + float16)
    np.testing.assert_allclose(out.to_host(), want, rtol=3e-2, atol=3e-2)


def test_errors(dev: DeviceHandle) -> None:
    with pytest.raises(ValueError, match=r"TransformerEncoderLayer: embed_dim must be "
                                         r"divisible by num_heads, got embed_dim=10 and "
                                         r"num_heads=4"):
        TransformerEncoderLayer(10, 4, device=dev)
    with pytest.raises(ValueError, match=r"TransformerDecoderLayer: activation must be "
                                         r"'relu', 'gelu' or a callable, got 'tanh'"):
        TransformerDecoderLayer(8, 2, activation="tanh", device=dev)
    with pytest.raises(ValueError, match="TransformerEncoderLayer: dropout must be in"):
        TransformerEncoderLayer(8, 2, dropout=-0.1, device=dev)
    with pytest.raises(ValueError, match="generate_square_subsequent_mask: sz must be a "
                                         "positive int, got 0"):
        Transformer.generate_square_subsequent_mask(0)
    layer = TransformerEncoderLayer(E, H, FF, device=dev)
    with pytest.raises(ValueError, match=r"attn_mask must be \(L, S\) = \(7, 7\)"):
        layer(_t(dev, SRC), src_mask=_t(dev, CAUSAL))


# -- PyTorch ------------------------------------------------------------------------------------

def _torch_compare(dev: DeviceHandle, ours: Any, theirs: Any, inputs: list[Array],
                   kwargs: dict[str, Array], torch: Any) -> None:
    """Load ``theirs``' state_dict into ``ours``, run both on ``inputs`` (``kwargs``: masks,
    ``bool`` where PyTorch takes bool) and compare outputs and every gradient."""
    dtype, tol = ("float64", 1e-9) if dev.backend == "cpu" else ("float32", 5e-5)
    ours.to(dtype=dtype)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ours.eval()
    theirs.eval()
    t_in = [torch.tensor(a, requires_grad=True) for a in inputs]
    t_kw = {k: torch.tensor(v) for k, v in kwargs.items() if not k.endswith("is_causal")}
    flags = {k: bool(v) for k, v in kwargs.items() if k.endswith("is_causal")}
    want = theirs(*t_in, **t_kw, **flags)
    (want * want).sum().backward()
    n_in = [Tensor.from_host(dev.queue, a, dtype=dtype) for a in inputs]
    for t in n_in:
        t.requires_grad = True
    n_kw = {k: Tensor.from_host(dev.queue, v, dtype="uint8" if v.dtype == bool else dtype)
            for k, v in kwargs.items() if not k.endswith("is_causal")}
    with ag.Tape() as tape:
        out = ours(*n_in, **n_kw, **flags)
        loss = ag.ops.sum(ag.ops.mul(out, out))
    tape.backward(loss)
    np.testing.assert_allclose(out.to_host(), want.detach().numpy(), rtol=tol, atol=tol)
    for got, t in zip(n_in, t_in):
        assert got.grad is not None
        np.testing.assert_allclose(got.grad.to_host(), t.grad.numpy(), rtol=tol, atol=tol * 10)
    grads = {n: p.grad for n, p in theirs.named_parameters()}
    for name, p in ours.named_parameters():
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.to_host(), grads[name].numpy(), rtol=tol,
                                   atol=tol * 10, err_msg=name)


@pytest.mark.parametrize("config", [
    {}, {"norm_first": True, "activation": "gelu", "batch_first": True}, {"bias": False}])
def test_torch_encoder_layer(dev: DeviceHandle, config: dict[str, Any]) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = torch.nn.TransformerEncoderLayer(E, H, FF, dtype=torch.float64, **config)
    ours = TransformerEncoderLayer(E, H, FF, device=dev, **config)
    src = _bf(SRC, config.get("batch_first", False))
    _torch_compare(dev, ours, theirs, [src], {"src_key_padding_mask": KPM}, torch)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_torch_decoder_stack_and_transformer(dev: DeviceHandle) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    t_layer = torch.nn.TransformerDecoderLayer(E, H, FF, dtype=torch.float64, norm_first=True)
    theirs = torch.nn.TransformerDecoder(t_layer, 2, norm=torch.nn.LayerNorm(
        E, dtype=torch.float64))
    ours = TransformerDecoder(TransformerDecoderLayer(E, H, FF, norm_first=True, device=dev),
                              2, norm=LayerNorm(E, device=dev))
    _torch_compare(dev, ours, theirs, [TGT, SRC],
                   {"tgt_mask": CAUSAL, "memory_key_padding_mask": KPM,
                    "tgt_is_causal": np.array(True)}, torch)
    t_model = torch.nn.Transformer(E, H, 1, 2, FF, dtype=torch.float64, batch_first=True)
    model = Transformer(E, H, 1, 2, FF, batch_first=True, device=dev)
    assert set(model.state_dict()) == set(t_model.state_dict())
    _torch_compare(dev, model, t_model, [_bf(SRC, True), _bf(TGT, True)],
                   {"tgt_mask": CAUSAL, "src_key_padding_mask": KPM}, torch)
