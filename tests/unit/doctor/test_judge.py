"""The doctor's judgement and bisection on synthetic measurements (harness/doctor/judge.py): no process starts."""

import pytest

from harness.doctor import judge
from harness.doctor.judge import FLOORS, Measurement, Probe, Reference


def egress(*rates, names="abcd"):
    return [Measurement(Probe.EGRESS, name, rate) for name, rate in zip(names, rates)]


def test_a_quarter_rate_card_is_named_against_the_median_of_this_check():
    verdicts = judge.judge(egress(1.0, 1.02, 0.25, 0.98))
    [worst] = judge.findings(verdicts)
    assert (worst.measurement.subject, worst.reference) == ("c", Reference.MEDIAN)
    assert worst.slowdown == pytest.approx(1.0 / 0.25)  # the others' median
    assert "0.25 GB/s against 1 GB/s (median): 4.00x worse" in worst.evidence()


def test_two_hosts_the_slow_one_is_named_against_the_other_and_the_fast_one_not():
    verdicts = judge.judge(egress(1.0, 0.25))
    assert [(v.measurement.subject, v.slowdown) for v in verdicts if v.bad] == [("b", 4.0)]


def test_of_two_gpus_one_20_percent_slow_is_named():
    """Against the two's mean it would be 1.09x, under compute's floor: the other one is the reference."""
    found = [Measurement(Probe.COMPUTE, g, s) for g, s in (("h0/gpu0", 0.100), ("h1/gpu0", 0.120))]
    assert [v.measurement.subject for v in judge.findings(judge.judge(found))] == ["h1/gpu0"]


def test_a_latency_is_worse_when_it_is_larger():
    found = [Measurement(Probe.ARRIVAL, h, us) for h, us in zip("abc", (50.0, 55.0, 400.0))]
    assert [v.measurement.subject for v in judge.findings(judge.judge(found))] == ["c"]


def test_a_gpu_20_percent_slow_among_16_is_named_and_only_it():
    steps = [0.100 + 0.001 * (i % 3) for i in range(16)]
    steps[11] = 0.120
    found = [Measurement(Probe.COMPUTE, f"h{i // 4}/gpu{i % 4}", s) for i, s in enumerate(steps)]
    assert [v.measurement.subject for v in judge.findings(judge.judge(found))] == ["h2/gpu3"]


def test_a_baseline_in_the_store_is_used_before_the_median():
    """Every host at half of what this machine type gave before: the median sees nothing, the baseline all."""
    found = egress(0.5, 0.5, 0.5)
    assert judge.findings(judge.judge(found)) == []
    verdicts = judge.judge(found, {Probe.EGRESS: [1.0, 1.01, 0.99]})
    assert all(v.bad and v.reference == Reference.BASELINE and v.expected == 1.0 for v in verdicts)


def test_a_noisy_baseline_asks_for_more_than_the_floor():
    quiet = judge.judge(egress(0.7), {Probe.EGRESS: [1.0, 1.0, 1.0]})[0]
    noisy = judge.judge(egress(0.7), {Probe.EGRESS: [0.6, 1.0, 1.4]})[0]
    assert quiet.tolerance == FLOORS[Probe.EGRESS] and quiet.bad
    assert noisy.tolerance == pytest.approx(3 * 0.4) and not noisy.bad


def test_a_baseline_of_one_figure_is_no_baseline_and_a_lone_figure_is_unjudged():
    [lone] = judge.judge(egress(0.1), {Probe.EGRESS: [1.0]})
    assert (lone.reference, lone.bad, lone.expected) == (Reference.NONE, False, None)


def test_findings_are_worst_first():
    found = egress(1.0, 0.5, 0.2, 1.0)
    assert [v.measurement.subject for v in judge.findings(judge.judge(found))] == ["c", "b"]


def test_findings_of_unlike_probes_are_ranked_by_how_far_beyond_their_threshold():
    """As measured on 4 namespace hosts at load 25: a half-rate card (2.02x) beside a latency's noise (here 5.9x,
    just beyond its floor): the card comes first."""
    found = egress(0.52, 1.05, 1.05, 1.05) + [Measurement(Probe.ARRIVAL, h, us)
                                             for h, us in zip("abcd", (13.1, 11.8, 70.0, 10.8))]
    ranked = judge.findings(judge.judge(found))
    assert [(v.measurement.probe, v.measurement.subject) for v in ranked] == [(Probe.EGRESS, "a"), (Probe.ARRIVAL, "c")]
    assert judge.margin(ranked[0]) > judge.margin(ranked[1]) > 1


def rings(slow: set[str], rate=1.0, slow_rate=0.3):
    """A ring's bus bandwidth over hosts: capped by the slowest card in it."""
    measured = []

    def ring(group):
        measured.append(group)
        return slow_rate if slow & set(group) else rate
    return ring, measured


def test_bisection_halves_down_to_the_pair_holding_the_slow_host():
    hosts = [f"h{i}" for i in range(8)]
    ring, measured = rings({"h5"})
    found = judge.bisect(hosts, ring)
    assert found.suspects == ("h4", "h5") and not found.between_halves
    assert [s.slower for s in found.steps] == [1, 0]
    assert measured == [("h0", "h1", "h2", "h3"), ("h4", "h5", "h6", "h7"), ("h4", "h5"), ("h6", "h7")]


def test_bisection_says_the_halves_pass_alone_when_neither_is_slower():
    """aicr#2693's case: each half is fine alone, the whole is slow (the link between them)."""
    found = judge.bisect(["a", "b", "c", "d"], lambda group: 1.0)
    assert found.between_halves and found.suspects == ("a", "b", "c", "d") and found.steps[0].slower is None


def test_bisection_of_fewer_than_4_hosts_measures_nothing():
    ring, measured = rings({"b"})
    assert judge.bisect(["a", "b", "c"], ring).suspects == ("a", "b", "c") and measured == []


def test_bisection_with_5_hosts_keeps_the_slow_three():
    ring, _ = rings({"e"})
    assert judge.bisect(list("abcde"), ring).suspects == ("c", "d", "e")
