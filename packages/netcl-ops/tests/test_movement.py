"""Movement, gather and creation ops on every backend and float dtype against NumPy (copies
exactly), with their errors."""

from __future__ import annotations

import doctest
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops import _creation, _movement, _movement_take
from netcl.ops.testing import OpInfo, Sample, check_error, check_op


def _x(shape: tuple[int, ...], seed: int = 0) -> Any:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


_A = _x((3, 5, 7))
_T = _x((3, 4))
_idx = np.s_
_IDX = np.array([[0, 2, 1], [4, 4, 0]])  # a repeated index: its gradients add up
_SPECIAL = np.array([[np.nan, np.inf, -np.inf], [0.0, -0.0, 1.0]])
_NAN: list[Sample] = [((_SPECIAL,), {})]


def _concat(m: Any) -> Callable[..., Any]:
    """concat of ``m`` (netcl.ops or netcl.autograd.ops) taking the tensors as arguments."""
    return lambda *ts, axis=0: m.concat(list(ts), axis=axis)


def _stack(m: Any) -> Callable[..., Any]:
    return lambda *ts, axis=0: m.stack(list(ts), axis=axis)


def _np_flatten(a: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    end = end_dim % a.ndim
    return a.reshape(*a.shape[:start_dim], -1, *a.shape[end + 1:])


TABLE = [
    OpInfo("permute", ops.permute, np.transpose, [
        ((_A, (2, 0, 1)), {}), ((_A, (1, 0, 2)), {}), ((_x((257,)), (0,)), {}),
        ((_x((2, 3, 1, 4)), (3, 2, 1, 0)), {})], grad="permute",
        nan_inputs=[((_SPECIAL, (1, 0)), {})], errors=[
        ((_T, (0, 0)), {}, ValueError, "permute: dims .* is not a permutation"),
        ((_T, (0, 2)), {}, IndexError, "permute: axis 2")]),
    OpInfo("transpose", ops.transpose, lambda a, d0=-2, d1=-1: np.swapaxes(a, d0, d1), [
        ((_A,), {}), ((_A, 0, 2), {}), ((_x((33, 1)),), {})], grad="transpose"),
    OpInfo("copy", ops.copy, lambda a: a, [((_A,), {})], grad="copy", nan_inputs=_NAN),
    OpInfo("contiguous", ops.contiguous, lambda a: a, [((_A,), {})], grad="contiguous"),
    OpInfo("reshape", ops.reshape, lambda a, shape: a.reshape(shape), [
        ((_A, (5, -1)), {}), ((_x((2, 6)), (3, -1)), {}), ((_x((7,)), (7, 1)), {})],
        grad="reshape"),
    OpInfo("view", ops.view, lambda a, shape: a.reshape(shape), [
        ((_A, (105,)), {}), ((_T, (6, 2)), {})], grad="view", errors=[
        ((_T, (-1, -1)), {}, ValueError, "only one dimension"),
        ((_T, (5, -1)), {}, ValueError, "view: cannot view 12")]),
    OpInfo("flatten", ops.flatten, _np_flatten, [
        ((_A, 1), {}), ((_x((2, 3, 4)), 0, 1), {}), ((_A,), {})], grad="flatten"),
    OpInfo("squeeze", ops.squeeze, lambda a, axis=None: np.squeeze(a, axis), [
        ((_x((3, 1, 2)), 1), {}), ((_x((3, 1, 33, 1)),), {})], grad="squeeze", errors=[
        ((_T, 0), {}, ValueError, "squeeze: axis 0 has size 3")]),
    OpInfo("unsqueeze", ops.unsqueeze, np.expand_dims, [
        ((_x((3, 2)), -1), {}), ((_A, 1), {})], grad="unsqueeze"),
    OpInfo("getitem", ops.getitem, lambda a, key: a[key], [
        ((_A, _idx[1]), {}), ((_A, _idx[:, 1:4]), {}), ((_A, _idx[::-1, ::2, 3]), {}),
        ((_A, _idx[..., 6]), {}), ((_A, _idx[None, 2, ..., -3:]), {}),
        ((_A, _idx[5:, :]), {}), ((_x((257,)), _idx[1::7]), {})], grad="getitem",
        nan_inputs=[((_SPECIAL, _idx[::-1, 1:]), {})], errors=[
        ((_T, 3), {}, IndexError, "getitem: index 3 is out of range for axis 0 of size 3"),
        ((_T, (0, 0, 0)), {}, IndexError, "too many indices"),
        ((_T, _idx[::0]), {}, ValueError, "step must not be 0"),
        ((_T, (..., ...)), {}, IndexError, "one Ellipsis")]),
    OpInfo("slice", ops.slice, lambda a, starts, stops, steps=None, axes=None: a[
        tuple(_key(a.ndim, starts, stops, steps, axes))], [
        ((_A, [1], [3]), {}), ((_A, [0, -1], [None, None], [2, -2], [2, 1]), {})],
        grad="slice", errors=[((_T, [0, 1], [1]), {}, ValueError, "differ in length")]),
    OpInfo("concat", _concat(ops), lambda *arrs, axis=0: np.concatenate(arrs, axis=axis), [
        ((_A, _x((2, 5, 7))), {}), ((_A, _x((3, 1, 7)), _x((3, 2, 7))), {"axis": 1}),
        ((_A, _A), {"axis": -1}), ((_x((0, 4)), _x((3, 4))), {})], grad=_concat),
    OpInfo("stack", _stack(ops), lambda *arrs, axis=0: np.stack(arrs, axis=axis), [
        ((_A, _A), {}), ((_x((7,)), _x((7,), 1), _x((7,), 2)), {"axis": 1})], grad=_stack),
    OpInfo("pad", ops.pad, lambda a, pads, value=0.0: np.pad(
        a, _np_widths(a.ndim, pads), constant_values=value), [
        ((_A, (1, 2)), {}), ((_A, (0, 1, 2, 0, 1, 1)), {"value": -0.1}), ((_x((7,)), (3, 0)), {})],
        grad="pad", nan_inputs=[((_SPECIAL, (1, 1)), {"value": np.nan})], errors=[
        ((_T, (1, -1)), {}, ValueError, "pad: pads must be >= 0"),
        ((_T, (1,)), {}, ValueError, "pairs")]),
    OpInfo("broadcast_to", ops.broadcast_to, np.broadcast_to, [
        ((_x((3, 1)), (3, 4)), {}), ((_x((7,)), (2, 3, 7)), {}), ((_x((1,)), (0, 5)), {})],
        grad="broadcast_to", errors=[
        ((_T, (3, 5)), {}, ValueError,
         r"broadcast_to: cannot broadcast shape \(3, 4\) to \(3, 5\)")]),
    OpInfo("gather", ops.gather, lambda a, axis, i: np.take_along_axis(a, i, axis), [
        ((_x((2, 6)), 1, _IDX), {}), ((_x((5, 3)), 0, _IDX), {})], grad="gather", errors=[
        ((_T, 0, _T), {}, TypeError, "gather: index must be int32 or int64")]),
    OpInfo("index_select", ops.index_select, lambda a, axis, i: np.take(a, i, axis=axis), [
        ((_x((5, 6)), 0, _IDX[1]), {}), ((_A, -1, _IDX[0]), {}),
        ((_x((5,)), 0, np.array([4, 4, 1])), {})], grad="index_select", errors=[
        ((_T, 0, _IDX), {}, ValueError, "must be 1-d")]),
    OpInfo("embedding", ops.embedding, lambda i, w: w[i], [((_IDX, _x((5, 6))), {})],
           grad="embedding", errors=[
        ((_IDX, _x((12,))), {}, ValueError, "embedding: weight must be 2-d")]),
]


def _key(ndim: int, starts: Any, stops: Any, steps: Any, axes: Any) -> list[Any]:
    key: list[Any] = [slice(None)] * ndim
    steps = steps or [None] * len(starts)
    for a, s, e, st in zip(axes or range(len(starts)), starts, stops, steps):
        key[a] = slice(s, e, st)
    return key


def _np_widths(ndim: int, pads: Any) -> list[tuple[int, int]]:
    widths = [(0, 0)] * ndim
    for k in range(len(pads) // 2):
        widths[ndim - 1 - k] = (pads[2 * k], pads[2 * k + 1])
    return widths


FLOATS = ["float32", "float16", "float64"]


def _need(dev: DeviceHandle, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")


def _exact(got: Any, want: Any) -> None:
    """A copy is exact: the tolerance of check_op would let a float16 or float32 round trip
    of float64 values (or a float32 fill value) through."""
    np.testing.assert_array_equal(got, np.asarray(want).astype(got.dtype))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("info", TABLE, ids=lambda i: i.name)
def test_movement(dev: DeviceHandle, info: OpInfo, dtype: str) -> None:
    _need(dev, dtype)
    for args, kwargs in [*info.samples, *info.nan_inputs]:
        got = check_op(dev, info.op, info.ref, args, kwargs, dtype=dtype)
        rounded = [a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                   for a in args]
        _exact(got, info.ref(*rounded, **kwargs))


@pytest.mark.parametrize("info", [i for i in TABLE if i.errors], ids=lambda i: i.name)
def test_row_errors(dev: DeviceHandle, info: OpInfo) -> None:
    for args, kwargs, exc, pattern in info.errors:
        check_error(dev, info.op, args, kwargs, exc, pattern)


@pytest.mark.parametrize("dtype", ["int32", "uint8"])
def test_movement_dtypes(dev: DeviceHandle, dtype: str) -> None:
    """Copies move integer dtypes unchanged too."""
    a = (np.abs(_A) * 40).astype(dtype)
    x = Tensor.from_host(dev.queue, a, dtype=dtype)
    got = ops.getitem(x, _idx[::-1, 1:, ::2])
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.to_host(), a[::-1, 1:, ::2])


def test_views(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, _A)
    assert ops.view(x, (5, -1)).shape == (5, 21) and ops.reshape(x, -1).shape == (105,)
    assert ops.flatten(x, 1).shape == (3, 35) and ops.flatten(x, 0, 1).shape == (15, 7)
    assert ops.unsqueeze(x, 1).shape == (3, 1, 5, 7) and ops.unsqueeze(x, -1).shape[-1] == 1
    assert ops.squeeze(ops.view(x, (3, 1, 35, 1))).shape == (3, 35)
    assert ops.squeeze(ops.view(x, (3, 1, 35, 1)), 1).shape == (3, 35, 1)
    v = ops.view(x, (105,))
    assert v._base is x
    np.testing.assert_array_equal(ops.getitem(v, _idx[7:9]).to_host(),
                                  _A.astype(np.float32).reshape(-1)[7:9])
    assert ops.contiguous(x) is x
    off = Tensor(buffer=x.buffer, shape=(7,), dtype=x.dtype, context=x.context, queue=x.queue,
                 array=None if x.array is None else x.array.reshape(-1)[7:14], offset=7,
                 persistent=True, _base=x, _backend=x._backend)
    if x.array is None:  # an offset view (OpenCL): contiguous copies it to offset 0
        c = ops.contiguous(off)
        assert c is not off and c.offset == 0
        np.testing.assert_array_equal(c.to_host(), _A.astype(np.float32).reshape(-1)[7:14])
        np.testing.assert_array_equal(ops.add(off, 1.0).to_host(),
                                      _A.astype(np.float32).reshape(-1)[7:14] + 1)


# -- gathers ------------------------------------------------------------------------------

_I = np.array([[0, 2, 1], [4, 4, 0]])


@pytest.mark.parametrize("dtype,index_dtype", [("float32", "int32"), ("float32", "int64"),
                                               ("float16", "int64"), ("float64", "int32")])
def test_gathers(dev: DeviceHandle, dtype: str, index_dtype: str) -> None:
    _need(dev, dtype)
    x = _x((5, 6))
    i = _I.astype(index_dtype)
    cases: list[tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...]]] = [
        (lambda a, b: ops.gather(a, 1, b), lambda a, b: np.take_along_axis(a, b, 1), (x[:2], i)),
        (lambda a, b: ops.gather(a, 0, b), lambda a, b: np.take_along_axis(a, b, 0),
         (x[:, :3], i)),
        (lambda a, b: ops.index_select(a, 0, b), lambda a, b: np.take(a, b, axis=0), (x, i[1])),
        (lambda a, b: ops.index_select(a, -1, b), lambda a, b: np.take(a, b, axis=-1),
         (_A, i[0])),
        (ops.embedding, lambda b, w: w[b], (i, x)),
    ]
    for op, ref, args in cases:
        got = check_op(dev, op, ref, args, dtype=dtype)
        _exact(got, ref(*(a.astype(dtype) if a.dtype.kind == "f" else a for a in args)))


def test_gather_out_of_range(dev: DeviceHandle) -> None:
    """NumPy raises IndexError; OpenCL reads nothing out of bounds and yields NaN / 0."""
    x = Tensor.from_host(dev.queue, np.arange(6.0).reshape(2, 3))
    i = Tensor.from_host(dev.queue, np.array([2, 3, -1]))
    if dev.backend == "cpu":
        with pytest.raises(IndexError, match="index_select: index 3 is out of range for axis 1"):
            ops.index_select(x, 1, i)
        return
    out = ops.index_select(x, 1, i).to_host()
    np.testing.assert_array_equal(out[:, 0], [2.0, 5.0])
    assert np.isnan(out[:, 1:]).all()
    xi = Tensor.from_host(dev.queue, np.arange(6, dtype=np.int32).reshape(2, 3))
    np.testing.assert_array_equal(ops.index_select(xi, 1, i).to_host()[:, 1:], 0)


# -- creation -----------------------------------------------------------------------------


def test_creation(dev: DeviceHandle) -> None:
    q = dev.queue
    np.testing.assert_array_equal(ops.zeros(q, (2, 3)).to_host(), np.zeros((2, 3)))
    np.testing.assert_array_equal(ops.ones(q, 7).to_host(), np.ones(7))
    full = ops.full(q, (257,), 2.5)
    assert full.dtype == "float32" and (full.to_host() == 2.5).all()
    assert ops.full(q, (2,), 3).dtype == "int64"
    assert ops.zeros(q, (0, 4)).shape == (0, 4)
    x = ops.fill(Tensor.from_host(q, _A), -1.0)
    assert (x.to_host() == -1).all()
    np.testing.assert_array_equal(ops.arange(q, 7).to_host(), np.arange(7))
    np.testing.assert_array_equal(ops.arange(q, 10, 0, -3).to_host(), [10, 7, 4, 1])
    # start + i * step of quarters: exact in float32
    np.testing.assert_array_equal(ops.arange(q, 0.5, 3.0, 0.25).to_host(),
                                  np.arange(0.5, 3.0, 0.25))
    assert ops.arange(q, 3, 3).shape == (0,)
    if supports_dtype(dev, "float64"):
        np.testing.assert_array_equal(ops.arange(q, 0, 1, 0.125, "float64").to_host(),
                                      np.arange(0, 1, 0.125))


@pytest.mark.parametrize("dtype", FLOATS)
def test_creation_float_dtypes(dev: DeviceHandle, dtype: str) -> None:
    """Fill values reach the kernel in the dtype's compute type (0.1 is not a float32)."""
    _need(dev, dtype)
    q = dev.queue
    x = Tensor.from_host(q, _A, dtype=dtype)
    for got, want in [(ops.zeros(q, (2, 3), dtype), np.zeros((2, 3))),
                      (ops.ones(q, 7, dtype), np.ones(7)),
                      (ops.full(q, (257,), 0.1, dtype), np.full(257, 0.1)),
                      (ops.fill(x, -0.1), np.full(_A.shape, -0.1)),
                      (ops.zeros(q, (0, 4), dtype), np.zeros((0, 4)))]:
        assert got.dtype == dtype
        _exact(got.to_host(), want)
    got = ops.arange(q, 0.1, 3.0, 0.1, dtype)
    assert got.dtype == dtype
    assert_close(got.to_host(), 0.1 + np.arange(29) * 0.1, dtype)


@pytest.mark.parametrize("dtype", ["int64", *FLOATS])
def test_one_hot(dev: DeviceHandle, dtype: str) -> None:
    _need(dev, dtype)
    y = np.array([[0, 3], [2, 1], [3, 3]], dtype=np.int32)
    check_op(dev, lambda t: ops.one_hot(t, 4, dtype), lambda a: np.eye(4)[a], (y,),
             dtype=dtype, out_dtype=dtype)


def test_one_hot_out_of_range(dev: DeviceHandle) -> None:
    y = Tensor.from_host(dev.queue, np.array([1, 5]))
    if dev.backend == "cpu":
        with pytest.raises(ValueError, match="one_hot: label 5 is out of range for 3 classes"):
            ops.one_hot(y, 3)
        return
    np.testing.assert_array_equal(ops.one_hot(y, 3).to_host(), [[0, 1, 0], [0, 0, 0]])


# -- errors -------------------------------------------------------------------------------

# errors of one op are rows of its OpInfo (netcl-autograd's op raises them too); these are
# the others
_L = np.array([0, 1])
ERRORS = [
    ("getitem_tensor", lambda x, i: ops.getitem(x, i), TypeError, "use index_select or gather"),
    ("concat_shapes", lambda x, i: ops.concat([x, ops.transpose(x)]), ValueError,
     r"concat: shapes \(3, 4\) and \(4, 3\) differ off axis 0"),
    ("concat_dtypes", lambda x, i: ops.concat([x, ops.cast(x, "int32")]), TypeError,
     "concat: tensors have different dtypes"),
    ("concat_empty", lambda x, i: ops.concat([]), TypeError, "non-empty sequence"),
    ("stack_shapes", lambda x, i: ops.stack([x, ops.transpose(x)]), ValueError, "stack: shapes"),
    ("pad_float_on_int", lambda x, i: ops.pad(i, (1, 1), 0.5), TypeError, "pad: float value"),
    ("gather_shape", lambda x, i: ops.gather(x, 0, ops.view(i, (2, 1))), ValueError,
     "gather: index shape"),
    ("one_hot_classes", lambda x, i: ops.one_hot(i, 0), ValueError, "num_classes"),
    ("one_hot_float", lambda x, i: ops.one_hot(x, 3), TypeError, "one_hot: labels must be"),
    ("arange_step", lambda x, i: ops.arange(x.queue, 0, 5, 0), ValueError, "step must not be 0"),
]


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c[0])
def test_errors(dev: DeviceHandle, case: Any) -> None:
    _, op, exc, pattern = case
    check_error(dev, op, (_T, _L), {}, exc, pattern)


def test_doctests() -> None:
    for module in (_movement, _movement_take, _creation):
        assert doctest.testmod(module).failed == 0, module.__name__
