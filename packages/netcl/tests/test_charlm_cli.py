"""``netcl train --task charlm`` end to end: a tiny GPT's loss goes down (below the unigram
baseline) through the CLI entry, a resumed run continues, the sample repeats under a seed,
and bad options exit with status 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from netcl.cli import main
from netcl.core.device import DeviceHandle, manager
from netcl.data import python_help_text
from netcl.ops.testing import one_opencl_cpu_device

EPOCH = re.compile(r"^epoch +(\d+)  loss (\S+) \(ppl \S+\)  val loss (\S+) \(ppl \S+\)  "
                   r"val acc (\S+)  \(\d+\.\d s\)$")
TINY = ["--context", "16", "--layers", "1", "--width", "32", "--heads", "2", "--batch-size",
        "16", "--lr", "1e-2", "--sample-chars", "40", "--no-progress"]


def _selector(dev: DeviceHandle) -> str:
    """The ``--device`` value that names ``dev`` (``cl:P:D`` for an OpenCL device)."""
    if dev.backend == "cpu":
        return "cpu"
    pairs = [(p.name.strip(), d.name.strip()) for p, d in manager.discover()]
    platforms = list(dict.fromkeys(p for p, _ in pairs))
    on_platform = [d for p, d in pairs if p == dev.platform_name]
    return f"cl:{platforms.index(dev.platform_name)}:{on_platform.index(dev.device_name)}"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """The first 24,000 characters of Python's help() text (21,600 to train on)."""
    path = tmp_path / "corpus.txt"
    path.write_text(python_help_text()[:24_000], encoding="utf-8")
    return path


def _epochs(out: str) -> list[tuple[float, float, float]]:
    """(train loss, val loss, val acc) of each epoch line."""
    found = [EPOCH.match(line) for line in out.splitlines()]
    return [(float(m[2]), float(m[3]), float(m[4])) for m in found if m]


def _sample(out: str) -> str:
    return out.split("\nsample:\n", 1)[1]


def test_loss_goes_below_the_unigram_baseline(corpus: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """On the NumPy backend (about 250 steps; OpenCL devices: the next test)."""
    argv = ["train", "--task", "charlm", "--device", "cpu", "--corpus", str(corpus),
            "--epochs", "3", *TINY]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "corpus: 21600 training and 2400 validation characters" in out
    epochs = _epochs(out)
    assert len(epochs) == 3, out
    (first, first_val, _), (_, _, _), (last, last_val, acc) = epochs
    assert last < first and last_val < first_val and 0.2 < acc < 1.0
    unigram = float(re.search(r"unigram baseline: (\S+) nats/char", out)[1])  # type: ignore[index]
    assert 2.5 < unigram < 3.6
    assert last_val < unigram - 0.3, out  # clearly below what ignoring the context gives
    assert re.search(r"validation loss: \S+ nats/char \(ppl \S+\), \S+ below the baseline",
                     out)
    assert _sample(out).startswith("The ") and len(_sample(out).rstrip("\n")) >= 44


def test_captured_steps_train_as_eager_steps(dev: DeviceHandle, corpus: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The GPT's step (attention included) is captured and replayed on OpenCL devices, and
    trains exactly as eager steps do."""
    if dev.backend == "cpu" or (dev.device_type.lower() == "cpu"
                                and one_opencl_cpu_device(dev) is not None):
        pytest.skip("an OpenCL device (one OpenCL CPU device per machine)")
    argv = ["train", "--task", "charlm", "--device", _selector(dev), "--corpus", str(corpus),
            "--train-chars", "1700", "--epochs", "1", *TINY[:-3], "--sample-chars", "8",
            "--no-progress"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert main([*argv, "--no-capture"]) == 0
    eager = capsys.readouterr()
    assert captured.err == eager.err == ""  # no fallback warning: the step was captured
    assert len(_epochs(captured.out)) == 1 and _epochs(captured.out) == _epochs(eager.out)
    assert _sample(captured.out) == _sample(eager.out)


def test_resume_continues_and_the_sample_repeats(tmp_path: Path, corpus: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    def run(folder: str, epochs: int, resume: bool = False) -> str:
        argv = ["train", "--task", "charlm", "--device", "cpu", "--corpus", str(corpus),
                "--train-chars", "4000", "--checkpoint-dir", str(tmp_path / folder),
                "--epochs", str(epochs), *TINY, *(["--resume"] if resume else [])]
        assert main(argv) == 0
        return capsys.readouterr().out

    straight = run("a", 2)
    assert (tmp_path / "a" / "last.netcl").exists()
    run("b", 1)  # the same run, interrupted after its first epoch...
    resumed = run("b", 2, resume=True)  # ...and resumed
    assert len(_epochs(resumed)) == 2  # the restored epoch's line, then the new one
    assert _epochs(resumed)[0] == _epochs(straight)[0]
    # nothing left to train: the restored weights write the same seeded sample
    assert _sample(run("a", 2, resume=True)) == _sample(straight)


def test_amp_trains(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--amp`` (float16 autocast, dynamic loss scaling) on the NumPy backend."""
    argv = ["train", "--task", "charlm", "--device", "cpu", "--corpus", str(corpus),
            "--train-chars", "6000", "--epochs", "2", "--amp", *TINY]
    assert main(argv) == 0
    (first, first_val, _), (last, last_val, _) = _epochs(capsys.readouterr().out)
    assert last < first and last_val < first_val


@pytest.mark.parametrize("argv", [
    ["--task", "nope"],
    ["--task", "charlm", "--context", "0"],
    ["--task", "charlm", "--temperature", "0"],
    ["--task", "charlm", "--dropout", "1"],
    ["--task", "charlm", "--sample-chars", "-1"],
])
def test_bad_values_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--device", "cpu", *argv])
    assert exit_.value.code == 2


@pytest.mark.parametrize(("argv", "message"), [
    (["--task", "charlm", "--width", "30", "--heads", "4"], "--heads 4 must divide --width 30"),
    (["--task", "charlm", "--prompt", "\u2603"], "the prompt has characters the corpus lacks"),
    (["--task", "charlm", "--prompt", ""], "--prompt must not be empty"),
    (["--task", "charlm", "--context", "5000", "--train-chars", "100"],
     "the training text has 100 characters, fewer than a window of --context 5000"),
    (["--task", "charlm", "--corpus", "/no/such/file.txt"], "No such file"),
    (["--context", "32"], "--context: charlm options; add --task charlm"),
])
def test_bad_options_are_one_line_and_exit_2(argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--device", "cpu", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("netcl: ") and message in err[0], err
