"""netcl.core.recording: the hook sites hand their commands to the active recorder (and only
then), recorders nest per thread, check_flag reads eagerly, and BufferPool.hold keeps a buffer
out of circulation until unhold."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from netcl.core import BufferPool, Tensor
from netcl.core.device import DeviceHandle
from netcl.core.recording import check_flag, recording, state
from netcl.core.tensor import copy_from_host


class Log:
    """A recorder that performs nothing and logs every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def launch(self, queue: Any, kernel: Any, global_size: Sequence[int],
               local_size: Sequence[int] | None, values: Sequence[Any]) -> None:
        self.calls.append(("launch", tuple(global_size)))

    def fill(self, queue: Any, buffer: Any, pattern: Any, offset: int, nbytes: int) -> None:
        self.calls.append(("fill", nbytes))

    def upload(self, queue: Any, buffer: Any, host: Any, offset: int) -> None:
        self.calls.append(("upload", host.nbytes))

    def constant(self, queue: Any, buffer: Any, host: Any) -> None:
        self.calls.append(("constant", host.nbytes))

    def allocated(self, pool: Any, handle: Any) -> None:
        self.calls.append(("allocated", handle.nbytes))

    def created(self, tensor: Any) -> None:
        self.calls.append(("created", tensor.shape))

    def host_read(self, op: str, shape: tuple[int, ...], dtype: str) -> None:
        self.calls.append(("host_read", op))

    def check(self, queue: Any, buffer: Any, fail: Callable[[], None]) -> None:
        self.calls.append(("check", None))


def test_recorders_nest_and_are_per_thread() -> None:
    outer, inner = Log(), Log()
    seen: list[Any] = []
    with recording(outer):
        with recording(inner):
            assert state.recorder is inner
            thread = threading.Thread(target=lambda: seen.append(state.recorder))
            thread.start()
            thread.join()
        assert state.recorder is outer
    assert state.recorder is None and seen == [None]


def test_hook_sites_reach_the_recorder(dev: DeviceHandle) -> None:
    q = dev.queue
    t = Tensor.from_host(q, np.zeros(4, np.float32))
    t.wait()
    log = Log()
    with recording(log):
        made = Tensor.from_shape(q, (4,), fill=1.0)
        copy_from_host(t, np.ones(4, np.float32))
        t.to_host()
    kinds = [kind for kind, _ in log.calls]
    assert kinds[0] == "created" and "host_read" in kinds
    if dev.backend == "cl":  # the NumPy backend enqueues nothing
        assert ("allocated", 16) in log.calls and ("fill", 16) in log.calls
        assert ("upload", 16) in log.calls
        with recording(log):
            Tensor.from_host(q, np.zeros(8, np.float32))
        assert log.calls[-1] in (("constant", 32), ("upload", 32))
    del made


def test_no_recorder_no_calls(dev: DeviceHandle) -> None:
    log = Log()
    Tensor.from_shape(dev.queue, (4,), fill=1.0).to_host()
    assert log.calls == [] and state.recorder is None


def test_check_flag_eagerly_and_under_a_recorder(dev: DeviceHandle) -> None:
    q = dev.queue
    raised: list[str] = []

    def fail() -> None:
        raised.append("fail")

    check_flag(Tensor.from_host(q, np.array([0], np.int32)), fail)
    assert raised == []
    flag = Tensor.from_host(q, np.array([3], np.int32))
    check_flag(flag, fail)
    assert raised == ["fail"]
    log = Log()
    with recording(log):
        check_flag(flag, fail)
    expected = ("check", None) if dev.backend == "cl" else ("host_read", "Tensor.to_host")
    assert log.calls == [expected] and raised == ["fail"] * (1 if dev.backend == "cl" else 2)


def test_hold_keeps_a_buffer_aside_until_unhold() -> None:
    pool = BufferPool(None)
    handle = pool.allocate(100)
    buffer = handle.buffer
    pool.hold(buffer)
    pool.hold(buffer)  # holds count
    handle.release()
    assert pool.get_stats()["bytes_cached"] == 0
    assert all(pool.allocate(100).buffer is not buffer for _ in range(3))
    pool.unhold(buffer)
    assert pool.allocate(100).buffer is not buffer
    pool.unhold(buffer)
    assert pool.allocate(100).buffer is buffer


def test_hold_takes_a_free_buffer_out_of_the_free_list() -> None:
    pool = BufferPool(None)
    handle = pool.allocate(100)
    buffer = handle.buffer
    handle.release()
    pool.hold(buffer)
    assert pool.get_stats()["bytes_cached"] == 0 and pool.allocate(100).buffer is not buffer
    pool.unhold(buffer)
    assert pool.allocate(100).buffer is buffer


def test_unhold_of_a_leased_buffer_leaves_it_leased() -> None:
    pool = BufferPool(None)
    handle = pool.allocate(100)
    buffer = handle.buffer
    pool.hold(buffer)
    pool.unhold(buffer)
    assert not handle.released
    handle.release()  # free again, not set aside
    assert pool.allocate(100).buffer is buffer


@pytest.mark.parametrize("nbytes", [1, 5000])
def test_allocate_reports_to_the_recorder(nbytes: int) -> None:
    pool = BufferPool(None)
    log = Log()
    with recording(log):
        pool.allocate(nbytes).release()
    assert log.calls == [("allocated", nbytes)]
