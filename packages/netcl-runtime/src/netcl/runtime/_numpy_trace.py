"""A trace of one step on the NumPy backend: the NumPy calls netcl's ops made, in order.

:class:`NumpyTrace` is a :class:`netcl.core.recording.Recorder` for the NumPy backend (NOTE
[ NumPy work under a recorder ] in :mod:`netcl.core.recording`). It runs each pure call
(``numpy_call``: its result decides the shapes the step goes on with) and records it with its
arguments and result; it records updates (``numpy_update``: optimizer steps, fills, running
statistics) without running them, so tracing leaves the step's state as it found it, as an
OpenCL trace does (NOTE [ Tracing without running ] in :mod:`._capture`). Each tensor made is
noted with the array it holds and the line of netcl that made it, so the comparison of two
traces (:mod:`._numpy_graph`) can name a NumPy site that computed an array without the hook.

Arrays are named by *tokens*: ``("out", k, i, offset, shape, strides, dtype)`` for an array
that is, or views, result ``i`` of the ``k``-th call of the trace (an array it made, not one of
its arguments it returned); ``("ext", address, shape, strides,
dtype)`` for any other array (a parameter, optimizer state, the step's input).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import CaptureUnsupportedError, HostReadError

__all__ = ["Call", "Made", "NumpyTrace", "address", "describe", "leaves"]

Token = tuple[Any, ...]

#: Source files whose frames do not name a site (the tensor class and the wrapping helpers).
_PLUMBING = ("netcl/core/tensor.py", "netcl/ops/_common.py", "netcl/ops/_elementwise_dispatch.py",
             "netcl/core/recording.py", "netcl/runtime/_numpy", "<string>", "dataclasses.py")


def address(a: np.ndarray[Any, Any]) -> int:
    """The address of ``a``'s first element."""
    return int(a.__array_interface__["data"][0])


@dataclass
class Call:
    """One NumPy call: ``fn(*args)``; ``out`` is its result (an array, a tuple of arrays, or
    ``None`` for an update); ``site`` the netcl line that made it."""

    fn: Callable[..., Any]
    args: list[Any]
    out: Any
    update: bool
    site: str


@dataclass
class Made:
    """A tensor made during the trace: the array it holds and the line that made it."""

    array: np.ndarray[Any, Any] | None
    site: str


def _site() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename.replace("\\", "/")
        if not any(part in name for part in _PLUMBING):
            return f"{name.rsplit('/src/', 1)[-1]}:{frame.f_lineno} ({frame.f_code.co_name})"
        frame = frame.f_back  # type: ignore[assignment]
    return "?"


def _fn_name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)


@dataclass
class NumpyTrace:
    """The recorder of one traced call of a NumPy-backend step (see the module docstring)."""

    calls: list[Call] = field(default_factory=list)
    made: list[Made] = field(default_factory=list)
    checks: list[tuple[np.ndarray[Any, Any], Callable[[], None]]] = field(default_factory=list)
    streams: list[tuple[Any, int, int]] = field(default_factory=list)
    _owner: dict[int, tuple[int, int]] = field(default_factory=dict)
    _stream_ids: set[int] = field(default_factory=set)

    # -- NumPy work --------------------------------------------------------------------------

    def numpy_call(self, fn: Callable[..., Any], args: Sequence[Any], update: bool) -> Any:
        """Run a pure call (not an update) and record it; its result becomes the trace's."""
        arrays = [a for a in leaves(args) if isinstance(a, np.ndarray)]
        out: Any = None
        if not update:
            result = fn(*args)
            out = (tuple(_as_array(o) for o in result) if isinstance(result, tuple)
                   else _as_array(result))
            results = out if isinstance(out, tuple) else (out,)
            for i, r in enumerate(results):
                if isinstance(r, np.ndarray) and not any(np.may_share_memory(r, a)
                                                         for a in arrays):
                    self._owner.setdefault(id(r), (len(self.calls), i))
                    root = r  # NumPy's views name the array owning the memory as their base
                    while isinstance(root.base, np.ndarray):
                        root = root.base
                    self._owner.setdefault(id(root), (len(self.calls), i))
        self.calls.append(Call(fn, list(args), out, update, _site()))
        return out

    def numpy_check(self, flag: np.ndarray[Any, Any], fail: Callable[[], None]) -> None:
        """A check of a flag the step computes: a replay reads it afterwards."""
        self.checks.append((flag, fail))

    def token(self, a: np.ndarray[Any, Any]) -> Token:
        """The name of array ``a`` in this trace (see the module docstring)."""
        base: Any = a
        while isinstance(base, np.ndarray):
            owner = self._owner.get(id(base))
            if owner is not None:
                return ("out", *owner, address(a) - address(base), a.shape, a.strides,
                        a.dtype.str)
            base = base.base
        return ("ext", address(a), a.shape, a.strides, a.dtype.str)

    # -- the rest of the Recorder protocol ---------------------------------------------------

    def created(self, tensor: Any) -> None:
        """Note the array of a tensor made inside the step, and where."""
        self.made.append(Made(tensor.array, _site()))

    def host_read(self, op: str, shape: tuple[int, ...], dtype: str) -> None:
        """Refuse: a replay could not repeat a read of the step's data on the host."""
        raise HostReadError(
            f"capture: {op} reads a tensor of shape {shape} and dtype {dtype} on the host inside "
            "the captured step; a replay runs no Python, so it cannot repeat the read or a "
            "branch taken on its value. Return the tensor from the step and read it after the "
            "call"
        )

    def random_stream(self, stream: Any, host: bool = False) -> None:
        """Note a generator about to draw, with its state the first time; refuse host draws."""
        if host:
            raise HostReadError(
                f"capture: the step draws random numbers on the host from {stream!r}; a replay "
                "runs no Python, so it would repeat the first call's numbers. Draw them outside "
                "the step, or through netcl.ops (uniform, dropout)"
            )
        if id(stream) not in self._stream_ids:
            self._stream_ids.add(id(stream))
            self.streams.append((stream, int(stream.seed), int(stream.offset)))

    def _opencl(self, what: str) -> None:
        raise CaptureUnsupportedError(
            f"capture: a NumPy-backend step {what} on an OpenCL device; capture one backend's "
            "step at a time (move the tensors to one device)"
        )

    def launch(self, queue: Any, kernel: Any, global_size: Sequence[int],
               local_size: Sequence[int] | None, values: Sequence[Any]) -> Any:
        """Refuse OpenCL work inside a NumPy capture."""
        self._opencl("launches a kernel")

    def fill(self, queue: Any, buffer: Any, pattern: np.ndarray[Any, Any], offset: int,
             nbytes: int) -> Any:
        """Refuse OpenCL work inside a NumPy capture."""
        self._opencl("fills a buffer")

    def upload(self, queue: Any, buffer: Any, host: np.ndarray[Any, Any], offset: int) -> Any:
        """Refuse OpenCL work inside a NumPy capture."""
        self._opencl("uploads data")

    def constant(self, queue: Any, buffer: Any, host: np.ndarray[Any, Any]) -> None:
        """Refuse OpenCL work inside a NumPy capture."""
        self._opencl("makes a buffer")

    def allocated(self, pool: Any, handle: Any) -> None:
        """Refuse OpenCL work inside a NumPy capture."""
        self._opencl("leases a buffer")

    def check(self, queue: Any, buffer: Any, fail: Callable[[], None]) -> None:
        """Refuse OpenCL work inside a NumPy capture."""
        self._opencl("checks a flag")


def _as_array(value: Any) -> Any:
    """A NumPy scalar result as a 0-d array (a replay writes into it); anything else as is."""
    return np.asarray(value) if isinstance(value, np.generic) else value


def leaves(args: Sequence[Any]) -> list[Any]:
    """The arguments of a call with nested lists and tuples opened, in order
    (``np.concatenate([a, b])``)."""
    out: list[Any] = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(leaves(a))
        else:
            out.append(a)
    return out


def describe(call: Call) -> str:
    """``fn`` at ``site``, for messages."""
    return f"{_fn_name(call.fn)} at {call.site}"
