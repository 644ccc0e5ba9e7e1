"""ResNet-50 v1.5 (He et al. 2016, torchvision's v1.5: the stride on the 3x3 convolution) on ImageNet-shaped images."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from harness.contract.axes import Size, Workload
from harness.contract.workloads.declaration import Recipe, WorkloadInfo, conv_out, conv_record, dense_record

# ResNet-50 v1.5 has the same parameter count at every input size (global pooling).
PRESETS = {
    Size.TINY: {"image_size": 32, "num_classes": 1000},
    Size.SMALL: {"image_size": 64, "num_classes": 1000},
    Size.FULL: {"image_size": 224, "num_classes": 1000},
}
RESNET50_PARAMS = 25_557_032
STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride), ResNet v1.5
BLOCKS = tuple(blocks for _, blocks, _ in STAGES)  # a deeper ResNet (resnet101) has more blocks a stage


def recipe(global_batch: int, options: Mapping[str, Any]) -> Recipe:
    """SGD with momentum, lr 0.1 x global_batch / 256 (Goyal et al. 2017), L2 1e-4."""
    return Recipe("sgd", lr=0.1 * global_batch / 256, momentum=0.9, nesterov=False,
                  weight_decay=1e-4, weight_decay_mode="l2_coupled")


def batch(options: Mapping[str, Any], n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Standard-normal NCHW float32 images and int64 labels."""
    size = int(options["image_size"])
    return {"images": rng.standard_normal((n, 3, size, size), dtype=np.float32),
            "labels": rng.integers(0, int(options["num_classes"]), n, dtype=np.int64)}


def layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stem, the bottlenecks (a projection shortcut where the shape changes) and the classifier."""
    return resnet_layers(options, BLOCKS)


def resnet_layers(options: Mapping[str, Any], stage_blocks: tuple[int, ...]) -> list[dict[str, Any]]:
    """A ResNet v1.5 of ``stage_blocks`` bottlenecks in each of the four stages: its FLOP-carrying layers."""
    size = conv_out(int(options["image_size"]), 7, 2, 3)
    records = [conv_record(3, 64, 7, 2, size)]
    size = conv_out(size, 3, 2, 1)  # max pool
    c_in = 64
    for (width, _, first_stride), blocks in zip(STAGES, stage_blocks):
        for block in range(blocks):
            stride = first_stride if block == 0 else 1
            out = conv_out(size, 3, stride, 1)
            records += [conv_record(c_in, width, 1, 1, size), conv_record(width, width, 3, stride, out),
                        conv_record(width, 4 * width, 1, 1, out)]
            if stride != 1 or c_in != 4 * width:
                records.append(conv_record(c_in, 4 * width, 1, stride, out))
            c_in, size = 4 * width, out
    return records + [dense_record(c_in, int(options["num_classes"]), 1)]


DECLARATION = WorkloadInfo(
    Workload.RESNET50, "ResNet-50 v1.5", "images", PRESETS, recipe=recipe, layers=layers, batch=batch,
    builders={"pytorch": "frameworks.shared.pytorch.workloads.resnet50",
              "keras": "frameworks.shared.keras.workloads.resnet50",
              "chainer": "frameworks.chainer.models",
              "jax": "frameworks.jax.workloads.resnet50"},
    published_parameters=RESNET50_PARAMS)
