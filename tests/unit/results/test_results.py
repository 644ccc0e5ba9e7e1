import json

import pandas as pd
import pytest

from harness.base.errors import UserError
from harness.results import table as results
from tests.helpers.rows import result_row


def _row(**kw):
    return result_row(**{"throughput": 123.5, "weights_consistent": True, "step_times_s": json.dumps([0.1, 0.2]),
                         "spec": json.dumps({"a": 1}), **kw})


def test_round_trip_parquet_and_csv(tmp_path):
    results.append(tmp_path, [_row()])
    table = results.append(tmp_path, [_row(run_id="s1/0001", status="failed", throughput=None,
                                           reason="launcher exit code 1", weights_consistent=None)])
    assert list(table.columns) == list(results.COLUMNS)
    back = results.load(tmp_path)
    pd.testing.assert_frame_equal(back, table)
    assert back["schema_version"].tolist() == [results.SCHEMA_VERSION] * 2
    assert back.loc[0, "throughput"] == 123.5 and pd.isna(back.loc[1, "throughput"])
    csv = pd.read_csv(tmp_path / results.CSV)
    assert csv["run_id"].tolist() == ["s1/0000", "s1/0001"]
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left


def test_unknown_column_is_rejected():
    with pytest.raises(ValueError, match="not in the results schema"):
        results.to_frame([_row(extra_thing=1)])


def test_other_schema_version_is_refused(tmp_path):
    results.append(tmp_path, [_row(schema_version=99)])
    with pytest.raises(UserError, match="schema versions"):
        results.load(tmp_path)


def test_version_1_table_reads_back_with_the_emulation_and_checkpoint_columns_empty(tmp_path):
    old = {k: v for k, v in _row(schema_version=1).items()}
    v1_columns = [c for c in results.COLUMNS if c not in ("accelerator", "au", "checkpoint_save_s")]
    frame = results.to_frame([old])[v1_columns]  # a table written before those columns existed
    frame.to_parquet(tmp_path / results.PARQUET, index=False)
    back = results.load(tmp_path)
    assert back.loc[0, "schema_version"] == 1 and back.loc[0, "throughput"] == 123.5
    assert pd.isna(back.loc[0, "au"]) and pd.isna(back.loc[0, "accelerator"])
    table = results.append(tmp_path, [_row()])  # and a row of this version goes beside it
    assert table["schema_version"].tolist() == [1, results.SCHEMA_VERSION]


def test_version_2_table_reads_back_with_the_flops_and_memory_columns_empty(tmp_path):
    new = ("model_flops_per_sample", "achieved_tflops", "peak_tflops", "peak_source", "peak_devices", "mfu",
           "peak_gpu_allocated_mb", "peak_gpu_reserved_mb", "rank_peak_gpu_allocated_mb", "rank_peak_gpu_reserved_mb")
    frame = results.to_frame([_row(schema_version=2)])[[c for c in results.COLUMNS if c not in new]]
    frame.to_parquet(tmp_path / results.PARQUET, index=False)
    back = results.load(tmp_path)
    assert back.loc[0, "schema_version"] == 2 and all(pd.isna(back.loc[0, c]) for c in new)


def test_version_3_table_reads_back_with_the_machine_load_columns_empty_and_not_busy(tmp_path):
    machine = ("other_cpu_share", "load_avg", "steal_share", "cpu_mhz", "machine_busy", "busy_note")
    frame = results.to_frame([_row(schema_version=3)])[[c for c in results.COLUMNS if c not in machine]]
    frame.to_parquet(tmp_path / results.PARQUET, index=False)
    (back,) = results.load(tmp_path).to_dict("records")
    assert back["schema_version"] == 3 and all(pd.isna(back[c]) for c in machine)
    assert not results.is_busy(back)  # unknown is judged as before: not busy


def test_unreadable_table_is_a_one_line_error(tmp_path):
    results.append(tmp_path, [_row()])
    data = (tmp_path / results.PARQUET).read_bytes()
    (tmp_path / results.PARQUET).write_bytes(data[: len(data) // 2])  # a table truncated by a disk fault
    with pytest.raises(UserError, match=r"results.parquet: not a readable results table .*row.json") as info:
        results.load(tmp_path)
    assert "\n" not in str(info.value)


def test_results_folder_that_is_a_file_is_a_one_line_error(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match="the results folder is a file"):
        results.load(tmp_path / "file")


def test_stale_temporaries_of_a_killed_writer_are_removed(tmp_path):
    results.append(tmp_path, [_row()])
    (tmp_path / f".{results.PARQUET}.abc.tmp").write_bytes(b"half a table")
    results.append(tmp_path, [_row(run_id="s1/0001")])
    assert not list(tmp_path.glob(".*.tmp"))
    assert len(results.load(tmp_path)) == 2


def test_empty_table_has_schema(tmp_path):
    assert list(results.load(tmp_path).columns) == list(results.COLUMNS)
