"""Every results table this project ever wrote still loads, for report, compare and history.

The schemas below are every distinct column list (28 by 2026-11-25) harness/results/table.py (before it, harness/results.py)
ever had, found with ``git log -p`` over both files: the first table's 50 columns, the groups of columns
added since (each group's columns always came and went together), and which groups each past schema held,
with its ``schema_version`` and the commit that wrote it (branches that bumped the version and merged later
included). No column was ever renamed, dropped or given another type, so reading one migrates it by adding
the columns it lacks, empty. Each table is made here from real-shaped rows, cut to its columns.
"""

import json
import random

import pandas as pd
import pytest

from harness.cli import main as cli
from harness.gate import compare, history
from harness.results import table as results
from tests.helpers.history_rows import sweep_rows as _sweep

FIRST = ("schema_version sweep_id run_id config_id scenario framework workload size nodes procs_per_node world_size "
         "batch_per_worker global_batch strategy storage launcher device_requested device repeat warmup_steps "
         "measured_steps status reason throughput sample_unit samples_measured window_s step_time_p50_s "
         "step_time_p90_s step_times_s first_loss last_loss weights_consistent weights_checksum parameters "
         "launch_s framework_version versions host os cpu_model cpu_cores gpu_model gpu_count gpu_driver "
         "harness_version harness_commit timestamp spec run_dir").split()

GROUPS = {
    "strategy": "strategy_options bytes_per_step compression_ratio target_accuracy steps_to_target time_to_target_s "
                "final_accuracy accuracy_curve",
    "network": "network hosts image",
    "telemetry": "cpu_util_pct rss_max_mb gpu_util_pct gpu_mem_max_mb gpu_power_w gpu_sm_clock_mhz telemetry_samples",
    "precision": "precision memory_format compile compile_s",
    "storage": "data_stall_frac read_mb_s loader_throughput cache_hit_rate objects_verified staging_s",
    "layout": "layout",
    "image_id": "image_id image_digest",
    "emulation": "accelerator compute_s compute_source emulated_step compute_error_frac au au_threshold au_ok "
                 "host_cpu_busy loader_busy loader_cpu_bound checkpoint_mode checkpoint_bytes checkpoint_save_s "
                 "checkpoint_save_gb_s checkpoint_load_s checkpoint_load_gb_s checkpoint_cache_defeat",
    "plain": "plain_throughput",
    "mpi": "mpi",
    "pipeline": "p2p_bytes_per_step stage_idle_fractions pipeline_bubble_predicted peak_rss_mb rank_peak_rss_mb",
    "staleness": "staleness_mean staleness_max staleness_hist server_bytes_in_per_step server_bytes_out_per_step",
    "strategy_note": "strategy_note",
    "stage_layers": "stage_layers stage_flops_shares",
    "stage_time": "stage_time_shares",
    "partitions": "partitions_loaded partition_load_s_p50 partition_load_s_max partition_load_mb_s",
    "mlperf": "rules dataset_bytes client_memory_gb memory_available_gb page_cache_drop potential_caching "
              "potential_caching_why au_rules throughput_rules checkpoint_save_gb_s_rules checkpoint_load_gb_s_rules "
              "mlperf_compliant mlperf_violations mlperf_replication_spread",
    "mfu": "peak_gpu_allocated_mb rank_peak_gpu_allocated_mb peak_gpu_reserved_mb rank_peak_gpu_reserved_mb "
           "model_flops_per_sample achieved_tflops peak_tflops peak_source peak_devices mfu",
    "busy": "other_cpu_share load_avg steal_share cpu_mhz machine_busy busy_note",
    "cluster": "exchange intra_link inter_link dilation emulation_late_s emulation_saturated",
    "exchange_apart": "exchange_s exchange_cpu_busy",
    "emulated_input": "input_workers input_rate",
    "step_variation": "step_variation",
    "attribution": "slowest_rank slowest_host straggler_score attribution_phase slowest_compute_s slowest_exchange_s "
                   "slowest_data_s slowest_rest_s median_compute_s median_exchange_s median_data_s median_rest_s",
    "fault": "fault_kind fault_rank fault_host fault_severity fault_every fault_seed",
    "environment": "environment environment_lock",
    "reduction": "gpus_per_rank gradient_scale",
    "links": "attribution_kind attribution_host link_host link_score slowest_link_s median_link_s",
}
_MAIN = "strategy network telemetry precision storage layout"
SCHEMAS = [  # (schema_version, the commit that wrote it, the groups its table has beyond FIRST)
    (1, "695881d", ""), (2, "f95e54e", "strategy"), (1, "5c36245", "network"), (1, "9bdb845", "strategy network"),
    (1, "4ab26bc", "network telemetry"), (1, "4c5cf53", "strategy network telemetry"),
    (1, "c0072b9", "network telemetry precision"), (1, "27761f4", "strategy network telemetry precision"),
    (1, "810e029", "strategy network telemetry precision storage"), (1, "652666c", _MAIN),
    (1, "1b402a3", f"{_MAIN} image_id"), (2, "f802c2f", f"{_MAIN} emulation"), (2, "4ba0ab1", f"{_MAIN} plain"),
    (1, "ae31d51", f"{_MAIN} mpi"), (1, "8c195d7", f"{_MAIN} pipeline"), (1, "c2edca0", f"{_MAIN} staleness"),
    (1, "a9a9dfa", f"{_MAIN} pipeline strategy_note"), (1, "67b794d", f"{_MAIN} mpi staleness"),
    (2, "e18a1c0", f"{_MAIN} emulation mpi staleness"), (2, "4f01414", f"{_MAIN} emulation plain mpi staleness"),
    (2, "4b5715b", f"{_MAIN} emulation plain mpi pipeline staleness strategy_note"),
    (2, "1363b01", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note"),
    (2, "afef0a3", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers"),
    (2, "32a64b5", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers stage_time"),
    (2, "c6ff08e", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers stage_time "
                   "partitions"),
    (2, "b7dc039", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers stage_time "
                   "partitions mlperf"),
    (3, "dc92715", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers stage_time "
                   "partitions mlperf mfu"),
    (4, "13e247d", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers stage_time "
                   "partitions mlperf mfu busy"),
    (5, "5db678b", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers stage_time "
                   "partitions mlperf mfu busy cluster"),
    (5, "63f9b6b", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers stage_time "
                   "partitions mlperf mfu busy cluster exchange_apart"),
    (5, "after-b5f7ae4", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers "
                         "stage_time partitions mlperf mfu busy cluster exchange_apart emulated_input"),
    (5, "after-146ccf9", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers "
                         "stage_time partitions mlperf mfu busy cluster exchange_apart emulated_input step_variation"),
    (6, "after-a8150be", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers "
                         "stage_time partitions mlperf mfu busy cluster exchange_apart emulated_input step_variation "
                         "attribution"),
    (7, "after-63ed77e", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers "
                         "stage_time partitions mlperf mfu busy cluster exchange_apart emulated_input step_variation "
                         "attribution fault"),
    (8, "after-51e4511", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers "
                         "stage_time partitions mlperf mfu busy cluster exchange_apart emulated_input step_variation "
                         "attribution fault environment"),
    (9, "after-4fcead8", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers "
                         "stage_time partitions mlperf mfu busy cluster exchange_apart emulated_input step_variation "
                         "attribution fault environment reduction"),
    (10, "after-where", f"{_MAIN} image_id emulation plain mpi pipeline staleness strategy_note stage_layers "
                        "stage_time partitions mlperf mfu busy cluster exchange_apart emulated_input step_variation "
                        "attribution fault environment reduction links"),
]


def columns_of(groups: str) -> list[str]:
    return FIRST + [c for g in groups.split() for c in GROUPS[g].split()]


def test_the_schema_history_ends_at_todays_columns():
    """The last past schema is today's (less columns added since, which must be listed here as a group)."""
    newest = set(columns_of(SCHEMAS[-1][2]))
    assert newest <= set(results.COLUMNS)
    assert set(results.COLUMNS) - newest == set(), (
        "columns added to harness/results/table.py: add them to GROUPS and a SCHEMAS entry here")
    assert all(c in results.COLUMNS for g in GROUPS.values() for c in g.split())


def _old_table(path, version: int, groups: str):
    """A results folder whose results.parquet has exactly that schema's columns, 8 sweeps of 3 launches, the
    last two slower (the newest confirms the step: the sweep whose run fails the history gate)."""
    rng = random.Random(version)
    rows = [r for i in range(8) for r in _sweep(i, 0.08 if i < 6 else 0.09, rng)]
    full = results.to_frame(rows)
    full["schema_version"] = version
    old = full[columns_of(groups)]
    path.mkdir()
    old.to_parquet(path / results.PARQUET, index=False)
    return path


@pytest.mark.parametrize("version,commit,groups", SCHEMAS, ids=[c for _, c, _ in SCHEMAS])
def test_a_table_of_every_past_schema_loads_and_is_judged(tmp_path, version, commit, groups):
    store = _old_table(tmp_path / commit, version, groups)
    for table in (results.load(store), compare.load_source(store / results.PARQUET, "all")):
        assert list(table.columns) == list(results.COLUMNS) and len(table) == 24
        missing = [c for c in results.COLUMNS if c not in columns_of(groups)]
        assert all(table[c].isna().all() for c in missing)
        assert table["step_times_s"].map(json.loads).map(len).eq(30).all()
    [s] = history.series(history.load([store / results.PARQUET]))
    assert len(s.points) == 8 and s.verdict.verdict == history.REGRESSION
    cells = compare.compare_tables(compare.load_source(store, "s00"), compare.load_source(store, "s07"))
    assert [c.verdict for c in cells] == [compare.REGRESSION]


def test_history_and_compare_on_the_oldest_table_from_the_command_line(tmp_path, capsys):
    store = _old_table(tmp_path / "oldest", *SCHEMAS[0][::2])
    assert cli.main(["history", str(store / results.PARQUET), "--no-chart"]) == 1
    assert cli.main(["compare", str(store), str(store), "--baseline-sweep", "s00"]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_a_table_without_schema_version_is_one_line(tmp_path, capsys):
    store = _old_table(tmp_path / "t", 1, "")
    pd.read_parquet(store / results.PARQUET).drop(columns="schema_version").to_parquet(store / results.PARQUET)
    assert cli.main(["history", str(store / results.PARQUET), "--no-chart"]) == 2
    assert "no schema_version column" in capsys.readouterr().err
