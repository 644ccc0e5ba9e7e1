"""Scenario validation: every bad input gets a one-line message naming file, key and what is allowed."""

import subprocess
import sys

import pytest

import frameworks
from harness.base.errors import UserError
from harness.contract.axes import Strategy, Workload
from harness.experiment import scenario
from tests.helpers import REPO

# The message names every workload, in the enum's order.
WORKLOADS_LISTED = "must be one of " + ", ".join(w.value for w in Workload)
GOOD = """
[settings]
warmup_steps = 1
measured_steps = 3
[matrix]
framework = "torch_ddp"
workload = ["resnet50", "bert"]
procs_per_node = [1, 2]
"""


def test_quickstart_loads():
    sc = scenario.load(scenario.builtin_quickstart())
    assert sc.name == "quickstart"
    assert sc.settings.warmup_steps < sc.settings.measured_steps


# registered frameworks the quickstart leaves out, and why (scenarios/quickstart.toml says so too)
NOT_IN_QUICKSTART = {"jax": "each step compiles cold once a configuration: 112-134 s at 1 process, over 300 s at 2, "
                             "on 2 busy cores: minutes more"}


def test_quickstart_runs_every_registered_framework():
    assert set(scenario.load(scenario.builtin_quickstart()).matrix.framework) == \
        set(frameworks.REGISTRY) - set(NOT_IN_QUICKSTART)


def test_scalar_and_list_axes(write_scenario):
    sc = scenario.load(write_scenario(GOOD))
    assert sc.matrix.framework == ("torch_ddp",)
    assert [w.value for w in sc.matrix.workload] == ["resnet50", "bert"]
    assert sc.matrix.procs_per_node == (1, 2)


BAD = [
    # (TOML, substrings the message must contain)
    ("colour = 1\n" + GOOD, ["colour", "unknown key", "allowed: format, name"]),
    (GOOD + "gpus = 2\n", ["[matrix] gpus", "unknown key", "procs_per_node"]),
    (GOOD.replace("warmup_steps = 1", "warmup_steps = 3"), ["[settings] warmup_steps", "must be < measured_steps (3)"]),
    (GOOD.replace("warmup_steps = 1", "warmup_steps = 5"), ["warmup_steps", "must be < measured_steps"]),
    (GOOD + "batch_per_worker = 0\n", ["[matrix] batch_per_worker", "must be >= 1, got 0"]),
    (GOOD + "batch_per_worker = [8, -1]\n", ["batch_per_worker", "must be >= 1, got -1"]),
    (GOOD.replace('"torch_ddp"', '"cntk"'), ["[matrix] framework", "must be one of torch_ddp", "'cntk'"]),
    (GOOD.replace('"bert"', '"gpt"'), ["[matrix] workload", WORKLOADS_LISTED, "'gpt'"]),
    (GOOD.replace("measured_steps = 3", 'measured_steps = "3"'), ["[settings] measured_steps", "must be an integer, got a string"]),
    (GOOD.replace("measured_steps = 3", "measured_steps = 3.5"), ["measured_steps", "must be an integer, got a number"]),
    (GOOD.replace("measured_steps = 3", "measured_steps = true"), ["measured_steps", "must be an integer, got a boolean"]),
    (GOOD.replace("procs_per_node = [1, 2]", "procs_per_node = []"), ["procs_per_node", "must not be empty"]),
    (GOOD.replace("procs_per_node = [1, 2]", "procs_per_node = [1, 1]"), ["procs_per_node", "must not repeat"]),
    (GOOD + 'size = "large"\n', ["[matrix] size", "resnet50 has no size 'large'", "tiny, small, full"]),
    (GOOD.replace("[settings]", '[settings]\ndevice = "tpu"'), ["[settings] device", "auto, cpu, cuda"]),
    (GOOD.replace("[matrix]", "[settings.extra]\n[matrix]"), ["[settings] extra", "unknown key"]),
    ("[settings]\nwarmup_steps = 1\n", ["matrix", "missing (required)"]),
    ("[matrix]\nworkload = 'bert'\n", ["[matrix] framework", "missing (required)"]),
    ("matrix = 3\n", ["matrix", "must be a table, got an integer"]),
    (GOOD + "[[include]]\nworkload = 'bert'\n", ["[include][0] procs_per_node", "missing in an include entry",
                                                 "1, 2"]),
    (GOOD + "[[exclude]]\nflavour = 'x'\n", ["[exclude][0] flavour", "unknown key"]),
    (GOOD + "[[exclude]]\nprocs_per_node = 0\n", ["[exclude][0] procs_per_node", "must be >= 1"]),
    ("exclude = 3\n" + GOOD, ["exclude", "array of tables"]),
    (GOOD + "[workload_options.bert]\nlayers = 2\n", ["[workload_options.bert] layers", "unknown key", "num_layers"]),
    (GOOD + "[workload_options.bert]\nnum_layers = 0\n", ["[workload_options.bert] num_layers", "must be >= 1"]),
    (GOOD + "[workload_options.vgg]\nx = 1\n", ["[workload_options] vgg", WORKLOADS_LISTED]),
    (GOOD + "[strategy_options.onebit]\ntau = 2\n", ["[strategy_options.onebit] tau", "unknown key",
                                                    "allowed: error_feedback"]),
    (GOOD + "[strategy_options.bmuf]\nblock_momentum = 1.5\n", ["[strategy_options.bmuf] block_momentum",
                                                               "must be <= 0.999"]),
    (GOOD + "[strategy_options.local_sgd]\ntau = 0\n", ["[strategy_options.local_sgd] tau", "must be >= 1"]),
    (GOOD + "[strategy_options.onebit]\nerror_feedback = 1\n", ["error_feedback", "must be true or false"]),
    (GOOD + "[strategy_options.cntk]\nx = 1\n", ["[strategy_options] cntk", "must be one of allreduce, onebit"]),
    (GOOD + "[strategy_options.allreduce]\nx = 1\n", ["[strategy_options.allreduce] x", "unknown key"]),
    (GOOD + '[strategy_options.pipeline]\nbalance = "memory"\n', ["[strategy_options.pipeline] balance",
                                                                  "must be one of time, flops, layers", "'memory'"]),
    (GOOD + 'strategy = "sgd"\n', ["[matrix] strategy", "must be one of allreduce, onebit, bmuf"]),
    (GOOD + "[workload_options.digits]\nlr = \"fast\"\n", ["[workload_options.digits] lr", "must be a number"]),
    (GOOD + "[workload_options.digits]\neval_every = 2.5\n", ["eval_every", "must be an integer"]),
    ("format = 7\n" + GOOD, ["format", "reads scenario format 1, got 7"]),
    ("[matrix\n", ["not valid TOML"]),
]


@pytest.mark.parametrize("text,expected", BAD)
def test_bad_input_gets_its_message(write_scenario, text, expected):
    path = write_scenario(text)
    with pytest.raises(UserError) as info:
        scenario.load(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    assert "\n" not in message
    for part in expected:
        assert part in message, (part, message)


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        scenario.load(tmp_path / "nope.toml")


@pytest.mark.runs
def test_cli_prints_one_line_without_traceback(write_scenario):
    path = write_scenario(GOOD + "batch_per_worker = 0\n")
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "plan", str(path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "batch_per_worker: must be >= 1, got 0" in lines[0]


def test_plan_shows_what_varies_and_folds_the_rest(monkeypatch, capsys):
    from harness.cli import main as cli

    monkeypatch.setenv("COLUMNS", "200")
    assert cli.main(["plan", str(REPO / "scenarios" / "network.toml")]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "strategy" in line and "network" in line)
    assert "framework" not in header  # one value: folded into the title
    assert "framework = torch_ddp" in out and out.count("100mbit") == 3


def test_a_mesh_whose_model_axis_does_not_divide_the_world_is_skipped_saying_why(write_scenario):
    from harness.experiment.strategies import placement_reason

    text = GOOD.replace('framework = "torch_ddp"', 'framework = "jax"\nstrategy = "mesh"') + \
        "[strategy_options.mesh]\nmodel = 2\n"
    sc = scenario.load(write_scenario(text))
    assert dict(sc.strategy_options[Strategy.MESH].__dict__) == {"model": 2}
    assert placement_reason(Strategy.MESH, {"model": 2}, nodes=1, world_size=3) == \
        "strategy mesh: model = 2 does not divide the world size 3"
    assert placement_reason(Strategy.MESH, {"model": 2}, nodes=1, world_size=4) is None
