"""topologies/smoke.yaml with expectations, on real Mininet, OVS, tc and TensorFlow: one that holds (the
iperf3 check's ratio) and one that cannot (a cross-entropy loss of at most 0). run exits
101, expectations.csv says pass and fail with the measured values, and the JUnit file is valid against the
JUnit schema (tests/fixtures/junit.xsd, lxml) with one failure, the expectation's."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from lxml import etree

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

EXPECT = ("expect=[{metric: checks.ratio, min: 0.5}, "
          "{metric: final_loss, max: 0}]")


def test_smoke_with_one_expectation_that_holds_and_one_that_fails(tmp_path, root, no_leftovers):
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", "topologies/smoke.yaml",
                           "--preset", "smoke", "--out", str(out), "--junit", str(junit), "--set", EXPECT],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 101, proc.stdout[-2000:] + proc.stderr[-2000:]
    runs = pd.read_csv(out / "runs.csv")
    assert list(runs["status"]) == ["ok"], runs["reason"].tolist()

    judged = pd.read_csv(out / "expectations.csv")
    print(judged[["expectation", "measured", "bound", "outcome"]].to_string())
    ratio = judged[judged["expectation"].str.contains("checks.ratio")]
    loss = judged[judged["expectation"].str.contains("final_loss")]
    assert len(ratio) == 1 and ratio["outcome"].iloc[0] == "pass" and 0.5 <= ratio["measured"].iloc[0] <= 1.1
    assert len(loss) == 1 and loss["outcome"].iloc[0] == "fail"
    assert loss["measured"].iloc[0] == pytest.approx(runs["final_loss"].iloc[0], rel=1e-3)

    schema = etree.XMLSchema(etree.parse(str(REPO / "tests" / "fixtures" / "junit.xsd")))
    document = etree.parse(str(junit))
    assert schema.validate(document), schema.error_log
    failures = document.findall(".//failure")
    cases = document.findall(".//testcase")
    assert len(cases) == 3 and len(failures) == 1           # the run point and the two expectations
    assert "final_loss" in etree.tostring(failures[0].getparent(), encoding="unicode")
