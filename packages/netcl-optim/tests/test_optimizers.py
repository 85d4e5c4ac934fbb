"""Each update rule against a float64 NumPy transcription of PyTorch's documented formula, over
many steps, on every backend, for float32 and float16 parameters; plus groups, state round
trips, schedulers and clipping."""

from __future__ import annotations

import itertools
import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor
from netcl.core.testing import assert_close
from netcl.optim import (
    SGD,
    Adagrad,
    Adam,
    AdamW,
    CosineAnnealingLR,
    Momentum,
    NAdam,
    Optimizer,
    RAdam,
    ReduceLROnPlateau,
    RMSprop,
    StepLR,
    WarmupCosine,
    clip_grad_norm,
    clip_grad_norm_device,
)

STEPS = 25
SHAPES = [(1,), (7,), (33, 3), (257,)]


def ref_sgd(p: Any, grads: Any, lr: float, momentum: float = 0.0, dampening: float = 0.0,
            weight_decay: float = 0.0, nesterov: bool = False) -> Any:
    buf = None
    for g in grads:
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def ref_adam(p: Any, grads: Any, lr: float, betas: tuple[float, float] = (0.9, 0.999),
             eps: float = 1e-8, weight_decay: float = 0.0, decoupled: bool = False) -> Any:
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    b1, b2 = betas
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
    return p


def ref_rmsprop(p: Any, grads: Any, lr: float, alpha: float = 0.99, eps: float = 1e-8,
                weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False) -> Any:
    sq = np.zeros_like(p)
    buf = np.zeros_like(p)
    gavg = np.zeros_like(p)
    for g in grads:
        g = g + weight_decay * p
        sq = alpha * sq + (1 - alpha) * g * g
        denom = sq
        if centered:
            gavg = alpha * gavg + (1 - alpha) * g
            denom = sq - gavg * gavg
        step = g / (np.sqrt(denom) + eps)
        if momentum > 0:
            buf = momentum * buf + step
            step = buf
        p = p - lr * step
    return p


def ref_adagrad(p: Any, grads: Any, lr: float, lr_decay: float = 0.0, weight_decay: float = 0.0,
                initial_accumulator_value: float = 0.0, eps: float = 1e-10) -> Any:
    acc = np.full_like(p, initial_accumulator_value)
    for t, g in enumerate(grads, start=1):
        g = g + weight_decay * p
        acc = acc + g * g
        p = p - lr / (1 + (t - 1) * lr_decay) * g / (np.sqrt(acc) + eps)
    return p


def ref_radam(p: Any, grads: Any, lr: float, betas: tuple[float, float] = (0.9, 0.999),
              eps: float = 1e-8, weight_decay: float = 0.0,
              decoupled_weight_decay: bool = False) -> Any:
    m, v = np.zeros_like(p), np.zeros_like(p)
    b1, b2 = betas
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, start=1):
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        rho_t = rho_inf - 2 * t * b2**t / (1 - b2**t)
        if rho_t > 5:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                             / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            p = p - lr * m_hat * rect * math.sqrt(1 - b2**t) / (np.sqrt(v) + eps)
        else:
            p = p - lr * m_hat
    return p


def ref_nadam(p: Any, grads: Any, lr: float, betas: tuple[float, float] = (0.9, 0.999),
              eps: float = 1e-8, weight_decay: float = 0.0, momentum_decay: float = 4e-3,
              decoupled_weight_decay: bool = False) -> Any:
    m, v = np.zeros_like(p), np.zeros_like(p)
    b1, b2 = betas
    prod = 1.0
    for t, g in enumerate(grads, start=1):
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        prod *= mu
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = np.sqrt(v / (1 - b2**t)) + eps
        p = p - lr * (1 - mu) / (1 - prod) * g / denom
        p = p - lr * mu_next / (1 - prod * mu_next) * m / denom
    return p


CASES: list[tuple[str, Callable[..., Optimizer], Callable[..., Any], dict[str, Any]]] = [
    ("sgd", SGD, ref_sgd, {"lr": 0.05}),
    ("sgd_wd", SGD, ref_sgd, {"lr": 0.05, "weight_decay": 0.1}),
    ("sgd_momentum_damp", SGD, ref_sgd, {"lr": 0.05, "momentum": 0.9, "dampening": 0.1}),
    ("sgd_nesterov", SGD, ref_sgd, {"lr": 0.05, "momentum": 0.9, "nesterov": True,
                                    "weight_decay": 0.01}),
    ("momentum", Momentum, ref_sgd, {"lr": 0.01, "momentum": 0.9}),
    ("adam", Adam, ref_adam, {"lr": 0.01}),
    ("adam_l2", Adam, ref_adam, {"lr": 0.01, "weight_decay": 0.1, "betas": (0.8, 0.99)}),
    ("adamw", AdamW, lambda p, g, **k: ref_adam(p, g, decoupled=True, **k),
     {"lr": 0.01, "weight_decay": 0.1}),
    ("rmsprop", RMSprop, ref_rmsprop, {"lr": 0.01}),
    ("rmsprop_centered_momentum", RMSprop, ref_rmsprop,
     {"lr": 0.01, "momentum": 0.5, "centered": True, "weight_decay": 0.01}),
    ("adagrad", Adagrad, ref_adagrad, {"lr": 0.05, "lr_decay": 0.01, "weight_decay": 0.01,
                                       "initial_accumulator_value": 0.1}),
    # STEPS = 25 crosses rho_t = 5 (at t = 6 for b2 = 0.999): both branches of RAdam
    ("radam", RAdam, ref_radam, {"lr": 0.01, "weight_decay": 0.01}),
    ("radam_decoupled", RAdam, ref_radam, {"lr": 0.01, "weight_decay": 0.1, "betas": (0.8, 0.99),
                                           "decoupled_weight_decay": True}),
    ("nadam", NAdam, ref_nadam, {"lr": 0.01, "weight_decay": 0.01}),
    ("nadam_decoupled", NAdam, ref_nadam, {"lr": 0.01, "weight_decay": 0.1,
                                           "momentum_decay": 0.05,
                                           "decoupled_weight_decay": True}),
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name,cls,ref,kwargs", CASES, ids=[c[0] for c in CASES])
def test_rule_matches_formula(dev: DeviceHandle, name: str, cls: Callable[..., Optimizer],
                              ref: Callable[..., Any], kwargs: dict[str, Any],
                              shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(abs(hash((name, shape))) % 2**32)
    p0 = rng.standard_normal(shape).astype(np.float32)
    grads = [rng.standard_normal(shape).astype(np.float32) for _ in range(STEPS)]
    p = Tensor.from_host(dev.queue, p0)
    opt = cls([p], **kwargs)
    for g in grads:
        p.grad = Tensor.from_host(dev.queue, g)
        opt.step()
    expect = ref(p0.astype(np.float64), [g.astype(np.float64) for g in grads], **kwargs)
    assert_close(p.to_host(), expect, "float32", scale=2.0)  # STEPS updates of a few roundings


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name,cls,ref,kwargs", CASES, ids=[c[0] for c in CASES])
def test_float16_rule_matches_formula(dev: DeviceHandle, name: str,
                                      cls: Callable[..., Optimizer], ref: Callable[..., Any],
                                      kwargs: dict[str, Any], shape: tuple[int, ...]) -> None:
    """float16 parameters and gradients update on every device, ``cl_khr_fp16`` or not: the
    update is computed in float32 (state kept in float32) and rounded to float16 per step."""
    rng = np.random.default_rng(zlib.crc32(f"{name}{shape}".encode()))
    p0 = rng.standard_normal(shape).astype(np.float16)
    grads = [rng.standard_normal(shape).astype(np.float16) for _ in range(STEPS)]
    p = Tensor.from_host(dev.queue, p0, dtype="float16")
    opt = cls([p], **kwargs)
    for g in grads:
        p.grad = Tensor.from_host(dev.queue, g, dtype="float16")
        opt.step()
    assert p.dtype == "float16" and p.to_host().dtype == np.float16
    assert {t.dtype for t in opt.state[0].values() if isinstance(t, Tensor)} == {"float32"}
    expect = ref(p0.astype(np.float64), [g.astype(np.float64) for g in grads], **kwargs)
    assert_close(p.to_host(), expect, "float16")


@pytest.mark.parametrize("foreach", ["1", "0"])
def test_launches_per_step(dev: DeviceHandle, foreach: str,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    """One foreach update launch for the three parameters (``NETCL_FOREACH=0``: one per
    parameter), plus one ``optim_tick`` for the step counts."""
    if dev.backend != "cl":
        pytest.skip("counts OpenCL launches")
    monkeypatch.setenv("NETCL_FOREACH", foreach)
    ps = [Tensor.from_host(dev.queue, np.ones(n, np.float32)) for n in (3, 7, 33)]
    for p in ps:
        p.grad = Tensor.from_host(dev.queue, np.ones(p.shape, np.float32))
    opt = Adam(ps, lr=0.1)
    opt.step()
    with count_launches() as n:
        opt.step()
    assert n[0] == (1 if foreach == "1" else 3) + 1


def test_param_groups_and_skip_missing_grads(dev: DeviceHandle) -> None:
    a = Tensor.from_host(dev.queue, np.ones(3, np.float32))
    b = Tensor.from_host(dev.queue, np.ones(3, np.float32))
    c = Tensor.from_host(dev.queue, np.ones(3, np.float32))
    groups: list[dict[str, Any]] = [{"params": [a]}, {"params": [b, c], "lr": 0.5}]
    opt = SGD(groups, lr=0.1)
    a.grad = Tensor.from_host(dev.queue, np.ones(3, np.float32))
    b.grad = Tensor.from_host(dev.queue, np.ones(3, np.float32))
    opt.step()
    np.testing.assert_allclose(a.to_host(), 0.9)
    np.testing.assert_allclose(b.to_host(), 0.5)
    np.testing.assert_allclose(c.to_host(), 1.0)
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    a.grad = Tensor.from_host(dev.queue, np.ones(3, np.float32))
    opt.zero_grad(set_to_none=False)
    assert a.grad is not None
    np.testing.assert_array_equal(a.grad.to_host(), 0)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_state_dict_round_trip_resumes_exactly(dev: DeviceHandle, dtype: str) -> None:
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(7).astype(dtype) for _ in range(10)]
    p1 = Tensor.from_host(dev.queue, np.ones(7), dtype=dtype)
    opt1 = Adam([p1], lr=0.01)
    for g in grads:
        p1.grad = Tensor.from_host(dev.queue, g, dtype=dtype)
        opt1.step()
    p2 = Tensor.from_host(dev.queue, np.ones(7), dtype=dtype)
    opt2 = Adam([p2], lr=0.01)
    for g in grads[:5]:
        p2.grad = Tensor.from_host(dev.queue, g, dtype=dtype)
        opt2.step()
    saved = opt2.state_dict()
    assert saved["state"][0]["exp_avg"].dtype == np.float32  # float16 params: float32 state
    p3 = Tensor.from_host(dev.queue, p2.to_host(), dtype=dtype)
    opt3 = Adam([p3], lr=0.5)
    opt3.load_state_dict(saved)
    assert opt3.param_groups[0]["lr"] == 0.01 and opt3.state[0]["step"] == 5
    assert opt3.state[0]["exp_avg"].dtype == "float32"
    for g in grads[5:]:
        p3.grad = Tensor.from_host(dev.queue, g, dtype=dtype)
        opt3.step()
    np.testing.assert_array_equal(p3.to_host(), p1.to_host())


def test_bad_input() -> None:
    from netcl.core.device import manager

    q = manager.default("cpu").queue  # type: ignore[union-attr]
    p = Tensor.from_host(q, np.ones(3, np.float32))
    with pytest.raises(ValueError, match="empty parameter list"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="lr must be >= 0, got -1"):
        SGD([p], lr=-1)
    with pytest.raises(ValueError, match="nesterov needs momentum > 0"):
        SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="more than one group"):
        SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(TypeError, match="floating point, got int64"):
        SGD([Tensor.from_host(q, np.ones(3, np.int64))], lr=0.1)
    with pytest.raises(ValueError, match=r"betas must be in \[0, 1\)"):
        Adam([p], betas=(1.0, 0.9))
    opt = SGD([p], lr=0.1)
    p.grad = Tensor.from_host(q, np.ones(4, np.float32))
    with pytest.raises(ValueError, match=r"gradient shape \(4,\) does not match parameter"):
        opt.step()
    p.grad = Tensor.from_host(q, np.ones(3), dtype="float16")
    with pytest.raises(TypeError, match="gradient dtype float16 does not match parameter "
                                        "dtype float32"):
        opt.step()
    with pytest.raises(ValueError, match="2 param groups in the state, 1 in the optimizer"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}, {"params": []}]})


def _opt() -> SGD:
    from netcl.core.device import manager

    q = manager.default("cpu").queue  # type: ignore[union-attr]
    return SGD([Tensor.from_host(q, np.ones(1, np.float32))], lr=1.0)


def test_step_and_cosine() -> None:
    opt = _opt()
    s = StepLR(opt, step_size=3, gamma=0.1)
    lrs = []
    for _ in range(7):
        s.step()
        lrs.append(s.get_last_lr()[0])
    np.testing.assert_allclose(lrs, [1, 1, 0.1, 0.1, 0.1, 0.01, 0.01])
    opt = _opt()
    c = CosineAnnealingLR(opt, T_max=10, eta_min=0.1)
    got = []
    for _ in range(10):
        c.step()
        got.append(c.get_last_lr()[0])
    want = [0.1 + 0.9 * (1 + math.cos(math.pi * t / 10)) / 2 for t in range(1, 11)]
    np.testing.assert_allclose(got, want)


def test_warmup_cosine() -> None:
    opt = _opt()
    w = WarmupCosine(opt, warmup_steps=4, total_steps=12, min_lr=0.0)
    lrs = [w.get_last_lr()[0]]
    for _ in range(12):
        w.step()
        lrs.append(w.get_last_lr()[0])
    np.testing.assert_allclose(lrs[:4], [0.25, 0.5, 0.75, 1.0])
    assert lrs[-1] == pytest.approx(0.0) and all(a >= b for a, b in itertools.pairwise(lrs[3:]))
    state = w.state_dict()
    w2 = WarmupCosine(_opt(), warmup_steps=4, total_steps=12)
    w2.load_state_dict(state)
    assert w2.last_epoch == 12


def test_reduce_on_plateau() -> None:
    opt = _opt()
    r = ReduceLROnPlateau(opt, factor=0.5, patience=2, cooldown=1)
    for metric in [1.0, 0.9, 0.9, 0.9, 0.9]:
        r.step(metric)
    assert r.get_last_lr()[0] == 0.5
    with pytest.raises(ValueError, match="needs the metric"):
        r.step()
    with pytest.raises(ValueError, match="mode must be 'min' or 'max'"):
        ReduceLROnPlateau(opt, mode="up")


@pytest.mark.parametrize("sizes", [(1,), (7, 33), (257, 3, 1000)], ids=str)
def test_clip_grad_norm_device_matches_numpy(dev: DeviceHandle, sizes: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(sizes))
    grads = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    ps = []
    for g in grads:
        p = Tensor.from_host(dev.queue, np.zeros_like(g))
        p.grad = Tensor.from_host(dev.queue, g)
        ps.append(p)
    total = math.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads))
    out = clip_grad_norm_device(ps, max_norm=1.0)
    assert out.shape == (2,)
    host = out.to_host()
    assert_close(host[0], total, "float32", scale=0.1)
    scale = min(1.0, 1.0 / (total + 1e-6))
    for p, g in zip(ps, grads):
        assert p.grad is not None
        assert_close(p.grad.to_host(), g * scale, "float32", scale=0.1)  # a norm, one product
    assert_close(clip_grad_norm(ps, max_norm=10.0), min(total, 1.0), "float32")
    with pytest.raises(ValueError, match="max_norm must be > 0"):
        clip_grad_norm_device(ps, 0.0)


def test_clip_grad_norm_float16_gradients(dev: DeviceHandle) -> None:
    """float16 gradients are read, squared and scaled in float32 on every device."""
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal(n).astype(np.float16) for n in (1, 33, 257)]
    ps = []
    for g in grads:
        p = Tensor.from_host(dev.queue, np.zeros(g.shape), dtype="float16")
        p.grad = Tensor.from_host(dev.queue, g, dtype="float16")
        ps.append(p)
    total = math.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads))
    out = clip_grad_norm_device(ps, max_norm=1.0)
    assert_close(out.to_host()[0], total, "float32", scale=0.1)  # summed in float32
    scale = min(1.0, 1.0 / (total + 1e-6))
    for p, g in zip(ps, grads):
        assert p.grad is not None and p.grad.dtype == "float16"
        assert_close(p.grad.to_host(), g.astype(np.float64) * scale, "float16")
    assert_close(clip_grad_norm(ps, max_norm=10.0), 1.0, "float16", scale=0.1)


# -- step counts on the device, the found-inf flag ---------------------------------------------


@pytest.mark.parametrize("name", ["sgd_momentum_damp", "adamw", "rmsprop_centered_momentum",
                                  "adagrad", "radam", "nadam_decoupled"])
def test_found_inf_flag_makes_the_step_a_no_op(dev: DeviceHandle, name: str) -> None:
    """``step(found_inf=flag)``: a set flag leaves parameters, state and step counts alone (on
    the device: nothing read back); a clear one steps as ``step()`` does."""
    _, cls, ref, kwargs = next(c for c in CASES if c[0] == name)
    rng = np.random.default_rng(7)
    p0 = rng.standard_normal((33, 3)).astype(np.float32)
    grads = [rng.standard_normal((33, 3)).astype(np.float32) for _ in range(5)]
    p = Tensor.from_host(dev.queue, p0)
    opt = cls([p], **kwargs)
    for i, g in enumerate(grads):
        p.grad = Tensor.from_host(dev.queue, g)
        opt.step(found_inf=Tensor.from_host(dev.queue, np.zeros(1, np.int32)))
        before = [p.to_host().copy(), *(t.to_host().copy() for t in opt.state[0].values())]
        p.grad = Tensor.from_host(dev.queue, np.full(p0.shape, np.nan, np.float32))
        opt.step(found_inf=Tensor.from_host(dev.queue, np.ones(1, np.int32)))
        after = [p.to_host(), *(t.to_host() for t in opt.state[0].values())]
        for a, b in zip(before, after, strict=True):
            np.testing.assert_array_equal(a, b)
        assert opt.state[0]["step"] == i + 1
    expect = ref(p0.astype(np.float64), [g.astype(np.float64) for g in grads], **kwargs)
    assert_close(p.to_host(), expect, "float32", scale=2.0)


def test_found_inf_must_be_one_int32_on_the_device(dev: DeviceHandle) -> None:
    p = Tensor.from_host(dev.queue, np.ones(3, np.float32))
    p.grad = Tensor.from_host(dev.queue, np.ones(3, np.float32))
    opt = Adam([p], lr=0.1)
    with pytest.raises(TypeError, match=r"Adam\.step: found_inf must be an int32 Tensor, got "
                                        "float32"):
        opt.step(found_inf=Tensor.from_host(dev.queue, np.zeros(1, np.float32)))
    with pytest.raises(ValueError, match=r"found_inf must have one element, got shape \(2,\)"):
        opt.step(found_inf=Tensor.from_host(dev.queue, np.zeros(2, np.int32)))
    from netcl.core.device import manager

    other = manager.default("cpu").queue if dev.backend == "cl" else None  # type: ignore[union-attr]
    if other is not None:
        with pytest.raises(ValueError, match="found_inf is on another device"):
            opt.step(found_inf=Tensor.from_host(other, np.zeros(1, np.int32)))


def test_step_counts_follow_each_parameter(dev: DeviceHandle) -> None:
    """Counts go up for the parameters with a gradient only (PyTorch's per-parameter
    ``step``), survive ``add_param_group`` and load from PyTorch's one-element ``step``."""
    a, b, c = (Tensor.from_host(dev.queue, np.ones(n, np.float32)) for n in (1, 7, 33))
    opt = SGD([a, b], lr=0.1, momentum=0.9)
    for i in range(5):
        a.grad = Tensor.from_host(dev.queue, np.ones(1, np.float32))
        b.grad = Tensor.from_host(dev.queue, np.ones(7, np.float32)) if i % 2 else None
        opt.step()
    opt.add_param_group({"params": [c]})
    c.grad = Tensor.from_host(dev.queue, np.ones(33, np.float32))
    opt.step()
    assert [opt.state[i]["step"] for i in range(3)] == [6, 2, 1]
    saved = opt.state_dict()
    assert [s["step"] for s in saved["state"].values()] == [6, 2, 1]
    assert list(saved["state"][0]) == ["step", "momentum_buffer"]
    saved["state"][1]["step"] = np.array(9.0, np.float32)  # how torch keeps it
    opt.load_state_dict(saved)
    assert [opt.state[i]["step"] for i in range(3)] == [6, 9, 1]
    with pytest.raises(KeyError, match="exp_avg"):
        opt.state[0]["exp_avg"]


def test_adam_groups_keep_their_own_betas(dev: DeviceHandle) -> None:
    """Each group's bias corrections come from its own betas (computed in the tick from the
    ``1 - beta`` pairs the optimizer uploads), also after a group's betas change."""
    rng = np.random.default_rng(11)
    p0 = [rng.standard_normal(n).astype(np.float32) for n in (7, 33, 1)]
    grads = [[rng.standard_normal(p.shape).astype(np.float32) for p in p0] for _ in range(8)]
    ps = [Tensor.from_host(dev.queue, p) for p in p0]
    betas = [(0.9, 0.999), (0.5, 0.9), (0.8, 0.99)]
    groups: list[dict[str, Any]] = [{"params": [ps[0]]}, {"params": [ps[1]], "betas": betas[1]},
                                    {"params": [ps[2]], "betas": betas[2]}]
    opt = Adam(groups, lr=0.01)
    for step in grads:
        for p, g in zip(ps, step):
            p.grad = Tensor.from_host(dev.queue, g)
        opt.step()
    for i, p in enumerate(ps):
        expect = ref_adam(p0[i].astype(np.float64), [s[i].astype(np.float64) for s in grads],
                          lr=0.01, betas=betas[i])
        assert_close(p.to_host(), expect, "float32", scale=2.0)
    opt.param_groups[1]["betas"] = (0.0, 0.0)  # b = 0: no bias correction, m = g, v = g*g
    before = ps[1].to_host().astype(np.float64)
    g = grads[0][1]
    ps[1].grad = Tensor.from_host(dev.queue, g)
    ps[0].grad = ps[2].grad = None
    opt.step()
    expect = before - 0.01 * g / (np.abs(g.astype(np.float64)) + 1e-8)
    assert_close(ps[1].to_host(), expect, "float32")
