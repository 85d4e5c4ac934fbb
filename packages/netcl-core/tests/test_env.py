"""netcl.core.env: one parser for every NETCL_* switch, and the switches that use it."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from netcl.core import capabilities, device_probe, icd
from netcl.core.backend.opencl import OpenCLBackend
from netcl.core.env import env_choice, env_flag, env_number, env_raw
from netcl.core.kernels import cache, golden
from netcl.core.memory import PersistentBufferPool

NAME = "NETCL_TEST_ENV_FLAG"


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", "Yes", "on", " On "])
def test_true_spellings(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NAME, raw)
    assert env_flag(NAME, False) is True


@pytest.mark.parametrize("raw", ["0", "false", "False", "NO", "off", " 0 "])
def test_false_spellings(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NAME, raw)
    assert env_flag(NAME, True) is False


@pytest.mark.parametrize("raw", [None, "", "   "])
def test_unset_or_blank_gives_the_default(raw: str | None,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    if raw is None:
        monkeypatch.delenv(NAME, raising=False)
    else:
        monkeypatch.setenv(NAME, raw)
    assert env_flag(NAME, True) is True
    assert env_flag(NAME, False) is False
    assert env_flag(NAME, None) is None


@pytest.mark.parametrize("raw", ["2", "maybe", "enabled", "y", "-1"])
def test_other_values_name_the_variable_and_value(raw: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NAME, raw)
    with pytest.raises(ValueError, match=rf"{NAME} must be one of 1/0, true/false, yes/no, "
                                         rf"on/off, got '{raw}'"):
        env_flag(NAME, True)


def test_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAME, raising=False)
    assert env_choice(NAME, ("a", "B")) is None
    monkeypatch.setenv(NAME, " b ")
    assert env_choice(NAME, ("a", "B")) == "b"
    monkeypatch.setenv(NAME, "c")
    with pytest.raises(ValueError, match=rf"{NAME} must be one of a, b, got 'c'"):
        env_choice(NAME, ("a", "B"))


# -- the switches ---------------------------------------------------------------------------

POCL = SimpleNamespace(platform=SimpleNamespace(name="Portable Computing Language"))
INTEL = SimpleNamespace(platform=SimpleNamespace(name="Intel(R) OpenCL"))


@pytest.mark.parametrize("raw", ["0", "false", "off", "no", "FALSE"])
def test_disk_cache_off_spellings_turn_it_off(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_DISK_CACHE", raw)  # "false" used to turn the cache *on*
    assert not cache._disk_cache_enabled(INTEL)
    assert not cache._disk_cache_enabled(POCL)


def test_disk_cache_default_and_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NETCL_DISK_CACHE", raising=False)
    assert cache._disk_cache_enabled(INTEL) and not cache._disk_cache_enabled(POCL)
    monkeypatch.setenv("NETCL_DISK_CACHE", "true")
    assert cache._disk_cache_enabled(POCL)
    monkeypatch.setenv("NETCL_DISK_CACHE", "sometimes")
    with pytest.raises(ValueError, match="NETCL_DISK_CACHE must be one of"):
        cache._disk_cache_enabled(INTEL)


def test_update_golden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(golden.UPDATE_ENV, "yes")
    assert golden.updating()
    monkeypatch.setenv(golden.UPDATE_ENV, "off")
    assert not golden.updating()


def test_icd_register_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_ICD_REGISTER", "false")
    assert icd.register_pip_runtimes() is None


def test_kernel_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_KERNEL_STRATEGY", "Portable")
    assert capabilities._strategy_override() == "portable"
    monkeypatch.setenv("NETCL_KERNEL_STRATEGY", "auto")
    assert capabilities._strategy_override() is None
    monkeypatch.setenv("NETCL_KERNEL_STRATEGY", "fast")
    with pytest.raises(ValueError, match="kernel_strategy: NETCL_KERNEL_STRATEGY must be one of "
                                         "auto, portable, optimized, got 'fast'"):
        capabilities._strategy_override()


def test_reprobe_reads_the_flag() -> None:
    assert device_probe._REPROBE_ENV == "NETCL_REPROBE"


def test_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NAME, raising=False)
    assert env_number(NAME, 4.0) == 4.0
    monkeypatch.setenv(NAME, "  ")
    assert env_number(NAME, 4.0) == 4.0
    monkeypatch.setenv(NAME, " 1e-1 ")
    assert env_number(NAME, 4.0, minimum=0.0) == 0.1


@pytest.mark.parametrize(("raw", "rule"), [("lots", "a number"), ("nan", "a finite number"),
                                           ("inf", "a finite number"), ("-0.5", ">= 0")])
def test_number_refuses(raw: str, rule: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NAME, raw)
    with pytest.raises(ValueError, match=rf"{NAME} must be {rule}, got '{raw}'"):
        env_number(NAME, 4.0, minimum=0.0)


@pytest.mark.parametrize("name", ["NETCL_ASYNC_H2D", "NETCL_PINNED_H2D"])
def test_transfer_switches_use_env_flag(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The transport's switches read like every other flag ("2" was silently "on")."""
    monkeypatch.setenv(name, "2")
    backend = object.__new__(OpenCLBackend)
    backend.max_alloc = backend.global_mem = 1 << 30
    with pytest.raises(ValueError, match=rf"{name} must be one of 1/0"):
        backend.from_host(np.zeros(1, dtype=np.float32))


def test_max_cached_gb_below_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_MAX_CACHED_GB", "-1")
    with pytest.raises(ValueError, match="NETCL_MAX_CACHED_GB must be >= 0, got '-1'"):
        PersistentBufferPool(None)


def test_flags_follow_every_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag is parsed once per change of its raw value, and every change is seen."""
    monkeypatch.delenv(NAME, raising=False)
    assert env_raw(NAME) is None
    assert env_flag(NAME, True) is True
    for raw, want in [("off", False), ("off", False), ("YES", True), ("", True), ("0", False)]:
        monkeypatch.setenv(NAME, raw)
        assert env_flag(NAME, True) is want, raw
    monkeypatch.setenv(NAME, "2")
    for _ in range(2):  # a bad value raises on every read, not only the first
        with pytest.raises(ValueError, match=rf"{NAME} must be one of 1/0"):
            env_flag(NAME, True)
    monkeypatch.delenv(NAME)
    assert env_flag(NAME, False) is False and env_choice(NAME, ("a",)) is None
