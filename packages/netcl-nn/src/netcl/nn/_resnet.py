"""The ResNet family (He et al. 2016): BasicBlock and Bottleneck, resnet18/34/50/101/152, with
an ImageNet stem (7x7 stride-2 conv + max pool) or a CIFAR stem (3x3 stride-1 conv)."""

from __future__ import annotations

from typing import Any

import numpy as np

from netcl.autograd import ops as F
from netcl.core.tensor import Tensor

from . import init
from ._containers import Identity, Sequential
from ._layers import AdaptiveAvgPool2d, BatchNorm2d, Conv2d, Flatten, Linear, MaxPool2d, ReLU
from ._module import Module

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "resnet18", "resnet34", "resnet50",
           "resnet101", "resnet152"]


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
        self.shortcut: Module = Identity()
        if stride != 1 or in_planes != planes:
            self.shortcut = Sequential(
                Conv2d(in_planes, planes, 1, stride, bias=False, queue=queue, rng=rng),
                BatchNorm2d(planes, queue=queue))

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(F.add(out, self.shortcut(x)))


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
        self.shortcut: Module = Identity()
        if stride != 1 or in_planes != out:
            self.shortcut = Sequential(
                Conv2d(in_planes, out, 1, stride, bias=False, queue=queue, rng=rng),
                BatchNorm2d(out, queue=queue))

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(F.add(out, self.shortcut(x)))


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
                 in_channels: int = 3, queue: Any = None, seed: int = 0) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        if stem == "imagenet":
            self.stem = Sequential(
                Conv2d(in_channels, width, 7, 2, 3, bias=False, queue=queue, rng=rng),
                BatchNorm2d(width, queue=queue), ReLU(), MaxPool2d(3, 2, 1))
        elif stem == "cifar":
            self.stem = Sequential(
                Conv2d(in_channels, width, 3, 1, 1, bias=False, queue=queue, rng=rng),
                BatchNorm2d(width, queue=queue), ReLU())
        else:
            raise ValueError(f"ResNet: stem must be 'imagenet' or 'cifar', got {stem!r}")
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
        self.pool = AdaptiveAvgPool2d(1)
        self.flatten = Flatten()
        self.fc = Linear(in_planes, num_classes, queue=queue, rng=rng)
        for m in self.modules():
            if isinstance(m, Conv2d):
                init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu", rng=rng)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        logits: Tensor = self.fc(self.flatten(self.pool(x)))
        return logits


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
