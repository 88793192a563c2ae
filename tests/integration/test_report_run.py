"""Monitor and report on a real 2-node run: usage rows for every node, traffic, every figure."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration

SPEC = """
name: report-run
topology: {template: star, hosts: 2, link: {bw: 50mbit}}
workload: {strategy: allreduce, model: mlp, model_params: {width: 64, depth: 1}, epochs: 2, samples_per_epoch: 512}
checks: {iperf: true, ping: true, duration: 2s, fail_run: false}
monitor: {interval: 0.25s}
sweep:
  topology.hosts: [1, 2]
"""


def test_two_node_experiment_has_usage_traffic_and_full_report(tmp_path, root, no_leftovers):
    file, out = tmp_path / "exp.yaml", tmp_path / "out"
    file.write_text(SPEC)
    proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(file), "--out", str(out),
                           "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_csv(out / "runs.csv")
    assert (runs["status"] == "ok").all() and len(runs) == 2
    two = runs[runs["hosts"] == 2].iloc[0]
    usage = pd.read_csv(out / "usage.csv")
    mine = usage[usage["run_id"] == two["run_id"]]
    assert set(mine["node"]) == {"h1", "h2"}
    assert mine.groupby("node").size().min() >= 3
    sent = mine.groupby("node")["tx_bytes"].agg(lambda s: s.max() - s.min())
    assert (sent > 100_000).all(), f"both workers exchange gradients: {sent.to_dict()}"
    assert two["net_bytes_total"] == pytest.approx(sent.sum(), rel=0.01)
    assert two["cpu_mean_pct"] > 0 and two["mem_peak_bytes"] > 50 * 2**20
    assert two["monitor_overhead_pct"] < 10
    report = out / "report.html"
    assert report.exists() and f"report: {report}" in proc.stderr.replace("\n", "")
    html = report.read_text()
    for fig in ["training_time", "scaling", "bandwidth_checks", "resources", "topology", "wire_bytes", "cost_model"]:
        assert (out / "figures" / f"{fig}.png").stat().st_size > 5000, fig
        assert f"figures/{fig}.png" in html, fig
    assert "no parameter-server runs" in html
