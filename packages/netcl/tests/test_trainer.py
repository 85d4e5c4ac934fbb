"""Trainer: checkpoints every epoch, and a run interrupted after epoch 2 and resumed ends with
the same weights as an uninterrupted one (bitwise on NumPy, within tolerance on OpenCL)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.io import CheckpointError
from netcl.trainer import Trainer
from netcl.trainer._digits import DigitsConfig, train_digits


def _cfg(dev: DeviceHandle, ckpt: Path | None, resume: bool = False,
         stop_after: int | None = None, amp: bool = False) -> DigitsConfig:
    return DigitsConfig(device=dev, epochs=3, batch_size=128, lr=1e-2, seed=3,
                        checkpoint_dir=ckpt, resume=resume, progress=False,
                        stop_after=stop_after, amp=amp)


def test_interrupted_and_resumed_run_matches(dev: DeviceHandle, tmp_path: Path) -> None:
    full, _, _ = train_digits(_cfg(dev, tmp_path / "full"))
    _, hist, _ = train_digits(_cfg(dev, tmp_path / "part", stop_after=2))
    assert len(hist) == 2 and (tmp_path / "part" / "last.netcl").exists()
    resumed, hist2, _ = train_digits(_cfg(dev, tmp_path / "part", resume=True))
    assert [m.epoch for m in hist2] == [0, 1, 2]
    for (name, a), (_, b) in zip(full.model.state_dict().items(),
                                 resumed.model.state_dict().items()):
        if dev.backend == "cpu":
            np.testing.assert_array_equal(a.to_host(), b.to_host(), err_msg=name)
        else:
            np.testing.assert_allclose(a.to_host(), b.to_host(), rtol=1e-4, atol=1e-5,
                                       err_msg=name)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # float16 overflow
def test_amp_run_checkpoints_the_grad_scaler_and_resumes(tmp_path: Path) -> None:
    from netcl.core.device import manager
    from netcl.io import load_tensors

    dev = manager.default("cpu")
    assert dev is not None
    full, _, _ = train_digits(_cfg(dev, tmp_path / "full", amp=True))
    train_digits(_cfg(dev, tmp_path / "part", stop_after=2, amp=True))
    _, meta = load_tensors(tmp_path / "part" / "last.netcl")
    saved = meta["extra"]["grad_scaler"]
    assert set(saved) == {"scale", "growth_factor", "backoff_factor", "growth_interval",
                          "_growth_tracker"} and saved["_growth_tracker"] > 0
    resumed, hist, _ = train_digits(_cfg(dev, tmp_path / "part", resume=True, amp=True))
    assert [m.epoch for m in hist] == [0, 1, 2]
    assert resumed.scaler.state_dict() == full.scaler.state_dict()
    for (name, a), (_, b) in zip(full.model.state_dict().items(),
                                 resumed.model.state_dict().items()):
        np.testing.assert_array_equal(a.to_host(), b.to_host(), err_msg=name)


def test_corrupt_checkpoint_is_rejected(tmp_path: Path) -> None:
    from netcl.core.device import manager

    dev = manager.default("cpu")
    assert dev is not None
    train_digits(_cfg(dev, tmp_path, stop_after=1))
    path = tmp_path / "last.netcl"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x55
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        train_digits(_cfg(dev, tmp_path, resume=True))


def test_trainer_arguments() -> None:
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        Trainer(None, None, lambda a, b: a, [], epochs=0)
    with pytest.raises(ValueError, match="resume=True needs a checkpoint_dir"):
        Trainer(None, None, lambda a, b: a, [], resume=True)
