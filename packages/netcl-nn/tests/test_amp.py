"""Automatic mixed precision: autocast's dtypes, gradients against the float32 run, nesting and
threads; GradScaler's scaling, skipped steps, growth, checkpoints and a short training run."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np
import pytest

import netcl.autograd as ag
from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor, copy_from_host
from netcl.core.testing import assert_close, tolerance
from netcl.nn import (
    BatchNorm2d,
    Conv2d,
    Flatten,
    GradScaler,
    LayerNorm,
    Linear,
    MaxPool2d,
    Module,
    ReLU,
    Sequential,
    autocast,
)
from netcl.nn import functional as F
from netcl.nn.amp import get_autocast_dtype, is_autocast_enabled

# float16 keeps 11 significant bits (relative rounding 4.9e-4). A float16 result is compared
# with the float32 one at 1e-2 of its largest magnitude: the inputs, the weights and the result
# are each rounded once, and the kernels accumulate in float32, so the error stays well below.
FP16_RTOL = tolerance("float16")[0]  # 1e-2, the table's


def _t(dev: DeviceHandle, a: Any, dtype: str = "float32") -> Tensor:
    return Tensor.from_host(dev.queue, np.asarray(a), dtype=dtype)


def _close(actual: Tensor, expected: Tensor, rtol: float = FP16_RTOL) -> None:
    a, e = actual.to_host().astype(np.float64), expected.to_host().astype(np.float64)
    np.testing.assert_allclose(a, e, rtol=0, atol=rtol * max(np.abs(e).max(), 1e-6))


# -- autocast --------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 7, 33])
def test_autocast_runs_linear_and_conv_in_float16(dev: DeviceHandle, batch: int) -> None:
    rng = np.random.default_rng(batch)
    lin = Linear(33, 7, queue=dev.queue, rng=rng)
    conv = Conv2d(3, 5, 3, padding=1, queue=dev.queue, rng=rng)
    x = _t(dev, rng.normal(size=(batch, 33)))
    img = _t(dev, rng.normal(size=(batch, 3, 7, 7)))
    with autocast():
        y, z = lin(x), conv(img)
        y3 = lin(_t(dev, rng.normal(size=(2, batch, 33))))
    assert (y.dtype, z.dtype, y3.dtype) == ("float16", "float16", "float16")
    assert (y.shape, z.shape, y3.shape) == ((batch, 7), (batch, 5, 7, 7), (2, batch, 7))
    assert {p.dtype for p in (*lin.parameters(), *conv.parameters())} == {"float32"}
    _close(y, lin(x))
    _close(z, conv(img))


def test_autocast_keeps_sensitive_ops_in_float32(dev: DeviceHandle) -> None:
    rng = np.random.default_rng(0)
    h = _t(dev, rng.normal(size=(7, 5)), "float16")
    img = _t(dev, rng.normal(size=(7, 3, 5, 5)), "float16")
    labels = _t(dev, rng.integers(0, 5, 7), "int32")
    bn, ln = BatchNorm2d(3, queue=dev.queue), LayerNorm(5, queue=dev.queue)
    with autocast():
        out = {
            "cross_entropy": F.cross_entropy(h, labels),
            "mse_loss": F.mse_loss(h, h),
            "softmax": F.softmax(h),
            "log_softmax": F.log_softmax(h),
            "sum": F.sum(h),
            "mean": F.mean(h, axis=1),
            "exp": F.exp(h),
            "BatchNorm2d": bn(img),
            "LayerNorm": ln(h),
            "add float16 + float32": F.add(h, _t(dev, np.ones(5))),
        }
        kept = {"relu": F.relu(h), "max_pool2d": F.max_pool2d(img, 2), "add": F.add(h, h)}
    assert {k: v.dtype for k, v in out.items()} == dict.fromkeys(out, "float32")
    assert {k: v.dtype for k, v in kept.items()} == dict.fromkeys(kept, "float16")
    assert bn.running_mean.dtype == "float32"
    _close(out["softmax"], F.softmax(F.cast(h, "float32")), rtol=1e-6)


def test_nested_disabled_and_per_thread(dev: DeviceHandle) -> None:
    lin = Linear(4, 3, queue=dev.queue, rng=np.random.default_rng(0))
    x = _t(dev, np.ones((1, 4)))
    seen: list[bool] = []
    with autocast():
        worker = threading.Thread(target=lambda: seen.append(is_autocast_enabled()))
        worker.start()
        worker.join()
        with autocast(enabled=False):
            off = lin(x).dtype
            with autocast(dtype="half"):
                inner = lin(x).dtype
                dtype = get_autocast_dtype()
            back = lin(x).dtype
        on = lin(x).dtype
    assert (off, inner, back, on, lin(x).dtype) == (
        "float32", "float16", "float32", "float16", "float32")
    assert dtype == "float16" and seen == [False] and not is_autocast_enabled()


def test_autocast_state_is_restored_after_an_exception() -> None:
    with pytest.raises(KeyError), autocast():
        raise KeyError("boom")
    assert not is_autocast_enabled()


def test_autocast_rejects_other_dtypes() -> None:
    with pytest.raises(ValueError, match="autocast: dtype 'bfloat16' is not supported"), \
            autocast(dtype="bfloat16"):
        pass
    with pytest.raises(ValueError, match=r"autocast: dtype must be 'float16'.*got 'float32'"), \
            autocast(dtype="float32"):
        pass
    with pytest.raises(TypeError, match="autocast: dtype must be a dtype name, got int"), \
            autocast(dtype=16):  # type: ignore[arg-type]
        pass


def _cnn(dev: DeviceHandle) -> Module:
    rng = np.random.default_rng(0)
    q = dev.queue
    # no bias before batch norm: its true gradient is 0, and float16 noise would dominate it
    return Sequential(Conv2d(3, 4, 3, padding=1, bias=False, queue=q, rng=rng),
                      BatchNorm2d(4, queue=q),
                      ReLU(), MaxPool2d(2), Conv2d(4, 5, 3, queue=q, rng=rng), ReLU(), Flatten(),
                      Linear(5, 3, queue=q, rng=rng))


def _cnn_grads(dev: DeviceHandle, amp: bool) -> tuple[Tensor, dict[str, np.ndarray[Any, Any]]]:
    rng = np.random.default_rng(1)
    model = _cnn(dev)
    x = _t(dev, rng.normal(size=(7, 3, 6, 6)))
    y = _t(dev, rng.integers(0, 3, 7), "int32")
    with ag.Tape() as tape:
        with autocast(enabled=amp):
            loss = F.cross_entropy(model(x), y)
    tape.backward(loss)
    grads = {}
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.dtype == "float32", name
        grads[name] = p.grad.to_host().astype(np.float64)
    return loss, grads


def test_cnn_gradients_under_autocast_match_float32(dev: DeviceHandle) -> None:
    """Every master weight gets a float32 gradient close to the float32 run's. Tolerance:
    3e-2 of each gradient's largest entry. Activations and weights are rounded to float16 at
    each conv and linear in the forward, and the float16 gradients again in the backward, so
    errors of a few float16 ulps (5e-4 each) add up along the two convs, the pool and the
    linear layer; 3e-2 leaves room for that and still catches a wrong or missing gradient."""
    loss32, ref = _cnn_grads(dev, amp=False)
    loss16, got = _cnn_grads(dev, amp=True)
    assert loss16.dtype == "float32"
    assert_close(loss16.to_host(), loss32.to_host(), "float16")
    for name in ref:
        scale = max(np.abs(ref[name]).max(), 1e-6)
        np.testing.assert_allclose(got[name], ref[name], rtol=0, atol=3 * FP16_RTOL * scale,
                                   err_msg=name)


# -- GradScaler ------------------------------------------------------------------------------


class SGD:
    """Plain SGD on the host with ``param_groups`` and ``step``: all GradScaler needs
    (netcl-nn does not depend on netcl-optim). Counts its steps."""

    def __init__(self, params: Any, lr: float) -> None:
        self.param_groups = [{"params": list(params)}]
        self.lr, self.steps = lr, 0

    def step(self) -> str:
        self.steps += 1
        for p in self.param_groups[0]["params"]:
            if p.grad is not None:
                copy_from_host(p, p.to_host() - self.lr * p.grad.to_host())
        return "stepped"


def _model_with_grads(dev: DeviceHandle, scale: float = 1.0) -> tuple[Linear, SGD]:
    """A Linear(7, 33) whose gradients are ``scale`` times known values."""
    model = Linear(7, 33, queue=dev.queue, rng=np.random.default_rng(0))
    for i, p in enumerate(model.parameters()):
        p.grad = _t(dev, scale * np.full(p.shape, 0.25 * (i + 1)))
    return model, SGD(model.parameters(), lr=0.1)


def _host_params(model: Module) -> list[np.ndarray[Any, Any]]:
    return [p.to_host().copy() for p in model.parameters()]


def test_scale_multiplies_and_casts_float16_losses_up(dev: DeviceHandle) -> None:
    scaler = GradScaler(init_scale=1024.0)
    assert scaler.scale(_t(dev, np.array(1.5))).to_host().item() == 1536.0
    big = scaler.scale(_t(dev, np.array(100.0), "float16"))  # 102400 overflows float16
    assert big.dtype == "float32" and big.to_host().item() == 102400.0
    with pytest.raises(TypeError, match=r"GradScaler\.scale: loss must be a floating-point "
                                        r"Tensor, got int32"):
        scaler.scale(_t(dev, np.array(1), "int32"))


@pytest.mark.parametrize("foreach", ["1", "0"])
def test_step_unscales_on_the_device_and_steps(dev: DeviceHandle, foreach: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NETCL_FOREACH", foreach)
    model, opt = _model_with_grads(dev, scale=8.0)
    before = _host_params(model)
    scaler = GradScaler(init_scale=8.0)
    with count_launches() as launches:
        scaler.unscale_(opt)
    # on OpenCL one kernel for both gradients (NETCL_FOREACH=0: one per gradient; the new flag
    # starts cleared); nothing on NumPy
    assert launches[0] == (0 if dev.backend == "cpu" else 1 if foreach == "1" else 2)
    for i, p in enumerate(model.parameters()):
        np.testing.assert_array_equal(p.grad.to_host(), 0.25 * (i + 1))  # type: ignore[union-attr]
    assert scaler.step(opt) == "stepped" and opt.steps == 1
    scaler.update()
    for i, (p, old) in enumerate(zip(model.parameters(), before)):
        assert_close(p.to_host(), old - 0.1 * 0.25 * (i + 1), "float32", scale=0.01)
    assert scaler.get_scale() == 8.0


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan], ids=["inf", "-inf", "nan"])
def test_a_non_finite_gradient_skips_the_step_and_backs_off(dev: DeviceHandle,
                                                            bad: float) -> None:
    model, opt = _model_with_grads(dev)
    grad = np.full((33,), 0.5)
    grad[32] = bad
    model.bias.grad = _t(dev, grad)  # type: ignore[union-attr]
    before = _host_params(model)
    scaler = GradScaler(init_scale=4.0)
    assert scaler.step(opt) is None and opt.steps == 0
    scaler.update()
    for p, old in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.to_host(), old)  # bitwise unchanged
    assert scaler.get_scale() == 2.0
    assert scaler.state_dict()["_growth_tracker"] == 0


def test_overflow_while_unscaling_counts_as_inf(dev: DeviceHandle) -> None:
    model, opt = _model_with_grads(dev)
    model.weight.grad = _t(dev, np.full(model.weight.shape, 3e38))
    scaler = GradScaler(init_scale=0.5)  # 3e38 / 0.5 overflows float32
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 0.25


def test_scale_grows_after_growth_interval_clean_steps(dev: DeviceHandle) -> None:
    model, opt = _model_with_grads(dev)
    scaler = GradScaler(init_scale=2.0, growth_factor=4.0, growth_interval=3)
    scales = []
    for _ in range(7):
        for p in model.parameters():
            p.grad = _t(dev, np.ones(p.shape))
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == [2.0, 2.0, 8.0, 8.0, 8.0, 32.0, 32.0]


def test_state_dict_round_trip_and_errors() -> None:
    scaler = GradScaler(init_scale=256.0, growth_factor=3.0, backoff_factor=0.25,
                        growth_interval=5)
    scaler._growth_tracker = 2
    state = json.loads(json.dumps(scaler.state_dict()))  # plain numbers: JSON-able
    restored = GradScaler()
    restored.load_state_dict(state)
    assert restored.state_dict() == scaler.state_dict() == {
        "scale": 256.0, "growth_factor": 3.0, "backoff_factor": 0.25, "growth_interval": 5,
        "_growth_tracker": 2}
    with pytest.raises(KeyError, match=r"missing keys \['scale'\], unexpected keys \['x'\]"):
        restored.load_state_dict({**{k: v for k, v in state.items() if k != "scale"}, "x": 1})
    with pytest.raises(ValueError, match=r"growth_factor must be > 1, got 0\.5"):
        restored.load_state_dict({**state, "growth_factor": 0.5})
    with pytest.raises(RuntimeError, match="the state is empty"):
        restored.load_state_dict({})
    assert restored.state_dict()["scale"] == 256.0  # a refused state changes nothing
    assert GradScaler(enabled=False).state_dict() == {}


@pytest.mark.parametrize("kwargs, message", [
    ({"init_scale": 0.0}, "init_scale must be a positive finite number, got 0.0"),
    ({"growth_factor": 1.0}, "growth_factor must be > 1, got 1.0"),
    ({"backoff_factor": 1.0}, r"backoff_factor must be in \(0, 1\), got 1.0"),
    ({"growth_interval": 0}, "growth_interval must be a positive int, got 0"),
], ids=["init_scale", "growth_factor", "backoff_factor", "growth_interval"])
def test_bad_configuration(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GradScaler(**kwargs)


def test_call_order_errors_and_new_scale(dev: DeviceHandle) -> None:
    model, opt = _model_with_grads(dev)
    scaler = GradScaler(init_scale=2.0)
    with pytest.raises(RuntimeError, match="no gradients were unscaled since the last update"):
        scaler.update()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="unscale_: already called on this optimizer"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step: already called on this optimizer"):
        scaler.step(opt)
    scaler.update(new_scale=64.0)
    assert scaler.get_scale() == 64.0
    with pytest.raises(ValueError, match="new_scale must be a positive finite number"):
        scaler.update(new_scale=float("nan"))
    model.weight.grad = _t(dev, np.ones(model.weight.shape), "float16")
    with pytest.raises(TypeError, match="parameter 0 has a float16 gradient"):
        scaler.unscale_(opt)


def test_disabled_scaler_passes_through(dev: DeviceHandle) -> None:
    model, opt = _model_with_grads(dev)
    before = _host_params(model)
    scaler = GradScaler(enabled=False)
    loss = _t(dev, np.array(2.0))
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    scaler.step(opt)
    scaler.update()
    assert not np.array_equal(model.weight.to_host(), before[0])


def test_training_with_autocast_and_grad_scaler_lowers_the_loss(dev: DeviceHandle) -> None:
    rng = np.random.default_rng(3)
    model = _cnn(dev)
    opt = SGD(model.parameters(), lr=0.2)
    scaler = GradScaler()
    x = _t(dev, rng.normal(size=(7, 3, 6, 6)))
    y = _t(dev, rng.integers(0, 3, 7), "int32")
    losses = []
    for _ in range(12):
        model.zero_grad()
        with ag.Tape() as tape:
            with autocast():
                loss = F.cross_entropy(model(x), y)
            scaled = scaler.scale(loss)
        tape.backward(scaled)
        scaler.step(opt)
        scaler.update()
        losses.append(float(loss.to_host()))
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")  # NumPy on the infs
def test_a_scale_that_overflows_float16_gradients_backs_off(dev: DeviceHandle) -> None:
    # 2**24 times the logits' gradient (about 0.1) overflows float16 (max 65504): the float16
    # gradients become inf, those steps are skipped and the scale halves until they fit.
    rng = np.random.default_rng(3)
    model = _cnn(dev)
    opt = SGD(model.parameters(), lr=0.2)
    scaler = GradScaler(init_scale=2.0**24)
    x = _t(dev, rng.normal(size=(7, 3, 6, 6)))
    y = _t(dev, rng.integers(0, 3, 7), "int32")
    before = _host_params(model)
    iterations = 0
    while opt.steps == 0 and iterations < 12:
        iterations += 1
        model.zero_grad()
        with ag.Tape() as tape:
            with autocast():
                loss = F.cross_entropy(model(x), y)
            scaled = scaler.scale(loss)
        tape.backward(scaled)
        scaler.step(opt)
        if opt.steps == 0:
            for p, old in zip(model.parameters(), before):
                np.testing.assert_array_equal(p.to_host(), old)
        scaler.update()
    assert opt.steps == 1 and iterations > 1
    assert scaler.get_scale() == 2.0**24 * 0.5 ** (iterations - 1)
    assert all(np.isfinite(p.to_host()).all() for p in model.parameters())


def test_batch_norm_of_a_float16_model_under_autocast_updates_its_running_stats(
        dev: DeviceHandle) -> None:
    # float16 running statistics are updated in place: autocast must not hand batch_norm a
    # float32 copy of them (the update would be lost), so it runs in their dtype instead.
    rng = np.random.default_rng(0)
    x = _t(dev, rng.normal(size=(7, 3, 5, 5)) + 2.0, "float16")
    rm, rv = _t(dev, np.zeros(3), "float16"), _t(dev, np.ones(3), "float16")
    w, b = _t(dev, np.ones(3), "float16"), _t(dev, np.zeros(3), "float16")
    with autocast():
        y = F.batch_norm(x, rm, rv, w, b, training=True)
        y32 = F.batch_norm(x, None, None, training=True)
    assert (y.dtype, y32.dtype) == ("float16", "float32")
    expected = 0.1 * x.to_host().astype(np.float64).mean(axis=(0, 2, 3))
    assert_close(rm.to_host(), expected, "float16")


def test_two_optimizers_skip_separately_and_back_off_together(dev: DeviceHandle) -> None:
    clean, opt_clean = _model_with_grads(dev)
    broken, opt_broken = _model_with_grads(dev)
    broken.weight.grad = _t(dev, np.full(broken.weight.shape, np.nan))
    scaler = GradScaler(init_scale=4.0)
    for _ in range(2):  # the second iteration reuses (clears) each optimizer's flag
        scaler.unscale_(opt_broken)  # unscaled, never stepped: update() reads its flag
        scaler.step(opt_clean)
        scaler.update()
        for p in clean.parameters():
            p.grad = _t(dev, np.ones(p.shape))
    assert (opt_clean.steps, opt_broken.steps) == (2, 0)
    assert scaler.get_scale() == 1.0


# -- GradScaler on the device: the found-inf flag goes to the optimizer ------------------------


class FlagSGD(SGD):
    """An optimizer that takes the found-inf flag, as ``netcl.optim``'s do (netcl-nn does not
    depend on netcl-optim): it keeps the flags it was given and skips on the host."""

    supports_found_inf = True

    def __init__(self, params: Any, lr: float) -> None:
        super().__init__(params, lr)
        self.flags: list[Tensor | None] = []

    def step(self, found_inf: Tensor | None = None) -> str:
        self.flags.append(found_inf)
        if found_inf is not None and found_inf.to_host()[0]:
            return "skipped"
        return super().step()


def _found_inf(scaler: GradScaler) -> int:
    flag = scaler.found_inf
    assert flag is not None
    return int(flag.to_host()[0])


def test_step_hands_the_flag_to_the_optimizer_and_update_writes_found_inf(
        dev: DeviceHandle) -> None:
    model = Linear(7, 33, queue=dev.queue, rng=np.random.default_rng(0))
    opt = FlagSGD(model.parameters(), lr=0.1)
    scaler = GradScaler(init_scale=4.0, growth_interval=2)
    assert scaler.found_inf is None and scaler.scale_tensor is None
    results, skipped, scales = [], [], []
    for bad in (False, True, False, False):
        for p in model.parameters():
            p.grad = _t(dev, np.full(p.shape, np.inf if bad else 1.0))
        results.append(scaler.step(opt))
        scaler.update()
        skipped.append(_found_inf(scaler))
        scales.append(scaler.get_scale())
    assert results == ["stepped", "skipped", "stepped", "stepped"]
    assert skipped == [0, 1, 0, 0] and scales == [4.0, 2.0, 2.0, 4.0]
    flag = opt.flags[0]
    assert flag is not None and flag.dtype == "int32" and all(f is flag for f in opt.flags)
    assert scaler.scale_tensor is not None and scaler.scale_tensor.shape == ()
    assert scaler.scale(_t(dev, np.array(1.5))).to_host().item() == 6.0


def test_update_with_a_new_scale_tensor_and_state_after_device_use(dev: DeviceHandle) -> None:
    _, opt = _model_with_grads(dev)
    scaler = GradScaler(init_scale=2.0, growth_interval=3)
    scaler.step(opt)
    scaler.update(new_scale=_t(dev, np.array([32.0])))
    assert scaler.get_scale() == 32.0 and _found_inf(scaler) == 0
    with pytest.raises(TypeError, match="a new_scale Tensor must be float32, got float64"):
        scaler.update(new_scale=_t(dev, np.array([2.0]), "float64"))
    with pytest.raises(ValueError, match=r"new_scale must have one element, got shape \(2,\)"):
        scaler.update(new_scale=_t(dev, np.array([2.0, 4.0])))
    scaler.step(opt)
    scaler.update()
    assert scaler.state_dict()["_growth_tracker"] == 1
    scaler.load_state_dict({**scaler.state_dict(), "scale": 8.0, "_growth_tracker": 2})
    scaler.step(opt)
    scaler.update()  # the third clean step in a row: grows from the loaded state
    assert scaler.state_dict() == {"scale": 16.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                   "growth_interval": 3, "_growth_tracker": 0}
    assert repr(scaler).startswith("GradScaler(scale=16.0,")


# -- foreach unscaling (NOTE [ Foreach unscaling ] in netcl.nn._grad_scaler) -----------------

UNSCALE_SIZES = (1, 7, 33, 257, 3, 1, 64, 5, 7, 100, 2, 9, 33, 17, 1, 11, 300, 4, 6)


def _unscale_all(dev: DeviceHandle, bad: int | None, steps: int) -> tuple[list[Any], int, int]:
    """The gradients and the found-inf flag after ``steps`` iterations of ``unscale_`` and
    ``update`` over 19 gradients (gradient ``bad`` holds an inf in the last), and the launches
    of the last ``unscale_``."""
    rng = np.random.default_rng(5)
    params = [_t(dev, np.zeros(n)) for n in UNSCALE_SIZES]
    opt = SGD(params, lr=0.1)
    scaler = GradScaler(init_scale=1024.0)
    for step in range(steps):
        for i, p in enumerate(params):
            grad = 3e3 * rng.standard_normal(p.shape)
            if i == bad and step == steps - 1:
                grad[-1] = np.inf
            p.grad = _t(dev, grad)
        with count_launches() as launches:
            scaler.unscale_(opt)
        scaler.update()
    return [p.grad.to_host() for p in params], _found_inf(scaler), launches[0]  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [None, 0, 13, 18], ids=["finite", "inf-first", "inf-launch2",
                                                        "inf-last"])
def test_foreach_unscale_equals_per_gradient_launches(dev: DeviceHandle, bad: int | None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Launches of up to 16 gradients give bit for bit the per-gradient kernel's results and
    the same found-inf flag, over 19 gradients of odd sizes and three iterations."""
    monkeypatch.setenv("NETCL_FOREACH", "0")
    want, want_flag, single = _unscale_all(dev, bad, 3)
    monkeypatch.setenv("NETCL_FOREACH", "1")
    got, flag, launches = _unscale_all(dev, bad, 3)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert flag == want_flag == (bad is not None)
    if dev.backend == "cl":  # amp_clear_flag, then the unscales: 19 or 16 + 3
        assert (single, launches) == (1 + 19, 1 + 2)
