"""A lease freed by the garbage collector while its pool is inside a locked section (the
collector runs finalizers at any allocation) is given back without deadlocking: the pool defers
it until the section ends. (A CI rehearsal hung here: BufferPool.hold -> gc ->
BufferHandle.__del__ -> BufferPool._give_back on the same non-reentrant lock.)"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

import pytest

from netcl.core.memory import BufferPool, PersistentBufferPool


class _CollectingDict(dict):  # type: ignore[type-arg]
    """A dict whose writes and reads run the cyclic collector, as an allocation may."""

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        gc.collect()

    def get(self, key: Any, default: Any = None) -> Any:
        gc.collect()
        return super().get(key, default)


def _orphan(pool: BufferPool) -> None:
    """A lease that only the cyclic collector frees."""
    cycle: list[object] = [pool.allocate(64)]
    cycle.append(cycle)


def _finishes(work: Callable[[], None]) -> bool:
    done = threading.Event()

    def run() -> None:
        work()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(20)


@pytest.mark.parametrize("make", [lambda: BufferPool(None),
                                  lambda: PersistentBufferPool(None, max_cached_bytes=1 << 20)],
                         ids=["BufferPool", "PersistentBufferPool"])
def test_finalizers_inside_a_locked_section_do_not_deadlock(make: Callable[[], BufferPool]) -> None:
    pool = make()

    def work() -> None:
        for i in range(3):
            _orphan(pool)
            pool._held = _CollectingDict(pool._held)  # hold() writes it under the lock
            pool.hold(bytearray(i + 1))
            _orphan(pool)
            pool._free = _CollectingDict(pool._free)  # allocate() reads it under the lock
            pool.allocate(64).release()

    assert _finishes(work), f"{type(pool).__name__} deadlocked"
    gc.collect()
    stats = pool.get_stats()
    assert pool.stats.releases == 9  # 6 orphans and 3 explicit releases, none lost
    assert stats["bytes_cached"] == sum(cap * n for cap, n in stats["buckets"].items())
