"""softmax, log_softmax, nll_gather and softmax_cross_entropy on every backend: axes, each
forced kernel in each dtype, stability, NaN, empty tensors, out-of-range labels, errors."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pytest

import netcl.ops as ops
from netcl.core.device import DeviceHandle
from netcl.core.kernel_selector import KernelVariant, force_variant
from netcl.core.tensor import Tensor, narrow_view
from netcl.core.testing import assert_close, supports_dtype
from netcl.ops import _cross_entropy, _softmax, _softmax_rows
from netcl.ops._cross_entropy import softmax_cross_entropy as _softmax_cross_entropy
from netcl.ops.testing import OpInfo, check_error, check_op

FLOATS = ("float32", "float16", "float64")


def _x(shape: tuple[int, ...], scale: float = 4.0) -> Any:
    return np.random.default_rng(sum(shape)).standard_normal(shape) * scale


def _ref_softmax(a: Any, axis: int = -1) -> Any:
    z = a - a.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def _ref_log_softmax(a: Any, axis: int = -1) -> Any:
    z = a - a.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


# rows (inner 1) of odd lengths, a middle axis (inner > 1), the leading axis
_SAMPLES = [((_x((1, 1)),), {}), ((_x((7, 33)),), {}), ((_x((3, 257)),), {}),
            ((_x((3, 5, 7)),), {"axis": 1}), ((_x((33, 4)),), {"axis": 0})]

# a NaN, +inf, -inf, every value -inf, and a plain row; then the same along axis 0
_SPECIAL = np.array([[0.0, np.nan, 1.0], [np.inf, 0.0, 1.0], [-np.inf, 0.0, 1.0],
                     [-np.inf, -np.inf, -np.inf], [0.5, -2.0, 3.0]])
_NAN_INPUTS = [((_SPECIAL,), {}), ((_SPECIAL.T.copy(),), {"axis": 0})]


def _axis_2(name: str) -> list[Any]:
    return [((_x((6, 4)),), {"axis": 2}, IndexError, f"{name}: axis 2")]


TABLE = [
    OpInfo("softmax", ops.softmax, _ref_softmax, _SAMPLES, grad="softmax",
           nan_inputs=_NAN_INPUTS, errors=_axis_2("softmax")),
    OpInfo("log_softmax", ops.log_softmax, _ref_log_softmax, _SAMPLES, grad="log_softmax",
           nan_inputs=_NAN_INPUTS, errors=_axis_2("log_softmax")),
]


# Two kernels: the column kernel (REDUCTION_SEQUENTIAL, and every inner > 1) and the row
# work-group kernel (REDUCTION_PARALLEL; REDUCTION_WORKGROUP runs the same one). Each is built
# per dtype, so each is forced in every dtype: a float accumulator or scratch in the float64
# build would pass float32 tests.
SEQ, PAR = KernelVariant.REDUCTION_SEQUENTIAL, KernelVariant.REDUCTION_PARALLEL
WG = KernelVariant.REDUCTION_WORKGROUP
CASES = [(dtype, v) for dtype in FLOATS for v in (SEQ, PAR)] + [("float32", WG)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1].name}")
@pytest.mark.parametrize("info", TABLE, ids=lambda i: i.name)
def test_softmax(dev: DeviceHandle, info: OpInfo, case: tuple[str, KernelVariant]) -> None:
    dtype, variant = case
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    with force_variant(variant):
        for args, kwargs in info.samples:
            check_op(dev, info.op, info.ref, args, kwargs, dtype=dtype, scale=2.0)


def test_default_selection_and_stability(dev: DeviceHandle) -> None:
    x = _x((4, 1000), scale=30.0) + 1000.0  # exp would overflow without the max shift
    check_op(dev, ops.softmax, _ref_softmax, (x,))
    check_op(dev, ops.log_softmax, _ref_log_softmax, (x,), scale=10.0)
    rows = ops.softmax(Tensor.from_host(dev.queue, x)).to_host().sum(axis=1)
    assert_close(rows, np.ones(4), "float32", scale=0.1)  # a sum of 1000 terms < 1


def test_nan_row(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.array([[0.0, np.nan, 1.0], [0.0, 0.0, 0.0]]))
    for variant in (KernelVariant.REDUCTION_SEQUENTIAL, KernelVariant.REDUCTION_PARALLEL):
        with force_variant(variant):
            y = ops.softmax(x).to_host()
            assert np.isnan(y[0]).all()
            assert_close(y[1], np.full(3, 1 / 3), "float32", scale=0.01)  # one division


def _ref_nll(logp: Any, labels: Any, ignore_index: int = -100) -> Any:
    keep = labels != ignore_index
    rows = logp[np.arange(len(labels)), np.where(keep, labels, 0)]
    return np.where(keep, -rows, 0.0)


_LOGP = _ref_log_softmax(_x((33, 7)))
_LABELS = np.random.default_rng(1).integers(0, 7, size=33)
_LABELS[::5] = -100
_LABELS_3 = np.where(_LABELS == -100, 3, _LABELS)

NLL = OpInfo("nll_gather", ops.nll_gather, _ref_nll, [
    ((_LOGP, _LABELS), {}), ((_LOGP, _LABELS_3), {"ignore_index": 3})], grad="nll_gather",
    nan_inputs=[((_SPECIAL, np.array([0, 1, 2, 0, -100])), {})], errors=[
        ((_x((6, 4)), _x((6, 4))), {}, TypeError, "nll_gather: labels must be int32 or int64")])


@pytest.mark.parametrize("label_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_nll_gather(dev: DeviceHandle, dtype: str, label_dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    for (logp, labels), kwargs in [*NLL.samples, *NLL.nan_inputs]:
        with np.errstate(all="ignore"):
            check_op(dev, NLL.op, NLL.ref, (logp, labels.astype(label_dtype)), kwargs,
                     dtype=dtype)


@pytest.mark.parametrize("label_dtype", ["int32", "int64"])
@pytest.mark.parametrize("case", [
    (33, [5], 5, 5),  # the issue's: label 5 of 5 classes, one bad row among 33
    (7, [2, 6, 0], 7, -1),  # several bad rows (-1 at rows 0 and 6): the first is named
    (1, [0], 99, 99),
    (7, [3], 0, 0),  # C = 0: every label is out of range
], ids=str)
def test_nll_gather_out_of_range_raises_on_every_backend(dev: DeviceHandle, label_dtype: str,
                                                        case: Any) -> None:
    """Every backend raises the NumPy backend's error (it used to be a NaN loss on OpenCL),
    naming the first bad label; ignore_index rows stay exempt. ``case``: rows, rows given a
    bad label, C, the first bad label."""
    n, rows, C, first = case
    labels = np.random.default_rng(2).integers(0, C, size=n) if C else np.full(n, -100)
    labels = labels.astype(label_dtype)
    labels[rows[1:]] = -1
    labels[rows[0]] = first
    logp = Tensor.from_host(dev.queue, np.zeros((n, C)))
    with pytest.raises(ValueError, match=rf"nll_gather: label {first} is out of range for {C} "
                                         rf"classes \(ignore_index is -100\)"):
        ops.nll_gather(logp, Tensor.from_host(dev.queue, labels))
    labels[rows] = -100  # ignored now: the same call succeeds
    out = ops.nll_gather(logp, Tensor.from_host(dev.queue, labels)).to_host()
    assert out.shape == (n,) and not np.isnan(out).any()


def test_nll_gather_ignore_index_is_never_out_of_range(dev: DeviceHandle) -> None:
    logp = np.log(np.full((3, 4), 0.25))
    labels = np.array([1, 7, 2])  # 7 is out of range for 4 classes, but ignored
    check_op(dev, lambda a, b: ops.nll_gather(a, b, ignore_index=7),
             lambda a, b: _ref_nll(a, b, 7), (logp, labels))


@pytest.mark.parametrize("variant", [SEQ, PAR], ids=lambda v: v.name)
def test_empty(dev: DeviceHandle, variant: KernelVariant) -> None:
    with force_variant(variant):
        for info in TABLE:
            check_op(dev, info.op, info.ref, (np.zeros((0, 5)),))
            check_op(dev, info.op, info.ref, (np.zeros((4, 0)),), {"axis": 0})
    check_op(dev, ops.nll_gather, _ref_nll, (np.zeros((0, 5)), np.zeros(0, np.int64)))


# errors of one op are rows of its OpInfo (netcl-autograd's op raises them too); these are
# the others
ERRORS = [
    ("softmax_int", lambda x, y: ops.softmax(y), TypeError, "softmax: needs a floating-point"),
    ("nll_shapes", lambda x, y: ops.nll_gather(x, ops.view(y, (2, 3))), ValueError,
     r"nll_gather: expected logp \(N, C\) and labels \(N,\)"),
]


@pytest.mark.parametrize("case", ERRORS, ids=lambda c: c[0])
def test_errors(dev: DeviceHandle, case: Any) -> None:
    _, op, exc, pattern = case
    check_error(dev, op, (_x((6, 4)), np.arange(6)), {}, exc, pattern)


@pytest.mark.parametrize("info", [*TABLE, NLL], ids=lambda i: i.name)
def test_row_errors(dev: DeviceHandle, info: OpInfo) -> None:
    for args, kwargs, exc, pattern in info.errors:
        check_error(dev, info.op, args, kwargs, exc, pattern)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1].name}")
@pytest.mark.parametrize("info", TABLE, ids=lambda i: i.name)
def test_nan_inputs(dev: DeviceHandle, info: OpInfo, case: tuple[str, KernelVariant]) -> None:
    """NaN and infinities in each kernel: a row with a NaN or +inf is NaN, -inf gives 0
    (log_softmax -inf), a row of -inf is NaN, as in NumPy."""
    dtype, variant = case
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    with force_variant(variant), np.errstate(all="ignore"):
        for args, kwargs in info.nan_inputs:
            check_op(dev, info.op, info.ref, args, kwargs, dtype=dtype, scale=2.0)


def test_doctests() -> None:
    assert doctest.testmod(_softmax).failed == 0


# -- softmax_cross_entropy (NOTE [ Several rows per work-group ] in netcl.ops._softmax_rows) ---


def _ref_cross_entropy(x: Any, labels: Any, ignore_index: int = -100, reduction: str = "mean"
                       ) -> tuple[Any, Any]:
    logp = _ref_log_softmax(x)
    per_row = _ref_nll(logp, labels, ignore_index)
    if reduction == "none":
        return per_row, logp
    with np.errstate(all="ignore"):
        total = per_row.sum()
        return (total if reduction == "sum" else total / (labels != ignore_index).sum()), logp


# one launch (the last group merges), two (xent_row, xent_sum), the composition
FORMS = {"merged": {}, "two": {"merge": False}, "composed": {"fused": False}}


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_cross_entropy(dev: DeviceHandle, dtype: str, label_dtype: str, reduction: str,
                               form: str) -> None:
    """The loss and the log-probabilities it keeps, against NumPy in float64: classes 1, 7,
    33, 257, 1000 and 50257 (beyond the row kernel: the composition), ignored rows, a
    custom ignore_index, a row of -inf logits but its label's, and a NaN row."""
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dev.device_name} has no {dtype}")
    rng = np.random.default_rng(3)
    for n, c in ((1, 1), (7, 7), (33, 33), (9, 257), (17, 1000), (3, 50257)):
        x = _x((n, c))
        labels = rng.integers(0, c, size=n)
        labels[1::4] = -100
        if n > 6:
            x[2, :] = -np.inf
            x[2, labels[2]] = 0.0  # loss 0
            x[5, 3] = np.nan  # a NaN row: its loss NaN
        for ignore in (-100, int(labels[0])):
            y = np.where(labels == -100, ignore, labels).astype(label_dtype)
            with np.errstate(all="ignore"):
                check_op(dev, lambda a, b, ig=ignore: _softmax_cross_entropy(
                    a, b, ig, reduction, keep_logp=True, **FORMS[form]),
                    lambda a, b, ig=ignore: _ref_cross_entropy(a, b, ig, reduction),
                    (x, y), dtype=dtype, scale=4.0)
            loss, logp = _softmax_cross_entropy(
                Tensor.from_host(dev.queue, x), Tensor.from_host(dev.queue, y),
                ignore, reduction, **FORMS[form])
            assert logp is None and loss.shape == ((n,) if reduction == "none" else ())


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_softmax_cross_entropy_bad_labels(dev: DeviceHandle, reduction: str, form: str) -> None:
    """A label outside [0, C) that is not ignore_index raises naming the first one, for
    every reduction (the fused kernels' flag is written whole each call: a good call after a
    bad one passes); every row ignored: mean NaN (0 / 0, as PyTorch), sum 0."""
    x = Tensor.from_host(dev.queue, _x((9, 10)))
    labels = np.arange(9) % 10
    labels[[4, 7]] = [10, -1]
    with pytest.raises(ValueError, match=r"label 10 is out of range for 10 classes"):
        _softmax_cross_entropy(x, Tensor.from_host(dev.queue, labels), reduction=reduction,
                               **FORMS[form])
    labels[[4, 7]] = -100
    loss, _ = _softmax_cross_entropy(x, Tensor.from_host(dev.queue, labels), reduction=reduction,
                                     **FORMS[form])
    assert not np.isnan(loss.to_host()).any()
    none = Tensor.from_host(dev.queue, np.full(9, -100))
    got = _softmax_cross_entropy(x, none, reduction=reduction, **FORMS[form])[0].to_host()
    if reduction == "mean":
        assert np.isnan(got)
    else:
        assert not np.asarray(got).any()


def test_softmax_cross_entropy_many_groups(dev: DeviceHandle) -> None:
    """More work-groups than the merging group has lanes (70001 rows of 7: 2188 groups of 32
    rows), and rows of 1000 from an unaligned offset: the merged mean and sum against NumPy,
    the same bits on a second call (the partials merge in group order), the ticket counter
    reset (a third call agrees)."""
    rng = np.random.default_rng(5)
    for n, c, offset in ((70001, 7, 0), (3001, 1000, 3)):
        host = rng.standard_normal(n * c + offset) * 3.0
        x = narrow_view(Tensor.from_host(dev.queue, host.astype(np.float32)), offset, (n, c))
        a = host[offset:].astype(np.float32).astype(np.float64).reshape(n, c)
        labels = rng.integers(0, c, size=n)
        labels[::7] = -100
        y = Tensor.from_host(dev.queue, labels)
        for reduction in ("mean", "sum"):
            want = _ref_cross_entropy(a, labels, -100, reduction)[0]
            got = [_softmax_cross_entropy(x, y, reduction=reduction)[0].to_host()
                   for _ in range(3)]
            assert got[0].tobytes() == got[1].tobytes() == got[2].tobytes()
            np.testing.assert_allclose(got[0], want, rtol=2e-5)


def test_softmax_cross_entropy_errors(dev: DeviceHandle) -> None:
    x, y = _x((4, 3)), np.array([0, 1, 2, 0])
    check_error(dev, _softmax_cross_entropy, (x, y.astype(np.float32)), {}, TypeError,
                "softmax_cross_entropy: labels must be int32 or int64")
    check_error(dev, _softmax_cross_entropy, (x, y[:3]), {}, ValueError,
                r"softmax_cross_entropy: expected logits \(N, C\) and labels \(N,\)")
    check_error(dev, _softmax_cross_entropy, (x, y), {"reduction": "avg"}, ValueError,
                "softmax_cross_entropy: reduction must be one of")


def test_cross_entropy_doctests() -> None:
    assert doctest.testmod(_cross_entropy).failed == 0
    assert doctest.testmod(_softmax_rows).failed == 0
