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

from netcl.core.memory import get_persistent_pool
from netcl.core.recording import pyopencl, state

from ._checks import DeviceChecks
from ._compare import Slot
from ._rng import StreamParams
from ._trace import Check, Constant, Fill, Launch, Trace, Upload
from .errors import GraphReleasedError

__all__ = ["Graph"]


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
        for i, command in enumerate(trace.commands):
            if isinstance(command, Launch):
                kernel = _clone(cl, command, trace)
                by_command[i] = kernel
                self._kernels.append(kernel)
                if 0 not in command.global_size:
                    steps.append((cl.enqueue_nd_range_kernel,
                                  (self.queue, kernel, command.global_size, command.local_size)))
            elif isinstance(command, Fill):
                steps.append((cl.enqueue_fill_buffer,
                              (self.queue, trace.buffers[command.token], command.pattern,
                               command.offset, command.nbytes)))
            elif isinstance(command, (Upload, Constant)):
                # a constant is uploaded again too: the step may write to it after making it
                self._keep.append(command.data)
                offset = command.offset if isinstance(command, Upload) else 0
                copy = functools.partial(cl.enqueue_copy, dst_offset=offset, is_blocking=False)
                steps.append((copy, (self.queue, trace.buffers[command.token], command.data)))
            elif isinstance(command, Check):
                steps.append((self._checks.read, (self.queue, len(self._checks.fails),
                                                  trace.buffers[command.token])))
                self._checks.fails.append(command.fail)
        self._steps = steps
        self.launches = len(self._kernels)
        self.commands = len(steps)
        self._slots = {name: [(by_command[i], j, dtype, addend) for i, j, dtype, addend in found]
                       for name, found in slots.items()}
        self._values: dict[str, Any] = {}
        for name, value in values.items():  # the trace ran with probe values
            self.set_param(name, value)
        self._hold(trace)
        self._released = False

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
            kernel.set_arg(j, np.asarray(value + addend if addend else value).astype(dtype)[()])
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
        self._checks.poll(block=False)
        for item in self.streams:
            for name, value in item.current():
                self.set_param(name, value)
        recorder = state.recorder
        if recorder is not None:  # a profiler (or a trace) sees the launches one by one
            self._replay_recorded(recorder)
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
