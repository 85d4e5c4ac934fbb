"""netcl.core.kernels.golden: comparing rendered kernel sources with checked-in files,
regenerating them, and building them."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernels import golden
from netcl.core.kernels.cache import KernelBuildError
from netcl.core.kernels.golden import (
    UPDATE_ENV,
    GoldenSource,
    build_golden,
    check_golden,
    check_no_stale_golden,
    missing_extensions,
)

SOURCE = "__kernel void k(__global float* x) {\n  x[0] = 1.0f;\n}\n"


@pytest.fixture(autouse=True)
def _not_updating(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UPDATE_ENV, raising=False)


def test_match_and_mismatch_show_a_diff_and_the_command(tmp_path: Path) -> None:
    (tmp_path / "fam").mkdir()
    (tmp_path / "fam" / "k.cl").write_bytes(SOURCE.encode())
    check_golden(tmp_path, "fam/k.cl", SOURCE, "make golden")
    changed = SOURCE.replace("1.0f", "2.0f")
    with pytest.raises(AssertionError) as err:
        check_golden(tmp_path, "fam/k.cl", changed, "make golden")
    message = str(err.value)
    assert "-  x[0] = 1.0f;\n+  x[0] = 2.0f;" in message
    assert "--- golden/fam/k.cl" in message and "+++ rendered/fam/k.cl" in message
    assert message.rstrip().endswith("regenerate the golden files with: make golden")


def test_line_endings_count(tmp_path: Path) -> None:
    (tmp_path / "k.cl").write_bytes(SOURCE.replace("\n", "\r\n").encode())
    with pytest.raises(AssertionError, match="differs"):
        check_golden(tmp_path, "k.cl", SOURCE, "make golden")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"(?s)golden source new\.cl is missing.*make golden"):
        check_golden(tmp_path, "new.cl", SOURCE, "make golden")


def test_stale_files(tmp_path: Path) -> None:
    for name in ("a/k.cl", "a/old.cl", "b/old.cl"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(SOURCE)
    (tmp_path / "README.txt").write_text("not a kernel")
    with pytest.raises(AssertionError, match=r"2 golden file\(s\).*\n  a/old\.cl\n  b/old\.cl"):
        check_no_stale_golden(tmp_path, ["a/k.cl"], "make golden")
    check_no_stale_golden(tmp_path, ["a/k.cl", "a/old.cl", "b/old.cl"], "make golden")


def test_update_mode_writes_and_prunes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "old.cl").write_text(SOURCE)
    monkeypatch.setenv(UPDATE_ENV, "1")
    check_golden(tmp_path, "fam/k.cl", SOURCE, "make golden")
    check_no_stale_golden(tmp_path, ["fam/k.cl"], "make golden")
    assert (tmp_path / "fam" / "k.cl").read_bytes() == SOURCE.encode()
    assert not (tmp_path / "gone").exists()
    monkeypatch.setenv(UPDATE_ENV, "0")
    assert not golden.updating()


def test_missing_extensions() -> None:
    class Device:
        extensions = "cl_khr_fp16 cl_khr_int64_base_atomics"

    src = GoldenSource(SOURCE, ("k",), ("cl_khr_fp64", "cl_khr_fp16"))
    assert missing_extensions(Device(), src) == ["cl_khr_fp64"]


def test_build(dev: DeviceHandle) -> None:
    if dev.backend == "cpu":
        pytest.skip("the NumPy backend builds no OpenCL programs")
    build_golden(dev.context, GoldenSource(SOURCE, ("k",)), "k.cl")
    with pytest.raises(AssertionError, match="defines no kernel other"):
        build_golden(dev.context, GoldenSource(SOURCE, ("k", "other")), "k.cl")
    with pytest.raises(KernelBuildError):
        build_golden(dev.context, GoldenSource(SOURCE.replace(";", ""), ("k",)), "bad.cl")


def test_doctests() -> None:
    assert doctest.testmod(golden).failed == 0
