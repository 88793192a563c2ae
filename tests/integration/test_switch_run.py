"""strategy switch on a real network with real TensorFlow: a network that favours all-reduce, a run
that starts with ps (one worker of three hosts), switches once after its first epoch, finishes,
and whose loss goes on from where ps left it (no jump back to the untrained loss). The epochs are
long enough (120 steps) for the switch to pay for the start-up of new processes (about 6 s here)."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

EPOCHS, SPE = 2, 120
SWITCH = f"""
name: switch
topology: {{template: star, hosts: 3, link: {{bw: 10mbit}}, shaping: tc}}
workload:
  strategy: switch
  switch: {{start: ps, margin: 0.1}}
  model: mlp
  model_params: {{input_dim: 32, width: 128, depth: 2, classes: 2}}
  batch_per_worker: 16
  epochs: {EPOCHS}
  fixed: steps
  steps_per_epoch: {SPE}
  timeout: 5m
checks: {{iperf: true, ping: true, duration: 1s, attempts: 1, fail_run: false}}
"""


def test_switch_from_ps_to_allreduce_once_and_the_loss_goes_on(tmp_path, root, no_leftovers):
    file, out = tmp_path / "exp.yaml", tmp_path / "out"
    file.write_text(SWITCH)
    proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(file), "--out", str(out),
                           "--no-report"], cwd=REPO, capture_output=True, text=True, timeout=900)
    print(proc.stderr[-4000:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", row["reason"]
    assert row["strategy"] == "switch" and row["switches"] == 1
    assert row["steps"] == EPOCHS * SPE
    assert "switching from ps to allreduce after epoch" in proc.stderr
    assert row["final_loss"] > 0 and row["samples_per_s"] > 0
    journal = json.loads((out / "runs" / row["run_id"] / "switch.json").read_text())
    (switch,) = journal["switches"]
    assert (switch["from"], switch["to"], switch["epoch"]) == ("ps", "allreduce", 1)
    (verdict,) = journal["verdicts"]
    assert verdict["switch"] and verdict["predicted_samples_per_s"] > 1.1 * verdict["measured_samples_per_s"]
    assert "to restart over 120 steps left" in verdict["reason"]

    steps = pd.read_csv(out / "steps.csv")
    lead = steps[(steps["kind"] == "step") & (((steps["role"] == "chief") & (steps["strategy"] == "ps")) |
                                              ((steps["role"] == "worker") & (steps["task_index"] == 0) &
                                               (steps["strategy"] == "allreduce")))].sort_values("t")
    ps, ar = lead[lead["strategy"] == "ps"], lead[lead["strategy"] == "allreduce"]
    assert len(ps) >= SPE and len(ar) >= SPE, lead
    # all-reduce continues at the step count of the epoch the switch was decided at
    events = [json.loads(line) for line in (out / "runs" / row["run_id"] / "h1-worker0.events.jsonl")
              .read_text().splitlines() if line.startswith("{")]
    resume = next(e for e in events if e["event"] == "resume")
    assert resume["strategy"] == "allreduce" and resume["step"] == switch["epoch"] * SPE
    assert ar["step"].min() == resume["step"] + 1 and ar["step"].max() == EPOCHS * SPE
    # the loss goes on: the first all-reduce loss is nearer ps's last loss before the switch than the run's first
    first, last_ps = ps.iloc[0]["loss"], ps[ps["step"] <= resume["step"]].iloc[-1]["loss"]
    after = ar.iloc[0]["loss"]
    print(f"first loss {first:.4f}, last ps loss at step {resume['step']} {last_ps:.4f}, "
          f"first all-reduce loss {after:.4f}")
    assert after < first and abs(after - last_ps) < abs(after - first)
