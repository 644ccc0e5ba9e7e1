"""The workloads as plug-ins: every framework builds the same model from these declarations.

Each workload is one module here holding its ``DECLARATION`` (harness.contract.workloads.declaration.WorkloadInfo:
presets, sample unit, recipe, fixed batch, layers, parameter facts, and per framework family the module path of
its model builder) and one line in ``REGISTRY`` (harness.contract.axes.WORKLOAD_MODULES). A size (``tiny``, ``small``, ``full``, ``large``) is a named set
of options, not separate code; a scenario may override single options per workload.
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.base.registry import Registry
from harness.contract.axes import WORKLOAD_MODULES
from harness.contract.workloads.bert import BERT_BASE_PRETRAINING_PARAMS
from harness.contract.workloads.declaration import FAMILIES, Recipe, WorkloadInfo
from harness.contract.workloads.llama import LLAMA31_8B_PARAMS
from harness.contract.workloads.resnet50 import RESNET50_PARAMS

# name -> the module holding its DECLARATION: the lines of harness/contract/axes.py's WORKLOAD_MODULES (the same
# dict, which the Workload str-Enum is made from); adding a workload is its module and a line there
REGISTRY: dict[str, str] = WORKLOAD_MODULES
DECLARATIONS: Registry[WorkloadInfo] = Registry("workload", REGISTRY, attribute="DECLARATION")
WORKLOADS = DECLARATIONS  # the older name: ``WORKLOADS[workload]`` is the declaration

__all__ = ["BERT_BASE_PRETRAINING_PARAMS", "DECLARATIONS", "FAMILIES", "LLAMA31_8B_PARAMS", "REGISTRY",
           "RESNET50_PARAMS", "Recipe", "WORKLOADS", "WorkloadInfo", "classifier_split_reason", "convolutional",
           "samples_per_step"]


def samples_per_step(workload: Any, options: Mapping[str, Any], batch: int) -> int:
    """The samples a batch of ``batch`` images or sequences counts as (its tokens where samples are tokens):
    what every worker reports per step."""
    return batch * DECLARATIONS[workload].samples_per_item(options)


def convolutional() -> tuple[Any, ...]:
    """The workloads whose model is convolutional (a ``conv`` record among its layers at its first size): those
    a memory format (channels-last) applies to, in registry order."""
    out = []
    for name in DECLARATIONS.names():
        info = DECLARATIONS[name]
        if any(r["op"] == "conv" for r in info.layers(info.options(next(iter(info.presets))))):
            out.append(info.name)
    return tuple(out)


def classifier_split_reason(classes: int, world_size: int) -> str | None:
    """Why strategy hybrid cannot give each of ``world_size`` ranks an equal column shard of a classifier
    with ``classes`` outputs, or None (the planner asks before launching, the worker again before building)."""
    if classes % world_size:
        return (f"strategy hybrid splits the classifier's {classes} classes over the ranks: "
                f"{classes} does not divide by the world size {world_size}")
    return None
