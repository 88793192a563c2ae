"""`run --junit FILE`: the JUnit XML of a run's points and expectations, valid against the format's schema
(tests/fixtures/junit.xsd) as CI systems read it, and carrying what a reader needs."""
import datetime as dt
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from analysis.comparisons import junit
from analysis.comparisons.expectations import FAIL, NOT_JUDGED, PASS, Outcome
from testbed.run.sweep import expect_run

REPO = Path(__file__).resolve().parents[2]
XSD = REPO / "tests" / "fixtures" / "junit.xsd"
SMALL = REPO / "tests" / "fixtures" / "report_small"

POINTS = [dict(run_id="h2-bw10mbit-r0-aaaaaa", status="ok", reason=None, wall_time_s=12.3456),
          dict(run_id="h4-bw10mbit-r0-bbbbbb", status="failed", reason="worker 1 exited <1> & \x1b[31mred\x1b[0m",
               wall_time_s=float("nan")),
          dict(run_id="h4-bw10mbit-r1-cccccc", status=None, reason=None, wall_time_s=None)]
OUTCOMES = [Outcome(0, "h2-bw10mbit-r0-aaaaaa", "steady_samples_per_s >= 100", 150.25, ">= 100", PASS),
            Outcome(0, "h4-bw10mbit-r0-bbbbbb", "steady_samples_per_s >= 100", None, ">= 100", NOT_JUDGED,
                    "the point failed: worker 1 exited"),
            Outcome(1, "allreduce, 2 nodes, 10mbit", "speedup >= 1.5 where topology.hosts=2", 0.8123, ">= 1.5", FAIL,
                    "2 run(s)")]


def document() -> str:
    return junit.junit_xml("ci-demo", POINTS, OUTCOMES, "2030-01-02T03:04:05", "buildhost")


def validator():
    """A function (schema, file) -> None | error text: lxml's XSD validator (requirements.txt)."""
    from lxml import etree

    def check(xsd, xml):
        schema = etree.XMLSchema(etree.parse(str(xsd)))
        return None if schema.validate(etree.parse(str(xml))) else str(schema.error_log.last_error)
    return check


def test_the_file_is_valid_against_the_junit_schema_and_the_schema_refuses_what_it_should(tmp_path):
    check = validator()
    good = tmp_path / "junit.xml"
    good.write_text(document())
    bad = tmp_path / "bad.xml"      # the same without a testcase's required time: the validator is no rubber stamp
    bad.write_text(document().replace('classname="ci-demo.points" time="12.346"', 'classname="ci-demo.points"'))
    assert 'time="12.346"' in document()
    assert check(XSD, good) is None
    assert "time" in (check(XSD, bad) or "")


def test_points_and_expectations_are_testcases_with_their_outcomes():
    root = ET.fromstring(document())
    points, expected = root.findall("testsuite")
    assert (points.get("name"), points.get("tests"), points.get("failures"), points.get("skipped")) == \
        ("ci-demo.points", "3", "1", "1")
    ok, failed, not_run = points.findall("testcase")
    assert (ok.get("name"), ok.get("time"), list(ok)) == ("h2-bw10mbit-r0-aaaaaa", "12.346", [])
    failure = failed.find("failure")
    assert failure.get("message") == "worker 1 exited <1> & [31mred[0m" == failure.text     # no control characters
    assert failed.get("time") == "0" and not_run.find("skipped") is not None
    assert (expected.get("tests"), expected.get("failures"), expected.get("skipped")) == ("3", "1", "1")
    passed, unjudged, fail = expected.findall("testcase")
    assert passed.get("name") == "steady_samples_per_s >= 100 [h2-bw10mbit-r0-aaaaaa]" and list(passed) == []
    assert unjudged.find("skipped").get("message") == "not judged: the point failed: worker 1 exited"
    message = fail.find("failure").get("message")
    assert message == ("speedup >= 1.5 where topology.hosts=2 [allreduce, 2 nodes, 10mbit]: measured 0.8123, "
                       "bound >= 1.5 (2 run(s))")
    assert fail.get("classname") == "ci-demo.expectations"


def test_write_junit_reads_the_points_from_runs_csv(tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(SMALL, folder)
    runs = pd.read_csv(folder / "runs.csv")
    ids = list(runs["run_id"]) + ["h8-never-ran"]

    class Exp:
        name = "report-small"

        def location(self, key):
            return ("topologies/small.yaml", 1)
    out = tmp_path / "junit.xml"
    expect_run.write_junit(out, Exp(), ids, folder, [], dt.datetime(2030, 1, 2, 3, 4, 5))
    suite = ET.parse(out).getroot().find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert len(cases) == len(runs) + 1 and suite.get("tests") == str(len(runs) + 1)
    failed = runs[runs["status"] == "failed"].iloc[0]
    assert cases[failed["run_id"]].find("failure").text == failed["reason"]
    assert float(cases[failed["run_id"]].get("time")) == pytest.approx(failed["wall_time_s"], abs=1e-3)
    assert cases["h8-never-ran"].find("skipped") is not None
    assert suite.get("timestamp") == "2030-01-02T03:04:05"
