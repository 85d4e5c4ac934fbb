"""The PyTorch digits training loop, run as PyTorch users write it, on netcl (issue 17).

``PYTORCH_LOOP`` below is a PyTorch program: an MLP (Adam) and a CNN (``Sequential(Conv2d, ReLU,
MaxPool2d, Flatten, Linear)``, SGD with momentum) trained on the digits with
``CrossEntropyLoss``, a ``DataLoader`` over a ``TensorDataset``, ``model.train()``,
``optimizer.zero_grad()``, ``loss.backward()``, ``optimizer.step()`` and a ``with no_grad():``
evaluation. The netcl program is that text with one mechanical rename, ``torch`` -> ``netcl``
(which also turns ``torch.nn`` into ``netcl.nn`` and ``torch.utils.data`` into
``netcl.utils.data``); the device line reads ``DEVICE``: ``"cpu"`` for PyTorch, each netcl
device under test for netcl. Both must reach the same accuracy band (>= 0.95 held out); when
torch is installed the PyTorch run is made here too and compared.

Recording without a Tape: netcl, as PyTorch, records every op on a tensor that requires grad
outside ``no_grad`` (``netcl.autograd.implicit_tape``, on by default), so ``loss.backward()``
needs no ``with Tape()`` block.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

from netcl.core.device import DeviceHandle

pytest.importorskip("sklearn")

EPOCHS = 10
BAND = 0.95  # held-out accuracy both frameworks reach
CLOSE = 0.03  # netcl within this of PyTorch's accuracy (one split, one seed)

PYTORCH_LOOP = '''
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device(DEVICE)

digits = load_digits()
X = (digits.images / 16.0).astype(np.float32)[:, None]  # (N, 1, 8, 8)
y = digits.target.astype(np.int64)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
train_set = TensorDataset(torch.tensor(X_train), torch.tensor(y_train))
test_set = TensorDataset(torch.tensor(X_test), torch.tensor(y_test))
train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
test_loader = DataLoader(test_set, batch_size=256)


def make_model(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(
        nn.Conv2d(1, 16, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 4 * 4, 10),
    )


def evaluate(model):
    model.eval()
    correct, total = 0.0, 0
    with torch.no_grad():
        for xb, yb in test_loader:
            xb, yb = xb.to(device), yb.to(device)
            pred = model(xb).argmax(dim=1)
            correct += (pred == yb).float().sum().item()
            total += yb.size(0)
    return correct / total


results = {}
for kind in ("mlp", "cnn"):
    model = make_model(kind).to(device)
    criterion = nn.CrossEntropyLoss()
    if kind == "mlp":
        optimizer = optim.Adam(model.parameters(), lr=3e-3)
    else:
        optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(EPOCHS):
        model.train()
        running = 0.0
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            outputs = model(xb)
            loss = criterion(outputs, yb)
            loss.backward()
            optimizer.step()
            running += loss.item() * xb.size(0)
            batch_acc = (outputs.argmax(dim=1) == yb).float().mean().item()
        print(f"{kind} epoch {epoch}: loss {running / len(train_set):.4f} "
              f"last batch acc {batch_acc:.3f}")
    results[kind] = evaluate(model)
    print(f"{kind} test accuracy {results[kind]:.4f}")
'''


def netcl_loop() -> str:
    """The PyTorch program with the mechanical rename."""
    return PYTORCH_LOOP.replace("torch", "netcl")


def run(source: str, device: Any, name: str) -> dict[str, float]:
    """Run a loop program; its held-out accuracy per model."""
    namespace: dict[str, Any] = {"DEVICE": device, "EPOCHS": EPOCHS, "__name__": name}
    exec(compile(source, name, "exec"), namespace)  # the program under test
    results: dict[str, float] = namespace["results"]
    return results


@pytest.fixture(scope="module")
def pytorch_results() -> dict[str, float] | None:
    try:
        torch = importlib.import_module("torch")  # optional: the reference run
    except ImportError:
        return None
    torch.set_num_threads(1)  # the test machines are small; one thread is the fair comparison
    return run(PYTORCH_LOOP, "cpu", "pytorch_loop")


def test_the_netcl_program_is_the_pytorch_program_renamed() -> None:
    source = netcl_loop()
    assert "torch" not in source and source.count("netcl") == PYTORCH_LOOP.count("torch")
    for line in ("import netcl.nn as nn", "from netcl.utils.data import DataLoader, TensorDataset",
                 "loss.backward()", "with netcl.no_grad():", "optimizer.zero_grad()"):
        assert line in source


def test_pytorch_loop_on_netcl_reaches_the_band(dev: DeviceHandle,
                                                pytorch_results: dict[str, float] | None
                                                ) -> None:
    results = run(netcl_loop(), dev, "netcl_loop")
    assert set(results) == {"mlp", "cnn"}
    assert min(results.values()) >= BAND, results
    if pytorch_results is not None:
        assert min(pytorch_results.values()) >= BAND, pytorch_results
        for kind, acc in results.items():
            assert abs(acc - pytorch_results[kind]) <= CLOSE, (results, pytorch_results)
