"""Inception V3 as torchvision's ``inception_v3(aux_logits=False, init_weights=True)`` builds it (no torchvision
here: its registry wheel is a CUDA build; harness/contract/workloads/inception_v3.py declares it) and its loss:
mean softmax cross-entropy."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn
from torch.nn import functional as F

from frameworks.shared.pytorch.workloads import resnet50
from harness.contract.workloads.inception_v3 import BLOCKS, FEATURES


class BasicConv2d(nn.Module):
    """Convolution without bias, batch norm (epsilon 1e-3), ReLU."""

    def __init__(self, c_in: int, c_out: int, kernel, stride: int = 1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(c_out, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


def _pool_branch(x: torch.Tensor, conv: nn.Module) -> torch.Tensor:
    """torchvision's pool branch: a 3x3 average pool of stride 1 (padding counted, PyTorch's default), a 1x1."""
    return conv(F.avg_pool2d(x, 3, stride=1, padding=1))


class InceptionA(nn.Module):
    def __init__(self, c_in: int, pool_features: int):
        super().__init__()
        self.b1 = BasicConv2d(c_in, 64, 1)
        self.b5 = nn.Sequential(BasicConv2d(c_in, 48, 1), BasicConv2d(48, 64, 5, padding=2))
        self.b3 = nn.Sequential(BasicConv2d(c_in, 64, 1), BasicConv2d(64, 96, 3, padding=1),
                                BasicConv2d(96, 96, 3, padding=1))
        self.pool = BasicConv2d(c_in, pool_features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b5(x), self.b3(x), _pool_branch(x, self.pool)], 1)


class InceptionB(nn.Module):
    def __init__(self, c_in: int, _: int = 0):
        super().__init__()
        self.b3 = BasicConv2d(c_in, 384, 3, stride=2)
        self.b3dbl = nn.Sequential(BasicConv2d(c_in, 64, 1), BasicConv2d(64, 96, 3, padding=1),
                                   BasicConv2d(96, 96, 3, stride=2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b3(x), self.b3dbl(x), F.max_pool2d(x, 3, stride=2)], 1)


class InceptionC(nn.Module):
    def __init__(self, c_in: int, c7: int):
        super().__init__()
        self.b1 = BasicConv2d(c_in, 192, 1)
        self.b7 = nn.Sequential(BasicConv2d(c_in, c7, 1), BasicConv2d(c7, c7, (1, 7), padding=(0, 3)),
                                BasicConv2d(c7, 192, (7, 1), padding=(3, 0)))
        self.b7dbl = nn.Sequential(BasicConv2d(c_in, c7, 1), BasicConv2d(c7, c7, (7, 1), padding=(3, 0)),
                                   BasicConv2d(c7, c7, (1, 7), padding=(0, 3)),
                                   BasicConv2d(c7, c7, (7, 1), padding=(3, 0)),
                                   BasicConv2d(c7, 192, (1, 7), padding=(0, 3)))
        self.pool = BasicConv2d(c_in, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b7(x), self.b7dbl(x), _pool_branch(x, self.pool)], 1)


class InceptionD(nn.Module):
    def __init__(self, c_in: int, _: int = 0):
        super().__init__()
        self.b3 = nn.Sequential(BasicConv2d(c_in, 192, 1), BasicConv2d(192, 320, 3, stride=2))
        self.b7x3 = nn.Sequential(BasicConv2d(c_in, 192, 1), BasicConv2d(192, 192, (1, 7), padding=(0, 3)),
                                  BasicConv2d(192, 192, (7, 1), padding=(3, 0)), BasicConv2d(192, 192, 3, stride=2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b3(x), self.b7x3(x), F.max_pool2d(x, 3, stride=2)], 1)


class InceptionE(nn.Module):
    def __init__(self, c_in: int, _: int = 0):
        super().__init__()
        self.b1 = BasicConv2d(c_in, 320, 1)
        self.b3_1 = BasicConv2d(c_in, 384, 1)
        self.b3_2a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.b3_2b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.b3dbl_1, self.b3dbl_2 = BasicConv2d(c_in, 448, 1), BasicConv2d(448, 384, 3, padding=1)
        self.b3dbl_3a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.b3dbl_3b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.pool = BasicConv2d(c_in, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1 = self.b1(x)  # torchvision's order: the probe's layer records are the forward's
        b3 = self.b3_1(x)
        b3 = [self.b3_2a(b3), self.b3_2b(b3)]
        b3dbl = self.b3dbl_2(self.b3dbl_1(x))
        b3dbl = [self.b3dbl_3a(b3dbl), self.b3dbl_3b(b3dbl)]
        return torch.cat([b1, *b3, *b3dbl, _pool_branch(x, self.pool)], 1)


BLOCK_TYPES = {"A": InceptionA, "B": InceptionB, "C": InceptionC, "D": InceptionD, "E": InceptionE}


class InceptionV3(nn.Module):
    """23,834,568 parameters at 1000 classes, any input of at least 75 x 75. Initialised as torchvision's:
    convolution and dense weights normal with standard deviation 0.1 (truncated at +-2, 20 deviations), batch
    norm scale 1 and shift 0, the classifier's bias PyTorch's default."""

    def __init__(self, num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(
            BasicConv2d(3, 32, 3, stride=2), BasicConv2d(32, 32, 3), BasicConv2d(32, 64, 3, padding=1),
            nn.MaxPool2d(3, stride=2), BasicConv2d(64, 80, 1), BasicConv2d(80, 192, 3), nn.MaxPool2d(3, stride=2))
        self.blocks = nn.Sequential(*(BLOCK_TYPES[kind](c_in, option) for kind, c_in, option in BLOCKS))
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(FEATURES, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, mean=0.0, std=0.1, a=-2, b=2)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1)
        return self.fc(self.dropout(torch.flatten(x, 1)))


def build_model(options: Mapping[str, Any]) -> nn.Module:
    return InceptionV3(int(options["num_classes"]))


def loss_of(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return resnet50.loss_of(model, batch)  # an image classifier's, ResNet-50's
