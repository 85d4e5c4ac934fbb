"""Forcing a variant per family: :func:`force_variant` (thread-local) or
``NETCL_FORCE_<FAMILY>=<VARIANT_NAME>`` (for tests and benchmarks).

# NOTE [ Forcing variables read once per change ]
# Every kernel selection asks :func:`forced_variant`, so reading ``NETCL_FORCE_<FAMILY>``
# through ``os.environ.get`` cost 2-4 us a selection (5.6 us measured on the 2-core VM: a
# missing key raises and catches KeyError inside ``os.environ``, and str keys are encoded each
# time). The variable's raw value is read straight from the mapping ``os.environ`` keeps
# (``os.environ._data``, under the key ``os.environ.encodekey`` makes; 0.14 us), and what it
# names is parsed only when that raw value, or the variant registry, changed since the last
# call. ``os.environ[...] = ...`` and pytest's ``monkeypatch.setenv`` write through that
# mapping, so a test that sets a variable is seen at the next selection; a variable changed
# behind Python's back (a C library's ``setenv``) is not, as ``os.environ`` itself never saw
# it. Where the mapping is not there (another Python), ``os.environ.get`` is read each call.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from netcl.core.env import env_choice

from ._registry import registry_generation, variant_named, variant_names
from ._variants import AnyVariant, KernelVariant, Variant

__all__ = ["force_variant", "forced_variant"]

class _Forced(threading.local):
    """The variants :func:`force_variant` forces in this thread; the class attribute is
    every thread's start (read without a per-call AttributeError: 1.4 us on the 2-core VM),
    never mutated: ``force_variant`` assigns new dicts."""

    variants: dict[str, AnyVariant] = {}  # noqa: RUF012 (read-only default; see above)


_forced = _Forced()


@contextlib.contextmanager
def force_variant(*variants: AnyVariant) -> Iterator[None]:
    """Make ``select_*`` return these variants (one per family) in this thread while active.

    The forced config carries the variant's default parameters (``default_config``), fitted
    to the device. It wins over autotuned winners and rules, and over ``NETCL_FORCE_<FAMILY>``,
    wherever the variant applies to the query (a forced Winograd on a 5x5 kernel gives way to
    the family's rule).

    Raises:
        TypeError: an argument is not a :class:`KernelVariant` or :class:`Variant`.
        ValueError: two variants of one family.

    Examples:
        >>> with force_variant(KernelVariant.REDUCTION_WORKGROUP):
        ...     forced_variant("reduction").name
        'REDUCTION_WORKGROUP'
    """
    chosen: dict[str, AnyVariant] = {}
    for v in variants:
        if not isinstance(v, (KernelVariant, Variant)):
            raise TypeError(f"force_variant: expected KernelVariant members or registered "
                            f"Variants, got {v!r}")
        if v.family in chosen:
            raise ValueError(
                f"force_variant: one variant per family, got {chosen[v.family].name} and {v.name}"
            )
        chosen[v.family] = v
    previous = _forced.variants
    _forced.variants = {**previous, **chosen}
    try:
        yield
    finally:
        _forced.variants = previous


def forced_variant(family: str) -> AnyVariant | None:
    """The variant forced for ``family`` in this thread, else by ``NETCL_FORCE_<FAMILY>``.

    Raises:
        ValueError: the variable names no variant of the family.
        KernelFamilyError: the variable is set and the family is not registered.
    """
    variants = _forced.variants
    if variants and family in variants:
        return variants[family]
    env, key = _env_key(family)
    data = _ENVIRON_DATA
    # without that mapping here, or with os.environ replaced, the documented read
    raw = data.get(key) if data is not None and os.environ is _ENVIRON else os.environ.get(env)
    if raw is None:  # the common case: unset
        return None
    generation = registry_generation()
    known = _parsed.get(family)
    if known is not None and known[0] == raw and known[1] == generation:
        return known[2]
    forced = _parse(family, env)
    _parsed[family] = (raw, generation, forced)
    return forced


# os.environ and the mapping behind it (NOTE [ Forcing variables read once per change ]), or
# None where it has none
_ENVIRON: Any = os.environ
_ENVIRON_DATA: dict[Any, Any] | None = getattr(_ENVIRON, "_data", None)
if not isinstance(_ENVIRON_DATA, dict) or not callable(getattr(_ENVIRON, "encodekey", None)):
    _ENVIRON_DATA = None
_keys: dict[str, tuple[str, Any]] = {}  # family -> (variable name, its key in _ENVIRON_DATA)
# family -> (the variable's raw value, the registry generation, the variant it names)
_parsed: dict[str, tuple[Any, int, AnyVariant | None]] = {}


def _env_key(family: str) -> tuple[str, Any]:
    known = _keys.get(family)
    if known is None:
        env = f"NETCL_FORCE_{family.upper()}"
        key = _ENVIRON.encodekey(env) if _ENVIRON_DATA is not None else env
        known = _keys[family] = (env, key)
    return known


def _parse(family: str, env: str) -> AnyVariant | None:
    """The variant ``env`` names for ``family`` (``None`` when blank).

    Raises:
        ValueError: the variable names no variant of the family.
        KernelFamilyError: the family is not registered.
    """
    if not os.environ.get(env, "").strip():
        return None
    valid = variant_names(family)
    try:
        choice = env_choice(env, valid)
    except ValueError:
        raise ValueError(
            f"{env}={os.environ[env]!r} names no {family} kernel; valid: {', '.join(valid)}"
        ) from None
    return None if choice is None else variant_named(choice.upper())
