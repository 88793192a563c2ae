"""Faults during training on real Mininet: a link down, a killed worker with and without recovery,
a paused worker (the straggler effect), and Ctrl-C while a fault is in force."""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from cli import interruptible

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

BASE = """
name: {name}
topology: {{template: star, hosts: 2, link: {{bw: 100mbit}}}}
workload:
  strategy: allreduce
  model: mlp
  model_params: {{width: 32, depth: 1}}
  batch_per_worker: 16
  epochs: 1
  fixed: steps
  steps_per_epoch: {steps}
  timeout: 3m
checks: {{iperf: false, ping: true}}
faults:
  - {fault}
"""


def write(tmp_path, name, fault, steps=30, extra=""):
    file = tmp_path / f"{name}.yaml"
    file.write_text(BASE.format(name=name, fault=fault, steps=steps) + extra)
    return file


def run(file, out, *args):
    return subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(file), "--out", str(out),
                           "--quiet", "--no-report", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def lead_steps(out: Path, run_id=None) -> pd.DataFrame:
    steps = pd.read_csv(out / "steps.csv")
    steps = steps[(steps["kind"] == "step") & (steps["task_index"] == 0)]
    return steps if run_id is None else steps[steps["run_id"] == run_id]


def overlapping(steps: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    """Steps whose interval [t - time_s, t] overlaps [start, end]."""
    return steps[(steps["t"] >= start) & (steps["t"] - steps["time_s"] <= end)]


def test_link_down_for_3s_is_applied_undone_and_makes_the_slowest_step(tmp_path, root, no_leftovers):
    out = tmp_path / "out"
    proc = run(write(tmp_path, "linkdown", "{at: step 10, action: link_down, link: [h2, s1], duration: 3s}"), out)
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", row["reason"]
    fault = pd.read_csv(out / "faults.csv").iloc[0]
    assert (fault["action"], fault["target"], fault["outcome"]) == ("link_down", "h2-s1", "ok")
    assert fault["applied_step"] >= 10 and fault["undone_t"] - fault["applied_t"] >= 2.9
    steps = lead_steps(out)
    slowest = steps.loc[steps["time_s"].idxmax()]
    assert len(overlapping(steps.loc[[slowest.name]], fault["applied_t"], fault["undone_t"])) == 1, \
        f"the slowest step ({slowest['step']}) should span the fault\n{steps[['step', 'time_s', 't']]}"
    assert fault["extra_s"] > 0


def test_killed_worker_fails_the_run_without_recovery_and_resumes_from_the_backup_with_it(tmp_path, root,
                                                                                         no_leftovers):
    sweep = "sweep:\n  workload.recovery: [none, backup]\n"
    file = write(tmp_path, "kill", "{at: step 10, action: kill, task: worker 1}", extra=sweep)
    out = tmp_path / "out"
    proc = run(file, out, "--set", "workload.backup_every_steps=4")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    runs = pd.read_csv(out / "runs.csv").set_index("workload.recovery")
    failed, recovered = runs.loc["none"], runs.loc["backup"]
    assert failed["status"] == "failed"
    assert "worker 1 on h2 was killed by signal SIGKILL (fault #1: kill worker 1 at step 10)" in failed["reason"]
    assert recovered["status"] == "ok", recovered["reason"]
    assert recovered["restarts"] == 1 and recovered["time_lost_s"] > 0 and recovered["steps"] == 30
    events = [json.loads(line) for line in (out / "runs" / recovered["run_id"] / "h1-worker0.events.jsonl")
              .read_text().splitlines() if line.startswith("{")]
    assert [e["event"] for e in events].count("start") == 2, "worker 0 should have started twice"
    restart = [e["event"] for e in events].index("start", 1)
    before = [e["step"] for e in events[:restart] if e["event"] == "step"]
    resume = next(e for e in events[restart:] if e["event"] == "resume")
    after = [e["step"] for e in events[restart:] if e["event"] == "step"]
    assert resume["step"] > 0 and resume["step"] % 4 == 0, f"a backup is taken every 4 steps: {resume}"
    assert after[0] == resume["step"] + 1 and after[-1] == 30, f"steps go on from the backup, not step 0: {after}"
    fault = pd.read_csv(out / "faults.csv").set_index("run_id").loc[recovered["run_id"]]
    assert fault["outcome"] == "ok" and fault["steps_replayed"] == before[-1] - resume["step"]


def test_paused_worker_makes_the_other_wait(tmp_path, root, no_leftovers):
    out = tmp_path / "out"
    run(write(tmp_path, "pause", "{at: step 10, action: pause, task: worker 1, duration: 3s}"), out)
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", row["reason"]
    fault = pd.read_csv(out / "faults.csv").iloc[0]
    assert fault["outcome"] == "ok" and fault["undone_t"] - fault["applied_t"] >= 2.9
    steps = lead_steps(out)           # worker 0 on h1: not paused itself
    window = overlapping(steps, fault["applied_t"], fault["undone_t"])
    assert window["time_s"].max() > steps["time_s"].median(), steps[["step", "time_s", "t"]]


def test_sigint_while_a_link_is_down_restores_it_before_teardown(tmp_path, root, no_leftovers):
    file = write(tmp_path, "sigint", "{at: step 5, action: link_down, link: [h2, s1], duration: 2m}", steps=200)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(REPO / "run_experiment.py"), "run", str(file), "--out", str(out),
                             "--quiet", "--no-report"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, preexec_fn=interruptible)
    journal, state = None, "UP"
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline and proc.poll() is None:
        journal = next(out.glob("runs/*/faults.json"), None)
        if journal and json.loads(journal.read_text())[0]["applied_t"]:
            state = subprocess.run(["ip", "-o", "link", "show", "s1-eth2"], capture_output=True, text=True).stdout
            break
        time.sleep(0.3)
    assert "state DOWN" in state or "LOWERLAYERDOWN" in state, f"the fault should have taken the link down: {state}"
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=90)
    assert proc.returncode == 130, output[-2000:]
    record = json.loads(journal.read_text())[0]
    assert record["undone_t"] and record["outcome"] == "ok", record
