"""netcl.runtime.capture of a small GPT-style training step (token and learned position
embeddings, a pre-norm causal TransformerEncoderLayer with dropout, fused attention, a linear
head, AdamW) on every backend: the forward reads nothing on the host, and replayed steps
compute bitwise what eager steps compute, dropout masks included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import netcl.autograd as ag
from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.nn import (
    Embedding,
    LearnedPositionalEmbedding,
    Linear,
    Module,
    Transformer,
    TransformerEncoderLayer,
    manual_seed,
)
from netcl.optim import AdamW
from netcl.runtime import capture

VOCAB, BATCH, SEQ, WIDTH, HEADS, STEPS = 11, 3, 9, 12, 3, 4


class TinyGPT(Module):
    def __init__(self, dev: DeviceHandle) -> None:
        super().__init__()
        self.tokens = Embedding(VOCAB, WIDTH, device=dev)
        self.positions = LearnedPositionalEmbedding(SEQ, WIDTH, batch_first=True, device=dev)
        self.block = TransformerEncoderLayer(WIDTH, HEADS, 2 * WIDTH + 1, dropout=0.2,
                                             activation="gelu", batch_first=True,
                                             norm_first=True, device=dev)
        self.head = Linear(WIDTH, VOCAB, device=dev)
        self.mask = Transformer.generate_square_subsequent_mask(SEQ, device=dev)

    def forward(self, ids: Tensor) -> Tensor:
        x = self.block(self.positions(self.tokens(ids)), src_mask=self.mask, is_causal=True)
        out: Tensor = self.head(x)
        return out


def _train(dev: DeviceHandle, captured: bool) -> tuple[list[Any], Any]:
    manual_seed(3)
    model = TinyGPT(dev)
    opt = AdamW(model.parameters(), lr=1e-2)

    def step(ids: Tensor, targets: Tensor) -> Tensor:
        with ag.Tape() as tape:
            logits = model(ids)
            loss = ag.cross_entropy(ag.ops.reshape(logits, (BATCH * SEQ, VOCAB)), targets)
        tape.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    run: Callable[..., Any] = capture(step) if captured else step
    rng = np.random.default_rng(0)
    seen = []
    for _ in range(STEPS):
        ids = rng.integers(0, VOCAB, (BATCH, SEQ))
        targets = np.roll(ids, -1, axis=1).reshape(-1)
        seen.append(run(Tensor.from_host(dev.queue, ids),
                        Tensor.from_host(dev.queue, targets)).to_host().copy())
    return seen + [p.to_host().copy() for p in model.parameters()], run


def test_replayed_transformer_steps_equal_eager(dev: DeviceHandle) -> None:
    (eager, _), (replayed, step) = _train(dev, captured=False), _train(dev, captured=True)
    assert step.mode == "graph" and step.calls == STEPS
    assert eager[-1].shape == (VOCAB,)
    for a, b in zip(eager, replayed, strict=True):
        np.testing.assert_array_equal(a, b)
    assert eager[STEPS - 1] < eager[0]  # it learns
