"""A link that follows a trace while training runs, on real Mininet: two all-reduce workers whose links
go 50 -> 5 -> 50 Mbit/s, 6 s each. The steps slow down and speed up with the link, and
link_changes.csv records each change at the trace's time with the step it landed at."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

TRACE = "t[s],bw[mbit]\n0,50\n6,5\n12,50\n"
SPEC = """
name: trace-steps
topology: {template: star, hosts: 2, link: {trace: steps.csv}}
workload:
  strategy: allreduce
  model: mlp
  model_params: {width: 64, depth: 1}     # 51k parameters: 0.2 MB a step, 0.3 s at 5 Mbit/s
  batch_per_worker: 16
  epochs: 1
  fixed: steps
  steps_per_epoch: 250
  timeout: 3m
checks: {iperf: false, ping: true}
"""


def test_time_per_step_follows_a_three_step_bandwidth_trace(tmp_path, root, no_leftovers):
    (tmp_path / "steps.csv").write_text(TRACE)
    (tmp_path / "run.yaml").write_text(SPEC)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(tmp_path / "run.yaml"),
                           "--out", str(out), "--quiet", "--no-report"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", f"{row['reason']}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"

    changes = pd.read_csv(out / "link_changes.csv")
    assert sorted(set(changes["link"])) == ["h1-s1", "h2-s1"] and (changes["outcome"] == "ok").all()
    for link, rows in changes.groupby("link"):
        assert list(rows["row"]) == [1, 2, 3], link
        assert list(rows["bw_bps"]) == [50_000_000, 5_000_000, 50_000_000], link
        assert list(rows["trace_t"]) == [0, 6, 12], link
        landed = rows["t"] - rows["t"].iloc[0]
        assert (abs(landed - rows["trace_t"]) < 1.0).all() and (rows["late_s"] < 1.0).all(), rows
        assert rows["step"].iloc[1] < rows["step"].iloc[2], "the changes landed at rising steps"

    # the lead's steps inside each segment (a step ending after one change and starting before the next)
    steps = pd.read_csv(out / "steps.csv")
    steps = steps[(steps["kind"] == "step") & (steps["task_index"] == 0)].sort_values("t")
    bounds = list(changes.groupby("row")["t"].max()) + [float("inf")]
    medians = []
    for lo, hi in zip(bounds, bounds[1:]):
        inside = steps[(steps["t"] - steps["time_s"] >= lo) & (steps["t"] <= hi)]
        inside = inside[inside["step"] > 2]       # the first steps build the function
        assert len(inside) >= 3, f"too few steps between {lo} and {hi}\n{steps[['step', 'time_s', 't']]}"
        medians.append(inside["time_s"].median())
    fast1, slow, fast2 = medians
    print(f"median time per step: 50 Mbit/s {fast1:.3f} s, 5 Mbit/s {slow:.3f} s, 50 Mbit/s {fast2:.3f} s")
    assert slow > 2.5 * fast1 and slow > 2.5 * fast2, medians
