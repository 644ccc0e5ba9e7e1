"""ResNet-101 v1.5 (He et al. 2016; torchvision's ``resnet101``, the stride on the 3x3 convolution) on ImageNet-shaped
images: ResNet-50's stem, bottlenecks and classifier with 3, 4, 23 and 3 blocks a stage. The paper's v1 puts the
stride on the first 1x1 convolution instead: the same parameters, slightly fewer FLOPs (its 7.6 against v1.5's
7.8 GMACs at 224); v1.5 is what torchvision and the project's ResNet-50 build."""

from __future__ import annotations

from typing import Any, Mapping

from harness.contract.axes import Workload
from harness.contract.workloads import resnet50
from harness.contract.workloads.declaration import WorkloadInfo

PRESETS = resnet50.PRESETS  # the same parameter count at every input size (global pooling)
RESNET101_PARAMS = 44_549_160  # torchvision's resnet101, 1000 classes
BLOCKS = (3, 4, 23, 3)


def layers(options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The stem, the 33 bottlenecks (a projection shortcut where the shape changes) and the classifier."""
    return resnet50.resnet_layers(options, BLOCKS)


DECLARATION = WorkloadInfo(
    Workload.RESNET101, "ResNet-101 v1.5", "images", PRESETS, recipe=resnet50.recipe, layers=layers,
    batch=resnet50.batch,
    builders={"pytorch": "frameworks.shared.pytorch.workloads.resnet101",
              "keras": "frameworks.shared.keras.workloads.resnet101"},
    real_data=False, published_parameters=RESNET101_PARAMS)
