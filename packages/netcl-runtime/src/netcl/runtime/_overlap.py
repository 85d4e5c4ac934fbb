"""Two in-order queues for a replay graph: which command goes on which, and what it waits for.

# NOTE [ Two queues in a graph ]
# A replay enqueues a step's commands on one in-order queue, so a device that could run two
# independent kernels at once (the data and weight gradients of one convolution, the updates
# of two parameters) runs them one after the other. With ``queues=2`` (``Graph.use_queues``,
# or ``NETCL_GRAPH_QUEUES=2`` when a graph is built) each command is placed on one of two
# in-order queues of the same device, and a command that depends on one of the other queue
# waits for its event. Dependencies come from the buffers each command touches (the trace's
# tokens: two tokens are two buffers): a kernel argument a kernel only reads through (a pointer
# to ``const`` data or ``__constant`` memory, read from the kernel's source) is a read, any
# other buffer argument a write (a kernel of unknown source writes all of its buffers); a fill
# or an upload writes, a device-side check reads. A command depends on the last writer of
# every buffer it reads or writes and on every reader since that write of a buffer it writes
# (read-after-write, write-after-write, write-after-read). Placement is greedy and keeps
# program order within each queue: a command that depends on the command just before it goes
# on that command's queue (no event needed), one that does not goes on the other queue, where
# it may overlap with it. Fills, uploads and checks stay on the first queue. Of the events a
# command needs from the other queue only the latest is waited for (the other queue is in
# order), and one already waited for by an earlier command of its queue is not waited for
# again. A replay starts with a marker on the first queue that the second queue's first
# command waits for (the inputs were copied, and eager work enqueued, on the first queue), and
# ends with a barrier on the first queue that waits for the second queue's last command, so
# whoever reads the outputs on the first queue, or the next replay, sees all of the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from netcl.core.kernels.cache import read_only_arguments

from ._trace import Check, Command, Constant, Fill, Launch, Token, Upload

__all__ = ["START", "Placement", "Plan", "accesses", "place"]

#: The index that stands for the marker at the start of a replay (the last slot of the
#: replay's event list).
START = -1


@dataclass(frozen=True)
class Placement:
    """Where command ``i`` of a graph goes: ``queue`` (0 or 1), the command of the other
    queue whose event it waits for (``wait``: an index, :data:`START`, or ``None``), whether a
    later command waits for its own event (``signals``), and the queue to flush before it
    (``flush``: an event of another queue is only waited for safely once the command behind
    it was submitted, which an in-order queue may defer until a flush)."""

    queue: int
    wait: int | None
    signals: bool
    flush: int | None


@dataclass(frozen=True)
class Plan:
    """The :class:`Placement` of each command, and the end of a replay: the second queue's
    last command, which the first queue's closing barrier waits for (``None`` when the second
    queue has nothing), and whether that queue needs a flush first."""

    placements: list[Placement]
    last_second: int | None
    flush_at_end: bool


def accesses(command: Command) -> tuple[set[Token], set[Token]]:
    """The buffers ``command`` reads and those it writes (see NOTE [ Two queues in a graph ])."""
    if isinstance(command, Launch):
        flags = read_only_arguments(command.kernel)
        reads: set[Token] = set()
        writes: set[Token] = set()
        for j, (kind, value) in enumerate(command.args):
            if kind != "buf":
                continue
            if flags is not None and j < len(flags) and flags[j]:
                reads.add(value)
            else:
                writes.add(value)
        return reads - writes, writes
    if isinstance(command, (Fill, Upload, Constant)):
        return set(), {command.token}
    if isinstance(command, Check):
        return {command.token}, set()
    return set(), set()


def _dependencies(reads: set[Token], writes: set[Token], writer: dict[Token, int],
                  readers: dict[Token, list[int]]) -> set[int]:
    deps = {writer[token] for token in reads | writes if token in writer}
    for token in writes:
        deps.update(readers.get(token, ()))
    return deps


def place(commands: Sequence[Command]) -> Plan:
    """Each command's :class:`Placement` on two queues (NOTE [ Two queues in a graph ])."""
    writer: dict[Token, int] = {}
    readers: dict[Token, list[int]] = {}
    queue_of: list[int] = []
    raw: list[tuple[int, int | None, int | None]] = []  # (queue, wait, flush)
    signals = [False] * len(commands)
    seen = [START - 1, START - 1]  # the latest command of the other queue each has waited for
    flushed = [START - 1, START - 1]  # each queue is flushed up to this command
    used_second = False
    for i, command in enumerate(commands):
        reads, writes = accesses(command)
        deps = _dependencies(reads, writes, writer, readers)
        if not isinstance(command, Launch):
            q = 0
        elif i > 0 and (i - 1) in deps:
            q = queue_of[i - 1]
        else:
            q = 1 - queue_of[i - 1] if i > 0 else 0
        other = [d for d in deps if queue_of[d] != q]
        wait: int | None = max(other) if other else None
        if q == 1 and not used_second:
            wait = START if wait is None else wait  # after what the first queue had before
            used_second = True
        if wait is not None and wait <= seen[q]:
            wait = None  # already waited for (the other queue runs in order)
        flush = None
        if wait is not None:
            seen[q] = wait
            if wait != START:
                signals[wait] = True
            if flushed[1 - q] < wait:
                flush, flushed[1 - q] = 1 - q, i - 1
        queue_of.append(q)
        raw.append((q, wait, flush))
        for token in reads:
            readers.setdefault(token, []).append(i)
        for token in writes:
            writer[token] = i
            readers[token] = []
    last = max((i for i, q in enumerate(queue_of) if q == 1), default=None)
    if last is not None:
        signals[last] = True
    placements = [Placement(q, w, s, f) for (q, w, f), s in zip(raw, signals)]
    return Plan(placements, last, last is not None and flushed[1] < last)
