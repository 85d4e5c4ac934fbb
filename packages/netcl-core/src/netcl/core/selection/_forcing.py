"""Forcing a variant per family: :func:`force_variant` (thread-local) or
``NETCL_FORCE_<FAMILY>=<VARIANT_NAME>`` (for tests and benchmarks).

# NOTE [ Forcing variables read once per change ]
# Every kernel selection asks :func:`forced_variant`, so ``NETCL_FORCE_<FAMILY>`` is read
# through :func:`netcl.core.env.env_raw` (NOTE [ Variables read once per change ] there) and
# what it names is parsed only when its raw value, or the variant registry, changed since the
# last call.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from netcl.core.env import env_choice, env_raw

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
    env = _env_name(family)
    raw = env_raw(env)
    if raw is None:  # the common case: unset
        return None
    generation = registry_generation()
    known = _parsed.get(family)
    if known is not None and known[0] == raw and known[1] == generation:
        return known[2]
    forced = _parse(family, env)
    _parsed[family] = (raw, generation, forced)
    return forced


_names: dict[str, str] = {}  # family -> its variable's name
# family -> (the variable's raw value, the registry generation, the variant it names)
_parsed: dict[str, tuple[object, int, AnyVariant | None]] = {}


def _env_name(family: str) -> str:
    name = _names.get(family)
    if name is None:
        name = _names[family] = f"NETCL_FORCE_{family.upper()}"
    return name


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
