"""Property-based: random and malformed input never escapes as anything but a UserError."""

import time

from hypothesis import HealthCheck, given, settings, strategies as st

from harness.base.errors import UserError
from harness.experiment import scenario

KEYS = ["format", "name", "description", "settings", "matrix", "include", "exclude", "workload_options",
        "strategy_options", "onebit", "bmuf", "digits", "error_feedback", "tau", "block_momentum", "lr",
        "framework", "workload", "size", "nodes", "procs_per_node", "batch_per_worker", "strategy", "storage",
        "warmup_steps", "measured_steps", "repeats", "timeout_s", "device", "seed", "resnet50", "bert",
        "image_size", "num_layers", "bogus"]
SCALARS = st.one_of(st.integers(-3, 300), st.floats(allow_nan=True), st.booleans(),
                    st.sampled_from(["torch_ddp", "resnet50", "bert", "tiny", "small", "large", "cpu", "x", ""]))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)),
                      max_leaves=12)
DOCS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(DOCS)
def test_random_documents_give_user_errors_only(doc):
    try:
        scenario.parse(doc, "fuzz.toml")
    except UserError as exc:
        assert str(exc).startswith("fuzz.toml") and "\n" not in str(exc)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_give_user_errors_only(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "s.toml"
    path.write_bytes(data)
    try:
        scenario.load(path)
    except UserError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc)



# ------------------------------------------------------------------ extreme numbers, long lists, odd text

EXTREME_INTS = st.one_of(st.sampled_from([0, 1, -1, 2**31, 2**63 - 1, 2**64, 10**20, -(10**30), 10**5000]),
                         st.integers(-(2**80), 2**80))
EXTREME_FLOATS = st.one_of(st.sampled_from([1e300, -1e300, 5e-324, float("inf"), float("nan")]), st.floats())
ODD_TEXT = st.one_of(st.text(max_size=60), st.text(alphabet="\n\r\t\x00\x1b\u202e\ufeff'\"[]{}*:@?&=", max_size=30),
                     st.sampled_from(["s3://u:pw@h/b", "https://a/c?sig=x", "../../etc/passwd", "x" * 5000]))
LEAF = st.one_of(EXTREME_INTS, EXTREME_FLOATS, ODD_TEXT, st.booleans(),
                 st.sampled_from(["torch_ddp", "resnet50", "digits", "tiny", "cpu", "allreduce", "local", "s3"]))
LONG_LIST = st.lists(st.one_of(st.integers(1, 10**6), LEAF), max_size=300)
AXIS_VALUES = st.one_of(LEAF, LONG_LIST, st.lists(st.integers(1, 64), min_size=1, max_size=64, unique=True))
MATRIX = st.fixed_dictionaries(
    {"framework": st.sampled_from(["torch_ddp", "chainer"]), "workload": st.sampled_from(["resnet50", "digits"])},
    optional={axis: AXIS_VALUES for axis in ["size", "nodes", "procs_per_node", "batch_per_worker", "strategy",
                                             "storage", "launcher", "network", "precision", "compile"]})
SETTINGS = st.dictionaries(st.one_of(st.sampled_from(["warmup_steps", "measured_steps", "repeats", "timeout_s",
                                                     "seed", "device"]), ODD_TEXT),
                           st.one_of(EXTREME_INTS, EXTREME_FLOATS, ODD_TEXT), max_size=5)
EXTREME_DOCS = st.fixed_dictionaries(
    {"matrix": MATRIX},
    optional={"name": ODD_TEXT, "description": ODD_TEXT, "settings": SETTINGS,
              "include": st.lists(st.dictionaries(st.sampled_from(["batch_per_worker", "nodes", "size"]), LEAF,
                                                  min_size=1, max_size=2), max_size=50),
              "workload_options": st.fixed_dictionaries({}, optional={
                  "resnet50": st.dictionaries(st.sampled_from(["image_size", "num_classes"]), LEAF, max_size=2),
                  "digits": st.dictionaries(st.sampled_from(["lr", "target_accuracy", "eval_every"]), LEAF,
                                            max_size=3)}),
              "storage_options": st.dictionaries(st.sampled_from(["s3", "local", "blob"]),
                                                 st.dictionaries(st.sampled_from(["url", "endpoint_url",
                                                                                  "loader_workers"]), LEAF,
                                                                 max_size=3), max_size=2)})
# A plan at the limit (10,000 distinct runs) expands in 3 s on 2 cores at load 25; a hang or a runaway
# expansion (repeats = 10**6 before the bounds) takes minutes or never ends.
CASE_SECONDS = 20


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXTREME_DOCS)
def test_extreme_documents_end_quickly_in_a_plan_or_a_one_line_reason(doc):
    """No hang (each case bounded in time), no traceback, and no output without a one-line reason:
    a document either plans to a bounded number of runs or is refused in one line naming the file."""
    from harness.experiment.matrix import expand

    start = time.monotonic()
    try:
        parsed = scenario.parse(doc, "fuzz.toml")
        runs = expand(parsed)
        assert 0 < len(runs) <= scenario.MAX_RUNS
    except UserError as exc:
        message = str(exc)
        assert message.startswith("fuzz.toml: ") and "\n" not in message and "\r" not in message
        assert len(message) < 2000
    assert time.monotonic() - start < CASE_SECONDS


def test_an_integer_too_large_for_a_float_is_a_one_line_reason():
    """Found by the fuzz above in a CI run: a float option given an integer of 5,000 digits was an
    OverflowError (int too large to convert to float), not the user's error."""
    doc = {"matrix": {"framework": "torch_ddp", "workload": "digits"},
           "workload_options": {"digits": {"lr": 10**5000}}}
    try:
        scenario.parse(doc, "fuzz.toml")
    except UserError as exc:
        assert str(exc) == ("fuzz.toml: [workload_options.digits] lr: must be a finite number, got an integer "
                            "too large for one")
    else:
        raise AssertionError("accepted")
