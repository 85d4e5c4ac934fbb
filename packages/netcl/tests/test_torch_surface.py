"""The PyTorch-style root: lazy submodules, dtype names, factories with device=/dtype=,
manual_seed, the default device and netcl.utils.data, on every device."""

from __future__ import annotations

import os

import numpy as np
import pytest

import netcl
import netcl.nn as nn
from netcl.core.device import DeviceHandle, manager
from netcl.utils.data import DataLoader, TensorDataset


def test_lazy_submodules_and_names() -> None:
    assert netcl.nn is nn and netcl.optim.__name__ == "netcl.optim"
    assert netcl.autograd.__name__ == "netcl.autograd" and netcl.data.__name__ == "netcl.data"
    assert netcl.utils.data.DataLoader is DataLoader
    assert netcl.no_grad is netcl.autograd.no_grad and netcl.Tape is netcl.autograd.Tape
    assert (netcl.float32, netcl.float, netcl.half, netcl.long, netcl.int, netcl.bool) == (
        "float32", "float32", "float16", "int64", "int32", "uint8")
    assert {"nn", "float32", "tensor", "manual_seed"} <= set(dir(netcl))
    with pytest.raises(AttributeError, match="has no attribute 'cuda'"):
        netcl.cuda


def test_factories_on_every_device(dev: DeviceHandle) -> None:
    z = netcl.zeros(3, 5, device=dev)
    assert z.queue is dev.queue and z.shape == (3, 5) and z.dtype == "float32"
    assert netcl.zeros((2, 3), dtype=netcl.long, device=dev).tolist() == [[0, 0, 0]] * 2
    assert netcl.ones([7], device=dev).tolist() == [1.0] * 7
    assert netcl.full((2,), 3, device=dev).dtype == "int64"
    assert netcl.empty(4, device=dev).shape == (4,)
    assert netcl.arange(1, 7, 2, device=dev).tolist() == [1, 3, 5]
    t = netcl.tensor([[1, 2], [3, 4]], device=dev)
    assert t.dtype == "int64" and t.tolist() == [[1, 2], [3, 4]]
    f = netcl.tensor(np.ones((2, 2)), dtype=netcl.float16, device=dev, requires_grad=True)
    assert f.dtype == "float16" and f.requires_grad
    assert netcl.from_numpy(np.arange(3, dtype=np.int32), device=dev).dtype == "int32"
    assert netcl.zeros_like(t).queue is dev.queue and netcl.ones_like(t).tolist() == [[1, 1]] * 2
    r = netcl.rand(33, device=dev).to_host()
    assert r.shape == (33,) and ((r >= 0) & (r < 1)).all()
    assert netcl.randn(2, 7, device=dev).shape == (2, 7)
    with pytest.raises(TypeError, match="zeros: sizes must be ints"):
        netcl.zeros(2.5)


def test_manual_seed_repeats_init_dropout_and_random(dev: DeviceHandle) -> None:
    def draw() -> tuple[list[float], list[float], list[float]]:
        netcl.manual_seed(1234)
        layer = netcl.nn.Linear(3, 2, device=dev)
        noise = netcl.randn(5, device=dev).tolist()
        drop = netcl.nn.Dropout(0.5)
        drop.train()
        mask = drop(netcl.ones(9, device=dev)).tolist()
        return layer.weight.tolist(), noise, mask

    assert draw() == draw()


def test_manual_seed_repeats_the_loader_order() -> None:
    ds = TensorDataset(np.arange(20.0), np.arange(20))

    def order() -> list[int]:
        netcl.manual_seed(5)
        return [int(v) for _, y in DataLoader(ds, batch_size=4, shuffle=True) for v in y.tolist()]

    first = order()
    assert first == order() and sorted(first) == list(range(20)) and first != list(range(20))


def test_set_default_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NETCL_DEVICE", raising=False)
    chosen = netcl.set_default_device("cpu")
    assert os.environ["NETCL_DEVICE"] == "cpu"
    assert netcl.get_default_device() is chosen is manager.default("cpu")
    assert netcl.tensor([1.0]).backend == "cpu"
    assert netcl.device("numpy") is chosen
    handles = manager.all_handles()
    if len(handles) > 1:  # an OpenCL device: chosen by index, new tensors go there
        cl = netcl.set_default_device(handles[0])
        assert os.environ["NETCL_DEVICE"].startswith("cl:")
        assert netcl.zeros(2).queue is cl.queue
    with pytest.raises(ValueError, match="unknown device selector"):
        netcl.set_default_device("no-such-device-xyz")


def test_tensor_dataset_and_loader_yield_tensors(dev: DeviceHandle) -> None:
    x = netcl.tensor(np.arange(14.0, dtype=np.float32).reshape(7, 2), device=dev)
    y = netcl.tensor(np.arange(7), device=dev)
    ds = TensorDataset(x, y)
    assert len(ds) == 7
    batches = list(DataLoader(ds, batch_size=3))
    assert [b[0].shape for b in batches] == [(3, 2), (3, 2), (1, 2)]
    xb, yb = batches[0]
    assert xb.backend == "cpu" and yb.dtype == "int64"  # CPU tensors, as PyTorch's loader
    assert xb.to(dev).queue is dev.queue and xb.to(dev).tolist() == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match="same first dimension"):
        TensorDataset(x, netcl.tensor([1, 2]))


def test_free_functions_as_pytorch(dev: DeviceHandle) -> None:
    a = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    x = netcl.tensor(a, device=dev)
    values, indices = netcl.max(x, 1)
    assert values.tolist() == a.max(1).tolist() and indices.tolist() == a.argmax(1).tolist()
    assert netcl.min(x).item() == a.min() and netcl.argmin(x, dim=0).tolist() == \
        a.argmin(0).tolist()
    assert netcl.sum(x > 0).item() == int((a > 0).sum())
    np.testing.assert_allclose(netcl.mean(x, dim=1).to_host(), a.mean(1), rtol=1e-5)
    assert netcl.cat([x, x], dim=1).shape == (3, 10) and netcl.stack([x, x], 1).shape == (3, 2, 5)
    np.testing.assert_allclose(netcl.where(x > 0, x, 0.0).to_host(), np.where(a > 0, a, 0))
    np.testing.assert_allclose(netcl.clamp(netcl.abs(x), max=1.0).to_host(),
                               np.minimum(np.abs(a), 1.0))
    np.testing.assert_allclose(netcl.sigmoid(netcl.exp(netcl.log(netcl.sqrt(abs(x))))).to_host(),
                               1 / (1 + np.exp(-np.sqrt(np.abs(a)))), rtol=1e-5)
    assert netcl.flatten(x).shape == (15,) and netcl.reshape(x, (5, -1)).shape == (5, 3)
    assert netcl.numel(x) == 15 and netcl.is_tensor(x) and not netcl.is_tensor(a)
    assert netcl.maximum(x, 0.0).tolist() == np.maximum(a, 0).tolist()
    assert netcl.tanh(netcl.minimum(x, 0.0)).shape == (3, 5)


def test_free_functions_record(dev: DeviceHandle) -> None:
    w = netcl.tensor([1.0, -2.0, 3.0], device=dev, requires_grad=True)
    with netcl.Tape():
        loss = netcl.sum(netcl.cat([w, w * 2]) ** 2)
    loss.backward()
    assert w.grad is not None and w.grad.tolist() == [10.0, -20.0, 30.0]


def test_eval_under_no_grad_records_nothing(dev: DeviceHandle) -> None:
    netcl.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7, device=dev), nn.ReLU(), nn.Linear(7, 3, device=dev))
    x = netcl.randn(4, 5, device=dev)
    model.eval()
    with netcl.no_grad():
        out = model(x)
        assert not netcl.autograd.is_recording()
    assert not out.requires_grad and out.grad_fn is None
    train_out = model(x)  # no tape, no no_grad: recorded, as PyTorch
    assert train_out.requires_grad and train_out.grad_fn is not None
    train_out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
