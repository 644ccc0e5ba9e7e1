"""A classic scaling table's model (harness/contract/workloads/vgg16.py) under the equivalence contract, through
the probe path ``rosetta equivalence`` runs (harness.running.probe.verify): at tiny size, torch_ddp's probe (the
reference) and tf_mwms's in their own processes, the same parameters, layers, optimizer, and a falling loss.
The full-size models and every other framework are tests/unit/frameworks/test_equivalence.py's."""

import pytest

import frameworks
from harness.contract.axes import Size, Workload
from harness.contract.equivalence import REFERENCE_FRAMEWORK
from harness.running.probe import verify

# one model: the three took 108 s here (2 cores, load 5), VGG-16 alone about 20; the other two are
# tests/unit/frameworks/test_equivalence.py's, at tiny and full size in every framework that has them
CLASSIC = [Workload.VGG16]
STEPS = 3


def test_the_classic_models_train_alike_in_torch_and_keras_at_tiny_size():
    for name in (REFERENCE_FRAMEWORK, "tf_mwms"):
        missing = frameworks.get(name).missing_modules()
        if missing:
            pytest.skip(f"{name} is not installed here (missing {', '.join(missing)})")
    references = {w: report for w, (report, _) in zip(CLASSIC, verify(REFERENCE_FRAMEWORK, CLASSIC, Size.TINY,
                                                                      STEPS, {}))}
    verdicts = verify("tf_mwms", CLASSIC, Size.TINY, STEPS, references)
    for workload, (report, problems) in zip(CLASSIC, verdicts):
        assert not problems, f"tf_mwms {workload.value} drifted:\n" + "\n".join(problems)
        assert report["parameters"] == references[workload]["parameters"] > 0
        assert report["flops_per_sample"] == references[workload]["flops_per_sample"]
        assert len(report["losses"]) == STEPS and report["losses"][-1] < report["losses"][0]
