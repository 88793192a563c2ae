"""Expectations judged on stored tables (analysis/comparisons/expectations.py): per point, per configuration of the
summary, against a stored folder by the spread rule; pass, fail and not judged with the reason; `where`."""
import math

import pandas as pd
import pytest

from analysis.comparisons import expectations as ex
from analysis.tables import speedup, tables
from analysis.comparisons.expectations import FAIL, NOT_JUDGED, PASS
from test_reference import RATE, _copy, _five_slower_repeats, _slower_two_nodes

NAN = math.nan
RUNS = pd.DataFrame([
    dict(run_id="a", status="ok", reason=NAN, steady_samples_per_s=150.0, steady="ok", final_loss=1.0, fidelity="ok"),
    dict(run_id="b", status="ok", reason=NAN, steady_samples_per_s=80.0, steady="ok", final_loss=2.5,
         fidelity="degraded: the timers were late"),
    dict(run_id="c", status="ok", reason=NAN, steady_samples_per_s=NAN, steady="too few steady steps to judge: 6",
         final_loss=NAN, fidelity=NAN),
    dict(run_id="d", status="failed", reason="worker 1 exited with 1", steady_samples_per_s=NAN, steady=NAN,
         final_loss=NAN, fidelity=NAN),
])
POINTS = {"a": {"topology.hosts": 2}, **{p: {"topology.hosts": 4} for p in "bcd"}}
CHECKS = pd.DataFrame([
    dict(run_id="a", tool="iperf3", ratio=0.95, rtt_ms=NAN), dict(run_id="a", tool="iperf3", ratio=0.85, rtt_ms=NAN),
    dict(run_id="a", tool="ping", ratio=NAN, rtt_ms=0.3), dict(run_id="b", tool="iperf3", ratio=0.97, rtt_ms=NAN),
    dict(run_id="b", tool="ping", ratio=NAN, rtt_ms=7.5)])


def metric(name, low=None, high=None, **where):
    return {"metric": name, "min": low, "max": high, "where": {k.replace("_", "."): v for k, v in where.items()}}


def judged(expectation, runs=RUNS, checks=CHECKS):
    return {o.point: o for o in ex.point_outcomes([expectation], runs, checks, POINTS)}


def test_a_runs_column_passes_fails_or_is_not_judged_with_the_reason():
    got = judged(metric("steady_samples_per_s", 100))
    assert [(p, o.outcome, o.measured) for p, o in got.items()] == [
        ("a", PASS, 150.0), ("b", FAIL, 80.0), ("c", NOT_JUDGED, None), ("d", NOT_JUDGED, None)]
    assert got["c"].detail == "no steady figure: too few steady steps to judge: 6"
    assert got["d"].detail == "the point failed: worker 1 exited with 1"
    assert got["b"].expectation == "steady_samples_per_s >= 100" and got["b"].bound == ">= 100"


def test_bounds_include_their_ends_and_both_can_be_given():
    assert judged(metric("final_loss", high=2.5))["b"].outcome == PASS
    both = judged(metric("final_loss", 1.5, 3))
    assert (both["a"].outcome, both["b"].outcome) == (FAIL, PASS)
    assert both["a"].expectation == "final_loss between 1.5 and 3"


def test_where_keeps_the_points_with_those_values():
    got = judged(metric("steady_samples_per_s", 100, topology_hosts=4))
    assert set(got) == {"b", "c", "d"}
    assert got["b"].expectation == "steady_samples_per_s >= 100 where topology.hosts=4"
    assert judged(metric("final_loss", high=9, topology_hosts=8)) == {}


def test_fidelity_ok_passes_degraded_fails_and_none_is_not_judged():
    got = judged({"fidelity": "ok", "where": {}})
    assert (got["a"].outcome, got["b"].outcome, got["c"].outcome) == (PASS, FAIL, NOT_JUDGED)
    assert got["b"].measured == "degraded: the timers were late"


def test_a_checks_column_counts_its_worst_pair():
    ratio = judged(metric("checks.ratio", 0.9))
    assert (ratio["a"].outcome, ratio["a"].measured, ratio["a"].detail) == (FAIL, 0.85, "the lowest of 2 pairs")
    assert (ratio["b"].outcome, ratio["b"].measured) == (PASS, 0.97)
    assert ratio["c"].outcome == NOT_JUDGED and ratio["c"].detail == "no check of this point measured ratio"
    rtt = judged(metric("checks.rtt_ms", high=5))
    assert (rtt["a"].outcome, rtt["a"].measured, rtt["a"].detail) == (PASS, 0.3, "the highest of 1 pair")
    assert (rtt["b"].outcome, rtt["b"].measured) == (FAIL, 7.5)


def test_expectations_of_the_summary_are_judged_per_configuration(tmp_path):
    folder = _copy(tmp_path, "mine")
    exp = tables.load_experiment(folder)
    points = {r.run_id: {"topology.hosts": int(r.hosts)} for r in exp.runs.itertuples()}
    table = speedup.summary(tables.counted_runs(exp))
    at_four = table[table["hosts"] == 4]
    bar = float(at_four["speedup"].median())
    got = ex.summary_outcomes([metric("speedup", bar, topology_hosts=4)], tables.counted_runs(exp), points)
    assert len(got) == len(at_four) == 5
    for o, row in zip(got, at_four.itertuples()):
        assert o.point == ex.label(row._asdict(), 1) and o.measured == pytest.approx(row.speedup)
        assert o.outcome == (PASS if row.speedup >= bar else FAIL)
    assert {o.outcome for o in got} == {PASS, FAIL}


def test_a_summary_figure_that_is_not_there_is_not_judged_with_the_summarys_reason(tmp_path):
    def unsteady_one_node(runs):
        one = (runs["hosts"] == 1) & (runs["bw_bps"] == 10_000_000)
        runs.loc[one, RATE] = NAN
        runs.loc[one, "steady"] = "too few steady steps to judge: 6 after a 1-step warm-up"
        return runs
    exp = tables.load_experiment(_copy(tmp_path, "mine", unsteady_one_node))
    points = {r.run_id: {"topology.link.bw": r.bw} for r in exp.runs.itertuples()}
    got = ex.summary_outcomes([metric("speedup", 1, topology_link_bw="10mbit")], tables.counted_runs(exp), points)
    two = next(o for o in got if o.point == "allreduce, 2 nodes, 10mbit")
    assert two.outcome == NOT_JUDGED and "one node (allreduce) not judged: too few steady steps" in two.detail
    nothing = ex.summary_outcomes([metric("speedup", 1, topology_link_bw="5mbit")], tables.counted_runs(exp), points)
    assert [(o.point, o.outcome) for o in nothing] == [("", NOT_JUDGED)]


def _against(tmp_path, change, where=None):
    ref = _copy(tmp_path, "ref")
    mine = tables.load_experiment(_copy(tmp_path, "mine", change))
    points = {r.run_id: {"topology.hosts": int(r.hosts)} for r in mine.runs.itertuples()}
    return ex.against_outcomes([{"against": str(ref), "where": where or {}}], mine, points)


def test_against_a_stored_folder_fails_a_configuration_slower_beyond_the_spread(tmp_path):
    got = {o.point: o for o in _against(tmp_path, _five_slower_repeats)}
    slow = got["allreduce, 2 nodes, 10mbit"]
    assert slow.outcome == FAIL and slow.detail.startswith("lower beyond the spread: yours")
    assert "over 5 run(s)" in slow.detail and "over 2 run(s)" in slow.detail
    assert {o.outcome for p, o in got.items() if p != slow.point} == {PASS}
    assert slow.expectation.startswith("not slower than ") and slow.bound == "not lower beyond the spread"


def test_against_with_too_few_repeats_is_not_judged_never_passed(tmp_path):
    got = {o.point: o for o in _against(tmp_path, _slower_two_nodes, {"topology.hosts": 2})}
    assert set(got) == {"allreduce, 2 nodes, 10mbit", "allreduce, 2 nodes, 100mbit", "allreduce, 2 nodes, 1000mbit"}
    few = got["allreduce, 2 nodes, 10mbit"]
    assert few.outcome == NOT_JUDGED and few.detail.startswith("apart, but too few repeats to judge")


def test_against_a_folder_that_is_gone_is_not_judged(tmp_path):
    mine = tables.load_experiment(_copy(tmp_path, "mine"))
    [o] = ex.against_outcomes([{"against": str(tmp_path / "gone"), "where": {}}], mine, {})
    assert o.outcome == NOT_JUDGED and "cannot read it" in o.detail and "gone" in o.detail


def test_evaluate_judges_only_the_files_points_and_says_when_none_matches(tmp_path):
    exp = tables.load_experiment(_copy(tmp_path, "mine"))
    ids = list(exp.runs["run_id"][exp.runs["hosts"] == 2])
    points = {i: {"topology.hosts": 2} for i in ids}
    asked = [metric("final_loss", high=100), metric("final_loss", high=100, topology_hosts=4),
             {"fidelity": "ok", "where": {}}]
    got = ex.evaluate(asked, exp, points)
    first = [o for o in got if o.index == 0]
    assert sorted(o.point for o in first) == sorted(ids) and {o.outcome for o in first} == {PASS}
    assert [(o.index, o.point, o.outcome, o.detail) for o in got if o.index == 1] == [
        (1, "", NOT_JUDGED, "no recorded run point matches")]
    table = ex.frame(got)
    assert list(table.columns) == ["point", "expectation", "measured", "bound", "outcome", "detail"]
    assert len(table) == len(got) == 2 * len(ids) + 1
