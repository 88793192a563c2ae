"""A user's own, unmodified training script through `workload.script` on real emulated hosts."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "tests" / "fixtures" / "scripts"
pytestmark = pytest.mark.integration


def run(tmp_path, body: str, *sets):
    path = tmp_path / "script.yaml"
    path.write_text(body)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(path), "--out", str(out),
                           "--quiet", "--no-report", "--set", "checks.iperf=false", *sets],
                          cwd=REPO, capture_output=True, text=True, timeout=900)
    runs = pd.read_csv(out / "runs.csv")
    steps = pd.read_csv(out / "steps.csv") if (out / "steps.csv").stat().st_size else pd.DataFrame()
    return proc, runs.iloc[0], steps


MWMS = f"""
name: my-script
topology: {{template: star, hosts: 2, link: {{bw: 100mbit}}}}
workload: {{strategy: allreduce, script: {SCRIPTS / 'mwms_tutorial.py'}}}
"""


def test_tutorial_script_runs_unchanged_on_two_workers(tmp_path, root, no_leftovers):
    proc, row, steps = run(tmp_path, MWMS)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert row["status"] == "ok", row["reason"]
    assert row["model"] == f"script:{SCRIPTS / 'mwms_tutorial.py'}" and row["workers"] == 2
    assert row["training_time_s"] > 0 and row["tf_import_s"] > 0
    assert row["net_bytes_total"] > 0, "the gradients crossed the emulated link"
    assert steps.empty, "no per-step rows without the callback"


def test_the_callback_gives_step_rows_and_a_docker_worker_runs_it_too(tmp_path, root, no_leftovers):
    proc, row, steps = run(tmp_path, MWMS, "--set", "workload.args=[--callback]",
                           "--set", "topology.host_overrides.h2.kind=docker")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert row["status"] == "ok", row["reason"] and row["node_kinds"] == "docker+netns"
    assert set(steps["host"]) == {"h1", "h2"}
    assert (steps["kind"] == "step").sum() >= 10 and row["time_per_step_s"] > 0


def test_a_script_that_raises_fails_the_run_with_its_message(tmp_path, root, no_leftovers):
    proc, row, _ = run(tmp_path, MWMS, "--set", "workload.args=[--fail]")
    assert proc.returncode == 1
    assert row["status"] == "failed"
    assert "ValueError: the user's script broke on purpose" in row["reason"]


def test_ps_with_a_user_coordinator_script(tmp_path, root, no_leftovers):
    body = f"""
name: my-ps
topology: {{template: star, hosts: 3, link: {{bw: 100mbit}}}}
workload: {{strategy: ps, script: {SCRIPTS / 'ps_coordinator.py'}}}
"""
    proc, row, _ = run(tmp_path, body)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert row["status"] == "ok", row["reason"]
    assert row["servers"] == 1 and row["workers"] == 1 and row["training_time_s"] > 0
