"""``Tensor.__setitem__`` against NumPy's assignment, on every backend present: basic keys
(ints, slices with any step, None, Ellipsis), advanced keys (boolean masks, integer index
arrays and Tensors), values as numbers, arrays and Tensors (broadcast and cast), views as
targets, autograd's refusal and the typed errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.ops import _setitem

DTYPES = ["float32", "float16", "int32"]

# (shape, key): every basic key kind, on odd sizes
BASIC = [
    ((257,), 0), ((257,), -1), ((257,), np.s_[::2]), ((257,), np.s_[::-1]),
    ((257,), np.s_[-3::-7]), ((257,), np.s_[1:-1:3]), ((257,), np.s_[5:2]),
    ((257,), np.s_[-1000:1000]), ((1,), np.s_[...]), ((1,), 0), ((1,), np.s_[None, ::-1]),
    ((7, 33), np.s_[:, 1]), ((7, 33), np.s_[..., :3]), ((7, 33), np.s_[..., -1]),
    ((7, 33), np.s_[::2]), ((7, 33), np.s_[::-2, 1::4]), ((7, 33), np.s_[-2, ::-1]),
    ((7, 33), np.s_[None, 2:5, None]), ((7, 33), np.s_[3]), ((7, 33), np.s_[1:4]),
    ((7, 33), np.s_[()]), ((1, 7, 33), np.s_[0, :, ::5]), ((1, 7, 33), np.s_[..., 2, None]),
    ((1, 7, 33), np.s_[:, None, ::-3, -2]), ((1, 7, 33), np.s_[0, ..., 0]),
    ((1, 7, 33), np.s_[:, 6:0:-2, 32]),
]

# (shape, key maker): advanced keys; the maker gets the rng and builds the key
ADVANCED: list[tuple[tuple[int, ...], str]] = [
    ((257,), "mask"), ((7, 33), "mask"), ((1, 7, 33), "mask"), ((7, 33), "mask-rows"),
    ((7, 33), "mask-cols"), ((257,), "list"), ((257,), "array-neg"), ((7, 33), "rows"),
    ((7, 33), "cols"), ((7, 33), "rows-slice"), ((1, 7, 33), "int-apart"),
    ((1, 7, 33), "int-beside"), ((7, 33), "ellipsis-idx"), ((7, 33), "idx-none"),
    ((7, 33), "idx-2d"), ((1,), "list"), ((7, 33), "empty"),
]


def _advanced_key(kind: str, shape: tuple[int, ...], rng: np.random.Generator) -> Any:
    """A key with one advanced index (no repeated positions: their order is unspecified)."""
    def pick(size: int, k: int) -> np.ndarray[Any, Any]:
        return rng.permutation(size)[:k]

    if kind == "mask":
        return rng.random(shape) < 0.4
    if kind == "mask-rows":
        return rng.random(shape[:1]) < 0.5
    if kind == "mask-cols":
        return np.s_[1:, rng.random(shape[1]) < 0.5]
    if kind == "list":
        return pick(shape[0], min(shape[0], 5)).tolist()
    if kind == "array-neg":
        return pick(shape[0], 9) - shape[0]
    if kind == "rows":
        return pick(shape[0], 3)
    if kind == "cols":
        return np.s_[:, pick(shape[1], 6)]
    if kind == "rows-slice":
        return np.s_[pick(shape[0], 4), 3:30:4]
    if kind == "int-apart":  # NumPy: the index dims go first
        return np.s_[0, :, pick(shape[2], 5)]
    if kind == "int-beside":
        return np.s_[:, 2, pick(shape[2], 5)]
    if kind == "ellipsis-idx":
        return np.s_[..., pick(shape[-1], 4)]
    if kind == "idx-none":
        return np.s_[pick(shape[0], 2), None]
    if kind == "idx-2d":
        return np.s_[1:3, pick(shape[1], 6).reshape(2, 3)]
    if kind == "empty":
        return np.zeros(0, np.int64)
    raise AssertionError(kind)


def _host(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray[Any, Any]:
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(-50, 50, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(dtype)


def _on_device(dev: DeviceHandle, key: Any) -> Any:
    """``key`` with every index array as a Tensor on ``dev`` (masks as uint8, as PyTorch's)."""
    items = key if isinstance(key, tuple) else (key,)
    out = tuple(Tensor.from_host(dev.queue, np.asarray(k)) if isinstance(k, np.ndarray) else k
                for k in items)
    return out if isinstance(key, tuple) else out[0]


def _check(dev: DeviceHandle, shape: tuple[int, ...], dtype: str, key: Any, value: str,
           tensor_key: bool = False) -> None:
    a = _host(shape, dtype, 1)
    x = Tensor.from_host(dev.queue, a, dtype=dtype)
    selected = a[key].shape
    if value == "scalar":
        v: Any = 3 if dtype == "int32" else -1.5
        ref: Any = v
    elif value == "row":  # broadcast along every leading dim
        ref = _host(selected[-1:] if selected else (), dtype, 2)
        v = Tensor.from_host(dev.queue, ref, dtype=dtype)
    elif value == "array":
        ref = _host(selected, dtype, 3)
        v = ref
    else:
        ref = _host(selected, dtype, 4)
        v = Tensor.from_host(dev.queue, ref, dtype=dtype)
    a[key] = ref
    x[_on_device(dev, key) if tensor_key else key] = v
    assert x.dtype == dtype and x.shape == shape
    np.testing.assert_array_equal(x.to_host(), a)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", ["scalar", "row", "array", "tensor"])
@pytest.mark.parametrize(("shape", "key"), BASIC, ids=[f"{s}-{k!r}" for s, k in BASIC])
def test_basic_keys_match_numpy(dev: DeviceHandle, shape: tuple[int, ...], key: Any,
                                value: str, dtype: str) -> None:
    _check(dev, shape, dtype, key, value)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("value", ["scalar", "row", "array", "tensor"])
@pytest.mark.parametrize("tensor_key", [False, True], ids=["host-key", "tensor-key"])
@pytest.mark.parametrize(("shape", "kind"), ADVANCED, ids=[f"{s}-{k}" for s, k in ADVANCED])
def test_advanced_keys_match_numpy(dev: DeviceHandle, shape: tuple[int, ...], kind: str,
                                   tensor_key: bool, value: str, dtype: str) -> None:
    key = _advanced_key(kind, shape, np.random.default_rng(len(kind) + sum(shape)))
    if tensor_key and kind == "list":
        key = np.asarray(key)
    _check(dev, shape, dtype, key, value, tensor_key)


def test_views_as_targets_write_through(dev: DeviceHandle) -> None:
    a = _host((7, 33), "float32", 5)
    x = Tensor.from_host(dev.queue, a)
    row = x[2]  # a view sharing x's storage (offset 66)
    row[::-4] = 0.5
    a[2, ::-4] = 0.5
    block = x[3:6]
    block[:, [1, 5]] = Tensor.from_host(dev.queue, np.array([7.0, 8.0], np.float32))
    a[3:6, [1, 5]] = [7.0, 8.0]
    mask = a[1] > 0
    row1 = x[1]
    row1[mask] = -2.0
    a[1][mask] = -2.0
    block[1, ...] = np.arange(33, dtype=np.float32)
    a[4] = np.arange(33)
    np.testing.assert_array_equal(x.to_host(), a)


def test_values_take_the_target_dtype(dev: DeviceHandle) -> None:
    a = np.zeros(7, np.int32)
    x = Tensor.from_host(dev.queue, a)
    x[1] = 2.7  # as PyTorch: converted to int32, truncating
    x[2:4] = Tensor.from_host(dev.queue, np.array([-1.9, 3.5], np.float32))
    x[[4, 6]] = np.array([9.99, -0.5])
    x[5] = True
    assert x.tolist() == [0, 2, -1, 3, 9, 1, 0]
    h = Tensor.from_host(dev.queue, np.zeros(4, np.float32)).half()
    h[1:] = Tensor.from_host(dev.queue, np.array([1, 2, 3], np.int32))
    h[np.array([True, False, False, False])] = 0.1
    np.testing.assert_array_equal(h.to_host(), np.array([0.1, 1, 2, 3], np.float16))


def test_a_value_sharing_the_storage_is_read_before_the_write(dev: DeviceHandle) -> None:
    a = np.arange(33, dtype=np.float32)
    x = Tensor.from_host(dev.queue, a)
    x[1:] = x[:-1]
    a[1:] = a[:-1].copy()
    x[::-1] = x[0:33]
    a[::-1] = a.copy()
    np.testing.assert_array_equal(x.to_host(), a)


def test_a_mask_tensor_fills_in_place(dev: DeviceHandle) -> None:
    a = _host((7, 33), "float32", 6)
    x = Tensor.from_host(dev.queue, a)
    x[x > 0] = 0  # x > 0 is a uint8 Tensor on the device: a mask
    x[Tensor.from_host(dev.queue, (a < -1).astype(np.uint8))] = Tensor.from_host(
        dev.queue, np.float32(9))
    a[a > 0] = 0
    a[a < -1] = 9
    np.testing.assert_array_equal(x.to_host(), a)


def test_basic_keys_make_no_tensor_on_the_device(dev: DeviceHandle,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    x = Tensor.from_host(dev.queue, np.zeros((7, 33), np.float32))
    v = Tensor.from_host(dev.queue, np.ones(4, np.float32))
    made: list[Tensor] = []
    original = Tensor.__post_init__

    def counted(self: Tensor) -> None:
        made.append(self)
        original(self)

    monkeypatch.setattr(Tensor, "__post_init__", counted)
    x[::-2, 1:9:2] = v
    x[:, 0] = 3
    x[..., None, -1] = 2.5
    monkeypatch.undo()
    if dev.backend != "cpu":  # NumPy's assignment makes NumPy views only
        assert made == []
    expected = np.zeros((7, 33), np.float32)
    expected[::-2, 1:9:2] = 1
    expected[:, 0] = 3
    expected[..., None, -1] = 2.5
    np.testing.assert_array_equal(x.to_host(), expected)


def test_a_device_index_out_of_range_writes_nothing_on_opencl(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.zeros(7, np.float32))
    index = Tensor.from_host(dev.queue, np.array([1, 7, -8, -1]))
    if dev.backend == "cpu":
        with pytest.raises(IndexError, match=r"__setitem__: index 7 is out of range for dim 0 "
                                             r"of size 7"):
            x[index] = 1
    else:  # checking would read the index back to the host
        x[index] = 1
        assert x.tolist() == [0, 1, 0, 0, 0, 0, 1]


@pytest.mark.parametrize(("key", "value", "error", "match"), [
    (7, 0, IndexError, r"__setitem__: index 7 is out of range for dim 0 of size 7 "
                       r"\(key 7, tensor shape \(7, 3\)\)"),
    (np.s_[:, -4], 0, IndexError, r"index -4 is out of range for dim 1 of size 3"),
    (np.s_[0, 0, 0], 0, IndexError, r"too many indices \(3\) for a 2-d tensor"),
    (np.s_[..., ...], 0, IndexError, r"only one Ellipsis"),
    ([0, 9], 0, IndexError, r"index 9 is out of range for dim 0 of size 7"),
    (np.ones((7, 2), bool), 0, IndexError, r"mask must have the shape \(7, 3\) .* got \(7, 2\)"),
    (np.s_[::0], 0, ValueError, r"slice step must not be 0"),
    (np.s_[1:3], np.ones((3, 3)), ValueError,
     r"__setitem__: a value of shape \(3, 3\) cannot broadcast to the selected shape \(2, 3\) "
     r"\(key slice\(1, 3, None\), tensor shape \(7, 3\)\)"),
    (np.s_[[0, 1], [0, 1]], 0, TypeError, r"at most one advanced index"),
    (np.s_[0.5], 0, TypeError, r"indices must be ints, .* got float"),
    (np.array([0.5]), 0, IndexError, r"must hold integers or booleans, got dtype float64"),
    (0, "a", TypeError, r"value must be a number, a NumPy array or a Tensor, got str"),
])
def test_errors_name_the_op_key_and_shapes(dev: DeviceHandle, key: Any, value: Any,
                                           error: type[Exception], match: str) -> None:
    x = Tensor.from_host(dev.queue, np.zeros((7, 3), np.float32))
    with pytest.raises(error, match=match):
        x[key] = value
    assert x.to_host().tolist() == np.zeros((7, 3)).tolist()  # nothing written


def test_a_value_tensor_mismatching_the_advanced_selection(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.zeros((7, 3), np.float32))
    v = Tensor.from_host(dev.queue, np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"value of shape \(4,\) cannot broadcast to the "
                                         r"selected shape \(2, 3\)"):
        x[[1, 2]] = v


def test_select_plans_strides_and_offsets() -> None:
    s = _setitem.select((4, 5), np.s_[::-2, None, 1])
    assert (s.shape, s.strides, s.offset, s.advanced) == ((2, 1), (-10, 0), 16, None)
    s = _setitem.select((2, 3, 4), np.s_[:, 1, [0, 3]])  # int beside the array: in place
    assert s.shape == (2, 2) and s.advanced is not None and s.advanced.at == 1
    s = _setitem.select((2, 3, 4), np.s_[1, :, [0, 3]])  # a slice between: first
    assert s.shape == (2, 3) and s.advanced is not None and s.advanced.at == 0
    s = _setitem.select((2, 3, 4), np.s_[1, ..., None, [0, 3]])  # apart: first
    assert s.shape == (2, 3, 1) and s.advanced is not None and s.advanced.at == 0
