"""Real sweeps of hierarchical allreduce, FSDP2 and the pipeline on digits, tensor parallelism on BERT and the hybrid
on ResNet-50: torchrun, 2 gloo processes."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from harness.experiment import scenario  # noqa: E402
from harness.running.runner import run_sweep  # noqa: E402

DIGITS = """
name = "model_parallel_test"
[settings]
warmup_steps = 2
measured_steps = 200
repeats = 1
timeout_s = 300
device = "cpu"
[matrix]
framework = "torch_ddp"
workload = "digits"
procs_per_node = 2
batch_per_worker = 16
strategy = ["hierarchical", "fsdp", "pipeline"]
[strategy_options.hierarchical]
local_size = 1
[strategy_options.pipeline]
microbatches = 4
schedule = "1f1b"
balance = "flops"  # a cut that does not move with the machine's load (the default, "time", would)
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("model_parallel_run")
    path = tmp / "scenario.toml"
    path.write_text(DIGITS)
    return {r["strategy"]: r for r in run_sweep(scenario.load(path), tmp / "results")}


@pytest.mark.parametrize("strategy", ["hierarchical", "fsdp", "pipeline"])
def test_each_strategy_trains_digits_to_the_target_with_the_same_weights_everywhere(rows, strategy):
    row = rows[strategy]
    assert row["status"] == "ok", row["reason"]
    assert row["weights_consistent"] is True  # FSDP's shards and the pipeline's stages gathered whole
    assert row["steps_to_target"] is not None, row["accuracy_curve"]
    assert row["final_accuracy"] >= 0.85  # digits at batch 16 wobbles by a few points between evaluations
    peaks = json.loads(row["rank_peak_rss_mb"])  # every rank's peak, the largest in its own column
    assert len(peaks) == 2 and row["peak_rss_mb"] == pytest.approx(max(peaks), abs=0.1) and min(peaks) > 50


def test_the_pipeline_row_has_its_stages_idle_fractions_and_activation_bytes(rows):
    row = rows["pipeline"]
    idle = json.loads(row["stage_idle_fractions"])
    assert len(idle) == 2 and all(0 <= f < 1 for f in idle)
    assert row["pipeline_bubble_predicted"] == pytest.approx(1 / 5)  # (p - 1) / (m + p - 1), p = 2, m = 4
    # the 64-wide activation of the 16-image batch crosses the one boundary: stage 0 sends it forward, stage 1
    # its gradient back, 16 x 64 float32 each (the column is the most any stage sent)
    assert row["p2p_bytes_per_step"] == 16 * 64 * 4
    assert row["bytes_per_step"] == 4  # the loss broadcast from the last stage, the only collective
    assert row["compression_ratio"] is None  # activations are not gradients: no ratio to fp32 allreduce
    assert row["global_batch"] == 16 and row["samples_measured"] == 16 * 200  # counted once, where they leave
    # the MLP 64-64-64-10 cut by forward FLOPs (the default): the first Linear and its ReLU, then the rest
    # (64 x 64 against 64 x 64 + 64 x 10 multiply-adds a sample; the equal-count cut would give 8192 against 640)
    assert json.loads(row["stage_layers"]) == [["0", "1"], ["2", "3", "4"]]
    assert json.loads(row["stage_flops_shares"]) == pytest.approx([4096 / 8832, 4736 / 8832], abs=1e-4)


def test_data_parallel_rows_have_no_pipeline_columns(rows):
    for strategy in ("hierarchical", "fsdp"):
        assert rows[strategy].get("p2p_bytes_per_step") is None  # a row holds only the columns it has
        assert rows[strategy]["bytes_per_step"] > 0


def test_pipeline_of_bert_is_skipped_before_launch(write_scenario, tmp_path):
    text = DIGITS.replace('workload = "digits"', 'workload = "bert"\nsize = "tiny"').replace(
        'strategy = ["hierarchical", "fsdp", "pipeline"]', 'strategy = "pipeline"')
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "skipped"
    assert row["reason"] == "strategy pipeline runs resnet50, digits only in torch_ddp, not bert"


def test_tensor_parallel_bert_counts_its_one_batch_once(write_scenario, tmp_path):
    text = DIGITS.replace('workload = "digits"', 'workload = "bert"\nsize = "tiny"').replace(
        'strategy = ["hierarchical", "fsdp", "pipeline"]', 'strategy = "tensor_parallel"').replace(
        "measured_steps = 200", "measured_steps = 3").replace("batch_per_worker = 16", "batch_per_worker = 4")
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["weights_consistent"] is True  # replicated weights (LayerNorms, embeddings) stay equal
    assert row["global_batch"] == 4 and row["samples_measured"] == 4 * 3
    # one layer: 2 row-wise outputs (forward) and 4 column-wise input gradients (backward) of 4 x 32 x 64 floats
    assert row["bytes_per_step"] == 6 * 4 * 32 * 64 * 4


RESNET_PIPELINE = """
name = "pipeline_balance_test"
[settings]
warmup_steps = 0
measured_steps = 1
repeats = 1
timeout_s = 600
device = "cpu"
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
procs_per_node = {stages}
batch_per_worker = 4
strategy = "pipeline"
[strategy_options.pipeline]
microbatches = 2
balance = "{balance}"
"""


RESNET_LAYERS = ["stem", *(f"stages.{s}.{b}" for s, blocks in enumerate((3, 4, 6, 3)) for b in range(blocks)),
                 "pool+fc"]


def _resnet_pipeline_rows(write_scenario, tmp_path, stages: int, balances: tuple[str, ...]) -> dict:
    """One ResNet-50 tiny pipeline run of ``stages`` stages for each balance, the same seed, checked alike:
    ok, its balance recorded, the stages' weights gathered whole, every layer in one stage, in order, and each
    stage's share of the FLOPs (and, cut by time, of the measured time) between 0 and 1, summing to 1."""
    rows = {}
    for balance in balances:
        text = RESNET_PIPELINE.format(balance=balance, stages=stages)
        (rows[balance],) = run_sweep(scenario.load(write_scenario(text, f"{balance}.toml")), tmp_path / balance)
    for balance, row in rows.items():
        assert row["status"] == "ok", row["reason"]
        assert json.loads(row["strategy_options"])["balance"] == balance
        assert row["weights_consistent"] is True
        layers = json.loads(row["stage_layers"])
        assert len(layers) == stages and all(layers)
        assert [name for stage in layers for name in stage] == RESNET_LAYERS  # every layer once, in order
        columns = ["stage_flops_shares"] + (["stage_time_shares"] if balance == "time" else [])
        for column in columns:
            shares = json.loads(row[column])
            assert len(shares) == stages and all(0 < s < 1 for s in shares)
            assert sum(shares) == pytest.approx(1, abs=1e-3)
        if balance != "time":
            assert row.get("stage_time_shares") is None  # measured only to cut by it
    return rows


def test_resnet50_stages_cut_by_flops_differ_from_the_cut_by_layers_and_record_their_shares(write_scenario, tmp_path):
    # ResNet-50's blocks cost about the same FLOPs each (spatial size halves as channels double), so 2 and 3
    # stages cut alike either way; at 4 the equal-count cut (5, 5, 4, 4 layers) puts 3 of the 4 heavier
    # first blocks of a ResNet stage (stride or projection) into its first two stages, the FLOPs cut does not
    rows = _resnet_pipeline_rows(write_scenario, tmp_path, 4, ("layers", "flops"))
    assert [len(stage) for stage in json.loads(rows["layers"]["stage_layers"])] == [5, 5, 4, 4]
    assert json.loads(rows["flops"]["stage_layers"]) != json.loads(rows["layers"]["stage_layers"])
    by_flops, by_layers = (json.loads(rows[b]["stage_flops_shares"]) for b in ("flops", "layers"))
    assert max(by_flops) < max(by_layers)  # the largest stage is smaller
    assert rows["flops"]["weights_checksum"] == rows["layers"]["weights_checksum"]  # the same model trained


def test_resnet50_stages_cut_by_measured_time_train_the_same_model_as_the_cut_by_layers(write_scenario, tmp_path):
    # where the time cut falls depends on the machine and its load (on this CPU the late blocks run their
    # FLOPs several times slower, so it usually moves later than the count cut): not asserted. What must
    # hold whatever it is: every rank made the same cut (rank 0's times broadcast; the run is ok and its
    # stages' weights gathered whole are consistent), and a cut does not change the arithmetic
    rows = _resnet_pipeline_rows(write_scenario, tmp_path, 2, ("layers", "time"))
    assert rows["time"]["weights_checksum"] == rows["layers"]["weights_checksum"]


HYBRID = """
name = "hybrid_test"
[settings]
warmup_steps = 1
measured_steps = 3
repeats = 1
timeout_s = 300
device = "cpu"
[matrix]
framework = "torch_ddp"
workload = "resnet50"
size = "tiny"
procs_per_node = 2
batch_per_worker = 4
strategy = "hybrid"
"""


def test_hybrid_resnet50_trains_with_its_trunk_and_classifier_alike_on_every_rank(write_scenario, tmp_path):
    from harness.contract.workloads import RESNET50_PARAMS

    (row,) = run_sweep(scenario.load(write_scenario(HYBRID)), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["throughput"] > 0
    assert row["weights_consistent"] is True  # the trunk (SUM allreduce) and the classifier gathered from its shards
    assert row["parameters"] == RESNET50_PARAMS and row["global_batch"] == 8 and row["samples_measured"] == 8 * 3
    # per step: the trunk's gradient (all but the 2048 x 1000 classifier) allreduced, plus the 4 labels (int64),
    # the 4 x 2048 features all-gathered and their 8 x 2048 gradient reduce-scattered, the 8 x 500 logits shard
    # all-gathered and the 8 x 1000 logits' gradient reduce-scattered (float32)
    trunk = (RESNET50_PARAMS - 2048 * 1000 - 1000) * 4
    activations = 4 * 8 + 4 * 2048 * 4 + 8 * 500 * 4 + 2 * (4 * 2048 * 4 + 8 * 500 * 4)
    assert row["bytes_per_step"] == trunk + activations
    assert row["compression_ratio"] == pytest.approx(RESNET50_PARAMS * 4 / (trunk + activations))
    assert row.get("p2p_bytes_per_step") is None  # collectives only
    assert len(json.loads(row["rank_peak_rss_mb"])) == 2 and row["peak_rss_mb"] > 50


@pytest.mark.parametrize("change,reason", [
    ('[workload_options.resnet50]\nnum_classes = 999\n',
     "strategy hybrid splits the classifier's 999 classes over the ranks: 999 does not divide by the world size 2"),
    ('', "strategy hybrid runs resnet50 only in torch_ddp, not digits"),
])
def test_hybrid_is_skipped_before_launch_where_it_cannot_split(write_scenario, tmp_path, change, reason):
    text = HYBRID + change if change else HYBRID.replace('workload = "resnet50"', 'workload = "digits"')
    (row,) = run_sweep(scenario.load(write_scenario(text)), tmp_path / "results")
    assert row["status"] == "skipped" and row["reason"] == reason
