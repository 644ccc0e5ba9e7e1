from harness.contract.axes import Size, Workload
from harness.experiment import scenario
from harness.experiment.matrix import expand
from harness.experiment.scenario import combinations

BASE = """
[settings]
warmup_steps = 1
measured_steps = 3
repeats = 2
[matrix]
framework = "torch_ddp"
workload = ["resnet50", "bert"]
procs_per_node = [1, 2]
batch_per_worker = [8, 4]
"""


def test_product_of_axes_times_repeats(write_scenario):
    sc = scenario.load(write_scenario(BASE))
    assert len(combinations(sc)) == 2 * 2 * 2
    runs = expand(sc)
    assert len(runs) == 8 * 2
    # repeats are interleaved: every configuration once, then every configuration again
    assert [r.repeat for r in runs] == [0] * 8 + [1] * 8
    assert [r.config_id() for r in runs[:8]] == [r.config_id() for r in runs[8:]]
    assert len({r.config_id() for r in runs}) == 8


def test_exclude_drops_matching_combinations(write_scenario):
    sc = scenario.load(write_scenario(BASE + """
[[exclude]]
workload = "resnet50"
batch_per_worker = 4
[[exclude]]
workload = "bert"
batch_per_worker = 8
"""))
    combos = combinations(sc)
    assert len(combos) == 4
    assert {(c["workload"], c["batch_per_worker"]) for c in combos} == {(Workload.RESNET50, 8), (Workload.BERT, 4)}


def test_include_adds_and_fills_single_valued_axes(write_scenario):
    sc = scenario.load(write_scenario(BASE + """
[[include]]
workload = "bert"
size = "full"
procs_per_node = 2
batch_per_worker = 32
"""))
    combos = combinations(sc)
    assert len(combos) == 9
    extra = combos[-1]
    assert extra["size"] == Size.FULL and extra["batch_per_worker"] == 32
    assert extra["framework"] == "torch_ddp" and extra["nodes"] == 1  # filled from single-valued axes


def test_include_of_existing_combination_is_not_duplicated(write_scenario):
    sc = scenario.load(write_scenario(BASE + """
[[include]]
workload = "bert"
procs_per_node = 2
batch_per_worker = 4
"""))
    assert len(combinations(sc)) == 8


def test_workload_options_override_presets(write_scenario):
    sc = scenario.load(write_scenario(BASE + "[workload_options.bert]\nseq_len = 64\n"))
    bert = next(r for r in expand(sc) if r.workload == Workload.BERT)
    assert bert.workload_options["seq_len"] == 64
    assert bert.workload_options["num_layers"] == 2  # the small preset's
    resnet = next(r for r in expand(sc) if r.workload == Workload.RESNET50)
    assert resnet.workload_options == {"image_size": 64, "num_classes": 1000}


def test_world_and_global_batch(write_scenario):
    sc = scenario.load(write_scenario(BASE.replace("procs_per_node = [1, 2]", "nodes = 2\nprocs_per_node = 4")))
    run = expand(sc)[0]
    assert run.world_size == 8 and run.global_batch == 8 * run.batch_per_worker


STRATEGIES = """
name = "strategies"
[settings]
warmup_steps = 0
measured_steps = 3
repeats = 1
[matrix]
framework = "torch_ddp"
workload = "digits"
procs_per_node = 2
strategy = ["allreduce", "onebit", "local_sgd", "bmuf"]
[strategy_options.onebit]
error_feedback = false
[strategy_options.bmuf]
block_steps = 8
block_momentum = 0.875
"""


def test_strategy_options_reach_the_specs(write_scenario):
    runs = {r.strategy.value: r for r in expand(scenario.load(write_scenario(STRATEGIES)))}
    assert runs["allreduce"].strategy_options == {}
    assert runs["onebit"].strategy_options == {"error_feedback": False}
    assert runs["local_sgd"].strategy_options == {"tau": 4}  # the default
    assert runs["bmuf"].strategy_options == {"block_steps": 8, "block_momentum": 0.875, "block_lr": 1.0,
                                             "nesterov": True}
    assert runs["onebit"].workload_options["target_accuracy"] == 0.93


def test_strategy_options_are_part_of_the_config_id(write_scenario):
    on = expand(scenario.load(write_scenario(STRATEGIES.replace("error_feedback = false", "error_feedback = true"))))
    off = expand(scenario.load(write_scenario(STRATEGIES, name="off.toml")))
    ids = lambda runs: {r.strategy.value: r.config_id() for r in runs}  # noqa: E731
    assert ids(on)["onebit"] != ids(off)["onebit"]
    assert ids(on)["allreduce"] == ids(off)["allreduce"]
