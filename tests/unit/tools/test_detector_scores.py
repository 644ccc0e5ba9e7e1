"""The detector benchmarks' score table (benchmarks/planted_cluster.py) from hand-made verdicts: recall per
planted kind, fault-free runs called clean, precision per class blamed with the clean runs' false calls."""

from benchmarks.planted_cluster import Call, score_table


def test_recall_precision_and_false_positives_are_counted_over_clean_and_faulty_runs():
    calls = [Call("slow_gpu", "compute", "compute", True), Call("slow_gpu", "compute", "compute", False),
             Call("slow_gpu", "compute", None, False), Call("slow_gpu", "compute", "host", True),
             Call("slow_nic", "link", None, False), Call("slow_nic", "link", "link", True),
             Call(None, None, None, False), Call(None, None, None, False), Call(None, None, "compute", False)]
    table = "\n".join(score_table(calls))
    # 2 of 4 slow GPUs named at their rank (one with the wrong kind), 1 with the right kind too
    assert "| slow_gpu | 4 | 50% (2/4) | 25% (1/4) |" in table
    assert "| slow_nic | 2 | 50% (1/2) | 50% (1/2) |" in table
    assert "| none (fault-free) | 3 | called clean 67% (2/3) | false positives 33% (1/3) |" in table
    # compute was blamed 3 times: once right, once at the wrong rank, once on a fault-free run
    assert "| compute | 3 | 33% (1/3) | 1 |" in table
    assert "| host | 1 | 0% (0/1) | 0 |" in table and "| link | 1 | 100% (1/1) | 0 |" in table


def test_without_fault_free_runs_no_clean_line_is_made_up():
    table = score_table([Call("cpu_hog", "host", "host", True)])
    assert not any(line.startswith("| none") for line in table)
    assert "| host | 1 | 100% (1/1) | 0 |" in table
