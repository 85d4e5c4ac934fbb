"""In one process: bucket layout, sync_grads over replicas, and DistributedDataParallel's
hooks (gradients equal to the plain model's, no_sync accumulation, unused parameters) on a
group of one rank, on every device. The multi-rank runs are in tests-integration/test_ddp.py
(they train on netcl.data)."""

from __future__ import annotations

import doctest
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.distributed as dist
import netcl.distributed._bucket as bucket_module
from netcl.core.device import DeviceHandle, manager
from netcl.core.tensor import Tensor
from netcl.nn import Linear, Module, ReLU, Sequential


@pytest.fixture
def cpu_queue() -> Any:
    dev = manager.default("cpu")
    assert dev is not None  # the NumPy backend is always there
    return dev.queue


@pytest.fixture
def group() -> Iterator[dist.ProcessGroup]:
    g = dist.init_process_group("shm", rank=0, world_size=1)
    yield g
    dist.destroy_process_group()


def mlp(queue: Any, seed: int = 0) -> Module:
    rng = np.random.default_rng(seed)
    return Sequential(Linear(7, 33, queue=queue, rng=rng), ReLU(),
                      Linear(33, 5, queue=queue, rng=rng))


def grads(model: Module) -> list[np.ndarray[Any, Any]]:
    return [p.grad.to_host().copy() for p in model.parameters() if p.grad is not None]


def backward(model: Module, queue: Any, seed: int) -> None:
    x = np.random.default_rng(seed).normal(size=(9, 7)).astype(np.float32)
    ag.ops.sum(ag.ops.mul(model(Tensor.from_host(queue, x)), 0.5)).backward()


def test_docstring_examples() -> None:
    result = doctest.testmod(bucket_module)
    assert result.attempted > 0 and result.failed == 0


def test_bucket_layout_reverse_order_cap_and_dtype(group: dist.ProcessGroup,
                                                   cpu_queue: Any) -> None:
    model = mlp(cpu_queue)
    params = list(model.parameters())  # w1 (33, 7), b1 33, w2 (5, 33), b2 5
    one = dist.GradBucketer(params, group)
    assert len(one.buckets) == 1 and one.params == params[::-1]
    small = dist.GradBucketer(params, group, bucket_cap_mb=(33 * 7 * 4 - 1) / (1 << 20))
    assert [len(b.params) for b in small.buckets] == [3, 1]  # w1 alone: over the cap
    mixed = [*params, Tensor.from_host(cpu_queue, np.zeros(3), dtype="float64")]
    mixed[-1].requires_grad = True
    assert len(dist.GradBucketer(mixed, group).buckets) == 2
    with pytest.raises(ValueError, match="bucket_cap_mb"):
        dist.GradBucketer(params, group, bucket_cap_mb=0)


def test_sync_grads_averages_replicas(dev: DeviceHandle) -> None:
    replicas = [mlp(dev.queue) for _ in range(3)]
    for k, m in enumerate(replicas):
        backward(m, dev.queue, seed=k)
    want = [np.mean(gs, axis=0) for gs in zip(*(grads(m) for m in replicas))]
    dist.sync_grads(replicas)
    for m in replicas:
        for got, w in zip(grads(m), want):
            np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-7)


def test_ddp_gradients_equal_plain_model(group: dist.ProcessGroup,
                                         dev: DeviceHandle) -> None:
    plain, wrapped = mlp(dev.queue), mlp(dev.queue)
    ddp = dist.DistributedDataParallel(wrapped, group, bucket_cap_mb=1e-3)
    assert len(ddp.bucketer.buckets) > 1
    backward(plain, dev.queue, 1)
    backward(ddp, dev.queue, 1)
    ddp.finish_sync()  # nothing left: the last hook finished it
    for got, want in zip(grads(wrapped), grads(plain)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    assert sorted(ddp.state_dict()) == sorted(wrapped.state_dict())  # no "module." prefix


def test_no_sync_accumulates_then_reduces(group: dist.ProcessGroup,
                                          dev: DeviceHandle) -> None:
    plain, wrapped = mlp(dev.queue), mlp(dev.queue)
    ddp = dist.DistributedDataParallel(wrapped, group)
    for seed in (1, 2):
        backward(plain, dev.queue, seed)
    with ddp.no_sync():
        backward(ddp, dev.queue, 1)
    backward(ddp, dev.queue, 2)
    for got, want in zip(grads(wrapped), grads(plain)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class TwoHeads(Module):
    def __init__(self, queue: Any) -> None:
        super().__init__()
        rng = np.random.default_rng(0)
        self.used = Linear(7, 5, queue=queue, rng=rng)
        self.unused = Linear(7, 5, queue=queue, rng=rng)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.used(x)
        return out


def test_unused_parameters_need_finish_sync(group: dist.ProcessGroup, cpu_queue: Any) -> None:
    heads = TwoHeads(cpu_queue)
    ddp = dist.DistributedDataParallel(heads, group)
    backward(ddp, cpu_queue, 0)
    with pytest.raises(RuntimeError, match="finish_sync"):
        backward(ddp, cpu_queue, 1)
    ddp.finish_sync()  # unused parameters get the average of zeros
    assert heads.unused.weight.grad is not None
    assert not np.any(heads.unused.weight.grad.to_host())
    backward(ddp, cpu_queue, 1)  # the next step runs again


def test_ddp_rejects_non_module(group: dist.ProcessGroup) -> None:
    with pytest.raises(TypeError, match=r"netcl\.nn\.Module"):
        dist.DistributedDataParallel("model", group)  # type: ignore[arg-type]
