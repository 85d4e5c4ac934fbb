"""``profile()``: per-kernel device time, launch counts and host enqueue time of a block.

Inside ``with profile() as prof:`` every command netcl enqueues goes through the profiler
(:mod:`netcl.core.recording`), which enqueues it, times the enqueue on the host and keeps its
event; a captured graph's replay is seen launch by launch too. On exit the queues are finished
and each event's start and end read. Device times need a queue made with profiling on:
``NETCL_PROFILE_EVENTS=1`` before the device is first used (else only host times are shown).

Examples:
    >>> with profile() as prof:
    ...     pass
    >>> prof.launches, prof.table().splitlines()[0].split()[:2]
    (0, ['kernel', 'launches'])
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netcl.core.recording import pyopencl, recording

__all__ = ["KernelStats", "Profile", "profile"]


@dataclass
class _Record:
    name: str
    queue: Any
    event: Any
    host_start_ns: int
    host_ns: int
    start_ns: int | None = None
    end_ns: int | None = None


@dataclass
class KernelStats:
    """One kernel's totals: launches, device time (``None`` without profiling events) and host
    enqueue time, in microseconds."""

    name: str
    launches: int = 0
    device_us: float | None = None
    host_us: float = 0.0


@dataclass
class Profile:
    """What :func:`profile` measured (a :class:`netcl.core.recording.Recorder` meanwhile)."""

    records: list[_Record] = field(default_factory=list)
    allocations: int = 0
    host_reads: int = 0
    device_timed: bool = False

    # -- the Recorder protocol: run each command and time it -------------------------------------

    def _run(self, name: str, queue: Any, enqueue: Callable[[], Any]) -> Any:
        start = time.perf_counter_ns()
        event = enqueue()
        self.records.append(_Record(name, queue, event, start, time.perf_counter_ns() - start))
        return event

    def launch(self, queue: Any, kernel: Any, global_size: Sequence[int],
               local_size: Sequence[int] | None, values: Sequence[Any]) -> Any:
        """Enqueue and time a launch."""
        name = str(getattr(kernel, "function_name", "kernel"))
        if 0 in global_size:
            return None
        local = None if local_size is None else tuple(local_size)
        return self._run(name, queue, lambda: pyopencl().enqueue_nd_range_kernel(
            queue, kernel, tuple(global_size), local))

    def fill(self, queue: Any, buffer: Any, pattern: np.ndarray[Any, Any], offset: int,
             nbytes: int) -> Any:
        """Enqueue and time a fill."""
        return self._run("[fill]", queue, lambda: pyopencl().enqueue_fill_buffer(
            queue, buffer, pattern, offset, nbytes))

    def upload(self, queue: Any, buffer: Any, host: np.ndarray[Any, Any], offset: int) -> Any:
        """Enqueue and time a host-to-device copy (blocking: ``host`` may be reused after)."""
        return self._run("[upload]", queue, lambda: pyopencl().enqueue_copy(
            queue, buffer, host, dst_offset=offset, is_blocking=True))

    def constant(self, queue: Any, buffer: Any, host: np.ndarray[Any, Any]) -> None:
        """A zero-copy buffer: nothing to time."""

    def allocated(self, pool: Any, handle: Any) -> None:
        """Count a lease."""
        self.allocations += 1

    def created(self, tensor: Any) -> None:
        """Nothing to do for a new tensor."""

    def host_read(self, op: str, shape: tuple[int, ...], dtype: str) -> None:
        """Count a read of device data on the host (it runs as usual)."""
        self.host_reads += 1

    def check(self, queue: Any, buffer: Any, fail: Callable[[], None]) -> None:
        """A device-side check, eagerly: read the flag now."""
        flag = np.zeros(1, np.int32)
        pyopencl().enqueue_copy(queue, flag, buffer, is_blocking=True)
        if flag[0]:
            fail()

    # -- results -----------------------------------------------------------------------------

    @property
    def launches(self) -> int:
        """Kernel launches seen (fills and uploads not counted)."""
        return sum(1 for r in self.records if not r.name.startswith("["))

    def _collect(self) -> None:
        if not self.records:
            return
        enabled = int(pyopencl().command_queue_properties.PROFILING_ENABLE)
        queues = {id(r.queue): r.queue for r in self.records}
        for queue in queues.values():
            queue.finish()
        timed = [r for r in self.records
                 if r.event is not None and int(r.queue.properties) & enabled]
        for r in timed:
            r.start_ns, r.end_ns = int(r.event.profile.start), int(r.event.profile.end)
            r.event = None
        self.device_timed = bool(timed)
        for r in self.records:
            r.event = None

    def summary(self) -> list[KernelStats]:
        """Per-kernel totals, the most device time first (host time without profiling)."""
        stats: dict[str, KernelStats] = {}
        for r in self.records:
            s = stats.setdefault(r.name, KernelStats(r.name))
            s.launches += 1
            s.host_us += r.host_ns / 1e3
            if r.start_ns is not None and r.end_ns is not None:
                s.device_us = (s.device_us or 0.0) + (r.end_ns - r.start_ns) / 1e3
        return sorted(stats.values(), key=lambda s: (-(s.device_us or 0.0), -s.host_us, s.name))

    def table(self, limit: int = 30) -> str:
        """The summary as text: one line per kernel, totals last."""
        rows = self.summary()
        lines = [f"{'kernel':<40} {'launches':>8} {'device us':>12} {'host us':>10}"]
        for s in rows[:limit]:
            device = "-" if s.device_us is None else f"{s.device_us:.1f}"
            lines.append(f"{s.name[:40]:<40} {s.launches:>8} {device:>12} {s.host_us:>10.1f}")
        total_device = sum(s.device_us or 0.0 for s in rows)
        total_host = sum(s.host_us for s in rows)
        device_total = f"{total_device:.1f}" if self.device_timed else "-"
        lines.append(f"{'total':<40} {sum(s.launches for s in rows):>8} {device_total:>12} "
                     f"{total_host:>10.1f}")
        if self.records and not self.device_timed:
            lines.append("(no device times: the queue has no profiling; set "
                         "NETCL_PROFILE_EVENTS=1 before the device is first used)")
        return "\n".join(lines)

    def chrome_trace(self) -> dict[str, Any]:
        """The records as Chrome trace events (host enqueues on one track, device on another)."""
        events: list[dict[str, Any]] = []
        host0 = min((r.host_start_ns for r in self.records), default=0)
        dev0 = min((r.start_ns for r in self.records if r.start_ns is not None), default=0)
        for r in self.records:
            events.append({"name": r.name, "ph": "X", "pid": 0, "tid": 0, "cat": "host",
                           "ts": (r.host_start_ns - host0) / 1e3, "dur": r.host_ns / 1e3})
            if r.start_ns is not None and r.end_ns is not None:
                events.append({"name": r.name, "ph": "X", "pid": 1, "tid": 0, "cat": "device",
                               "ts": (r.start_ns - dev0) / 1e3,
                               "dur": (r.end_ns - r.start_ns) / 1e3})
        meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}
                for pid, name in ((0, "host enqueue"), (1, "device"))]
        return {"traceEvents": meta + events, "displayTimeUnit": "ms"}

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`chrome_trace` as JSON (opens in Perfetto or chrome://tracing)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.chrome_trace(), f)


@contextlib.contextmanager
def profile() -> Iterator[Profile]:
    """Profile the block: see the module docstring; the :class:`Profile` is complete on exit."""
    prof = Profile()
    try:
        with recording(prof):
            yield prof
    finally:
        prof._collect()
