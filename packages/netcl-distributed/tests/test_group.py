"""The process group in one process: init from arguments and environment, errors, the default
group, device assignment, and the collectives' argument checks on Tensors and arrays."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import netcl.distributed as dist
from netcl.core.device import DeviceHandle, manager
from netcl.core.tensor import Tensor, narrow_view
from netcl.distributed import DistributedError
from netcl.distributed._backend import default_timeout_s
from netcl.distributed.testing import run_threads


@pytest.fixture()
def group() -> Iterator[dist.ProcessGroup]:
    pg = dist.init_process_group("shm", rank=0, world_size=1, timeout=2)
    yield pg
    dist.destroy_process_group()


def test_init_and_destroy(group: dist.ProcessGroup) -> None:
    assert dist.is_initialized() and dist.get_group() is group
    assert (dist.get_rank(), dist.get_world_size(), group.backend.name) == (0, 1, "shm")
    assert (group.local_rank, group.local_world_size) == (0, 1)
    assert group.backend.timeout_s == 2
    with pytest.raises(RuntimeError, match="already initialised"):
        dist.init_process_group("shm")


def test_no_group_is_a_clear_error() -> None:
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match=r"call init_process_group\(\) first"):
        dist.get_rank()
    dist.destroy_process_group()  # idempotent


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_RANK", "0")
    monkeypatch.setenv("NETCL_WORLD_SIZE", "1")
    monkeypatch.setenv("NETCL_LOCAL_RANK", "3")
    monkeypatch.setenv("NETCL_DIST_TIMEOUT_S", "7.5")
    pg = dist.init_process_group()
    try:
        assert (pg.rank, pg.world_size, pg.local_rank, pg.backend.timeout_s) == (0, 1, 3, 7.5)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(("env", "kwargs", "error", "match"), [
    ({}, {"backend": "gloo"}, ValueError, "backend must be 'auto', 'shm' or 'mpi'"),
    ({}, {"rank": 2, "world_size": 2}, ValueError, "need 0 <= rank < world_size, got rank 2"),
    ({"NETCL_WORLD_SIZE": "2", "NETCL_RANK": "1"}, {}, ValueError, "set NETCL_DIST_ID"),
    ({"NETCL_RANK": "one"}, {}, ValueError, "NETCL_RANK must be an integer, got 'one'"),
    ({"NETCL_DIST_TIMEOUT_S": "-1"}, {}, ValueError, "NETCL_DIST_TIMEOUT_S must be positive"),
])
def test_init_errors(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                     kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(error, match=match):
        dist.init_process_group(**kwargs)  # type: ignore[arg-type]
    assert not dist.is_initialized()


def test_default_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NETCL_DIST_TIMEOUT_S", raising=False)
    assert default_timeout_s() == 300.0
    monkeypatch.setenv("NETCL_DIST_TIMEOUT_S", "soon")
    with pytest.raises(ValueError, match="a number of seconds, got 'soon'"):
        default_timeout_s()


def test_distributed_error_names_collective_ranks_and_time() -> None:
    err = DistributedError("broadcast", "did not arrive", missing=(2, 3), waited_s=1.25)
    assert str(err) == "broadcast: did not arrive (ranks 2, 3; waited 1.2 s)"
    assert isinstance(err, RuntimeError) and err.collective == "broadcast"


def _fake(name: str, kind: str) -> DeviceHandle:
    return DeviceHandle("Fake", name, "cl", kind, None, None)


def test_device_for_rank_spreads_ranks_over_devices_of_the_best_kind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [_fake("gpu0", "gpu"), _fake("gpu1", "gpu")]
    monkeypatch.delenv("NETCL_DEVICE", raising=False)
    monkeypatch.setattr(manager, "default", lambda selector="auto": gpus[0])
    monkeypatch.setattr(manager, "all_handles", lambda: [*gpus, _fake("cpu", "cpu")])
    assert [dist.device_for_rank(r).device_name for r in range(3)] == ["gpu0", "gpu1", "gpu0"]
    monkeypatch.setattr(manager, "all_handles", lambda: [gpus[0], _fake("cpu", "cpu")])
    assert dist.device_for_rank(1).device_name == "gpu0"  # one of its kind: shared
    monkeypatch.setenv("NETCL_DEVICE", "gpu0")
    monkeypatch.setattr(manager, "all_handles", lambda: gpus)
    assert dist.device_for_rank(1).device_name == "gpu0"  # a forced device: shared


def test_device_for_rank_on_the_numpy_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_DEVICE", "cpu")
    assert dist.device_for_rank(5).backend == "cpu"
    with pytest.raises(ValueError, match="local_rank must be >= 0"):
        dist.device_for_rank(-1)


def test_collectives_on_tensors_keep_their_storage(group: dist.ProcessGroup) -> None:
    handle = manager.default("cpu")
    assert handle is not None
    q = handle.queue
    t = Tensor.from_host(q, np.arange(7, dtype=np.float32))
    storage = t.array
    dist.all_reduce(t, op="mean")
    work = dist.all_reduce(t, op="sum", async_op=True)
    assert work is not None
    work.wait()
    assert t.array is storage and t.to_host().tolist() == list(range(7))
    out = Tensor.from_shape(q, (1, 7))
    dist.all_gather_into_tensor(out, t)
    np.testing.assert_array_equal(out.to_host()[0], np.arange(7))
    parts = [Tensor.from_shape(q, (7,))]
    dist.all_gather(parts, t)
    dist.reduce_scatter(t, parts)
    dist.scatter(t, [out.to_host()[0].copy()], src=0)
    dist.gather(t, parts, dst=0)
    dist.broadcast(t, src=0)
    dist.barrier()
    np.testing.assert_array_equal(parts[0].to_host(), np.arange(7))


def test_collective_argument_errors(group: dist.ProcessGroup) -> None:
    x = np.zeros(3, np.float32)
    with pytest.raises(TypeError, match="expected a netcl Tensor or a NumPy array, got list"):
        dist.all_reduce([1.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="output must have world_size \\* 3 = 3 elements"):
        dist.all_gather_into_tensor(np.zeros(4, np.float32), x)
    with pytest.raises(ValueError, match="tensor_list must hold world_size = 1 tensors, got 2"):
        dist.all_gather([x, x], x)
    with pytest.raises(ValueError, match=r"item 0 must be float32 of shape \(3,\)"):
        dist.reduce_scatter(x, [np.zeros(4, np.float32)])
    with pytest.raises(ValueError, match="rank 0 is the source and needs scatter_list"):
        dist.scatter(x)
    with pytest.raises(ValueError, match="rank 0 is the destination and needs gather_list"):
        dist.gather(x)
    with pytest.raises(ValueError, match="op must be one of"):
        dist.reduce_scatter_tensor(x, x, op="avg")


def test_a_view_is_reduced_in_place_and_the_rest_of_its_base_untouched() -> None:
    handle = manager.default("cpu")
    assert handle is not None

    def work(b: dist.ShmBackend) -> list[float]:
        pg = dist.ProcessGroup(b, b.rank, b.world_size)
        base = Tensor.from_host(handle.queue, np.arange(10, dtype=np.float32) * (b.rank + 1))
        view = narrow_view(base, 2, (5,))
        dist.all_reduce(view, op="sum", group=pg)
        return [float(v) for v in base.to_host()]

    r0, r1 = run_threads(work, 2)
    expect = np.arange(10, dtype=np.float32)
    expect[2:7] *= 3
    assert r0 == expect.tolist()
    assert r1[2:7] == expect[2:7].tolist() and r1[7:] == (2 * np.arange(7, 10)).tolist()
