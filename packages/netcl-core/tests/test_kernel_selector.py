"""The generic KernelSelector: variants, the family registry, forced -> tuned -> rule with
``applies``, the decision cache, device fitting, autotune and its per-device file.

Every decision here is of a family this test registers itself: netcl-core holds no family
rule, and this suite runs with netcl-core alone (netcl-ops tests the real rules).
"""

from __future__ import annotations

import dataclasses
import doctest
import json
import re
import threading
import time
import types
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from netcl.core import kernel_selector, selection
from netcl.core._paths import write_entry
from netcl.core.capabilities import numpy_profile as plain
from netcl.core.device_profile import ExtendedDeviceProfile, extended_profile
from netcl.core.env import env_flag
from netcl.core.kernel_selector import (
    KernelConfig,
    KernelFamilyError,
    KernelSelector,
    KernelVariant,
    SelectionFamily,
    Variant,
    default_config,
    force_variant,
    get_kernel_selector,
    register_family,
    register_variant,
)
from netcl.core.kernels.primitives import KernelSpec
from netcl.core.selection import _forcing, _registry, _variants, args
from netcl.core.testing import available_devices

V = KernelVariant


# --- a family of this test's own ------------------------------------------------------------


class Toy(NamedTuple):
    """The toy family's query: ``n`` items of ``dtype``; the tuple is its tuned key."""

    n: int
    dtype: str = "float32"


SMALL, LARGE, EVEN = Variant("TOY_SMALL"), Variant("TOY_LARGE"), Variant("TOY_EVEN")
rule_calls: list[Toy] = []


def _toy_parse(n: Any, dtype: Any = "float32") -> Toy:
    return Toy(args.int_arg("select_toy", "n", n, 0), args.float_dtype_arg("select_toy", dtype))


def _toy_rule(profile: ExtendedDeviceProfile, q: Toy) -> Variant:
    rule_calls.append(q)
    if env_flag("NETCL_TOY_EVEN", False) and q.n % 2 == 0:
        return EVEN
    return LARGE if q.n > 100 else SMALL


def _toy_configure(profile: ExtendedDeviceProfile, v: Any, q: Toy) -> KernelConfig:
    cfg = default_config(v)
    cfg.extra["dtype"] = q.dtype
    return cfg


TOY = register_family(
    SelectionFamily("toy", parse=_toy_parse, key=tuple, rule=_toy_rule, configure=_toy_configure,
                    switches=lambda: (env_flag("NETCL_TOY_EVEN", False),)),
    {SMALL: {"tile_m": 1, "tile_n": 1, "tile_k": 1, "use_local_memory": False},
     LARGE: {"tile_m": 64, "tile_n": 64, "tile_k": 64, "local_size_2d": (32, 32)},
     EVEN: {"extra": {"even": True}}},
    applies={EVEN: lambda profile, q: q.n % 2 == 0},
)


def numpy_profile() -> ExtendedDeviceProfile:
    return extended_profile(None)


def gpu(**kw: Any) -> ExtendedDeviceProfile:
    """A GPU profile (no driver needed): 1024 work-items, 48 KiB local memory by default."""
    base = {"name": "Test GPU", "vendor": "Test Vendor", "device_type": "gpu",
            "vendor_family": "other", "architecture": "unknown", "local_mem_size": 49152,
            "max_work_group_size": 1024, "driver_version": "1.0", **kw}
    return dataclasses.replace(numpy_profile(), **base)


ENV = ["NETCL_KERNEL_STRATEGY", "NETCL_TOY_EVEN", "NETCL_FORCE_TOY"]


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path / "cache"))
    rule_calls.clear()


def sel(profile: ExtendedDeviceProfile | None = None) -> KernelSelector:
    return KernelSelector(profile or gpu())


# --- variants and configs ------------------------------------------------------------------


def test_builtin_variants_and_families() -> None:
    assert [v.name for v in KernelVariant] == [
        "MATMUL_NAIVE", "MATMUL_TILED", "MATMUL_REGISTER_TILED", "MATMUL_VECTORIZED",
        "CONV2D_NAIVE", "CONV2D_IM2COL", "CONV2D_IMPLICIT_GEMM", "CONV2D_TILED_LOCAL",
        "CONV2D_WINOGRAD", "ELEMENTWISE_SCALAR", "ELEMENTWISE_VECTORIZED",
        "REDUCTION_SEQUENTIAL", "REDUCTION_PARALLEL", "REDUCTION_WORKGROUP",
        "BATCHNORM_NAIVE", "BATCHNORM_FUSED",
    ]
    assert [v.family for v in (V.MATMUL_VECTORIZED, V.CONV2D_IM2COL, V.ELEMENTWISE_SCALAR,
                               V.REDUCTION_WORKGROUP, V.BATCHNORM_FUSED)] == [
        "matmul", "conv2d", "elementwise", "reduction", "batchnorm"]
    assert kernel_selector.FAMILIES == ("matmul", "conv2d", "elementwise", "reduction",
                                        "batchnorm")


def test_extra_variants_are_named_by_family() -> None:
    v = Variant("CONV2D_DIRECT_5X5")
    assert (v.family, v.value, v == Variant("CONV2D_DIRECT_5X5")) == (
        "conv2d", "conv2d_direct_5x5", True)
    for bad in ("conv2d_lower", "NOFAMILY", "CONV2D_", "_X", ""):
        with pytest.raises(ValueError, match=r"Variant: a name is <FAMILY>_<KIND> in upper"):
            Variant(bad)
    with pytest.raises(ValueError, match=r"MATMUL_TILED is a built-in KernelVariant"):
        Variant("MATMUL_TILED")


def test_kernel_config_defaults_match_the_page() -> None:
    cfg = KernelConfig(V.MATMUL_TILED)
    assert (cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.work_per_thread, cfg.local_size_1d,
            cfg.local_size_2d, cfg.use_local_memory, cfg.use_vectorization, cfg.vector_width,
            cfg.extra) == (32, 32, 8, 4, 256, (16, 16), True, True, 4, {})
    assert KernelConfig(V.MATMUL_TILED).extra is not cfg.extra


def test_kernelspec_reexport() -> None:
    assert kernel_selector.KernelSpec is KernelSpec


# --- the registry --------------------------------------------------------------------------


def test_default_config_is_fresh_per_call() -> None:
    a, b = default_config(EVEN), default_config(EVEN)
    assert a == b and a.extra == {"even": True} and a.extra is not b.extra
    assert (default_config(LARGE).tile_m, default_config(SMALL).use_local_memory) == (64, False)


def test_register_variant_adds_one_to_a_family(monkeypatch: pytest.MonkeyPatch) -> None:
    """An op package adds a variant KernelVariant does not list: forced, selected, stored."""
    def below_1000(profile: ExtendedDeviceProfile, q: Toy) -> bool:
        return q.n < 1000

    extra = register_variant("TOY_EXTRA", {"tile_m": 7}, applies=below_1000)
    assert register_variant("TOY_EXTRA", {"tile_m": 7}, below_1000) is extra  # one per name
    assert isinstance(extra, Variant) and "TOY_EXTRA" in selection.variant_names("toy")
    s = sel()
    with force_variant(extra):
        assert s.select(TOY, Toy(10)).tile_m == 7
        assert s.select(TOY, Toy(5000)).variant is LARGE  # does not apply: the rule
    monkeypatch.setenv("NETCL_FORCE_TOY", "toy_extra")
    assert s.select("toy", Toy(3)).variant is extra
    monkeypatch.delenv("NETCL_FORCE_TOY")
    s.autotune("toy", (4, "float32"), {extra: lambda: None})
    assert sel().select(TOY, Toy(4)).variant is extra  # read back by name from the file


def test_register_variant_of_an_unknown_family() -> None:
    with pytest.raises(KernelFamilyError, match=r"kernel family 'nosuch' is not registered"):
        register_variant("NOSUCH_ONE")


@pytest.mark.parametrize(("name", "defaults", "error", "match"), [
    ("Bad-Name", {Variant("BAD_ONE"): {}}, ValueError, r"a family name is lower-case"),
    ("empty", {}, ValueError, r"family 'empty' has no variants"),
    ("other", {SMALL: {}}, ValueError, r"TOY_SMALL is not a other variant"),
    ("typo", {Variant("TYPO_A"): {"tile_q": 3}}, ValueError,
     r"TYPO_A: no KernelConfig field tile_q"),
    ("kinds", {"KINDS_A": {}}, TypeError, r"variants must be KernelVariant or Variant"),
])
def test_register_family_bad_arguments(name: str, defaults: Any, error: type[Exception],
                                       match: str) -> None:
    fam = SelectionFamily(name, parse=int, key=lambda n: (n,), rule=lambda p, n: SMALL,
                          configure=lambda p, v, n: default_config(v))
    with pytest.raises(error, match=match):
        register_family(fam, defaults)


def test_missing_family_names_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without netcl-ops the spec's select_* raise a typed error naming the package."""
    monkeypatch.setattr(_registry, "_families", {"toy": TOY})
    monkeypatch.setattr(_registry, "_tried", set())
    monkeypatch.setattr(_registry, "entry_points", lambda group: [])
    s = sel()
    with pytest.raises(KernelFamilyError, match=r"kernel family 'matmul' is not registered: it "
                                                r"is provided by netcl-ops \(pip install"):
        s.select_matmul_kernel(4, 4, 4)
    with pytest.raises(KernelFamilyError, match=r"'conv2d' .* provided by netcl-ops"):
        kernel_selector.select_conv2d_config(1, 1, 3, 3, 1, 1, 1)
    with pytest.raises(KernelFamilyError, match=r"'custom' is not registered \(registered: "
                                                r"toy\); .*'netcl.kernel_families' entry point"):
        s.select("custom", 1)


def test_family_loads_through_its_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[str] = []
    only = Variant("EPFAM_ONLY")

    def load() -> None:
        loads.append("epfam")
        register_family(SelectionFamily("epfam", parse=int, key=lambda n: (n,),
                                        rule=lambda p, n: only,
                                        configure=lambda p, v, n: default_config(v)), {only: {}})

    ep = types.SimpleNamespace(name="epfam", value="pkg.module", load=load)
    monkeypatch.setattr(_registry, "_tried", set())
    monkeypatch.setattr(_registry, "entry_points", lambda group: [ep] if group == (
        selection.ENTRY_POINT_GROUP) else [])
    assert sel().select("epfam", 3).variant is only
    assert sel().select("epfam", 4).variant is only and loads == ["epfam"]

    def broken() -> None:
        raise ImportError("no module named pkg")

    monkeypatch.setattr(_registry, "entry_points", lambda group: [
        types.SimpleNamespace(name="brokenfam", value="pkg.module", load=broken)])
    with pytest.raises(KernelFamilyError, match=r"'brokenfam': loading entry point brokenfam = "
                                                r"pkg.module failed: ImportError"):
        sel().select("brokenfam", 1)


# --- rules, caching, device fitting -----------------------------------------------------------


def test_rule_decides_and_configures() -> None:
    s = sel()
    assert s.select(TOY, Toy(5)).variant is SMALL
    cfg = s.select("toy", TOY.parse(500, "half"))
    assert (cfg.variant, cfg.tile_m, cfg.extra) == (LARGE, 64, {"dtype": "float16"})


def test_decisions_are_cached() -> None:
    s = sel()
    first = s.select(TOY, Toy(300))
    assert s.select(TOY, Toy(300)) is first and len(rule_calls) == 1
    assert s.select(TOY, Toy(300, "float16")) is not first
    s.clear_cache()
    again = s.select(TOY, Toy(300))
    assert again is not first and again == first


def test_switches_are_read_per_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    s = sel()
    assert s.select(TOY, Toy(4)).variant is SMALL
    monkeypatch.setenv("NETCL_TOY_EVEN", "1")  # not cached over: part of the key
    assert s.select(TOY, Toy(4)).variant is EVEN


def test_rule_returning_a_variant_that_does_not_apply_is_an_error() -> None:
    liar = register_family(
        SelectionFamily("liar", parse=int, key=lambda n: (n,), rule=lambda p, n: Variant("LIAR_B"),
                        configure=lambda p, v, n: default_config(v)),
        {Variant("LIAR_A"): {}, Variant("LIAR_B"): {}},
        applies={Variant("LIAR_B"): lambda p, n: n > 0})
    assert sel().select(liar, 1).variant.name == "LIAR_B"
    with pytest.raises(KernelFamilyError, match=r"the liar rule chose LIAR_B, which does not "
                                                r"apply to 0 on Test GPU"):
        sel().select(liar, 0)


@pytest.mark.parametrize(("profile", "expected"), [
    # 64 work-items: the 32x32 work-group halves to 8x8 and the tiles it covers with it
    (gpu(max_work_group_size=64), (16, 16, 64, (8, 8), 64)),
    # 4 KiB local memory: tile_k halves until (tile_m + tile_n) * tile_k * 4 fits
    (gpu(local_mem_size=4096), (64, 64, 8, (32, 32), 256)),
    # the NumPy backend: no work-groups to fit
    (numpy_profile(), (64, 64, 64, (32, 32), 256)),
])
def test_configs_fit_the_device(profile: ExtendedDeviceProfile, expected: tuple[Any, ...]) -> None:
    cfg = sel(profile).select(TOY, Toy(500))
    assert (cfg.tile_m, cfg.tile_n, cfg.tile_k, cfg.local_size_2d, cfg.local_size_1d) == expected


def test_local_memory_fit_follows_the_dtype() -> None:
    s = sel(gpu(local_mem_size=8192))
    assert s.select(TOY, Toy(500, "float64")).tile_k == 8  # 128 * 8 * 8 = 8 KiB
    assert s.select(TOY, Toy(500, "float32")).tile_k == 16


def test_kernel_strategy_is_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    s = sel()
    s.select(TOY, Toy(500))
    monkeypatch.setenv("NETCL_KERNEL_STRATEGY", "portable")
    s.select(TOY, Toy(500))
    assert len(rule_calls) == 2


def test_toy_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"select_toy: n must be >= 0, got -1"):
        sel().select(TOY, TOY.parse(-1))
    with pytest.raises(TypeError, match=r"select_toy: dtype must be one of"):
        TOY.parse(3, "int32")


# --- forcing ------------------------------------------------------------------------------


def test_force_variant_context() -> None:
    s = sel()
    with force_variant(LARGE):
        cfg = s.select(TOY, Toy(1))
        assert (cfg.variant, cfg.extra) == (LARGE, {})  # the variant's defaults, no configure
        with force_variant(SMALL):
            assert s.select(TOY, Toy(1000)).variant is SMALL
        assert s.select(TOY, Toy(1)).variant is LARGE
    assert s.select(TOY, Toy(1)).variant is SMALL  # the cache is not polluted


def test_forced_variant_that_does_not_apply_gives_way() -> None:
    with force_variant(EVEN):
        assert sel().select(TOY, Toy(4)).variant is EVEN
        assert sel().select(TOY, Toy(3)).variant is SMALL


def test_forced_config_still_fits_the_device() -> None:
    with force_variant(LARGE):
        cfg = sel(gpu(max_work_group_size=64)).select(TOY, Toy(1))
    assert (cfg.tile_m, cfg.local_size_2d) == (16, (8, 8))


def test_force_variant_is_thread_local() -> None:
    s = sel()
    seen: list[Any] = []
    with force_variant(LARGE):
        t = threading.Thread(target=lambda: seen.append(s.select(TOY, Toy(1)).variant))
        t.start()
        t.join()
    assert seen == [SMALL]


def test_force_variant_bad_arguments() -> None:
    with pytest.raises(ValueError, match=r"one variant per family, got TOY_SMALL and TOY_LARGE"):
        with force_variant(SMALL, LARGE):
            pass
    with pytest.raises(TypeError, match=r"force_variant: expected KernelVariant"):
        with force_variant("TOY_SMALL"):  # type: ignore[arg-type]
            pass


def test_force_env(monkeypatch: pytest.MonkeyPatch) -> None:
    s = sel()
    monkeypatch.setenv("NETCL_FORCE_TOY", "toy_large")
    assert s.select(TOY, Toy(1)).variant is LARGE
    with force_variant(SMALL):  # the context manager wins over the environment
        assert s.select(TOY, Toy(1000)).variant is SMALL
    monkeypatch.setenv("NETCL_FORCE_TOY", "MATMUL_TILED")
    with pytest.raises(ValueError, match=r"NETCL_FORCE_TOY='MATMUL_TILED' names no toy kernel; "
                                         r"valid: TOY_SMALL, TOY_LARGE, TOY_EVEN"):
        s.select(TOY, Toy(1))


def test_epoch_changes_with_forcing_tuning_and_clearing() -> None:
    s = sel()
    first = s.epoch("toy")
    with force_variant(LARGE):
        assert s.epoch("toy") != first
    assert s.epoch("toy") == first
    s.autotune("toy", (1, "float32"), {SMALL: lambda: None})
    second = s.epoch("toy")
    s.clear_cache()
    assert len({first, second, s.epoch("toy")}) == 3


# --- autotune -----------------------------------------------------------------------------


# 30 ms against nothing: a loaded machine (two cores, many jobs) can stall a call for a few ms
def _candidates(calls: dict[str, int], slow: float = 0.03) -> dict[Variant, Any]:
    def make(name: str, seconds: float) -> Any:
        def run() -> None:
            calls[name] = calls.get(name, 0) + 1
            time.sleep(seconds)
        return run

    return {LARGE: make("large", slow), SMALL: make("small", 0.0), EVEN: make("even", slow)}


def _tune_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "autotune").glob("*"))


def _read_tune_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, winners document) of a winners file: a cache entry whose content is JSON."""
    magic, header, content = path.read_bytes().split(b"\n", 2)
    assert magic == b"netcl-cache-entry 1"
    return json.loads(header), json.loads(content)


def test_autotune_picks_fastest_and_persists(tmp_path: Path) -> None:
    p = gpu(driver_version="580.159.04")
    calls: dict[str, int] = {}
    winner = sel(p).autotune("toy", (2048, "float32"), _candidates(calls), repeats=2)
    assert winner is SMALL
    assert calls == {"large": 3, "small": 3, "even": 3}  # one warm-up + repeats each
    [path] = _tune_files(tmp_path)  # written atomically: no temp file left behind
    header, data = _read_tune_file(path)
    assert data["winners"] == [{"op": "toy", "key": [2048, "float32"], "variant": "TOY_SMALL"}]
    assert header["key"] == {"store": "autotune", "format": "3", "vendor": "Test Vendor",
                             "name": "Test GPU", "driver_version": "580.159.04"}
    fresh = sel(p)  # a new process: reads the device's file
    assert fresh.lookup_tuned("toy", (2048, "float32")) is SMALL
    assert fresh.select(TOY, Toy(2048)).variant is SMALL
    assert fresh.select(TOY, Toy(2048, "float16")).variant is LARGE
    assert sel(gpu(name="Other GPU")).lookup_tuned("toy", (2048, "float32")) is None


def test_tuned_winner_that_does_not_apply_gives_way() -> None:
    s = sel()
    s.autotune("toy", (3, "float32"), {EVEN: lambda: None})
    assert s.select(TOY, Toy(3)).variant is SMALL


def test_autotune_overrides_cached_decision() -> None:
    s = sel()
    assert s.select(TOY, Toy(4096)).variant is LARGE
    s.autotune("toy", (4096, "float32"), {SMALL: lambda: None})
    assert s.select(TOY, Toy(4096)).variant is SMALL
    with force_variant(LARGE):  # forcing beats a tuned winner
        assert s.select(TOY, Toy(4096)).variant is LARGE


def test_autotune_reuses_known_winner_unless_retune() -> None:
    s = sel()
    calls: dict[str, int] = {}
    s.autotune("custom-op", ("k", 1, 2.5, None, True, (3, 4)), _candidates(calls), repeats=1)
    calls.clear()
    again = sel().autotune("custom-op", ("k", 1, 2.5, None, True, (3, 4)), _candidates(calls))
    assert (again, calls) == (SMALL, {})
    assert sel().autotune("custom-op", ("k", 1, 2.5, None, True, (3, 4)),
                          _candidates(calls), repeats=1, retune=True) is SMALL
    assert calls == {"large": 2, "small": 2, "even": 2}


def test_autotune_stores_builtin_variants_by_name() -> None:
    sel().autotune("matmul", (1, 1, 1, "float32"), {V.MATMUL_TILED: lambda: None})
    assert sel().lookup_tuned("matmul", (1, 1, 1, "float32")) is V.MATMUL_TILED


def test_autotune_merges_winners_of_other_selectors() -> None:
    a, b = sel(), sel()  # two processes on one device
    a.lookup_tuned("toy", ())
    b.lookup_tuned("toy", ())
    a.autotune("toy", (1, "float32"), {LARGE: lambda: None})
    b.autotune("toy", (2, "float32"), {SMALL: lambda: None})
    fresh = sel()
    assert fresh.lookup_tuned("toy", (1, "float32")) is LARGE
    assert fresh.lookup_tuned("toy", (2, "float32")) is SMALL


def test_autotune_skips_failing_candidates() -> None:
    def broken() -> None:
        raise RuntimeError("build failed")

    s = sel()
    with pytest.warns(RuntimeWarning, match=r"candidate TOY_LARGE failed: .*build failed"):
        assert s.autotune("toy", (9, "float32"),
                          {LARGE: broken, SMALL: lambda: None}) is SMALL
    with pytest.raises(RuntimeError, match=r"every candidate for op 'toy'"), \
            pytest.warns(RuntimeWarning):
        s.autotune("toy", (8, "float32"), {LARGE: broken})


def _plant(path: Path, how: str) -> None:
    """Damage a sound winners file the way a crash, a disk or a careless copy would."""
    data = path.read_bytes()
    if how == "truncate-half":
        path.write_bytes(data[: len(data) // 2])
    elif how == "truncate-10":
        path.write_bytes(data[:-10])
    elif how == "flip-byte":
        path.write_bytes(data[:-20] + bytes([data[-20] ^ 0x01]) + data[-19:])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "zeros":  # what a power cut after an unsynced write can leave
        path.write_bytes(bytes(len(data)))
    elif how == "plain-json":  # netcl 0.1's format, or any hand-made file
        path.write_text('{"winners": [{"op": "toy", "key": [1, "float32"], '
                        '"variant": "TOY_LARGE"}]}')
    elif how == "swap":  # another device's sound file copied over this one
        other = sel(gpu(name="Other GPU"))
        other.autotune("toy", (1, "float32"), {EVEN: lambda: None})
        path.write_bytes(other.tuned_path().read_bytes())
    elif how == "wrong-key":  # a sound entry written for another driver version
        key = {**json.loads(data.split(b"\n")[1])["key"], "driver_version": "0.9"}
        write_entry(path, key, data.split(b"\n", 2)[2])
    elif how == "unknown-variant":  # sound framing, a variant this netcl does not know
        header = json.loads(data.split(b"\n")[1])
        write_entry(path, header["key"], json.dumps(
            {"winners": [{"op": "toy", "key": [1], "variant": "NOPE"}]}).encode())
    else:
        raise ValueError(how)


@pytest.mark.parametrize(("how", "reason"), [
    ("truncate-half", r"truncated inside the header|truncated: \d+ bytes of content"),
    ("truncate-10", r"truncated: \d+ bytes of content, the header says \d+"),
    ("flip-byte", r"checksum mismatch"),
    ("empty", r"empty file"),
    ("zeros", r"not a netcl cache entry"),
    ("plain-json", r"not a netcl cache entry"),
    ("swap", r"built for another key: \w+ is '[^']+', expected '[^']+'"),
    ("wrong-key", r"built for another key: driver_version is '0.9', expected '1.0'"),
    ("unknown-variant", r"unknown winners \(KeyError\('NOPE'\)\)"),
])
def test_bad_tune_file_is_discarded_with_one_warning(how: str, reason: str) -> None:
    s = sel()
    s.autotune("toy", (1, "float32"), {LARGE: lambda: None})
    path = s.tuned_path()
    _plant(path, how)
    fresh = sel()  # a new process on this device
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fresh.lookup_tuned("toy", (1, "float32")) is None
        assert fresh.select(TOY, Toy(1)).variant is SMALL  # the rule
        fresh.autotune("toy", (2, "float32"), {LARGE: lambda: None})
    assert [w.category for w in caught] == [RuntimeWarning]
    message = str(caught[0].message)
    assert message.startswith(f"netcl: discarded cache file {path}: ")
    assert re.search(reason, message), message
    assert message.endswith("; its winners will be tuned again")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten file is sound
        again = sel()
        assert again.lookup_tuned("toy", (2, "float32")) is LARGE
        assert again.lookup_tuned("toy", (1, "float32")) is None


def test_unwritable_cache_keeps_winner_in_memory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("NETCL_CACHE_DIR", str(blocker))  # a file: no directory can be made
    s = sel()
    with pytest.warns(RuntimeWarning):
        s.autotune("toy", (1, "float32"), {LARGE: lambda: None})
    assert s.lookup_tuned("toy", (1, "float32")) is LARGE


@pytest.mark.parametrize(
    ("op", "key", "candidates", "repeats", "error", "match"),
    [
        ("toy", (1,), {}, 3, ValueError, r"autotune: no candidates for op 'toy'"),
        ("matmul", (1,), {V.CONV2D_NAIVE: lambda: None}, 3, ValueError,
         r"candidate CONV2D_NAIVE is not a matmul kernel"),
        ("toy", (1,), {SMALL: lambda: None}, 0, ValueError, r"repeats must be >= 1, got 0"),
        ("toy", [1], {SMALL: lambda: None}, 3, TypeError, r"key must be a tuple"),
        ("toy", (object(),), {SMALL: lambda: None}, 3, TypeError, r"key items must"),
        ("", (1,), {SMALL: lambda: None}, 3, TypeError, r"op must be a non-empty str"),
        ("toy", (1,), {"TOY_SMALL": lambda: None}, 3, TypeError, r"candidates must map"),
    ],
)
def test_autotune_bad_arguments(
    op: str, key: Any, candidates: Any, repeats: int, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        sel().autotune(op, key, candidates, repeats=repeats)


def test_tune_file_is_per_device_and_driver() -> None:
    names = {sel(p).tuned_path().name for p in (gpu(), gpu(name="B"), gpu(vendor="C"),
                                                gpu(driver_version="2.0"))}
    assert len(names) == 4


# --- per-device selectors -----------------------------------------------------------------


def test_get_kernel_selector_memoized() -> None:
    assert get_kernel_selector() is get_kernel_selector(None)
    assert get_kernel_selector().profile.vendor_family == "numpy"
    assert get_kernel_selector().select(TOY, Toy(500)).local_size_2d == (32, 32)


def test_selector_rejects_plain_profile() -> None:
    with pytest.raises(TypeError, match=r"KernelSelector: profile must be an ExtendedDevice"):
        KernelSelector(plain())  # type: ignore[arg-type]


def _real_devices() -> list[Any]:
    """Every OpenCL device that passed netcl's probe (none without pyopencl or a driver)."""
    return [h.cl_device for h in available_devices() if h.backend == "cl"]


@pytest.mark.parametrize("device", _real_devices(), ids=lambda d: str(d.name))
def test_real_device_decisions_fit_the_device(device: Any) -> None:
    s = get_kernel_selector(device)
    p = s.profile
    for n, dtype in ((1, "float32"), (500, "float32"), (500, "float64")):
        cfg = s.select(TOY, Toy(n, dtype))
        assert cfg.local_size_2d[0] * cfg.local_size_2d[1] <= p.max_work_group_size
        assert cfg.local_size_1d <= p.max_work_group_size
        width = 8 if dtype == "float64" else 4
        if cfg.use_local_memory:
            assert (cfg.tile_m + cfg.tile_n) * cfg.tile_k * width <= p.local_mem_size


@pytest.mark.parametrize("module", [kernel_selector, selection, _registry, _variants, _forcing,
                                    args], ids=lambda m: m.__name__)
def test_doctests(module: Any) -> None:
    """Examples that need netcl-ops's rules are marked +SKIP here; netcl-ops runs them."""
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0
