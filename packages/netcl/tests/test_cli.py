"""The ``netcl`` command's failures: one line on stderr, an exit status per kind (2 bad input,
1 failure while running, 130 Ctrl-C), the traceback only with --debug / NETCL_DEBUG=1; and
``netcl train`` prints each epoch's line as the epoch ends."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from netcl.cli import main
from netcl.core.device import DeviceHandle, DeviceManager, manager

EPOCH_LINE = re.compile(r"epoch {1,2}\d+  loss \d+\.\d{4}  train acc \d\.\d{4}  "
                        r"test acc \d\.\d{4}  \(\d+\.\d s\)")
NO_SUCH = "no-such-device-xyz"


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
    """``netcl train`` on the first 160 digits."""
    digits_subset(160)


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("netcl: "), err
    return lines[0]


def test_unknown_device_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--device", NO_SUCH]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"unknown device selector '{NO_SUCH}'" in line


@pytest.mark.parametrize("how", ["--debug before", "--debug after", "NETCL_DEBUG=1"])
def test_debug_shows_the_traceback(how: str, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["train", "--device", NO_SUCH]
    if how == "--debug before":
        argv.insert(0, "--debug")
    elif how == "--debug after":
        argv.append("--debug")
    else:
        monkeypatch.setenv("NETCL_DEBUG", "1")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1].startswith("netcl: DeviceManager.default: unknown device")


class _NoGpuManager:
    """A machine with only the NumPy backend: kind selectors find nothing."""

    def default(self, selector: str = "auto") -> DeviceHandle | None:
        return DeviceManager().default("cpu") if selector == "cpu" else None

    def all_handles(self) -> list[DeviceHandle]:
        handle = DeviceManager().default("cpu")
        assert handle is not None
        return [handle]


def test_device_kind_that_is_absent(capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("netcl.cli.manager", _NoGpuManager())
    assert main(["train", "--device", "gpu"]) == 2
    assert _one_line(capsys.readouterr().err) == (
        "netcl: --device 'gpu' matches no device; devices: cpu (NumPy)")


@pytest.mark.parametrize("command", ["devices", "train"])
def test_netcl_device_naming_nothing(command: str, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("netcl.cli.manager", DeviceManager())
    monkeypatch.setenv("NETCL_DEVICE", NO_SUCH)
    assert main([command]) == 2
    out, err = capsys.readouterr()
    assert f"'{NO_SUCH}' (from NETCL_DEVICE)" in _one_line(err)
    if command == "devices":  # the listing is what it takes to fix NETCL_DEVICE
        assert "[cpu] NumPy backend" in out and "auto picks" not in out


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["train", "--epochs", "0"], ["train", "--lr", "nan"], ["nope"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
    assert main(["train", "--resume"]) == 2
    assert _one_line(capsys.readouterr().err.splitlines()[-1]) == (
        "netcl: --resume needs --checkpoint-dir")


def test_unusable_checkpoint_is_one_line_and_exit_1(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    header = b'{"w": [1]}'
    (tmp_path / "last.netcl").write_bytes(len(header).to_bytes(8, "little") + header)
    argv = ["train", "--device", "cpu", "--checkpoint-dir", str(tmp_path), "--resume"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == "device: cpu (NumPy)\n"
    assert _one_line(err) == (f"netcl: checkpoint {tmp_path / 'last.netcl'} is corrupted: "
                              f"tensor 'w' must have exactly dtype, shape and data_offsets, "
                              f"got list")


def test_unexpected_error_is_one_line_flagged_as_a_bug(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(cfg: Any) -> Any:
        raise KeyError("x")

    monkeypatch.setattr("netcl.cli.train_digits", broken)
    assert main(["train", "--device", "cpu"]) == 1
    assert _one_line(capsys.readouterr().err) == (
        "netcl: internal error: KeyError: 'x' (rerun with --debug for the traceback and "
        "report it)")


class _DriverError(Exception):
    """Stands for pyopencl's own exception types (not builtin RuntimeError subclasses)."""


_DriverError.__module__ = "pyopencl._cl"


@pytest.mark.parametrize(("error", "line"), [
    (OSError(28, "No space left on device"), "netcl: [Errno 28] No space left on device"),
    (_DriverError("clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES"),
     "netcl: OpenCL error: clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES"),
    (RuntimeError("DataLoader: worker 1 died (signal SIGKILL)\nits log:\n..."),
     "netcl: DataLoader: worker 1 died (signal SIGKILL) (more with --debug)"),
], ids=["os", "opencl", "multi-line"])
def test_runtime_failures_are_one_line_and_exit_1(error: Exception, line: str,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(cfg: Any) -> Any:
        raise error

    monkeypatch.setattr("netcl.cli.train_digits", failing)
    assert main(["train", "--device", "cpu"]) == 1
    assert _one_line(capsys.readouterr().err) == line


@pytest.mark.usefixtures("few_digits")
def test_divergence_is_one_line_and_exit_1(dev: DeviceHandle, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "--device", _selector(dev), "--lr", "1e30", "--epochs", "2",
            "--checkpoint-dir", str(tmp_path), "--no-progress"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == f"device: {dev}\n"
    line = _one_line(err)  # NumPy's overflow warnings are not shown: this line says it
    assert re.fullmatch(r"netcl: Trainer: training diverged: the loss is (nan|inf) at epoch 1, "
                        r"step \d of 2 \(lr 1e\+30\); lower the learning rate or clip the "
                        r"gradients", line), line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.usefixtures("few_digits")
def test_epoch_lines_appear_as_epochs_end_and_ctrl_c_is_one_line(
    dev: DeviceHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C in epoch 2 of 3: epoch 1's line is out already, then one ``interrupted`` line;
    the resumed run prints the restored epoch 1 line again, then epochs 2 and 3."""
    from netcl.trainer import Trainer

    real_evaluate = Trainer.evaluate
    calls = [0]

    def interrupted_in_epoch_2(self: Trainer, loader: Any) -> tuple[float, float]:
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        return real_evaluate(self, loader)

    monkeypatch.setattr(Trainer, "evaluate", interrupted_in_epoch_2)
    argv = ["train", "--device", _selector(dev), "--epochs", "3", "--checkpoint-dir",
            str(tmp_path), "--no-progress"]
    assert main(argv) == 130
    out, err = capsys.readouterr()
    first = out.splitlines()
    assert first[0] == f"device: {dev}" and len(first) == 2, out
    assert EPOCH_LINE.fullmatch(first[1]) and first[1].startswith("epoch  1  loss "), first
    assert err == "netcl: interrupted\n"

    assert main([*argv, "--resume"]) == 0
    second = capsys.readouterr().out.splitlines()
    assert second[:2] == first and len(second) == 5, second
    assert [line[:8] for line in second[2:4]] == ["epoch  2", "epoch  3"]
    assert all(EPOCH_LINE.fullmatch(line) for line in second[2:4]), second
    assert re.fullmatch(r"held-out accuracy: \d\.\d{4}", second[4])


def test_bad_netcl_debug_is_a_usage_error(capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_DEBUG", "verbose")
    with pytest.raises(SystemExit) as exit_info:
        main(["devices"])
    assert exit_info.value.code == 2
    assert "NETCL_DEBUG must be one of 1/0, true/false, yes/no, on/off, got 'verbose'" in (
        capsys.readouterr().err)
