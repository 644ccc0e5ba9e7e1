"""A slow link is named by its host from the hosts' link probes (frameworks/shared/link_probe.py), which no
rank's step can tell: every rank's exchange grows alike. Synthetic records of 4 hosts x 2 ranks."""

from __future__ import annotations

import json

import pytest

from frameworks.shared import link_probe
from harness.contract.events import EventWriter, RankRecord, read_rank
from harness.results.attribution import LINK_SCORE, attribute

HOSTS, PER_HOST, STEPS = 4, 2, 6
PAIR_S = 0.03  # a pair's exchange on healthy links (s)


def _probe(slow_host: int | None, slower: float) -> dict[int, list[dict]]:
    """Each host's pairs: a pair with ``slow_host`` in it takes ``slower`` x PAIR_S (the slower end sets both)."""
    return {h: [{"peer": p, "seconds": PAIR_S * (slower if slow_host in (h, p) else 1.0) + 0.001 * p,
                 "bytes": link_probe.NBYTES} for p in range(HOSTS) if p != h] for h in range(HOSTS)}


def _run(slow_host: int | None = None, slower: float = 2.0, slow_rank: int | None = None) -> list[RankRecord]:
    """Every rank's step alike (a ring at its slowest link's pace), but for ``slow_rank``'s compute (+20%)."""
    probes, ranks = _probe(slow_host, slower), []
    for rank in range(HOSTS * PER_HOST):
        compute = 0.1 * (1.2 if rank == slow_rank else 1.0)
        record = RankRecord(rank, hello={"rank": rank, "host": f"h{rank // PER_HOST}"})
        record.step_seconds = [0.15] * STEPS
        record.ddp_timing = {"steps": [{"forward_compute_s": compute / 3, "backward_compute_s": 2 * compute / 3,
                                        "backward_comm_s": 0.15 - compute, "overlap_s": 0.0}] * STEPS}
        if rank % PER_HOST == 0:
            record.link_probe = {"host": rank // PER_HOST, "pairs": probes[rank // PER_HOST]}
        ranks.append(record)
    return ranks


@pytest.mark.parametrize("slow_host", range(HOSTS))
def test_a_host_slow_in_every_pair_is_named_with_kind_link(slow_host):
    found = attribute(_run(slow_host))
    assert found.straggler_score == pytest.approx(1.0)  # the ranks' steps say nothing
    assert (found.kind, found.host, found.slow_link.index) == ("link", f"h{slow_host}", slow_host)
    assert found.link_score == pytest.approx(2 * PAIR_S / PAIR_S, rel=0.1)  # its median pair against another's
    fields = found.row_fields()
    assert (fields["attribution_kind"], fields["attribution_host"], fields["link_host"]) == ("link", f"h{slow_host}",
                                                                                           f"h{slow_host}")
    assert fields["slowest_link_s"] > fields["median_link_s"]


def test_healthy_links_are_not_named_and_the_straggler_is():
    found = attribute(_run(None, slow_rank=5))
    assert found.link_score < LINK_SCORE and not found.link_named
    assert (found.kind, found.host, found.slowest.rank) == ("compute", "h2", 5)


def test_a_slow_link_below_the_straggler_score_leaves_the_straggler_first():
    found = attribute(_run(1, slower=1.1, slow_rank=6))
    assert not found.link_named and (found.kind, found.host) == ("compute", "h3")


def test_two_hosts_probe_one_pair_and_name_no_link():
    ranks = [r for r in _run(0) if r.rank < 2 * PER_HOST]
    for r in ranks:
        if r.link_probe:
            r.link_probe["pairs"] = r.link_probe["pairs"][:1]
    found = attribute(ranks)
    assert found.link_score is None and found.kind == "compute" and "link_score" in found.row_fields()


def test_runs_without_a_probe_have_no_link_columns():
    ranks = _run(None)
    for r in ranks:
        r.link_probe = None
    found = attribute(ranks)
    assert found.links == () and "link_host" not in found.row_fields() and found.link_table() == []


def test_the_link_table_scores_each_host_against_the_median_host():
    table = attribute(_run(2)).link_table()
    assert [row["host"] for row in table] == ["h0", "h1", "h2", "h3"]
    assert max(table, key=lambda row: row["score"])["host"] == "h2" and all(row["pairs"] == 3 for row in table)
    json.dumps(table)  # kept in attribution.json


@pytest.mark.parametrize("hosts", [2, 3, 4, 5, 8])
def test_rounds_pair_every_two_hosts_once_each_host_once_a_round(hosts):
    rounds = link_probe.rounds(hosts)
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == [(a, b) for a in range(hosts) for b in range(a + 1, hosts)]
    assert all(len({h for p in r for h in p}) == 2 * len(r) for r in rounds)


def test_the_probe_records_the_first_ranks_pairs_and_reads_back(tmp_path):
    """The probe of rank 2 of 4 hosts x 2 (host 1's first): one pair a round, timed through the exchange given."""
    met, barriers = [], []
    events = EventWriter(tmp_path, 2)
    link_probe.probe(events, 2, HOSTS * PER_HOST, HOSTS, lambda peer, n: met.append((peer, n)),
                     lambda: barriers.append(1))
    events.close()
    record = read_rank(tmp_path, 2)
    assert record.link_probe["host"] == 1 and sorted(p["peer"] for p in record.link_probe["pairs"]) == [0, 2, 3]
    assert sorted({peer for peer, _ in met}) == [0, 4, 6]  # the other hosts' first ranks
    assert len(met) == 3 * (1 + link_probe.REPEATS) and len(barriers) == HOSTS  # a barrier a round, one after


def test_a_hosts_other_ranks_only_keep_the_barriers(tmp_path):
    met, barriers = [], []
    events = EventWriter(tmp_path, 3)
    link_probe.probe(events, 3, HOSTS * PER_HOST, HOSTS, lambda peer, n: met.append(peer), lambda: barriers.append(1))
    events.close()
    assert met == [] and len(barriers) == HOSTS and read_rank(tmp_path, 3).link_probe is None
