"""No dead ends: Open vSwitch stopped in the middle of a run, and the test suite
started as a background job (SIGINT ignored)."""
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cli import cli

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

# The tests that interrupt a run with SIGINT, the one that stops Open vSwitch before it takes the
# network lock, and a short run after them that must take the lock (it failed on the lock when a SIGINT
# test left a run alive): it expects its training to time out, which a run refused the lock never reaches.
SIGINT_SUBSET = [
    "tests/integration/test_end_to_end.py::test_sigint_mid_run_cleans_up_and_records_nothing",
    "tests/integration/test_faults_run.py::test_sigint_while_a_link_is_down_restores_it_before_teardown",
    "tests/integration/test_network.py::test_open_vswitch_is_started_when_not_running",
    "tests/integration/test_end_to_end.py::test_workload_timeout_fails_the_run_with_reason",
]


def _start_ovs_if_down() -> None:
    from testbed.cleanup import ovs_running
    from testbed.net.switches import OVS_CTL
    if not ovs_running():
        subprocess.run([OVS_CTL, "start", "--system-id=random"], capture_output=True)


def test_open_vswitch_stopped_mid_run_fails_with_that_reason_then_cleanup_and_a_run_succeed(tmp_path, root,
                                                                                              no_leftovers):
    from testbed.cleanup import ovs_running
    from testbed.net.switches import OVS_CTL
    out = tmp_path / "ovs-stopped"
    try:
        proc = subprocess.Popen([sys.executable, str(REPO / "run_experiment.py"), "run", "topologies/smoke.yaml",
                                 "--out", str(out), "--quiet", "--no-report", "--set", "checks.iperf=false",
                                 "--set", "workload.epochs=50", "--set", "workload.timeout=120s"],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + 240
            while not any('"step"' in p.read_text() for p in out.glob("runs/*/h2-worker1.events.jsonl")):
                assert proc.poll() is None and time.monotonic() < deadline, "training never started"
                time.sleep(0.5)
            subprocess.run([OVS_CTL, "stop"], capture_output=True, check=True)
            output, _ = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 1, output[-3000:]
        row = pd.read_csv(out / "runs.csv").iloc[0]
        assert row["status"] == "failed"
        assert row["reason"].startswith("Open vSwitch stopped during the run (ovs-vswitchd does not answer)"), \
            row["reason"]
        assert not ovs_running(), "nothing may start Open vSwitch behind the user's back at teardown"
        assert not Path("/sys/class/net/s1").exists(), "the switch's tap device outlived the run"

        cleaned = cli("cleanup", timeout=120)
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        again = cli("run", "topologies/smoke.yaml", "--out", str(tmp_path / "again"), "--quiet", "--no-report",
                    "--set", "checks.iperf=false", timeout=600)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert pd.read_csv(tmp_path / "again" / "runs.csv").iloc[0]["status"] == "ok"
        assert ovs_running(), "the run starts Open vSwitch again"
    finally:
        _start_ovs_if_down()       # the tests after this one need it


def test_suite_started_as_a_background_job_passes(tmp_path, root, no_leftovers):
    """A shell starts a background job with SIGINT ignored; the SIGINT tests must still interrupt
    their runs, and no run may be left holding the network lock for the tests after them."""
    junit = tmp_path / "inner.xml"
    script = ("./testbed.sh test -p no:cacheprovider -q --junitxml \"$1\" \"${@:2}\" & "
              "sleep 1; grep SigIgn /proc/$!/status; wait $!")
    proc = subprocess.run(["bash", "-c", script, "bash", str(junit), *SIGINT_SUBSET], cwd=REPO,
                          capture_output=True, text=True, timeout=840)
    ignored = int(re.search(r"SigIgn:\s*([0-9a-f]+)", proc.stdout).group(1), 16)
    assert ignored & (1 << 1), "the background job must run with SIGINT (2) ignored, else this tests nothing"
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    report = junit.read_text()
    tests = int(re.search(r'tests="(\d+)"', report).group(1))
    skipped = int(re.search(r'skipped="(\d+)"', report).group(1))
    assert (tests, skipped) == (len(SIGINT_SUBSET), 0), proc.stdout[-3000:]
