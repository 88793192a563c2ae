"""The exit codes CI reads: `run` exits 101 when every point ran and an expectation failed, and `report --compare
--fail-on-regression` (or --fail-on-change) exits 101 when a configuration differs from the reference beyond
the spread, naming it."""
import argparse

from analysis.comparisons.expectations import FAIL, NOT_JUDGED, PASS, Outcome
from test_reference import _copy, _five_slower_repeats, _slower_two_nodes
from testbed.cli.results import report as report_cli
from testbed.cli.run import exit_code


def test_run_exits_101_only_when_every_point_ran_and_an_expectation_failed():
    fail = Outcome(0, "a", "final_loss <= 1", 2.0, "<= 1", FAIL)
    unjudged = Outcome(0, "b", "final_loss <= 1", None, "<= 1", NOT_JUDGED, "the point failed: x")
    passed = Outcome(1, "a", "fidelity ok", "ok", "ok", PASS)
    assert exit_code(0, False, [passed, unjudged]) == 0
    assert exit_code(0, False, [passed, fail]) == 101
    assert exit_code(3, False, [fail]) == 3 and exit_code(250, False, []) == 100
    assert exit_code(0, True, [fail]) == 130


def _args(folder, ref, **flags):
    return argparse.Namespace(**{"dir": folder, "compare": ref, "include_degraded": False, "fail_on_regression": False,
                                 "fail_on_change": False, **flags})


def test_report_fail_on_regression_names_the_slower_configuration(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(report_cli, "draw", lambda folder, **kw: folder / "report.html")   # the figures: elsewhere
    ref, slow = _copy(tmp_path, "ref"), _copy(tmp_path, "slow", _five_slower_repeats)
    assert report_cli.main([str(slow), "--compare", str(ref), "--fail-on-regression"]) == 101
    said = capsys.readouterr().out
    assert "slower than the reference beyond the spread: 10 Mbit/s, allreduce, 2 nodes:" in said
    assert "(yours / reference 0.5" in said and "5 runs against 2" in said
    same = _copy(tmp_path, "same")
    assert report_cli.run(_args(same, ref, fail_on_regression=True)) == 0
    assert "no configuration is slower than the reference beyond the spread" in capsys.readouterr().out


def test_fail_on_change_fails_a_faster_configuration_too(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(report_cli, "draw", lambda folder, **kw: folder / "report.html")
    ref, slow = _copy(tmp_path, "ref"), _copy(tmp_path, "slow", _five_slower_repeats)
    # the slow folder as the reference: the normal one is faster beyond the spread
    assert report_cli.run(_args(ref, slow, fail_on_regression=True)) == 0
    assert report_cli.run(_args(ref, slow, fail_on_change=True)) == 101
    assert "faster than the reference beyond the spread: 10 Mbit/s, allreduce, 2 nodes" in capsys.readouterr().out


def test_too_few_repeats_to_judge_is_said_and_does_not_fail(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(report_cli, "draw", lambda folder, **kw: folder / "report.html")
    ref, mine = _copy(tmp_path, "ref"), _copy(tmp_path, "mine", _slower_two_nodes)
    assert report_cli.run(_args(mine, ref, fail_on_regression=True)) == 0
    assert "not judged: 10 Mbit/s, allreduce, 2 nodes: the ranges lie apart" in capsys.readouterr().out


def test_fail_on_regression_without_compare_is_a_usage_error(tmp_path, capsys):
    assert report_cli.main([str(tmp_path), "--fail-on-regression"]) == 2
    assert "add --compare REFERENCE" in capsys.readouterr().err


def test_the_test_commands_clean_up_trap_keeps_the_suites_exit_status():
    """`./testbed.sh test` ends with the tests' status: its EXIT trap (which stops the image builds if
    they still run) must not turn a passing suite into exit 1 when the builds are already over."""
    import re
    import subprocess
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "testbed.sh").read_text()
    trap = re.search(r"^\s*(trap .* EXIT)", text, flags=re.M).group(1)
    for status in (0, 3):
        for beside in ("999998", '""'):          # the unit tests beside started, or not yet
            script = f'set -euo pipefail\nprebuild=999999\nbeside={beside}\nlane=$(mktemp -d)\n{trap}\nexit {status}\n'
            assert subprocess.run(["bash", "-c", script]).returncode == status
