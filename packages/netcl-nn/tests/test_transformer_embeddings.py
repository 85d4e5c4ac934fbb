"""The input side of a transformer on every backend: SinusoidalPositionalEncoding against the
formula of "Attention Is All You Need", LearnedPositionalEmbedding's values and gradient (the
rows of the positions used, summed over the batch), both layouts, dropout and errors; and
Embedding over (B, T) token ids with padding_idx (values, the padding row's zero gradient),
against NumPy and, with torch installed, torch.nn.Embedding's."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.nn import Embedding, LearnedPositionalEmbedding, SinusoidalPositionalEncoding

Array = np.ndarray[Any, Any]


def ref_sinusoidal(length: int, d: int) -> Array:
    pe = np.zeros((length, d))
    for pos in range(length):
        for i in range(d):
            angle = pos / 10000 ** (2 * (i // 2) / d)
            pe[pos, i] = math.sin(angle) if i % 2 == 0 else math.cos(angle)
    return pe


@pytest.mark.parametrize("d", [6, 7])
@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
def test_sinusoidal(dev: DeviceHandle, d: int, batch_first: bool) -> None:
    layer = SinusoidalPositionalEncoding(d, max_len=40, batch_first=batch_first, device=dev)
    x = np.random.default_rng(0).standard_normal((3, 33, d) if batch_first else (33, 3, d))
    pe = ref_sinusoidal(33, d)
    want = x + (pe[None] if batch_first else pe[:, None])
    out = layer(Tensor.from_host(dev.queue, x))
    np.testing.assert_allclose(out.to_host(), want, rtol=1e-5, atol=1e-5)
    assert list(layer.state_dict()) == []  # the table is not saved
    unbatched = layer(Tensor.from_host(dev.queue, x[0] if batch_first else x[:, 0]))
    np.testing.assert_allclose(unbatched.to_host(), want[0] if batch_first else want[:, 0],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch_first", [False, True], ids=["seq_first", "batch_first"])
def test_learned_values_and_gradient(dev: DeviceHandle, batch_first: bool) -> None:
    layer = LearnedPositionalEmbedding(9, 5, batch_first=batch_first, device=dev)
    w = layer.weight.to_host().astype(np.float64)
    assert abs(w.std() - 0.02) < 0.01 and w.shape == (9, 5)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 7, 5) if batch_first else (7, 4, 5))
    g = rng.standard_normal(x.shape)
    xt = Tensor.from_host(dev.queue, x)
    xt.requires_grad = True
    with ag.Tape() as tape:
        out = layer(xt)
    tape.backward(out, grad=Tensor.from_host(dev.queue, g))
    np.testing.assert_allclose(out.to_host(), x + (w[None, :7] if batch_first else
                                                   w[:7, None]), rtol=1e-5, atol=1e-6)
    want = np.zeros((9, 5))
    want[:7] = g.sum(0) if batch_first else g.sum(1)
    assert layer.weight.grad is not None and xt.grad is not None
    np.testing.assert_allclose(layer.weight.grad.to_host(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xt.grad.to_host(), g, rtol=1e-6, atol=1e-6)
    assert list(layer.state_dict()) == ["weight"]


def test_dropout_and_errors(dev: DeviceHandle) -> None:
    layer = SinusoidalPositionalEncoding(4, max_len=5, dropout=0.5, device=dev)
    x = Tensor.from_host(dev.queue, np.ones((5, 200, 4)))
    assert (layer(x).to_host() == 0).mean() > 0.3
    layer.eval()
    assert (layer(x).to_host() != 0).all()
    with pytest.raises(ValueError, match=r"SinusoidalPositionalEncoding: sequence length 6 "
                                         r"exceeds max_len=5 \(input \(6, 1, 4\)\)"):
        layer(Tensor.from_host(dev.queue, np.ones((6, 1, 4))))
    with pytest.raises(ValueError, match=r"LearnedPositionalEmbedding: expected input "
                                         r"\(S, N, 4\).*got \(2, 3\)"):
        LearnedPositionalEmbedding(8, 4, device=dev)(Tensor.from_host(dev.queue,
                                                                      np.ones((2, 3))))
    with pytest.raises(ValueError, match="LearnedPositionalEmbedding: max_len must be a "
                                         "positive int, got 0"):
        LearnedPositionalEmbedding(0, 4, device=dev)


def test_embedding_tokens_with_padding(dev: DeviceHandle) -> None:
    """(B, T) ids, padding_idx: output rows, the gradient (summed per id, none for padding)."""
    emb = Embedding(11, 6, padding_idx=0, device=dev)
    w = emb.weight.to_host().astype(np.float64)
    ids = np.random.default_rng(2).integers(0, 11, (5, 7))
    ids[0, :3] = 0
    g = np.random.default_rng(3).standard_normal((5, 7, 6))
    with ag.Tape() as tape:
        out = emb(Tensor.from_host(dev.queue, ids))
    tape.backward(out, grad=Tensor.from_host(dev.queue, g))
    np.testing.assert_allclose(out.to_host(), w[ids], rtol=1e-6)
    want = np.zeros((11, 6))
    np.add.at(want, ids.reshape(-1), g.reshape(-1, 6))
    want[0] = 0.0
    assert emb.weight.grad is not None
    np.testing.assert_allclose(emb.weight.grad.to_host(), want, rtol=1e-5, atol=1e-5)


def test_torch_embedding_state_dict_and_gradient(dev: DeviceHandle) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    theirs = torch.nn.Embedding(13, 5, padding_idx=3)
    ours = Embedding(13, 5, padding_idx=3, device=dev)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    ids = np.random.default_rng(4).integers(0, 13, (4, 9))
    ids[:, 0] = 3
    want = theirs(torch.tensor(ids))
    (want * want).sum().backward()
    with ag.Tape() as tape:
        out = ours(Tensor.from_host(dev.queue, ids))
        loss = ag.ops.sum(ag.ops.mul(out, out))
    tape.backward(loss)
    np.testing.assert_allclose(out.to_host(), want.detach().numpy(), rtol=1e-6)
    assert ours.weight.grad is not None and theirs.weight.grad is not None
    np.testing.assert_allclose(ours.weight.grad.to_host(), theirs.weight.grad.numpy(),
                               rtol=1e-5, atol=1e-6)
