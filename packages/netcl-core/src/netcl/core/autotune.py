"""The autotuning policy: whether the kernel selector times candidates, for how long, and a
log of what it decided.

``NETCL_AUTOTUNE`` is ``off``, ``on`` or ``auto`` (the default): ``auto`` tunes on GPU and
accelerator OpenCL devices and not on OpenCL CPU devices or the NumPy backend (CPU runs, the
tests and CI stay deterministic and fast). With tuning on, the first eager selection of a
query whose *shape class* has no stored winner times the family's candidates
(:class:`netcl.core.selection.FamilyTuner`) on scratch data and keeps the fastest, persisted
per device and driver (``KernelSelector.tuned_path``). It never tunes:

- under a recorder (a graph capture or the profiler: ``netcl.core.recording``) -- the rule or a
  known winner decides, and the decision is not cached, so a later eager call still tunes;
- inside a tuning run (a candidate's own selections use the rule, uncached likewise);
- for a forced family (``force_variant``, ``NETCL_FORCE_<FAMILY>``: forcing wins);
- once the process has spent ``NETCL_AUTOTUNE_BUDGET_S`` seconds (default 30) tuning: from
  then on the rule decides. A class whose tuning the budget cut short keeps the best measured
  config for this process but is not stored (it is tuned again in the next process).

With tuning off (``off``, or ``auto`` on a CPU device) the rule decides: stored class winners
are not consulted (winners that ``KernelSelector.autotune`` recorded for an exact key still
are). The policy is read when a query is first decided; ``KernelSelector.clear_cache`` makes
a selector decide again.

A shape class buckets each size of a query up to a power of two (matmul: ``M``, ``N``, ``K``
and the dtype; conv2d: batch, channels and plane sizes bucketed, the window, stride, padding,
dilation, groups, dtype and direction exact), so one winner serves the odd sizes around it.

Examples:
    >>> from netcl.core.device_profile import extended_profile
    >>> autotune_mode() in MODES
    True
    >>> tuning_enabled(extended_profile(None))  # auto: off on the NumPy backend
    False
    >>> with tuning("on", budget_s=5.0) as log:
    ...     tuning_enabled(extended_profile(None)), budget_s(), log
    (True, 5.0, [])
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from netcl.core.device_profile import ExtendedDeviceProfile
from netcl.core.env import env_choice, env_number
from netcl.core.recording import state as recording_state

__all__ = [
    "BUDGET_ENV",
    "DEFAULT_BUDGET_S",
    "MODES",
    "MODE_ENV",
    "Gate",
    "TuneRecord",
    "autotune_mode",
    "budget_left",
    "budget_s",
    "gate",
    "reset_budget",
    "spend",
    "tune_log",
    "tuning",
    "tuning_enabled",
    "tuning_run",
]

MODE_ENV = "NETCL_AUTOTUNE"
BUDGET_ENV = "NETCL_AUTOTUNE_BUDGET_S"
MODES = ("off", "on", "auto")
DEFAULT_BUDGET_S = 30.0
Gate = Literal["off", "defer", "budget", "go"]


@dataclass(frozen=True)
class TuneRecord:
    """One class tuned: what ran, how long each candidate took, what won.

    Attributes:
        family: the kernel family (``"matmul"``).
        shape_class: the class key the winner is stored under.
        query: the query's exact key, the shapes the candidates ran on.
        rule: the rule's pick (label); ``rule_s`` its best time (``None``: it failed or the
            budget ran out before it ran).
        winner: the fastest candidate's label and ``winner_s`` its best time (``None``: none
            ran, the rule decides).
        timings: ``(label, seconds or None)`` per candidate, ``None`` for a failure.
        complete: every candidate ran (only then is the winner stored).
    """

    family: str
    shape_class: tuple[Any, ...]
    query: tuple[Any, ...]
    rule: str
    rule_s: float | None
    winner: str | None
    winner_s: float | None
    timings: tuple[tuple[str, float | None], ...]
    complete: bool


class _Local(threading.local):
    depth = 0  # nested tuning runs in this thread


_local = _Local()
_lock = threading.Lock()
_spent = [0.0]
_override: list[tuple[str, float | None]] = []  # tuning() contexts, innermost last
_listeners: list[Callable[[TuneRecord], None]] = []  # tuning() contexts' on_record
_log: list[TuneRecord] = []
_MAX_LOG = 10000


def autotune_mode() -> str:
    """``off``, ``on`` or ``auto``: the innermost :func:`tuning` context's, else
    ``NETCL_AUTOTUNE``'s (default ``auto``).

    Raises:
        ValueError: ``NETCL_AUTOTUNE`` is set to anything else.
    """
    if _override:
        return _override[-1][0]
    return env_choice(MODE_ENV, MODES) or "auto"


def tuning_enabled(profile: ExtendedDeviceProfile) -> bool:
    """Whether selections on ``profile``'s device tune (``auto``: GPUs and accelerators)."""
    mode = autotune_mode()
    if mode == "auto":
        return profile.device_type != "cpu" and profile.vendor_family != "numpy"
    return mode == "on"


def budget_s() -> float:
    """The process's tuning budget in seconds (:func:`tuning`'s, else
    ``NETCL_AUTOTUNE_BUDGET_S``, default 30).

    Raises:
        ValueError: a negative or non-numeric ``NETCL_AUTOTUNE_BUDGET_S``.
    """
    if _override and _override[-1][1] is not None:
        return float(_override[-1][1])
    return env_number(BUDGET_ENV, DEFAULT_BUDGET_S, minimum=0.0)


def budget_left() -> float:
    """Seconds of tuning this process may still spend (never below 0)."""
    return max(0.0, budget_s() - _spent[0])


def spend(seconds: float) -> None:
    """Count ``seconds`` of tuning against the budget."""
    with _lock:
        _spent[0] += max(0.0, seconds)


def reset_budget() -> None:
    """Forget the time spent tuning so far (a new budget starts; for tests and ``netcl tune``).

    Examples:
        >>> reset_budget(); budget_left() == budget_s()
        True
    """
    with _lock:
        _spent[0] = 0.0


def gate(profile: ExtendedDeviceProfile) -> Gate:
    """Whether a selection on ``profile``'s device may tune now: ``"go"``; ``"off"`` (the
    policy says no); ``"defer"`` (a recorder is active or a tuning run is under way: decide
    by rule without caching); ``"budget"`` (spent)."""
    if not tuning_enabled(profile):
        return "off"
    if recording_state.recorder is not None or _local.depth:
        return "defer"
    if budget_left() <= 0.0:
        return "budget"
    return "go"


@contextlib.contextmanager
def tuning_run() -> Iterator[None]:
    """Mark this thread as tuning: selections inside never start another tuning run."""
    _local.depth += 1
    try:
        yield
    finally:
        _local.depth -= 1


def record(entry: TuneRecord) -> None:
    """Append ``entry`` to the process's tuning log (bounded: the oldest half is dropped)."""
    with _lock:
        if len(_log) >= _MAX_LOG:
            del _log[: _MAX_LOG // 2]
        _log.append(entry)
        listeners = list(_listeners)
    for listener in listeners:
        listener(entry)


def tune_log() -> list[TuneRecord]:
    """The classes tuned in this process so far, oldest first (a copy)."""
    with _lock:
        return list(_log)


@contextlib.contextmanager
def tuning(mode: str = "on", budget_s: float | None = None,
           on_record: Callable[[TuneRecord], None] | None = None
           ) -> Iterator[list[TuneRecord]]:
    """Tune with ``mode`` (and a fresh budget of ``budget_s`` seconds, if given) while active,
    whatever the environment says; yields the list of :class:`TuneRecord` made meanwhile,
    filled in when the context exits, and calls ``on_record`` with each as it is made.
    Process-wide (``netcl tune`` runs one model).

    Raises:
        ValueError: an unknown ``mode`` or a negative ``budget_s``.
    """
    if mode not in MODES:
        raise ValueError(f"tuning: mode must be one of {', '.join(MODES)}, got {mode!r}")
    if budget_s is not None and not budget_s >= 0.0:
        raise ValueError(f"tuning: budget_s must be >= 0, got {budget_s!r}")
    with _lock:
        start = len(_log)
        saved = _spent[0]
        if budget_s is not None:
            _spent[0] = 0.0
        _override.append((mode, budget_s))
        if on_record is not None:
            _listeners.append(on_record)
    made: list[TuneRecord] = []
    try:
        yield made
    finally:
        with _lock:
            _override.pop()
            if on_record is not None:
                _listeners.remove(on_record)
            made.extend(_log[start:])
            if budget_s is not None:
                _spent[0] = saved
