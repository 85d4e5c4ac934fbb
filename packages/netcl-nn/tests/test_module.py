"""Module tree: registration, traversal, modes, state dicts, hooks, device moves, initialisers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle, manager
from netcl.core.tensor import Tensor
from netcl.nn import Identity, Module, ModuleList, Parameter, Sequential, init


class Affine(Module):
    def __init__(self, q: Any, n: int = 3) -> None:
        super().__init__()
        self.weight = Parameter.from_host(q, np.arange(n * 2.0).reshape(n, 2))
        self.bias = Parameter.from_host(q, np.zeros(n))
        self.register_buffer("count", Tensor.from_host(q, np.zeros(1)))

    def forward(self, x: Any) -> Any:
        return x


class Net(Module):
    def __init__(self, q: Any) -> None:
        super().__init__()
        self.a = Affine(q)
        self.blocks = ModuleList([Affine(q, 4), Identity()])
        self.head = Sequential(Affine(q, 5))

    def forward(self, x: Any) -> Any:
        return self.head(x)


def test_registration_and_traversal(dev: DeviceHandle) -> None:
    net = Net(dev.queue)
    names = [n for n, _ in net.named_parameters()]
    assert names == ["a.weight", "a.bias", "blocks.0.weight", "blocks.0.bias",
                     "head.0.weight", "head.0.bias"]
    assert [n for n, _ in net.named_buffers()] == ["a.count", "blocks.0.count", "head.0.count"]
    assert [n for n, _ in net.named_children()] == ["a", "blocks", "head"]
    assert len(list(net.modules())) == 7
    assert all(p.requires_grad and p.persistent for p in net.parameters())
    assert list(net.state_dict()) == [*names, "a.count", "blocks.0.count", "head.0.count"]


def test_shared_parameter_counted_once(dev: DeviceHandle) -> None:
    net = Net(dev.queue)
    net.head[0].weight = net.a.weight
    assert len(list(net.parameters())) == 5


def test_train_eval_propagate(dev: DeviceHandle) -> None:
    net = Net(dev.queue)
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())


def test_state_dict_round_trip_in_place(dev: DeviceHandle) -> None:
    src, dst = Net(dev.queue), Net(dev.queue)
    for p in src.parameters():
        init.normal_(p, rng=np.random.default_rng(0))
    weight_obj = dst.a.weight
    dst.load_state_dict(src.state_dict())
    assert dst.a.weight is weight_obj  # same tensor, new values
    for (n1, t1), (n2, t2) in zip(src.state_dict().items(), dst.state_dict().items()):
        assert n1 == n2
        np.testing.assert_array_equal(t1.to_host(), t2.to_host())
    host = {k: v.to_host() for k, v in src.state_dict().items()}
    dst.load_state_dict(host)


def test_load_state_dict_checks_before_writing(dev: DeviceHandle) -> None:
    net = Net(dev.queue)
    before = {k: v.to_host().copy() for k, v in net.state_dict().items()}
    state = {k: np.ones(v.shape) for k, v in net.state_dict().items()}
    state["a.weight"] = np.ones((9, 9))
    with pytest.raises(ValueError, match=r"shape mismatch for a\.weight: module \(3, 2\), "
                                         r"state \(9, 9\)"):
        net.load_state_dict(state)
    del state["a.weight"]
    state["extra"] = np.ones(1)
    with pytest.raises(KeyError, match=r"missing keys \['a.weight'\], unexpected keys \['extra'\]"):
        net.load_state_dict(state)
    for k, v in net.state_dict().items():
        np.testing.assert_array_equal(v.to_host(), before[k])
    net.load_state_dict(state, strict=False)
    np.testing.assert_array_equal(net.a.bias.to_host(), np.ones(3))


def test_hooks(dev: DeviceHandle) -> None:
    net = Net(dev.queue)
    calls: list[str] = []
    pre = net.register_forward_pre_hook(lambda m, inputs: (inputs[0] * 2,))
    def post_hook(m: Module, inputs: tuple[Any, ...], out: Any) -> Any:
        calls.append("post")
        return out + 1

    post = net.register_forward_hook(post_hook)
    assert net(3) == 7 and calls == ["post"]
    pre.remove()
    post.remove()
    post.remove()
    assert net(3) == 3


def test_move_between_devices(dev: DeviceHandle) -> None:
    cpu = manager.default("cpu")
    assert cpu is not None
    net = Net(cpu.queue)
    init.constant_(net.a.weight, 2.5)
    net.to(dev)
    assert net.a.weight.queue is dev.queue and isinstance(net.a.weight, Parameter)
    np.testing.assert_array_equal(net.a.weight.to_host(), np.full((3, 2), 2.5))
    assert [n for n, _ in net.named_buffers()] == ["a.count", "blocks.0.count", "head.0.count"]


def test_zero_grad(dev: DeviceHandle) -> None:
    net = Net(dev.queue)
    for p in net.parameters():
        p.grad = Tensor.from_host(dev.queue, np.ones(p.shape))
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_errors() -> None:
    class Bad(Module):
        def __init__(self) -> None:
            self.x = 1

    with pytest.raises(RuntimeError, match=r"call super\(\).__init__\(\) before assigning"):
        Bad()
    with pytest.raises(TypeError, match="item 0 must be a Module, got int"):
        Sequential(1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="defines no forward"):
        Module()(1)


@pytest.mark.parametrize("shape", [(257, 33), (16, 7, 3, 3)], ids=str)
def test_initialisers_follow_formulas(dev: DeviceHandle, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    w = Tensor.from_shape(dev.queue, shape)
    fan_in = shape[1] * int(np.prod(shape[2:]))
    fan_out = shape[0] * int(np.prod(shape[2:]))
    init.kaiming_uniform_(w, a=0, nonlinearity="relu", rng=rng)
    bound = np.sqrt(2.0) * np.sqrt(3.0 / fan_in)
    host = w.to_host()
    assert np.abs(host).max() <= bound and np.abs(host).max() > 0.9 * bound
    # a sample standard deviation: a statistical bound (15%), not a rounding tolerance
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu", rng=rng)
    assert w.to_host().std() == pytest.approx(np.sqrt(2.0 / fan_out), rel=0.15)
    init.xavier_uniform_(w, rng=rng)
    assert np.abs(w.to_host()).max() <= np.sqrt(6.0 / (fan_in + fan_out))
    init.xavier_normal_(w, gain=2.0, rng=rng)
    assert w.to_host().std() == pytest.approx(2 * np.sqrt(2.0 / (fan_in + fan_out)), rel=0.15)
    init.zeros_(w)
    assert not w.to_host().any()
    with pytest.raises(ValueError, match="at least 2 dims"):
        init.xavier_uniform_(Tensor.from_shape(dev.queue, (3,)))
    with pytest.raises(ValueError, match="mode must be"):
        init.kaiming_uniform_(w, mode="fan")
