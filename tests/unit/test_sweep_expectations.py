"""Expectations in a sweep, without a network: `run FILE --junit` on a sweep whose points are recorded by a
stand-in for the runner. After each point its per-point expectations are written to expectations.csv and said,
after the sweep every one (the summary's too), then the table, the JUnit file and the exit code."""
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pandas as pd
import pytest

from testbed.cli import common, run as run_command
from testbed.run import results
from sweep_stand_in import stand_in_sweep

FILE = """
name: ci-sweep
topology: {hosts: 1, link: {bw: 10mbit}}
sweep:
  topology.hosts: [1, 2]
  repeats: 2
expect:
  - {metric: steady_samples_per_s, min: 100, where: {topology.hosts: 2}}
  - {metric: speedup, min: 1.2, where: {hosts: 2}}
  - {fidelity: ok}
"""


@pytest.fixture
def stand_in(monkeypatch):
    """The sweep with every point 'run' by writing its runs.csv row: 1 node 100 samples/s, 2 nodes `rates`."""
    state = SimpleNamespace(rates=[120.0, 130.0], failed=set(), csv_after=[])

    def run_point(resolved, exp_dir, progress=lambda msg: None):
        hosts = resolved.spec.topology.hosts
        rate = 100.0 if hosts == 1 else state.rates[resolved.repeat]
        failed = resolved.run_id in state.failed or (hosts == 2 and resolved.repeat in state.failed)
        row = dict(experiment="ci-sweep", run_id=resolved.run_id, repeat=resolved.repeat, hosts=hosts,
                   bw_bps=10_000_000, bw="10mbit", strategy="single" if hosts == 1 else "allreduce",
                   engine="tensorflow", model="mlp", global_batch=32 * hosts, workers=hosts,
                   status="failed" if failed else "ok", reason="worker 1 exited with 1" if failed else "",
                   wall_time_s=3.5, training_time_s=2.0, time_per_step_s=0.3, steps=40, fixed="data",
                   samples_per_step=32 * hosts, steady="ok", steady_samples_per_s=rate, steady_step_s=32 * hosts / rate,
                   warmup_s=0.2, fidelity="ok")
        results.replace_run_rows(exp_dir, "runs", resolved.run_id, [row])
        path = exp_dir / "expectations.csv"
        state.csv_after.append(len(pd.read_csv(path)) if path.exists() else 0)
        return row

    stand_in_sweep(monkeypatch, run_point)
    return state


def _run(tmp_path, text=FILE):
    spec = tmp_path / "ci.yaml"
    spec.write_text(text)
    out = tmp_path / "out"
    code = common.main_of(run_command.COMMAND, [str(spec), "--out", str(out), "--no-report", "--junit",
                                                str(tmp_path / "junit.xml")])
    return code, out, pd.read_csv(out / "expectations.csv")


def test_all_expectations_pass_and_run_exits_0(tmp_path, stand_in, capsys):
    code, out, table = _run(tmp_path)
    assert code == 0
    assert stand_in.csv_after == [0, 1, 2, 4]      # written after each point: its rows and those before it
    assert set(table["outcome"]) == {"pass"}
    assert list(table["expectation"]).count("steady_samples_per_s >= 100 where topology.hosts=2") == 2
    [speedup] = table[table["expectation"] == "speedup >= 1.2 where topology.hosts=2"].itertuples()
    assert speedup.point == "allreduce, 2 nodes, 10mbit" and float(speedup.measured) == pytest.approx(125 / 100)
    said = " ".join(capsys.readouterr().err.split())
    assert "expect: 2 pass" in said and "Expectations" in said and "7 pass, 0 fail, 0 not judged" in said


def test_a_failed_expectation_exits_101_and_is_a_junit_failure(tmp_path, stand_in, capsys):
    stand_in.rates = [90.0, 160.0]
    code, out, table = _run(tmp_path)
    assert code == 101
    [slow] = table[table["outcome"] == "fail"].itertuples()
    assert float(slow.measured) == 90.0 and slow.point.startswith("h2-")
    said = " ".join(capsys.readouterr().err.split())
    assert "expect: 1 pass, 1 fail (steady_samples_per_s >= 100 where topology.hosts=2: 90)" in said
    suites = ET.parse(tmp_path / "junit.xml").getroot().findall("testsuite")
    assert [s.get("tests") for s in suites] == ["4", "7"] and [s.get("failures") for s in suites] == ["0", "1"]
    failure = suites[1].find("testcase/failure")
    assert "measured 90, bound >= 100" in failure.get("message") and slow.point in failure.get("message")


def test_a_failed_point_exits_with_the_count_and_its_expectations_are_not_judged(tmp_path, stand_in):
    stand_in.failed = {1}                              # the 2-node point's second repeat
    code, out, table = _run(tmp_path)
    assert code == 1
    unjudged = table[table["outcome"] == "not judged"]
    assert set(unjudged["detail"]) == {"the point failed: worker 1 exited with 1"} and len(unjudged) == 2
    cases = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite").findall("testcase")
    assert sum(c.find("failure") is not None for c in cases) == 1


def test_a_resumed_run_judges_the_recorded_points_again_with_the_files_bounds(tmp_path, stand_in):
    assert _run(tmp_path)[0] == 0
    stand_in.csv_after.clear()
    code, out, table = _run(tmp_path, FILE.replace("min: 100", "min: 125"))
    assert code == 101 and stand_in.csv_after == []          # nothing ran again: expect is not in the run ids
    assert len(table[table["outcome"] == "fail"]) == 1
