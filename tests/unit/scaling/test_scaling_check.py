"""The model's check against measurement and `rosetta project`, on tables with hand-chosen numbers."""

import pytest

from harness.base.errors import UserError
from harness.cli import main as cli
from harness.comm import results as comm_results
from harness.results import table as results
from harness.scaling.check import allreduce_fits, check
from harness.scaling.model import Link, Network
from harness.scaling.projection import load_presets, project, published_points


def _training_row(world, throughput, run):
    return {"schema_version": results.SCHEMA_VERSION, "sweep_id": "s1", "run_id": f"s1/{run}", "config_id": f"c{world}",
            "scenario": "q", "framework": "torch_ddp", "workload": "resnet50", "size": "small", "nodes": 1,
            "procs_per_node": world, "world_size": world, "batch_per_worker": 8, "global_batch": 8 * world,
            "strategy": "allreduce", "storage": "synthetic", "device_requested": "auto", "device": "cpu",
            "repeat": 0, "status": "ok", "throughput": throughput, "sample_unit": "images",
            "step_times_s": "[0.1]", "parameters": 25_000_000, "timestamp": f"2026-01-01T00:00:0{run}"}


def _comm_rows(alpha, beta):
    return [{"schema_version": comm_results.COMM_SCHEMA_VERSION, "sweep_id": "c1", "backend": "gloo",
             "world_size": 2, "collective": "allreduce", "bytes": b, "status": "ok",
             "time_p50_s": alpha + b / beta, "timestamp": "2026-01-01T00:00:00"} for b in (4, 1 << 20, 1 << 26)]


def test_check_by_hand():
    # 1 worker: 80 images/s at batch 8 -> T1 = 0.1 s. Gradients 25e6 x 4 = 1e8 B.
    # allreduce over 2 ranks fitted exactly: alpha 1 ms, beta 1e9 B/s -> 0.001 + 0.1 = 0.101 s.
    # T2 = 0.201 s -> predicted 16 / 0.201 = 79.6 images/s; measured 100 -> error -20.4%.
    table = results.to_frame([_training_row(1, 80.0, 0), _training_row(2, 100.0, 1)])
    comm = comm_results.to_frame(_comm_rows(1e-3, 1e9))
    fit = allreduce_fits(comm)[("gloo", 2)]
    assert fit.alpha_s == pytest.approx(1e-3) and fit.beta_Bps == pytest.approx(1e9)
    out = check(table, comm)
    assert len(out) == 1
    row = out.iloc[0]
    assert row["step_time_1_s"] == pytest.approx(0.1)
    assert row["comm_time_s"] == pytest.approx(0.101)
    assert row["predicted_throughput"] == pytest.approx(16 / 0.201)
    assert row["error"] == pytest.approx(16 / 0.201 / 100 - 1)
    assert row["predicted_efficiency"] == pytest.approx(0.1 / 0.201)
    assert row["measured_efficiency"] == pytest.approx(100 / 160)
    half = check(table, comm, overlap=0.5).iloc[0]  # half the allreduce hidden behind compute
    assert half["comm_time_s"] == pytest.approx(0.0505) and half["error"] == pytest.approx(16 / 0.1505 / 100 - 1)


def test_check_without_comm_measurement_says_so():
    table = results.to_frame([_training_row(1, 80.0, 0), _training_row(2, 100.0, 1)])
    out = check(table, comm_results.to_frame([]))
    assert "rosetta comm" in out.iloc[0]["note"]


def test_presets_load_and_project_by_hand(tmp_path):
    presets = load_presets()
    assert {"10GbE", "25GbE", "IB-EDR", "NVLink"} <= set(presets.links)
    assert all(p.source for p in presets.links.values())
    # 16 GPUs, 8 per node, no latency, in-node 100 GB/s, network 10 GB/s, 1e8 B, T1 = 0.1 s:
    # ring: 30/16 x 1e8 / 1e10 = 0.01875 s; hierarchical: 14/8 x 1e-3 + 1 x 0.01 = 0.01175 s
    net = Network(Link(0.0, 100e9), Link(0.0, 10e9), 8)
    out = project(0.1, 32, 25_000_000, net, workers=(16,)).set_index("algorithm")
    assert out.loc["ring", "efficiency"] == pytest.approx(0.1 / 0.11875)
    assert out.loc["hierarchical", "efficiency"] == pytest.approx(0.1 / 0.11175)
    assert all(0 < e <= 1.01 for _, points in published_points() for _, e in points)
    bad = tmp_path / "presets.toml"
    bad.write_text('format = 1\n[link.x]\ntitle = "x"\nbandwidth_GBps = 1\nlatency_us = 1\nsource = "s"\nmtu = 9000\n')
    with pytest.raises(UserError, match=r"\[link.x\] mtu: unknown key"):
        load_presets(bad)


def test_project_command_writes_its_chart(tmp_path, capsys):
    assert cli.main(["project", "--interconnect", "IB-EDR", "--workers", "8,64", "--results", str(tmp_path)]) == 0
    assert "IB-EDR" in capsys.readouterr().out
    assert list(tmp_path.glob("project-IB-EDR-*.png"))
    assert cli.main(["project", "--interconnect", "carrier-pigeon"]) == 2
    assert "allowed: 10GbE" in capsys.readouterr().err


def test_measured_link_comes_from_the_comm_fit(tmp_path):
    from harness.scaling.projection import measured_link

    comm_results.append(tmp_path, _comm_rows(1e-3, 1e9))
    link = measured_link(tmp_path, "gloo")  # 2 ranks: latency alpha / 2, bandwidth beta
    assert link.latency_us == pytest.approx(500) and link.bandwidth_GBps == pytest.approx(1.0)
    with pytest.raises(UserError, match="no nccl allreduce"):
        measured_link(tmp_path, "nccl")


def test_a_network_cap_holds_the_predicted_link_to_it():
    # 2 nodes x 1 worker capped at 800 Mbit/s = 1e8 B/s; the fit's link (2 ranks): 0.5 ms, 1e9 B/s.
    # allreduce over 2: 2 x 0.5 ms + 1 x 1e8 B / 1e8 B/s = 1.001 s; T2 = 1.101 s; 16 images per step.
    single = _training_row(1, 80.0, 0)
    capped = {**_training_row(2, 10.0, 1), "nodes": 2, "procs_per_node": 1, "network": "800mbit",
              "launcher": "torchrun"}
    out = check(results.to_frame([single, capped]), comm_results.to_frame(_comm_rows(1e-3, 1e9)))
    row = out.iloc[0]
    assert row["network"] == "800mbit" and row["nodes"] == 2
    assert row["comm_time_s"] == pytest.approx(1.001)
    assert row["predicted_throughput"] == pytest.approx(16 / 1.101)
    assert row["measured_efficiency"] == pytest.approx(10 / 160)


def test_report_shows_the_prediction_error_once_comm_has_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # rich wraps at the terminal's width
    results.append(tmp_path, [_training_row(1, 80.0, 0), _training_row(2, 100.0, 1)])
    assert cli.main(["report", "--results", str(tmp_path), "--sweep", "all"]) == 0
    assert "Scaling model" not in capsys.readouterr().out  # no comm table: nothing to check against
    comm_results.append(tmp_path, _comm_rows(1e-3, 1e9))
    assert cli.main(["report", "--results", str(tmp_path), "--sweep", "all"]) == 0
    out = capsys.readouterr().out
    assert "Scaling model vs measurement" in out and "-20%" in out and "mean absolute prediction error: 20%" in out


def test_the_strategy_picks_the_exchange():
    # fit: 1 ms + B / 1e9 over 2 ranks. T1 = 0.1 s (the allreduce single-worker run). Gradients 1e8 B.
    # local_sgd, tau 4: (0.001 + 0.1) / 4 = 0.02525 s. onebit: 1e8/32 + ceil(25e6/512) x 8 = 3,515,632 B
    # -> 0.001 + 0.003515632 s. fp16: half the bytes -> 0.051 s. hierarchical on one link: the ring's 0.101 s.
    # fsdp resharded: two all-gathers and a reduce-scatter, 1.5x the bytes -> 0.151 s; kept: 0.101 s.
    # powersgd: no model, said so with the declaration's reason.
    def strategy_row(strategy, run, options=None):
        return {**_training_row(2, 100.0, run), "strategy": strategy, "strategy_options": options,
                "config_id": f"c2-{strategy}"}

    table = results.to_frame([_training_row(1, 80.0, 0), strategy_row("local_sgd", 1, '{"tau": 4}'),
                              strategy_row("onebit", 2), strategy_row("fp16", 3), strategy_row("powersgd", 4),
                              strategy_row("hierarchical", 5), strategy_row("fsdp", 6)])
    out = check(table, comm_results.to_frame(_comm_rows(1e-3, 1e9))).set_index("strategy")
    assert out.loc["local_sgd", "tau"] == 4 and out.loc["local_sgd", "comm_time_s"] == pytest.approx(0.02525)
    assert out.loc["onebit", "comm_time_s"] == pytest.approx(0.001 + 3_515_632 / 1e9)
    assert out.loc["fp16", "comm_time_s"] == pytest.approx(0.051)
    assert out.loc["local_sgd", "step_time_1_s"] == pytest.approx(0.1)  # from the allreduce single-worker run
    assert out.loc["hierarchical", "comm_time_s"] == pytest.approx(0.101)
    assert out.loc["fsdp", "comm_time_s"] == pytest.approx(0.151)
    assert out.loc["powersgd", "note"].startswith("no model of strategy powersgd: its bytes follow")
    kept = results.to_frame([_training_row(1, 80.0, 0), strategy_row("fsdp", 1, '{"reshard_after_forward": false}')])
    assert check(kept, comm_results.to_frame(_comm_rows(1e-3, 1e9)))["comm_time_s"].iloc[-1] == pytest.approx(0.101)


def test_every_strategy_has_an_exchange_or_says_why_not():
    from harness.contract.axes import CommAlgorithm, ModelledExchange, Strategy, StrategyKind

    for strategy in Strategy:
        assert (strategy.kind.exchange is None) == bool(strategy.kind.unmodelled), strategy
    with pytest.raises(ValueError, match="not both"):
        StrategyKind("x", exchange=ModelledExchange(CommAlgorithm.RING), unmodelled="why")
    with pytest.raises(ValueError, match="not both"):
        StrategyKind("x", exchange=None)
