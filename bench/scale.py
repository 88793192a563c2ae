"""Training scale: the largest all-reduce this machine runs, and what stops it.

All-reduce (the built-in MLP) on a tree of OVS switches with 4, 8, 16, 32 ... workers, one run each
through the testbed's command line. Per size: time per step, training and wall time, each worker's
resident memory (peak per host, from the monitor's usage rows) and the machine's peak used memory.
Before each size the memory it needs is estimated from the largest size run so far (one worker at
the largest peak RSS, the chief, and the others at the median, on top of what the machine uses now); a size whose estimate exceeds --max-ram
(default 75 %) of the RAM is not started, and the output says so. CPU is the other limit: with W
workers on C cores each worker gets C/W of a core (TensorFlow intra-op threads: 1 each).

Run as root:  .venv/bin/python bench/scale.py [--workers 4,8,16,32] [--fanout 4] [--bw 100mbit]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from testbed.spec.graph import tree_depth  # noqa: E402
from testbed.run.hosthealth import timer_overshoot  # noqa: E402

GIB = 1 << 30
FIRST_GUESS = 700 << 20      # bytes per TensorFlow worker before any run measured it (ENVIRONMENT.md: 650-700 MB)

SPEC = """name: scale
topology: {{template: tree, hosts: {n}, fanout: {fanout}, switch: {{kind: ovs}}, link: {{bw: {bw}}}}}
workload: {{strategy: allreduce, model: mlp, model_params: {{width: {width}}}, epochs: {epochs}, steps_per_epoch: {steps}, timeout: 30m}}
checks: {{iperf: false, ping: false}}
monitor: {{enabled: true, interval: 1s}}
"""


class PeakMemory:
    """The machine's peak used memory (total - available) while the block runs, sampled every 0.5 s."""

    def __enter__(self):
        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self):
        while True:
            vm = psutil.virtual_memory()
            self.peak = max(self.peak, vm.total - vm.available)
            if self._stop.wait(0.5):
                return

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run(n: int, args, tmp: Path) -> dict:
    spec = tmp / f"w{n}.yaml"
    spec.write_text(SPEC.format(n=n, fanout=args.fanout, bw=args.bw, width=args.width, epochs=args.epochs,
                                steps=args.steps))
    out = tmp / f"w{n}"
    t0 = time.monotonic()
    with PeakMemory() as mem:
        proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(spec), "--out", str(out),
                               "--quiet", "--no-report"], cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    runs = pd.read_csv(out / "runs.csv") if (out / "runs.csv").exists() else pd.DataFrame()
    if runs.empty:
        return {"workers": n, "status": "failed", "reason": proc.stderr.strip()[-300:], "command_s": wall}
    row = runs.iloc[0]
    usage = pd.read_csv(out / "usage.csv") if (out / "usage.csv").exists() else pd.DataFrame()
    rss = usage.groupby("node")["rss_bytes"].max() if not usage.empty else pd.Series(dtype=float)
    return {"workers": n, "status": row["status"], "reason": str(row.get("reason", "") or "")[:300],
            "step_s": row.get("time_per_step_s"), "training_s": row.get("training_time_s"), "command_s": wall,
            "rss_max": rss.max() if len(rss) else float("nan"), "rss_median": rss.median() if len(rss) else float("nan"),
            "machine_peak": mem.peak}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="4,8,16,32")
    ap.add_argument("--fanout", type=int, default=4)
    ap.add_argument("--bw", default="100mbit")
    ap.add_argument("--width", type=int, default=256, help="MLP width (depth 2, 784 inputs)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--max-ram", type=float, default=0.75, help="fraction of RAM a size may be estimated to use")
    args = ap.parse_args()
    total, cores = psutil.virtual_memory().total, os.cpu_count()
    t = timer_overshoot()
    print(f"machine: {cores} cores, {total / GIB:.1f} GiB RAM; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; 1 ms sleeps overshoot p99 {t['timer_p99_ms']} ms, "
          f"max {t['timer_max_ms']} ms")
    print(f"all-reduce, MLP width {args.width}, {args.epochs}x{args.steps} steps, tree fanout {args.fanout}, "
          f"{args.bw} links, OVS userspace; memory limit {args.max_ram:.0%} of RAM = {args.max_ram * total / GIB:.1f} GiB")
    print(f"{'workers':>7} {'depth':>5} {'status':>7} {'s/step':>7} {'train s':>8} {'cmd s':>7} "
          f"{'RSS/worker MB (median, max)':>28} {'machine peak GiB':>16} {'cores/worker':>12}", flush=True)
    typical = largest = FIRST_GUESS       # bytes per worker: median and max of the last size run
    stopped = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in map(int, args.workers.split(",")):
            vm = psutil.virtual_memory()
            estimate = (vm.total - vm.available) + largest + (n - 1) * typical
            if estimate > args.max_ram * total:
                stopped = (f"{n} workers not started: estimated {estimate / GIB:.1f} GiB (in use now "
                           f"{(vm.total - vm.available) / GIB:.1f} GiB + {largest / 2**20:.0f} MB + {n - 1} x "
                           f"{typical / 2**20:.0f} MB per worker) "
                           f"> {args.max_ram:.0%} of {total / GIB:.1f} GiB RAM")
                break
            r = run(n, args, Path(tmp))
            depth = tree_depth(n, args.fanout)
            if r["status"] != "ok":
                print(f"{n:>7} {depth:>5} {r['status']:>7}  {r['reason']}", flush=True)
                stopped = f"{n} workers failed: {r['reason']}"
                break
            if r["rss_max"] == r["rss_max"]:      # measured (not NaN): the next estimate uses it
                typical, largest = int(r["rss_median"]), int(r["rss_max"])
            print(f"{n:>7} {depth:>5} {r['status']:>7} {r['step_s']:>7.3f} {r['training_s']:>8.1f} {r['command_s']:>7.1f} "
                  f"{r['rss_median'] / 2**20:>16.0f}, {r['rss_max'] / 2**20:>9.0f} {r['machine_peak'] / GIB:>16.1f} "
                  f"{cores / n:>12.3f}", flush=True)
    print(f"stopped: {stopped}" if stopped else "every size ran")


if __name__ == "__main__":
    main()
