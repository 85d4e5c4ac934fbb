"""Foreach update launches (NOTE [ Foreach updates ] in ``netcl.optim._update_sources``) give
bit for bit what one launch per parameter (``NETCL_FOREACH=0``) gives: parameters, state and
step counts, for every update kind, float32 and float16 parameters, odd sizes mixed in one
group, several param groups, missing gradients, the found-inf skip flag and several steps; on
every backend (the NumPy backend has one path: both runs must agree there too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from netcl.core.device import DeviceHandle
from netcl.core.kernels.primitives import count_launches
from netcl.core.tensor import Tensor
from netcl.optim import SGD, Adagrad, Adam, AdamW, NAdam, Optimizer, RAdam, RMSprop
from netcl.optim._kernels import foreach_width, program_source

# 19 parameters in 3 groups: the second (6) has other hyper-parameters, the third (1) those of
# the first (12), so they share launches: 13 parameters fill a 16-wide launch partly, or six
# 2-wide ones and a lone parameter (the per-parameter kernel)
SIZES = (1, 7, 33, 257, 3, 1, 64, 5, 7, 100, 2, 9, 33, 17, 1, 11, 300, 4, 6)
STEPS = 5
SKIPPED = 2  # the step whose found-inf flag is set
MISSING = {1: (3, 13)}  # step -> parameters without a gradient in it

CASES: list[tuple[str, Callable[..., Optimizer], dict[str, Any], dict[str, Any]]] = [
    ("sgd", SGD, {"lr": 0.05}, {"lr": 0.01}),
    ("sgd_momentum_wd", SGD, {"lr": 0.05, "momentum": 0.9, "dampening": 0.1,
                              "weight_decay": 0.01}, {"lr": 0.02, "momentum": 0.5}),
    ("sgd_nesterov", SGD, {"lr": 0.05, "momentum": 0.9, "nesterov": True,
                           "weight_decay": 0.01}, {"weight_decay": 0.0}),
    ("adam", Adam, {"lr": 0.01}, {"lr": 0.002, "betas": (0.5, 0.9)}),
    ("adam_l2", Adam, {"lr": 0.01, "weight_decay": 0.1}, {"eps": 1e-3}),
    ("adamw", AdamW, {"lr": 0.01, "weight_decay": 0.1}, {"weight_decay": 0.3}),
    ("rmsprop", RMSprop, {"lr": 0.01}, {"alpha": 0.9}),
    ("rmsprop_centered_momentum", RMSprop, {"lr": 0.01, "momentum": 0.5, "centered": True,
                                            "weight_decay": 0.01}, {"centered": False}),
    ("adagrad", Adagrad, {"lr": 0.05, "lr_decay": 0.01, "weight_decay": 0.01,
                          "initial_accumulator_value": 0.1}, {"lr_decay": 0.0}),
    ("radam", RAdam, {"lr": 0.01, "weight_decay": 0.01}, {"decoupled_weight_decay": True}),
    ("nadam", NAdam, {"lr": 0.01, "weight_decay": 0.01}, {"momentum_decay": 0.05}),
]
NAMES = [c[0] for c in CASES]


def _train(dev: DeviceHandle, cls: Callable[..., Optimizer], kwargs: dict[str, Any],
           other: dict[str, Any], dtype: str) -> tuple[list[np.ndarray[Any, Any]], int]:
    """Every array the optimizer holds after ``STEPS`` steps, and the launches of the last."""
    rng = np.random.default_rng(len(SIZES))
    params = [Tensor.from_host(dev.queue, rng.standard_normal(n), dtype=dtype) for n in SIZES]
    groups = [{"params": params[:12]}, {"params": params[12:18], **other},
              {"params": params[18:]}]
    opt = cls(groups, **kwargs)
    launches = 0
    for step in range(STEPS):
        for i, p in enumerate(params):
            grad = rng.standard_normal(p.shape)
            p.grad = (None if i in MISSING.get(step, ()) else
                      Tensor.from_host(dev.queue, grad, dtype=dtype))
        flag = Tensor.from_host(dev.queue, np.array([step == SKIPPED], np.int32))
        with count_launches() as n:
            opt.step(found_inf=flag)
        launches = n[0]
    state = [t.to_host() for s in opt.state.values() for t in s.values()]
    counts = [opt.state[i]["step"] for i in range(len(SIZES))]
    assert counts == [STEPS - 1 - sum(i in m for m in MISSING.values())
                      for i in range(len(SIZES))]
    return [p.to_host() for p in params] + state + [np.array(counts)], launches


def _compare(dev: DeviceHandle, name: str, dtype: str, width: str,
             monkeypatch: pytest.MonkeyPatch) -> None:
    _, cls, kwargs, other = next(c for c in CASES if c[0] == name)
    monkeypatch.setenv("NETCL_FOREACH", "0")
    per_param, single = _train(dev, cls, kwargs, other, dtype)
    monkeypatch.setenv("NETCL_FOREACH", "1")
    monkeypatch.setenv("NETCL_FOREACH_WIDTH", width)
    foreach, launches = _train(dev, cls, kwargs, other, dtype)
    assert len(foreach) == len(per_param)
    for got, want in zip(foreach, per_param, strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    if dev.backend == "cl":  # the updates of 12 + 1 and 6 parameters, the tick
        kind = "adam" if name.startswith("adam") else name.split("_")[0]
        wide = int(width) if width else foreach_width(dev.queue.device, kind)
        assert single == len(SIZES) + 1
        assert launches == -(-13 // wide) + -(-6 // wide) + 1


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", NAMES)
def test_foreach_equals_per_parameter_launches(dev: DeviceHandle, name: str, dtype: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _compare(dev, name, dtype, "", monkeypatch)


@pytest.mark.parametrize("name", ["sgd_momentum_wd", "adamw", "rmsprop_centered_momentum",
                                  "nadam"])
def test_narrow_foreach_launches_equal_per_parameter_ones(
        dev: DeviceHandle, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Width 2: 7 + 3 launches (the last of the first group's a per-parameter one)."""
    _compare(dev, name, "float32", "2", monkeypatch)


def test_width_rule_and_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace as NS

    small = NS(max_parameter_size=200, address_bits=64)
    assert foreach_width(small, "sgd") == 4  # 2 pointers + 5 scalars + 4 x (3 pointers + 2 ints)
    assert foreach_width(small, "nadam") == 2
    assert foreach_width(NS(max_parameter_size=64, address_bits=64), "sgd") == 1
    monkeypatch.setenv("NETCL_FOREACH_WIDTH", "8")
    assert foreach_width(small, "nadam") == 8
    monkeypatch.setenv("NETCL_FOREACH", "0")
    assert foreach_width(small, "nadam") == 1
    monkeypatch.setenv("NETCL_FOREACH", "maybe")
    with pytest.raises(ValueError, match="NETCL_FOREACH must be one of"):
        foreach_width(small, "sgd")
    monkeypatch.setenv("NETCL_FOREACH", "1")
    monkeypatch.setenv("NETCL_FOREACH_WIDTH", "3")
    with pytest.raises(ValueError, match="NETCL_FOREACH_WIDTH must be one of 1, 16, 8, 4, 2"):
        foreach_width(small, "sgd")


def test_one_formula_in_both_programs() -> None:
    """The foreach and per-parameter programs share the formula text, called once each."""
    for kind in ("sgd", "adam", "rmsprop", "adagrad", "radam", "nadam"):
        single, wide = program_source(kind, "float32"), program_source(kind, "float32", 16)
        item = single[single.index(f"void {kind}_item("):single.index("__kernel")]
        assert item in wide
        assert single.count(f"{kind}_item(") == wide.count(f"{kind}_item(") == 2
        assert wide.count("if (base >= end_") == 15
