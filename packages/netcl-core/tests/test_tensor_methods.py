"""The Tensor method slots of netcl-core: the registry, its errors, ``Size`` and the contiguous
views of basic indexing, with netcl-core's own modules only (the ops come from higher layers)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.core.tensor_methods as tm
from netcl.core.device import manager
from netcl.core.keywords import resolve_dim, resolve_keepdim
from netcl.core.placement import device, resolve_queue
from netcl.core.tensor import Tensor, copy_from_host, narrow_view


@pytest.fixture
def empty_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if only netcl-core were installed: no slot filled, no provider importable."""
    monkeypatch.setattr(tm, "_slots", {})
    monkeypatch.setattr(tm, "_loaded", [False])
    monkeypatch.setattr(tm, "PROVIDERS", {"netcl-ops": ("netcl._no_such_ops", 0),
                                          "netcl-autograd": ("netcl._no_such_autograd", 1)})


def test_a_missing_op_names_the_package_to_install(empty_registry: None) -> None:
    x = Tensor.from_host(device("cpu").queue, np.ones(3))
    with pytest.raises(tm.MissingOpError, match=r"Tensor.add: .* comes with netcl-ops "
                                                r"\(pip install netcl-ops"):
        x + 1
    with pytest.raises(tm.MissingOpError, match=r"Tensor.sum: .* netcl-ops"):
        x.sum()
    with pytest.raises(tm.MissingOpError, match=r"Tensor.backward: .* netcl-autograd"):
        x.backward()
    with pytest.raises(ImportError):  # MissingOpError is an ImportError
        x[::2]
    # what needs no op still works with netcl-core alone
    assert x.tolist() == [1.0, 1.0, 1.0] and x[1:].tolist() == [1.0, 1.0]  # a view
    assert x.numel() == 3 and x.size(0) == 3 and x.dim() == 1
    assert x.requires_grad_().requires_grad


def test_a_higher_provider_keeps_its_slot(empty_registry: None) -> None:
    def low(*a: object) -> str:
        return "ops"

    def high(*a: object) -> str:
        return "autograd"

    tm.register("neg", high, "netcl-autograd")
    tm.register("neg", low, "netcl-ops")  # imported later, ranks lower: ignored
    assert tm.lookup("neg") is high
    with pytest.raises(ValueError, match="unknown provider 'netcl-foo'"):
        tm.register("neg", low, "netcl-foo")


def test_size_is_the_element_count_and_callable() -> None:
    s = tm.Size(30, (2, 3, 5))
    assert s == 30 and isinstance(s, int) and s * 2 == 60 and hash(s) == hash(30)
    assert s() == (2, 3, 5) and s(0) == 2 and s(-1) == 5
    with pytest.raises(IndexError, match="dim -4 is out of range for a 3-d tensor"):
        s(-4)
    with pytest.raises(TypeError, match="dim must be an int"):
        s(1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("key", [0, 2, -1, np.s_[1:3], np.s_[0, 1], np.s_[2, 1:4],
                                 np.s_[None, 1], np.s_[..., :], np.s_[1, ..., None],
                                 np.s_[3:1], np.s_[0, 0, 0]])
def test_contiguous_runs_are_views(key: Any) -> None:
    a = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3)
    run = tm._contiguous_run(a.shape, key)
    assert run is not None
    start, shape = run
    assert shape == a[key].shape
    view = narrow_view(Tensor.from_host(device("cpu").queue, a), start, shape)
    np.testing.assert_array_equal(view.to_host(), a[key])


@pytest.mark.parametrize("key", [np.s_[:, 1], np.s_[::2], np.s_[1:3, 1:2], np.s_[..., 0],
                                 np.s_[9], np.s_[0, 0, 0, 0], 1.5, np.s_[..., ...]])
def test_other_keys_are_not_views(key: object) -> None:
    assert tm._contiguous_run((4, 5, 3), key) is None


def test_narrow_view_checks_bounds() -> None:
    t = Tensor.from_host(device("cpu").queue, np.arange(6.0))
    with pytest.raises(ValueError, match=r"narrow_view: elements 4..8 lie outside"):
        narrow_view(t, 4, (4,))


def test_keywords_refuse_both_spellings() -> None:
    assert resolve_dim("op", None, None, -1) == -1
    assert resolve_keepdim("op", True, None) is True
    with pytest.raises(TypeError, match="op: got both axis=0 and dim=0"):
        resolve_dim("op", 0, 0)
    with pytest.raises(TypeError, match="op: got both keepdims=False and keepdim=True"):
        resolve_keepdim("op", False, True)


def test_device_arguments() -> None:
    cpu = manager.default("cpu")
    assert device("numpy") is cpu and device(cpu) is cpu and device(None) is not None
    assert resolve_queue("cpu") is cpu.queue and resolve_queue(cpu) is cpu.queue
    assert resolve_queue(cpu.queue) is cpu.queue
    with pytest.raises(ValueError, match="device: expected a selector string"):
        device(3)
    with pytest.raises(ValueError, match=r"Tensor.to: .*unknown device selector"):
        resolve_queue("no-such-device-xyz", "Tensor.to")


def test_copy_from_host_and_copy_into_a_0d_tensor() -> None:
    t = Tensor.from_host(device("cpu").queue, np.float32(1.0))
    assert copy_from_host(t, 3.0).tolist() == 3.0 and t.shape == ()
    assert copy_from_host(t, np.array(4.0)).tolist() == 4.0
    assert t.copy_(5.0).tolist() == 5.0
