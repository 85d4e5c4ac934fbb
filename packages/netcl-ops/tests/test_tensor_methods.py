"""Tensor methods and operators (the slots netcl-ops fills) against NumPy on every device."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import netcl.core.tensor_methods as tensor_methods
import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.shapes import BroadcastError
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close
from netcl.ops._tensor_methods import METHODS


@dataclass(frozen=True)
class MethodCase:
    """One method or operator: what it does to netcl tensors and to NumPy arrays."""

    name: str
    netcl: Callable[..., Any]
    numpy: Callable[..., Any]
    arity: int = 1
    positive: bool = False  # inputs in (0.5, 2): log, sqrt, pow


A = (3, 7)  # odd sizes: no tile divides them
B = (7,)

CASES = [
    MethodCase("add", lambda a, b: a + b, lambda a, b: a + b, 2),
    MethodCase("radd_number", lambda a: 2.5 + a, lambda a: 2.5 + a),
    MethodCase("sub", lambda a, b: a - b, lambda a, b: a - b, 2),
    MethodCase("rsub_number", lambda a: 1 - a, lambda a: 1 - a),
    MethodCase("mul", lambda a, b: a * b, lambda a, b: a * b, 2),
    MethodCase("rmul_number", lambda a: 3 * a, lambda a: 3 * a),
    MethodCase("truediv", lambda a, b: a / b, lambda a, b: a / b, 2, True),
    MethodCase("rtruediv_number", lambda a: 1 / a, lambda a: 1 / a, 1, True),
    MethodCase("pow_number", lambda a: a ** 2, lambda a: a ** 2),
    MethodCase("rpow_number", lambda a: 2 ** a, lambda a: 2 ** a),
    MethodCase("pow_tensor", lambda a, b: a ** b, lambda a, b: a ** b, 2, True),
    MethodCase("neg", lambda a: -a, lambda a: -a),
    MethodCase("pos", lambda a: +a, lambda a: +a),
    MethodCase("abs", lambda a: abs(a), np.abs),
    MethodCase("matmul", lambda a, b: a @ b.T, lambda a, b: a @ b.T, 2),
    MethodCase("eq", lambda a, b: a == b, lambda a, b: a == b, 2),
    MethodCase("ne_number", lambda a: a != 0.5, lambda a: a != np.float32(0.5)),
    MethodCase("lt", lambda a, b: a < b, lambda a, b: a < b, 2),
    MethodCase("le_number", lambda a: a <= 0, lambda a: a <= 0),
    MethodCase("gt", lambda a, b: a > b, lambda a, b: a > b, 2),
    MethodCase("ge_number", lambda a: a >= 0, lambda a: a >= 0),
    MethodCase("exp", lambda a: a.exp(), np.exp),
    MethodCase("log", lambda a: a.log(), np.log, 1, True),
    MethodCase("sqrt", lambda a: a.sqrt(), np.sqrt, 1, True),
    MethodCase("rsqrt", lambda a: a.rsqrt(), lambda a: 1 / np.sqrt(a), 1, True),
    MethodCase("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0)),
    MethodCase("sigmoid", lambda a: a.sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    MethodCase("tanh", lambda a: a.tanh(), np.tanh),
    MethodCase("square", lambda a: a.square(), np.square),
    MethodCase("clamp", lambda a: a.clamp(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5)),
    MethodCase("maximum", lambda a, b: a.maximum(b), np.maximum, 2),
    MethodCase("sum", lambda a: a.sum(), np.sum),
    MethodCase("sum_dim", lambda a: a.sum(dim=1), lambda a: a.sum(axis=1)),
    MethodCase("sum_keepdim", lambda a: a.sum(0, keepdim=True), lambda a: a.sum(0, keepdims=True)),
    MethodCase("mean", lambda a: a.mean(dim=-1), lambda a: a.mean(axis=-1)),
    MethodCase("var", lambda a: a.var(1), lambda a: a.var(1, ddof=1)),
    MethodCase("std", lambda a: a.std(), lambda a: a.std(ddof=1)),
    MethodCase("max", lambda a: a.max(), np.max),
    MethodCase("max_dim", lambda a: a.max(dim=1).values, lambda a: a.max(axis=1)),
    MethodCase("max_dim_indices", lambda a: a.max(1)[1], lambda a: a.argmax(axis=1)),
    MethodCase("min_dim", lambda a: a.min(dim=0).values, lambda a: a.min(axis=0)),
    MethodCase("min_dim_indices", lambda a: a.min(0).indices, lambda a: a.argmin(axis=0)),
    MethodCase("argmax", lambda a: a.argmax(dim=1), lambda a: a.argmax(axis=1)),
    MethodCase("argmin", lambda a: a.argmin(), lambda a: np.argmin(a)),
    MethodCase("softmax", lambda a: a.softmax(dim=1),
               lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True)),
    MethodCase("log_softmax", lambda a: a.log_softmax(0),
               lambda a: a - np.log(np.exp(a).sum(0, keepdims=True))),
    MethodCase("reshape", lambda a: a.reshape(7, 3), lambda a: a.reshape(7, 3)),
    MethodCase("view_infer", lambda a: a.view(-1), lambda a: a.reshape(-1)),
    MethodCase("flatten", lambda a: a.flatten(), lambda a: a.reshape(-1)),
    MethodCase("unsqueeze", lambda a: a.unsqueeze(1), lambda a: a[:, None]),
    MethodCase("squeeze", lambda a: a.unsqueeze(0).squeeze(0), lambda a: a),
    MethodCase("permute", lambda a: a.permute(1, 0), lambda a: a.transpose(1, 0)),
    MethodCase("transpose", lambda a: a.transpose(0, 1), lambda a: a.T),
    MethodCase("T", lambda a: a.T, lambda a: a.T),
    MethodCase("t", lambda a: a.t(), lambda a: a.T),
    MethodCase("expand", lambda a: a[None].expand(2, -1, -1), lambda a: np.stack([a, a])),
    MethodCase("contiguous", lambda a: a.contiguous(), lambda a: a),
    MethodCase("clone", lambda a: a.clone(), lambda a: a.copy()),
    MethodCase("float_of_compare", lambda a: (a > 0).float(), lambda a: (a > 0) * 1.0),
    MethodCase("getitem_int", lambda a: a[1], lambda a: a[1]),
    MethodCase("getitem_slice", lambda a: a[1:3], lambda a: a[1:3]),
    MethodCase("getitem_column", lambda a: a[:, 2], lambda a: a[:, 2]),
    MethodCase("getitem_step", lambda a: a[::-2, 1:6:2], lambda a: a[::-2, 1:6:2]),
    MethodCase("getitem_none_ellipsis", lambda a: a[None, ..., 3], lambda a: a[None, ..., 3]),
    MethodCase("getitem_rows", lambda a: a[[2, 0, 2]], lambda a: a[[2, 0, 2]]),
    MethodCase("getitem_mask", lambda a: a[a > 0], lambda a: a[a > 0]),
]


def _inputs(case: MethodCase) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(len(case.name))
    shapes = [A, B] if case.arity == 2 and case.name not in ("matmul",) else [A, A]
    out = []
    for shape in shapes[:case.arity]:
        if case.positive:
            out.append(rng.uniform(0.5, 2.0, shape).astype(np.float32))
        else:
            out.append(rng.standard_normal(shape).astype(np.float32))
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_method_matches_numpy(dev: DeviceHandle, case: MethodCase) -> None:
    arrays = _inputs(case)
    tensors = [Tensor.from_host(dev.queue, a) for a in arrays]
    got = case.netcl(*tensors)
    want = np.asarray(case.numpy(*[a.astype(np.float64) for a in arrays]))
    assert isinstance(got, Tensor), type(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype == np.bool_:
        assert got.dtype == "uint8"
        np.testing.assert_array_equal(got.to_host(), want)
    elif want.dtype.kind in "iu":
        assert got.dtype == "int64"
        np.testing.assert_array_equal(got.to_host(), want)
    else:
        assert_close(got.to_host(), want, "float32", scale=4)


def test_views_share_storage_where_the_run_is_contiguous(dev: DeviceHandle) -> None:
    a = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    x = Tensor.from_host(dev.queue, a)
    for key in (1, np.s_[1:2], np.s_[0, 1], np.s_[0, 1:3], np.s_[1, None, 2], np.s_[..., :]):
        view = x[key]
        assert view._base is x, key
        np.testing.assert_array_equal(view.to_host(), a[key])
        np.testing.assert_array_equal((view * 2).to_host(), a[key] * 2)
    row = x[1]
    row.zero_()  # a view writes through, as in PyTorch
    assert x.to_host()[1].sum() == 0 and x.to_host()[0].sum() == a[0].sum()
    assert x[:, 1]._base is None  # a strided result is a copy


def test_item_tolist_numpy_and_python_conversions(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.array([[1.5, -2.0, 3.0]], dtype=np.float32))
    assert x.sum().item() == 2.5 and isinstance(x.sum().item(), float)
    assert x.argmax().item() == 2 and isinstance(x.argmax().item(), int)
    assert x.tolist() == [[1.5, -2.0, 3.0]]
    assert x.numpy().tolist() == [[1.5, -2.0, 3.0]]
    assert float(x[0, 0]) == 1.5 and int(x[0, 2]) == 3 and bool(x[0, 1])
    assert f"{x.mean():.3f}" == "0.833"
    with pytest.raises(ValueError, match=r"item: only a one-element tensor .* shape \(1, 3\)"):
        x.item()
    with pytest.raises(ValueError, match="bool: only a one-element"):
        bool(x)


def test_shape_attributes_and_size(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.zeros((2, 3, 5), dtype=np.float32))
    assert x.shape == (2, 3, 5) and x.ndim == 3 and x.dim() == 3 and x.numel() == 30
    assert x.size == 30 and x.size + 1 == 31  # the spec's contract: the element count
    assert x.size() == (2, 3, 5) and x.size(1) == 3 and x.size(-1) == 5  # PyTorch's call
    assert x.dtype == "float32" and len(x) == 2
    with pytest.raises(IndexError, match="size: dim 3 is out of range for a 3-d tensor"):
        x.size(3)


def test_to_dtype_device_and_casts(dev: DeviceHandle) -> None:
    a = np.array([1.7, -2.2, 3.0], dtype=np.float32)
    x = Tensor.from_host(dev.queue, a)
    assert x.to("float32") is x and x.to(dev) is x and x.to(dev.queue) is x
    assert x.to("float16").dtype == "float16" and x.half().dtype == "float16"
    assert x.long().tolist() == [1, -2, 3] and x.long().dtype == "int64"
    assert x.int().dtype == "int32" and x.type() == "float32"
    on_cpu = x.cpu()
    assert on_cpu.backend == "cpu" and on_cpu.tolist() == x.tolist()
    back = on_cpu.to(dev, "float16")
    assert back.queue is dev.queue and back.dtype == "float16"
    assert x.to(other := Tensor.from_host(dev.queue, np.zeros(1, np.int32))).dtype == "int32"
    assert other.dtype == "int32"
    with pytest.raises(ValueError, match="unknown device selector"):
        x.to("no-such-device-xyz")
    if dev.backend == "cl":  # Tensor.device is the pyopencl.Device
        assert on_cpu.to(x.device).queue is dev.queue


def test_ndarray_and_list_operands(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.array([1.0, 2.0], dtype=np.float32))
    assert (x + np.array([1.0, 1.0], dtype=np.float32)).tolist() == [2.0, 3.0]
    assert (np.array([1.0, 1.0], dtype=np.float32) - x).tolist() == [0.0, -1.0]
    assert (x * [2, 3]).tolist() == [2.0, 6.0]
    assert (x == None) is False and (x != "a") is True  # noqa: E711 (identity fallback)
    assert len({x, x}) == 1  # hashable by identity


def test_bad_input_raises_typed_errors_naming_op_and_shapes(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.zeros((2, 3), dtype=np.float32))
    y = Tensor.from_host(dev.queue, np.zeros((4,), dtype=np.float32))
    with pytest.raises(BroadcastError, match=r"add: shapes \(2, 3\) and \(4,\)"):
        x + y
    with pytest.raises(ValueError, match=r"matmul"):
        x @ x
    with pytest.raises(IndexError, match="out of range"):
        x[5]
    with pytest.raises(IndexError, match="boolean mask must have the tensor's shape"):
        x[np.array([True, False])]
    with pytest.raises(TypeError, match="unsupported operand"):
        x + "a"
    with pytest.raises(ValueError, match="view: cannot view 6 elements"):
        x.view(4, -1)
    with pytest.raises(TypeError, match="sum: got both axis=0 and dim=1"):
        ops.sum(x, 0, dim=1)
    with pytest.raises(TypeError, match="softmax: got both axis=0 and dim=1"):
        ops.softmax(x, 0, dim=1)
    with pytest.raises(TypeError, match="mean: got both keepdims=True and keepdim=True"):
        ops.mean(x, keepdims=True, keepdim=True)


def test_reductions_take_dim_and_keepdim(dev: DeviceHandle) -> None:
    a = np.random.default_rng(3).standard_normal((5, 7)).astype(np.float32)
    x = Tensor.from_host(dev.queue, a)
    assert_close(ops.sum(x, dim=1, keepdim=True).to_host(), a.sum(1, keepdims=True))
    assert_close(ops.mean(x, dim=0).to_host(), a.mean(0))
    assert_close(ops.max(x, dim=(0, 1)).to_host(), a.max())
    assert_close(ops.var(x, dim=1, keepdim=True).to_host(), a.var(1, ddof=1, keepdims=True))
    assert ops.argmax(x, dim=1, keepdim=True).to_host().tolist() == \
        a.argmax(1)[:, None].tolist()
    assert_close(ops.softmax(x, dim=0).to_host(),
                 np.exp(a) / np.exp(a).sum(0, keepdims=True), scale=4)
    assert_close(ops.log_softmax(x).to_host(),
                 a - np.log(np.exp(a).sum(1, keepdims=True)), scale=4)


def test_factories_take_device_and_dtype(dev: DeviceHandle) -> None:
    for spec in (dev, dev.queue):
        z = ops.zeros(None, (3, 5), "int32", device=spec)
        assert z.queue is dev.queue and z.dtype == "int32" and z.tolist() == [[0] * 5] * 3
    assert ops.ones(dev.queue, 7, np.float32).dtype == "float32"
    assert ops.full(None, (2,), 7, device=dev).tolist() == [7, 7]
    assert ops.arange(None, 5, device=dev).tolist() == [0, 1, 2, 3, 4]
    assert ops.uniform(dev, (3,)).queue is dev.queue  # random ops read the same argument
    with pytest.raises(TypeError, match="zeros: got both a queue"):
        ops.zeros(dev.queue, (2,), device=dev)
    with pytest.raises(ValueError, match="unknown device selector"):
        ops.zeros("no-such-device-xyz", (2,))


def test_string_device_selectors() -> None:
    assert ops.zeros("cpu", (2,)).backend == "cpu"
    assert ops.ones(None, (1,), device="numpy").backend == "cpu"


def test_in_place_ops_write_through_views(dev: DeviceHandle) -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = Tensor.from_host(dev.queue, a)
    alias = x
    x += 1
    assert x is alias and x.tolist() == (a + 1).tolist()
    x -= np.float32(2)
    x *= 2
    x /= 4
    want = (a - 1) * 2 / 4
    assert_close(x.to_host(), want)
    x[1].zero_()  # a view of row 1
    want[1] = 0
    assert_close(x.to_host(), want)
    x[2].add_(Tensor.from_host(dev.queue, np.ones(4, np.float32)), alpha=3)
    want[2] += 3
    assert_close(x.to_host(), want)
    x.clamp_(0, 2).sub_(1, alpha=0.5)
    assert_close(x.to_host(), np.clip(want, 0, 2) - 0.5)
    row = Tensor.from_host(dev.queue, np.array([1, 2, 3, 4], np.int64))
    assert x.copy_(row).to_host().tolist() == [[1.0, 2.0, 3.0, 4.0]] * 3  # broadcast + cast
    x.fill_(7)
    assert x.tolist() == [[7.0] * 4] * 3
    with pytest.raises(ValueError, match=r"broadcast_to: cannot broadcast shape \(5,\)"):
        x.copy_(Tensor.from_host(dev.queue, np.ones(5, np.float32)))


def test_setitem_writes_contiguous_runs(dev: DeviceHandle) -> None:
    a = np.zeros((3, 4), dtype=np.float32)
    x = Tensor.from_host(dev.queue, a)
    x[1] = 5
    x[2, 1:3] = Tensor.from_host(dev.queue, np.array([1.0, 2.0], dtype=np.float32))
    x[0] = [7.0, 8.0, 9.0, 10.0]
    a[1] = 5
    a[2, 1:3] = [1.0, 2.0]
    a[0] = [7.0, 8.0, 9.0, 10.0]
    assert x.tolist() == a.tolist()
    x[:, 1] = 0  # any basic or advanced key now (test_setitem.py)
    a[:, 1] = 0
    assert x.tolist() == a.tolist()


def test_netcl_ops_fills_every_slot_the_methods_call() -> None:
    source = inspect.getsource(tensor_methods)
    called = set(re.findall(r'(?:lookup|_binary)\("(\w+)"', source))
    autograd_only = {"backward"}  # check_inplace is optional (registered() not lookup())
    assert called - autograd_only <= set(METHODS), sorted(called - autograd_only - set(METHODS))
    assert {"add", "getitem", "sum", "to_device", "cast"} <= called  # the scan found them


@pytest.mark.parametrize("shape", [(1,), (33,), (257,), (1, 7, 1)])
def test_operators_in_float16_and_odd_sizes(dev: DeviceHandle, shape: tuple[int, ...]) -> None:
    a = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    x = Tensor.from_host(dev.queue, a).half()
    y = ((x * 2 - 1) / 4 + x.abs()).float()
    assert x.dtype == "float16" and y.dtype == "float32" and y.shape == shape
    h = a.astype(np.float16).astype(np.float64)
    assert_close(y.to_host(), (h * 2 - 1) / 4 + np.abs(h), "float16", scale=2)
    assert_close(x.sum().float().item(), h.sum(), "float16", scale=4 * len(a.reshape(-1)) ** 0.5)


def test_zero_d_tensors(dev: DeviceHandle) -> None:
    s = Tensor.from_host(dev.queue, np.float32(2.5))
    assert s.shape == () and s.size == 1 and s.size() == () and s.numel() == 1
    assert (s * 2).item() == 5.0 and float(s + s) == 5.0 and (s > 2).item() == 1
    assert s.sum().item() == 2.5 and s.reshape(1).tolist() == [2.5] and s.tolist() == 2.5
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d Tensor"):
        len(s)
