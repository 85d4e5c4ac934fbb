"""A trace of one step: every command netcl core would have enqueued, in order, not run.

:class:`Trace` is a :class:`netcl.core.recording.Recorder` that records kernel launches (kernel,
launch sizes, arguments), buffer fills, host uploads and zero-copy constants, and the buffers the
pools lease meanwhile, without putting anything on a queue: the capture traces a step, then
replays the graph built from the trace (NOTE [ Tracing without running ] in :mod:`._capture`).
A host read raises :class:`HostReadError` at once; a random generator about to draw is noted
with its state (:mod:`._rng`).

# NOTE [ Tensors live through the trace ]
# Every tensor made while a step is traced stays alive until the trace is closed. Host code may
# decide on object identities: autograd's backward copied a gradient whose id() it had handed
# out before (NOTE [ Handed gradients by identity ] in netcl.autograd._tape: it holds weak
# references now), and a dead tensor's id reused by a new one made such decisions differ from
# call to call, so two traces of one step disagreed. Kept alive, no id is reused inside a
# trace, and no two of the step's tensors share a buffer either: the graph holds one buffer per
# tensor, more memory than eager execution's reuse, for a graph whose buffers never alias.

Buffers are named by *tokens*: ``("own", k)`` for the buffer of the ``k``-th lease made inside
the trace (so two traces of the same code name their buffers alike even when the pool hands
out different ones), ``("ext", id)`` for a buffer that existed before (a parameter, an input).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from netcl.core.recording import is_buffer

from .errors import CaptureError, HostReadError

__all__ = ["Check", "Constant", "Fill", "Launch", "Trace", "Upload"]

Token = tuple[str, int]


@dataclass
class Launch:
    """A kernel launch; ``args`` holds ``("buf", token)``, ``("scalar", value)``,
    ``("none", None)`` or ``("other", value)`` (``LocalMemory`` and the like) per argument."""

    kernel: Any
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None
    args: list[tuple[str, Any]]

    @property
    def name(self) -> str:
        """The kernel's function name."""
        return str(getattr(self.kernel, "function_name", "kernel"))


@dataclass
class Fill:
    """``nbytes`` of a buffer from byte ``offset`` filled with ``pattern``."""

    token: Token
    pattern: np.ndarray[Any, Any]
    offset: int
    nbytes: int


@dataclass
class Upload:
    """Host ``data`` (a private copy) copied into a buffer at byte ``offset``."""

    token: Token
    data: np.ndarray[Any, Any]
    offset: int


@dataclass
class Constant:
    """A zero-copy buffer made inside the step over host ``data``; a replay copies ``data``
    into it again (the step may have written to it)."""

    token: Token
    data: np.ndarray[Any, Any]


@dataclass
class Check:
    """A device-side check (:func:`netcl.core.recording.check_flag`): ``fail`` raises when the
    int32 flag at the start of the buffer is nonzero."""

    token: Token
    fail: Callable[[], None]


Command = Launch | Fill | Upload | Constant | Check


@dataclass
class Trace:
    """Records the commands of a step; see the module docstring."""

    commands: list[Command] = field(default_factory=list)
    queue: Any = None
    # token -> the buffer object (keeps every traced buffer alive, so ids stay unique)
    buffers: dict[Token, Any] = field(default_factory=dict)
    # token -> the pool that leased it (owned buffers only)
    pools: dict[Token, Any] = field(default_factory=dict)
    _owned: dict[int, int] = field(default_factory=dict)  # id(buffer) -> latest lease index
    # every tensor made during the trace, alive until close() (NOTE [ Tensors live through
    # the trace ])
    _alive: list[Any] = field(default_factory=list)
    _leases: int = 0
    # the random generators the step drew from (or reseeded), in the order it first did, each
    # with its (seed, offset) before that (NOTE [ Random streams in a graph ] in ._rng)
    streams: list[tuple[Any, int, int]] = field(default_factory=list)
    _stream_ids: set[int] = field(default_factory=set)

    # -- naming buffers --------------------------------------------------------------------

    def token(self, buffer: Any) -> Token:
        """The token of ``buffer`` (see the module docstring)."""
        index = self._owned.get(id(buffer))
        token = ("ext", id(buffer)) if index is None else ("own", index)
        self.buffers.setdefault(token, buffer)
        return token

    def _own(self, buffer: Any, pool: Any) -> Token:
        token = ("own", self._leases)
        self._owned[id(buffer)] = self._leases
        self._leases += 1
        self.buffers[token] = buffer
        if pool is not None:
            self.pools[token] = pool
        return token

    def _check_queue(self, queue: Any) -> None:
        if self.queue is None:
            self.queue = queue
        elif queue is not self.queue:
            raise CaptureError(
                "capture: the step uses two command queues; a graph replays on one queue "
                f"(first {self.queue!r}, then {queue!r})"
            )

    # -- the Recorder protocol ---------------------------------------------------------------

    def launch(self, queue: Any, kernel: Any, global_size: Sequence[int],
               local_size: Sequence[int] | None, values: Sequence[Any]) -> Any:
        """Record a launch (nothing runs)."""
        self._check_queue(queue)
        args: list[tuple[str, Any]] = []
        for value in values:
            if value is None:
                args.append(("none", None))
            elif isinstance(value, (np.generic, np.ndarray)):
                args.append(("scalar", np.asarray(value).copy()))
            elif is_buffer(value):
                args.append(("buf", self.token(value)))
            else:
                args.append(("other", value))
        self.commands.append(Launch(kernel, tuple(int(g) for g in global_size),
                                    None if local_size is None else tuple(local_size), args))
        return None

    def fill(self, queue: Any, buffer: Any, pattern: np.ndarray[Any, Any], offset: int,
             nbytes: int) -> Any:
        """Record a fill (nothing runs)."""
        self._check_queue(queue)
        self.commands.append(Fill(self.token(buffer), np.array(pattern, copy=True), int(offset),
                                  int(nbytes)))
        return None

    def upload(self, queue: Any, buffer: Any, host: np.ndarray[Any, Any], offset: int) -> Any:
        """Record a host-to-device copy of a private copy of ``host`` (nothing runs)."""
        self._check_queue(queue)
        self.commands.append(Upload(self.token(buffer), np.array(host, copy=True, order="C"),
                                    int(offset)))
        return None

    def constant(self, queue: Any, buffer: Any, host: np.ndarray[Any, Any]) -> None:
        """Record a zero-copy buffer made over ``host``: owned by the trace, compared by data."""
        self._check_queue(queue)
        self.commands.append(Constant(self._own(buffer, None), np.array(host, copy=True)))

    def allocated(self, pool: Any, handle: Any) -> None:
        """Record a lease: its buffer is the trace's own from here on."""
        self._own(handle.buffer, pool)

    def check(self, queue: Any, buffer: Any, fail: Callable[[], None]) -> None:
        """Record a device-side check at this point of the step (nothing runs)."""
        self._check_queue(queue)
        self.commands.append(Check(self.token(buffer), fail))

    def random_stream(self, stream: Any, host: bool = False) -> None:
        """Note a generator about to draw or be reseeded, with its state the first time;
        refuse a draw on the host."""
        if host:
            raise HostReadError(
                f"capture: the step draws random numbers on the host from {stream!r} "
                "(Generator.numpy_generator: weight initialisation, say); a replay runs no "
                "Python, so it would repeat the first call's numbers and every decision taken "
                "on them. Draw them outside the step, or on the device (netcl.ops.uniform)"
            )
        if id(stream) not in self._stream_ids:
            self._stream_ids.add(id(stream))
            self.streams.append((stream, int(stream.seed), int(stream.offset)))

    def created(self, tensor: Any) -> None:
        """Keep ``tensor`` alive until :meth:`close`."""
        self._alive.append(tensor)

    def close(self) -> None:
        """Let the tensors made during the trace go (their buffers back to their pools, or
        aside where a graph holds them)."""
        self._alive = []

    def host_read(self, op: str, shape: tuple[int, ...], dtype: str) -> None:
        """Refuse: a replay could not repeat a read of device data on the host."""
        raise HostReadError(
            f"capture: {op} reads a tensor of shape {shape} and dtype {dtype} on the host inside "
            "the captured step; a replay runs no Python, so it cannot repeat the read or a "
            "branch taken on its value. Return the tensor from the step and read it after the "
            "call"
        )
