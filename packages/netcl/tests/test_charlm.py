"""The charlm job's GPT: its forward against NumPy formulas, the causal property and its
gradients, on every device; sampling under a seed."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.core.tensor import copy_from_host
from netcl.data import CharVocab
from netcl.optim import SGD
from netcl.trainer import Trainer
from netcl.trainer._charlm import _token_loss, sample_text, unigram_entropy
from netcl.trainer._charlm_model import GPT

Params = dict[str, np.ndarray[Any, Any]]


def _layer_norm(x: np.ndarray[Any, Any], w: np.ndarray[Any, Any],
                b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return np.asarray((x - mu) / np.sqrt(var + 1e-5) * w + b)


def _reference(p: Params, ids: np.ndarray[Any, Any], layers: int,
               heads: int) -> np.ndarray[Any, Any]:
    """The GPT's forward in float64 NumPy (nanoGPT's formulas)."""
    b, t = ids.shape
    x = p["tok_emb.weight"][ids] + p["pos_emb"][:t]
    c = x.shape[-1]
    d = c // heads
    causal = np.tril(np.ones((t, t), bool))
    for i in range(layers):
        pre = f"blocks.{i}."
        h = _layer_norm(x, p[pre + "ln1.weight"], p[pre + "ln1.bias"])
        qkv = h @ p[pre + "attn.qkv.weight"].T + p[pre + "attn.qkv.bias"]
        q, k, v = (qkv[..., j * c:(j + 1) * c].reshape(b, t, heads, d).transpose(0, 2, 1, 3)
                   for j in range(3))
        s = np.where(causal, q @ k.transpose(0, 1, 3, 2) / math.sqrt(d), -np.inf)
        a = np.exp(s - s.max(-1, keepdims=True))
        y = (a / a.sum(-1, keepdims=True)) @ v
        y = y.transpose(0, 2, 1, 3).reshape(b, t, c)
        x = x + y @ p[pre + "attn.proj.weight"].T + p[pre + "attn.proj.bias"]
        h = _layer_norm(x, p[pre + "ln2.weight"], p[pre + "ln2.bias"])
        h = h @ p[pre + "fc.weight"].T + p[pre + "fc.bias"]
        h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
        x = x + h @ p[pre + "fc_proj.weight"].T + p[pre + "fc_proj.bias"]
    x = _layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
    return np.asarray(x @ p["head.weight"].T)


def _model(dev: DeviceHandle, **kw: Any) -> GPT:
    cfg = {"vocab": 13, "context": 9, "layers": 2, "width": 16, "heads": 2, "seed": 3, **kw}
    return GPT(queue=dev.queue, **cfg)


def _params(model: GPT) -> Params:
    return {k: np.asarray(v.to_host(), np.float64) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("t", [7, 9])  # shorter than the context, and all of it
def test_forward_matches_numpy(dev: DeviceHandle, t: int) -> None:
    model = _model(dev)
    # bigger weights than GPT-2's 0.02 so attention is far from uniform
    for name, p in model.state_dict().items():
        if ("weight" in name and "ln" not in name) or name == "pos_emb":
            copy_from_host(p, np.random.default_rng(len(name)).normal(0, 0.3, p.shape))
    ids = np.random.default_rng(t).integers(0, 13, (3, t)).astype(np.int32)
    out = model(Tensor.from_host(dev.queue, ids))
    assert out.shape == (3, t, 13) and out.dtype == "float32"
    want = _reference(_params(model), ids, layers=2, heads=2)
    np.testing.assert_allclose(out.to_host(), want, rtol=2e-4, atol=2e-4)


def test_changing_a_later_character_leaves_earlier_logits_alone(dev: DeviceHandle) -> None:
    model = _model(dev)
    ids = np.random.default_rng(0).integers(0, 13, (2, 9)).astype(np.int32)
    changed = ids.copy()
    changed[:, 5] = (changed[:, 5] + 1) % 13
    a = model(Tensor.from_host(dev.queue, ids)).to_host()
    b = model(Tensor.from_host(dev.queue, changed)).to_host()
    np.testing.assert_allclose(a[:, :5], b[:, :5], rtol=0, atol=1e-6)
    assert np.abs(a[:, 5:] - b[:, 5:]).max(axis=-1).min() > 1e-4  # every later one moves


def test_every_parameter_gets_a_gradient(dev: DeviceHandle) -> None:
    model = _model(dev, dropout=0.1)
    ids = np.random.default_rng(1).integers(0, 13, (2, 10)).astype(np.int32)
    x = Tensor.from_host(dev.queue, ids[:, :-1])
    y = Tensor.from_host(dev.queue, ids[:, 1:])
    with ag.Tape() as tape:
        loss = _token_loss(model(x), y)
    tape.backward(loss)
    assert abs(float(loss.to_host()) - math.log(13)) < 0.5  # near-uniform start
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert np.isfinite(p.grad.to_host()).all() and np.abs(p.grad.to_host()).max() > 0, name


def test_bad_model_arguments(dev: DeviceHandle) -> None:
    with pytest.raises(ValueError, match="heads=3 must divide width=16"):
        _model(dev, heads=3)
    with pytest.raises(ValueError, match="layers must be an integer >= 1, got 0"):
        _model(dev, layers=0)
    model = _model(dev)
    with pytest.raises(ValueError, match="10 tokens is longer than the context 9"):
        model(Tensor.from_host(dev.queue, np.zeros((1, 10), np.int32)))
    with pytest.raises(ValueError, match="integer token ids"):
        model(Tensor.from_host(dev.queue, np.zeros((1, 4), np.float32)))


def test_tied_head_shares_the_embedding(dev: DeviceHandle) -> None:
    model = _model(dev, tie_weights=True)
    assert model.head.weight is model.tok_emb.weight
    assert len(list(model.parameters())) == len(list(_model(dev).parameters())) - 1


def test_sampling_is_deterministic_under_a_seed(dev: DeviceHandle) -> None:
    vocab = CharVocab("abcdefghij \n.")
    model = _model(dev)
    first = sample_text(model, vocab, "ab c", 20, temperature=1.0, seed=5)
    assert first.startswith("ab c") and len(first) == 24 and set(first) <= set(vocab.chars)
    assert sample_text(model, vocab, "ab c", 20, temperature=1.0, seed=5) == first
    assert sample_text(model, vocab, "ab c", 20, temperature=1.0, seed=6) != first
    assert model.training  # restored
    with pytest.raises(ValueError, match="temperature"):
        sample_text(model, vocab, "a", 3, temperature=0.0)
    with pytest.raises(ValueError, match="prompt is empty"):
        sample_text(model, vocab, "", 3)


def test_unigram_entropy_is_the_character_entropy() -> None:
    text = "aaaabbc"
    p = np.array([4, 2, 1]) / 7
    assert unigram_entropy(text) == pytest.approx(float(-(p * np.log(p)).sum()))
    assert unigram_entropy("zzzz") == 0.0


def _torch_reference(torch: Any, p: dict[str, Any], ids: Any, layers: int, heads: int) -> Any:
    """The GPT's forward with torch.nn.functional (float64), for its gradients."""
    F = torch.nn.functional
    b, t = ids.shape
    x = p["tok_emb.weight"][ids] + p["pos_emb"][:t]
    c = x.shape[-1]
    for i in range(layers):
        pre = f"blocks.{i}."
        h = F.layer_norm(x, (c,), p[pre + "ln1.weight"], p[pre + "ln1.bias"])
        qkv = F.linear(h, p[pre + "attn.qkv.weight"], p[pre + "attn.qkv.bias"])
        q, k, v = qkv.view(b, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(b, t, c)
        x = x + F.linear(y, p[pre + "attn.proj.weight"], p[pre + "attn.proj.bias"])
        h = F.layer_norm(x, (c,), p[pre + "ln2.weight"], p[pre + "ln2.bias"])
        h = F.gelu(F.linear(h, p[pre + "fc.weight"], p[pre + "fc.bias"]), approximate="tanh")
        x = x + F.linear(h, p[pre + "fc_proj.weight"], p[pre + "fc_proj.bias"])
    x = F.layer_norm(x, (c,), p["ln_f.weight"], p["ln_f.bias"])
    return F.linear(x, p["head.weight"])


def test_loss_and_gradients_match_torch(dev: DeviceHandle) -> None:
    torch = pytest.importorskip("torch")
    model = _model(dev)
    ids = np.random.default_rng(2).integers(0, 13, (3, 10)).astype(np.int32)
    params = {k: torch.tensor(v, requires_grad=True) for k, v in _params(model).items()}
    tx, ty = (torch.from_numpy(a.astype(np.int64)) for a in (ids[:, :-1], ids[:, 1:]))
    want = torch.nn.functional.cross_entropy(
        _torch_reference(torch, params, tx, 2, 2).flatten(0, 1), ty.flatten())
    want.backward()
    x, y = (Tensor.from_host(dev.queue, a) for a in (ids[:, :-1], ids[:, 1:]))
    with ag.Tape() as tape:
        loss = _token_loss(model(x), y)
    tape.backward(loss)
    assert float(loss.to_host()) == pytest.approx(want.item(), rel=1e-5)
    for name, p in model.named_parameters():
        expected = params[name].grad.numpy()
        scale = float(np.abs(expected).max())
        assert p.grad is not None, name
        np.testing.assert_allclose(p.grad.to_host(), expected, rtol=0, atol=1e-4 * scale + 1e-7,
                                   err_msg=name)


def test_trainer_counts_tokens_and_reports_perplexity(dev: DeviceHandle) -> None:
    """``Trainer(input_dtype=None, class_axis=-1, perplexity=True)``: int ids reach the
    model, accuracy is over every token, perplexity is exp(loss)."""
    model = _model(dev)
    rng = np.random.default_rng(4)
    batches = [(ids[:, :-1], ids[:, 1:]) for ids in
               (rng.integers(0, 13, (n, 8)).astype(np.int32) for n in (3, 2))]
    trainer = Trainer(model, SGD(model.parameters(), lr=0.0), _token_loss, batches, batches,
                      device=dev, progress=False, input_dtype=None, class_axis=-1,
                      perplexity=True)
    (m,) = trainer.fit()
    assert m.extra["train_perplexity"] == pytest.approx(math.exp(m.train_loss))
    assert m.extra["val_perplexity"] == pytest.approx(math.exp(m.val_loss or 0.0))
    hits = 0
    for x, y in batches:  # lr 0: the weights the tally saw
        pred = model(Tensor.from_host(dev.queue, x)).to_host().argmax(-1)
        hits += int((pred == y).sum())
    assert m.val_accuracy == pytest.approx(hits / 35) and m.train_accuracy == m.val_accuracy
    with pytest.raises(ValueError, match="class_axis must be 1"):
        Trainer(model, SGD(model.parameters(), lr=0.1), _token_loss, batches, class_axis=2)
