"""Autotuning by shape class (NETCL_AUTOTUNE): the policy, the budget, persistence per device and
driver, capture and forcing, failing candidates, nested selections.

A toy family of this test's own with a tuner whose bench counts its timed calls (netcl-core
alone: netcl-ops tests the real matmul and conv2d tuners on OpenCL devices).
"""

from __future__ import annotations

import dataclasses
import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from netcl.core import autotune
from netcl.core.device_profile import ExtendedDeviceProfile, extended_profile
from netcl.core.kernel_selector import (
    KernelConfig,
    KernelSelector,
    SelectionFamily,
    Variant,
    default_config,
    force_variant,
    register_family,
)
from netcl.core.recording import recording
from netcl.core.selection import (
    Candidate,
    FamilyTuner,
    apply_params,
    class_op,
    params_of,
    pow2_bucket,
    register_tuner,
    tuner_for,
)


class Job(NamedTuple):
    """The family's query: ``n`` items."""

    n: int


FAST, SLOW, BROKEN = Variant("TUNY_FAST"), Variant("TUNY_SLOW"), Variant("TUNY_BROKEN")
# what each (variant, tile_m) costs per timed call, in seconds; the rule picks SLOW
COST = {("TUNY_SLOW", 8): 0.03, ("TUNY_FAST", 8): 0.012, ("TUNY_FAST", 4): 0.0}
calls: list[str] = []  # one entry per bench call: the candidate's variant and tile_m
benches: list[int] = []  # one entry per bench made (a class being tuned): the query's n
nested: list[KernelConfig] = []  # what a selection inside a bench got


def _configure(profile: ExtendedDeviceProfile, v: Any, q: Job) -> KernelConfig:
    return default_config(v)


TUNY = register_family(
    SelectionFamily("tuny", parse=int, key=lambda q: (q.n,), rule=lambda p, q: SLOW,
                    configure=_configure),
    {FAST: {"tile_m": 8}, SLOW: {"tile_m": 8}, BROKEN: {"tile_m": 8}},
    applies={BROKEN: lambda p, q: q.n < 1000},
)


def _candidates(profile: ExtendedDeviceProfile, q: Job, rule: Any) -> list[Candidate]:
    return [Candidate(BROKEN), Candidate(FAST), Candidate(FAST, params_of({"tile_m": 4}))]


def _bench(device: Any, profile: ExtendedDeviceProfile, q: Job) -> Any:
    benches.append(q.n)

    def bench(config: KernelConfig) -> Callable[[int], None]:
        if config.variant is BROKEN:
            raise RuntimeError("build failed: BROKEN")
        if q.n == 77:  # a selection inside a tuning run: never tunes, never cached
            nested.append(sel_of(config).select(TUNY, Job(5000)))

        def run(n: int) -> None:
            calls.append(f"{config.variant.name}/{config.tile_m}")
            time.sleep(n * COST[(config.variant.name, config.tile_m)])

        return run

    return bench


TUNER = register_tuner("tuny", FamilyTuner(shape_class=lambda q: (pow2_bucket(q.n),),
                                          candidates=_candidates, bench=_bench, repeats=2))
_selectors: dict[int, KernelSelector] = {}


def sel_of(config: KernelConfig) -> KernelSelector:
    return _selectors[0]


def gpu(**kw: Any) -> ExtendedDeviceProfile:
    base = {"name": "Tune GPU", "vendor": "Tune Vendor", "device_type": "gpu",
            "vendor_family": "other", "architecture": "unknown", "local_mem_size": 49152,
            "max_work_group_size": 1024, "driver_version": "1.0", **kw}
    return dataclasses.replace(extended_profile(None), **base)


def sel(profile: ExtendedDeviceProfile | None = None) -> KernelSelector:
    s = _selectors[0] = KernelSelector(profile or gpu())
    return s


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("NETCL_AUTOTUNE", "NETCL_AUTOTUNE_BUDGET_S", "NETCL_FORCE_TUNY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path / "cache"))
    calls.clear()
    benches.clear()
    nested.clear()
    autotune.reset_budget()


def _files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "autotune").glob("*.winners"))


def _read(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    _, header, content = path.read_bytes().split(b"\n", 2)
    return json.loads(header), json.loads(content)


def _quiet_select(s: KernelSelector, n: int) -> KernelConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # BROKEN's failure
        return s.select(TUNY, Job(n))


# --- the policy -----------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "profile", "expected"), [
    (None, extended_profile(None), False),  # auto: off on the NumPy backend
    (None, gpu(device_type="cpu", vendor_family="intel"), False),  # ... and OpenCL CPUs
    (None, gpu(), True),  # ... on GPUs
    (None, gpu(device_type="accelerator"), True),
    ("off", gpu(), False),
    ("on", extended_profile(None), True),
    (" ON ", gpu(device_type="cpu"), True),
])
def test_auto_is_on_for_gpus_only(monkeypatch: pytest.MonkeyPatch, mode: str | None,
                                  profile: ExtendedDeviceProfile, expected: bool) -> None:
    if mode is not None:
        monkeypatch.setenv("NETCL_AUTOTUNE", mode)
    assert autotune.tuning_enabled(profile) is expected


def test_bad_policy_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "sometimes")
    with pytest.raises(ValueError, match="NETCL_AUTOTUNE must be one of off, on, auto"):
        autotune.autotune_mode()
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    monkeypatch.setenv("NETCL_AUTOTUNE_BUDGET_S", "-1")
    with pytest.raises(ValueError, match="NETCL_AUTOTUNE_BUDGET_S must be >= 0"):
        autotune.budget_s()
    with pytest.raises(ValueError, match="tuning: mode must be one of"):
        with autotune.tuning("always"):
            pass
    with pytest.raises(ValueError, match="budget_s must be >= 0"):
        with autotune.tuning("on", budget_s=-2.0):
            pass


def test_auto_on_a_cpu_profile_times_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    s = sel(gpu(device_type="cpu"))
    assert s.select(TUNY, Job(100)).variant is SLOW  # the rule
    assert benches == [] and calls == []


# --- tuning, persistence --------------------------------------------------------------------


def test_first_use_tunes_persists_and_a_new_selector_reads_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    p = gpu(driver_version="535.1")
    s = sel(p)
    cfg = _quiet_select(s, 100)
    assert (cfg.variant, cfg.tile_m) == (FAST, 4)  # the fastest, with its params
    assert benches == [100]
    # the rule's pick first, each run once to warm up and twice timed (a sample of several
    # runs where one is under 2 ms); BROKEN skipped
    order = [c for i, c in enumerate(calls) if i == 0 or calls[i - 1] != c]
    assert order == ["TUNY_SLOW/8", "TUNY_FAST/8", "TUNY_FAST/4"]
    assert calls.count("TUNY_SLOW/8") == 3  # 30 ms a run: one run per sample
    [path] = _files(tmp_path)
    header, data = _read(path)
    assert header["key"]["driver_version"] == "535.1" and header["key"]["format"] == "3"
    assert data["winners"] == [{"op": "tuny/class", "key": [128], "variant": "TUNY_FAST",
                                "params": {"tile_m": 4}}]
    assert data["failed"] == [{"op": "tuny/class", "key": [128],
                               "candidate": "TUNY_BROKEN"}]
    calls.clear()
    assert s.select(TUNY, Job(100)) is cfg  # cached
    assert s.select(TUNY, Job(70)).tile_m == 4  # the same class: no timing
    fresh = sel(p)  # a new process: reads the winner, times nothing
    assert fresh.select(TUNY, Job(127)).tile_m == 4
    assert fresh.lookup_class_winner("tuny", Job(65)) == Candidate(FAST, (("tile_m", 4),))
    assert calls == [] and benches == [100]
    other_driver = sel(gpu(driver_version="535.2"))  # another driver: its own file, tuned again
    _quiet_select(other_driver, 100)
    assert benches == [100, 100] and len(_files(tmp_path)) == 2


def test_off_ignores_stored_class_winners(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    p = gpu()
    assert _quiet_select(sel(p), 100).variant is FAST
    monkeypatch.setenv("NETCL_AUTOTUNE", "off")
    assert sel(p).select(TUNY, Job(100)).variant is SLOW  # the rule, the file unread
    monkeypatch.setenv("NETCL_AUTOTUNE", "auto")
    assert sel(p).select(TUNY, Job(100)).variant is FAST  # a GPU: the stored winner
    assert sel(dataclasses.replace(p, device_type="cpu")).select(TUNY, Job(100)).variant is SLOW


def test_on_record_sees_each_class_as_it_is_tuned(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Any, ...]] = []
    with autotune.tuning("on", budget_s=10.0, on_record=lambda r: seen.append(r.shape_class)):
        _quiet_select(sel(), 3)
        assert seen == [(4,)]
        _quiet_select(sel(), 9)
    _quiet_select(sel(), 33)  # after the context: not seen
    assert seen == [(4,), (16,)]


def test_each_shape_class_tunes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    s = sel()
    for n in (3, 4, 5, 9, 16, 17):
        _quiet_select(s, n)
    assert benches == [3, 5, 9, 17]  # classes 4, 8, 16, 32
    records = [r for r in autotune.tune_log() if r.family == "tuny"][-4:]
    assert [r.shape_class for r in records] == [(4,), (8,), (16,), (32,)]
    r = records[0]
    assert (r.rule, r.winner, r.complete) == ("TUNY_SLOW", "TUNY_FAST[tile_m=4]", True)
    assert r.rule_s is not None and r.winner_s is not None and r.winner_s < r.rule_s
    assert dict(r.timings)["TUNY_BROKEN"] is None


def test_a_known_failure_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    with pytest.warns(RuntimeWarning, match="candidate TUNY_BROKEN failed"):
        sel().select(TUNY, Job(3))
    s = sel()
    assert s.lookup_class_winner("tuny", Job(3)) is not None  # loads the file
    s._tuned.pop((class_op("tuny"), (4,)))  # the winner lost, the failure kept
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second failure warning: BROKEN is not built again
        assert s.select(TUNY, Job(3)).variant is FAST


def test_candidates_that_do_not_apply_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # BROKEN does not apply from 1000: never built
        assert sel().select(TUNY, Job(2000)).tile_m == 4


def test_budget_zero_leaves_it_to_the_rule(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    monkeypatch.setenv("NETCL_AUTOTUNE_BUDGET_S", "0")
    assert sel().select(TUNY, Job(100)).variant is SLOW
    assert benches == [] and calls == [] and _files(tmp_path) == []


def test_budget_cut_short_keeps_the_best_in_memory_only(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    monkeypatch.setenv("NETCL_AUTOTUNE_BUDGET_S", "0.05")  # the rule's pick, then out
    s = sel()
    cfg = _quiet_select(s, 100)
    assert cfg.variant is SLOW and calls == ["TUNY_SLOW/8"] * 3
    [record] = [r for r in autotune.tune_log() if r.family == "tuny"][-1:]
    assert not record.complete and record.winner == "TUNY_SLOW"
    assert _files(tmp_path) == [] or _read(_files(tmp_path)[0])[1]["winners"] == []
    assert _quiet_select(s, 1000).variant is SLOW  # spent: the rule decides, nothing timed
    assert benches == [100]


def test_tuning_context_sets_mode_and_a_fresh_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "off")
    monkeypatch.setenv("NETCL_AUTOTUNE_BUDGET_S", "0")
    with autotune.tuning("on", budget_s=10.0) as log:
        _quiet_select(sel(), 100)
    assert benches == [100] and [r.shape_class for r in log] == [(128,)]
    assert autotune.autotune_mode() == "off" and autotune.budget_left() == 0.0


# --- when it never tunes ----------------------------------------------------------------------


def test_capture_never_tunes_and_does_not_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    s = sel()

    class Recorder:  # any recorder: a graph capture, the profiler
        pass

    with recording(Recorder()):
        assert s.select(TUNY, Job(100)).variant is SLOW  # the rule
    assert benches == []
    assert _quiet_select(s, 100).tile_m == 4 and benches == [100]  # eager: tunes now
    with recording(Recorder()):  # a known winner serves under capture
        assert s.select(TUNY, Job(90)).tile_m == 4


def test_forced_variants_win_and_never_tune(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    s = sel()
    with force_variant(SLOW):
        assert s.select(TUNY, Job(100)).variant is SLOW
    assert benches == []
    _quiet_select(s, 100)  # tuned: FAST
    with force_variant(SLOW):
        assert s.select(TUNY, Job(100)).variant is SLOW
    monkeypatch.setenv("NETCL_FORCE_TUNY", "TUNY_SLOW")
    assert s.select(TUNY, Job(100)).variant is SLOW


def test_selections_inside_a_tuning_run_use_the_rule_uncached(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    s = sel()
    _quiet_select(s, 77)
    assert benches == [77]  # the nested select(5000) did not tune
    assert nested and all(c.variant is SLOW for c in nested)
    assert _quiet_select(s, 5000).tile_m == 4 and benches == [77, 5000]  # not cached: tunes


def test_a_family_without_tuner_or_bench_keeps_its_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_AUTOTUNE", "on")
    one = Variant("UNTUNED_ONE")
    fam = register_family(SelectionFamily("untuned", parse=int, key=lambda n: (n,),
                                          rule=lambda p, n: one,
                                          configure=lambda p, v, n: default_config(v)),
                          {one: {}})
    assert sel().select(fam, 3).variant is one and tuner_for("untuned") is None
    register_tuner("untuned", FamilyTuner(shape_class=lambda n: (n,),
                                          candidates=lambda p, n, r: [Candidate(one)],
                                          bench=lambda d, p, n: None))
    assert sel().select(fam, 3).variant is one  # nothing can run here (no device)


# --- params ---------------------------------------------------------------------------------


def test_apply_params_sets_fields_and_extra() -> None:
    base = KernelConfig(FAST, extra={"by_layout": {"nn": {"tile_k": 8}}, "keep": 1, "gone": 2})
    out = apply_params(base, params_of({"tile_m": 4, "local_size_2d": [8, 4], "swizzle": 2,
                                        "gone": None}))
    assert (out.tile_m, out.local_size_2d) == (4, (8, 4))
    assert out.extra == {"keep": 1, "swizzle": 2}  # tiles set: by_layout dropped
    assert base.tile_m == 32 and "gone" in base.extra  # unchanged
    assert apply_params(base, ()) is base
    with pytest.raises(TypeError, match="params_of: x must be a JSON scalar"):
        params_of({"x": [1, 2, 3]})
    with pytest.raises(TypeError, match="lower-case identifier"):
        params_of({"Bad": 1})
