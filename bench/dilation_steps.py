"""Time dilation: does the same emulated target give the same figures at K = 1, 2, 4 and 8?

One run through the testbed's command line: 2 nodes of 0.8 core each on one OVS switch, 100 Mbit/s
links, all-reduce of the built-in MLP (width 256, depth 2: 269k parameters), swept over
emulation.dilation. Each point runs K times slower on the wall clock (rates / K, nodes held to
0.8/K core, every written time x K) and records emulated times (wall / K). Per K it prints the
emulated time per step (runs.csv, warm-up included, and the steady step: the lead worker's median
step after the first), samples/s, each as a ratio to K = 1, the iperf3 check's measured/configured
ratio, the compute probe's figures (compute per step, and what the CPU quota's slices cost it:
CPU time per step under the budget over the same with the quota lifted) and the run's fidelity
verdict. If dilation is faithful, every ratio to K = 1 reads 1.

Run as root:  .venv/bin/python bench/dilation_steps.py [--factors 1,2,4,8] [--steps 20] [--epochs 2]
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

from analysis.tables import steady as steady_state  # noqa: E402
from machine import machine_state  # noqa: E402

SPEC = """name: dilation
topology: {{template: star, hosts: 2, switch: {{kind: ovs}}, link: {{bw: {bw}}}, host: {{cores: {cores}}}}}
workload: {{strategy: allreduce, model: mlp, model_params: {{width: {width}}}, epochs: {epochs}, steps_per_epoch: {steps}, timeout: 10m}}
checks: {{iperf: true, ping: true, duration: {check_s}s}}
monitor: {{enabled: true, interval: 1s}}
sweep: {{emulation.dilation: [{factors}]}}
"""



def iperf_ratios(checks: pd.DataFrame) -> dict:
    """run_id -> measured/configured of its iperf3 check (the narrowest pair)."""
    ip = checks[(checks["tool"] == "iperf3") & (checks["configured_bps"] > 0)]
    return (ip["measured_bps"] / ip["configured_bps"]).groupby(ip["run_id"]).min().to_dict()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--factors", default="1,2,4,8", help="dilation factors K (the first is the reference)")
    ap.add_argument("--cores", type=float, default=0.8, help="cores of each emulated node")
    ap.add_argument("--bw", default="100mbit")
    ap.add_argument("--width", type=int, default=256, help="MLP width (depth 2, 784 inputs): 256 = 269k parameters")
    ap.add_argument("--steps", type=int, default=20, help="steps per epoch")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--check-duration", type=float, default=2.0, help="iperf3 seconds (emulated: x K on the wall clock)")
    ap.add_argument("--out", help="keep the results folder here (default: a temporary one)")
    args = ap.parse_args()
    print(machine_state())
    print(f"target: 2 nodes x {args.cores:g} core, {args.bw} links, all-reduce, MLP width {args.width}, "
          f"{args.epochs}x{args.steps} steps; K = {args.factors}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp) / "out"
        spec = Path(tmp) / "dilation.yaml"
        spec.write_text(SPEC.format(bw=args.bw, cores=args.cores, width=args.width, epochs=args.epochs,
                                    steps=args.steps, check_s=args.check_duration, factors=args.factors))
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(spec), "--out", str(out),
                               "--quiet", "--no-report"], cwd=REPO, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if not (out / "runs.csv").exists():
            sys.exit(f"the run wrote no runs.csv (exit {proc.returncode}): {proc.stderr.strip()[-600:]}")
        runs = pd.read_csv(out / "runs.csv")
        checks = pd.read_csv(out / "checks.csv") if (out / "checks.csv").exists() else pd.DataFrame(
            columns=["run_id", "tool", "measured_bps", "configured_bps"])
        steps = pd.read_csv(out / "steps.csv") if (out / "steps.csv").exists() else pd.DataFrame()
    steady = ({run_id: steady_state.split(times).step_s for run_id, times in steady_state.lead_times(steps).items()}
              if len(steps) else {})
    iperf = iperf_ratios(checks)
    runs = runs.sort_values("dilation")
    ref = runs[runs["status"] == "ok"].iloc[0] if (runs["status"] == "ok").any() else None
    print(f"one run, {len(runs)} points, {wall:.0f} s on the wall clock")
    print(f"{'K':>4} {'status':>7} {'s/step':>7} {'x K1':>6} {'steady s':>8} {'x K1':>6} {'samples/s':>9} {'x K1':>6} "
          f"{'iperf':>6} {'wall s/step':>11} {'compute s':>9} {'slicing':>7}  fidelity")
    for r in runs.itertuples(index=False):
        if r.status != "ok" or ref is None:
            print(f"{r.dilation:>4g} {r.status:>7}  {str(getattr(r, 'reason', ''))[:200]}")
            continue
        st, st_ref = steady.get(r.run_id, float("nan")), steady.get(ref.run_id, float("nan"))
        wall_step = r.time_per_step_s * r.dilation       # the raw figure (time_per_step_wall_s when K > 1)
        print(f"{r.dilation:>4g} {r.status:>7} {r.time_per_step_s:>7.4f} {r.time_per_step_s / ref.time_per_step_s:>6.3f} "
              f"{st:>8.4f} {st / st_ref:>6.3f} {r.samples_per_s:>9.1f} {r.samples_per_s / ref.samples_per_s:>6.3f} "
              f"{iperf.get(r.run_id, float('nan')):>6.3f} {wall_step:>11.4f} {r.compute_per_step_s:>9.4f} "
              f"{r.compute_slicing:>7.2f}  {r.fidelity}")
    print(machine_state())


if __name__ == "__main__":
    main()
