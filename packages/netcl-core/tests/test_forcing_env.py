"""``NETCL_FORCE_<FAMILY>`` read once per change (NOTE [ Forcing variables read once per
change ] in netcl.core.selection._forcing): every value a test sets with monkeypatch, or
with ``os.environ`` directly, is seen at the next call; a bad value raises on every call; a
re-registered variant is looked up again; ``force_variant`` stays per thread."""

from __future__ import annotations

import os
import threading

import pytest

from netcl.core.selection import (
    KernelVariant,
    SelectionFamily,
    Variant,
    default_config,
    force_variant,
    forced_variant,
    register_family,
)

ENV = "NETCL_FORCE_FORCINGENV"
# a family of this test's own: netcl-core alone registers none (netcl-ops registers the real ones)
ALPHA, BETA, GAMMA = Variant("FORCINGENV_ALPHA"), Variant("FORCINGENV_BETA"), Variant(
    "FORCINGENV_GAMMA")


@pytest.fixture(autouse=True)
def _family(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    register_family(
        SelectionFamily("forcingenv", parse=int, key=lambda n: (n,),
                        rule=lambda profile, n: ALPHA,
                        configure=lambda profile, v, n: default_config(v)),
        {v: {"tile_m": i + 1} for i, v in enumerate((ALPHA, BETA, GAMMA))})


def test_every_change_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    assert forced_variant("forcingenv") is None
    for name, variant in [("forcingenv_alpha", ALPHA), (" FORCINGENV_BETA ", BETA),
                          ("forcingenv_gamma", GAMMA)]:
        monkeypatch.setenv(ENV, name)
        for _ in range(2):  # the second call answers from the cache
            assert forced_variant("forcingenv") is variant
    monkeypatch.setenv(ENV, "  ")
    assert forced_variant("forcingenv") is None
    monkeypatch.delenv(ENV)
    assert forced_variant("forcingenv") is None
    os.environ[ENV] = "forcingenv_alpha"  # not through monkeypatch: seen as well
    try:
        assert forced_variant("forcingenv") is ALPHA
    finally:
        del os.environ[ENV]
    assert forced_variant("forcingenv") is None


def test_a_bad_value_raises_on_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "forcingenv_alpha")
    assert forced_variant("forcingenv") is ALPHA
    monkeypatch.setenv(ENV, "matmul_tiled")
    for _ in range(2):
        with pytest.raises(ValueError, match=r"NETCL_FORCE_FORCINGENV='matmul_tiled' names no "
                                             r"forcingenv kernel"):
            forced_variant("forcingenv")
    monkeypatch.setenv(ENV, "forcingenv_alpha")
    assert forced_variant("forcingenv") is ALPHA


def _toy(*variants: Variant) -> None:
    """(Re-)register the family ``forcingtoy`` with ``variants``."""
    first = variants[0]
    register_family(
        SelectionFamily("forcingtoy", parse=int, key=lambda n: (n,),
                        rule=lambda profile, n: first,
                        configure=lambda profile, v, n: default_config(v)),
        {v: {"tile_m": i + 1} for i, v in enumerate(variants)})


def test_the_registry_changing_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = Variant("FORCINGTOY_ONE"), Variant("FORCINGTOY_TWO")
    _toy(one)
    monkeypatch.setenv("NETCL_FORCE_FORCINGTOY", "forcingtoy_two")
    with pytest.raises(ValueError, match=r"names no forcingtoy kernel; valid: FORCINGTOY_ONE$"):
        forced_variant("forcingtoy")
    _toy(one, two)  # the same value names a variant now
    assert forced_variant("forcingtoy") is two
    _toy(one)  # and no longer: not answered from the cache
    with pytest.raises(ValueError, match="names no forcingtoy kernel"):
        forced_variant("forcingtoy")


def test_force_variant_is_per_thread() -> None:
    seen: list[object] = []
    with force_variant(KernelVariant.REDUCTION_WORKGROUP):
        thread = threading.Thread(target=lambda: seen.append(forced_variant("reduction")))
        thread.start()
        thread.join()
        assert forced_variant("reduction") is KernelVariant.REDUCTION_WORKGROUP
    assert seen == [None] and forced_variant("reduction") is None
