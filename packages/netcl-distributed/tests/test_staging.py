"""Persistent host staging (NOTE [ Persistent host staging ] in ``_staging.py``): after the
first step, DistributedDataParallel, ``GradBucketer.reduce`` and the Tensor path of
``all_reduce``/``broadcast`` reuse the host arrays they made and never call ``Tensor.to_host``;
on every device, on a group of one rank (the multi-rank values are checked by
tests-integration/test_ddp.py and test_collectives.py)."""

from __future__ import annotations

import doctest
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
import netcl.distributed as dist
import netcl.distributed._staging as staging_module
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.nn import Linear, Module, ReLU, Sequential


@pytest.fixture
def group() -> Iterator[dist.ProcessGroup]:
    g = dist.init_process_group("shm", rank=0, world_size=1)
    yield g
    dist.destroy_process_group()


def no_host_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, any Tensor download through to_host raises."""
    def refuse(self: Tensor, *args: Any) -> Any:
        raise AssertionError(f"Tensor.to_host called in a steady-state step ({self.shape})")
    monkeypatch.setattr(Tensor, "to_host", refuse)
    monkeypatch.setattr(Tensor, "to_host_async", refuse)


def mlp(queue: Any) -> Module:
    rng = np.random.default_rng(0)
    return Sequential(Linear(7, 33, queue=queue, rng=rng), ReLU(),
                      Linear(33, 5, queue=queue, rng=rng))


def grad_of(p: Tensor | None) -> np.ndarray[Any, Any]:
    assert p is not None and p.grad is not None
    return p.grad.to_host()


def host_arrays(ddp: dist.DistributedDataParallel) -> list[int]:
    bucketer = ddp.bucketer
    return [id(b.flat) for b in bucketer.buckets] + [id(s) for s in bucketer._scratch.values()]


def test_docstring_examples() -> None:
    result = doctest.testmod(staging_module)
    assert result.attempted > 0 and result.failed == 0


def test_ddp_steps_reuse_their_staging(group: dist.ProcessGroup, dev: DeviceHandle,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    q = dev.queue
    plain, wrapped = mlp(q), mlp(q)
    ddp = dist.DistributedDataParallel(wrapped, group, bucket_cap_mb=1e-3)
    assert len(ddp.bucketer.buckets) > 1
    xs = [Tensor.from_host(q, np.random.default_rng(s).normal(size=(9, 7)).astype(np.float32))
          for s in range(4)]

    def step(model: Module, x: Tensor) -> None:
        ag.ops.sum(ag.ops.mul(model(x), 0.5)).backward()

    for model in (plain, ddp):  # the first steps: one that makes the staging, one accumulating
        step(model, xs[0])
        step(model, xs[1])
    before = host_arrays(ddp)
    no_host_reads(monkeypatch)
    step(ddp, xs[2])  # the hooks add onto the existing gradients (old + g, mean - old)
    wrapped.zero_grad()
    step(ddp, xs[3])  # the hooks start from no gradient
    ddp.bucketer.reduce()  # the whole bucketed reduction after backward
    assert host_arrays(ddp) == before
    monkeypatch.undo()
    step(plain, xs[2])
    plain.zero_grad()
    step(plain, xs[3])
    want = [grad_of(p) for p in plain.parameters()]
    for got, w in zip((grad_of(p) for p in wrapped.parameters()), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-7)


class TwoHeads(Module):
    def __init__(self, queue: Any) -> None:
        super().__init__()
        self.used = Linear(7, 5, queue=queue)
        self.unused = Linear(7, 5, queue=queue)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.used(x)
        return out


def test_unused_parameters_finish_without_host_reads(group: dist.ProcessGroup,
                                                     dev: DeviceHandle,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    q = dev.queue
    heads = TwoHeads(q)
    ddp = dist.DistributedDataParallel(heads, group)
    x = Tensor.from_host(q, np.ones((3, 7), np.float32))
    for p in heads.unused.parameters():  # the unused head has gradients to hand over
        p.grad = Tensor.from_host(q, np.full(p.shape, 2.0, np.float32))
    ag.ops.sum(ddp(x)).backward()
    ddp.finish_sync()  # the unused head's gradients are handed over here
    no_host_reads(monkeypatch)
    ag.ops.sum(ddp(x)).backward()
    ddp.finish_sync()
    monkeypatch.undo()
    assert np.all(grad_of(heads.unused.weight) == 2.0)
    assert np.all(grad_of(heads.used.bias) == 6.0)  # 3 rows, two backward passes


def test_collectives_reuse_a_staging_array(group: dist.ProcessGroup, dev: DeviceHandle,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    q = dev.queue
    t = Tensor.from_host(q, np.arange(6, dtype=np.float32).reshape(2, 3))
    dist.all_reduce(t)  # the first call makes the staging (on OpenCL)
    seen: list[np.ndarray[Any, Any]] = []
    backend = group.backend
    real_all_reduce, real_broadcast = backend.all_reduce, backend.broadcast

    def spy_all_reduce(host: np.ndarray[Any, Any], op: str = "sum") -> None:
        seen.append(host)
        real_all_reduce(host, op)

    def spy_broadcast(host: np.ndarray[Any, Any], src: int = 0) -> None:
        seen.append(host)
        real_broadcast(host, src)

    monkeypatch.setattr(backend, "all_reduce", spy_all_reduce)
    monkeypatch.setattr(backend, "broadcast", spy_broadcast)
    no_host_reads(monkeypatch)
    for op in ("sum", "mean", "max"):
        dist.all_reduce(t, op)
    dist.broadcast(t, 0)
    if t.array is not None:  # the NumPy backend: the tensor's own storage, no staging at all
        assert all(np.shares_memory(h, t.array) for h in seen)
    else:
        assert len({id(h) for h in seen}) == 1  # one array, staged again and again
    # two reductions in flight at once never share a staging array
    u = Tensor.from_host(q, np.ones((2, 3), np.float32))
    works = [dist.all_reduce(x, "sum", async_op=True) for x in (t, u)]
    for w in works:
        assert w is not None
        w.wait()
    monkeypatch.undo()
    assert t.to_host().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert u.to_host().tolist() == [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]


def test_staging_pool_lends_each_array_once_and_keeps_at_most_limit() -> None:
    pool = staging_module.StagingPool(limit=2)
    f32 = np.dtype(np.float32)
    a, b = pool.take((3,), f32), pool.take((3,), f32)
    assert a is not b  # both lent at once: two arrays
    c = pool.take((4,), f32)
    for x in (a, b, c):
        pool.give(x)
    kept = [pool.take((3,), f32), pool.take((3,), f32), pool.take((4,), f32)]
    assert sum(any(k is x for x in (a, b, c)) for k in kept) == 2  # the oldest was dropped
    assert kept[2] is c


def test_flat_staging_is_made_again_when_the_layout_changes(dev: DeviceHandle) -> None:
    q = dev.queue
    flat = staging_module.FlatStaging()
    ts = [Tensor.from_host(q, np.ones(3, np.float32)), Tensor.from_host(q, np.ones(2, np.float32))]
    first = flat.flat
    flat.views(ts)
    made = flat.flat
    assert made is not first and made.size == 5
    flat.views(ts)
    assert flat.flat is made
    flat.views(ts[:1])
    assert flat.flat is not made and flat.flat.size == 3
