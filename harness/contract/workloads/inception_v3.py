"""Inception V3 (Szegedy et al. 2016, "Rethinking the Inception Architecture") as torchvision's ``inception_v3``
builds it without its auxiliary classifier (``aux_logits=False``; Keras's ``InceptionV3`` has none): the stem,
three InceptionA blocks, InceptionB, four InceptionC (factorised 7x7: 1x7 and 7x1), InceptionD, two InceptionE,
global average pooling, dropout 0.5 and the classifier. Every convolution is torchvision's BasicConv2d: no bias,
batch norm (epsilon 1e-3, with scale and shift), ReLU.

At 299 x 299 and 1000 classes: 23,834,568 trainable parameters (torchvision's 27,161,264 count the auxiliary
classifier, which its eval-mode FLOPs leave out; Keras's 23,817,352 trainable drop the batch norms' scales,
17,216 of them) and 5.71 GMACs, torchvision's figure. The parameters are the same at every input size (global
pooling); 75 x 75 is the smallest input (tiny: a CPU step in about a second).
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.contract.axes import Size, Workload
from harness.contract.workloads import resnet50
from harness.contract.workloads.declaration import Recipe, WorkloadInfo, conv_out, dense_record

PRESETS = {
    Size.TINY: {"image_size": 75, "num_classes": 1000},
    Size.SMALL: {"image_size": 139, "num_classes": 1000},
    Size.FULL: {"image_size": 299, "num_classes": 1000},
}
INCEPTION_V3_PARAMS = 23_834_568  # torchvision's inception_v3(aux_logits=False), 1000 classes
MIN_IMAGE_SIZE = 75
# (block kind, its input channels, its option: InceptionA's pool features, InceptionC's 7x7 channels), in order
BLOCKS = (("A", 192, 32), ("A", 256, 64), ("A", 288, 64), ("B", 288, 0), ("C", 768, 128), ("C", 768, 160),
          ("C", 768, 160), ("C", 768, 192), ("D", 768, 0), ("E", 1280, 0), ("E", 2048, 0))
FEATURES = 2048  # the last block's output channels: the classifier's input


def recipe(global_batch: int, options: Mapping[str, Any]) -> Recipe:
    """SGD with momentum 0.9, lr 0.1 x global_batch / 256, L2 1e-4 (torchvision's reference training defaults;
    the paper's RMSProp is not among the optimizers every framework builds here)."""
    return resnet50.recipe(global_batch, options)


def _conv(c_in: int, c_out: int, kernel: tuple[int, int], stride: int, size: int,
          padding: tuple[int, int] = (0, 0)) -> tuple[dict[str, Any], int]:
    """A BasicConv2d's record and its output size (the outputs stay square: padding matches the kernel)."""
    out = conv_out(size, kernel[0], stride, padding[0])
    return ({"op": "conv", "in_channels": c_in, "out_channels": c_out, "kernel": list(kernel),
             "stride": [stride, stride], "groups": 1, "out_hw": [out, out]}, out)


def _block(kind: str, c_in: int, option: int, s: int) -> tuple[list[dict[str, Any]], int]:
    """One Inception block's convolutions at input size ``s``, in torchvision's forward order; its output size."""
    one, three, c17, c71 = (1, 1), (3, 3), (1, 7), (7, 1)
    if kind == "A":
        specs = [(c_in, 64, one, 1, (0, 0)), (c_in, 48, one, 1, (0, 0)), (48, 64, (5, 5), 1, (2, 2)),
                 (c_in, 64, one, 1, (0, 0)), (64, 96, three, 1, (1, 1)), (96, 96, three, 1, (1, 1)),
                 (c_in, option, one, 1, (0, 0))]
    elif kind == "B":
        specs = [(c_in, 384, three, 2, (0, 0)), (c_in, 64, one, 1, (0, 0)), (64, 96, three, 1, (1, 1)),
                 (96, 96, three, 2, (0, 0))]
    elif kind == "C":
        c = option
        specs = [(c_in, 192, one, 1, (0, 0)), (c_in, c, one, 1, (0, 0)), (c, c, c17, 1, (0, 3)),
                 (c, 192, c71, 1, (3, 0)), (c_in, c, one, 1, (0, 0)), (c, c, c71, 1, (3, 0)), (c, c, c17, 1, (0, 3)),
                 (c, c, c71, 1, (3, 0)), (c, 192, c17, 1, (0, 3)), (c_in, 192, one, 1, (0, 0))]
    elif kind == "D":
        specs = [(c_in, 192, one, 1, (0, 0)), (192, 320, three, 2, (0, 0)), (c_in, 192, one, 1, (0, 0)),
                 (192, 192, c17, 1, (0, 3)), (192, 192, c71, 1, (3, 0)), (192, 192, three, 2, (0, 0))]
    else:  # E: the 3x3 branches split into 1x3 and 3x1 halves
        specs = [(c_in, 320, one, 1, (0, 0)), (c_in, 384, one, 1, (0, 0)), (384, 384, (1, 3), 1, (0, 1)),
                 (384, 384, (3, 1), 1, (1, 0)), (c_in, 448, one, 1, (0, 0)), (448, 384, three, 1, (1, 1)),
                 (384, 384, (1, 3), 1, (0, 1)), (384, 384, (3, 1), 1, (1, 0)), (c_in, 192, one, 1, (0, 0))]
    records, out = [], s
    for c_from, c_to, kernel, stride, padding in specs:
        record, size = _conv(c_from, c_to, kernel, stride, s, padding)
        records.append(record)
        out = min(out, size)  # the strided branches set the block's output size
    return records, out


def layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stem's five convolutions (two 3x3 max pools of stride 2 between), the eleven blocks' and the
    classifier."""
    size = int(options["image_size"])
    if size < MIN_IMAGE_SIZE:
        raise ValueError(f"inception_v3: image_size {size} is below {MIN_IMAGE_SIZE}")
    records = []
    for c_in, c_out, k, stride, pad in ((3, 32, 3, 2, 0), (32, 32, 3, 1, 0), (32, 64, 3, 1, 1)):
        record, size = _conv(c_in, c_out, (k, k), stride, size, (pad, pad))
        records.append(record)
    size = conv_out(size, 3, 2, 0)  # max pool
    for c_in, c_out, k in ((64, 80, 1), (80, 192, 3)):
        record, size = _conv(c_in, c_out, (k, k), 1, size)
        records.append(record)
    size = conv_out(size, 3, 2, 0)  # max pool
    for kind, c_in, option in BLOCKS:
        block, size = _block(kind, c_in, option, size)
        records += block
    return records + [dense_record(FEATURES, int(options["num_classes"]), 1)]


DECLARATION = WorkloadInfo(
    Workload.INCEPTION_V3, "Inception V3", "images", PRESETS, recipe=recipe, layers=layers, batch=resnet50.batch,
    builders={"pytorch": "frameworks.shared.pytorch.workloads.inception_v3",
              "keras": "frameworks.shared.keras.workloads.inception_v3"},
    real_data=False, published_parameters=INCEPTION_V3_PARAMS)
