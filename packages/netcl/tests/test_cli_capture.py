"""``netcl train --no-capture`` prints the same epochs as the default captured run on every
device (only the seconds differ); ``netcl train --profile trace.json`` prints the kernel table
sorted by time and writes a Chrome trace of the run."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from netcl.cli import main
from netcl.core.device import DeviceHandle, manager

SECONDS = re.compile(r"  \(\d+\.\d s\)$")


def _selector(dev: DeviceHandle) -> str:
    """The ``--device`` value that names ``dev`` (``cl:P:D`` for an OpenCL device)."""
    if dev.backend == "cpu":
        return "cpu"
    pairs = [(p.name.strip(), d.name.strip()) for p, d in manager.discover()]
    platforms = list(dict.fromkeys(p for p, _ in pairs))
    on_platform = [d for p, d in pairs if p == dev.platform_name]
    return f"cl:{platforms.index(dev.platform_name)}:{on_platform.index(dev.device_name)}"


@pytest.fixture
def few_digits(digits_subset: Callable[[int], None]) -> None:
    """``netcl train`` on the first 300 digits."""
    digits_subset(300)


def _epochs(out: str) -> list[str]:
    """The epoch lines without their seconds."""
    return [SECONDS.sub("", line) for line in out.splitlines() if line.startswith("epoch")]


@pytest.mark.usefixtures("few_digits")
def test_no_capture_trains_the_same_epochs(dev: DeviceHandle,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "--device", _selector(dev), "--epochs", "2", "--no-progress"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert main([*argv, "--no-capture"]) == 0
    eager = capsys.readouterr()
    assert captured.err == eager.err == ""  # no fallback warning: the step is captured
    assert len(_epochs(captured.out)) == 2 and _epochs(captured.out) == _epochs(eager.out)
    assert captured.out.splitlines()[-1] == eager.out.splitlines()[-1]  # held-out accuracy


@pytest.mark.usefixtures("few_digits")
def test_profile_prints_the_kernel_table_and_writes_a_chrome_trace(
    dev: DeviceHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NETCL_PROFILE_EVENTS", "1")  # what --profile sets (restored after)
    trace = tmp_path / "trace.json"
    argv = ["train", "--device", _selector(dev), "--epochs", "1", "--no-progress",
            "--profile", str(trace)]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(out) if line.startswith("kernel "))
    assert out[header].split() == ["kernel", "launches", "device", "us", "host", "us"]
    assert re.fullmatch(r"held-out accuracy: \d\.\d{4}", out[header - 1])
    last = out[-1]
    launches = int(re.fullmatch(rf"profile: (\d+) launches; Chrome trace written to "
                                rf"{re.escape(str(trace))} \(open it in Perfetto or "
                                r"chrome://tracing\)", last).group(1))  # type: ignore[union-attr]
    events = json.loads(trace.read_text())["traceEvents"]
    host = [e for e in events if e.get("cat") == "host"]
    if dev.backend == "cpu":  # nothing is enqueued on the NumPy backend
        assert launches == 0 and host == []
        return
    assert launches > 0 and len(host) >= launches
    rows = out[header + 1:]
    total = next(line for line in rows if line.startswith("total "))
    assert int(total.split()[1]) >= launches
    names = [line.split()[0] for line in rows[:rows.index(total)]]
    assert any("adam" in name for name in names), names  # the optimizer's kernel is seen
