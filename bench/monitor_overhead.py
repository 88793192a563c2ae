"""Does sampling distort the run? Training time with the monitor at 0.1 s vs without it.

Runs a 2-host all-reduce sweep (monitor.enabled x repeats) through the real CLI and prints the
ratio of mean training times, plus the sampler's own CPU use as recorded per run.
Run as root:  .venv/bin/python bench/monitor_overhead.py [--repeats 3]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent

SPEC = """
name: monitor-overhead
topology: {{template: star, hosts: 2, link: {{bw: 100mbit}}}}
workload: {{strategy: allreduce, model: mlp, model_params: {{width: 128, depth: 2}}, epochs: 2, steps_per_epoch: 20}}
checks: {{iperf: false, ping: false}}
monitor: {{interval: 0.1s}}
sweep:
  monitor.enabled: [true, false]
  repeats: {repeats}
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec, out = Path(tmp) / "m.yaml", Path(tmp) / "out"
        spec.write_text(SPEC.format(repeats=args.repeats))
        subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(spec), "--out", str(out),
                        "--quiet", "--no-report"], cwd=REPO, check=False)
        runs = pd.read_csv(out / "runs.csv")
    ok = runs[runs["status"] == "ok"]
    times = ok.groupby("monitor.enabled")["training_time_s"].agg(["mean", "std", "count"])
    print(times.to_string())
    on, off = times.loc[True, "mean"], times.loc[False, "mean"]
    print(f"training time with / without monitor at 0.1 s: {on / off:.3f}")
    print(f"sampler CPU: {ok['monitor_overhead_pct'].dropna().mean():.2f} % of one core (mean over monitored runs)")


if __name__ == "__main__":
    main()
