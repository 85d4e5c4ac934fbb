"""Property-based fuzzing of creation, ``one_hot``, ``cast`` and random ops on every backend.

Creation and casts must equal NumPy exactly (or raise a clean typed error naming the op);
``fill`` of an offset view must leave the elements before the view alone; random ops must give
the NumPy backend's bits for the same seed and offset, within their documented ranges. See
``fuzz_support`` for example counts.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import netcl.ops as ops
from netcl.core.device import DeviceHandle, manager
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close

if TYPE_CHECKING:
    import fuzz_support as fz
else:
    _spec = importlib.util.spec_from_file_location(
        "netcl_ops_fuzz_support", Path(__file__).with_name("fuzz_support.py"))
    fz = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(fz)

report_examples = fz.report_examples
ALL = fz.FLOATS + fz.INTS
Errors = tuple[type[Exception], ...]
_NUMPY = manager.default("cpu")
assert _NUMPY is not None
CPU = _NUMPY.queue


def _equal(got: Tensor, want: Any, dtype: str) -> None:
    """Shape, dtype and values exactly as ``want`` (NaN where ``want`` has NaN)."""
    assert (got.shape, got.dtype) == (want.shape, dtype), (got.shape, got.dtype, want.shape)
    np.testing.assert_array_equal(got.to_host(), want.astype(dtype))


def _bad_value(value: Any, dtype: str) -> Errors:
    """The errors a fill value may cause: a float for an integer dtype, or out of range."""
    if dtype not in fz.INTS:
        return ()
    if isinstance(value, float):
        return (TypeError,)
    info = np.iinfo(dtype)
    return () if info.min <= value <= info.max else (ValueError,)


@st.composite
def _fill_value(draw: st.DrawFn) -> Any:
    return draw(st.one_of(fz.numbers(-300.0, 300.0), st.integers(-300, 300)))


@pytest.mark.parametrize("name", ["zeros", "ones", "full", "fill"])
@given(data=st.data())
@fz.fuzz_settings(5)
def test_fill(dev: DeviceHandle, name: str, data: st.DataObject) -> None:
    """Shapes (an int, a tuple, a negative side), dtypes and values (floats for integer
    dtypes, out of range); ``fill`` writes into an offset view and nowhere else."""
    shape = data.draw(fz.shapes(), label="shape")
    negative = data.draw(st.integers(0, 9), label="negative") == 0 and len(shape) > 0
    if negative:
        shape = (*shape[:-1], -1)
    arg: Any = shape[0] if len(shape) == 1 and data.draw(st.booleans()) else shape
    dtype = data.draw(fz.dtypes(dev, ALL), label="dtype")
    value = data.draw(_fill_value(), label="value")
    fz.ran(f"creation:{name}", dev)
    allowed: Errors = (ValueError,) if negative else ()
    if name == "fill":
        if negative:
            return
        offset = data.draw(fz.OFFSETS, label="offset")
        x = fz.on_device(dev, np.ones(shape, dtype=dtype), dtype, offset)
        base = x._base.to_host() if x._base is not None else None
        if fz.outcome(name, lambda: ops.fill(x, value), _bad_value(value, dtype)) is None:
            _equal(x, np.full(shape, value), dtype)
            if base is not None and x._base is not None:  # the elements before the view
                np.testing.assert_array_equal(x._base.to_host()[:offset], base[:offset])
        return
    if name == "full":
        dtype_arg = None if data.draw(st.booleans()) else dtype
        if dtype_arg is None:
            dtype = "float32" if isinstance(value, float) else "int64"
        allowed += _bad_value(value, dtype)
    else:
        value, dtype_arg = (0 if name == "zeros" else 1), dtype

    def run() -> Tensor:
        if name == "full":
            return ops.full(dev.queue, arg, value, dtype_arg)
        return ops.zeros(dev.queue, arg, dtype) if name == "zeros" else ops.ones(
            dev.queue, arg, dtype)

    if fz.outcome(name, run, allowed) is None:
        _equal(run(), np.full(shape, value), dtype)


@given(data=st.data())
@fz.fuzz_settings(6)
def test_arange(dev: DeviceHandle, data: st.DataObject) -> None:
    """One to three ints or floats (any signs, a zero step), dtype ``None`` or any: NumPy's
    length, and values within the dtype's tolerance."""
    dtype = data.draw(st.one_of(st.none(), fz.dtypes(dev, ALL)), label="dtype")
    # float arguments for an integer dtype have no one meaning (NumPy steps by the difference
    # of its first two values, PyTorch rounds each value, netcl rounds start and step): left out
    number: st.SearchStrategy[Any] = st.integers(-40, 40)
    if dtype not in fz.INTS:
        number = st.one_of(number, fz.numbers(-40.0, 40.0))
    args = data.draw(st.lists(number, min_size=1, max_size=3), label="args")
    floats = any(isinstance(a, float) for a in args)
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (*args[:2], args[2] if len(
        args) == 3 else 1)
    # a subnormal step asks for 10**9 values (a run once went out of memory): not a finding
    assume(step == 0 or (stop - start) / step <= 4096)
    fz.ran("arange", dev)
    allowed: Errors = (ValueError,) if len(args) == 3 and args[2] == 0 else ()
    if dtype == "uint8" and min(args) < 0:
        allowed += (ValueError,)
    arange: Any = ops.arange  # mypy: *args cannot reach the dtype parameter here
    if fz.outcome("arange", lambda: arange(dev.queue, *args, dtype=dtype), allowed) is None:
        got = arange(dev.queue, *args, dtype=dtype)
        want = np.arange(*args) if not floats else np.arange(*map(float, args))
        target = dtype or ("float32" if floats else "int64")
        assert (got.shape, got.dtype) == (want.shape, target)
        if target in fz.FLOATS:
            assert_close(got.to_host(), want, target, scale=40.0)
        else:
            np.testing.assert_array_equal(got.to_host(), want.astype(target))


@given(data=st.data())
@fz.fuzz_settings(5)
def test_one_hot(dev: DeviceHandle, data: st.DataObject) -> None:
    """Labels of any shape (an offset view), int32/int64, ``num_classes`` from 0; any dtype."""
    shape = data.draw(fz.shapes(max_size=512), label="shape")
    classes = data.draw(st.integers(0, 9), label="num_classes")
    dtype = data.draw(fz.dtypes(dev, ALL), label="dtype")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    labels = rng.integers(0, max(classes, 1), size=shape).astype(
        data.draw(st.sampled_from(["int32", "int64"]), label="label dtype"))
    t = fz.on_device(dev, labels, labels.dtype.name, data.draw(fz.OFFSETS, label="offset"))
    fz.ran("one_hot", dev)
    if fz.outcome("one_hot", lambda: ops.one_hot(t, classes, dtype),
                  () if classes else (ValueError,)) is None:
        _equal(ops.one_hot(t, classes, dtype), np.eye(classes)[labels], dtype)


@given(data=st.data())
@fz.fuzz_settings(5)
def test_cast(dev: DeviceHandle, data: st.DataObject) -> None:
    """Every (source, target) pair with values the target holds (floats to integers truncate
    toward zero; integers wrap into narrower ones), from an offset view: NumPy's ``astype``."""
    src = data.draw(fz.dtypes(dev, ALL), label="src")
    dst = data.draw(fz.dtypes(dev, ALL), label="dst")
    shape = data.draw(fz.shapes(), label="shape")
    lo, hi = (0.0, 255.0) if dst == "uint8" and src in fz.FLOATS else (-1000.0, 1000.0)
    x = data.draw(fz.values(shape, src, lo, hi, special=dst in fz.FLOATS), label="x")
    x = x.astype(src)
    t = fz.on_device(dev, x, src, data.draw(fz.OFFSETS, label="offset"))
    fz.ran("cast", dev)
    with fz.quiet():
        _equal(ops.cast(t, dst), x.astype(dst), dst)


# -- random -----------------------------------------------------------------------------------


def _bits(a: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Float bit patterns, so that -0.0 and 0.0 (and NaN payloads) count."""
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


@pytest.mark.parametrize("name", ["uniform", "normal", "bernoulli", "random_bits"])
@given(data=st.data())
@fz.fuzz_settings(3)
def test_random(dev: DeviceHandle, name: str, data: st.DataObject) -> None:
    """Any shape, seed (up to 2**64), offset and parameters: the NumPy backend's bits, and
    values in the documented range (uniform in [low, high), bernoulli 0 or 1)."""
    shape = data.draw(fz.shapes(), label="shape")
    seed = data.draw(st.one_of(st.integers(0, 99), st.integers(0, 2**64 - 1)), label="seed")
    offset = data.draw(st.one_of(st.integers(0, 9), st.integers(0, 2**40)), label="offset")
    kwargs: dict[str, Any] = {"seed": seed, "offset": offset}
    if name != "random_bits":
        kwargs["dtype"] = data.draw(fz.dtypes(dev), label="dtype")
    args: tuple[Any, ...] = ()
    if name in ("uniform", "normal"):
        args = (data.draw(fz.numbers(-5.0, 5.0)), data.draw(fz.numbers(0.0, 5.0)))
    elif name == "bernoulli":
        args = (data.draw(st.one_of(fz.numbers(0.0, 1.0), st.sampled_from([-0.5, 1.5]))),)
    fz.ran(f"random:{name}", dev)
    bad: Errors = (ValueError,) if name == "bernoulli" and not 0 <= args[0] <= 1 else ()
    op = getattr(ops, name)
    if fz.outcome(name, lambda: op(dev.queue, shape, *args, **kwargs), bad) is not None:
        return
    got = op(dev.queue, shape, *args, **kwargs).to_host()
    want = op(CPU, shape, *args, **kwargs).to_host()
    assert got.shape == tuple(shape) and got.dtype == want.dtype
    np.testing.assert_array_equal(_bits(got), _bits(want))
    if name == "uniform" and args[0] < args[0] + args[1]:
        low, high = args
        assert ((got >= min(low, high)) & (got <= max(low, high))).all()
    if name == "bernoulli":
        assert np.isin(got, [0, 1]).all()


@given(data=st.data())
@fz.fuzz_settings(5)
def test_dropout(dev: DeviceHandle, data: st.DataObject) -> None:
    """Any input (offset view), p in and outside [0, 1], seed, offset: the NumPy backend's
    mask and values, and y = x * mask / (1 - p)."""
    shape = data.draw(fz.shapes(), label="shape")
    dtype = data.draw(fz.dtypes(dev, ALL), label="dtype")
    x = data.draw(fz.values(shape, dtype), label="x")
    p = data.draw(st.one_of(fz.numbers(0.0, 1.0), st.sampled_from([0.0, 1.0, -0.1, 1.5])))
    seed, off = data.draw(st.integers(0, 2**64 - 1)), data.draw(st.integers(0, 2**40))
    t = fz.on_device(dev, x, dtype, data.draw(fz.OFFSETS, label="offset"))
    fz.ran("dropout", dev)
    bad: Errors = (ValueError,) if not 0 <= p <= 1 else ()
    if dtype in fz.INTS:
        bad += (TypeError,)
    if fz.outcome("dropout", lambda: ops.dropout(t, p, seed, off), bad) is not None:
        return
    y, mask = (r.to_host() for r in ops.dropout(t, p, seed, off))
    cy, cmask = (r.to_host() for r in ops.dropout(Tensor.from_host(CPU, x, dtype=dtype), p, seed,
                                                  off))
    np.testing.assert_array_equal(_bits(mask), _bits(cmask))
    np.testing.assert_array_equal(_bits(y), _bits(cy))
    keep = mask.astype(bool)
    want = np.where(keep, x.astype(dtype).astype(np.float64) / (1 - p) if p < 1 else 0.0, 0.0)
    assert_close(y, want, dtype)
