"""Checkpoints: round trips, atomic writes, and typed rejection of bad files."""

from __future__ import annotations

import json
import os
import pickle
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.io import CheckpointError, load_model, load_tensors, save_model, save_tensors
from netcl.io._checkpoint import _digest

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


def test_every_bit_flip_in_the_header_is_a_checkpoint_error(tmp_path: Path) -> None:
    """Every single-bit flip of the length and header, and one per byte of the data, raises
    CheckpointError and nothing else (a KeyError or a loaded file would fail here)."""
    tensors: dict[str, np.ndarray[Any, Any]] = {
        "w": np.arange(6, dtype=np.float32).reshape(2, 3), "e": np.zeros((0, 2)),
        "i": np.arange(3, dtype=np.int64)}
    p = save_tensors(tmp_path / "f.netcl", tensors, {"kind": "training", "epoch": 1})
    data = p.read_bytes()
    header_end = 8 + int.from_bytes(data[:8], "little")
    bits = [*range(header_end * 8), *range(header_end * 8, len(data) * 8, 8)]
    kinds: Counter[str] = Counter()
    escaped = []
    with open(p, "r+b", buffering=0) as f:  # flip one byte in place: rewriting files is slow
        for bit in bits:
            at = bit // 8
            f.seek(at)
            f.write(bytes([data[at] ^ (1 << (bit % 8))]))
            try:
                load_tensors(p)
                escaped.append(f"bit {bit}: loaded")
            except CheckpointError as err:
                kinds[err.kind] += 1
            except Exception as err:  # exactly what this test looks for
                escaped.append(f"bit {bit}: {type(err).__name__}: {err}")
            f.seek(at)
            f.write(data[at : at + 1])
    assert escaped == []
    assert set(kinds) <= {"corrupted", "truncated", "format"} and kinds["corrupted"] > 0


_META = {"format": "netcl-checkpoint-1", "netcl.meta": "{}", "netcl.sha256": _digest({}, "{}")}
_W = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


def _signed(meta_json: str) -> dict[str, Any]:
    """A header with no tensors whose checksum is right for ``meta_json``."""
    return {"__metadata__": {**_META, "netcl.meta": meta_json,
                             "netcl.sha256": _digest({}, meta_json)}}


def _with(entry: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"__metadata__": _META, "w": {**entry, **fields}}


CRAFTED: dict[str, tuple[Any, bytes, str]] = {  # header (or its raw bytes), data, message
    "deep list": (b"[" * 100_000 + b"]" * 100_000, b"", "nests too deeply"),
    "deep object": (b'{"__metadata__":' + b'{"a":' * 50_000 + b"1" + b"}" * 50_001, b"",
                    "nests too deeply"),
    "list header": ([], b"", "JSON list, not an object"),
    "number header": (3, b"", "JSON int, not an object"),
    "string header": ("x", b"", "JSON str, not an object"),
    "not utf-8": (b'{"\xff": 1}', b"", "not JSON"),
    "not JSON": (b"{nope", b"", "not JSON"),
    "empty header": (b"", b"", "not JSON"),
    "metadata a list": ({"__metadata__": [1]}, b"", "__metadata__ must map"),
    "metadata value a number": ({"__metadata__": {**_META, "format": 1}}, b"",
                                "__metadata__ must map"),
    "entry a list": ({"__metadata__": _META, "w": [1]}, bytes(8), "must have exactly"),
    "entry without data_offsets": ({"__metadata__": _META, "w": {"dtype": "F32", "shape": [2]}},
                                   bytes(8), "must have exactly"),
    "entry with an extra key": (_with(_W, x=1), bytes(8), "must have exactly"),
    "unknown dtype": (_with(_W, dtype="F128"), bytes(8), "has dtype 'F128'"),
    "dtype a number": (_with(_W, dtype=7), bytes(8), "has dtype 7"),
    "BF16 dtype": (_with(_W, dtype="BF16", shape=[4]), bytes(8), "has dtype 'BF16'"),
    "shape a string": (_with(_W, shape="2"), bytes(8), "has shape '2'"),
    "shape of floats": (_with(_W, shape=[2.0]), bytes(8), r"has shape \[2.0\]"),
    "negative shape": (_with(_W, shape=[-2]), bytes(8), r"has shape \[-2\]"),
    "shape of bools": (_with(_W, shape=[True, True]), bytes(8), r"has shape \[True"),
    "nested shape": (_with(_W, shape=[[2]]), bytes(8), r"has shape \[\[2\]\]"),
    "long shape": (_with(_W, shape=[-1] * 10**5), bytes(8), r"has shape \[-1, .*\.\.\.;"),
    "shape a dict": (_with(_W, shape={"a": 2}), bytes(8), "has shape {'a': 2}"),
    "negative offsets": (_with(_W, data_offsets=[-8, 0]), bytes(8), "has data_offsets"),
    "reversed offsets": (_with(_W, data_offsets=[8, 0]), bytes(8), "has data_offsets"),
    "three offsets": (_with(_W, data_offsets=[0, 4, 8]), bytes(8), "has data_offsets"),
    "string offsets": (_with(_W, data_offsets=["0", "8"]), bytes(8), "has data_offsets"),
    "float offsets": (_with(_W, data_offsets=[0.0, 8.0]), bytes(8), "has data_offsets"),
    "offsets null": (_with(_W, data_offsets=None), bytes(8), "has data_offsets None"),
    "shape and bytes disagree": (_with(_W, shape=[3]), bytes(8), "needs 12 bytes"),
    "huge shape": (_with(_W, shape=[2**62, 2**62], data_offsets=[0, 2**70]), bytes(8),
                   "needs 85070591730234615865843651857942052864 bytes"),
    "past the end": (_with(_W, shape=[4], data_offsets=[0, 16]), bytes(8),
                     "truncated: tensor data ends at byte 16"),
    "trailing bytes": (_with(_W), bytes(16), "8 bytes follow"),
    "overlapping": ({"__metadata__": _META, "a": _W, "b": {**_W, "data_offsets": [4, 12]}},
                    bytes(12), "overlaps"),
    "gap": ({"__metadata__": _META, "a": {**_W, "shape": [1], "data_offsets": [0, 4]},
             "b": {**_W, "shape": [1], "data_offsets": [8, 12]}}, bytes(12), "leaves a gap"),
    "foreign safetensors": ({"w": _W}, bytes(8), "not a netcl checkpoint"),
    "no checksum": ({"__metadata__": {"format": _META["format"], "netcl.meta": "{}"}}, b"",
                    "lacks netcl.sha256"),
    "wrong checksum": ({"__metadata__": {**_META, "netcl.sha256": "0" * 64}}, b"",
                       "checksum mismatch"),
    "signed meta not JSON": (_signed("{nope"), b"", "netcl.meta is not JSON"),
    "signed meta a list": (_signed("[1]"), b"", "netcl.meta is a JSON list"),
    "signed meta too deep": (_signed("[" * 100 + "]" * 100), b"", "more than 64 levels"),
    "signed meta deeper than Python recurses": (_signed("[" * 100_000 + "]" * 100_000), b"",
                                                "more than 64 levels"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_crafted_headers_raise_checkpoint_error(tmp_path: Path, case: str) -> None:
    header, body, message = CRAFTED[case]
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    p = tmp_path / "crafted.netcl"
    p.write_bytes(len(text).to_bytes(8, "little") + text + body)
    with pytest.raises(CheckpointError, match=message) as err:
        load_tensors(p)
    assert str(p) in str(err.value) and len(str(err.value)) < 400


def test_header_length_beyond_the_file(tmp_path: Path) -> None:
    p = tmp_path / "long.netcl"
    p.write_bytes((2**63).to_bytes(8, "little") + b"{}")
    with pytest.raises(CheckpointError, match="truncated: header says"):
        load_tensors(p)
    with pytest.raises(CheckpointError, match="is not a file"):
        load_tensors(tmp_path)


def test_big_endian_and_unsupported_arrays(tmp_path: Path) -> None:
    p = save_tensors(tmp_path / "be.netcl", {"w": np.arange(3, dtype=">f4")})
    tensors, _ = load_tensors(p)
    np.testing.assert_array_equal(tensors["w"], [0, 1, 2])
    tensors["w"][0] = 5  # loaded arrays are writable
    with pytest.raises(TypeError, match="'c' has dtype complex64"):
        save_tensors(tmp_path / "c.netcl", {"c": np.zeros(2, np.complex64)})


def test_save_removes_stale_temp_files_of_its_own_name(tmp_path: Path) -> None:
    """A killed save's temporary file goes at the next save of that name; temporary files of
    other names, look-alikes, and ones newer than this save (still being written) stay."""
    stale = [tmp_path / ".last.netcl.0a1b2c3d.tmp", tmp_path / ".last.netcl.k_9x2ab7.tmp"]
    kept = [tmp_path / ".best.netcl.0a1b2c3d.tmp", tmp_path / ".last.netcl.bak.0a1b2c3d.tmp",
            tmp_path / ".last.netcl.0a1b2c3.tmp", tmp_path / ".last.netcl.ffffffff.tmp"]
    for f in stale + kept:
        f.write_bytes(b"partial")
        past = time.time() - 3600
        os.utime(f, (past, past))
    future = time.time() + 3600
    os.utime(kept[-1], (future, future))
    save_tensors(tmp_path / "last.netcl", {"w": np.ones(2, np.float32)})
    names = sorted(f.name for f in tmp_path.iterdir())
    assert names == sorted(["last.netcl", *(f.name for f in kept)])
