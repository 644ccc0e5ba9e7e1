"""VGG-16 as torchvision's ``vgg16`` builds it (harness/contract/workloads/vgg16.py: the classifier reads the
flattened last feature map) and its loss: mean softmax cross-entropy."""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from frameworks.shared.pytorch.workloads import resnet50
from harness.contract.workloads.vgg16 import BLOCKS, HIDDEN, feature_size


class VGG16(nn.Module):
    """Configuration D: 138,357,544 parameters at 224 x 224 and 1000 classes. Initialised as torchvision's:
    Kaiming-normal (fan-out) convolutions, dense weights normal(0, 0.01), biases zero."""

    def __init__(self, num_classes: int, image_size: int):
        super().__init__()
        features, c_in = [], 3
        for width, convs in BLOCKS:
            for _ in range(convs):
                features += [nn.Conv2d(c_in, width, 3, padding=1), nn.ReLU(inplace=True)]
                c_in = width
            features.append(nn.MaxPool2d(2, stride=2))
        self.features = nn.Sequential(*features)
        flat = c_in * feature_size({"image_size": image_size}) ** 2
        self.classifier = nn.Sequential(
            nn.Linear(flat, HIDDEN), nn.ReLU(inplace=True), nn.Dropout(0.5),
            nn.Linear(HIDDEN, HIDDEN), nn.ReLU(inplace=True), nn.Dropout(0.5),
            nn.Linear(HIDDEN, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def build_model(options: Mapping[str, Any]) -> nn.Module:
    return VGG16(int(options["num_classes"]), int(options["image_size"]))


def loss_of(model: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return resnet50.loss_of(model, batch)  # an image classifier's, ResNet-50's
