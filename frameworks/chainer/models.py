"""ResNet-50 v1.5 in Chainer links, the same network as frameworks/shared/pytorch/models.py.

Not ``chainer.links.ResNet50Layers``: that is v1 (stride on the first 1x1 convolution),
with biased convolutions, and it downloads Caffe weights. Import this module only after
``frameworks.chainer.compat.import_chainer()`` (the worker and the probe do).
"""

from __future__ import annotations

import math

import chainer
import chainer.functions as F
import chainer.links as L
from chainer import initializers

# PyTorch's BatchNorm2d defaults (Chainer's own eps is 2e-5); Chainer's decay 0.9 is PyTorch's momentum 0.1.
BN_EPS = 1e-5


def _he_fan_out() -> initializers.HeNormal:
    """kaiming_normal_(mode="fan_out", nonlinearity="relu"), as the PyTorch model initialises convolutions."""
    return initializers.HeNormal(scale=1.0, fan_option="fan_out")


def _conv(in_channels: int, out_channels: int, ksize: int, stride: int = 1) -> L.Convolution2D:
    """A bias-free convolution with "same" padding for odd kernels."""
    return L.Convolution2D(in_channels, out_channels, ksize, stride=stride, pad=ksize // 2, nobias=True,
                           initialW=_he_fan_out())


class Bottleneck(chainer.Chain):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution, not the first 1x1."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int):
        super().__init__()
        out_channels = width * self.expansion
        self.has_projection = stride != 1 or in_channels != out_channels
        with self.init_scope():
            self.conv1 = _conv(in_channels, width, 1)
            self.bn1 = L.BatchNormalization(width, eps=BN_EPS)
            self.conv2 = _conv(width, width, 3, stride)
            self.bn2 = L.BatchNormalization(width, eps=BN_EPS)
            self.conv3 = _conv(width, out_channels, 1)
            # the last BN of each block starts at zero, so each block starts as the identity (Goyal et al. 2017)
            self.bn3 = L.BatchNormalization(out_channels, eps=BN_EPS, initial_gamma=initializers.Zero())
            if self.has_projection:
                self.proj = _conv(in_channels, out_channels, 1, stride)
                self.proj_bn = L.BatchNormalization(out_channels, eps=BN_EPS)

    def forward(self, x: chainer.Variable) -> chainer.Variable:
        # the shortcut first, as the PyTorch model computes it: the layer lists match in order too
        identity = self.proj_bn(self.proj(x)) if self.has_projection else x
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + identity)


class ResNet50(chainer.Chain):
    """ResNet-50 v1.5: 25,557,032 parameters with 1000 classes, at any input size (global average pooling)."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        with self.init_scope():
            self.conv1 = L.Convolution2D(3, 64, 7, stride=2, pad=3, nobias=True, initialW=_he_fan_out())
            self.bn1 = L.BatchNormalization(64, eps=BN_EPS)
            stages, in_channels = [], 64
            for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                stage = chainer.ChainList()
                for i in range(blocks):
                    stage.append(Bottleneck(in_channels, width, stride if i == 0 else 1))
                    in_channels = width * Bottleneck.expansion
                stages.append(stage)
            self.stages = chainer.ChainList(*stages)
            # nn.Linear's default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias
            bound = 1.0 / math.sqrt(in_channels)
            self.fc = L.Linear(in_channels, num_classes, initialW=initializers.Uniform(bound),
                               initial_bias=initializers.Uniform(bound))

    def forward(self, x: chainer.Variable) -> chainer.Variable:
        h = F.relu(self.bn1(self.conv1(x)))
        # cover_all=False: PyTorch's output size (Chainer's default adds a row and column here)
        h = F.max_pooling_2d(h, 3, stride=2, pad=1, cover_all=False)
        for stage in self.stages:
            for block in stage:
                h = block(h)
        return self.fc(F.mean(h, axis=(2, 3)))


def build_model(options: dict) -> ResNet50:
    """The model the worker trains and the probe inspects (one builder for both)."""
    return ResNet50(int(options["num_classes"]))


def parameter_count(model: chainer.Link) -> int:
    return sum(param.size for param in model.params())


def loss_of(model: ResNet50, images, labels) -> chainer.Variable:
    """Mean softmax cross-entropy over the classes (PyTorch's cross_entropy)."""
    return F.softmax_cross_entropy(model(images), labels)
