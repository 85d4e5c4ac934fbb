"""A replay graph: a traced step's commands with every argument set, enqueued in one loop.

# NOTE [ One kernel object per launch ]
# A kernel launched twice in a step with other arguments (every elementwise add, each conv's
# GEMM) would need its arguments set again before each launch: PyOpenCL's set_args costs about
# 1 us per argument even typed. The graph gives each recorded launch its own cl.Kernel, made
# from the same program, with its arguments set once when the graph is built; a replay is then
# only enqueue calls (measured on PoCL, 2-core VM: about 5 us per replayed launch, nearly all of
# it PoCL's own enqueue, against 50-100 us per eager op). A parameter's slots are rewritten
# with set_arg only when its value changed since the last replay.

A graph also owns the random generators its step draws from (:class:`._rng.StreamParams`):
every :meth:`Graph.replay`, called by a :class:`CapturedStep` or directly, sets their current
seed and offset into the launches and advances them as an eager call would (NOTE [ Random
streams in a graph ] in :mod:`._rng`).

The graph holds every buffer its commands use in their pools (:meth:`BufferPool.hold`): a
buffer given back meanwhile (a dead intermediate, a tensor the caller dropped) waits aside
instead of being leased to someone else, until :meth:`Graph.release`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from netcl.core.env import env_choice
from netcl.core.kernels.primitives import set_scalar_argument
from netcl.core.memory import get_persistent_pool
from netcl.core.recording import pyopencl, state

from ._checks import DeviceChecks
from ._compare import Slot
from ._overlap import START, place
from ._rng import StreamParams
from ._trace import Check, Command, Constant, Fill, Launch, Trace, Upload
from .errors import GraphReleasedError

__all__ = ["Graph"]

# (enqueue, its arguments, whether it is a launch, the step whose event it waits for, whether
# a later step waits for its event, the queue to flush first)
_TwoQueueStep = tuple[Callable[..., Any], tuple[Any, ...], bool, int | None, bool, Any]


class Graph:
    """The commands of one traced step, ready to replay on its queue.

    Built by :func:`netcl.runtime.capture`; ``replay()`` enqueues the step's work again (it
    returns at once; read the outputs to wait). ``params`` maps each graph parameter to the
    scalar slots it sets (a slot of a random generator's offset is the value plus a constant:
    NOTE [ Random streams in a graph ] in :mod:`._rng`); :meth:`set_param` changes one for
    the following replays. ``streams`` are the random generators the step draws from: each
    replay reads their state into their parameters and advances them.

    Attributes:
        queue: the command queue the step ran on.
        launches: the number of kernel launches a replay enqueues.
        commands: the number of commands (launches, fills, uploads) a replay enqueues.
    """

    def __init__(self, trace: Trace, slots: Mapping[str, list[Slot]],
                 values: Mapping[str, Any], streams: Sequence[StreamParams] = ()) -> None:
        cl = pyopencl()
        self.streams: tuple[StreamParams, ...] = tuple(streams)
        self.queue = trace.queue
        self._kernels: list[Any] = []  # one clone per launch, by command index
        by_command: dict[int, Any] = {}
        steps: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._buffers: list[tuple[Any, Any]] = []  # (pool, buffer) held until release
        self._keep: list[Any] = []  # host data the replayed uploads read
        self._checks = DeviceChecks()
        enqueued: list[Command] = []  # the command behind each step
        for i, command in enumerate(trace.commands):
            if isinstance(command, Launch):
                kernel = _clone(cl, command, trace)
                by_command[i] = kernel
                self._kernels.append(kernel)
                if 0 not in command.global_size:
                    steps.append((cl.enqueue_nd_range_kernel,
                                  (self.queue, kernel, command.global_size, command.local_size)))
                    enqueued.append(command)
            elif isinstance(command, Fill):
                steps.append((cl.enqueue_fill_buffer,
                              (self.queue, trace.buffers[command.token], command.pattern,
                               command.offset, command.nbytes)))
                enqueued.append(command)
            elif isinstance(command, (Upload, Constant)):
                # a constant is uploaded again too: the step may write to it after making it
                self._keep.append(command.data)
                offset = command.offset if isinstance(command, Upload) else 0
                copy = functools.partial(cl.enqueue_copy, dst_offset=offset, is_blocking=False)
                steps.append((copy, (self.queue, trace.buffers[command.token], command.data)))
                enqueued.append(command)
            elif isinstance(command, Check):
                steps.append((self._checks.read, (self.queue, len(self._checks.fails),
                                                  trace.buffers[command.token])))
                self._checks.fails.append(command.fail)
                enqueued.append(command)
        self._steps = steps
        self._enqueued = enqueued
        self._two: list[_TwoQueueStep] | None = None  # NOTE [ Two queues in a graph ]
        self._end: tuple[int | None, bool] = (None, False)
        self.second_queue: Any = None
        self.overlap: dict[str, int] = {}
        self.launches = len(self._kernels)
        self.commands = len(steps)
        self._slots = {name: [(by_command[i], j, dtype, addend) for i, j, dtype, addend in found]
                       for name, found in slots.items()}
        self._values: dict[str, Any] = {}
        for name, value in values.items():  # the trace ran with probe values
            self.set_param(name, value)
        self._hold(trace)
        self._released = False
        if env_choice("NETCL_GRAPH_QUEUES", ("1", "2")) == "2":
            self.use_queues(2)

    def _hold(self, trace: Trace) -> None:
        default = get_persistent_pool(self.queue)
        for token, buffer in trace.buffers.items():
            pool = trace.pools.get(token, default)
            pool.hold(buffer)
            self._buffers.append((pool, buffer))

    @property
    def params(self) -> dict[str, int]:
        """Each parameter's name and how many scalar arguments it sets."""
        return {name: len(found) for name, found in self._slots.items()}

    @property
    def queues(self) -> int:
        """How many in-order queues a replay uses (:meth:`use_queues`)."""
        return 1 if self._two is None else 2

    def use_queues(self, count: int, second: Any = None) -> None:
        """Replay on ``count`` in-order queues (1 or 2): with 2, commands that touch other
        buffers than the commands before them, or only read the same ones, go on a second
        queue of the device and may overlap (NOTE [ Two queues in a graph ] in
        :mod:`._overlap`). ``second`` is that queue (default: a new one on the graph's
        context and device). ``NETCL_GRAPH_QUEUES=2`` makes every new graph use two.
        ``overlap`` then counts the ``second``-queue launches and the cross-queue ``waits``.
        A replay under a recorder (the profiler) runs on the first queue alone.

        Raises:
            ValueError: ``count`` is not 1 or 2.
        """
        if count not in (1, 2):
            raise ValueError(f"Graph.use_queues: count must be 1 or 2, got {count!r}")
        if count == 1:
            self._two, self.second_queue, self.overlap = None, None, {}
            return
        cl = pyopencl()
        queue2 = second if second is not None else cl.CommandQueue(self.queue.context,
                                                                    self.queue.device)
        plan = place(self._enqueued)
        queues = (self.queue, queue2)
        two: list[_TwoQueueStep] = []
        for (enqueue, args), spot in zip(self._steps, plan.placements):
            launch = enqueue is cl.enqueue_nd_range_kernel
            if launch:
                args = (queues[spot.queue], *args[1:])
            flush = None if spot.flush is None else queues[spot.flush]
            two.append((enqueue, args, launch, spot.wait, spot.signals, flush))
        self._two, self.second_queue = two, queue2
        self._end = (plan.last_second, plan.flush_at_end)
        self.overlap = {"second": sum(p.queue for p in plan.placements),
                        "waits": sum(p.wait is not None for p in plan.placements)}

    def set_param(self, name: str, value: Any) -> None:
        """Give parameter ``name`` a new value for the following replays.

        Raises:
            KeyError: no parameter of that name.
        """
        if name not in self._slots:
            raise KeyError(f"Graph.set_param: no parameter {name!r}; the graph has "
                           f"{sorted(self._slots)}")
        if self._values.get(name) == value:
            return
        for kernel, j, dtype, addend in self._slots[name]:
            # by its bytes: Kernel.set_arg of a NumPy scalar costs 17 us on PoCL (NOTE
            # [ Setting one scalar ] in netcl.core.kernels.primitives)
            set_scalar_argument(kernel, j,
                                np.asarray(value + addend if addend else value).astype(dtype)[()])
        self._values[name] = value

    def replay(self) -> None:
        """Enqueue the step's commands again, with the parameters' current values and the
        random generators' current states; then advance the generators past what the step
        drew, as an eager call would.

        Raises:
            GraphReleasedError: after :meth:`release`.
        """
        if self._released:
            raise GraphReleasedError("Graph.replay: the graph was released; capture the step "
                                     "again")
        self._checks.poll(block=False, inputs_replaced=True)  # the caller may have fed new ones
        for item in self.streams:
            for name, value in item.current():
                self.set_param(name, value)
        recorder = state.recorder
        if recorder is not None:  # a profiler (or a trace) sees the launches one by one
            self._replay_recorded(recorder)
        elif self._two is not None:
            self._replay_two(self._two)
        else:
            for enqueue, args in self._steps:
                enqueue(*args)
        self._checks.end_replay()
        for item in self.streams:
            item.after_replay()

    def check(self, block: bool = True) -> None:
        """Raise the first failed device-side check (``check_flag``) of the replays so far;
        with ``block=False`` only those whose flags have been read back already (what each
        replay does first: NOTE [ Checks one replay late ] in :mod:`._checks`).
        """
        self._checks.poll(block)

    def _replay_two(self, steps: list[_TwoQueueStep]) -> None:
        """A replay on two queues (NOTE [ Two queues in a graph ] in :mod:`._overlap`)."""
        cl = pyopencl()
        events: list[Any] = [None] * (len(steps) + 1)
        first = self.queue
        last, flush_at_end = self._end
        if last is not None:
            events[START] = cl.enqueue_marker(first)
        for i, (enqueue, args, launch, wait, signals, flush) in enumerate(steps):
            if flush is not None:
                flush.flush()
            if launch:
                event = enqueue(*args, wait_for=None if wait is None else (events[wait],))
            else:
                if wait is not None:
                    cl.enqueue_barrier(first, wait_for=(events[wait],))
                event = enqueue(*args)
            if signals:
                events[i] = event
        if last is not None:
            if flush_at_end:
                self.second_queue.flush()
            cl.enqueue_barrier(first, wait_for=(events[last],))

    def _replay_recorded(self, recorder: Any) -> None:
        cl = pyopencl()
        for enqueue, args in self._steps:
            if enqueue is cl.enqueue_nd_range_kernel:
                queue, kernel, gsize, lsize = args
                recorder.launch(queue, kernel, gsize, lsize, ())
            else:
                enqueue(*args)

    def release(self) -> None:
        """Let go of the graph's buffers (held ones return to their pools). Idempotent."""
        if self._released:
            return
        self._released = True
        buffers, self._buffers = self._buffers, []
        for pool, buffer in buffers:
            pool.unhold(buffer)
        self._steps = []
        self._kernels = []
        self.streams = ()
        self._enqueued, self._two, self.second_queue = [], None, None

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:
            pass

    def __repr__(self) -> str:
        state_ = "released" if self._released else f"{self.launches} launches"
        return f"Graph({state_}, params={sorted(self._slots)})"


def _clone(cl: Any, launch: Launch, trace: Trace) -> Any:
    """A new kernel object of ``launch``'s kernel with its recorded arguments set."""
    kernel = cl.Kernel(launch.kernel.program, launch.name)
    values: list[Any] = []
    for kind, value in launch.args:
        if kind == "buf":
            values.append(trace.buffers[value])
        elif kind == "scalar":
            values.append(value[()] if value.ndim == 0 else value)
        else:  # "none" (a NULL buffer) or "other" (LocalMemory)
            values.append(value)
    # set_args, as eager launches: some PyOpenCL builds refuse None in set_arg (NVIDIA's
    # pyopencl 2026.1 wheel), while set_args passes it as a NULL buffer
    kernel.set_args(*values)
    return kernel
