"""VGG-16 (Simonyan and Zisserman 2015, configuration D) as torchvision's ``vgg16`` and Keras's ``VGG16`` define
it: thirteen 3x3 convolutions (stride 1, padding 1, with biases) in five blocks, each closed by a 2x2 max pool,
then the classifier's three dense layers (4096, 4096, classes; ReLU and dropout 0.5 between, as torchvision's).

The classifier reads the flattened last feature map (Keras's Flatten; torchvision's adaptive pool to 7x7 is the
identity at 224 x 224, the published size), so a smaller image has a smaller first dense layer: tiny trains on a
CPU in seconds. At 224 x 224 and 1000 classes it is the published model, 138,357,544 parameters.
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.contract.axes import Size, Workload
from harness.contract.workloads.declaration import Recipe, WorkloadInfo, conv_record, dense_record
from harness.contract.workloads.resnet50 import batch

PRESETS = {
    Size.TINY: {"image_size": 32, "num_classes": 1000},
    Size.SMALL: {"image_size": 64, "num_classes": 1000},
    Size.FULL: {"image_size": 224, "num_classes": 1000},
}
VGG16_PARAMS = 138_357_544  # torchvision's vgg16 and Keras's VGG16 (include_top), 1000 classes
# each block's convolutions' width; every block ends in a 2x2 max pool of stride 2
BLOCKS = ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3))
HIDDEN = 4096  # the classifier's two hidden dense layers
MIN_IMAGE_SIZE = 32  # five poolings halve the image to 1 x 1


def recipe(global_batch: int, options: Mapping[str, Any]) -> Recipe:
    """The paper's: SGD with momentum 0.9, lr 0.01 at a batch of 256 (scaled linearly with the global batch,
    Goyal et al. 2017), L2 5e-4."""
    return Recipe("sgd", lr=0.01 * global_batch / 256, momentum=0.9, nesterov=False,
                  weight_decay=5e-4, weight_decay_mode="l2_coupled")


def feature_size(options: Mapping[str, Any]) -> int:
    """The last feature map's height and width (pixels): the image halved by each block's pool."""
    size = int(options["image_size"])
    if size < MIN_IMAGE_SIZE:
        raise ValueError(f"vgg16: image_size {size} is below {MIN_IMAGE_SIZE} (five 2x2 poolings)")
    return size // 2 ** len(BLOCKS)


def layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The thirteen convolutions (each at its block's size) and the classifier's three dense layers."""
    size, c_in, records = int(options["image_size"]), 3, []
    for width, convs in BLOCKS:
        for _ in range(convs):
            records.append(conv_record(c_in, width, 3, 1, size))
            c_in = width
        size //= 2
    flat = c_in * feature_size(options) ** 2
    return records + [dense_record(flat, HIDDEN, 1), dense_record(HIDDEN, HIDDEN, 1),
                      dense_record(HIDDEN, int(options["num_classes"]), 1)]


def vgg16_parameters(options: Mapping[str, Any]) -> int:
    """Trainable parameters: each convolution's and dense layer's weights and biases."""
    total = 0
    for layer in layers(options):
        if layer["op"] == "conv":
            total += (9 * layer["in_channels"] + 1) * layer["out_channels"]
        else:
            total += (layer["in_features"] + 1) * layer["out_features"]
    return total


DECLARATION = WorkloadInfo(
    Workload.VGG16, "VGG-16", "images", PRESETS, recipe=recipe, layers=layers, batch=batch,
    builders={"pytorch": "frameworks.shared.pytorch.workloads.vgg16",
              "keras": "frameworks.shared.keras.workloads.vgg16"},
    real_data=False, published_parameters=VGG16_PARAMS, counted_parameters=vgg16_parameters)
