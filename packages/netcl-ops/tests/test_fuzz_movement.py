"""Property-based fuzzing of movement, gather, creation, cast and random ops on every backend.

Movement ops draw their arguments here (permutations, basic index keys, slices, concat and
stack lists, pads, broadcast targets; some invalid) and run the OpInfo row of
``test_movement``: copies must be exact, invalid arguments a clean typed error naming the op.
Views (``view``, ``flatten``, ``squeeze``, ``unsqueeze``) must share the input's storage and
offset. Random ops must give the NumPy backend's bits. See ``fuzz_support`` for counts.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.ops.testing import OpInfo, check_op

if TYPE_CHECKING:
    import fuzz_support as fz
else:
    _spec = importlib.util.spec_from_file_location(
        "netcl_ops_fuzz_support", Path(__file__).with_name("fuzz_support.py"))
    fz = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(fz)

report_examples = fz.report_examples
MV = fz.sibling("test_movement")
ROWS: dict[str, OpInfo] = {info.name: info for info in MV.TABLE}
ALL = fz.FLOATS + fz.INTS
Errors = tuple[type[Exception], ...]


def _exact(dev: DeviceHandle, name: str, op: Any, ref: Any, arrays: list[Any],
           args: tuple[Any, ...], kwargs: dict[str, Any], dtype: str, offsets: list[int],
           allowed: Errors) -> None:
    """``op`` on ``arrays`` (as ``dtype`` tensors, moved by ``offsets``) then ``args``: the
    reference's values exactly (a copy does no arithmetic), or an ``allowed`` error."""
    float_dtype = dtype if dtype in fz.FLOATS else "float32"
    rounded = [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]

    def run() -> None:
        got = check_op(dev, fz.shifted(dev, lambda *ts: op(*ts, *args, **kwargs), offsets),
                       lambda *xs: ref(*xs, *args, **kwargs), tuple(rounded),
                       dtype=float_dtype)
        np.testing.assert_array_equal(got, np.asarray(ref(*rounded, *args, **kwargs)))

    fz.outcome(name, run, allowed)


def _axis_ok(axis: int, ndim: int) -> bool:
    return -max(ndim, 1) <= axis < max(ndim, 1)


# -- argument strategies, one per movement row ------------------------------------------------


@st.composite
def _permute(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], Errors]:
    n = len(shape)
    dims = list(draw(st.permutations(range(n))))
    dims = [d - n if draw(st.booleans()) else d for d in dims]
    if draw(st.integers(0, 5)) == 0:  # a repeated or out-of-range axis
        dims = draw(st.lists(st.integers(-n - 1, n), min_size=n, max_size=n))
    ok = all(-n <= d < n for d in dims) and len({d % n for d in dims}) == n if n else not dims
    return (tuple(dims),), () if ok else (ValueError, IndexError)


@st.composite
def _transpose(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], Errors]:
    n = len(shape)
    d0, d1 = draw(st.integers(-n - 1, n)), draw(st.integers(-n - 1, n))
    return (d0, d1), () if _axis_ok(d0, n) and _axis_ok(d1, n) else (IndexError,)


@st.composite
def _index_item(draw: st.DrawFn, size: int) -> Any:
    kind = draw(st.sampled_from(["int", "slice", "slice", "none", "ellipsis"]))
    if kind == "int":
        return draw(st.integers(-size - 1, size))
    if kind == "none":
        return None
    if kind == "ellipsis":
        return Ellipsis
    bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
    return slice(draw(bound), draw(bound), draw(st.one_of(st.none(), st.integers(-3, 3))))


@st.composite
def _getitem(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], Errors]:
    count = draw(st.integers(0, len(shape) + 1))
    sizes = [*shape, 1][:count] + [1] * max(0, count - len(shape) - 1)
    key = tuple(draw(_index_item(s)) for s in sizes)
    return (key if draw(st.booleans()) or len(key) != 1 else key[0],), (IndexError, ValueError)


@st.composite
def _slice(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], Errors]:
    n = len(shape)
    count = draw(st.integers(0, n))
    axes = draw(st.lists(st.integers(-n - 1, n), min_size=count, max_size=count))
    bound = st.one_of(st.none(), st.integers(-9, 9))
    starts = [draw(bound) for _ in axes]
    stops = [draw(bound) for _ in axes]
    steps = [draw(st.one_of(st.none(), st.integers(-3, 3))) for _ in axes]
    return (starts, stops, steps, axes), (IndexError, ValueError)


@st.composite
def _pad(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], Errors]:
    pairs = draw(st.integers(0, len(shape) + 1))
    pads = tuple(draw(st.lists(st.integers(-1, 3), min_size=2 * pairs, max_size=2 * pairs)))
    ok = pairs <= len(shape) and min(pads, default=0) >= 0
    return (pads,), () if ok else (ValueError,)


@st.composite
def _broadcast_to(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], Errors]:
    lead = draw(st.lists(st.sampled_from([0, 1, 2, 3]), max_size=2))
    target = (*lead, *(draw(st.sampled_from([d, 2, 3])) if d == 1 else d for d in shape))
    if draw(st.integers(0, 5)) == 0 and target:  # now and then a side that does not fit
        target = (*target[:-1], target[-1] + 1)
    try:
        ok = np.broadcast_shapes(shape, target) == target
    except ValueError:
        ok = False
    return (target,), () if ok else (ValueError,)


def _no_args(shape: tuple[int, ...]) -> st.SearchStrategy[tuple[tuple[Any, ...], Errors]]:
    return st.just(((), ()))


ARGS = {"permute": _permute, "transpose": _transpose, "getitem": _getitem, "slice": _slice,
        "pad": _pad, "broadcast_to": _broadcast_to, "copy": _no_args}


@pytest.mark.parametrize("name", sorted(ARGS))
@given(data=st.data())
@fz.fuzz_settings(5)
def test_movement(dev: DeviceHandle, name: str, data: st.DataObject) -> None:
    """One tensor of any shape and dtype (an offset view now and then) and drawn arguments."""
    info = ROWS[name]
    shape = data.draw(fz.shapes(), label="shape")
    dtype = data.draw(fz.dtypes(dev, ALL), label="dtype")
    args, allowed = data.draw(ARGS[name](shape), label="args")
    x = data.draw(fz.values(shape, dtype, -9, 9, special=True), label="x")
    offset = data.draw(fz.OFFSETS, label="offset")
    fz.ran(f"movement:{name}", dev)

    def ref(a: Any, *args: Any) -> Any:  # a 0-d array: NumPy has no axis to swap or pad
        return a if a.ndim == 0 and name in ("transpose", "pad") else info.ref(a, *args)

    _exact(dev, name, info.op, ref, [x], args, {}, dtype, [offset], allowed)


@pytest.mark.parametrize("name", ["concat", "stack"])
@given(data=st.data())
@fz.fuzz_settings(5)
def test_join(dev: DeviceHandle, name: str, data: st.DataObject) -> None:
    """1-4 tensors (offset views among them) joined along any axis; now and then shapes or
    dtypes that differ, or an axis out of range."""
    info = ROWS[name]
    shape = data.draw(fz.shapes(min_dims=1 if name == "concat" else 0, max_size=1024))
    n, extra = len(shape), 1 if name == "stack" else 0
    axis = data.draw(st.integers(-n - 1 - extra, n + extra), label="axis")
    dtype = data.draw(fz.dtypes(dev, ALL), label="dtype")
    shapes = [shape]
    for _ in range(data.draw(st.integers(0, 3), label="more")):
        s = list(shape)
        if name == "concat" and -n <= axis < n:
            s[axis] = data.draw(st.sampled_from(fz.SIDES))
        if data.draw(st.integers(0, 7)) == 0 and s:  # a side off the axis that differs
            s[0] += 1
        shapes.append(tuple(s))
    arrays = [data.draw(fz.values(s, dtype, -9, 9)) for s in shapes]
    offsets = [data.draw(fz.OFFSETS) for _ in arrays]
    mixed = data.draw(st.integers(0, 9)) == 0 and dtype != "float32" and len(arrays) > 1
    fz.ran(f"join:{name}", dev)

    def op(*ts: Any, axis: int) -> Any:
        return info.op(*ts[:-1], *([ops.cast(ts[-1], "float32")] if mixed else ts[-1:]),
                       axis=axis)

    allowed: Errors = (TypeError,) if mixed else ()
    try:
        np.asarray(info.ref(*arrays, axis=axis))
    except (ValueError, IndexError):
        allowed += (ValueError, IndexError)
    _exact(dev, name, op, lambda *xs, axis: info.ref(*xs, axis=axis), arrays, (),
           {"axis": axis}, dtype, offsets, allowed)


def _flatten(a: Any, start: int, end: int) -> Any:
    """PyTorch's flatten: a 0-d tensor takes dims 0 and -1 and becomes 1-d."""
    n = max(a.ndim, 1)
    if not (_axis_ok(start, a.ndim) and _axis_ok(end, a.ndim)) or start % n > end % n:
        raise IndexError("bad dims")
    s, e = start % n, end % n
    return a.reshape(1) if a.ndim == 0 else a.reshape(
        (*a.shape[:s], math.prod(a.shape[s:e + 1]), *a.shape[e + 1:]))


def _squeeze(a: Any, axis: int | None) -> Any:
    """PyTorch's squeeze: a 0-d tensor takes axis 0 and -1."""
    if a.ndim == 0 and axis is not None and not _axis_ok(axis, 0):
        raise IndexError("bad axis")
    return a if a.ndim == 0 else np.squeeze(a, axis)


VIEWS: dict[str, tuple[Any, Any, Any]] = {  # op, its NumPy rule, argument strategies
    "view": (ops.view, lambda a, s: a.reshape(s), lambda n: st.just(-1) | st.integers(0, 9)),
    "flatten": (ops.flatten, _flatten, lambda n: st.integers(-n - 1, n)),
    "squeeze": (ops.squeeze, _squeeze, lambda n: st.none() | st.integers(-n - 1, n)),
    "unsqueeze": (ops.unsqueeze, np.expand_dims, lambda n: st.integers(-n - 2, n + 1)),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
@given(data=st.data())
@fz.fuzz_settings(5)
def test_view(dev: DeviceHandle, name: str, data: st.DataObject) -> None:
    """Views keep the storage and element offset of an offset view; values as NumPy's."""
    op, ref, arg = VIEWS[name]
    shape = data.draw(fz.shapes(), label="shape")
    dtype = data.draw(fz.dtypes(dev, ALL), label="dtype")
    x = data.draw(fz.values(shape, dtype, -9, 9), label="x")
    if name == "view":
        args: tuple[Any, ...] = (tuple(data.draw(st.lists(arg(0), max_size=4))),)
    elif name == "flatten":
        args = (data.draw(arg(len(shape))), data.draw(arg(len(shape))))
    else:
        args = (data.draw(arg(len(shape))),)
    t = fz.on_device(dev, x, dtype, data.draw(fz.OFFSETS, label="offset"))
    fz.ran(f"view:{name}", dev)
    try:
        want = ref(x, *args)
    except (ValueError, IndexError):
        want = None
    # view is reshape (one op, two names): Tensor's reshape checks the element count
    err = fz.outcome("view|reshape" if name == "view" else name, lambda: op(t, *args),
                     () if want is not None else (
        ValueError, IndexError))
    if err is None:
        y = op(t, *args)
        assert want is not None, f"{name}{args} of {shape}: NumPy refuses, netcl gave {y.shape}"
        assert (y.shape, y.dtype, y.offset) == (want.shape, t.dtype, t.offset)
        assert y.buffer is t.buffer and (y.array is None) == (t.array is None)
        np.testing.assert_array_equal(y.to_host(), want.astype(dtype))
        if t.array is None:  # OpenCL: contiguous copies an offset view to offset 0
            c = ops.contiguous(y)
            assert c.offset == 0 and (c is y) == (y.offset == 0)
            np.testing.assert_array_equal(c.to_host(), want.astype(dtype))


# -- gathers ----------------------------------------------------------------------------------


def _take_ref(name: str, x: Any, axis: int, index: Any) -> Any:
    """torch.gather / index_select on NumPy arrays (a 0-d ``x``: its one value)."""
    if x.ndim == 0:
        return np.broadcast_to(x, index.shape).copy()
    if name == "gather":
        return np.take_along_axis(x, index, axis)
    return np.take(x, index, axis=axis)


@pytest.mark.parametrize("name", ["gather", "index_select", "embedding"])
@given(data=st.data())
@fz.fuzz_settings(4)
def test_take(dev: DeviceHandle, name: str, data: st.DataObject) -> None:
    """Any input (offset views too), axis in or out of range, int32/int64 indices in range
    (and on the NumPy backend, which checks them, out of range now and then)."""
    shape = data.draw(fz.shapes(min_dims=2 if name == "embedding" else 0,
                                max_dims=2 if name == "embedding" else 4, max_size=2048))
    n = len(shape)
    axis = 0 if name == "embedding" else data.draw(st.integers(-n - 1, n), label="axis")
    dtype = data.draw(fz.dtypes(dev, ALL), label="dtype")
    x = data.draw(fz.values(shape, dtype, -9, 9, special=True), label="x")
    size = shape[axis % n] if n and _axis_ok(axis, n) else 1
    if name == "gather":
        ishape = tuple(data.draw(st.sampled_from(fz.SIDES)) if k == axis % max(n, 1) else d
                       for k, d in enumerate(shape))
    else:
        ishape = tuple(data.draw(fz.shapes(min_dims=1, max_dims=1 if name != "embedding" else 3,
                                           max_size=64)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    index = rng.integers(0, max(size, 1), size=ishape)
    bad = dev.backend == "cpu" and index.size > 0 and data.draw(st.integers(0, 5)) == 0
    bad = index.size > 0 and (bad or not size)
    if bad:  # out of range: NumPy raises, OpenCL reads NaN or 0 (documented)
        index.reshape(-1)[0] = data.draw(st.sampled_from([-1, size, size + 3]))
    index = index.astype(data.draw(st.sampled_from(["int32", "int64"]), label="index dtype"))
    offsets = [data.draw(fz.OFFSETS) for _ in range(2)]
    fz.ran(f"take:{name}", dev)
    allowed: Errors = (IndexError,) if bad or not _axis_ok(axis, n) else ()
    if bad and dev.backend != "cpu":
        return  # OpenCL's out-of-range reads are test_movement's test_gather_out_of_range
    if name == "embedding":
        _exact(dev, name, lambda i, w: ops.embedding(i, w), lambda i, w: w[i], [index, x], (),
               {}, dtype, offsets[::-1], allowed)
    else:
        _exact(dev, name, lambda t, i: getattr(ops, name)(t, axis, i),
               lambda a, i: _take_ref(name, a, axis, i), [x, index], (), {}, dtype, offsets,
               allowed)
