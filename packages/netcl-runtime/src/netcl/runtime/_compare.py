"""Two traces of one step, compared: what a replay may repeat, and which scalars are parameters.

The capture traces the step twice (NOTE [ Tracing without running ] in :mod:`._capture`): the
first time with every graph parameter at its value, the second with each parameter at a probe
value. Everything a replay repeats must be the same in both -- kernels, launch sizes, buffers
(by token: see :mod:`._trace`), fills, uploaded data -- except scalar arguments that follow a
parameter exactly (its value in the first trace, its probe in the second): those become the
parameter's slots. An *affine* parameter (a random generator's offset: NOTE [ Random streams in
a graph ] in :mod:`._rng`) also takes integer scalars that are its value plus the same
``k >= 0`` in both traces; a replay sets such a slot to the parameter's value plus ``k``. Any
other difference raises :class:`UnstableStepError` naming the command, the kernel, the argument
and both values.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, cast

import numpy as np

from ._trace import Check, Constant, Fill, Launch, Trace, Upload
from .errors import UnstableStepError

__all__ = ["Slot", "bind_parameters"]

# (command index, argument index, the argument's dtype, the addend k of an affine parameter: the
# slot's value is the parameter's plus k; 0 for every other parameter)
Slot = tuple[int, int, np.dtype[Any], int]


def _same(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    return bool(a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes())


def _as(dtype: np.dtype[Any], value: Any) -> np.ndarray[Any, Any]:
    return np.asarray(value).astype(dtype)


def _where(i: int, command: Any) -> str:
    if isinstance(command, Launch):
        return f"command {i} (kernel {command.name})"
    return f"command {i} ({type(command).__name__.lower()})"


def _buffer_problem(where: str, what: str, a: Any, b: Any) -> UnstableStepError:
    if a[0] == "ext" or b[0] == "ext":
        why = ("a buffer the graph does not own: it was neither leased inside the step nor the "
               "same buffer on both calls (create it inside the step, pass its data as an "
               "input, or keep it in state the step reaches, such as a parameter)")
    else:
        why = "the step leases its buffers in another order on each call"
    return UnstableStepError(f"capture: {where}, {what}: {why} (first trace {a}, second {b})")


def bind_parameters(first: Trace, second: Trace, values: Mapping[str, Any],
                    probes: Mapping[str, Any], affine: Collection[str] = ()
                    ) -> dict[str, list[Slot]]:
    """Check that ``second`` repeats ``first`` and return each parameter's scalar slots.

    ``values`` are the parameters' values during ``first``, ``probes`` during ``second``;
    the parameters named in ``affine`` also bind integer scalars at their value plus ``k >= 0``.

    Raises:
        UnstableStepError: the traces differ other than through the parameters.
    """
    if len(first.commands) != len(second.commands):
        raise UnstableStepError(
            f"capture: the step enqueued {len(first.commands)} commands on one call and "
            f"{len(second.commands)} on the next; its work depends on something other than its "
            "inputs' shapes and the graph parameters (host state, a counter), so a replay "
            "cannot repeat it"
        )
    slots: dict[str, list[Slot]] = {name: [] for name in values}
    for i, (a, b) in enumerate(zip(first.commands, second.commands)):
        where = _where(i, a)
        if type(a) is not type(b):
            raise UnstableStepError(f"capture: {where} is a {type(b).__name__} on the next call; "
                                    "the step does different work from call to call")
        if isinstance(a, Launch):
            _compare_launch(i, a, cast(Launch, b), values, probes, affine, slots)
        elif isinstance(a, Fill):
            b = cast(Fill, b)  # same type as a (checked above)
            if a.token != b.token:
                raise _buffer_problem(where, "the filled buffer", a.token, b.token)
            if (a.offset, a.nbytes) != (b.offset, b.nbytes) or not _same(a.pattern, b.pattern):
                raise UnstableStepError(f"capture: {where} fills other bytes or another value on "
                                        f"the next call ({a.pattern} vs {b.pattern})")
        elif isinstance(a, Check):
            b = cast(Check, b)
            if a.token != b.token:
                raise _buffer_problem(where, "the checked flag", a.token, b.token)
        elif isinstance(a, (Upload, Constant)):
            b = cast(Upload | Constant, b)
            if a.token != b.token:
                raise _buffer_problem(where, "the uploaded buffer", a.token, b.token)
            if not _same(a.data, b.data):
                raise UnstableStepError(
                    f"capture: {where} uploads host data of shape {a.data.shape} that changes "
                    "from call to call (Tensor.from_host or copy_from_host inside the step); a "
                    "replay would upload stale data. Pass it to the step as a Tensor input"
                )
    return slots


def _compare_launch(i: int, a: Launch, b: Launch, values: Mapping[str, Any],
                    probes: Mapping[str, Any], affine: Collection[str],
                    slots: dict[str, list[Slot]]) -> None:
    where = _where(i, a)
    if a.kernel is not b.kernel or len(a.args) != len(b.args):
        raise UnstableStepError(f"capture: {where} launches kernel {b.name} on the next call; "
                                "the step does different work from call to call")
    if (a.global_size, a.local_size) != (b.global_size, b.local_size):
        raise UnstableStepError(
            f"capture: {where} launches with sizes {a.global_size}/{a.local_size} on one call "
            f"and {b.global_size}/{b.local_size} on the next"
        )
    for j, ((kind_a, va), (kind_b, vb)) in enumerate(zip(a.args, b.args)):
        if kind_a != kind_b:
            raise UnstableStepError(f"capture: {where}, argument {j}: a {kind_a} on one call "
                                    f"and a {kind_b} on the next")
        if kind_a == "buf" and va != vb:
            raise _buffer_problem(where, f"argument {j}", va, vb)
        if kind_a == "other" and va != vb:
            raise UnstableStepError(f"capture: {where}, argument {j} changes ({va!r} -> {vb!r})")
        if kind_a == "scalar" and not _same(va, vb):
            found = _parameters_of(va, vb, values, probes, affine)
            if len(found) != 1:
                raise _unfollowed(f"{where}, scalar argument {j}", va, vb, found, bool(affine))
            name, addend = next(iter(found.items()))
            slots[name].append((i, j, va.dtype, addend))


def _unfollowed(what: str, va: np.ndarray[Any, Any], vb: np.ndarray[Any, Any],
                found: Mapping[str, int], draws: bool) -> UnstableStepError:
    """The error for a scalar that changes between the traces and follows no one parameter."""
    follows = ("follows no graph parameter" if not found else
               f"follows several graph parameters alike ({sorted(found)})")
    hint = "Make the value a parameter (capture(..., params=...)), or keep it on the device"
    if va.ndim == 0 and va.dtype.kind in "iu":
        hint = (f"If it is a counter the step advances on the host (by {int(vb) - int(va)} a "
                "call), keep it on the device, or advance it outside the step and make it a "
                "parameter (capture(..., params={'t': Param.attribute(obj, 't')}))")
    if draws:
        hint += (". The step draws random numbers: their generators' seeds and offsets are "
                 "followed by themselves, but no other scalar computed from them")
    return UnstableStepError(
        f"capture: {what} is {va.item()!r} on one call and {vb.item()!r} on the next, and "
        f"{follows}; a replay would repeat a stale value. {hint}"
    )


def _parameters_of(va: np.ndarray[Any, Any], vb: np.ndarray[Any, Any],
                   values: Mapping[str, Any], probes: Mapping[str, Any],
                   affine: Collection[str]) -> dict[str, int]:
    """The parameters the scalar (``va`` in the first trace, ``vb`` in the second) follows,
    each with its addend."""
    found: dict[str, int] = {}
    integral = va.ndim == 0 and va.dtype.kind in "iu"
    for name in values:
        if name in affine:
            if integral:
                addend = int(va.item()) - int(values[name])
                if addend >= 0 and addend == int(vb.item()) - int(probes[name]):
                    found[name] = addend
        elif _same(_as(va.dtype, values[name]), va) and _same(_as(vb.dtype, probes[name]), vb):
            found[name] = 0
    return found
