"""Elementwise ops on every backend: the OpInfo table, integer/mixed dtypes, casts, broadcasting
corners, forced kernel variants and the documented errors."""

from __future__ import annotations

import doctest
import itertools
import math
from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle, manager
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.kernels.cache import build_stats
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor, reshape
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops import _elementwise, _elementwise_base, _elementwise_binary, _elementwise_source
from netcl.ops._elementwise_dispatch import bundle
from netcl.ops._elementwise_source import _Sig, program_source
from netcl.ops.testing import Kink, OpInfo, check_error, check_op

FLOATS = ("float32", "float16", "float64")
SHAPES = [(1,), (7,), (33,), (257,), (3, 1, 5)]  # all below the vectorized threshold


def _x(shape: tuple[int, ...], lo: float = -3.0, hi: float = 3.0, seed: int = 0) -> Any:
    return np.random.default_rng(seed + sum(shape)).uniform(lo, hi, size=shape)


def _ties(shape: tuple[int, ...], seed: int = 0) -> Any:
    """Small integers as floats, so comparisons meet equal values."""
    return np.random.default_rng(seed + 7 * sum(shape)).integers(-2, 3, size=shape).astype(float)


def _unary(lo: float = -3.0, hi: float = 3.0, **kwargs: Any) -> list[Any]:
    return [((_x(s, lo, hi),), kwargs) for s in SHAPES]


# NaN, both infinities, both zeros, and numbers on either side of every kink and pole
_SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 25.0, -25.0])


def _special(**kwargs: Any) -> list[Any]:
    return [((_SPECIAL,), kwargs)]


def _special_pairs() -> list[Any]:
    """Every pair of special values, ties (equal operands) included."""
    a, b = (m.ravel() for m in np.meshgrid(_SPECIAL, _SPECIAL, indexing="ij"))
    return [((a, b), {})]


_erf = np.vectorize(math.erf, otypes=[float])  # otypes: size-0 inputs too


def _gelu_tanh(a: Any, approximate: str = "tanh") -> Any:
    return 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)))


def _leaky(a: Any, negative_slope: float) -> Any:
    return np.where(a < 0, a * negative_slope, a)


def _by_name(name: str) -> Any:
    """A table row without a function of its own, through ``elementwise(name, ...)`` of
    ``m`` (netcl.ops or netcl.autograd.ops)."""
    return lambda m: lambda *xs: m.elementwise(name, *xs)


_F = _x((3, 4))
_I = np.arange(4, dtype=np.int32)

_KINK_AT_0 = (Kink((0.0,), (0.0,)),)  # the derivative at 0 is 0 by convention (PyTorch's)
_TIE = (Kink((1.0, 1.0), (0.5, 0.5)),)  # a tie splits the gradient in halves (PyTorch's)

UNARY = [
    OpInfo("neg", ops.neg, np.negative, _unary(), grad="neg", nan_inputs=_special(),
           errors=[((_I.astype(np.uint8),), {}, TypeError, "neg: .*got uint8")]),
    OpInfo("abs", ops.abs, np.abs, _unary(), grad="abs", kinks=_KINK_AT_0,
           nan_inputs=_special()),
    OpInfo("sign", ops.sign, np.sign, [((_ties(s),), {}) for s in SHAPES], grad=_by_name("sign"),
           kinks=_KINK_AT_0, nan_inputs=_special()),
    OpInfo("exp", ops.exp, np.exp, _unary(), grad="exp", nan_inputs=_special(),
           errors=[((_I,), {}, TypeError, "exp: needs a floating-point tensor, got int32")]),
    OpInfo("log", ops.log, np.log, _unary(0.1, 5.0), grad="log", nan_inputs=_special()),
    OpInfo("sqrt", ops.sqrt, np.sqrt, _unary(0.0, 5.0), grad="sqrt", nan_inputs=_special()),
    OpInfo("rsqrt", ops.rsqrt, lambda a: 1 / np.sqrt(a), _unary(0.1, 5.0), grad="rsqrt",
           nan_inputs=_special()),
    OpInfo("reciprocal", ops.reciprocal, np.reciprocal, _unary(0.5, 5.0), grad="reciprocal",
           nan_inputs=_special()),
    OpInfo("relu", ops.relu, lambda a: np.maximum(a, 0), _unary(), grad="relu",
           kinks=_KINK_AT_0, nan_inputs=_special()),
    OpInfo("leaky_relu", ops.leaky_relu, _leaky, _unary(negative_slope=0.2), grad="leaky_relu",
           kinks=(Kink((0.0,), (0.2,)),), nan_inputs=_special(negative_slope=0.2),
           errors=[((_I,), {}, TypeError, "leaky_relu")]),
    OpInfo("sigmoid", ops.sigmoid, lambda a: 1 / (1 + np.exp(-a)), _unary(-8.0, 8.0),
           grad="sigmoid", nan_inputs=_special()),
    OpInfo("tanh", ops.tanh, np.tanh, _unary(), grad="tanh", nan_inputs=_special()),
    OpInfo("gelu", ops.gelu, lambda a: 0.5 * a * (1 + _erf(a / math.sqrt(2))), _unary(-5.0, 5.0),
           grad="gelu", nan_inputs=_special(),
           errors=[((_F,), {"approximate": "fast"}, ValueError, "gelu")]),
    # gelu_tanh(-inf) is -inf * 0: NaN in NumPy, -inf from PoCL (test_fuzz_regressions.py)
    OpInfo("gelu_tanh", ops.gelu, _gelu_tanh, _unary(approximate="tanh"), grad="gelu",
           nan_inputs=[((_SPECIAL[~np.isneginf(_SPECIAL)],), {"approximate": "tanh"})]),
    OpInfo("silu", ops.silu, lambda a: a / (1 + np.exp(-a)), _unary(), grad="silu",
           nan_inputs=_special()),
    OpInfo("square", _by_name("square")(ops), np.square, _unary(), grad=_by_name("square"),
           nan_inputs=_special()),
    # log(1 + exp(x)), x itself above 20 (where they agree to 2e-9)
    OpInfo("softplus", _by_name("softplus")(ops), lambda a: np.logaddexp(0.0, a),
           _unary(-30.0, 30.0), grad=_by_name("softplus"), nan_inputs=_special()),
    OpInfo("erf", _by_name("erf")(ops), _erf, _unary(), grad=_by_name("erf"),
           nan_inputs=_special()),
    # the gradient passes at either bound (PyTorch's clamp)
    OpInfo("clamp", ops.clamp, lambda a, min, max: np.clip(a, min, max),
           _unary(min=-1.0, max=0.5), grad="clamp",
           kinks=(Kink((-1.0,), (1.0,)), Kink((0.5,), (1.0,))),
           nan_inputs=_special(min=-1.0, max=0.5),
           errors=[((_F,), {}, ValueError, "clamp: give at least one")]),
    OpInfo("clamp_min", ops.clamp, lambda a, min: np.maximum(a, min), _unary(min=0.25),
           grad="clamp", kinks=(Kink((0.25,), (1.0,)),), nan_inputs=_special(min=0.25)),
]

# same shapes, broadcasting both ways, a trailing and a leading broadcast, size 1 against many
_PAIRS = [((7,), (7,)), ((33,), (33,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)), ((1,), (2, 3))]


def _binary(lo: float = -3.0, hi: float = 3.0, blo: float | None = None,
            bhi: float | None = None, scalars: tuple[float, float] = (2.5, 1.5)) -> list[Any]:
    blo = lo if blo is None else blo
    bhi = hi if bhi is None else bhi
    out: list[Any] = [((_x(a, lo, hi), _x(b, blo, bhi, seed=1)), {}) for a, b in _PAIRS]
    out.append(((_x((257,), lo, hi), scalars[0]), {}))
    out.append(((scalars[1], _x((33,), blo, bhi)), {}))
    return out


def _compare() -> list[Any]:
    samples: list[Any] = [((_ties(a), _ties(b, seed=1)), {}) for a, b in _PAIRS]
    samples.append(((_ties((257,)), 1.0), {}))
    return samples


def _where_special() -> list[Any]:
    (a, b), _ = _special_pairs()[0]
    return [((np.arange(a.size) % 3 == 0, a, b), {})]


BINARY = [
    OpInfo("add", ops.add, np.add, _binary(), grad="add", nan_inputs=_special_pairs(), errors=[
        ((_F, _x((5,))), {}, ValueError, r"add: shapes \(3, 4\) and \(5,\)"),
        ((_I.astype(np.uint8), 300), {}, ValueError, "add: scalar 300 is out of range for uint8"),
        ((1.0, 2.0), {}, TypeError, "needs at least one Tensor")]),
    OpInfo("sub", ops.sub, np.subtract, _binary(), grad="sub", nan_inputs=_special_pairs()),
    OpInfo("mul", ops.mul, np.multiply, _binary(), grad="mul", nan_inputs=_special_pairs(),
           errors=[((_F, "x"), {}, TypeError, "mul: operands must be netcl Tensors")]),
    OpInfo("div", ops.div, np.true_divide, _binary(blo=0.5, bhi=4.0), grad="div",
           nan_inputs=_special_pairs()),
    OpInfo("maximum", ops.maximum, np.maximum, _binary(), grad="maximum", kinks=_TIE,
           nan_inputs=_special_pairs()),
    OpInfo("minimum", ops.minimum, np.minimum, _binary(), grad="minimum", kinks=_TIE,
           nan_inputs=_special_pairs()),
    OpInfo("pow", ops.pow, np.power, _binary(0.1, 3.0, -2.0, 2.0, scalars=(2.0, 0.5)),
           grad="pow", nan_inputs=_special_pairs(),
           errors=[((_I, 2), {}, TypeError, "pow: needs a floating-point")]),
    OpInfo("elementwise_binary_max", lambda a, b: ops.elementwise_binary(a, b, "max"),
           np.maximum, _binary()[:1], nan_inputs=_special_pairs()),
    OpInfo("where", ops.where, lambda c, a, b: np.where(c, a, b), [
        ((_x((33,)) > 0, _x((33,)), _x((33,), seed=2)), {}),
        ((_x((3, 1)) > 0, _x((1, 4)), -1.0), {}),
        ((_x((7,)) > 0, 0.5, _x((7,))), {}),
    ], grad="where", nan_inputs=_where_special(),
       errors=[((_F, _F, 0.0), {}, TypeError, "where: cond must be a uint8")]),
]

COMPARE = [
    OpInfo(name, getattr(ops, name), ref, _compare(), nan_inputs=_special_pairs())
    for name, ref in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                      ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal))
]

TABLE = UNARY + BINARY + COMPARE


def _same_shape(args: tuple[Any, ...]) -> bool:
    return len({a.shape for a in args if isinstance(a, np.ndarray)}) <= 1


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("info", TABLE, ids=lambda i: i.name)
def test_op(dev: DeviceHandle, info: OpInfo, dtype: str) -> None:
    """Every sample in float32; float16/float64 skip the broadcasting samples (each compiles
    its own strided kernel; broadcasting itself is covered in float32 and below)."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    for args, kwargs in info.samples:
        if dtype == "float32" or _same_shape(args):
            check_op(dev, info.op, info.ref, args, kwargs, dtype=dtype, scale=info.scale)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("info", TABLE, ids=lambda i: i.name)
def test_nan_inputs(dev: DeviceHandle, info: OpInfo, dtype: str) -> None:
    """NaN, infinities and zeros: NaN and each infinity exactly where the reference has them
    (the float64 reference rounded to ``dtype``: exp(25) is inf in float16)."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    assert info.nan_inputs, f"{info.name}: no nan_inputs row"

    def rounded_ref(*args: Any, **kwargs: Any) -> Any:
        want = np.asarray(info.ref(*args, **kwargs))
        return want.astype(dtype) if want.dtype.kind == "f" else want

    for args, kwargs in info.nan_inputs:
        with np.errstate(all="ignore"):
            check_op(dev, info.op, rounded_ref, args, kwargs, dtype=dtype, scale=info.scale)


@pytest.mark.parametrize("info", [i for i in TABLE if i.kinks], ids=lambda i: i.name)
def test_forward_at_kinks(dev: DeviceHandle, info: OpInfo) -> None:
    """The kinks' forward values (their gradients are netcl-autograd's test_ops.py)."""
    kwargs = info.samples[0][1]
    for kink in info.kinks:
        args = tuple(np.array([v, v - 1.0, v + 1.0]) for v in kink.at)
        check_op(dev, info.op, info.ref, args, kwargs)


def test_every_table_row_has_a_test_row() -> None:
    """Each row of the forward table (ops.ELEMENTWISE) has an OpInfo row here (copy's is in
    test_movement.py), so an op added to the table is tested forward, at NaN and infinities,
    and through netcl-autograd's test_ops.py its gradient."""
    assert set(ops.ELEMENTWISE) - {"copy"} <= {i.name for i in TABLE}


def test_table_names_match_ops() -> None:
    """Every row's op is the netcl function of that name (or a documented wrapper)."""
    for info in UNARY + BINARY + COMPARE:
        direct = getattr(ops, info.name, None)
        assert direct is None or direct is info.op, info.name


# -- integer and mixed dtypes -----------------------------------------------------------------

_I32 = np.array([-7, -1, 0, 3, 2**31 - 1, -(2**31)], dtype=np.int32)
_U8 = np.array([0, 1, 7, 200, 255, 128], dtype=np.uint8)
_I64 = np.array([-(2**40), -1, 0, 5, 2**40, 9], dtype=np.int64)

INTEGER = [
    # name, op, ref, args, float dtype for float inputs, expected out dtype
    ("add_int32", ops.add, np.add, (_I32[:4], _I32[1:5].copy()), "int32"),
    ("sub_uint8_wraps", ops.sub, np.subtract, (_U8, _U8[::-1].copy()), "uint8"),
    ("mul_int64", ops.mul, np.multiply, (_I64, np.int64(3) * np.ones(6, np.int64)), "int64"),
    ("maximum_int32", ops.maximum, np.maximum, (_I32, np.zeros(6, np.int32)), "int32"),
    ("minimum_uint8_scalar", ops.minimum, np.minimum, (_U8, 100), "uint8"),
    ("neg_int64", ops.neg, np.negative, (_I64,), "int64"),
    ("abs_int32", ops.abs, np.abs, (_I32[:4],), "int32"),
    ("sign_int32", ops.sign, np.sign, (_I32,), "int32"),
    ("relu_int64", ops.relu, lambda a: np.maximum(a, 0), (_I64,), "int64"),
    ("clamp_uint8", lambda x: ops.clamp(x, 10, 1000), lambda a: np.clip(a, 10, 255), (_U8,),
     "uint8"),
    ("div_int32_float32", ops.div, np.true_divide, (_I32[:4], np.int32(2)), "float32"),
    ("add_int32_float_scalar", ops.add, np.add, (_I32[:4], 0.5), "float32"),
    ("add_uint8_int32", ops.add, np.add, (_U8, np.arange(6, dtype=np.int32)), "int32"),
    ("mul_int32_float16", ops.mul, np.multiply, (_I32[:4], _x((4,))), "float16"),
    ("lt_int64", ops.lt, np.less, (_I64, np.int64(0)), "uint8"),
    ("where_int32", lambda c, a, b: ops.where(c, a, b), lambda c, a, b: np.where(c, a, b),
     (_U8 > 100, _I32, 7), "int32"),
]


@pytest.mark.parametrize("case", INTEGER, ids=lambda c: c[0])
def test_integer_and_mixed_dtypes(dev: DeviceHandle, case: Any) -> None:
    _, op, ref, args, out_dtype = case
    float_dtype = out_dtype if out_dtype in FLOATS else "float32"
    with np.errstate(all="ignore"):
        check_op(dev, op, ref, args, dtype=float_dtype, out_dtype=out_dtype)


# a cycle through every dtype (each once as source and target), float -> int truncation
# toward zero, and an integer narrowing that wraps
_CYCLE = ("float32", "float16", "float64", "int64", "uint8", "int32", "float32")
_CASTS = [*itertools.pairwise(_CYCLE), ("float64", "int32"), ("int32", "uint8")]


@pytest.mark.parametrize("pair", _CASTS, ids=lambda p: f"{p[0]}->{p[1]}")
def test_cast(dev: DeviceHandle, pair: tuple[str, str]) -> None:
    src, dst = pair
    if not (supports_dtype(dev, src) and supports_dtype(dev, dst)):
        pytest.skip("float64 missing")
    values = np.array([0.0, 1.0, 2.75, 100.4, 7.5, 250.0, 3.25] * 5)
    if "uint8" not in (src, dst):
        values[::3] *= -1
    if dst == "uint8" and src in ("int32", "int64"):
        values[::4] += 1000  # wraps modulo 256
    host = values.astype(src)
    x = Tensor.from_host(dev.queue, host, dtype=src)
    y = ops.cast(x, dst)
    assert y.dtype == dst and y.shape == host.shape and y is not x
    np.testing.assert_array_equal(y.to_host(), host.astype(dst))


# -- broadcasting and variants ----------------------------------------------------------------

BROADCAST = [
    ((3, 1), (1, 4)), ((2, 3, 4), (4,)), ((5, 1, 7), (1, 6, 1)), ((1,), (257,)),
    ((2, 1, 3, 1, 2, 1), (1, 4, 1, 5, 1, 3)), ((1, 1), (1,)), ((4, 1, 1), (4, 3, 2)),
    ((0, 3), (3,)), ((2, 0), (2, 1)), ((0,), (1,)),
]


@pytest.mark.parametrize("shapes", BROADCAST, ids=str)
def test_broadcasting_corners(dev: DeviceHandle, shapes: tuple[Any, Any]) -> None:
    a, b = _x(shapes[0]), _x(shapes[1], seed=3)
    check_op(dev, ops.add, np.add, (a, b))
    check_op(dev, ops.sub, np.subtract, (b, a))


@pytest.mark.parametrize("variant", [KernelVariant.ELEMENTWISE_SCALAR,
                                     KernelVariant.ELEMENTWISE_VECTORIZED], ids=lambda v: v.name)
@pytest.mark.parametrize("dtype", FLOATS)
def test_forced_variants(dev: DeviceHandle, variant: KernelVariant, dtype: str) -> None:
    """Each variant on sizes with and without a vector tail; same results either way."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    with force_variant(variant):
        for n in (1, 7, 33, 1027, 4099):
            a, b = _x((n,)), _x((n,), seed=5)
            check_op(dev, ops.add, np.add, (a, b), dtype=dtype)
            check_op(dev, ops.mul, np.multiply, (3.0, b), dtype=dtype)
            if dtype == "float32":  # one kernel per group and dtype is enough elsewhere
                check_op(dev, ops.sigmoid, lambda v: 1 / (1 + np.exp(-v)), (a,), dtype=dtype)
                check_op(dev, ops.lt, np.less, (a, b), dtype=dtype)
    if dev.backend == "cl":
        layout = "vec" if variant is KernelVariant.ELEMENTWISE_VECTORIZED else "flat"
        used = {(sig.layout, sig.compute, bundle[0].group)
                for (_, sig, bundle) in _elementwise_base._kernels}
        assert (layout, dtype, "arith") in used


@pytest.mark.parametrize("variant", [KernelVariant.ELEMENTWISE_SCALAR,
                                     KernelVariant.ELEMENTWISE_VECTORIZED], ids=lambda v: v.name)
@pytest.mark.parametrize("form", _elementwise_base.FORMS)
def test_kernel_forms(dev: DeviceHandle, form: str, variant: KernelVariant) -> None:
    """Both kernel forms on every OpenCL device (NOTE [ Elementwise kernels on CPU devices ]):
    the bundle switching on ``op`` (GPUs) and a kernel per op (CPU devices), in the flat, vec
    (with and without a tail, at an odd offset) and nd layouts, against NumPy."""
    if dev.backend != "cl":
        pytest.skip("the NumPy backend runs no OpenCL kernel")
    with _elementwise_base.forced_form(form), force_variant(variant):
        for n in (7, 1027, 4099):
            a, b = _x((n,)), _x((n,), 0.5, 3.0, seed=5)
            check_op(dev, ops.relu, lambda v: np.maximum(v, 0), (a,))
            check_op(dev, ops.neg, np.negative, (a,))
            check_op(dev, ops.exp, np.exp, (a,))
            check_op(dev, ops.sqrt, np.sqrt, (b,))
            check_op(dev, ops.add, np.add, (a, b))
            check_op(dev, ops.mul, np.multiply, (3.0, b))
            check_op(dev, ops.lt, np.less, (a, b))
            check_op(dev, ops.where, lambda c, x, y: np.where(c != 0, x, y),
                     (a > 0, a, b))
            check_op(dev, ops.clamp, lambda v, min, max: np.clip(v, min, max), (a,),
                     {"min": -1.0, "max": 0.5})
        ints = np.arange(-20, 1007, dtype=np.int32)
        check_op(dev, ops.sub, np.subtract, (ints, ints[::-1].copy()), dtype="int32")
        check_op(dev, ops.mul, np.multiply, (_x((3, 1, 5)), _x((4, 1), seed=2)))  # nd
        check_op(dev, ops.maximum, np.maximum, (_x((2, 3, 4)), _x((3, 1), seed=3)))
        q = dev.queue
        whole = Tensor.from_host(q, _x((2, 1027)).astype(np.float32))
        row = Tensor(shape=(1026,), dtype=whole.dtype, queue=q, context=whole.context,
                     buffer=whole.buffer, offset=1027 + 1, _backend=whole._backend)
        np.testing.assert_array_equal(ops.neg(row).to_host(),
                                      -whole.to_host().reshape(-1)[1028:])
        names = {p.kernel.function_name for p in _elementwise_base._plans.of(q.context).values()}
    per_op = {"ew_arith1_relu", "ew_arith1_exp", "ew_arith2_add", "ew_arith2_sub",
              "ew_cmp2_lt", "ew_arith1_clamp", "ew_arith2_maximum"}
    assert per_op <= names if form == "op" else not per_op & names, names
    assert "ew_arith3" in names  # ``where`` is a bundle of one: the same kernel in both forms
    assert ("ew_arith1" in names) == (form == "bundle")


def test_form_from_the_environment(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch) -> None:
    """``NETCL_ELEMENTWISE_FORM`` picks the form for every device; a bad value names itself."""
    if dev.backend != "cl":
        pytest.skip("the NumPy backend runs no OpenCL kernel")
    for form in _elementwise_base.FORMS:
        monkeypatch.setenv("NETCL_ELEMENTWISE_FORM", form.upper())
        assert _elementwise_base.kernel_form(dev.queue.device) == form
        _elementwise_base._forget_plans()  # plans keep the kernels they were made with
        a = _x((33,))
        check_op(dev, ops.tanh, np.tanh, (a,))
        plans = _elementwise_base._plans.of(dev.queue.context).values()
        names = {p.kernel.function_name for p in plans}
        assert names == {"ew_arith1_tanh" if form == "op" else "ew_arith1"}, names
    monkeypatch.setenv("NETCL_ELEMENTWISE_FORM", "fused")
    with pytest.raises(ValueError, match="NETCL_ELEMENTWISE_FORM must be one of bundle, op"):
        _elementwise_base.kernel_form(dev.queue.device)
    monkeypatch.delenv("NETCL_ELEMENTWISE_FORM")
    _elementwise_base._forget_plans()


def test_fixed_op_without_an_expression() -> None:
    """A per-op kernel of an op the compute dtype has no expression for is refused."""
    op = _elementwise.OPS["exp"]
    ops_ = bundle(op)
    sig = _Sig(group="arith", arity=1, nparams=2, operands=("int32",), compute="int32",
               out="int32", layout="flat", ndim=1, width=1, wide=False, fixed=ops_.index(op))
    with pytest.raises(ValueError, match="elementwise: exp has no int32 expression"):
        program_source(sig, ops_)


def test_large_default_selection(dev: DeviceHandle) -> None:
    """Above 1024 elements the selector picks the vectorized kernel; results still match."""
    a, b = _x((3, 1000)), _x((3, 1000), seed=9)
    check_op(dev, ops.add, np.add, (a, b))
    check_op(dev, ops.gelu, lambda v: 0.5 * v * (1 + _erf(v / math.sqrt(2))), (a,))


def test_nan_propagation(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.array([np.nan, 1.0, -2.0]))
    y = Tensor.from_host(dev.queue, np.array([0.0, np.nan, -3.0]))
    np.testing.assert_array_equal(ops.maximum(x, y).to_host(), [np.nan, np.nan, -2.0])
    np.testing.assert_array_equal(ops.minimum(x, y).to_host(), [np.nan, np.nan, -3.0])
    np.testing.assert_array_equal(ops.relu(x).to_host(), [np.nan, 1.0, 0.0])
    np.testing.assert_array_equal(ops.sign(x).to_host(), [np.nan, 1.0, -1.0])
    np.testing.assert_array_equal(ops.clamp(x, 0, 0.5).to_host(), [np.nan, 0.5, 0.0])
    np.testing.assert_array_equal(ops.ne(x, x).to_host(), [1, 0, 0])


def test_one_launch_per_op_and_kernels_built_once(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("OpenCL only")
    a = Tensor.from_host(dev.queue, _x((5, 7)))
    b = Tensor.from_host(dev.queue, _x((7,)))
    ops.add(a, b)
    ops.exp(a)
    built = build_stats()
    with count_launches() as n:
        for _ in range(3):
            ops.add(a, b)
            ops.exp(a)
    assert n[0] == 6
    assert build_stats()["compiled"] == built["compiled"]
    assert build_stats()["from_disk"] == built["from_disk"]


def test_fast_path_repeats_with_new_data_offsets_and_forcing(dev: DeviceHandle) -> None:
    """A remembered launch (NOTE [ Elementwise fast path ]) computes each call's own data:
    new buffers, a view with an element offset, a broadcast operand, a forced variant, and a
    failing op that must keep failing."""
    if dev.backend != "cl":
        pytest.skip("OpenCL only")
    q = dev.queue
    for n in (1, 7, 33, 257, 4099):
        for seed in range(3):  # the first call fills the entry, the others use it
            a, b = _f32((n,), seed), _f32((n,), seed + 10)
            ta, tb = Tensor.from_host(q, a), Tensor.from_host(q, b)
            with count_launches() as launches:
                got = ops.add(ta, tb)
            assert launches[0] == 1
            assert_close(got.to_host(), a + b, "float32", scale=ONE_ROUNDING)
            assert_close(ops.exp(ta).to_host(), np.exp(a), "float32", scale=0.1)
    whole = _f32((2, 33), 1)
    t = Tensor.from_host(q, whole)
    second = reshape(reshape(t, (66,)), (2, 33))  # a view of the same buffer
    row = Tensor(shape=(33,), dtype=t.dtype, queue=q, context=t.context, buffer=t.buffer,
                 offset=33, _backend=t._backend)  # the second row, through an offset
    first = Tensor.from_host(q, whole[0])  # same shape and dtype, offset 0, used first
    for _ in range(2):
        assert_close(ops.mul(first, first).to_host(), whole[0] ** 2, "float32",
                     scale=ONE_ROUNDING)
        assert_close(ops.mul(row, row).to_host(), whole[1] ** 2, "float32", scale=ONE_ROUNDING)
        assert_close(ops.add(second, row).to_host(), whole + whole[1], "float32",
                     scale=ONE_ROUNDING)
    for variant in (KernelVariant.ELEMENTWISE_SCALAR, KernelVariant.ELEMENTWISE_VECTORIZED):
        with force_variant(variant):
            a = _f32((4099,), 3)
            ta = Tensor.from_host(q, a)
            np.testing.assert_allclose(ops.relu(ta).to_host(), np.maximum(a, 0))
            layout = "vec" if variant is KernelVariant.ELEMENTWISE_VECTORIZED else "flat"
            entry = _elementwise_base._fast[_elementwise_base._fast_key(
                _elementwise.OPS["relu"], [ta])]
            assert _layout_of(entry.plan.kernel) == layout
    bad = Tensor.from_host(q, _I.astype(np.uint8))
    for _ in range(2):
        with pytest.raises(TypeError, match=r"neg: .*got uint8"):
            ops.neg(bad)


# one float32 rounding of a float32 sum or product (half an ulp, 6e-8 relative): the table's
# float32 tolerance times 1e-3 (rtol 1e-7)
ONE_ROUNDING = 1e-3


def _f32(shape: tuple[int, ...], seed: int) -> Any:
    return _x(shape, seed=seed).astype(np.float32)


def _layout_of(kernel: Any) -> str:
    for (_, sig, _bundle), k in _elementwise_base._kernels.items():
        if k is kernel:
            return str(sig.layout)
    raise AssertionError("kernel not in the elementwise cache")


# -- errors -----------------------------------------------------------------------------------

# errors of one op are rows of its OpInfo (so netcl-autograd's op raises them too); these are
# the others
ERRORS = [
    ("binary_unknown", lambda a: ops.elementwise_binary(a, a, "mod"), (_F,), ValueError,
     "elementwise_binary: op must be one of"),
    ("cast_dtype", lambda x: ops.cast(x, "complex64"), (_F,), ValueError, "cast: unsupported"),
]


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c[0])
def test_errors(dev: DeviceHandle, case: Any) -> None:
    _, op, args, exc, pattern = case
    check_error(dev, op, args, {}, exc, pattern)


@pytest.mark.parametrize("info", [i for i in TABLE if i.errors], ids=lambda i: i.name)
def test_row_errors(dev: DeviceHandle, info: OpInfo) -> None:
    for args, kwargs, exc, pattern in info.errors:
        check_error(dev, info.op, args, kwargs, exc, pattern)


def test_different_devices(dev: DeviceHandle) -> None:
    if dev.backend != "cl":
        pytest.skip("needs an OpenCL device beside the NumPy backend")
    a = Tensor.from_host(dev.queue, _F)
    numpy_backend = manager.default("cpu")
    assert numpy_backend is not None
    b = Tensor.from_host(numpy_backend.queue, _F)
    with pytest.raises(ValueError, match="add: tensors are on different devices"):
        ops.add(a, b)


def test_doctests() -> None:
    for module in (_elementwise, _elementwise_base, _elementwise_binary, _elementwise_source):
        result = doctest.testmod(module)
        assert result.failed == 0, module.__name__
