"""train_digits_parallel: two ranks train the digits CNN as one process does (SyncBatchNorm,
the same global batches), rank 0 checkpoints, and a second run resumes from it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from netcl.trainer._checkpoint import read_training_checkpoint
from netcl.trainer._digits import DigitsConfig, train_digits
from netcl.trainer._parallel import train_digits_parallel

# The conv biases in front of a BatchNorm have a gradient of exactly zero (the norm removes
# any shift); what the float sums leave is noise, which Adam's first steps scale up to +-lr,
# so these biases (and the running means they shift) differ between any two reduction orders
# (one process or two ranks alike) without changing what the model computes.
NOISE_ONLY = ("model/0.bias", "model/3.bias", "model/1.running_mean", "model/4.running_mean")


def test_two_ranks_train_as_one_process_checkpoint_and_resume(tmp_path: Path) -> None:
    seen: list[int] = []
    cfg = DigitsConfig(device="cpu", epochs=2, batch_size=64, progress=False,
                       checkpoint_dir=tmp_path / "two", stop_after=1,
                       on_epoch_end=lambda m: seen.append(m.epoch))
    first = train_digits_parallel(cfg, 2)
    assert [m.epoch for m in first] == [0] and (tmp_path / "two" / "last.netcl").is_file()

    _, one, _ = train_digits(DigitsConfig(device="cpu", epochs=2, batch_size=64,
                                          progress=False, stop_after=1, capture=False,
                                          checkpoint_dir=tmp_path / "one"))
    assert first[0].val_accuracy == one[0].val_accuracy
    got, _ = read_training_checkpoint(tmp_path / "two" / "last.netcl")
    want, _ = read_training_checkpoint(tmp_path / "one" / "last.netcl")
    for name in sorted(k for k in want if k.startswith("model/") and k not in NOISE_ONLY):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-4, atol=1e-5, err_msg=name)

    cfg.resume, cfg.stop_after = True, None
    second = train_digits_parallel(cfg, 2)
    assert [m.epoch for m in second] == [0, 1] and seen == [0, 0, 1]
    assert second[0] == first[0]  # restored from rank 0's checkpoint
    assert second[-1].val_accuracy is not None and second[-1].val_accuracy > 0.9
