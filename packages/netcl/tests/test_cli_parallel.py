"""``netcl launch`` hands its arguments to :mod:`netcl.distributed.launch` and passes its exit
status through; ``netcl train --nprocs N`` trains the digits CNN over N processes and prints
the one-process lines; what it does not support exits with status 2."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from netcl.cli import main

EPOCH = re.compile(r"^epoch +\d+  loss \S+  train acc \S+  test acc (\S+)  \(\d+\.\d s\)$")


def test_launch_runs_the_ranks_with_their_environment(tmp_path: Path) -> None:
    script = tmp_path / "job.py"
    script.write_text(
        "import os, sys\n"
        "rank, world = os.environ['NETCL_RANK'], os.environ['NETCL_WORLD_SIZE']\n"
        "open(sys.argv[1] + '.' + rank, 'w').write(world + ' ' + ' '.join(sys.argv[2:]))\n",
        encoding="utf-8")
    out = tmp_path / "rank"
    assert main(["launch", "-n", "2", str(script), str(out), "--lr", "0.1", "-x"]) == 0
    for rank in (0, 1):
        assert Path(f"{out}.{rank}").read_text(encoding="utf-8") == "2 --lr 0.1 -x"


def test_launch_passes_the_exit_status_through(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--debug", "launch", "-n", "1", "-c", "import sys; sys.exit(3)"]) == 3
    assert "rank 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:  # the launcher's own usage error
        main(["launch", "-c", "pass"])
    assert exit_.value.code == 2
    assert main(["launch", "-n", "0", "-c", "pass"]) == 2


@pytest.mark.skipif(sys.platform == "win32", reason="spawned ranks share memory on POSIX")
def test_train_nprocs_prints_the_epoch_lines(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "--device", "cpu", "--epochs", "1", "--no-progress", "--nprocs", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    epochs = [m for m in map(EPOCH.match, out) if m]
    assert out[0] == "device: cpu (NumPy)" and len(epochs) == 1
    assert out[-1] == f"held-out accuracy: {float(epochs[0][1]):.4f}"
    assert float(epochs[0][1]) > 0.5


@pytest.mark.parametrize(("argv", "message"), [
    (["--task", "charlm"], "--nprocs 2: data-parallel training is for --task digits only"),
    (["--log-csv", "m.csv", "--log-every", "2"],
     "--log-csv, --log-every: not supported with --nprocs 2"),
    (["--profile", "t.json"], "--profile: not supported with --nprocs 2"),
    (["--batch-size", "1"], "--batch-size 1 must be at least --nprocs 2"),
])
def test_unsupported_nprocs_options_exit_2(argv: list[str], message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--device", "cpu", "--nprocs", "2", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_nprocs_must_be_positive() -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--nprocs", "0"])
    assert exit_.value.code == 2
