"""The main job end to end: the digits CNN reaches at least 97% held-out accuracy on every
backend, also with a 2-worker DataLoader and with mixed precision, and ``netcl train`` (with
and without ``--amp``) prints it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from netcl.core.device import DeviceHandle
from netcl.trainer._digits import DigitsConfig, train_digits


@pytest.mark.parametrize("workers", [0, 2])
def test_digits_reaches_97_percent(dev: DeviceHandle, workers: int) -> None:
    if workers and dev.backend == "cl":
        pytest.skip("the 2-worker run is covered once, on the NumPy backend")
    _, history, used = train_digits(DigitsConfig(device=dev, epochs=5, workers=workers,
                                                 progress=False))
    assert used is dev
    final = history[-1].val_accuracy
    assert final is not None and final >= 0.97, [m.val_accuracy for m in history]
    assert history[-1].train_loss < history[0].train_loss


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # float16 overflow
def test_digits_with_amp_reaches_97_percent(dev: DeviceHandle) -> None:
    trainer, history, _ = train_digits(DigitsConfig(device=dev, epochs=5, progress=False,
                                                    amp=True))
    final = history[-1].val_accuracy
    assert final is not None and final >= 0.97, [m.val_accuracy for m in history]
    assert trainer.scaler.is_enabled() and trainer.scaler.get_scale() >= 2.0**10


@pytest.mark.parametrize("amp", [[], ["--amp"]], ids=["float32", "amp"])
def test_netcl_train_command_prints_accuracy(amp: list[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "netcl.cli", "train", "--device", "cpu",
                          "--epochs", "2", "--no-progress", *amp], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "device: cpu (NumPy)"
    assert lines[-1].startswith("held-out accuracy: 0.9")
