"""``capture``: trace a training step once, replay it with almost no Python.

# NOTE [ Tracing without running ]
# A captured step runs eagerly for its first ``warmup`` calls (kernels compile, local sizes are
# tuned, optimizer state is created). The next call traces it twice with netcl.core.recording's
# hook active -- every launch, fill and upload recorded, none enqueued -- the first time with the
# graph parameters at their values and the second at probe values; the two traces must agree
# except in the scalars that follow a parameter (:mod:`._compare`). The graph is built from the
# second trace, its parameters set back to their values, and replayed at once: that replay is the
# call's work. Tracing without running is what CUDA graph capture does; tracing twice is how a
# scalar that changes from call to call (Adam's bias correction, a Python step counter) is found
# instead of being baked in, and how each parameter's slots are found without guessing by value.
# Python state the step changes advances once per trace (two extra times at capture), except
# random generators: every trace leaves them as it found them, and each replay advances them as
# eager execution would (NOTE [ Random streams in a graph ] in ._rng).

On the NumPy backend the trace records the NumPy calls of the step's ops instead of kernel
launches, and a replay repeats them into the same arrays (NOTE [ Replaying NumPy calls ] in
:mod:`._numpy_graph`).

Examples:
    >>> import netcl.ops as ops
    >>> from netcl.core import Tensor, manager
    >>> q = manager.default("cpu").queue
    >>> step = capture(lambda t: ops.mul(t, 2.0), warmup=0)
    >>> step.mode
    'pending'
    >>> step(Tensor.from_host(q, [1.0, 2.0])).to_host().tolist()
    [2.0, 4.0]
    >>> step.mode, step(Tensor.from_host(q, [3.0, 5.0])).to_host().tolist()
    ('graph', [6.0, 10.0])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from netcl.core import Tensor
from netcl.core.device import get_active_device
from netcl.core.dtypes import numpy_dtype
from netcl.core.recording import pyopencl, recording

from ._compare import bind_parameters
from ._graph import Graph
from ._numpy_capture import capture_numpy, copy_in_numpy
from ._numpy_graph import NumpyGraph
from ._rng import State, bind_streams, probe_state, set_state, state_of
from ._trace import Trace
from .errors import (
    GraphReleasedError,
    InputMismatchError,
    UnstableStepError,
)

__all__ = ["CaptureFallbackWarning", "CapturedStep", "Param", "capture"]


#: Pairs of traces tried before a step whose traces differ is refused (see NOTE [ Traces that
#: differ by chance ]).
TRACE_PAIRS = 3

# NOTE [ Traces that differ by chance ]
# Host code may take decisions that differ between two calls without changing what the step
# computes (NOTE [ Tensors live through the trace ] in ._trace names one). Such a trace pair
# differs though each trace is a valid graph on its own; the capture traces another pair (up to
# TRACE_PAIRS) and builds the graph from the first pair that agrees. A step that really changes
# from call to call differs in every pair and raises.


class CaptureFallbackWarning(UserWarning):
    """A captured step runs eagerly (kept for code that filters it: since the NumPy backend
    captures too, ``capture`` itself no longer warns)."""


@dataclass(frozen=True)
class Param:
    """A graph parameter: a value a replay reads again each call (learning rate, loss scale).

    ``get`` returns the current value; ``set`` changes it (the capture sets a probe value while
    it traces, to find the kernel arguments that follow the parameter, and sets it back).

    Examples:
        >>> group = {"lr": 0.1}
        >>> lr = Param.item(group, "lr")
        >>> lr.set(0.05); lr.get()
        0.05
    """

    get: Callable[[], Any]
    set: Callable[[Any], None]

    @classmethod
    def item(cls, mapping: Any, key: Any) -> Param:
        """The parameter ``mapping[key]`` (an optimizer's ``param_groups[0]["lr"]``)."""
        return cls(lambda: mapping[key], lambda value: mapping.__setitem__(key, value))

    @classmethod
    def attribute(cls, obj: Any, name: str) -> Param:
        """The parameter ``obj.<name>``."""
        return cls(lambda: getattr(obj, name), lambda value: setattr(obj, name, value))


def _probe(value: Any) -> Any:
    """A value unlike ``value`` in every width a kernel might take it in."""
    if isinstance(value, (bool, np.bool_)):
        return not value
    if isinstance(value, (int, np.integer)):
        return int(value) + 7919
    probe = float(value) * 1.5 + 0.3125
    return probe if np.float32(probe) != np.float32(value) else float(value) + 1.0


def _flatten(obj: Any, leaves: list[Any]) -> Any:
    """The structure of nested tuples/lists/dicts in ``obj``; its leaves appended to ``leaves``."""
    if isinstance(obj, (tuple, list)):
        return (type(obj), tuple(_flatten(item, leaves) for item in obj))
    if isinstance(obj, dict):
        return (dict, tuple((key, _flatten(obj[key], leaves)) for key in obj))
    leaves.append(obj)
    return None


def _unflatten(structure: Any, leaves: list[Any]) -> Any:
    """Inverse of :func:`_flatten` (consumes ``leaves`` from the front)."""
    if structure is None:
        return leaves.pop(0)
    kind, items = structure
    if kind is dict:
        return {key: _unflatten(sub, leaves) for key, sub in items}
    return kind(_unflatten(sub, leaves) for sub in items)


class CapturedStep:
    """A step function that replays a captured graph after its warm-up calls.

    Made by :func:`capture`. ``mode`` is ``"pending"`` (warming up) or ``"graph"``
    (replaying). ``graph`` is the :class:`Graph` (:class:`NumpyGraph` on the NumPy backend)
    once captured; ``inputs`` the graph's own input tensors, which each call
    fills from the Tensors (or NumPy arrays) it is given.
    """

    def __init__(self, fn: Callable[..., Any], params: Mapping[str, Param] | None = None,
                 warmup: int = 1, strict: bool = False) -> None:
        if warmup < 0:
            raise ValueError(f"capture: warmup must be >= 0, got {warmup}")
        self.fn = fn
        self.params: dict[str, Param] = dict(params or {})
        self.warmup = warmup
        self.strict = strict
        self.mode = "pending"
        self.graph: Graph | NumpyGraph | None = None
        self.inputs: tuple[Tensor, ...] = ()
        self.calls = 0
        self._structure: Any = None
        self._leaves: list[Any] = []  # captured leaves: own input tensors and constants
        self._outputs: Any = None
        self._pending: list[Any] = []  # events of the last call's input copies
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__name__ = getattr(fn, "__name__", "step")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        graph = self.graph
        if self.mode == "graph" and graph is not None:
            graph.check(block=False)  # checks read back so far, before the inputs change
            self._feed(args, kwargs)
            self._replay(graph)
            return self._outputs
        if self.mode == "eager" or self.calls <= self.warmup:
            return self.fn(*args, **kwargs)
        return self._capture(args, kwargs)

    # -- capture -------------------------------------------------------------------------------

    def _on_numpy(self, leaves: list[Any]) -> bool:
        tensors = [leaf for leaf in leaves if isinstance(leaf, Tensor)]
        backend = tensors[0].backend if tensors else get_active_device().backend
        return bool(backend != "cl")

    def _capture(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        leaves: list[Any] = []
        self._structure = _flatten((args, kwargs), leaves)
        own: list[Any] = []
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, np.ndarray):
                raise InputMismatchError(
                    f"capture({self.__name__}): input {i} is a NumPy array; pass Tensors when "
                    "the step is captured (later calls may pass arrays of the same shape and "
                    "dtype, which are copied into the graph's input tensors)"
                )
            if isinstance(leaf, Tensor):
                mine = Tensor.from_shape(leaf.queue, leaf.shape, leaf.dtype, fill=None)
                mine.requires_grad = leaf.requires_grad
                own.append(mine)
            else:
                own.append(leaf)
        self._leaves = own
        self.inputs = tuple(leaf for leaf in own if isinstance(leaf, Tensor))
        own_args, own_kwargs = _unflatten(self._structure, list(own))
        values = {name: param.get() for name, param in self.params.items()}
        probes = {name: _probe(value) for name, value in values.items()}
        if self._on_numpy(leaves):
            for i, (given, mine) in enumerate(zip(leaves, own)):
                if isinstance(mine, Tensor):
                    copy_in_numpy(self.__name__, i, given, mine)
            self.graph, self._outputs = capture_numpy(self, own_args, own_kwargs, values,
                                                      probes, TRACE_PAIRS)
            self.mode = "graph"
            self._replay(self.graph)
            return self._outputs
        for attempt in range(1, TRACE_PAIRS + 1):
            first, _, first_ends = self._trace(own_args, own_kwargs, values)
            first.close()  # its buffers may serve the second trace: only its tokens are compared
            second, outputs, second_ends = self._trace(own_args, own_kwargs, probes,
                                                       first.streams)
            try:
                streams, rng_values, rng_probes = bind_streams(
                    first.streams, first_ends, second.streams, second_ends, list(values))
                slots = bind_parameters(first, second, {**values, **rng_values},
                                        {**probes, **rng_probes},
                                        affine=[item.names[2] for item in streams])
                break
            except UnstableStepError:
                second.close()
                if attempt == TRACE_PAIRS:
                    raise
        if second.queue is None:
            second.queue = self.inputs[0].queue if self.inputs else get_active_device().queue
        self.graph = Graph(second, slots, {**values, **rng_values}, streams)
        second.close()
        self._outputs = outputs
        self.mode = "graph"
        self._feed(args, kwargs)
        self._replay(self.graph)
        return outputs

    def _trace(self, args: Any, kwargs: Any, values: Mapping[str, Any],
               probe: Sequence[tuple[Any, int, int]] = (), recorder: Any = None
               ) -> tuple[Any, Any, list[State]]:
        """Trace one call with the parameters at ``values`` and the generators in ``probe``
        (a trace's ``streams``) at their probe states, into ``recorder`` (an OpenCL
        :class:`Trace` by default); returns the trace, the outputs and the states the traced
        call left its generators in. Every parameter and generator is set back afterwards."""
        saved = {name: param.get() for name, param in self.params.items()}
        for name, param in self.params.items():
            param.set(values[name])
        saved_streams = [(stream, state_of(stream)) for stream, _, _ in probe]
        for i, (stream, seed, offset) in enumerate(probe):
            set_state(stream, probe_state(i, seed, offset))
        trace = Trace() if recorder is None else recorder
        try:
            with recording(trace):
                outputs = self.fn(*args, **kwargs)
            ends = [state_of(stream) for stream, _, _ in trace.streams]
        finally:
            for name, param in self.params.items():
                param.set(saved[name])
            for stream, seed, offset in trace.streams:
                set_state(stream, (seed, offset))
            for stream, state in saved_streams:
                set_state(stream, state)
        return trace, outputs, ends

    # -- replay --------------------------------------------------------------------------------

    def _replay(self, graph: Graph | NumpyGraph) -> None:
        """Set the parameters into ``graph`` and replay it; the graph sets and advances the
        generators (NOTE [ Random streams in a graph ])."""
        for name, param in self.params.items():
            graph.set_param(name, param.get())
        graph.replay()

    def _feed(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        leaves: list[Any] = []
        structure = _flatten((args, kwargs), leaves)
        if structure != self._structure:
            raise InputMismatchError(
                f"{self.__name__}: called with arguments structured as {structure}, the graph "
                f"was captured with {self._structure}"
            )
        pending: list[Any] = []
        for i, (given, mine) in enumerate(zip(leaves, self._leaves)):
            if isinstance(mine, Tensor):
                event = self._copy_in(i, given, mine)
                if event is not None:
                    pending.append(event)
            elif not _same_constant(given, mine):
                raise InputMismatchError(
                    f"{self.__name__}: argument {i} is {given!r}, the graph was captured with "
                    f"{mine!r}; non-Tensor arguments must stay the same (capture another step "
                    "for another value)"
                )
        self._pending = pending  # the previous call's copies are long done

    def _copy_in(self, i: int, given: Any, mine: Tensor) -> Any:
        if given is mine:
            return None
        if self.graph is None:
            raise GraphReleasedError(f"{self.__name__}: the graph was released")
        if mine.array is not None:
            copy_in_numpy(self.__name__, i, given, mine)
            return None
        if isinstance(given, Tensor):
            if given.shape != mine.shape or given.dtype != mine.dtype:
                raise InputMismatchError(
                    f"{self.__name__}: input {i} has shape {given.shape} and dtype "
                    f"{given.dtype}; the graph was captured with shape {mine.shape} and dtype "
                    f"{mine.dtype} (capture another step for another shape)"
                )
            if given.backend != "cl" or given.context is not mine.context:
                raise InputMismatchError(f"{self.__name__}: input {i} is on another device than "
                                         "the captured graph")
            given.wait()
            if not mine.size:
                return None
            return pyopencl().enqueue_copy(
                mine.queue, mine.buffer, given.buffer, byte_count=mine.nbytes,
                src_offset=given.offset * numpy_dtype(given.dtype).itemsize)
        if isinstance(given, np.ndarray):
            if given.shape != mine.shape or given.dtype != numpy_dtype(mine.dtype):
                raise InputMismatchError(
                    f"{self.__name__}: input {i} is an array of shape {given.shape} and dtype "
                    f"{given.dtype}; the graph was captured with shape {mine.shape} and dtype "
                    f"{mine.dtype}"
                )
            if not mine.size:
                return None
            host = np.array(given, copy=True, order="C")
            return pyopencl().enqueue_copy(mine.queue, mine.buffer, host, is_blocking=False)
        raise InputMismatchError(f"{self.__name__}: input {i} is a {type(given).__name__}; the "
                                 "graph was captured with a Tensor there")

    def sync(self) -> None:
        """Wait for the replays so far and raise a failed device-side check (a replay is
        asynchronous: a check raises at a later call, or here)."""
        if isinstance(self.graph, Graph):
            self.graph.queue.finish()
            self.graph.check()

    def release(self) -> None:
        """Release the graph (its buffers go back to their pools); the next call captures
        again after the warm-up."""
        if self.graph is not None:
            self.graph.release()
        self.graph = None
        self.mode = "pending"
        self.calls = 0
        self._outputs = None
        self.inputs = ()
        self._leaves = []


def _same_constant(given: Any, captured: Any) -> bool:
    if given is captured:
        return True
    if type(given) is not type(captured) or isinstance(given, np.ndarray):
        return False
    try:
        return bool(given == captured)
    except Exception:
        return False


def capture(fn: Callable[..., Any] | None = None, *, params: Mapping[str, Param] | None = None,
            warmup: int = 1, strict: bool = False) -> Any:
    """Capture a step: ``step = capture(fn)`` or ``@capture`` / ``@capture(params=...)``.

    The first ``warmup`` calls run ``fn`` eagerly; the next traces it and replays the graph
    (NOTE [ Tracing without running ]); every later call only copies its Tensor arguments into
    the graph's input tensors, reads the ``params`` and replays. It returns the captured call's
    outputs, the same tensors each time, overwritten by each replay (read or copy them before
    the next call).

    Tensor arguments are the step's inputs: each call must pass the same shapes and dtypes
    (NumPy arrays too, after the capture), and equal non-Tensor arguments. State the step
    updates (parameters, optimizer state, BatchNorm statistics) is reached through the
    function's closure, not passed in. Random draws (dropout masks, ``netcl.ops.uniform``)
    need no parameter: each replay draws what an eager call would draw from the same
    generators, and advances them alike, so eager and captured calls may take turns (NOTE
    [ Random streams in a graph ] in ``netcl.runtime._rng``).

    Args:
        fn: the step, written eagerly.
        params: graph parameters by name (see :class:`Param`): scalars that may change
            between calls without a new capture, such as the learning rate.
        warmup: eager calls before the capture.
        strict: kept for compatibility (every backend captures; a step that cannot be
            captured raises a :class:`CaptureError` either way).

    Raises:
        HostReadError: the step reads device data on the host.
        UnstableStepError: the step's work changes from call to call other than through its
            parameters (see :mod:`netcl.runtime.errors`).
        InputMismatchError: a later call's inputs differ in shape, dtype or constants.
    """
    def wrap(function: Callable[..., Any]) -> CapturedStep:
        return CapturedStep(function, params=params, warmup=warmup, strict=strict)

    return wrap if fn is None else wrap(fn)
