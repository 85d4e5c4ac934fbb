"""``netcl tune`` through the console entry point: the table, the stored winners, bad usage."""

from __future__ import annotations

from pathlib import Path

import pytest

from netcl.cli import main
from netcl.core.testing import available_devices


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code or 0)


def test_netcl_tune_on_numpy_says_nothing_is_tuned(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "digits-cnn", "--device", "cpu", "--budget", "1"]) == 0
    assert "nothing tuned: the NumPy backend runs no OpenCL kernels" in capsys.readouterr().out


def test_netcl_tune_digits_on_opencl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    cl = [h for h in available_devices() if h.backend == "cl"]
    if not cl:
        pytest.skip("no OpenCL device")
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path))
    assert main(["tune", "digits-cnn", "--device", "cl", "--budget", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("netcl tune: digits-cnn, input 64x1x8x8 float32")
    assert "conv2d" in out and "winners in" in out
    # a class is stored once it was tuned within the budget (kernel builds count: a cold cache
    # can spend all 3 s building, and then the table says so)
    stored = list((tmp_path / "autotune").glob("*.winners"))
    assert stored or "budget ran out" in out


@pytest.mark.parametrize("argv", [["tune", "vgg"], ["tune", "digits-cnn", "--budget", "-1"],
                                  ["tune", "digits-cnn", "--device", "cpu", "--input-shape",
                                   "64x1x8"]])
def test_netcl_tune_bad_usage_exits_2(argv: list[str],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "netcl tune: error" in err or err.startswith("netcl: tune:")
