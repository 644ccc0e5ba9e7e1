"""Model FLOPs, the dense peak table and MFU (harness.machines.model_flops, peaks; harness.results.utilization).

The FLOPs the harness counts from a workload's options alone are the FLOPs the reference framework's
probe reads from its own model (PyTorch, skipped where it is not installed).
"""

import importlib.util
import json
from collections import Counter

import pytest

from harness.contract.axes import Device, Precision, Size, Storage, Strategy, Workload
from harness.contract.equivalence import flops_per_sample
from harness.contract.spec import RunSpec
from harness.contract.workloads import LLAMA31_8B_PARAMS, WORKLOADS
from harness.contract.workloads.llama import llama_parameters
from harness.machines.model_flops import (
    TRAINING_FLOPS_PER_FORWARD,
    forward_layers,
    training_flops_per_sample,
)
from harness.machines.peaks import PEAKS_FILE, device_peak, parse, table
from harness.results import utilization
from harness.results.utilization import cpu_peak, utilization_fields

# Sizes small enough to build on a CPU in a test (BERT base and large: 110M and 335M parameters, ResNet
# at 224: the full count, built and run once on 2 images).
PROBED = [(w, s) for w in Workload if w != Workload.DIGITS for s in WORKLOADS[w].presets
          if (w, s) not in ((Workload.BERT, Size.FULL), (Workload.BERT, Size.LARGE), (Workload.LLAMA, Size.FULL))]


@pytest.mark.parametrize("workload, size", PROBED, ids=[f"{w.value}-{s.value}" for w, s in PROBED])
def test_the_harness_counts_the_layers_the_reference_probe_reads_from_its_model(workload, size):
    pytest.importorskip("torch", reason="the reference probe is PyTorch's (install the torch extra)")
    if workload == Workload.BERT:
        pytest.importorskip("transformers", reason="BERT's PyTorch model is transformers' (the torch extra)")
    from frameworks.torch_ddp.probe import probe

    options = WORKLOADS[workload].options(size)
    probed = probe(workload, options, 0, 0)["layers"]
    ours = forward_layers(workload, options)
    as_counts = lambda records: Counter(json.dumps(r, sort_keys=True) for r in records)  # noqa: E731
    assert as_counts(ours) == as_counts(probed)
    assert flops_per_sample(ours) == flops_per_sample(probed)


def test_training_flops_are_three_forward_passes_and_bert_base_is_as_published():
    options = WORKLOADS[Workload.BERT].options(Size.FULL)
    forward = flops_per_sample(forward_layers(Workload.BERT, options))
    assert training_flops_per_sample(Workload.BERT, options) == TRAINING_FLOPS_PER_FORWARD * forward == 3 * forward
    # ResNet-50 at 224: the 4.1 GMACs everyone quotes, 2 FLOPs each
    resnet = flops_per_sample(forward_layers(Workload.RESNET50, WORKLOADS[Workload.RESNET50].options(Size.FULL)))
    assert resnet == pytest.approx(2 * 4.09e9, rel=0.01)


# torchvision's published figures (its weights' tables: "GFLOPS", which are multiply-adds, and parameters; Inception
# V3's without its auxiliary classifier, which the eval-mode count leaves out): 2 FLOPs per multiply-add here
CLASSIC_PUBLISHED = {Workload.INCEPTION_V3: (5.71e9, 23_834_568), Workload.RESNET101: (7.80e9, 44_549_160),
                     Workload.VGG16: (15.47e9, 138_357_544)}


@pytest.mark.parametrize("workload", list(CLASSIC_PUBLISHED), ids=[w.value for w in CLASSIC_PUBLISHED])
def test_the_classic_models_have_torchvisions_published_flops_and_parameters(workload):
    info = WORKLOADS[workload]
    options = info.options(Size.FULL)
    macs, parameters = CLASSIC_PUBLISHED[workload]
    assert flops_per_sample(forward_layers(workload, options)) == pytest.approx(2 * macs, rel=0.005)
    assert info.published_parameters == parameters


def test_the_llama_8b_shape_has_the_published_parameters_and_torchtitan_s_flops_per_token():
    options = WORKLOADS[Workload.LLAMA].options(Size.FULL)
    assert llama_parameters(options) == LLAMA31_8B_PARAMS == 8_030_261_248
    layers, hidden, seq = options["num_layers"], options["hidden_size"], options["seq_len"]
    embedding = options["vocab_size"] * hidden
    # torchtitan's get_num_flop_per_token: 6 x (parameters less the embedding) + 12 x layers x hidden x seq
    torchtitan = 6 * (LLAMA31_8B_PARAMS - embedding) + 12 * layers * hidden * seq
    per_token = training_flops_per_sample(Workload.LLAMA, options, WORKLOADS[Workload.LLAMA].samples_per_item(options))
    norm_scales = (2 * layers + 1) * hidden  # parameters torchtitan counts that multiply no matrix
    assert per_token == torchtitan - 6 * norm_scales
    assert WORKLOADS[Workload.LLAMA].sample_unit == "tokens"


def test_the_peak_table_is_dense_with_a_source_for_every_device():
    devices = table()
    assert {d.name for d in devices} >= {"H100 SXM", "H100 PCIe", "A100 SXM", "A100 PCIe", "V100 SXM2", "V100 PCIe"}
    assert all(d.source and "http" in d.source for d in devices)
    # the dense figures, not the datasheets' sparse ones (twice as large): fms-fsdp#89's 1,979
    assert device_peak("NVIDIA H100 80GB HBM3", Precision.AMP_BF16).tflops == pytest.approx(989.5)
    assert device_peak("NVIDIA H100 PCIe", Precision.AMP_BF16).tflops == pytest.approx(756.5)
    assert device_peak("NVIDIA A100-SXM4-80GB", Precision.TF32).tflops == 156.0
    assert device_peak("NVIDIA A100 80GB PCIe", Precision.AMP_FP16).tflops == 312.0
    assert device_peak("Tesla V100-SXM2-16GB", Precision.FP32).tflops == 15.7
    assert device_peak("Tesla V100-PCIE-32GB", Precision.AMP_FP16).tflops == 112.0
    assert device_peak("Tesla V100-SXM2-16GB", Precision.AMP_BF16) is None  # Volta has no bfloat16
    assert device_peak("Some Future GPU", Precision.FP32) is None and device_peak(None, Precision.FP32) is None
    for d in devices:  # every tensor-core figure of a device is dense: bf16 = fp16 = 2 x tf32 where both exist
        if "tf32" in d.tflops:
            assert d.tflops["bf16"] == d.tflops["fp16"] == pytest.approx(2 * d.tflops["tf32"], rel=0.01), d.name
    with pytest.raises(ValueError, match="sparse_bf16"):
        parse('[[device]]\nname = "x"\nnames = ["x"]\nsource = "s"\nsparse_bf16 = 1979.0\n', "t.toml")
    assert PEAKS_FILE.exists()


def _spec(**kw) -> RunSpec:
    options = WORKLOADS[Workload.RESNET50].options(Size.TINY)
    return RunSpec(scenario="t", framework="torch_ddp", workload=Workload.RESNET50, size=Size.TINY,
                   workload_options=options, nodes=kw.pop("nodes", 1), procs_per_node=kw.pop("procs_per_node", 2),
                   batch_per_worker=4, strategy=Strategy.ALLREDUCE, storage=Storage.SYNTHETIC, repeat=0,
                   warmup_steps=1, measured_steps=2, timeout_s=60, device=Device.AUTO, seed=0, **kw)


def test_mfu_of_a_gpu_run_counts_one_device_per_rank_against_the_table():
    spec = _spec(precision=Precision.AMP_BF16)
    per_sample = training_flops_per_sample(Workload.RESNET50, spec.workload_options)
    fields = utilization_fields(spec, {"throughput": 1e12 / per_sample * 989.5, "device": "cuda",
                                       "gpu_model": "NVIDIA H100 80GB HBM3"})
    assert fields["peak_devices"] == 2 and fields["peak_tflops"] == 989.5
    assert fields["achieved_tflops"] == pytest.approx(989.5 / 2) and fields["mfu"] == pytest.approx(0.5)
    assert "H100 SXM dense bf16" in fields["peak_source"]
    emulated = utilization_fields(spec, {"throughput": 10.0, "device": "emulated"})
    assert set(emulated) == {"model_flops_per_sample"}  # an emulated accelerator computes nothing


def test_the_cpu_peak_is_measured_once_per_machine_and_labelled(tmp_path):
    calls = []

    def measure():
        calls.append(1)
        return 0.05

    path = tmp_path / "cpu-peak.json"
    first, second = cpu_peak(measure, path), cpu_peak(measure, path)
    assert len(calls) == 1 and first == second and first.tflops == 0.05
    assert first.source.startswith("measured: float32 GEMM") and "threads" in first.source
    stale = json.loads(path.read_text())
    [key] = stale
    stale[key]["method"] = "numpy float32 GEMM 2048x2048, best of 7"  # an older method's figure: measured again
    path.write_text(json.dumps(stale))
    assert cpu_peak(measure, path).source.startswith("measured: float32 GEMM") and len(calls) == 2
    spec = _spec(nodes=2, procs_per_node=1)
    fields = utilization_fields(spec, {"throughput": 100.0, "device": "cpu"}, cpu=lambda: first)
    assert fields["peak_devices"] == 2  # one machine per node
    assert fields["mfu"] == pytest.approx(fields["model_flops_per_sample"] * 100.0 / 2 / 1e12 / 0.05)
    bf16 = utilization_fields(_spec(precision=Precision.AMP_BF16), {"throughput": 100.0, "device": "cpu"},
                              cpu=lambda: first)
    assert "mfu" not in bf16 and "achieved_tflops" in bf16  # the peak is measured in float32 only: no bf16 peak


@pytest.mark.runs
def test_a_real_gemm_measurement_is_positive_and_below_any_cpu_s_plausible_peak():
    assert 1e-4 < utilization.measure_gemm_tflops(size=256, repeats=2) < 100
    assert 1e-4 < utilization.numpy_gemm_tflops(256, 2) < 100
    if importlib.util.find_spec("torch"):  # measured in PyTorch too, in a process of its own
        assert 1e-4 < utilization.torch_gemm_tflops(256, 2) < 100


def test_the_peak_is_the_faster_of_numpy_s_and_pytorch_s_gemm(monkeypatch):
    # two measurements taken one after the other are not compared: on a shared machine either may be faster
    monkeypatch.setattr(utilization, "numpy_gemm_tflops", lambda size, repeats: 0.03)
    monkeypatch.setattr(utilization, "torch_gemm_tflops", lambda size, repeats: 0.25)
    assert utilization.measure_gemm_tflops(256, 2) == 0.25
    monkeypatch.setattr(utilization, "torch_gemm_tflops", lambda size, repeats: None)  # no torch, or it failed
    assert utilization.measure_gemm_tflops(256, 2) == 0.03
