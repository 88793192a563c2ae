"""Beyond this machine's cores: 8, 16 and 32 one-core workers with replayed compute, against the cost
model fitted on 1-4 workers that computed for real.

Two sweeps through the testbed's command line, PyTorch all-reduce of a CNN (filters 64, dense 16: a
0.5 MB gradient) over 10 Mbit/s links: real compute (`dilation: auto`) at 1, 2, 3 and 4 one-core
nodes, then replayed compute (`compute: replay`, `dilation: auto`) at 8, 16 and 32. The cost model is
fitted on the first (`run_experiment.py predict`) and predicts the second. Per replayed point it prints
the measured steady step and the prediction, their error, the verdict with its CPU bound and wait, the
dilation, the point's wall time, and the peak memory of all its nodes together (the sum of each node's
largest resident set, usage.csv). Aim: every verdict ok; the prediction's median error at most 10 %.

Run as root, with nothing else running:
  .venv/bin/python bench/replay_scale.py [--real 1,2,3,4] [--replay 8,16,32] [--bw 10mbit] [--steps 15]
      [--replay-dilation auto] [--out DIR]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from machine import machine_state  # noqa: E402

SPEC = """name: {name}
topology: {{template: star, hosts: 2, switch: {{kind: ovs}}, link: {{bw: {bw}}}, host: {{cores: 1}}}}
emulation: {{dilation: {dilation}, compute: {compute}}}
workload: {{engine: pytorch, strategy: allreduce, model: cnn, model_params: {{filters: 64, dense: 16}},
           batch_per_worker: 32, epochs: 1, steps_per_epoch: {steps}, fixed: steps, timeout: 30m}}
checks: {{iperf: {iperf}, ping: true, duration: 1s, pairs: first}}
monitor: {{interval: 2s}}
sweep: {{topology.hosts: [{hosts}]}}
"""


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "run_experiment.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True)


def sweep(folder: Path, name: str, compute: str, hosts: str, args) -> Path:
    spec = folder / f"{name}.yaml"
    spec.write_text(SPEC.format(name=name, bw=args.bw, compute=compute, steps=args.steps, hosts=hosts,
                                dilation="auto" if compute == "real" else args.replay_dilation,
                                iperf="true" if compute == "real" else "false"))
    t0 = time.monotonic()
    proc = cli("run", spec, "--out", folder / name, "--quiet", "--no-report")
    if not (folder / name / "runs.csv").exists():
        sys.exit(f"{name} wrote no runs.csv (exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
    print(f"  {name}: hosts {hosts}, {time.monotonic() - t0:.0f} s", flush=True)
    return folder / name


def peak_memory(out: Path) -> dict:
    """run_id -> the sum over its nodes of each node's largest resident set (bytes)."""
    usage = pd.read_csv(out / "usage.csv")
    return usage.groupby(["run_id", "node"])["rss_bytes"].max().groupby("run_id").sum().to_dict()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", default="1, 2, 3, 4", help="node counts with real compute (the fit)")
    ap.add_argument("--replay", default="8, 16, 32", help="node counts with replayed compute (predicted)")
    ap.add_argument("--bw", default="10mbit")
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--replay-dilation", default="auto", help="the replayed sweep's dilation (real compute: auto)")
    ap.add_argument("--out", help="keep the results here (default: a temporary folder)")
    args = ap.parse_args()
    print(machine_state())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.out) if args.out else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        real = sweep(folder, "real", "real", args.real, args)
        replayed = sweep(folder, "replayed", "replay", args.replay, args)
        nodes = ",".join(h.strip() for h in args.replay.split(","))
        proc = cli("predict", real, "--nodes", nodes, "--bw", args.bw, "--strategy", "allreduce",
                   "--out", folder / "predict")
        if proc.returncode != 0:
            sys.exit(f"predict failed: {proc.stderr.strip()[-600:]}")
        pred = pd.read_csv(folder / "predict" / "predict.csv").set_index("nodes")["steady_step_s"]
        fit = pd.read_csv(real / "runs.csv")
        runs = pd.read_csv(replayed / "runs.csv").sort_values("hosts")
        memory = peak_memory(replayed)
        rows = []
        for r in runs.itertuples(index=False):
            p = pred.get(r.hosts, float("nan"))
            rows.append(dict(nodes=r.hosts, status=r.status, dilation=r.dilation,
                             measured_ms=round(r.steady_step_s * 1000, 1), predicted_ms=round(p * 1000, 1),
                             error=round(p / r.steady_step_s - 1, 3), cpu_bound=r.replay_cpu_bound,
                             cpu_wait=r.replay_cpu_wait, wall_s=round(r.wall_time_s), memory_gib=round(
                                 memory.get(r.run_id, float("nan")) / 2**30, 2), fidelity=r.fidelity))
        table = pd.DataFrame(rows)
        table.to_csv(folder / "replay_scale.csv", index=False)
        print("fitted on (real compute): " + ", ".join(
            f"{h} nodes {s * 1000:.1f} ms ({f})" for h, s, f in zip(fit["hosts"], fit["steady_step_s"], fit["fidelity"])))
        with pd.option_context("display.width", 250, "display.max_colwidth", 120):
            print(table.to_string(index=False))
        print(f"median |error| {table['error'].abs().median():.3f}; verdicts ok: "
              f"{(table['fidelity'] == 'ok').sum()}/{len(table)}")
    print(machine_state())


if __name__ == "__main__":
    main()
