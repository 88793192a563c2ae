"""Training scale under time dilation: 8, 16, 32 one-core workers on this machine, their memory,
and whether the cost model fitted on 1-4 workers predicts them.

All-reduce (the built-in MLP, 269k parameters at width 256) on a tree of OVS switches, one run per
size through the testbed's command line. Every node is a machine of --cores cores (default 1); with
`emulation.dilation: auto` each size runs K times slower on the wall clock, K the smallest factor
at which its nodes' budgets (cores / K each) and the reserve fit this machine, and its times are
recorded in emulated time. Per size: the emulated time per step (and the wall clock's), each
worker's PSS and USS (and RSS, for comparison) at its peak, read from /proc while the run goes
(testbed.emulation.memory.tree_memory on each worker's process tree), the machine's peak used
memory and the fidelity verdict. PSS counts a shared page once over the processes that map it, so
it sums to what the workers really use; RSS counts TensorFlow's libraries in every worker.

Before each size the memory it needs is estimated from the size run before it: what the machine
uses now, plus one worker at the largest peak PSS and the others at the median; a size estimated
above --max-ram of the RAM is not started.

Then the cost model (analysis.model.costmodel) is fitted on the --fit sizes (default 1, 2, 4 workers; run
first, same settings) and predicts every larger size, which it did not see: the held-out error is
predicted / measured - 1 of the time per step. Degraded runs are not fitted (they are predicted and
marked).

Run as root:  .venv/bin/python bench/scale.py [--workers 8,16,32] [--fit 1,2,4] [--dilation auto]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analysis.model import costmodel  # noqa: E402
from testbed.emulation.memory import tree_memory  # noqa: E402
from machine import machine_state  # noqa: E402

GIB, MIB = 1 << 30, 1 << 20
FIRST_GUESS = 350 * MIB      # PSS per TensorFlow worker before any run measured it (first measured: 324 MB)

SPEC = """name: scale
topology: {{template: tree, hosts: {n}, fanout: {fanout}, switch: {{kind: ovs}}, link: {{bw: {bw}}}, host: {{cores: {cores}}}}}
emulation: {{dilation: {dilation}}}
workload: {{strategy: allreduce, model: mlp, model_params: {{width: {width}}}, epochs: {epochs}, steps_per_epoch: {steps}, timeout: 30m{env}}}
checks: {{iperf: false, ping: false}}
monitor: {{enabled: true, interval: 1s}}
"""


class WorkerMemory:
    """While the block runs, every 2 s: each TensorFlow worker of the run (a train.py process whose
    command line names the run's folder) and its descendants, as RSS, PSS and USS; keeps each
    worker's peak, and the machine's peak used memory (total - available)."""

    def __init__(self, folder: Path):
        self.folder = str(folder)
        self.peak: dict[int, dict] = {}
        self.machine_peak = 0

    def __enter__(self):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _workers(self) -> list[int]:
        found = set()
        for p in psutil.process_iter(["pid", "ppid", "cmdline"]):
            cmd = " ".join(p.info["cmdline"] or ())
            if "train.py" in cmd and self.folder in cmd:
                found.add((p.info["pid"], p.info["ppid"]))
        pids = {pid for pid, _ in found}
        return [pid for pid, ppid in found if ppid not in pids]     # a wrapper's child is its tree's

    def _loop(self):
        while True:
            for pid in self._workers():
                m = tree_memory(pid)
                if m["processes"] and m["pss"] > self.peak.get(pid, {}).get("pss", -1):
                    self.peak[pid] = m
            vm = psutil.virtual_memory()
            self.machine_peak = max(self.machine_peak, vm.total - vm.available)
            if self._stop.wait(2.0):
                return

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def per_worker(self, key: str) -> pd.Series:
        return pd.Series([m[key] for m in self.peak.values()], dtype=float)



def run(n: int, args, tmp: Path) -> dict:
    spec = tmp / f"w{n}.yaml"
    env = f", env: {{MALLOC_ARENA_MAX: '{args.malloc_arenas}'}}" if args.malloc_arenas else ""
    spec.write_text(SPEC.format(n=n, fanout=args.fanout, bw=args.bw, cores=args.cores, dilation=args.dilation,
                                width=args.width, epochs=args.epochs, steps=args.steps, env=env))
    out = tmp / f"w{n}"
    t0 = time.monotonic()
    with WorkerMemory(out) as mem:
        proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(spec), "--out", str(out),
                               "--quiet", "--no-report"], cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    runs = pd.read_csv(out / "runs.csv") if (out / "runs.csv").exists() else pd.DataFrame()
    if runs.empty:
        return {"workers": n, "status": "failed", "reason": proc.stderr.strip()[-300:], "command_s": wall}
    row = runs.iloc[0]
    pss, uss, rss = mem.per_worker("pss"), mem.per_worker("uss"), mem.per_worker("rss")
    return {"workers": n, "folder": out, "status": row["status"], "reason": " ".join(str(row.get("reason", "") or "").split())[-400:],
            "dilation": row.get("dilation", 1.0), "step_s": row.get("time_per_step_s"),
            "training_s": row.get("training_time_s"), "command_s": wall, "fidelity": row.get("fidelity", ""),
            "measured": len(pss), "pss_median": pss.median(), "pss_max": pss.max(), "uss_median": uss.median(),
            "uss_max": uss.max(), "rss_median": rss.median(), "machine_peak": mem.machine_peak}


def held_out_errors(results: list[dict], fit_sizes: set) -> tuple[pd.DataFrame, costmodel.CostModel | None]:
    """The cost model fitted on the ok, not degraded runs of `fit_sizes`, predicting every other ok run."""
    folders = [r["folder"] for r in results if r["status"] == "ok"]
    if not folders:
        return pd.DataFrame(), None
    feats = costmodel.features_of(folders, include_degraded=True)
    train = feats[feats["workers"].isin(fit_sizes) & (feats["degraded"].astype(object) != True)].copy()  # noqa: E712
    test = feats[~feats["workers"].isin(fit_sizes)].copy()
    if train.empty or test.empty:
        return pd.DataFrame(), None
    train.attrs.update(feats.attrs)
    model = costmodel.fit_features(train, source=f"workers {sorted(fit_sizes)}")
    test = test.assign(**costmodel.predict_features(model, test))
    test["rel_error"] = test["predicted_step_s"] / test["time_per_step_s"] - 1
    return test, model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="8,16,32", help="sizes the cost model predicts (held out)")
    ap.add_argument("--fit", default="1,2,4", help="sizes the cost model is fitted on (run first)")
    ap.add_argument("--cores", type=float, default=1.0, help="cores of each emulated node")
    ap.add_argument("--dilation", default="auto", help="K for every size, or auto (each size its own K)")
    ap.add_argument("--fanout", type=int, default=4)
    ap.add_argument("--bw", default="100mbit")
    ap.add_argument("--width", type=int, default=256, help="MLP width (depth 2, 784 inputs): 256 = 269k parameters")
    ap.add_argument("--steps", type=int, default=10, help="steps per epoch")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--malloc-arenas", type=int, default=2,
                    help="MALLOC_ARENA_MAX of the workers (fewer glibc arenas, less memory; 0: glibc's default)")
    ap.add_argument("--max-ram", type=float, default=0.75, help="fraction of RAM a size may be estimated to use")
    ap.add_argument("--out", help="keep each size's results folder here (default: a temporary folder)")
    args = ap.parse_args()
    total = psutil.virtual_memory().total
    print(machine_state())
    print(f"all-reduce, MLP width {args.width}, {args.epochs}x{args.steps} steps, tree fanout {args.fanout}, "
          f"{args.bw} links, nodes of {args.cores:g} core, dilation {args.dilation}, MALLOC_ARENA_MAX "
          f"{args.malloc_arenas or 'default'}; memory limit {args.max_ram:.0%} of RAM = {args.max_ram * total / GIB:.1f} GiB")
    print(f"{'workers':>7} {'K':>6} {'status':>7} {'s/step':>7} {'wall s/step':>11} {'train s':>8} {'cmd s':>7} "
          f"{'PSS/worker MB (median, max)':>27} {'USS (median, max)':>17} {'RSS median':>10} {'peak GiB':>8}  fidelity",
          flush=True)
    fit_sizes = {int(n) for n in args.fit.split(",") if n}
    sizes = sorted(fit_sizes) + [int(n) for n in args.workers.split(",") if n]
    typical = largest = FIRST_GUESS
    results, stopped = [], None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.out or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for n in sizes:
            vm = psutil.virtual_memory()
            estimate = (vm.total - vm.available) + largest + (n - 1) * typical
            if estimate > args.max_ram * total:
                stopped = (f"{n} workers not started: estimated {estimate / GIB:.1f} GiB (in use now "
                           f"{(vm.total - vm.available) / GIB:.1f} GiB + {largest / MIB:.0f} MB + {n - 1} x "
                           f"{typical / MIB:.0f} MB PSS per worker) > {args.max_ram:.0%} of {total / GIB:.1f} GiB RAM")
                break
            r = run(n, args, folder)
            results.append(r)
            if r["status"] != "ok":
                print(f"{n:>7} {'':>6} {r['status']:>7}  {r['reason']}", flush=True)
                stopped = f"{n} workers failed: {r['reason']}"
                break
            if r["measured"]:
                typical, largest = int(r["pss_median"]), int(r["pss_max"])
            print(f"{n:>7} {r['dilation']:>6g} {r['status']:>7} {r['step_s']:>7.3f} {r['step_s'] * r['dilation']:>11.3f} "
                  f"{r['training_s']:>8.1f} {r['command_s']:>7.0f} {r['pss_median'] / MIB:>14.0f}, {r['pss_max'] / MIB:>10.0f} "
                  f"{r['uss_median'] / MIB:>8.0f}, {r['uss_max'] / MIB:>6.0f} {r['rss_median'] / MIB:>10.0f} "
                  f"{r['machine_peak'] / GIB:>8.1f}  {r['fidelity']}", flush=True)
        test, model = held_out_errors(results, fit_sizes)
    print(f"stopped: {stopped}" if stopped else "every size ran")
    if model is None:
        print("cost model: no held-out point (nothing ran beyond the fitted sizes, or no fitted size ran)")
        return
    print(model.describe())
    print(f"held out (fitted on workers {sorted(fit_sizes)}, never on these):")
    print(f"{'workers':>7} {'measured s/step':>15} {'predicted':>9} {'error':>7}  {'steady: measured':>16} "
          f"{'predicted':>9}  {'warm-up s: measured':>19} {'predicted':>9}  degraded")
    for f in test.sort_values("workers").itertuples(index=False):
        print(f"{f.workers:>7} {f.time_per_step_s:>15.4f} {f.predicted_step_s:>9.4f} {f.rel_error:>+7.1%}  "
              f"{f.steady_s:>16.4f} {f.predicted_steady_s:>9.4f}  {f.overhead_s:>19.2f} {f.predicted_warmup_s:>9.2f}  "
              f"{f.degraded}")
    print(f"held-out median |error| {np.median(np.abs(test['rel_error'])):.1%}, max {np.max(np.abs(test['rel_error'])):.1%}")
    print(machine_state())


if __name__ == "__main__":
    main()
