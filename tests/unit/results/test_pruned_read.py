"""A store read as the verbs read it (their columns, their sweeps: harness.results.table.read_file's columns and
sweeps) gives the verdicts the whole table gives: a 20,000-row store of benchmarks/large_store.py (the benchmark
times 10^6; this checks that what it times is right)."""

from __future__ import annotations

import importlib.util
import math

import pandas as pd
import pytest

from harness.gate import compare, history
from harness.reports import aggregate
from harness.results import table as results
from tests.helpers import REPO


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("large_store", REPO / "benchmarks" / "large_store.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    folder = tmp_path_factory.mktemp("store")
    module.make_store(folder, 20_000, machines=2, configs=6)
    return folder


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_the_table_is_written_in_row_groups_a_sweep_read_skips(store):
    import pyarrow.parquet as pq

    assert pq.ParquetFile(store / results.PARQUET).metadata.num_row_groups == -(-20_000 // results.ROW_GROUP)
    whole = results.load(store)
    sweep = aggregate.latest_sweep(whole)
    pruned = results.load(store, ["throughput"], sweeps=[sweep])
    assert set(pruned.columns) == {"throughput", *results.RESULTS.required}
    expected = whole[whole["sweep_id"] == sweep].reset_index(drop=True)
    pd.testing.assert_frame_equal(pruned.reset_index(drop=True), expected[list(pruned.columns)])


def test_report_reads_its_sweep_alone_and_summarises_it_as_from_the_whole_table(store):
    whole = results.load(store)
    for sweep in (None, sorted(set(whole["sweep_id"]))[3]):
        table, name = aggregate.select_sweep(store, sweep)
        chosen = name if sweep is None else sweep
        assert name == (aggregate.latest_sweep(whole) if sweep is None else sweep)
        expected = whole[whole["sweep_id"] == chosen]
        pd.testing.assert_frame_equal(aggregate.summarize(table), aggregate.summarize(expected))


def test_compare_reads_two_sweeps_and_gives_the_whole_tables_verdicts(store):
    whole = results.load(store)
    latest, before = aggregate.latest_sweep(whole), compare.previous_sweep(store)
    cells = compare.compare_tables(compare.load_source(store, before), compare.load_source(store))
    full = compare.compare_tables(whole[whole["sweep_id"] == before], whole[whole["sweep_id"] == latest])
    assert [(c.config_id, c.verdict, c.note) for c in cells] == [(c.config_id, c.verdict, c.note) for c in full]
    assert cells and all(_same(a.change, b.change) for a, b in zip(cells, full))


def test_history_over_its_columns_and_last_sweeps_gives_the_whole_tables_series(store):
    pruned = history.series(history.load([store], last=12), last=12)
    full = history.series(results.load(store), last=12)
    assert len(pruned) == len(full) == 12  # 6 configurations x 2 machines
    for a, b in zip(sorted(pruned, key=lambda s: (s.config_id, s.machine)),
                    sorted(full, key=lambda s: (s.config_id, s.machine))):
        assert (a.config_id, a.machine, a.verdict.verdict, a.verdict.status) == \
               (b.config_id, b.machine, b.verdict.verdict, b.verdict.status)
        assert [p.sweep_id for p in a.points] == [p.sweep_id for p in b.points]
        assert all(_same(x.rate, y.rate) for x, y in zip(a.points, b.points))
        assert [s.sweep_id for s in a.steps] == [s.sweep_id for s in b.steps]
