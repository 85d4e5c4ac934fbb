"""``netcl train --plot / --log-csv / --tensorboard / --log-every``: the files appear and hold
each epoch's figures."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path

import pytest

from netcl.cli import main


@pytest.fixture
def few_digits(digits_subset: Callable[[int], None]) -> None:
    """``netcl train`` on the first 300 digits."""
    digits_subset(300)


@pytest.mark.usefixtures("few_digits")
def test_train_writes_plot_csv_and_event_files(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib", reason="the netcl[plot] extra")
    pytest.importorskip("tensorboardX", reason="the netcl[tensorboard] extra")
    png, table, events = tmp_path / "c.png", tmp_path / "m.csv", tmp_path / "tb"
    argv = ["train", "--device", "cpu", "--epochs", "2", "--no-progress", "--plot", str(png),
            "--log-csv", str(table), "--tensorboard", str(events), "--log-every", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"training curves written to {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader(table.open()))
    epochs = [r for r in rows if r["epoch"]]
    steps = [r for r in rows if not r["epoch"]]
    assert [int(float(r["epoch"])) for r in epochs] == [0, 1]
    assert len(steps) == 4  # every 2nd of 8 steps
    assert all(0.0 <= float(r["epoch/val_accuracy"]) <= 1.0 for r in epochs)
    assert list(events.glob("events.out.tfevents.*"))


def test_bad_log_every_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["train", "--log-every", "0"])
    assert exc.value.code == 2
