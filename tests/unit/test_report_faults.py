"""Report of runs with faults, from committed tables (tests/fixtures/report_faults: a 3 s link down,
a killed worker restarted from its backup, a 2 s pause of h2 then 1 Mbit/s on h1's link for 2 s)."""
import shutil
from pathlib import Path

import pandas as pd
import pytest

from analysis import report
from analysis.figures import figures
from analysis.tables import tables

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "report_faults"


@pytest.fixture
def exp(tmp_path):
    dst = tmp_path / "faults"
    shutil.copytree(FIXTURE, dst)
    return tables.load_experiment(dst)


def test_timeline_draws_every_task_per_run_with_restarts_apart(exp):
    path, plotted = figures.timeline(exp, exp.path / "figures")
    assert path.is_file() and path.stat().st_size > 15_000
    assert plotted["run_id"].nunique() == 3
    kill = plotted[plotted["run_id"].str.startswith("kill")]
    assert set(kill["attempt"]) == {0, 1}, "the steps after the restart are a line of their own"
    resumed = kill[kill["attempt"] == 1].groupby("task_index")["step"].min()
    assert (resumed > 1).all(), "after the restart the steps go on from the backup"


def test_timeline_skipped_without_faults(tmp_path):
    shutil.copytree(FIXTURE.parent / "report_small", tmp_path / "small")
    with pytest.raises(figures.FigureSkipped):
        figures.timeline(tables.load_experiment(tmp_path / "small"), tmp_path)


def test_fault_costs_and_windows(exp):
    costs = tables.fault_costs(exp.faults, exp.runs).set_index(["action"])
    assert costs.loc["kill", "restarts"] == 1 and costs.loc["kill", "steps_replayed"] == 3
    assert costs.loc["kill", "time_lost_s"] == costs.loc["kill", "extra_s"]
    windows = tables.fault_windows(exp.faults, exp.steps)
    assert "kill" not in set(windows["action"]), "a kill has no window, its cost is the restart"
    for action in ("link_down", "pause", "set_bw"):
        rows = windows[windows["action"] == action]
        assert len(rows) == 2 and (rows["slowdown"] > 1.5).all(), action     # both workers wait


def test_report_states_each_faults_cost(exp, monkeypatch):
    monkeypatch.setattr(figures, "FIGURES", {"timeline": figures.FIGURES["timeline"]})
    html = report.build_report(exp.path).read_text()
    assert "figures/timeline.png" in html
    assert "Fault #1 (kill worker 1 at step 10, run kill-r0-212505) hit after step 11" in html
    assert "3 step(s) replayed" in html and "restarted 1 time(s) from its last backup" in html
    assert "everyone waits for the slowest" in html
    table = pd.read_csv(exp.path / "tables" / "faults.csv")
    assert list(table["action"]) == ["link_down", "kill", "pause", "set_bw"]


def test_timeline_draws_a_traced_links_rate_under_the_steps(tmp_path):
    """tests/fixtures/report_traces: two workers whose links went 50 -> 5 -> 50 Mbit/s (a real run of
    tests/integration/test_trace_run.py); no faults."""
    shutil.copytree(FIXTURE.parent / "report_traces", tmp_path / "traces")
    exp = tables.load_experiment(tmp_path / "traces")
    assert list(exp.link_changes["bw_bps"].unique()) == [50_000_000, 5_000_000]
    path, plotted = figures.timeline(exp, tmp_path / "figures")
    assert path.is_file() and path.stat().st_size > 15_000
    assert set(plotted["task_index"]) == {0, 1}
