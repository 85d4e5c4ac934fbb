"""The ResNet family (He et al. 2016): BasicBlock and Bottleneck, resnet18/34/50/101/152, with
an ImageNet stem (7x7 stride-2 conv + max pool) or a CIFAR stem (3x3 stride-1 conv).

Parameters and buffers carry torchvision's names and layouts (``conv1``, ``bn1``,
``layer1.0.conv1``, ``layer2.0.downsample.0``, ``fc``), so ``load_state_dict`` takes a
torchvision ``state_dict`` as it is; checkpoints written with netcl's earlier names
(``stem.0``/``stem.1``, ``shortcut``) load too (:meth:`ResNet.load_state_dict`).
``resnet18(weights=...)`` loads given weights: a state dict, or a file read through the
``netcl.weights`` entry point (the ``netcl`` package reads ``.safetensors``, ``.pt``/``.pth``
and netcl checkpoints); nothing is downloaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

import numpy as np

from netcl.autograd import ops as F
from netcl.core.tensor import Tensor

from . import init
from ._containers import Identity, Sequential
from ._layers import AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Flatten, Linear, MaxPool2d, ReLU
from ._module import Module

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "WEIGHTS_ENTRY_POINT", "read_weights",
           "resnet18", "resnet34", "resnet50", "resnet101", "resnet152"]

WEIGHTS_ENTRY_POINT = "netcl.weights"  # group of the functions that read weight files
_LEGACY = ((re.compile(r"^stem\.0\."), "conv1."), (re.compile(r"^stem\.1\."), "bn1."),
           (re.compile(r"\.shortcut\."), ".downsample."))


class BasicBlock(Module):
    """Two 3x3 convolutions with a residual connection (ResNet-18/34)."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1, queue: Any = None,
                 rng: np.random.Generator | None = None) -> None:
        super().__init__()
        self.conv1 = Conv2d(in_planes, planes, 3, stride, 1, bias=False, queue=queue, rng=rng)
        self.bn1 = BatchNorm2d(planes, queue=queue)
        self.conv2 = Conv2d(planes, planes, 3, 1, 1, bias=False, queue=queue, rng=rng)
        self.bn2 = BatchNorm2d(planes, queue=queue)
        self.downsample: Module = Identity()
        if stride != 1 or in_planes != planes:
            self.downsample = Sequential(
                Conv2d(in_planes, planes, 1, stride, bias=False, queue=queue, rng=rng),
                BatchNorm2d(planes, queue=queue))

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(F.add(out, self.downsample(x)))


class Bottleneck(Module):
    """1x1 reduce, 3x3, 1x1 expand (x4), with a residual connection (ResNet-50/101/152)."""

    expansion = 4

    def __init__(self, in_planes: int, planes: int, stride: int = 1, queue: Any = None,
                 rng: np.random.Generator | None = None) -> None:
        super().__init__()
        out = planes * self.expansion
        self.conv1 = Conv2d(in_planes, planes, 1, bias=False, queue=queue, rng=rng)
        self.bn1 = BatchNorm2d(planes, queue=queue)
        self.conv2 = Conv2d(planes, planes, 3, stride, 1, bias=False, queue=queue, rng=rng)
        self.bn2 = BatchNorm2d(planes, queue=queue)
        self.conv3 = Conv2d(planes, out, 1, bias=False, queue=queue, rng=rng)
        self.bn3 = BatchNorm2d(out, queue=queue)
        self.downsample: Module = Identity()
        if stride != 1 or in_planes != out:
            self.downsample = Sequential(
                Conv2d(in_planes, out, 1, stride, bias=False, queue=queue, rng=rng),
                BatchNorm2d(out, queue=queue))

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(F.add(out, self.downsample(x)))


class ResNet(Module):
    """A ResNet of ``block`` with ``layers`` blocks per stage.

    Args:
        stem: ``"imagenet"`` (7x7/2 conv + 3x3/2 max pool) or ``"cifar"`` (3x3/1 conv).

    Examples:
        >>> import numpy as np
        >>> from netcl.core import Tensor, manager
        >>> q = manager.default("cpu").queue
        >>> net = ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10, stem="cifar", width=8, queue=q)
        >>> net(Tensor.from_host(q, np.zeros((2, 3, 16, 16)))).shape
        (2, 10)
    """

    def __init__(self, block: type[BasicBlock] | type[Bottleneck], layers: list[int],
                 num_classes: int = 1000, stem: str = "imagenet", width: int = 64,
                 in_channels: int = 3, queue: Any = None, seed: int = 0,
                 weights: Mapping[str, Any] | str | os.PathLike[str] | None = None) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        if stem not in ("imagenet", "cifar"):
            raise ValueError(f"ResNet: stem must be 'imagenet' or 'cifar', got {stem!r}")
        big = stem == "imagenet"
        self.conv1 = Conv2d(in_channels, width, 7 if big else 3, 2 if big else 1, 3 if big else 1,
                            bias=False, queue=queue, rng=rng)
        self.bn1 = BatchNorm2d(width, queue=queue)
        self.relu = ReLU()
        self.maxpool: Module = MaxPool2d(3, 2, 1) if big else Identity()
        planes, in_planes = width, width
        stages = []
        for i, count in enumerate(layers):
            blocks = []
            for j in range(count):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(block(in_planes, planes, stride, queue=queue, rng=rng))
                in_planes = planes * block.expansion
            stages.append(Sequential(*blocks))
            planes *= 2
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = AdaptiveAvgPool2d(1)
        self.flatten = Flatten()
        self.fc = Linear(in_planes, num_classes, queue=queue, rng=rng)
        for m in self.modules():
            if isinstance(m, Conv2d):
                init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu", rng=rng)
        if weights is not None:
            self.load_state_dict(weights if isinstance(weights, Mapping)
                                 else read_weights(weights))

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        logits: Tensor = self.fc(self.flatten(self.avgpool(x)))
        return logits

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> None:
        """:meth:`Module.load_state_dict` that also takes netcl's earlier names (``stem.0.``,
        ``stem.1.``, ``.shortcut.``).

        Examples:
            >>> net = resnet18(num_classes=3, stem="cifar", width=2, queue=None)
            >>> old = {k.replace("conv1.", "stem.0.", 1) if k.startswith("conv1.") else k: v
            ...        for k, v in net.state_dict().items()}
            >>> net.load_state_dict(old)
        """
        renamed: dict[str, Any] = {}
        for key, value in state.items():
            for pattern, repl in _LEGACY:
                key = pattern.sub(repl, key)
            renamed[key] = value
        super().load_state_dict(renamed, strict)


def read_weights(path: str | os.PathLike[str]) -> Mapping[str, Any]:
    """A weight file's tensors through the ``netcl.weights`` entry point (the ``netcl``
    package's reader: ``.safetensors``, ``.pt``/``.pth``, netcl checkpoints).

    Raises:
        ModuleNotFoundError: no package provides a reader (install ``netcl``).
    """
    found = list(entry_points(group=WEIGHTS_ENTRY_POINT))
    if not found:
        raise ModuleNotFoundError(f"read_weights({os.fspath(path)!r}): no package provides the "
                                  f"{WEIGHTS_ENTRY_POINT!r} entry point; install netcl (pip "
                                  f"install netcl) to read weight files, or pass a state dict")
    reader = found[0].load()
    weights: Mapping[str, Any] = reader(path)
    return weights


def resnet18(**kwargs: Any) -> ResNet:
    """ResNet-18 (BasicBlock, [2, 2, 2, 2])."""
    return ResNet(BasicBlock, [2, 2, 2, 2], **kwargs)


def resnet34(**kwargs: Any) -> ResNet:
    """ResNet-34 (BasicBlock, [3, 4, 6, 3])."""
    return ResNet(BasicBlock, [3, 4, 6, 3], **kwargs)


def resnet50(**kwargs: Any) -> ResNet:
    """ResNet-50 (Bottleneck, [3, 4, 6, 3])."""
    return ResNet(Bottleneck, [3, 4, 6, 3], **kwargs)


def resnet101(**kwargs: Any) -> ResNet:
    """ResNet-101 (Bottleneck, [3, 4, 23, 3])."""
    return ResNet(Bottleneck, [3, 4, 23, 3], **kwargs)


def resnet152(**kwargs: Any) -> ResNet:
    """ResNet-152 (Bottleneck, [3, 8, 36, 3])."""
    return ResNet(Bottleneck, [3, 8, 36, 3], **kwargs)
