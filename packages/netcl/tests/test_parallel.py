"""train_digits_parallel: two ranks train the digits CNN, rank 0 checkpoints, a second run
resumes from it, and the held-out accuracy is that of a trained model."""

from __future__ import annotations

from pathlib import Path

from netcl.trainer._digits import DigitsConfig
from netcl.trainer._parallel import train_digits_parallel


def test_two_ranks_train_checkpoint_and_resume(tmp_path: Path) -> None:
    seen: list[int] = []
    cfg = DigitsConfig(device="cpu", epochs=2, batch_size=64, progress=False,
                       checkpoint_dir=tmp_path, stop_after=1,
                       on_epoch_end=lambda m: seen.append(m.epoch))
    first = train_digits_parallel(cfg, 2)
    assert [m.epoch for m in first] == [0] and (tmp_path / "last.netcl").is_file()
    cfg.resume, cfg.stop_after = True, None
    second = train_digits_parallel(cfg, 2)
    assert [m.epoch for m in second] == [0, 1] and seen == [0, 0, 1]
    assert second[0] == first[0]  # restored from rank 0's checkpoint
    assert second[-1].val_accuracy is not None and second[-1].val_accuracy > 0.9
