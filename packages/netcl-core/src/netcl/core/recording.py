"""The recording hook: one thread-local slot that netcl's device commands consult.

Every place where netcl puts work on an OpenCL queue or hands out device memory -- a kernel
launch, a buffer fill, a host-to-device copy, a pool allocation -- and every place where it reads
device data back to the host asks :data:`state` whether a :class:`Recorder` is active on this
thread. When none is (the normal case) the cost is one attribute read; when one is, the command
goes to the recorder, which performs it (or, while it only traces, does not) and remembers it.
``netcl.runtime.capture`` builds its replay graphs and its profiler on this hook; core knows
nothing about them.

# NOTE [ Recorders replace the command ]
# A hook hands the whole command to the recorder instead of notifying it after the fact: a
# graph capture traces a step without running it (the work is replayed afterwards), and a
# profiler wants the event of each launch. So the recorder returns what the command would
# have returned (the launch's event, or None) and the hook site returns that.

Examples:
    >>> class Count:
    ...     def __init__(self): self.launches = 0
    ...     def launch(self, queue, kernel, global_size, local_size, values):
    ...         self.launches += 1
    >>> with recording(Count()) as rec:
    ...     state.recorder is rec
    True
    >>> state.recorder is None
    True
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from ._cl import cl

__all__ = ["Recorder", "RecorderState", "RandomStream", "check_flag", "drawing", "is_buffer",
           "numpy_call", "numpy_update", "pyopencl", "quiet", "recording", "state"]


class Recorder(Protocol):
    """What an active recorder receives. Each method performs (or skips) the command itself.

    - ``launch``: a kernel whose arguments ``values`` (buffers, ``None``, NumPy scalars,
      ``LocalMemory``) are already set on ``kernel``; returns the launch's event or ``None``.
    - ``fill``: fill ``nbytes`` of ``buffer`` from byte ``offset`` with ``pattern``.
    - ``upload``: copy the host array ``host`` into ``buffer`` at byte ``offset``.
    - ``constant``: a zero-copy buffer made over the host array ``host`` (no command: the
      buffer's contents are the array's).
    - ``allocated``: ``pool`` leased ``handle`` (a :class:`netcl.core.memory.BufferHandle`).
    - ``created``: a :class:`netcl.core.Tensor` was made.
    - ``host_read``: ``op`` is about to read device data of ``shape``/``dtype`` on the host;
      a graph capture raises here (a replay could not repeat the read).
    - ``check``: a device-side check (:func:`check_flag`): ``fail`` is to be called once the
      int32 at the start of ``buffer`` is read back nonzero.

    A recorder may also define ``random_stream(stream, host)`` (optional: :func:`drawing`
    looks it up): a :class:`RandomStream` is about to draw (on the host if ``host``) or be
    reseeded (NOTE [ Random streams under a recorder ]); and, to record NumPy-backend work,
    ``numpy_call(fn, args, update)`` (:func:`numpy_call`, :func:`numpy_update`) and
    ``numpy_check(flag, fail)`` (:func:`check_flag` on a NumPy tensor).
    """

    def launch(self, queue: Any, kernel: Any, global_size: Sequence[int],
               local_size: Sequence[int] | None, values: Sequence[Any]) -> Any: ...

    def fill(self, queue: Any, buffer: Any, pattern: np.ndarray[Any, Any], offset: int,
             nbytes: int) -> Any: ...

    def upload(self, queue: Any, buffer: Any, host: np.ndarray[Any, Any], offset: int) -> Any: ...

    def constant(self, queue: Any, buffer: Any, host: np.ndarray[Any, Any]) -> None: ...

    def allocated(self, pool: Any, handle: Any) -> None: ...

    def created(self, tensor: Any) -> None: ...

    def host_read(self, op: str, shape: tuple[int, ...], dtype: str) -> None: ...

    def check(self, queue: Any, buffer: Any, fail: Callable[[], None]) -> None: ...


class RecorderState(threading.local):
    """The per-thread slot: ``recorder`` is the active :class:`Recorder` or ``None``."""

    recorder: Any = None


#: The one slot every hook site reads (``state.recorder``).
state = RecorderState()

_R = TypeVar("_R")


@contextlib.contextmanager
def recording(recorder: _R) -> Iterator[_R]:
    """Make ``recorder`` the active recorder of this thread inside the block.

    Recorders nest: the previous one (or none) is active again after the block.
    """
    previous = state.recorder
    state.recorder = recorder
    try:
        yield recorder
    finally:
        state.recorder = previous


class RandomStream(Protocol):
    """A random generator as a recorder sees it (``netcl.ops.Generator``): the Philox stream
    ``seed`` and ``offset``, the stream position of its next draw."""

    seed: int
    offset: int


# NOTE [ Random streams under a recorder ]
# A random op passes its generator's (seed, offset) to its kernel as scalars, and the generator
# advances on the host with every draw, so a replay that repeated the traced scalars would draw
# the same numbers every step. The generator calls drawing(self) before each draw or reseed;
# a graph capture uses it to learn which generators a step reads and their state before the
# step, and then makes their seed and offset graph parameters (netcl.runtime._rng). Words
# drawn on the host (a NumPy generator seeded from the stream) feed Python decisions a replay
# cannot repeat, so drawing(self, host=True) lets a capture refuse them.

def drawing(stream: RandomStream, host: bool = False) -> None:
    """Tell the active recorder, if it wants to know, that ``stream`` is about to draw -- words
    a kernel reads, or with ``host`` words read on the host -- or be reseeded (NOTE [ Random
    streams under a recorder ]); without a recorder this costs one attribute read."""
    recorder = state.recorder
    if recorder is not None:
        hook = getattr(recorder, "random_stream", None)
        if hook is not None:
            hook(stream, host)


# NOTE [ NumPy work under a recorder ]
# The NumPy backend computes with plain NumPy calls, which no queue sees. Every NumPy compute
# site of a step's ops goes through numpy_call (a pure function of its arguments returning new
# arrays) or numpy_update (a function that writes into arrays it is given: optimizer updates,
# fills, running statistics). With no recorder active they call fn at once (one attribute read
# more than calling it directly). A NumPy capture (netcl.runtime._numpy_trace) records fn, its
# arguments and its result instead, and replays the list later writing into the same result
# arrays, so every array the step made (and every view of one) stays valid across replays.
# fn must read nothing but its arguments: a value it took from elsewhere (a closure, a global
# counter) would be frozen at its traced value. Its warnings are silenced (NOTE [ Quiet NumPy
# calls ]), and by a replay once around the whole list.

# NOTE [ Quiet NumPy calls ]
# netcl's NumPy paths silence NumPy's floating-point warnings (an overflow to inf is a result,
# as on OpenCL). np.errstate costs about 3 us per entry (it builds its state object each time),
# more than the small ops it wraps; numpy_call sets NumPy's own context variable to a state
# built once instead (about 0.3 us). Where NumPy lacks those names, np.errstate serves.
_extobj_contextvar: Any = None
_QUIET: Any = None
try:
    _ufunc_config: Any = importlib.import_module("numpy._core._ufunc_config")
    _extobj_contextvar = _ufunc_config._extobj_contextvar
    _QUIET = _ufunc_config._make_extobj(all="ignore")
except (ImportError, AttributeError):  # pragma: no cover - another NumPy layout
    _extobj_contextvar = None


def quiet(fn: Callable[..., _R], *args: Any) -> _R:
    """``fn(*args)`` with NumPy's floating-point warnings silenced (NOTE [ Quiet NumPy calls ]).

    Examples:
        >>> import numpy as np
        >>> quiet(np.divide, np.ones(1), 0.0).tolist()
        [inf]
    """
    if _extobj_contextvar is None:  # pragma: no cover
        with np.errstate(all="ignore"):
            return fn(*args)
    token = _extobj_contextvar.set(_QUIET)
    try:
        return fn(*args)
    finally:
        _extobj_contextvar.reset(token)


def numpy_call(fn: Callable[..., _R], *args: Any) -> _R:
    """``fn(*args)``, quietly (:func:`quiet`): NumPy work that returns new arrays (NOTE [ NumPy
    work under a recorder ]).

    Examples:
        >>> import numpy as np
        >>> numpy_call(np.add, np.ones(2), 1.0).tolist()
        [2.0, 2.0]
    """
    recorder = state.recorder
    hook = None if recorder is None else getattr(recorder, "numpy_call", None)
    if hook is None:
        return quiet(fn, *args)
    return quiet(hook, fn, args, False)  # type: ignore[no-any-return]


def numpy_update(fn: Callable[..., Any], *args: Any) -> None:
    """``fn(*args)``, quietly: NumPy work that writes into arrays among ``args`` (an optimizer
    update, a fill) and returns nothing (NOTE [ NumPy work under a recorder ]).

    Examples:
        >>> import numpy as np
        >>> a = np.zeros(2)
        >>> numpy_update(np.copyto, a, 3.0); a.tolist()
        [3.0, 3.0]
    """
    recorder = state.recorder
    hook = None if recorder is None else getattr(recorder, "numpy_call", None)
    if hook is None:
        quiet(fn, *args)
    else:
        hook(fn, args, True)


def pyopencl() -> Any:
    """The ``pyopencl`` module (imported on first use, as netcl core imports it), for code
    that enqueues recorded commands itself; ``ImportError`` says how to install it."""
    return cl()


def is_buffer(value: Any) -> bool:
    """True for an OpenCL memory object (a ``cl.Buffer``), the kind of kernel argument a
    recorder names by identity; False for scalars, ``None`` and ``LocalMemory``."""
    return isinstance(value, cl().MemoryObjectHolder)


def check_flag(flag: Any, fail: Callable[[], None]) -> None:
    """A check whose condition the device computed: call ``fail`` if ``flag`` is set.

    ``flag`` is a one-element int32 tensor a kernel sets nonzero on bad input (an out-of-range
    label, an inf gradient); ``fail`` raises the error that names it. Eagerly the flag is read
    at once (a host sync). Under a recorder the check is the recorder's: a replay graph reads
    the flag back without waiting and calls ``fail`` at its next call, so a captured step can
    keep the check without reading device data inside the step.

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> flag = Tensor.from_host(manager.default("cpu").queue, np.array([1], np.int32))
        >>> def fail():
        ...     raise ValueError("a label is out of range")
        >>> check_flag(flag, fail)
        Traceback (most recent call last):
        ...
        ValueError: a label is out of range
    """
    recorder = state.recorder
    if recorder is not None:
        if flag.array is None:
            recorder.check(flag.queue, flag.buffer, fail)
            return
        hook = getattr(recorder, "numpy_check", None)
        if hook is not None:  # a NumPy capture reads the flag after each replay
            hook(flag.array, fail)
            return
    if flag.to_host().reshape(-1)[0]:
        fail()
