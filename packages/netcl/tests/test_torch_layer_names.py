"""Every layer with weights carries PyTorch's state-dict names, shapes and layouts: a torch
layer's state_dict loads as it is and the eval outputs agree."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import netcl.nn as nn
from netcl.core.device import DeviceHandle
from netcl.core.tensor import Tensor
from netcl.io import from_torch

torch = pytest.importorskip("torch", reason="PyTorch is the reference")

LAYERS: dict[str, tuple[Any, Any, tuple[int, ...]]] = {
    # name: (netcl builder on a queue, torch builder, input shape)
    "Linear": (lambda q: nn.Linear(7, 5, queue=q), lambda: torch.nn.Linear(7, 5), (3, 7)),
    "Conv2d": (lambda q: nn.Conv2d(2, 3, 3, padding=1, queue=q),
               lambda: torch.nn.Conv2d(2, 3, 3, padding=1), (2, 2, 7, 7)),
    "Conv1d": (lambda q: nn.Conv1d(2, 3, 3, queue=q), lambda: torch.nn.Conv1d(2, 3, 3),
               (2, 2, 9)),
    "ConvTranspose2d": (lambda q: nn.ConvTranspose2d(2, 3, 3, stride=2, queue=q),
                        lambda: torch.nn.ConvTranspose2d(2, 3, 3, stride=2), (2, 2, 5, 5)),
    "BatchNorm2d": (lambda q: nn.BatchNorm2d(3, queue=q), lambda: torch.nn.BatchNorm2d(3),
                    (4, 3, 5, 5)),
    "BatchNorm1d": (lambda q: nn.BatchNorm1d(3, queue=q), lambda: torch.nn.BatchNorm1d(3),
                    (4, 3)),
    "LayerNorm": (lambda q: nn.LayerNorm(6, queue=q), lambda: torch.nn.LayerNorm(6), (3, 6)),
    "GroupNorm": (lambda q: nn.GroupNorm(2, 4, queue=q), lambda: torch.nn.GroupNorm(2, 4),
                  (2, 4, 3, 3)),
    "PReLU": (lambda q: nn.PReLU(queue=q), lambda: torch.nn.PReLU(), (3, 5)),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_torch_layer_state_dict_loads_and_agrees(dev: DeviceHandle, name: str) -> None:
    build, torch_build, shape = LAYERS[name]
    torch.manual_seed(0)
    ref = torch_build()
    if "BatchNorm" in name:  # move the running statistics and the counter off their defaults
        with torch.no_grad():
            ref(torch.randn(*shape) * 2 + 1)
    with torch.no_grad():  # non-default affine parameters
        for p in ref.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    ref.eval()
    mine = build(dev.queue)
    theirs = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    assert {k: tuple(v.shape) for k, v in mine.state_dict().items()} == theirs
    mine.load_state_dict(from_torch(ref))
    mine.eval()
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    with torch.no_grad():
        want = ref(torch.from_numpy(x)).numpy()
    got = mine(Tensor.from_host(dev.queue, x)).to_host()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
