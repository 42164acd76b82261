"""ResNet-50 v1.5 for 224x224 ImageNet-style inputs, in plain PyTorch.

v1.5 differs from the original v1 only in the bottlenecks that downsample: the stride 2 sits in the 3x3
convolution instead of the first 1x1 (DLPerf and NVIDIA's reference use this variant). Layout::

    stem     7x7/2 conv 64, BN, ReLU, 3x3/2 max pool                 224 -> 56
    stage 1  3 bottlenecks, width 64,  output 256 channels           56x56
    stage 2  4 bottlenecks, width 128, output 512, first one /2      28x28
    stage 3  6 bottlenecks, width 256, output 1024, first one /2     14x14
    stage 4  3 bottlenecks, width 512, output 2048, first one /2     7x7
    head     global average pool, linear 2048 -> classes

A bottleneck is 1x1 (reduce) - 3x3 (stride) - 1x1 (expand x4), each followed by BN, with ReLU after the first
two and after the residual sum. The shortcut is the identity, or a strided 1x1 conv + BN when the shape changes.
25,557,032 parameters with 1000 classes. Any input size works (the pool is adaptive). ``stride_in_1x1=True``
builds v1 instead (the same parameters; the equivalence tests use it as a model that must be told apart).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from daybreak.models import register_model

EXPANSION = 4
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride of the first block)


class Bottleneck(nn.Module):
    def __init__(self, c_in: int, width: int, stride: int, stride_in_1x1: bool = False):
        super().__init__()
        c_out = width * EXPANSION
        self.conv1 = nn.Conv2d(c_in, width, 1, stride=stride if stride_in_1x1 else 1, bias=False)  # v1: stride here
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=1 if stride_in_1x1 else stride, padding=1,
                               bias=False)  # v1.5: stride here
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                nn.BatchNorm2d(c_out),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        out: torch.Tensor = self.relu(y + shortcut)
        return out


class ResNet50(nn.Module):
    def __init__(self, num_classes: int = 1000, in_channels: int = 3, zero_init_residual: bool = True,
                 stride_in_1x1: bool = False):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        c_in = 64
        stages = []
        for width, blocks, stride in STAGES:
            layers = []
            for i in range(blocks):
                layers.append(Bottleneck(c_in, width, stride if i == 0 else 1, stride_in_1x1))
                c_in = width * EXPANSION
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c_in, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        if zero_init_residual:
            # Each residual branch starts as zero, so every block starts as the identity (Goyal et al., 2017).
            for m in self.modules():
                if isinstance(m, Bottleneck):
                    nn.init.zeros_(m.bn3.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        out: torch.Tensor = self.fc(torch.flatten(self.avgpool(x), 1))
        return out


@register_model("resnet50")
def resnet50(num_classes: int = 1000, in_channels: int = 3, **kwargs: Any) -> ResNet50:
    """ResNet-50 v1.5: 25,557,032 parameters for 1000 classes; input 3x224x224 by default."""
    return ResNet50(num_classes=num_classes, in_channels=in_channels, **kwargs)
