"""The workloads in PyTorch's idiom (no torchvision: its registry wheel is a CUDA build)."""

from __future__ import annotations

from typing import Mapping

import torch
from torch import nn


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution, not the first 1x1."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int):
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """ResNet-50 v1.5: 25,557,032 parameters with 1000 classes, at any input size; ``blocks``: the bottlenecks of
    each stage, (3, 4, 23, 3) for ResNet-101 (44,549,160)."""

    def __init__(self, num_classes: int = 1000, blocks: tuple[int, ...] = (3, 4, 6, 3)):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages, in_channels = [], 64
        for (width, stride), count in zip(((64, 1), (128, 2), (256, 2), (512, 2)), blocks):
            layers = []
            for i in range(count):
                layers.append(Bottleneck(in_channels, width, stride if i == 0 else 1))
                in_channels = width * Bottleneck.expansion
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        for m in self.modules():  # zero-init the last BN of each block (Goyal et al. 2017)
            if isinstance(m, Bottleneck):
                nn.init.zeros_(m.bn3.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


def build_bert(options: Mapping[str, int]) -> nn.Module:
    """BERT pre-training model (MLM + NSP heads) from ``transformers``, built offline."""
    from transformers import BertConfig, BertForPreTraining

    config = BertConfig(
        vocab_size=options["vocab_size"],
        hidden_size=options["hidden_size"],
        num_hidden_layers=options["num_layers"],
        num_attention_heads=options["num_heads"],
        intermediate_size=options["intermediate_size"],
        max_position_embeddings=max(512, options["seq_len"]),
    )
    return BertForPreTraining(config)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
