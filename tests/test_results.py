import json

import pandas as pd
import pytest

from harness import results


def _row(**kw):
    row = {"schema_version": results.SCHEMA_VERSION, "sweep_id": "s1", "run_id": "s1/0000", "framework": "torch_ddp",
           "workload": "resnet50", "world_size": 2, "status": "ok", "throughput": 123.5, "weights_consistent": True,
           "step_times_s": json.dumps([0.1, 0.2]), "spec": json.dumps({"a": 1})}
    row.update(kw)
    return row


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
    with pytest.raises(ValueError, match="not in schema"):
        results.to_frame([_row(extra_thing=1)])


def test_other_schema_version_is_refused(tmp_path):
    results.append(tmp_path, [_row(schema_version=99)])
    with pytest.raises(ValueError, match="schema versions"):
        results.load(tmp_path)


def test_empty_table_has_schema(tmp_path):
    assert list(results.load(tmp_path).columns) == list(results.COLUMNS)
