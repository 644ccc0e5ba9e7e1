"""rosetta report --notebook: one command, an executed notebook, a Markdown and an HTML page."""

import json

import nbformat
import pytest

from harness.cli import main as cli
from harness.experiment import scenario
from tests.conftest import TINY
from tests.helpers import REPO

pytest.importorskip("papermill")


def test_template_has_a_parameters_cell():
    nb = nbformat.read(REPO / "notebooks/report.ipynb", as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "results_dir" in tagged[0].source and "sweep" in tagged[0].source


def test_one_command_writes_notebook_markdown_html_and_charts(write_scenario, tmp_path, capsys):
    pytest.importorskip("torch")
    from harness.running.runner import run_sweep

    results = tmp_path / "results"
    (row, _) = run_sweep(scenario.load(write_scenario(TINY)), results)  # real 1- and 2-process runs
    assert cli.main(["report", "--results", str(results), "--notebook"]) == 0
    out_dir = results / f"report-{row['sweep_id']}"
    nb = nbformat.read(out_dir / "report.ipynb", as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # scaling, bars, step times, embedded in the executed notebook
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and json.dumps(str(results.resolve()))[1:-1] in injected[0].source
    md = (out_dir / "report.md").read_text()
    for png in ("scaling.png", "bars.png", "step_times.png"):
        assert f"]({png})" in md and (out_dir / png).stat().st_size > 15_000
    assert "| torch_ddp | resnet50/tiny | 1x2 |" in md
    page = (out_dir / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 3 and "<table" in page
    assert "Time-to-accuracy" in md  # says what is not drawn, and why


def test_bar_chart_groups_frameworks_and_strategies(tmp_path):
    from harness.reports import aggregate, charts
    from harness.results import table as results

    rows = []
    for fw, strategy, base in (("torch_ddp", "allreduce", 40.0), ("torch_ddp", "ps", 30.0), ("other", "allreduce", 20.0)):
        for world in (1, 2):
            for rep in range(3):
                rows.append({"schema_version": 1, "sweep_id": "s", "run_id": f"s/{fw}{strategy}{world}{rep}",
                             "config_id": f"{fw}{strategy}{world}", "scenario": "x", "framework": fw,
                             "workload": "resnet50", "size": "tiny", "nodes": 1, "procs_per_node": world,
                             "world_size": world, "batch_per_worker": 4, "global_batch": 4 * world,
                             "strategy": strategy, "storage": "synthetic", "device": "cpu", "status": "ok",
                             "sample_unit": "images", "throughput": base * world * (0.9 + 0.05 * rep),
                             "step_times_s": json.dumps([0.1, 0.11, 0.12]), "repeat": rep, "timestamp": "t"})
    summary = aggregate.summarize(results.to_frame(rows))
    for by in ("framework", "strategy"):
        png = charts.plot_bars(summary, tmp_path / f"{by}.png", by=by)
        assert png.stat().st_size > 20_000
