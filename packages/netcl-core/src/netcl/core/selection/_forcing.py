"""Forcing a variant per family: :func:`force_variant` (thread-local) or
``NETCL_FORCE_<FAMILY>=<VARIANT_NAME>`` (for tests and benchmarks)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

from netcl.core.env import env_choice

from ._registry import variant_named, variant_names
from ._variants import AnyVariant, KernelVariant, Variant

__all__ = ["force_variant", "forced_variant"]

_forced = threading.local()


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
    previous: dict[str, AnyVariant] = getattr(_forced, "variants", {})
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
    variants: dict[str, AnyVariant] = getattr(_forced, "variants", {})
    if family in variants:
        return variants[family]
    env = f"NETCL_FORCE_{family.upper()}"
    if not os.environ.get(env, "").strip():  # the common case: no registry lookup
        return None
    valid = variant_names(family)
    try:
        choice = env_choice(env, valid)
    except ValueError:
        raise ValueError(
            f"{env}={os.environ[env]!r} names no {family} kernel; valid: {', '.join(valid)}"
        ) from None
    return None if choice is None else variant_named(choice.upper())
