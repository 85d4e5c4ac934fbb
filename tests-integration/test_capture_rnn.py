"""netcl.runtime.capture of recurrent training steps (a two-layer bidirectional LSTM with
dropout between layers, a GRU with a given initial state, a linear head, Adam) on every
backend: the recurrent scans read nothing on the host, and replayed steps compute bitwise what
eager steps compute, dropout masks included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.core import Tensor
from netcl.core.device import DeviceHandle
from netcl.nn import GRU, LSTM, Linear, Module, manual_seed
from netcl.optim import Adam
from netcl.runtime import capture

SEQ, BATCH, INPUT, HIDDEN, STEPS = 5, 3, 4, 6, 4


class Tagger(Module):
    def __init__(self, dev: DeviceHandle, cell: str) -> None:
        super().__init__()
        self.cell = cell
        if cell == "lstm":
            self.rnn: Module = LSTM(INPUT, HIDDEN, num_layers=2, dropout=0.3,
                                    bidirectional=True, batch_first=True, device=dev)
        else:
            self.rnn = GRU(INPUT, HIDDEN, batch_first=True, device=dev)
        width = HIDDEN * (2 if cell == "lstm" else 1)
        self.head = Linear(width, 2, device=dev)

    def forward(self, x: Tensor, h0: Tensor) -> Tensor:
        out, _ = self.rnn(x) if self.cell == "lstm" else self.rnn(x, h0)
        logits: Tensor = self.head(ag.ops.reshape(out, (BATCH * SEQ, out.shape[2])))
        return logits


def _train(dev: DeviceHandle, cell: str, captured: bool) -> tuple[list[Any], Any]:
    manual_seed(5)
    model = Tagger(dev, cell)
    opt = Adam(model.parameters(), lr=1e-2)

    def step(x: Tensor, h0: Tensor, targets: Tensor) -> Tensor:
        with ag.Tape() as tape:
            loss = ag.cross_entropy(model(x, h0), targets)
        tape.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss

    run: Callable[..., Any] = capture(step) if captured else step
    rng = np.random.default_rng(0)
    seen = []
    for _ in range(STEPS):
        x = rng.normal(size=(BATCH, SEQ, INPUT))
        h0 = rng.normal(size=(1, BATCH, HIDDEN))
        targets = (x.sum(axis=2) > 0).astype(np.int64).reshape(-1)
        seen.append(run(*(Tensor.from_host(dev.queue, a) for a in (x, h0, targets)))
                    .to_host().copy())
    return seen + [p.to_host().copy() for p in model.parameters()], run


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_replayed_recurrent_steps_equal_eager(dev: DeviceHandle, cell: str) -> None:
    (eager, _), (replayed, step) = _train(dev, cell, False), _train(dev, cell, True)
    assert step.mode == "graph" and step.calls == STEPS
    for a, b in zip(eager, replayed, strict=True):
        np.testing.assert_array_equal(a, b)
    assert eager[STEPS - 1] < eager[0]  # it learns
