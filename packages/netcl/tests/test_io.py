"""Checkpoints: round trips, atomic writes, and typed rejection of bad files."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.io import CheckpointError, load_model, load_tensors, save_model, save_tensors

STATE: dict[str, np.ndarray[Any, Any]] = {
    "w": np.arange(12, dtype=np.float32).reshape(3, 4),
    "h": np.linspace(0, 1, 7).astype(np.float16),
    "d": np.ones((2, 1), np.float64),
    "labels": np.arange(5, dtype=np.int64),
    "img": np.arange(33, dtype=np.uint8),
    "empty": np.zeros((0, 3), np.float32),
}


def test_round_trip_every_dtype(tmp_path: Path) -> None:
    p = save_tensors(tmp_path / "a.netcl", STATE, {"step": 7, "lr": 0.1, "nested": [1, {"x": 2}]})
    tensors, meta = load_tensors(p)
    assert meta == {"step": 7, "lr": 0.1, "nested": [1, {"x": 2}]}
    for k, v in STATE.items():
        assert tensors[k].dtype == v.dtype and tensors[k].shape == v.shape
        np.testing.assert_array_equal(tensors[k], v)


def test_crash_mid_save_keeps_previous(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "ckpt.netcl"
    save_tensors(p, {"w": np.zeros(3, np.float32)}, {"v": 1})

    def crash(*_: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        save_tensors(p, {"w": np.ones(3, np.float32)}, {"v": 2})
    monkeypatch.undo()
    tensors, meta = load_tensors(p)
    assert meta == {"v": 1} and tensors["w"].sum() == 0
    assert [f.name for f in tmp_path.iterdir()] == ["ckpt.netcl"]  # no temp file left


def test_truncated(tmp_path: Path) -> None:
    p = save_tensors(tmp_path / "t.netcl", STATE)
    data = p.read_bytes()
    for cut in (4, 20, len(data) - 10):
        p.write_bytes(data[:cut])
        with pytest.raises(CheckpointError, match="truncated") as err:
            load_tensors(p)
        assert err.value.kind == "truncated"


def test_corrupted_byte_is_caught(tmp_path: Path) -> None:
    p = save_tensors(tmp_path / "c.netcl", STATE)
    data = bytearray(p.read_bytes())
    data[-5] ^= 0xFF  # flip bits inside tensor data
    p.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="checksum mismatch") as err:
        load_tensors(p)
    assert err.value.kind == "corrupted"


def test_foreign_and_pickled_files_are_rejected(tmp_path: Path) -> None:
    p = tmp_path / "evil.netcl"
    p.write_bytes(pickle.dumps({"w": np.zeros(3)}))
    with pytest.raises(CheckpointError):
        load_tensors(p)
    with pytest.raises(CheckpointError, match="does not exist") as err:
        load_tensors(tmp_path / "nope")
    assert err.value.kind == "missing"


def test_bad_metadata_and_values(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="JSON-serialisable"):
        save_tensors(tmp_path / "m", {}, {"f": object()})
    with pytest.raises(TypeError, match="'w' must be a NumPy array"):
        save_tensors(tmp_path / "m", {"w": [1, 2]})  # type: ignore[dict-item]


class TinyModel:
    """A stand-in with the state_dict protocol (netcl.nn.Module has the same)."""

    def __init__(self, q: Any, n: int = 3) -> None:
        self.params = {"w": Tensor.from_host(q, np.arange(n * 2.0).reshape(n, 2)),
                       "b": Tensor.from_host(q, np.zeros(n))}

    def state_dict(self) -> dict[str, Tensor]:
        return dict(self.params)

    def load_state_dict(self, state: Any, strict: bool = True) -> None:
        for k, v in state.items():
            q = self.params[k].queue
            self.params[k] = Tensor.from_host(q, v)


def test_model_round_trip(dev: DeviceHandle, tmp_path: Path) -> None:
    a, b = TinyModel(dev.queue), TinyModel(dev.queue)
    b.params["w"] = Tensor.from_host(dev.queue, np.full((3, 2), 9.0))
    save_model(a, tmp_path / "m.netcl")
    load_model(b, tmp_path / "m.netcl")
    np.testing.assert_array_equal(b.params["w"].to_host(), a.params["w"].to_host())


def test_mismatched_model_is_not_half_loaded(dev: DeviceHandle, tmp_path: Path) -> None:
    save_model(TinyModel(dev.queue, n=3), tmp_path / "m.netcl")
    other = TinyModel(dev.queue, n=4)
    before = {k: v.to_host().copy() for k, v in other.params.items()}
    msg = r"shape mismatch .*w: model \(4, 2\) vs checkpoint \(3, 2\)"
    with pytest.raises(CheckpointError, match=msg):
        load_model(other, tmp_path / "m.netcl")
    for k, v in other.params.items():
        np.testing.assert_array_equal(v.to_host(), before[k])
