"""The cost model on real runs: a small sweep is fitted (in-sample error printed and bounded),
predict runs on its folder; strategy auto records its choice and both predictions."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "report_small"
pytestmark = pytest.mark.integration

SWEEP = """
name: costmodel-small
topology: {template: star, hosts: 3, link: {bw: 20mbit}, shaping: tc}
workload: {strategy: allreduce, model: mlp, model_params: {width: 64, depth: 1}, epochs: 2,
           fixed: steps, steps_per_epoch: 8, timeout: 4m}
checks: {iperf: true, ping: true, duration: 1s, fail_run: false}
monitor: {interval: 0.5s}
sweep:
  topology.hosts: [1, 2, 3]
  topology.link.bw: [20mbit, 100mbit]
"""

AUTO = """
name: auto
topology: {template: star, hosts: 3, link: {bw: 50mbit}, shaping: tc}
workload:
  strategy: auto
  advisor: {results: %s}
  model: mlp
  model_params: {width: 32, depth: 1}
  epochs: 1
  steps_per_epoch: 6
  timeout: 4m
checks: {iperf: true, ping: true, duration: 1s, attempts: 1, fail_run: false}
"""


def _run(tmp_path, text, *extra):
    file, out = tmp_path / "exp.yaml", tmp_path / "out"
    file.write_text(text)
    proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(file), "--out", str(out),
                           "--quiet", "--no-report", *extra], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    return proc, out


def test_small_sweep_fit_and_predict(tmp_path, root, no_leftovers):
    proc, out = _run(tmp_path, SWEEP)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from analysis.model import costmodel
    from analysis.tables import tables
    ev = costmodel.evaluate(tables.load_experiment(out))
    acc = ev["accuracy"].set_index(["strategy", "split"])
    print(ev["model"].describe())
    print(acc.to_string())
    in_sample = acc.loc[("allreduce", "in-sample"), "median_abs_rel_error"]
    assert acc.loc[("allreduce", "in-sample"), "runs"] == 6
    assert in_sample < 0.35, f"in-sample median |relative error| {in_sample:.1%}"
    assert ("allreduce", "held-out") in acc.index     # 3 nodes predicted from 1 and 2
    assert (ev["features"]["bw_source"] != "configured x rho").sum() == 4   # multi-node runs: checks

    pred = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "predict", str(out),
                           "--nodes", "1,2,4,...,256", "--bw", "10mbit,1gbit", "--cpu", "1,1/0.5"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert pred.returncode == 0, pred.stderr[-3000:]
    print(pred.stdout)
    table = pd.read_csv(out / "predict" / "predict.csv")
    assert set(table["nodes"]) == {1, 2, 4, 8, 16, 32, 64, 128, 256}
    assert set(table["better"]) <= {"allreduce", "ps"} and (table["steady_step_s"] > 0).all()
    assert (out / "predict" / "predict.png").stat().st_size > 20_000
    assert "better" in pred.stdout and "cost model from" in pred.stdout


def test_strategy_auto_records_choice_and_both_predictions(tmp_path, root, no_leftovers):
    proc, out = _run(tmp_path, AUTO % FIXTURE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = pd.read_csv(out / "runs.csv").iloc[0]
    assert row["status"] == "ok", row["reason"]
    assert row["advisor_choice"] in ("allreduce", "ps")
    assert row["strategy"] == row["advisor_choice"]
    assert row["predicted_step_s_allreduce"] > 0 and row["predicted_step_s_ps"] > 0
    want = (3, 0) if row["strategy"] == "allreduce" else (1, 1)
    assert (row["workers"], row["servers"]) == want
    topo = json.loads(next(out.glob("runs/*/topology.json")).read_text())
    roles = {h["role"] for h in topo["hosts"]}
    assert roles == ({"worker0", "worker1", "worker2"} if row["strategy"] == "allreduce"
                     else {"chief0", "ps0", "worker0"})
    assert row["time_per_step_s"] > 0
