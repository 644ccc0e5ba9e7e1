"""What else ran on the machine: the telemetry sampler's accounting with real processes, and the busy rules."""

import os
import subprocess
import sys
import time

import psutil
import pytest

from harness.contract import machine_load, telemetry
from harness.experiment import matrix, scenario
from harness.results import table as results
from tests.helpers.emulated_scenarios import scenario_text

BUSY_LOOP = "while True: pass"


def _spin() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", BUSY_LOOP])


def _stop(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait()


@pytest.mark.runs
def test_a_busy_process_outside_the_run_is_other_load_and_one_inside_is_not(monkeypatch):
    """A run (a process tree with a busy child) beside a busy process that is not the run's: the
    outside process's CPU is in ``other_cpu_share``, the inside one's is the run's (compared with
    what each process's own counters say over the same seconds, not with a timing)."""
    monkeypatch.setenv("OMP_NUM_THREADS", str(os.cpu_count()))
    run, outside = _spin(), _spin()
    try:
        sampler = telemetry.Sampler(run.pid, 0)
        before = (psutil.Process(run.pid).cpu_times(), psutil.Process(outside.pid).cpu_times())
        samples = [sampler.sample()]
        start = time.time()
        for _ in range(6):
            time.sleep(0.25)
            samples.append(sampler.sample())
        end = samples[-1]["time"]
        after = (psutil.Process(run.pid).cpu_times(), psutil.Process(outside.pid).cpu_times())
    finally:
        _stop(run)
        _stop(outside)
    elapsed = end - samples[0]["time"]
    run_cores, outside_cores = ((b.user + b.system - a.user - a.system) / elapsed for a, b in zip(before, after))
    span = machine_load.rank_span(samples, start - 0.01, end)
    assert span is not None and span.machine == open(machine_load.BOOT_ID).read().strip()
    # the run's busy child is the run's (clock ticks of 10 ms: a few ticks' slack over 1.5 s)
    assert span.tree_cores == pytest.approx(run_cores, abs=0.05)
    fields = machine_load.summarize([(samples, start - 0.01, end)])
    cores = span.machine_cores
    assert cores == pytest.approx(os.cpu_count(), rel=0.1)
    # the outside process is other load (other helpers' processes on a shared machine only add to it)
    assert fields["other_cpu_share"] * cores >= 0.9 * outside_cores - 0.05
    assert fields["other_cpu_share"] * cores <= span.machine_busy_cores - span.tree_cores + 1e-9
    assert fields["machine_busy"] is True and "other processes used" in fields["busy_note"]
    assert "oversubscribes the cores" in fields["busy_note"]  # OMP_NUM_THREADS = every core, plus the spinner
    assert fields["load_avg"] == pytest.approx(os.getloadavg()[0], abs=max(1.0, os.getloadavg()[0]))
    assert 0 <= fields["steal_share"] < 1
    mhz = machine_load.cpu_mhz()
    assert (fields["cpu_mhz"] is None) == (mhz is None)


def _span(cores, busy, tree, steal=0.0, threads=None, machine="m"):
    return machine_load.RankSpan(machine=machine, machine_cores=cores, machine_busy_cores=busy, steal_cores=steal,
                                 tree_cores=tree, load1=1.0, mhz=None, threads=threads)


def test_an_emulated_cluster_samples_its_stretched_window_twenty_times_and_no_more(write_scenario):
    """k = 128 stretches 2 steps of a V100's 0.193 s to 49.4 real seconds at least: a sample every 2.47 s
    (WINDOW_SAMPLES = 20 in it), not 99 at SAMPLE_S; at k = 8 (3.1 s) SAMPLE_S stays the period."""
    periods = {}
    for k in (8, 128):
        [spec] = matrix.expand(scenario.load(write_scenario(scenario_text(emulation=f"dilation = {k}"))))
        periods[k] = telemetry.sample_period_s(spec)
    assert periods == {8: telemetry.SAMPLE_S, 128: pytest.approx(2 * 0.193 * 128 / telemetry.WINDOW_SAMPLES, rel=0.02)}
    plain = 'name = "plain"\n[matrix]\nframework = "torch_ddp"\nworkload = "resnet50"\n'
    plain = matrix.expand(scenario.load(write_scenario(plain)))
    assert {telemetry.sample_period_s(spec) for spec in plain} == {telemetry.SAMPLE_S}


def test_busy_rules():
    # a quiet 2-core machine: the run's 1.9 cores and 0.02 of the system's
    quiet = machine_load.machine_figures([_span(2, 1.92, 1.9, threads=2)])
    assert quiet["machine_busy"] is False and quiet["busy_note"] is None
    assert quiet["other_cpu_share"] == pytest.approx(0.01)
    # one core kept busy by another process, beside a 2-thread run: busy, and the cores oversubscribed
    busy = machine_load.machine_figures([_span(2, 2.0, 1.0, threads=2)])
    assert busy["machine_busy"] and busy["other_cpu_share"] == pytest.approx(0.5)
    assert busy["busy_note"] == ("other processes used 50% of the 2 CPUs (1.0 cores); beside the run's 2 compute "
                                 "threads that oversubscribes the cores")
    # two ranks on one machine: both trees are the run's
    two = machine_load.machine_figures([_span(2, 1.95, 0.95, threads=1), _span(2, 1.97, 0.96, threads=1)])
    assert two["machine_busy"] is False and two["other_cpu_share"] == pytest.approx(0.025, abs=1e-3)
    # a big machine: one other core is 1.6%, but beside 64 compute threads on 64 cores it oversubscribes
    big = machine_load.machine_figures([_span(64, 64.0, 63.0, threads=64)])
    assert big["other_cpu_share"] < machine_load.BUSY_SHARE and big["machine_busy"]
    assert "oversubscribes" in big["busy_note"]
    assert machine_load.machine_figures([_span(64, 33.0, 32.0, threads=32)])["machine_busy"] is False
    # a GPU run's 16 CPU threads mostly wait: one other core on a 16-core machine with cores to spare is not busy
    assert machine_load.machine_figures([_span(16, 3.0, 2.0, threads=16)])["machine_busy"] is False
    # steal: the hypervisor's neighbours
    stolen = machine_load.machine_figures([_span(4, 2.0, 2.0, steal=0.6, threads=2)])
    assert stolen["machine_busy"] and "steal" in stolen["busy_note"]


def test_ranks_on_two_machines_are_judged_apart_and_the_row_takes_the_busiest():
    samples = {m: [{"time": t, "machine_cpu_s": t * busy, "machine_all_s": t * 2, "tree_cpu_s": t * 0.9,
                    "steal_s": 0.0, "load1": 1.0 + busy, "boot_id": m, "threads": 2} for t in range(5)]
               for m, busy in (("quiet", 0.92), ("busy", 1.9))}
    fields = machine_load.summarize([(samples["quiet"], 1, 3), (samples["busy"], 1, 3)])
    assert fields["machine_busy"] is True and fields["other_cpu_share"] == pytest.approx(0.5)
    assert fields["load_avg"] == pytest.approx(2.9)
    quiet = machine_load.summarize([(samples["quiet"], 1, 3)])
    assert quiet["machine_busy"] is False
    assert machine_load.summarize([([], 1, 3)]) == machine_load.EMPTY  # nothing sampled: unknown, not quiet


def test_is_busy_reads_the_column_and_takes_empty_as_not_busy():
    frame = results.to_frame([{"machine_busy": True, "busy_note": "other processes used 50% of the 2 CPUs"},
                              {"machine_busy": False}, {}])
    rows = frame.to_dict("records")
    assert [results.is_busy(r) for r in rows] == [True, False, False]
    assert results.busy_figure(rows[0]) == "other processes used 50% of the 2 CPUs"


def test_busy_rows_are_marked_in_the_summary_the_terminal_table_and_the_charts(tmp_path):
    from rich.console import Console

    from harness.reports import aggregate, charts, terminal
    from tests.unit.reports.test_report import _row

    note = "other processes used 49% of the 2 CPUs (1.0 cores)"
    rows = [_row("allreduce", 0, machine_busy=True, other_cpu_share=0.49, busy_note=note),
            _row("allreduce", 1, machine_busy=False, other_cpu_share=0.01),
            _row("allreduce", 0, world_size=1, procs_per_node=1, run_id="s/one")]
    summary = aggregate.summarize(results.to_frame(rows))
    by_world = summary.set_index("world_size")
    assert by_world.loc[2, "busy"] == 1 and by_world.loc[2, "busy_note"] == note
    assert by_world.loc[1, "busy"] == 0
    console = Console(record=True, width=250)
    terminal.print_table(summary, console)
    text = console.export_text()
    assert f"* torch_ddp digits/small world 2: 1 of 2 repeats measured on a busy machine ({note})" in text
    assert "world 1: " not in text.split("busy machine")[0].splitlines()[-1]
    for plot in (charts.plot, charts.plot_bars):
        import matplotlib.pyplot as plt

        seen = []
        original = plt.Axes.scatter
        plt.Axes.scatter = lambda ax, *a, **k: seen.append(k.get("label")) or original(ax, *a, **k)
        try:
            assert plot(summary, tmp_path / f"{plot.__name__}.png").exists()
        finally:
            plt.Axes.scatter = original
        assert charts.BUSY_LABEL in seen  # the busy point is ringed and the ring is in the legend
