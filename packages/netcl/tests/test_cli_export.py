"""``netcl export``: the digits model ``netcl train`` checkpoints, as ONNX that onnxruntime runs
with netcl's predictions; bad input is a one-line error."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from netcl.cli import main
from netcl.core.device import manager
from netcl.core.tensor import Tensor
from netcl.io import read_weights
from netcl.onnx import load
from netcl.trainer._digits import digits_cnn

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the exported file")


@pytest.fixture
def few_digits(digits_subset: Callable[[int], None]) -> None:
    """``netcl train`` on the first 300 digits."""
    digits_subset(300)


@pytest.mark.usefixtures("few_digits")
def test_export_a_trained_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ckpt = tmp_path / "ck"
    assert main(["train", "--device", "cpu", "--epochs", "1", "--no-progress",
                 "--checkpoint-dir", str(ckpt)]) == 0
    onnx_path = tmp_path / "digits.onnx"
    assert main(["export", str(ckpt / "last.netcl"), str(onnx_path)]) == 0
    assert f"wrote {onnx_path}" in capsys.readouterr().out
    cpu = manager.default("cpu")
    assert cpu is not None
    q = cpu.queue
    model = digits_cnn(q)
    model.load_state_dict(read_weights(ckpt / "last.netcl"))
    model.eval()
    x = np.random.default_rng(0).random((7, 1, 8, 8), dtype=np.float32) * 16
    want = model(Tensor.from_host(q, x)).to_host()
    got = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(
        None, {"input": x})[0]
    np.testing.assert_array_equal(got.argmax(1), want.argmax(1))
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    again = load(onnx_path, queue=q)(Tensor.from_host(q, x)).to_host()  # and back into netcl
    assert np.abs(again - want).max() <= 1e-5 * np.abs(want).max()


def test_export_of_a_missing_file_fails_in_one_line(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path / "none.netcl"), str(tmp_path / "x.onnx")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("netcl: ") and "does not exist" in err and len(err.splitlines()) == 1
