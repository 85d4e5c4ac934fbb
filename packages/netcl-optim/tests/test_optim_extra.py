"""The schedulers MultiStepLR, ExponentialLR, LambdaLR, OneCycleLR, SequentialLR against
hand-computed values and PyTorch's schedulers (when installed), clip_grad_value_ on every
backend, the RMSProp -> RMSprop rename, NAdam's state round trip, and argument errors."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle, manager
from netcl.core.tensor import Tensor
from netcl.optim import (
    SGD,
    Adam,
    ConstantLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiStepLR,
    NAdam,
    OneCycleLR,
    RMSProp,
    RMSprop,
    SequentialLR,
    clip_grad_value_,
)


def _sgd(lr: float = 1.0, groups: int = 1) -> SGD:
    q = manager.default("cpu").queue  # type: ignore[union-attr]
    params = [Tensor.from_host(q, np.ones(1, np.float32)) for _ in range(groups)]
    return SGD([{"params": [p]} for p in params], lr=lr)


def _run(opt: Any, sched: Any, steps: int, key: str = "lr") -> list[Any]:
    values = [opt.param_groups[0][key]]
    for _ in range(steps):
        sched.step()
        values.append(opt.param_groups[0][key])
    return values


def test_multistep_and_exponential() -> None:
    opt = _sgd()
    np.testing.assert_allclose(_run(opt, MultiStepLR(opt, [3, 1], gamma=0.5), 4),
                               [1, 0.5, 0.5, 0.25, 0.25])
    opt = _sgd(0.1)
    np.testing.assert_allclose(_run(opt, ExponentialLR(opt, 0.9), 3),
                               [0.1, 0.09, 0.081, 0.0729])


def test_lambda_lr_per_group() -> None:
    opt = _sgd(2.0, groups=2)
    sched = LambdaLR(opt, [lambda e: 1 / (e + 1), lambda e: 0.5**e])
    sched.step()
    sched.step()
    assert sched.get_last_lr() == pytest.approx([2 / 3, 0.5])
    assert "lr_lambdas" not in sched.state_dict()
    with pytest.raises(ValueError, match="one callable or 2"):
        LambdaLR(opt, [lambda e: 1.0])


def test_one_cycle_three_phase_and_momentum() -> None:
    opt = _sgd(0.1)
    sched = OneCycleLR(opt, max_lr=1.0, total_steps=10, three_phase=True,
                       anneal_strategy="linear", base_momentum=0.8, max_momentum=0.9)
    lrs = _run(opt, sched, 9)
    assert lrs[0] == pytest.approx(0.04) and max(lrs) == pytest.approx(1.0)
    assert lrs[-1] == pytest.approx(0.04 / 1e4)
    assert opt.param_groups[0]["momentum"] == pytest.approx(0.9)
    with pytest.raises(ValueError, match="more than total_steps"):
        for _ in range(2):
            sched.step()


def test_one_cycle_cycles_adams_first_beta() -> None:
    q = manager.default("cpu").queue  # type: ignore[union-attr]
    opt = Adam([Tensor.from_host(q, np.ones(1, np.float32))], lr=0.1, betas=(0.9, 0.99))
    sched = OneCycleLR(opt, max_lr=0.5, epochs=2, steps_per_epoch=5)
    assert opt.param_groups[0]["betas"] == pytest.approx((0.95, 0.99))
    sched.step()
    assert opt.param_groups[0]["betas"][0] < 0.95


def test_sequential_warmup_then_decay() -> None:
    opt = _sgd(1.0)
    warm = LambdaLR(opt, lambda e: (e + 1) / 3)
    decay = MultiStepLR(opt, [2], gamma=0.1)
    sched = SequentialLR(opt, [warm, decay], milestones=[3])
    np.testing.assert_allclose(_run(opt, sched, 6), [1 / 3, 2 / 3, 1.0, 1.0, 1.0, 0.1, 0.1])
    saved = sched.state_dict()
    assert saved["last_epoch"] == 6 and len(saved["schedulers"]) == 2
    with pytest.raises(ValueError, match="expected 1 milestones"):
        SequentialLR(opt, [warm, decay], milestones=[])
    with pytest.raises(ValueError, match="same optimizer"):
        SequentialLR(opt, [warm, ExponentialLR(_sgd(), 0.5)], milestones=[2])


def _torch_lrs(torch: Any, make: Callable[[Any], Any], steps: int, lr: float,
               opt_name: str = "SGD") -> list[float]:
    p = torch.nn.Parameter(torch.ones(1))
    opt = getattr(torch.optim, opt_name)([p], lr=lr)
    sched = make(opt)
    values = [opt.param_groups[0]["lr"]]
    for _ in range(steps):
        opt.step()
        sched.step()
        values.append(opt.param_groups[0]["lr"])
    return values


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_schedulers_match_torch() -> None:
    torch = pytest.importorskip("torch")
    ts = torch.optim.lr_scheduler
    cases: list[tuple[Callable[[Any], Any], Callable[[Any], Any], int]] = [
        (lambda o: MultiStepLR(o, [2, 5], 0.3), lambda o: ts.MultiStepLR(o, [2, 5], 0.3), 7),
        (lambda o: ExponentialLR(o, 0.7), lambda o: ts.ExponentialLR(o, 0.7), 5),
        (lambda o: LinearLR(o, 0.1, 0.9, total_iters=4),
         lambda o: ts.LinearLR(o, 0.1, 0.9, total_iters=4), 6),
        (lambda o: ConstantLR(o, 0.5, total_iters=3),
         lambda o: ts.ConstantLR(o, 0.5, total_iters=3), 5),
        (lambda o: SequentialLR(o, [LinearLR(o, 0.2, total_iters=3),
                                    ExponentialLR(o, 0.8)], [3]),
         lambda o: ts.SequentialLR(o, [ts.LinearLR(o, 0.2, total_iters=3),
                                       ts.ExponentialLR(o, 0.8)], [3]), 6),
        (lambda o: LambdaLR(o, lambda e: 0.9**e + 0.1),
         lambda o: ts.LambdaLR(o, lambda e: 0.9**e + 0.1), 5),
        (lambda o: OneCycleLR(o, 0.8, total_steps=13),
         lambda o: ts.OneCycleLR(o, 0.8, total_steps=13), 12),
        (lambda o: OneCycleLR(o, 0.8, total_steps=9, three_phase=True, pct_start=0.25),
         lambda o: ts.OneCycleLR(o, 0.8, total_steps=9, three_phase=True, pct_start=0.25), 8),
        (lambda o: SequentialLR(o, [LambdaLR(o, lambda e: 0.5 * (e + 1)),
                                    ExponentialLR(o, 0.5)], [2]),
         lambda o: ts.SequentialLR(o, [ts.LambdaLR(o, lambda e: 0.5 * (e + 1)),
                                       ts.ExponentialLR(o, 0.5)], [2]), 5),
    ]
    for mine, theirs, steps in cases:
        opt = _sgd(0.3)
        got = _run(opt, mine(opt), steps)
        np.testing.assert_allclose(got, _torch_lrs(torch, theirs, steps, 0.3), rtol=1e-12)
    opt = _sgd(0.3)
    sched = OneCycleLR(opt, 0.8, total_steps=13)
    momenta = _run(opt, sched, 12, key="momentum")
    p = torch.nn.Parameter(torch.ones(1))
    topt = torch.optim.SGD([p], lr=0.3, momentum=0.9)
    tsched = ts.OneCycleLR(topt, 0.8, total_steps=13)
    want = [topt.param_groups[0]["momentum"]]
    for _ in range(12):
        topt.step()
        tsched.step()
        want.append(topt.param_groups[0]["momentum"])
    np.testing.assert_allclose(momenta, want, rtol=1e-12)


def test_scheduler_errors() -> None:
    opt = _sgd()
    with pytest.raises(ValueError, match="total_steps, or epochs and steps_per_epoch"):
        OneCycleLR(opt, 1.0)
    with pytest.raises(ValueError, match="anneal_strategy"):
        OneCycleLR(opt, 1.0, total_steps=3, anneal_strategy="exp")
    with pytest.raises(ValueError, match="gamma must be > 0"):
        ExponentialLR(opt, 0.0)
    with pytest.raises(ValueError, match="start_factor must be in"):
        LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError, match="factor must be in"):
        ConstantLR(opt, factor=2.0)
    with pytest.raises(ValueError, match="milestones must be >= 0"):
        MultiStepLR(opt, [-1])
    with pytest.raises(TypeError, match="expected an Optimizer"):
        MultiStepLR(object(), [1])  # type: ignore[arg-type]
    assert isinstance(MultiStepLR(opt, [1]), LRScheduler)


def test_clip_grad_value(dev: DeviceHandle) -> None:
    rng = np.random.default_rng(5)
    grads = [rng.standard_normal(n).astype(np.float32) * 3 for n in (1, 7, 257)]
    grads[1][2] = np.nan
    ps = []
    for g in grads:
        p = Tensor.from_host(dev.queue, np.zeros_like(g))
        p.grad = Tensor.from_host(dev.queue, g)
        ps.append(p)
    ps.append(Tensor.from_host(dev.queue, np.zeros(3, np.float32)))  # no gradient: skipped
    clip_grad_value_(ps, 1.5)
    for p, g in zip(ps, grads):
        assert p.grad is not None
        np.testing.assert_array_equal(p.grad.to_host(), np.clip(g, -1.5, 1.5))
    half = Tensor.from_host(dev.queue, np.zeros(5), dtype="float16")
    half.grad = Tensor.from_host(dev.queue, np.array([-4, -1, 0, 1, 4]), dtype="float16")
    clip_grad_value_(half, 2.0)
    assert half.grad.to_host().tolist() == [-2, -1, 0, 1, 2]
    with pytest.raises(ValueError, match="clip_value must be >= 0"):
        clip_grad_value_(ps, -1.0)


def test_rmsprop_keeps_its_old_name_as_a_deprecated_alias() -> None:
    q = manager.default("cpu").queue  # type: ignore[union-attr]
    w = Tensor.from_host(q, np.ones(2, np.float32))
    with pytest.warns(DeprecationWarning, match="use netcl.optim.RMSprop"):
        old = RMSProp([w], lr=0.1)
    assert isinstance(old, RMSprop)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RMSprop([w], lr=0.1)


def test_nadam_state_round_trip(dev: DeviceHandle) -> None:
    rng = np.random.default_rng(2)
    grads = [rng.standard_normal(7).astype(np.float32) for _ in range(8)]
    p1 = Tensor.from_host(dev.queue, np.ones(7, np.float32))
    opt1 = NAdam([p1], lr=0.01)
    for g in grads:
        p1.grad = Tensor.from_host(dev.queue, g)
        opt1.step()
    p2 = Tensor.from_host(dev.queue, np.ones(7, np.float32))
    opt2 = NAdam([p2], lr=0.01)
    for g in grads[:3]:
        p2.grad = Tensor.from_host(dev.queue, g)
        opt2.step()
    saved = opt2.state_dict()
    assert saved["state"][0]["mu_product"].shape == (2,)
    p3 = Tensor.from_host(dev.queue, p2.to_host())
    opt3 = NAdam([p3], lr=0.01)
    opt3.load_state_dict(saved)
    for g in grads[3:]:
        p3.grad = Tensor.from_host(dev.queue, g)
        opt3.step()
    np.testing.assert_allclose(p3.to_host(), p1.to_host(), rtol=1e-6)
    bad = {**saved, "state": {0: {**saved["state"][0], "mu_product": np.ones(3)}}}
    with pytest.raises(ValueError, match=r"state 'mu_product' of parameter 0 has shape \(3,\)"):
        opt3.load_state_dict(bad)
    assert math.isfinite(float(p3.to_host()[0]))
