"""The JIT compiler: fused chains run as one kernel forward and at most two backward, with the
numbers of the unfused ops; kernels are cached by structure; user primitives fuse and
differentiate; the NumPy backend evaluates the same expressions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.autograd import compiler, ops
from netcl.autograd._cexpr import compile_expression
from netcl.autograd.testing import check_grad
from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close, supports_dtype

rng = np.random.default_rng(7)


def chain(x: Tensor, w: Tensor, b: Tensor, s: Tensor, t: Tensor) -> Tensor:
    """The chain of the issue: relu(x * w + b) * s - t, written with ag.ops."""
    return ops.sub(ops.mul(ops.relu(ops.add(ops.mul(x, w), b)), s), t)


def chain_ref(x: Any, w: Any, b: Any, s: Any, t: Any) -> Any:
    return np.maximum(x * w + b, 0) * s - t


fused_chain = compiler.jit(chain)

SHAPES = [(33, 17), (17,), (33, 1), (1,), (33, 17)]


def inputs(dev: DeviceHandle, shapes: list[tuple[int, ...]], dtype: str = "float32",
           grad: bool = True) -> list[Tensor]:
    out = []
    for shape in shapes:
        t = Tensor.from_host(dev.queue, rng.standard_normal(shape), dtype=dtype)
        t.requires_grad = grad
        out.append(t)
    return out


def run(fn: Callable[..., Tensor], args: list[Tensor], g: np.ndarray[Any, Any]
        ) -> tuple[np.ndarray[Any, Any], list[np.ndarray[Any, Any]], int, int]:
    """Forward + backward of ``fn``: (output, grads, forward launches, backward launches)."""
    for a in args:
        a.grad = None
    with ag.Tape() as tape:
        with count_launches() as fwd:
            y = fn(*args)
    gt = Tensor.from_host(args[0].queue, g, dtype=y.dtype)
    with count_launches() as bwd:
        tape.backward(y, grad=gt)
    grads = [a.grad.to_host().astype(np.float64) for a in args if a.grad is not None]
    return y.to_host().astype(np.float64), grads, fwd[0], bwd[0]


def test_fused_chain_is_one_kernel_forward_two_backward(dev: DeviceHandle) -> None:
    args = inputs(dev, SHAPES)
    g = rng.standard_normal((33, 17))
    y_fused, g_fused, fwd, bwd = run(fused_chain, args, g)
    y_ref, g_ref, fwd_ref, bwd_ref = run(chain, args, g)
    # fused and eager round the same float32 operations (a hundredth of the table), the
    # reference is float64 (a tenth); gradients are summed in other orders (a tenth, rtol
    # and atol alike: the table's atol is a tenth of its rtol)
    assert_close(y_fused, y_ref, "float32", scale=0.01)
    host = [a.to_host().astype(np.float64) for a in args]
    assert_close(y_fused, chain_ref(*host), "float32", scale=0.1)
    assert len(g_fused) == len(g_ref) == 5
    for a, b in zip(g_fused, g_ref):
        assert_close(a, b, "float32", scale=0.1)
    if dev.backend == "cl":
        assert (fwd, bwd) == (1, 2), (fwd, bwd)
        assert fwd_ref == 5 and bwd_ref > 5  # the unfused ops, for comparison
    else:
        assert fwd == bwd == 0


def test_fused_gradients_match_the_float64_reference(dev: DeviceHandle) -> None:
    args = [rng.standard_normal(s) for s in [(4, 5), (5,), (4, 1), (1,), (4, 5)]]
    check_grad(dev, fused_chain, chain_ref, args)


def test_backward_is_one_kernel_when_nothing_is_broadcast(dev: DeviceHandle) -> None:
    f = compiler.jit(lambda a, b: ops.div(ops.tanh(a * b), ops.add(ops.exp(b), 1.0)))
    args = inputs(dev, [(6, 7), (6, 7)])
    _, _, fwd, bwd = run(f, args, rng.standard_normal((6, 7)))
    if dev.backend == "cl":
        assert (fwd, bwd) == (1, 1)
    check_grad(dev, f, lambda a, b: np.tanh(a * b) / (np.exp(b) + 1.0),
               tuple(t.to_host().astype(np.float64) for t in args))


@pytest.mark.parametrize("shapes", [
    [(5, 1, 3), (1, 4, 1)],   # outer product: both broadcast
    [(300,), (1,)],           # one element reduced over everything
    [(2, 3, 4, 5), (3, 1, 5)],
    [(1, 1), (1, 1)],         # single element
], ids=["outer", "scalar_tensor", "4d", "one_element"])
def test_broadcasting_corners(dev: DeviceHandle, shapes: list[tuple[int, ...]]) -> None:
    f = compiler.jit(lambda a, b: ops.sigmoid(a - b) * b)
    args = tuple(rng.standard_normal(s) for s in shapes)
    check_grad(dev, f, lambda a, b: b / (1 + np.exp(b - a)), args, scale=5.0)


def _sigmoid(v: Any) -> Any:
    return 1 / (1 + np.exp(-v))


# Leaf indices count numbers too; the strides of a layout count tensors only. A number among
# the leaves before a tensor used to shift one numbering onto the other (IndexError in
# Layout.kept on OpenCL). Leaves are numbered as the trace first reaches them, inner ops first:
# the leaves of ``(1.5 - x) * y`` are 1.5, x, y; those of ``1.5 - x * y`` are x, y, 1.5.
NUMBER_CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any], list[tuple[int, ...]]]] = {
    "number_first": (lambda x, b: 0.5 * x + b, lambda x, b: 0.5 * x + b, [(5, 7), (5, 1)]),
    "number_first_no_broadcast": (lambda x, y: (1.5 - x) * y, lambda x, y: (1.5 - x) * y,
                                  [(4, 6), (4, 6)]),
    "number_middle": (lambda x, w: ops.tanh(x * 2.0 - w) * w,
                      lambda x, w: np.tanh(x * 2.0 - w) * w, [(5, 7), (7,)]),
    "number_last": (lambda x, w, b: (x * w + b) * 0.5, lambda x, w, b: (x * w + b) * 0.5,
                    [(6, 1, 4), (3, 1), (1,)]),
    "numbers_everywhere": (
        lambda x, w, b: 2.0 * x - ops.sigmoid(w * 3.0) / (1.0 + b * b) + 0.25,
        lambda x, w, b: 2.0 * x - _sigmoid(w * 3.0) / (1.0 + b * b) + 0.25,
        [(5, 7), (7,), (5, 1)],
    ),
}


@pytest.mark.parametrize("name", list(NUMBER_CASES))
def test_numbers_anywhere_among_the_leaves(dev: DeviceHandle, name: str) -> None:
    fn, ref, shapes = NUMBER_CASES[name]
    f = compiler.jit(fn)
    check_grad(dev, f, ref, tuple(rng.standard_normal(s) for s in shapes))
    with count_launches() as n:
        f(*inputs(dev, shapes))
    if dev.backend == "cl":
        assert n[0] == 1  # still one fused kernel


def test_empty_tensors(dev: DeviceHandle) -> None:
    x, w = inputs(dev, [(0, 3), (3,)])
    with ag.Tape() as tape:
        y = compiler.jit(lambda x, w: ops.relu(x * w))(x, w)
    assert y.shape == (0, 3)
    tape.backward(y, grad=Tensor.from_shape(dev.queue, (0, 3)))
    assert x.grad is not None and w.grad is not None
    assert x.grad.shape == (0, 3) and w.grad.to_host().tolist() == [0.0, 0.0, 0.0]


def test_same_tensor_twice_is_one_leaf(dev: DeviceHandle) -> None:
    (x,) = inputs(dev, [(9,)])
    f = compiler.jit(lambda x: x * x + x)
    _, (gx,), _, bwd = run(f, [x], np.ones(9))
    assert_close(gx, 2 * x.to_host() + 1, "float32", scale=0.01)  # two roundings
    if dev.backend == "cl":
        assert bwd == 1


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_other_dtypes(dev: DeviceHandle, dtype: str) -> None:
    if not supports_dtype(dev, dtype):
        pytest.skip(f"{dtype} not supported on this device")
    args = [rng.standard_normal(s) for s in [(3, 4), (4,), (3, 1), (1,), (3, 4)]]
    check_grad(dev, fused_chain, chain_ref, args, dtype=dtype)


def test_kernels_are_cached_by_structure(dev: DeviceHandle) -> None:
    f = compiler.jit(lambda x, w: ops.mul(ops.tanh(x * w - 0.5), 3.0))
    before = compiler.cache_info()["generated"]
    for rows, k in ((4, 0.5), (9, 1.5), (33, -2.0)):
        x, w = inputs(dev, [(rows, 5), (5,)])
        with ag.Tape() as tape:
            y = f(x, w)
            z = compiler.jit(lambda x: x * k + 1.0)(x)
        tape.backward(y, grad=Tensor.from_host(dev.queue, np.ones((rows, 5))))
        assert z.shape == (rows, 5)
    generated = compiler.cache_info()["generated"] - before
    if dev.backend == "cl":
        # f: forward, full and reduce backward; the second lambda: forward. Built once each.
        assert generated == 4, compiler.cache_info()
    else:
        assert generated == 0


def test_non_fusible_op_materializes_its_inputs(dev: DeviceHandle) -> None:
    f = compiler.jit(lambda x, w: ops.sum(x * w, axis=1, keepdims=True) * x + w)
    args = inputs(dev, [(4, 6), (6,)])
    with count_launches() as n:
        f(*args)
    if dev.backend == "cl":
        assert n[0] <= 1 + 2 + 1  # x*w fused, the reduction (<= 2 kernels), the tail fused
    check_grad(dev, f, lambda x, w: (x * w).sum(1, keepdims=True) * x + w,
               tuple(a.to_host().astype(np.float64) for a in args))


# -- user primitives --------------------------------------------------------------------------

SCALED_SOFTPLUS = compiler.register_primitive(
    "test_scaled_softplus",
    forward=lambda args, attrs: f"MUL(LIT({attrs['k']}), log(ADD(LIT(1.0), exp({args[0]}))))",
    backward=lambda args, g, attrs, out: [
        f"MUL({g}, MUL(LIT({attrs['k']}), SIGMOID({args[0]})))"],
    arity=1,
)

compiler.register_primitive(
    "test_mul_add_self",  # the KernelSpec page's two-argument shape: grads per input
    forward=lambda args, attrs: f"ADD(MUL({args[0]}, {args[1]}), {args[0]})",
    backward=lambda args, g, attrs, out: [f"MUL({g}, ADD({args[1]}, LIT(1.0)))",
                                          f"MUL({g}, {args[0]})"],
    arity=2,
    fusible=True,
)

compiler.register_primitive(
    "test_boundary",
    forward=lambda args, attrs: f"SQR({args[0]})",
    backward=lambda args, g, attrs, out: [f"MUL(LIT(2.0), MUL({g}, {args[0]}))"],
    arity=1,
    fusible=False,
)


def test_user_primitive_fuses_and_differentiates(dev: DeviceHandle) -> None:
    def f(x: Tensor, y: Tensor) -> Tensor:
        return ops.relu(ops.sub(compiler.apply("test_mul_add_self", x, y),
                                SCALED_SOFTPLUS(y, k=2.0)))

    fused = compiler.jit(f)
    args = inputs(dev, [(5, 3), (3,)])
    with count_launches() as n:
        fused(*args)
    if dev.backend == "cl":
        assert n[0] == 1

    def ref(x: Any, y: Any) -> Any:
        return np.maximum(x * y + x - 2.0 * np.log1p(np.exp(y)), 0)

    host = [rng.standard_normal((5, 3)) + 3.0, rng.standard_normal(3)]
    check_grad(dev, fused, ref, host)
    check_grad(dev, f, ref, host)  # eager: each primitive is its own kernel


MY_OP = compiler.register_primitive(  # the KernelSpec page's example, runnable on every backend
    name="test_my_op",
    forward=lambda args, attrs: f"MY_OP({args[0]}, {args[1]})",
    backward=lambda args, grad_var, attrs, out_var: [
        f"MUL({grad_var}, MY_DOP({args[1]}))",
        f"MUL({grad_var}, MUL({args[0]}, MY_DOP({args[1]})))",
    ],
    arity=2,
    fusible=True,
    preamble="#define MY_OP(a, b) ((a) * exp(b))\n#define MY_DOP(b) exp(b)\n",
    numpy_functions={"MY_OP": lambda a, b: a * np.exp(b), "MY_DOP": np.exp},
)


def test_user_primitive_with_preamble(dev: DeviceHandle) -> None:
    f = compiler.jit(lambda x, y: ops.tanh(ops.mul(MY_OP(x, y), 0.5)))
    check_grad(dev, f, lambda x, y: np.tanh(x * np.exp(y) * 0.5),
               (rng.standard_normal((3, 4)), rng.standard_normal(4)))
    check_grad(dev, MY_OP, lambda x, y: x * np.exp(y),
               (rng.standard_normal((2, 5)), rng.standard_normal((2, 5))))


def test_attrs_select_different_kernels(dev: DeviceHandle) -> None:
    (x,) = inputs(dev, [(4,)], grad=False)
    one = SCALED_SOFTPLUS(x, k=1.0).to_host()
    three = SCALED_SOFTPLUS(x, k=3.0).to_host()
    assert_close(three, 3 * one, "float32", scale=0.1)


def test_non_fusible_primitive_is_a_boundary(dev: DeviceHandle) -> None:
    f = compiler.jit(lambda x: ops.add(compiler.apply("test_boundary", x * 2.0), 1.0))
    (x,) = inputs(dev, [(7,)])
    with count_launches() as n:
        y = f(x)
    assert_close(y.to_host(), (2 * x.to_host()) ** 2 + 1, "float32", scale=0.1)
    if dev.backend == "cl":
        assert n[0] == 3
    check_grad(dev, f, lambda x: (2 * x) ** 2 + 1, (x.to_host().astype(np.float64),))


def test_gradcheck_through_jit(dev: DeviceHandle) -> None:
    args = inputs(dev, [(3, 4), (4,), (3, 1), (1,), (3, 4)])
    assert ag.gradcheck(fused_chain, args)


# -- errors -----------------------------------------------------------------------------------


def test_errors_name_the_op_and_values(dev: DeviceHandle) -> None:
    x = Tensor.from_host(dev.queue, np.ones(3))
    i = Tensor.from_host(dev.queue, np.ones(3, dtype=np.int64))
    with pytest.raises(TypeError, match="one floating-point dtype, got float32, int64"):
        compiler.apply("add", x, i)
    with pytest.raises(ValueError, match=r"add: shapes \(3,\) and \(4,\) cannot be broadcast"):
        compiler.apply("add", x, Tensor.from_host(dev.queue, np.ones(4)))
    with pytest.raises(KeyError, match="no primitive 'nope'"):
        compiler.apply("nope", x)
    with pytest.raises(TypeError, match="relu: takes 1 operands, got 2"):
        compiler.apply("relu", x, x)
    with pytest.raises(ValueError, match="registered already"):
        compiler.register_primitive("relu", lambda a, k: "a", None, 1)
    with pytest.raises(ValueError, match="C identifier"):
        compiler.register_primitive("bad name", lambda a, k: "a", None, 1)
    with pytest.raises(ValueError, match="arity must be an int >= 1"):
        compiler.register_primitive("bad_arity", lambda a, k: "a", None, 0)


def test_primitive_without_backward_is_not_differentiable(dev: DeviceHandle) -> None:
    compiler.register_primitive("test_nograd", lambda a, k: f"NEG({a[0]})", None, 1,
                                replace=True)
    x = Tensor.from_host(dev.queue, np.ones(2))
    x.requires_grad = True
    with ag.Tape() as tape:
        y = compiler.apply("test_nograd", x)
    assert y.to_host().tolist() == [-1.0, -1.0]
    with pytest.raises(RuntimeError, match="registered without backward"):
        tape.backward(y, grad=Tensor.from_host(dev.queue, np.ones(2)))


# -- the NumPy evaluator of C expressions -------------------------------------------------------


@pytest.mark.parametrize("expr, want", [
    ("1 + 2 * 3 - 4 / 2.0f", 5.0),
    ("-x * 2", -3.0),
    ("x > 1 ? MAX(x, 4.0f) : 0", 4.0),
    ("(float)(x >= 1.5) + (x == 1.5 && !(x != 1.5))", 2.0),
    ("fmax(x, LIT(2.0)) + SIGMOID(0.0f) + RELU(-x)", 2.5),
    ("pow(x, 2.0f) + 1e-1f", 2.35),
], ids=["precedence", "unary", "ternary", "logic", "macros", "functions"])
def test_c_expression_evaluator(expr: str, want: float) -> None:
    got = compile_expression(expr)({"x": np.float32(1.5)})
    assert_close(float(got), want, "float32", scale=0.01)  # a few float32 roundings


def test_c_expression_errors() -> None:
    with pytest.raises(ValueError, match="does not know the function 'frobnicate'"):
        compile_expression("frobnicate(x)")
    with pytest.raises(ValueError, match="unknown variable 'y'"):
        compile_expression("x + y")({"x": 1.0})
    with pytest.raises(ValueError, match="ends early"):
        compile_expression("exp(x")


def test_gpu_and_cpu_reduce_layouts_agree(dev: DeviceHandle, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    """The reduce kernel sums blocks on CPU devices and interleaves positions elsewhere: run
    both layouts here (whatever the device) and compare."""
    if dev.backend != "cl":
        pytest.skip("OpenCL kernels only")
    from netcl.autograd import _codegen

    args = inputs(dev, [(40, 9), (9,), (40, 1), (1,), (40, 9)])
    g = rng.standard_normal((40, 9))
    results = []
    for cpu in (True, False):
        monkeypatch.setattr(_codegen, "_is_cpu", lambda device, cpu=cpu: cpu)
        results.append(run(fused_chain, args, g)[1])
    for a, b in zip(*results):
        assert_close(a, b, "float32", scale=0.1)
    host = [a.to_host().astype(np.float64) for a in args]
    check_grad(dev, fused_chain, chain_ref, tuple(host))
