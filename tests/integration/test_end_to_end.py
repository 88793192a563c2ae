"""One YAML file to a measured all-reduce run, through the real CLI, and cleanup after a crash."""
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cli import cli

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration



def test_smoke_allreduce_two_workers_ok(tmp_path, root, no_leftovers):
    out = tmp_path / "smoke"
    # The checks are asserted in test_network (they depend on the machine's timers); here they
    # are recorded but must not stop the run.
    proc = cli("run", "topologies/smoke.yaml", "--out", str(out), "--quiet", "--no-report",
               "--set", "checks.fail_run=false", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 1
    row = runs.iloc[0]
    assert row["status"] == "ok", row["reason"]
    assert row["strategy"] == "allreduce" and row["workers"] == 2 and row["hosts"] == 2
    assert row["training_time_s"] > 0 and row["time_per_step_s"] > 0 and row["samples_per_s"] > 0
    assert row["final_loss"] == row["final_loss"]  # not NaN
    checks = pd.read_csv(out / "checks.csv")
    iperf = checks[checks["tool"] == "iperf3"]
    assert len(iperf) == 1 and 0 < iperf["ratio"].iloc[0] <= 1.0
    assert bool(iperf["passed"].iloc[0]) == (iperf["ratio"].iloc[0] >= 0.90)
    assert row["timer_max_ms"] >= 0
    run_folder = out / "runs" / row["run_id"]
    assert (run_folder / "spec.yaml").exists()
    assert sorted(p.name for p in run_folder.glob("*.log")) == ["h1-worker0.log", "h2-worker1.log"]


def test_workload_timeout_fails_the_run_with_reason(tmp_path, root, no_leftovers):
    out = tmp_path / "timeout"
    proc = cli("run", "topologies/smoke.yaml", "--out", str(out), "--quiet", "--no-report",
               "--set", "workload.timeout=1s", "--set", "checks.iperf=false", timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "failed"
    assert "timed out after 1 s" in row["reason"]


def test_failed_check_fails_the_run(tmp_path, root, no_leftovers):
    """A tolerance of 0 asks for TCP's goodput ceiling (0.956 of the rate) to the last digit, which no
    reading meets: the run must fail (at its first attempt, of 1 s: no retry can pass it)."""
    out = tmp_path / "check"
    proc = cli("run", "topologies/smoke.yaml", "--out", str(out), "--quiet", "--no-report",
               "--set", "checks.tolerance=0", "--set", "checks.attempts=1", "--set", "checks.duration=1s",
               timeout=300)
    assert proc.returncode == 1
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "failed" and row["reason"].startswith("check failed: iperf3 h2->h1")


def test_cleanup_removes_what_a_killed_run_left(tmp_path, root, no_leftovers):
    out = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(REPO / "run_experiment.py"), "run", "topologies/smoke.yaml",
                             "--out", str(out), "--quiet", "--no-report", "--set", "checks.iperf=false",
                             "--set", "workload.epochs=50"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(out.glob("runs/*/h2-worker1.events.jsonl")):
        time.sleep(0.5)
    time.sleep(3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert Path("/sys/class/net/s1").exists(), "the killed run should have left its switch behind"
    result = cli("cleanup", timeout=120)
    assert result.returncode == 0, result.stderr
    assert "deleted OVS bridge s1" in result.stdout
    assert not Path("/sys/class/net/s1").exists()


def test_sigint_mid_run_cleans_up_and_records_nothing(tmp_path, root, no_leftovers):
    out = tmp_path / "sigint"
    proc = subprocess.Popen([sys.executable, str(REPO / "run_experiment.py"), "run", "topologies/smoke.yaml",
                             "--out", str(out), "--quiet", "--no-report", "--set", "checks.iperf=false",
                             "--set", "workload.epochs=50"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(out.glob("runs/*/h2-worker1.events.jsonl")):
        time.sleep(0.5)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output[-2000:]
    assert "interrupted" in output
    assert not (out / "runs.csv").exists() or pd.read_csv(out / "runs.csv").empty
