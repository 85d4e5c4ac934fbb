"""Plain safetensors files and PyTorch files: both directions where they exist, every check."""

from __future__ import annotations

import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from netcl.core.tensor import Tensor
from netcl.core.testing import available_devices, device_id
from netcl.io import CheckpointError, load_safetensors, load_torch_state_dict, save_safetensors


def _torch() -> Any:
    try:
        import torch as t
    except ImportError:
        pytest.skip("torch is an optional reference")
    return t


def _arrays(rng: np.random.Generator) -> dict[str, np.ndarray[Any, Any]]:
    return {"conv.weight": rng.standard_normal((7, 3, 3, 3)).astype(np.float32),
            "fc.bias": rng.standard_normal(33).astype(np.float64),
            "h": rng.standard_normal((1, 257)).astype(np.float16),
            "steps": np.arange(7, dtype=np.int64),
            "mask": rng.random(7) > 0.5,
            "empty": np.zeros((0, 4), np.float32)}


def test_safetensors_round_trip_with_the_reference_library(tmp_path: Path) -> None:
    arrays = _arrays(np.random.default_rng(1))
    p = save_safetensors(tmp_path / "a.safetensors", arrays, {"producer": "netcl"})
    theirs = load_file(p)
    assert sorted(theirs) == sorted(arrays)
    for name, arr in arrays.items():
        np.testing.assert_array_equal(theirs[name], arr)
    q = tmp_path / "b.safetensors"
    save_file(arrays, q)
    mine = load_safetensors(q)
    for name, arr in arrays.items():
        assert mine[name].dtype == arr.dtype and mine[name].shape == arr.shape
        np.testing.assert_array_equal(mine[name], arr)
    mine["fc.bias"][0] = 5.0  # writable


@pytest.mark.parametrize("handle", available_devices(), ids=device_id)
def test_save_safetensors_takes_netcl_and_torch_tensors(tmp_path: Path, handle: Any) -> None:
    x = np.linspace(-1, 1, 7 * 5, dtype=np.float32).reshape(7, 5)
    p = save_safetensors(tmp_path / "t.safetensors", {"x": Tensor.from_host(handle.queue, x)})
    np.testing.assert_array_equal(load_file(p)["x"], x)
    t = _torch()
    p = save_safetensors(tmp_path / "u.safetensors", {"y": t.from_numpy(x).t()})
    np.testing.assert_array_equal(load_file(p)["y"], x.T)


def test_bfloat16_loads_widened_to_float32(tmp_path: Path) -> None:
    t = _torch()
    from safetensors.torch import save_file as torch_save

    src = t.tensor([1.0, -2.5, 3.140625, 0.0], dtype=t.bfloat16)
    torch_save({"b": src}, str(tmp_path / "bf.safetensors"))
    got = load_safetensors(tmp_path / "bf.safetensors")["b"]
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, src.float().numpy())


def test_load_safetensors_checks_expected_dtypes_and_shapes(tmp_path: Path) -> None:
    save_file({"w": np.zeros((2, 3), np.float32)}, tmp_path / "w.safetensors")
    p = tmp_path / "w.safetensors"
    assert load_safetensors(p, dtypes={"w": "float32"}, shapes={"w": (2, 3)})["w"].shape == (2, 3)
    with pytest.raises(CheckpointError, match=r"'w' should have shape \(3, 2\), has \(2, 3\)"):
        load_safetensors(p, shapes={"w": (3, 2)})
    with pytest.raises(CheckpointError, match="'w' should be float16, is float32"):
        load_safetensors(p, dtypes={"w": "float16"})
    with pytest.raises(CheckpointError, match="'v' should be float32, is absent"):
        load_safetensors(p, dtypes={"v": "float32"})


def test_load_safetensors_refuses_broken_files(tmp_path: Path) -> None:
    save_file({"w": np.zeros(8, np.float32)}, tmp_path / "w.safetensors")
    data = (tmp_path / "w.safetensors").read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[:-4])
    with pytest.raises(CheckpointError) as err:
        load_safetensors(tmp_path / "cut.safetensors")
    assert err.value.kind == "truncated"
    with pytest.raises(CheckpointError) as err:
        load_safetensors(tmp_path / "none.safetensors")
    assert err.value.kind == "missing" and "does not exist" in str(err.value)
    header = b'{"w": {"dtype": "F8_E4M3", "shape": [8], "data_offsets": [0, 8]}}'
    (tmp_path / "f8.safetensors").write_bytes(len(header).to_bytes(8, "little") + header
                                              + bytes(8))
    with pytest.raises(CheckpointError, match="has dtype 'F8_E4M3'"):
        load_safetensors(tmp_path / "f8.safetensors")


def test_save_safetensors_rejects_bad_input(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="'c' has dtype complex64"):
        save_safetensors(tmp_path / "c.st", {"c": np.zeros(2, np.complex64)})
    with pytest.raises(TypeError, match="must be a NumPy array, netcl Tensor or torch Tensor"):
        save_safetensors(tmp_path / "c.st", {"c": [1.0, 2.0]})
    with pytest.raises(ValueError, match="reserved"):
        save_safetensors(tmp_path / "c.st", {"__metadata__": np.zeros(1)})
    with pytest.raises(TypeError, match="metadata must map str to str"):
        save_safetensors(tmp_path / "c.st", {"c": np.zeros(1)}, {"n": 3})  # type: ignore[dict-item]
    assert not list(tmp_path.iterdir())  # nothing half-written


def _torch_state(t: Any) -> tuple[Any, dict[str, np.ndarray[Any, Any]]]:
    t.manual_seed(0)
    model = t.nn.Sequential(t.nn.Conv2d(3, 7, 3), t.nn.BatchNorm2d(7), t.nn.Flatten(),
                            t.nn.Linear(7, 33))
    state = model.state_dict()
    state["transposed"] = t.arange(35.0).reshape(5, 7).t()  # non-contiguous strides
    state["offset"] = t.arange(10.0)[3:8]  # a storage offset
    state["half"] = t.ones(3, dtype=t.float16)
    state["bf16"] = t.tensor([1.5, -2.0], dtype=t.bfloat16)
    want = {k: (v.float() if v.dtype == t.bfloat16 else v).numpy().copy()
            for k, v in state.items()}
    return state, want


@pytest.mark.parametrize("use_torch", [False, True])
def test_torch_state_dict_loads_equal(tmp_path: Path, use_torch: bool) -> None:
    t = _torch()
    state, want = _torch_state(t)
    t.save(state, tmp_path / "m.pt")
    got = load_torch_state_dict(tmp_path / "m.pt", use_torch=use_torch)
    assert list(got) == list(want)  # order kept
    for name, arr in want.items():
        assert got[name].dtype == arr.dtype and got[name].shape == arr.shape, name
        np.testing.assert_array_equal(got[name], arr)
    assert got["1.num_batches_tracked"].dtype == np.int64


def test_torch_checkpoint_dict_with_plain_values(tmp_path: Path) -> None:
    t = _torch()
    t.save({"model": {"w": t.ones(2, 2)}, "epoch": 3, "lr": 0.1, "names": ["a", "b"]},
           tmp_path / "ck.pth")
    got = load_torch_state_dict(tmp_path / "ck.pth", use_torch=False)
    assert got["epoch"] == 3 and got["lr"] == 0.1 and got["names"] == ["a", "b"]
    np.testing.assert_array_equal(got["model"]["w"], np.ones((2, 2), np.float32))


class _Evil:
    def __reduce__(self) -> tuple[Any, ...]:
        return (print, ("pwned",))


def _zip_with_pickle(path: Path, payload: bytes) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", payload)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")


def test_a_pickle_that_runs_code_is_refused(tmp_path: Path, capsys: Any) -> None:
    _zip_with_pickle(tmp_path / "evil.pt", pickle.dumps({"x": _Evil()}, protocol=2))
    refused = r"refuses to unpickle (__builtin__|builtins)\.print"
    with pytest.raises(CheckpointError, match=refused) as err:
        load_torch_state_dict(tmp_path / "evil.pt", use_torch=False)
    assert err.value.kind == "format"
    assert "pwned" not in capsys.readouterr().out
    t = _torch()  # torch's weights-only load refuses it too, and says so in the same error
    with pytest.raises(CheckpointError) as err:
        load_torch_state_dict(tmp_path / "evil.pt", use_torch=True)
    assert err.value.kind == "format" and "print" in str(err.value)
    del t


def test_broken_torch_files_are_typed_errors(tmp_path: Path) -> None:
    (tmp_path / "plain.pt").write_bytes(b"\x80\x02}q\x00.")  # a bare pickle: legacy format
    with pytest.raises(CheckpointError, match="not a zip-format PyTorch file"):
        load_torch_state_dict(tmp_path / "plain.pt", use_torch=False)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_torch_state_dict(tmp_path / "none.pt", use_torch=False)
    _zip_with_pickle(tmp_path / "list.pt", pickle.dumps([1, 2], protocol=2))
    with pytest.raises(CheckpointError, match="holds a list, not a dict"):
        load_torch_state_dict(tmp_path / "list.pt", use_torch=False)
    t = _torch()
    t.save({"w": t.arange(12.0)}, tmp_path / "w.pt")
    with zipfile.ZipFile(tmp_path / "w.pt") as z:
        members = {n: z.read(n) for n in z.namelist()}
    storage = next(n for n in members if "/data/" in n)
    members[storage] = members[storage][:20]  # 5 of the 12 floats
    with zipfile.ZipFile(tmp_path / "cut.pt", "w") as z:
        for n, raw in members.items():
            z.writestr(n, raw)
    with pytest.raises(CheckpointError, match="holds 20 bytes") as err:
        load_torch_state_dict(tmp_path / "cut.pt", use_torch=False)
    assert err.value.kind == "truncated"


def test_zero_dimensional_tensors_keep_their_shape(tmp_path: Path) -> None:
    """A 0-d array (BatchNorm's num_batches_tracked) is written and read back as 0-d."""
    from netcl.io import load_tensors, save_tensors

    scalar = np.array(7, np.int64)
    save_tensors(tmp_path / "c.netcl", {"n": scalar})
    assert load_tensors(tmp_path / "c.netcl")[0]["n"].shape == ()
    save_safetensors(tmp_path / "c.safetensors", {"n": scalar})
    got = load_file(tmp_path / "c.safetensors")["n"]
    assert got.shape == () and int(got) == 7
    assert load_safetensors(tmp_path / "c.safetensors")["n"].shape == ()
