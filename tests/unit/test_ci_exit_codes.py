"""The exit codes CI reads: `run` exits 101 when every point ran and an expectation failed."""
from analysis.expectations import FAIL, NOT_JUDGED, PASS, Outcome
from testbed.cli.run import exit_code


def test_run_exits_101_only_when_every_point_ran_and_an_expectation_failed():
    fail = Outcome(0, "a", "final_loss <= 1", 2.0, "<= 1", FAIL)
    unjudged = Outcome(0, "b", "final_loss <= 1", None, "<= 1", NOT_JUDGED, "the point failed: x")
    passed = Outcome(1, "a", "fidelity ok", "ok", "ok", PASS)
    assert exit_code(0, False, [passed, unjudged]) == 0
    assert exit_code(0, False, [passed, fail]) == 101
    assert exit_code(3, False, [fail]) == 3 and exit_code(250, False, []) == 100
    assert exit_code(0, True, [fail]) == 130
