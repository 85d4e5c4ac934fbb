"""The replay plan of a NumPy-backend step, built from two traces (:mod:`._numpy_trace`).

# NOTE [ Replaying NumPy calls ]
# A NumPy step is captured as the list of NumPy calls its ops made (NOTE [ NumPy work under a
# recorder ] in netcl.core.recording). Two traces are compared, as on OpenCL (NOTE [ Tracing
# without running ] in ._capture): the first with the graph parameters and random generators
# at their values, the second at probe values. Calls, functions and arrays must agree: an
# array is either a result of a call of the same trace (the same call and result, the same
# view of it) or an array that existed before the step (the same address in both traces).
# Any other array was made by NumPy work that bypassed the hook, and a new one each call: a
# replay would read a stale copy, so the capture refuses it, naming the line that made it.
# Scalars that differ between the two traces must follow a parameter (value, then probe) or a
# generator (its seed, or its offset plus a constant of the step); they become slots the
# replay fills each call. Everything else is baked in.
# The replay calls each function again on the second trace's arguments and copies its result
# into the array the trace returned (np.copyto): every array a later call, a tensor or a view
# holds stays the one it was. Updates run again in place. Results that view an argument need
# nothing. Warnings are silenced once around the whole list (eager ops silence them per call).
# Measured on the digits CNN (2-core VM shared with other jobs, one BLAS thread): 10 epochs
# 3.93 s eager, 3.80 s captured, PyTorch CPU 2.59 s; per epoch 0.37-0.39 -> 0.33-0.37 s. The
# replay's own Python is ~1% of a step; the conv GEMMs (BLAS) are ~75%.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._numpy_trace import Call, NumpyTrace, describe, leaves
from .errors import CaptureUnsupportedError, UnstableStepError

__all__ = ["NumpyGraph", "Slot"]


@dataclass(frozen=True)
class Slot:
    """A scalar argument a replay sets: argument ``arg`` of call ``call``, read from parameter
    ``source`` (a name) or generator ``stream`` (``what`` ``"seed"``/``"offset"``, the offset
    plus ``delta``), converted to ``kind``."""

    call: int
    arg: int
    kind: type
    source: str = ""
    stream: int = -1
    what: str = ""
    delta: int = 0


def _same_scalar(traced: Any, value: Any) -> bool:
    try:
        return bool(type(traced)(value) == traced)
    except (TypeError, ValueError, OverflowError):
        return False


def _fn_key(trace: NumpyTrace, fn: Any) -> Any:
    """What must be equal about the function of a call in both traces."""
    if isinstance(fn, types.FunctionType):
        cells = tuple(_value_key(trace, c.cell_contents) for c in fn.__closure__ or ())
        return (fn.__code__, cells)
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, np.ndarray):  # a bound method of an array (out.fill)
        return (getattr(fn, "__name__", None), trace.token(owner))
    return fn


def _value_key(trace: NumpyTrace, value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return trace.token(value)
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_value_key(trace, v) for v in value))
    return value


class NumpyGraph:
    """A NumPy step's replay plan (NOTE [ Replaying NumPy calls ]): built from the two traces
    ``first`` (parameters at ``values``, generators as found) and ``second`` (at ``probes``
    and probe states); ``ends`` are the generators' states after each trace."""

    def __init__(self, first: NumpyTrace, second: NumpyTrace, values: Mapping[str, Any],
                 probes: Mapping[str, Any], ends: Sequence[Sequence[tuple[int, int]]],
                 queue: Any = None) -> None:
        self.queue = queue
        self._values = dict(values)
        _compare(first, second)
        self._streams = _streams(first, second, ends)
        self.slots = _slots(first, second, values, probes, self._streams)
        self._plan = _plan(second.calls)
        self._args = [call.args for call in second.calls]
        self._checks = list(second.checks)
        self.calls = len(second.calls)

    def set_param(self, name: str, value: Any) -> None:
        """The value parameter ``name`` takes in the next replays."""
        self._values[name] = value

    def replay(self) -> None:
        """Run the plan once: fill the slots, call everything, advance the generators, and
        raise a check that failed."""
        args = self._args
        starts = [(stream.seed, stream.offset) for stream, _ in self._streams]
        for slot in self.slots:
            if slot.stream < 0:
                value: Any = self._values[slot.source]
            else:
                seed, offset = starts[slot.stream]
                value = seed if slot.what == "seed" else offset + slot.delta
            args[slot.call][slot.arg] = slot.kind(value)
        copyto = np.copyto
        with np.errstate(all="ignore"):
            for fn, call_args, outs, kind in self._plan:
                if kind == _ONE:
                    copyto(outs, fn(*call_args))
                elif kind == _UPDATE:
                    fn(*call_args)
                else:
                    results = fn(*call_args)
                    for i, out in outs:
                        copyto(out, results[i])
        for (stream, advance), (_, offset) in zip(self._streams, starts):
            stream.offset = offset + advance
        for flag, fail in self._checks:
            if flag.reshape(-1)[0]:
                fail()

    def check(self, block: bool = True) -> None:
        """Nothing to read back: a NumPy replay raises its checks as it ends."""

    def release(self) -> None:
        """Drop the plan and the arrays it holds."""
        self._plan = []
        self._args = []
        self._checks = []


def _compare(first: NumpyTrace, second: NumpyTrace) -> None:
    """Raise unless the two traces made the same calls on the same arrays (scalars aside)."""
    if len(first.calls) != len(second.calls):
        raise UnstableStepError(
            f"capture: the step made {len(first.calls)} NumPy calls in one trace and "
            f"{len(second.calls)} in the next; its work changes from call to call")
    for k, (a, b) in enumerate(zip(first.calls, second.calls)):
        if (_fn_key(first, a.fn) != _fn_key(second, b.fn) or a.update != b.update
                or len(a.args) != len(b.args)):
            raise UnstableStepError(
                f"capture: NumPy call {k} is {describe(a)} in one trace and {describe(b)} in "
                "the next; the step's work changes from call to call")
        for j, (x, y) in enumerate(zip(a.args, b.args)):
            if isinstance(x, (int, float, np.number)) and not isinstance(x, bool):
                continue  # scalars: see _slots
            for u, v in zip(leaves([x]), leaves([y])):
                if _value_key(first, u) != _value_key(second, v):
                    raise _array_error(first, second, k, j, b, v)
    if len(first.made) != len(second.made):
        raise UnstableStepError(
            f"capture: the step made {len(first.made)} tensors in one trace and "
            f"{len(second.made)} in the next")
    for m, n in zip(first.made, second.made):
        if m.array is None or n.array is None:
            continue
        if first.token(m.array) != second.token(n.array):
            raise CaptureUnsupportedError(
                f"capture: the tensor made at {n.site} holds an array that no recorded NumPy "
                "call made, a new one each call (NOTE [ NumPy work under a recorder ] in "
                "netcl.core.recording): a replay would keep the first one. That NumPy site "
                "needs netcl.core.recording.numpy_call; until then run the step eagerly")
    if [first.token(f) for f, _ in first.checks] != [second.token(f) for f, _ in second.checks]:
        raise UnstableStepError("capture: the step's device-side checks change between calls")


def _array_error(first: NumpyTrace, second: NumpyTrace, k: int, j: int, call: Call,
                 value: Any) -> Exception:
    token = second.token(value) if isinstance(value, np.ndarray) else value
    if isinstance(value, np.ndarray) and token[0] == "ext" and _made_by(first, value):
        return UnstableStepError(
            f"capture: argument {j} of NumPy call {k} ({describe(call)}) is an array the "
            "step's previous call made: the step keeps its results in its state and reads them "
            "back (a gradient accumulated across calls, say), so each call reads other arrays; "
            "clear that state inside the step (zero_grad() with set_to_none=True)")
    if isinstance(value, np.ndarray) and token[0] == "ext":
        return CaptureUnsupportedError(
            f"capture: argument {j} of NumPy call {k} ({describe(call)}) is an array that no "
            "recorded NumPy call made and that is new each call: the NumPy site that made it "
            "needs netcl.core.recording.numpy_call (NOTE [ NumPy work under a recorder ]); "
            "until then run the step eagerly")
    return UnstableStepError(
        f"capture: argument {j} of NumPy call {k} ({describe(call)}) differs between two "
        f"traces of the step ({token!r}); its work changes from call to call")


def _made_by(trace: NumpyTrace, value: np.ndarray[Any, Any]) -> bool:
    """Whether ``value`` views an array one of ``trace``'s calls made."""
    for call in trace.calls:
        results = call.out if isinstance(call.out, tuple) else (call.out,)
        if any(isinstance(r, np.ndarray) and np.may_share_memory(r, value) for r in results):
            return True
    return False


def _streams(first: NumpyTrace, second: NumpyTrace, ends: Sequence[Sequence[tuple[int, int]]]
             ) -> list[tuple[Any, int]]:
    """Each generator the step draws from, with how far one call advances it."""
    if [id(s) for s, _, _ in first.streams] != [id(s) for s, _, _ in second.streams]:
        raise UnstableStepError("capture: the step draws from other generators each call")
    out = []
    for i, ((stream, seed1, off1), (_, seed2, off2)) in enumerate(zip(first.streams,
                                                                      second.streams)):
        (end_seed1, end1), (end_seed2, end2) = ends[0][i], ends[1][i]
        if end_seed1 != seed1 or end_seed2 != seed2 or end1 - off1 != end2 - off2:
            raise UnstableStepError(
                f"capture: the step reseeds {stream!r} or draws a different number of words "
                "from it each call; a replay could not advance it as eager calls do")
        out.append((stream, end1 - off1))
    return out


def _slots(first: NumpyTrace, second: NumpyTrace, values: Mapping[str, Any],
           probes: Mapping[str, Any], streams: Sequence[tuple[Any, int]]) -> list[Slot]:
    """The scalar arguments that follow a parameter or a generator (NOTE [ Replaying NumPy
    calls ]); any other scalar that differs between the traces raises."""
    slots = []
    for k, (a, b) in enumerate(zip(first.calls, second.calls)):
        for j, (x, y) in enumerate(zip(a.args, b.args)):
            if not isinstance(x, (int, float, np.number)) or isinstance(x, bool):
                continue
            if type(x) is type(y) and x == y:
                continue
            slot = _slot(k, j, x, y, values, probes, first, second, streams)
            if slot is None:
                raise UnstableStepError(
                    f"capture: scalar argument {j} of NumPy call {k} ({describe(b)}) is {x!r} "
                    f"in one trace and {y!r} in the next, and follows no graph parameter: pass "
                    "it as a capture parameter (capture(params=...)) or compute it from arrays "
                    "inside the NumPy call")
            slots.append(slot)
    return slots


def _slot(k: int, j: int, x: Any, y: Any, values: Mapping[str, Any], probes: Mapping[str, Any],
          first: NumpyTrace, second: NumpyTrace, streams: Sequence[tuple[Any, int]]
          ) -> Slot | None:
    kind = type(x)
    for name, value in values.items():
        if _same_scalar(x, value) and _same_scalar(y, probes[name]):
            return Slot(k, j, kind, source=name)
    for i, ((_, seed1, off1), (_, seed2, off2)) in enumerate(zip(first.streams,
                                                                 second.streams)):
        if _same_scalar(x, seed1) and _same_scalar(y, seed2):
            return Slot(k, j, kind, stream=i, what="seed")
        if isinstance(x, (int, np.integer)) and int(y) - int(x) == off2 - off1:
            return Slot(k, j, kind, stream=i, what="offset", delta=int(x) - off1)
    return None


_Step = tuple[Callable[..., Any], list[Any], Any, int]
_UPDATE, _ONE, _MANY = 0, 1, 2  # what a step of the plan writes: nothing, one result, several


def _plan(calls: Sequence[Call]) -> list[_Step]:
    """``(fn, args, outs, kind)`` per call to repeat: ``outs`` ``None`` (``_UPDATE``), the
    result array (``_ONE``), or ``[(i, array), ...]`` for the results of a tuple a replay
    writes (``_MANY``) (results that
    view an argument are left out, and a call with nothing to write is dropped)."""
    plan: list[_Step] = []
    for call in calls:
        if call.update:
            plan.append((call.fn, call.args, None, _UPDATE))
            continue
        arrays = [a for a in leaves(call.args) if isinstance(a, np.ndarray)]
        results = call.out if isinstance(call.out, tuple) else (call.out,)
        own = []
        for i, r in enumerate(results):
            if not isinstance(r, np.ndarray) or any(np.may_share_memory(r, a) for a in arrays):
                continue
            if not r.flags.writeable:
                raise CaptureUnsupportedError(
                    f"capture: NumPy call {describe(call)} returns a read-only array that is "
                    "not a view of its arguments; a replay could not write into it")
            own.append((i, r))
        if not own:
            continue
        if isinstance(call.out, tuple):
            plan.append((call.fn, call.args, own, _MANY))
        else:
            plan.append((call.fn, call.args, own[0][1], _ONE))
    return plan
