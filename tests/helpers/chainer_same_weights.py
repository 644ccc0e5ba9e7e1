"""``python -m tests.helpers.chainer_same_weights STEPS [--without-weight-decay]``: the PyTorch and Chainer ResNet-50
trained side by side from the same weights on the same batch; prints their losses and how far their
weights ended apart (JSON). Run by tests/runs/test_chainer_same_weights.py in its own process, since it
imports both frameworks (and Chainer's import adjusts distutils, see frameworks/chainer/compat.py).
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import torch

from frameworks.chainer.compat import import_chainer

import_chainer()

from frameworks.chainer import (
    models as chainer_models,  # noqa: E402
    training as chainer_training,
)
from frameworks.shared.pytorch import training as torch_training  # noqa: E402
from harness.contract.axes import Size, Workload  # noqa: E402
from harness.contract.equivalence import PROBE_BATCH, fixed_batch, probe_recipe  # noqa: E402
from harness.contract.workloads import WORKLOADS  # noqa: E402


def torch_name(chainer_path: str) -> str:
    """The PyTorch model's name of a Chainer parameter: /stages/1/0/proj_bn/gamma -> stages.1.0.downsample.1.weight."""
    name = chainer_path.strip("/").replace("/", ".")
    name = re.sub(r"^conv1\.", "stem.0.", name)
    name = re.sub(r"^bn1\.", "stem.1.", name)
    name = name.replace("proj_bn.", "downsample.1.").replace("proj.", "downsample.0.")
    return re.sub(r"\.(W|gamma)$", ".weight", re.sub(r"\.(b|beta)$", ".bias", name))


def main(steps: int, weight_decay: bool) -> dict:
    workload = Workload.RESNET50
    options = WORKLOADS[workload].options(Size.TINY)
    torch.manual_seed(0)
    torch_model = torch_training.build_model(workload, dict(options))
    chainer_model = chainer_models.build_model(options)
    torch_params = dict(torch_model.named_parameters())
    for path, param in chainer_model.namedparams():
        param.array[...] = torch_params[torch_name(path)].detach().numpy()
    batch = fixed_batch(workload, options, PROBE_BATCH, 0)
    torch_batch = {k: torch.from_numpy(v) for k, v in batch.items()}
    chainer_batch = chainer_training.to_chainer(batch)
    plan = probe_recipe(workload)
    torch_opt = torch_training.optimizer_from_recipe(plan, torch_model)
    chainer_opt = chainer_training.optimizer_from_recipe(plan, chainer_model)
    if not weight_decay:  # the control: what a missing WeightDecay hook looks like
        chainer_opt.remove_hook("WeightDecay")
    losses = {"torch": [], "chainer": []}
    for _ in range(steps):
        torch_opt.zero_grad()
        loss = torch_training.loss_of(workload, torch_model, torch_batch)
        loss.backward()
        torch_opt.step()
        losses["torch"].append(float(loss.detach()))
        chainer_model.cleargrads()
        loss = chainer_models.loss_of(chainer_model, chainer_batch["images"], chainer_batch["labels"])
        loss.backward()
        chainer_opt.update()
        losses["chainer"].append(float(loss.array))
    apart = max(float(np.abs(param.array - torch_params[torch_name(path)].detach().numpy()).max())
                for path, param in chainer_model.namedparams())
    return {**losses, "max_weight_difference": apart}


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), "--without-weight-decay" not in sys.argv[2:])))
