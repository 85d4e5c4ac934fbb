"""``netcl tune``: one training step of a model with tuning on, its table, its arguments."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from netcl._tune import MODELS, add_tune_parser, parse_shape, tune, tune_command
from netcl.core import autotune
from netcl.core.device import DeviceHandle, manager
from netcl.core.kernel_selector import get_kernel_selector
from netcl.trainer._digits import digits_cnn


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.delenv("NETCL_AUTOTUNE", raising=False)
    monkeypatch.setenv("NETCL_CACHE_DIR", str(tmp_path / "cache"))
    yield
    for handle in manager.all_handles():  # no tuned winner leaks into other tests
        get_kernel_selector(handle.cl_device).clear_cache()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="netcl")
    add_tune_parser(parser.add_subparsers(dest="command", required=True))
    return parser


def test_netcl_tune_digits_prints_its_table(dev: DeviceHandle, tmp_path: Path) -> None:
    selector = "cpu" if dev.backend == "cpu" else f"#{manager.all_handles().index(dev)}"
    args = _parser().parse_args(["tune", "digits-cnn", "--device", selector,
                                 "--input-shape", "8x1x8x8", "--budget", "0.5"])
    out = io.StringIO()
    assert tune_command(args, out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == f"netcl tune: digits-cnn, input 8x1x8x8 float32, on {dev}"
    if dev.backend == "cpu":
        assert lines[1].startswith("nothing tuned: the NumPy backend runs no OpenCL kernels")
        return
    assert lines[1].split()[:4] == ["family", "shape", "class", "rule"]
    rows = lines[2:-1]
    assert rows and rows[0].startswith("conv2d   8 1 8 8 16 3 3 1x1 1x1 1x1 1 float32 forward")
    assert lines[-1].startswith(f"tuned {len(rows)} shape classes in ")
    assert "(budget 0.5 s); winners in " + str(tmp_path / "cache" / "autotune") in lines[-1]
    assert autotune.autotune_mode() == "auto"  # the forced mode ended with the command


def test_tune_a_module_with_its_shape(dev: DeviceHandle) -> None:
    report = tune(digits_cnn(dev.queue), (2, 1, 8, 8), device=dev, budget_s=0.0)
    assert report.model == "Sequential" and report.rows == [] and report.input_shape == (
        2, 1, 8, 8)
    assert "nothing tuned" in report.table()


def test_tune_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="tune: unknown model 'vgg'; built-in: digits-cnn"):
        tune("vgg")
    with pytest.raises(ValueError, match="tune: a module needs its input_shape"):
        tune(digits_cnn())
    with pytest.raises(ValueError, match="64x1x8x8"):
        parse_shape("64x0")
    with pytest.raises(SystemExit):
        _parser().parse_args(["tune", "vgg"])
    with pytest.raises(SystemExit):
        _parser().parse_args(["tune", "resnet18", "--input-shape", "a,b"])
    with pytest.raises(SystemExit):
        _parser().parse_args(["tune", "resnet18", "--budget", "-1"])
    assert "argument model: invalid choice" in capsys.readouterr().err
    assert sorted(MODELS) == ["digits-cnn", "resnet18"]
    assert MODELS["resnet18"].input_shape == (128, 3, 32, 32)
