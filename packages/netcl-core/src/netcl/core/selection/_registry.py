"""The registry of kernel families: each family's rule, its variants and their defaults.

An op package registers a family once (at import): a :class:`SelectionFamily` with the functions
that parse a ``select_*`` call into a query, key it, choose a variant by rule and configure it,
plus every variant's default parameters and, where a variant does not compute every query, its
``applies`` predicate. netcl-core holds no family of its own: ``family_named`` finds one that
is not registered yet through the ``netcl.kernel_families`` entry points of the installed
packages (netcl-ops declares its five there), so the spec's ``select_*`` names work when only
``netcl.core.kernel_selector`` has been imported.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from netcl.core.device_profile import ExtendedDeviceProfile

from ._variants import FAMILIES, AnyVariant, KernelConfig, KernelVariant, Variant

__all__ = [
    "ENTRY_POINT_GROUP",
    "Applies",
    "SelectionFamily",
    "KernelFamilyError",
    "default_config",
    "family_named",
    "register_family",
    "register_variant",
    "registry_generation",
    "variant_applies",
    "variant_named",
    "variant_names",
]

ENTRY_POINT_GROUP = "netcl.kernel_families"
# Who ships the built-in families, for the error raised when none is installed.
_PROVIDERS = dict.fromkeys(FAMILIES, "netcl-ops")

Q = TypeVar("Q")
Applies = Callable[[ExtendedDeviceProfile, Any], bool]


class KernelFamilyError(RuntimeError):
    """A kernel family (or variant) that no installed package registers."""


def _no_switches() -> tuple[Any, ...]:
    return ()


@dataclass(frozen=True)
class SelectionFamily(Generic[Q]):
    """One op family's selection policy over queries of type ``Q``.

    Attributes:
        name: the family (``"conv2d"``); its variants are named ``CONV2D_*``.
        parse: the ``select_*`` method's arguments -> a checked query (raises on bad input).
        key: query -> its tuned key, a tuple of JSON scalars and tuples (autotune's key).
        rule: (device profile, query) -> the variant to run; never one that does not apply.
        configure: (profile, variant, query) -> the variant's :class:`KernelConfig` for it.
        switches: the environment switches the rule reads, read per decision and part of the
            decision cache's key (so changing one takes effect at once).

    Examples:
        >>> fam = SelectionFamily("demo", parse=int, key=lambda n: (n,),
        ...                       rule=lambda p, n: Variant("DEMO_ANY"),
        ...                       configure=lambda p, v, n: KernelConfig(v))
        >>> fam.key(fam.parse("3"))
        (3,)
    """

    name: str
    parse: Callable[..., Q]
    key: Callable[[Q], tuple[Any, ...]]
    rule: Callable[[ExtendedDeviceProfile, Q], AnyVariant]
    configure: Callable[[ExtendedDeviceProfile, AnyVariant, Q], KernelConfig]
    switches: Callable[[], tuple[Any, ...]] = _no_switches


@dataclass(frozen=True)
class _Spec:
    variant: AnyVariant
    defaults: Mapping[str, Any]
    applies: Applies | None


_lock = threading.RLock()
_families: dict[str, SelectionFamily[Any]] = {}
_specs: dict[str, _Spec] = {}  # by variant name
_names: dict[str, tuple[str, ...]] = {}  # family -> its variants' names, in registration order
_tried: set[str] = set()  # families whose entry points were loaded
_generation = 0


def registry_generation() -> int:
    """A number that changes whenever a family or variant is (re-)registered.

    Examples:
        >>> isinstance(registry_generation(), int)
        True
    """
    return _generation


def _bump() -> None:
    global _generation
    _generation += 1


def register_family(
    family: SelectionFamily[Q],
    defaults: Mapping[AnyVariant, Mapping[str, Any]],
    applies: Mapping[AnyVariant, Applies] | None = None,
) -> SelectionFamily[Q]:
    """Register (or replace) ``family`` with its variants' default parameters.

    Args:
        family: the :class:`SelectionFamily`.
        defaults: every variant of the family -> its :class:`KernelConfig` fields before any
            device override (what :func:`default_config` and a forced selection return).
        applies: variant -> ``applies(profile, query)`` for variants that compute only some
            queries (Winograd: 3x3 kernels); a forced or tuned variant that does not apply
            gives way to the rule, and a rule returning one is an error.

    Raises:
        ValueError: a bad family name, no variants, or a variant of another family.

    Examples:
        >>> demo = SelectionFamily("demoa", parse=int, key=lambda n: (n,),
        ...                        rule=lambda p, n: Variant("DEMOA_ONE"),
        ...                        configure=lambda p, v, n: default_config(v))
        >>> _ = register_family(demo, {Variant("DEMOA_ONE"): {"tile_m": 8}})
        >>> default_config(variant_named("DEMOA_ONE")).tile_m
        8
    """
    name = family.name
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9]*", name):
        raise ValueError(f"register_family: a family name is lower-case letters and digits, "
                         f"got {name!r}")
    if not defaults:
        raise ValueError(f"register_family: family {name!r} has no variants")
    applies = dict(applies or {})
    with _lock:
        for variant in (*defaults, *applies):
            _check_member(name, variant)
        _families[name] = family
        _names[name] = ()
        for variant, params in defaults.items():
            _add(variant, params, applies.get(variant))
        _bump()
    return family


def register_variant(
    name: str | AnyVariant, defaults: Mapping[str, Any] | None = None,
    applies: Applies | None = None,
) -> AnyVariant:
    """Add (or replace) one variant of a registered family; returns it.

    A name that :class:`KernelVariant` lists gives that member; any other gives the one
    :class:`Variant` of that name (the same object on every call). The family's rule decides
    when it runs; it can be forced, autotuned and stored like a built-in variant.

    Raises:
        KernelFamilyError: its family is not registered.
        ValueError: a malformed name.

    Examples:
        >>> demo = SelectionFamily("demob", parse=int, key=lambda n: (n,),
        ...                        rule=lambda p, n: Variant("DEMOB_ONE"),
        ...                        configure=lambda p, v, n: default_config(v))
        >>> _ = register_family(demo, {Variant("DEMOB_ONE"): {}})
        >>> extra = register_variant("DEMOB_TWO", {"tile_k": 4})
        >>> extra.family, variant_names("demob")
        ('demob', ('DEMOB_ONE', 'DEMOB_TWO'))
    """
    text = name if isinstance(name, str) else name.name
    with _lock:
        known = _specs.get(text)
        if isinstance(name, (KernelVariant, Variant)):
            variant: AnyVariant = name
        elif text in KernelVariant.__members__:
            variant = KernelVariant[text]
        else:
            variant = known.variant if known is not None else Variant(text)
        family_named(variant.family)
        _add(variant, defaults or {}, applies)
        _bump()
    return variant


def _check_member(family: str, variant: Any) -> None:
    if not isinstance(variant, (KernelVariant, Variant)):
        raise TypeError(f"register_family: variants must be KernelVariant or Variant, got "
                        f"{variant!r}")
    if variant.family != family:
        raise ValueError(f"register_family: {variant.name} is not a {family} variant")


def _add(variant: AnyVariant, defaults: Mapping[str, Any], applies: Applies | None) -> None:
    fields = set(KernelConfig.__dataclass_fields__) - {"variant"}
    unknown = sorted(set(defaults) - fields)
    if unknown:
        raise ValueError(f"register_variant: {variant.name}: no KernelConfig field "
                         f"{', '.join(unknown)}")
    _specs[variant.name] = _Spec(variant, dict(defaults), applies)
    family = variant.family
    if variant.name not in _names.get(family, ()):
        _names[family] = (*_names.get(family, ()), variant.name)


def family_named(name: str) -> SelectionFamily[Any]:
    """The registered family ``name``, loading its ``netcl.kernel_families`` entry point
    the first time it is asked for.

    Raises:
        KernelFamilyError: no installed package registers it (the message names the package
            that provides a built-in family).
    """
    family = _families.get(name)
    if family is not None:
        return family
    _load_entry_points(name)
    family = _families.get(name)
    if family is not None:
        return family
    provider = _PROVIDERS.get(name)
    if provider is not None:
        raise KernelFamilyError(
            f"kernel family {name!r} is not registered: it is provided by {provider} "
            f"(pip install {provider}; importing it registers the family)")
    known = ", ".join(sorted(_families)) or "none"
    raise KernelFamilyError(
        f"kernel family {name!r} is not registered (registered: {known}); the package that "
        f"provides it registers it on import or through a {ENTRY_POINT_GROUP!r} entry point")


def _load_entry_points(name: str) -> None:
    with _lock:
        if name in _tried:
            return
        _tried.add(name)
        found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    for ep in found:
        try:
            ep.load()
        except Exception as exc:  # a broken provider: say which entry point it was
            raise KernelFamilyError(f"kernel family {name!r}: loading entry point "
                                    f"{ep.name} = {ep.value} failed: {exc!r}") from exc


def variant_names(family: str) -> tuple[str, ...]:
    """The names of ``family``'s registered variants, in registration order.

    Raises:
        KernelFamilyError: the family is not registered.
    """
    family_named(family)
    return _names[family]


def _spec(variant: AnyVariant) -> _Spec:
    spec = _specs.get(variant.name)
    if spec is None:
        family_named(variant.family)
        spec = _specs.get(variant.name)
    if spec is None or spec.variant != variant:
        raise KernelFamilyError(f"kernel variant {variant.name} is not registered in family "
                                f"{variant.family!r}")
    return spec


def variant_named(name: str) -> AnyVariant:
    """The variant called ``name``: a :class:`KernelVariant` member or a registered
    :class:`Variant`.

    Raises:
        KeyError: no such variant (``KeyError(name)``).

    Examples:
        >>> variant_named("MATMUL_TILED")
        <KernelVariant.MATMUL_TILED: 'matmul_tiled'>
    """
    if name in KernelVariant.__members__:
        return KernelVariant[name]
    spec = _specs.get(name)
    if spec is None and isinstance(name, str) and "_" in name:
        try:
            family_named(name.split("_", 1)[0].lower())
        except KernelFamilyError:
            pass
        spec = _specs.get(name)
    if spec is None:
        raise KeyError(name)
    return spec.variant


def default_config(variant: AnyVariant) -> KernelConfig:
    """A fresh config of ``variant`` with its registered default parameters (no device
    overrides).

    Raises:
        KernelFamilyError: the variant's family (or the variant) is not registered.
    """
    spec = _spec(variant)
    params = dict(spec.defaults)
    params["extra"] = dict(params.get("extra", {}))
    return KernelConfig(variant, **params)


def variant_applies(variant: AnyVariant, profile: ExtendedDeviceProfile, query: Any) -> bool:
    """Whether ``variant`` computes ``query`` on this device (true without a predicate).

    Raises:
        KernelFamilyError: the variant is not registered.
    """
    applies = _spec(variant).applies
    return applies is None or bool(applies(profile, query))
