"""`expect:` in the experiment file: its items checked like every key (FILE:LINE: KEY, a suggestion), where's key
paths and values, against folders, and the metric names held to the tables they come from."""
import re
import shutil
from pathlib import Path

import pytest

from spec_helpers import issues, load, one, write
from testbed.spec import expand_points, load_spec
from testbed.spec.expect import CHECK_METRICS, RUN_METRICS, SUMMARY_METRICS

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "tests" / "fixtures" / "report_small"

HEAD = """
name: ci
topology: {hosts: 2, link: {bw: 10mbit}}
sweep:
  topology.hosts: [1, 2]
  bw: [10mbit, 100mbit]
expect:
"""


def test_every_kind_loads_with_where_canonical_and_values_in_the_specs_form(tmp_path):
    exp = load(tmp_path, HEAD + f"""
  - {{metric: steady_samples_per_s, min: 100, where: {{topology.hosts: 2}}}}
  - {{metric: speedup, min: 1.2, max: 4, where: {{hosts: 2, bw: 100MBit}}}}
  - {{metric: checks.rtt_ms, max: 5}}
  - {{fidelity: ok}}
  - {{against: {SMALL}}}
""")
    first, second, rtt, fidelity, against = exp.expect
    assert (first.kind, first.metric, first.min, first.max) == ("metric", "steady_samples_per_s", 100.0, None)
    assert second.where == {"topology.hosts": 2, "topology.link.bw": "100mbit"}
    assert (rtt.metric, rtt.max) == ("checks.rtt_ms", 5.0)
    assert fidelity.kind == "fidelity" and fidelity.fidelity == "ok"
    assert against.kind == "against" and against.against == str(SMALL)


def test_a_relative_against_folder_is_read_from_the_files_folder(tmp_path):
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "runs.csv").write_text("run_id\n")
    exp = load_spec(write(tmp_path, HEAD + "  - {against: ref}\n", name="sub.yaml"))
    assert exp.expect[0].against == str(tmp_path / "ref")


@pytest.mark.parametrize("item, line_key, said", [
    ("{metric: steady_sample_per_s, min: 100}", "expect[0].metric", "did you mean 'steady_samples_per_s'?"),
    ("{metric: checks.rat, min: 0.9}", "expect[0].metric", "did you mean 'checks.ratio'?"),
    ("{metric: status, min: 1}", "expect[0].metric", "unknown metric 'status'"),
    ("{metric: speedup}", "expect[0]", "metric speedup needs min:, max: or both"),
    ("{max: 3}", "expect[0]", "an expectation is {metric: COLUMN"),
    ("{metric: final_loss, max: 1, fidelity: ok}", "expect[0]", "this one has metric and fidelity"),
    ("{metric: final_loss, min: 3, max: 1}", "expect[0]", "min 3 is above max 1"),
    ("{fidelity: degraded}", "expect[0].fidelity", "'degraded' is not one of ok"),
    ("{metrc: final_loss, max: 2}", "expect[0].metrc", "did you mean 'metric'?"),
    ("{metric: final_loss, max: yes}", "expect[0].max", "valid number"),
])
def test_a_bad_item_is_refused_at_its_line_and_key(tmp_path, item, line_key, said):
    issue = one(tmp_path, HEAD + f"  - {{fidelity: ok}}\n  - {item}\n".replace("expect[0]", "expect[1]"))
    assert (issue.line, issue.key) == (8, line_key.replace("expect[0]", "expect[1]"))
    assert said in issue.message and issue.file.endswith("exp.yaml")


@pytest.mark.parametrize("where, key, said", [
    ("{topology.hots: 2}", "expect[0].where.topology.hots", "unknown key 'hots' in topology; did you mean 'hosts'?"),
    ("{topology.link.bw: fast}", "expect[0].where.topology.link.bw", "'fast' is not a bandwidth"),
    ("{topology.hosts: many}", "expect[0].where.topology.hosts", "valid integer"),
    ("{sweep.repeats: 2}", "expect[0].where.sweep.repeats", "sweep is not one"),
    ("{'faults[0].at': step 3}", "expect[0].where.faults[0].at", "the file has no faults[0]"),
])
def test_a_where_key_or_value_the_file_cannot_have_is_refused(tmp_path, where, key, said):
    issue = one(tmp_path, HEAD + f"  - {{metric: final_loss, max: 2, where: {where}}}\n")
    assert (issue.line, issue.key) == (7, key) and said in issue.message


def test_a_where_no_point_has_is_refused_naming_the_values_the_points_have(tmp_path):
    found = issues(tmp_path, HEAD + """
  - {metric: final_loss, max: 2, where: {topology.hosts: 8}}
  - {metric: final_loss, max: 2, where: {hosts: 2, bw: 1gbit}}
  - {metric: final_loss, max: 2, where: {workload.strategy: ps}}
  - {metric: final_loss, max: 2, where: {workload.strategy: allreduce, bw: 10mbit}}
""")
    assert [(i.line, i.key) for i in found] == [(8, "expect[0].where"), (9, "expect[1].where"), (10, "expect[2].where")]
    assert "no run point has topology.hosts=8 (the points have topology.hosts 1, 2)" in found[0].message
    assert "topology.link.bw '10mbit', '100mbit'" in found[1].message
    assert "workload.strategy 'allreduce'" in found[2].message


def test_an_against_folder_without_runs_csv_is_refused(tmp_path):
    issue = one(tmp_path, HEAD + "  - {against: nowhere}\n")
    assert (issue.line, issue.key) == (7, "expect[0].against")
    assert f"no results folder at {tmp_path / 'nowhere'}" in issue.message


def test_set_replaces_a_where_and_a_bound(tmp_path):
    text = HEAD + "  - {metric: final_loss, max: 2, where: {hosts: 8}}\n"
    exp = load(tmp_path, text, ["expect[0].where={hosts: 1}", "expect[0].max=0.5"])
    assert exp.expect[0].where == {"topology.hosts": 1} and exp.expect[0].max == 0.5


def test_expectations_are_not_part_of_the_run_ids(tmp_path):
    """A changed bound judges the same runs again: the run ids, which a resumed sweep finds, stay."""
    without = [p.run_id for p in expand_points(load(tmp_path, HEAD.replace("expect:\n", "")))]
    with_one = [p.run_id for p in expand_points(load(tmp_path, HEAD + "  - {metric: final_loss, max: 2}\n"))]
    other = [p.run_id for p in expand_points(load(tmp_path, HEAD + "  - {metric: final_loss, max: 3}\n"))]
    assert without == with_one == other and len(set(without)) == 4


def test_the_metric_names_are_columns_of_the_tables_they_are_judged_on():
    from analysis.comparisons import expectations
    from analysis.tables import tables
    from testbed.emulation.dilation import RUN_RATE_COLUMNS, RUN_TIME_COLUMNS, wall_column
    from testbed.run import results
    written = set(results.RUNS_COLUMNS) | set(tables.STEADY_COLUMNS) | {
        wall_column(c) for c in RUN_TIME_COLUMNS + RUN_RATE_COLUMNS}
    assert set(RUN_METRICS) <= written, set(RUN_METRICS) - written
    assert not set(RUN_METRICS) & set(tables.TEXT_COLUMNS)
    assert {m.split(".", 1)[1] for m in CHECK_METRICS} <= set(results.CHECKS_COLUMNS)
    assert SUMMARY_METRICS == expectations.SUMMARY_METRICS


def test_the_experiment_file_of_the_ci_page_validates_with_its_seven_expectations(tmp_path):
    page = (REPO / "docs" / "ci.md").read_text()
    [text] = re.findall(r"```yaml\n(name: ci-regression\n.*?)```", page, re.S)
    (tmp_path / "ci").mkdir()
    (tmp_path / "results" / "reference").mkdir(parents=True)
    shutil.copytree(SMALL, tmp_path / "results" / "reference" / "ci_regression")
    exp = load_spec(write(tmp_path / "ci", text, name="regression.yaml"))
    assert [e.kind for e in exp.expect] == ["metric"] * 5 + ["fidelity", "against"]
    assert exp.expect[-1].against == str(tmp_path / "results" / "reference" / "ci_regression")
    assert len(expand_points(exp)) == 12
