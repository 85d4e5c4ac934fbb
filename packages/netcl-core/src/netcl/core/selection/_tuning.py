"""What a family tunes: its shape classes, its candidate configs and how one is timed.

An op package registers a :class:`FamilyTuner` next to its family (netcl-ops: matmul and
conv2d). With tuning on (``netcl.core.autotune``), the first eager selection of a query whose
shape class has no winner yet times the tuner's candidates -- the rule's pick first, then a
bounded list of variants and knob changes around it -- on scratch tensors of the query's
shapes, and keeps the fastest as the class's :class:`Tuned` winner.

A candidate is a variant plus ``params``: overrides of the config the family's ``configure``
gives that variant for the query (:func:`apply_params`), as a sorted tuple of
``(name, JSON scalar)`` pairs so winners persist and compare by value.

Examples:
    >>> from netcl.core.selection import KernelConfig, KernelVariant
    >>> c = Candidate(KernelVariant.MATMUL_TILED, params_of({"tile_m": 32, "swizzle": 4}))
    >>> cfg = apply_params(KernelConfig(KernelVariant.MATMUL_TILED), c.params)
    >>> cfg.tile_m, cfg.extra["swizzle"], c.label
    (32, 4, 'MATMUL_TILED[swizzle=4,tile_m=32]')
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from netcl.core.device_profile import ExtendedDeviceProfile

from ._variants import AnyVariant, KernelConfig

__all__ = [
    "Bench",
    "Candidate",
    "FamilyTuner",
    "Params",
    "Tuned",
    "apply_params",
    "class_op",
    "params_of",
    "pow2_bucket",
    "register_tuner",
    "time_candidate",
    "tuner_for",
]

Params = tuple[tuple[str, Any], ...]
"""A candidate's overrides: sorted ``(name, value)`` pairs of JSON scalars."""

Bench = Callable[[KernelConfig], Callable[[int], None]]
"""config -> ``run(n)``: run that config ``n`` times back to back on scratch data, then block
until the device is done (one ``queue.finish()``)."""

SAMPLE_S = 0.002  # a timed sample lasts about this long: many short runs per sample
MAX_INNER = 64

# KernelConfig fields a candidate may set; every other name goes into ``extra``
_FIELDS = ("tile_m", "tile_n", "tile_k", "work_per_thread", "local_size_1d", "local_size_2d",
           "use_local_memory", "use_vectorization", "vector_width")
_TILE_FIELDS = ("tile_m", "tile_n", "tile_k", "work_per_thread")
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def params_of(overrides: Mapping[str, Any]) -> Params:
    """``overrides`` as a :data:`Params` (sorted; pairs of ints as tuples).

    Raises:
        TypeError: a name that is not a lower-case identifier, or a value that is not a JSON
            scalar or a pair of ints.

    Examples:
        >>> params_of({"tile_n": 64, "local_size_2d": [16, 8]})
        (('local_size_2d', (16, 8)), ('tile_n', 64))
    """
    out = []
    for name, value in sorted(overrides.items()):
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise TypeError(f"params_of: a parameter name is a lower-case identifier, "
                            f"got {name!r}")
        if isinstance(value, (list, tuple)):
            value = tuple(value)
            if len(value) != 2 or not all(isinstance(v, int) for v in value):
                raise TypeError(f"params_of: {name} must be a JSON scalar or a pair of ints, "
                                f"got {value!r}")
        elif value is not None and not isinstance(value, (str, int, float, bool)):
            raise TypeError(f"params_of: {name} must be a JSON scalar, got {value!r}")
        out.append((name, value))
    return tuple(out)


def apply_params(config: KernelConfig, params: Params) -> KernelConfig:
    """``config`` with ``params`` applied (a new config; ``config`` is not changed).

    Known :class:`KernelConfig` fields are replaced, other names set in ``extra``. Setting
    a tile field drops ``extra["by_layout"]`` (per-layout tile overrides of the rule's config
    would otherwise replace the candidate's tiles for some layouts); a value of ``None``
    removes an ``extra`` key.

    Examples:
        >>> from netcl.core.selection import KernelVariant
        >>> base = KernelConfig(KernelVariant.MATMUL_TILED, extra={"by_layout": {"nn": {}}})
        >>> apply_params(base, (("tile_k", 4),)).extra
        {}
    """
    if not params:
        return config
    fields: dict[str, Any] = {}
    extra = dict(config.extra)
    for name, value in params:
        if name in _FIELDS:
            fields[name] = tuple(value) if name == "local_size_2d" else value
        elif value is None:
            extra.pop(name, None)
        else:
            extra[name] = value
    if any(name in _TILE_FIELDS for name in fields):
        extra.pop("by_layout", None)
    return dataclasses.replace(config, **fields, extra=extra)


@dataclass(frozen=True)
class Candidate:
    """One configuration a tuner times: a variant and overrides of its configured params."""

    variant: AnyVariant
    params: Params = ()

    @property
    def label(self) -> str:
        """``VARIANT`` or ``VARIANT[name=value,...]``, as the tuning report prints it."""
        if not self.params:
            return self.variant.name
        inner = ",".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, tuple) else v}"
                         for k, v in self.params)
        return f"{self.variant.name}[{inner}]"


@dataclass(frozen=True)
class Tuned:
    """A stored winner: the variant and the params its config is built with."""

    variant: AnyVariant
    params: Params = ()


@dataclass(frozen=True)
class FamilyTuner:
    """How the selector tunes one family.

    Attributes:
        shape_class: query -> its class key (a tuple of JSON scalars and tuples); one
            winner serves every query of a class, so it should bucket sizes.
        candidates: (profile, query, the rule's variant) -> the configs to time, the rule's
            pick (no params) first; those that do not apply to the query are skipped.
        bench: (the selector's device, profile, query) -> a :data:`Bench` over scratch data
            of the query's shapes, or ``None`` where nothing can be timed (no OpenCL device).
        repeats: timed samples per candidate after one warm-up run; the best counts
            (:func:`time_candidate`).
    """

    shape_class: Callable[[Any], tuple[Any, ...]]
    candidates: Callable[[ExtendedDeviceProfile, Any, AnyVariant], Sequence[Candidate]]
    bench: Callable[[Any, ExtendedDeviceProfile, Any], Bench | None]
    repeats: int = 3


_lock = threading.Lock()
_tuners: dict[str, FamilyTuner] = {}


def register_tuner(family: str, tuner: FamilyTuner) -> FamilyTuner:
    """Make ``tuner`` tune ``family`` (replacing any); returns it.

    Raises:
        TypeError: ``tuner`` is not a :class:`FamilyTuner`.
    """
    if not isinstance(tuner, FamilyTuner):
        raise TypeError(f"register_tuner: expected a FamilyTuner for {family!r}, got {tuner!r}")
    with _lock:
        _tuners[family] = tuner
    return tuner


def tuner_for(family: str) -> FamilyTuner | None:
    """The tuner registered for ``family``, or ``None``.

    Examples:
        >>> tuner_for("no-such-family") is None
        True
    """
    return _tuners.get(family)


def class_op(family: str) -> str:
    """The op name a family's shape-class winners are stored under (``"matmul/class"``).

    Examples:
        >>> class_op("conv2d")
        'conv2d/class'
    """
    return f"{family}/class"


def pow2_bucket(n: int) -> int:
    """``n`` rounded up to a power of two (0 stays 0): the size buckets of shape classes.

    Examples:
        >>> [pow2_bucket(n) for n in (0, 1, 3, 64, 65, 1000)]
        [0, 1, 4, 64, 128, 1024]
    """
    return 0 if n <= 0 else 1 << (n - 1).bit_length()


def _timed(run: Callable[[int], None], n: int) -> float:
    start = time.perf_counter()
    run(n)
    return time.perf_counter() - start


def time_candidate(run: Callable[[int], None], repeats: int) -> float:
    """Seconds one run of ``run`` takes: after a warm-up run (builds, first-launch costs), the
    best of ``repeats`` samples, each ``inner`` runs back to back then one wait, ``inner``
    chosen so that a sample lasts about 2 ms (at most 64): short kernels are timed at their
    throughput, not at one launch-and-wait latency.

    Examples:
        >>> runs = []  # run(n) records n: a warm-up, a probe, then samples of many runs
        >>> time_candidate(runs.append, 3) < 0.01, runs[:2], max(runs) > 1
        (True, [1, 1], True)
    """
    run(1)
    once = _timed(run, 1)
    inner = max(1, min(MAX_INNER, int(SAMPLE_S / max(once, 1e-9))))
    if inner == 1:
        return min([once, *(_timed(run, 1) for _ in range(repeats - 1))])
    return min(_timed(run, inner) / inner for _ in range(repeats))
