"""Harness overhead: the same all-reduce job launched by the testbed and by a hand-written plain
Mininet script (bench/plain_allreduce.py), alternated in one run, as ratios; plus the monitor.

Variants, each run `--rounds` times in rotating order: plain (the reference), testbed (monitor on,
at --interval), testbed with the monitor off. Per variant: training time (the chief's `done` event,
i.e. model.fit) and the command's wall time (process start to exit: Python start-up, the spec,
preflight, network up, training, teardown, tables). The monitor's own CPU is the runs' recorded
`monitor_overhead_pct`. Machine state (load, timer overshoot) is printed before and after.

Run as root:  .venv/bin/python bench/overhead.py [--rounds 3] [--hosts 2] [--bw 100mbit] [--interval 0.5s]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from machine import machine_state  # noqa: E402

SPEC = """name: overhead
topology: {{template: star, hosts: {hosts}, switch: {{kind: ovs}}, link: {link}}}
workload: {{strategy: allreduce, model: mlp, model_params: {{width: {width}}}, epochs: {epochs}, steps_per_epoch: {steps}}}
checks: {{iperf: false, ping: false}}
monitor: {{enabled: {monitor}, interval: {interval}}}
"""



def run_plain(args) -> dict:
    mbit = 0 if args.bw == "unshaped" else float(args.bw.lower().removesuffix("mbit"))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(REPO / "bench/plain_allreduce.py"), "--hosts", str(args.hosts),
                           "--bw", str(mbit), "--steps", str(args.steps), "--epochs", str(args.epochs),
                           "--width", str(args.width), "--threads", "1"],
                          cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"plain Mininet script failed: {proc.stderr[-1500:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if not out["tx_offload"]:
        print("  plain: TX offload off (OVS userspace TSO is off)", flush=True)
    return {"training_s": out["training_time_s"], "command_s": wall, "step_s": out["time_per_step_s"],
            "monitor_cpu_pct": float("nan")}


def run_testbed(args, tmp: Path, tag: str, monitor: bool) -> dict:
    spec = tmp / f"{tag}.yaml"
    link = "{}" if args.bw == "unshaped" else f"{{bw: {args.bw}}}"
    spec.write_text(SPEC.format(hosts=args.hosts, link=link, width=args.width, epochs=args.epochs,
                                steps=args.steps, monitor=str(monitor).lower(), interval=args.interval))
    out = tmp / tag
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(REPO / "run_experiment.py"), "run", str(spec), "--out", str(out),
                           "--quiet", "--no-report"], cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - t0
    runs = pd.read_csv(out / "runs.csv") if (out / "runs.csv").exists() else pd.DataFrame()
    if proc.returncode != 0 or runs.empty or runs["status"].iloc[0] != "ok":
        reason = runs["reason"].iloc[0] if not runs.empty else proc.stderr[-1500:]
        raise SystemExit(f"testbed run failed: {reason}")
    row = runs.iloc[0]
    return {"training_s": row["training_time_s"], "command_s": wall, "step_s": row["time_per_step_s"],
            "monitor_cpu_pct": row.get("monitor_overhead_pct", float("nan"))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--bw", default="100mbit", help="per link, in mbit, or unshaped (takes shaping out of the comparison)")
    ap.add_argument("--width", type=int, default=256, help="MLP width (depth 2, 784 inputs)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--interval", default="0.5s", help="the monitor's sampling interval")
    args = ap.parse_args()
    variants = {"plain": lambda i: run_plain(args),
                "testbed": lambda i: run_testbed(args, tmp, f"on{i}", True),
                "testbed, monitor off": lambda i: run_testbed(args, tmp, f"off{i}", False)}
    names = list(variants)
    print(f"before: {machine_state()}", flush=True)
    print(f"{args.hosts} workers, star, OVS userspace, {args.bw} links, MLP width {args.width}, "
          f"{args.epochs}x{args.steps} steps; monitor every {args.interval}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for i in range(args.rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:     # rotate the order per round
                r = variants[name](i)
                rows.append({"round": i + 1, "variant": name, **r})
                print(f"round {i + 1} {name:<21} training {r['training_s']:7.2f} s  command {r['command_s']:7.2f} s",
                      flush=True)
    print(f"after: {machine_state()}\n")
    df = pd.DataFrame(rows)
    base = df[df["variant"] == "plain"].set_index("round")
    print(f"{'variant':<21} {'training s (median, min..max)':>30} {'x plain':>8} {'command s':>10} {'x plain':>8}")
    for name in names:
        d = df[df["variant"] == name].set_index("round")
        t, c = d["training_s"], d["command_s"]
        print(f"{name:<21} {t.median():>12.2f} ({t.min():6.2f} .. {t.max():6.2f}) "
              f"{median(t / base['training_s']):>8.3f} {c.median():>10.2f} {median(c / base['command_s']):>8.3f}")
    cpu = df[df["variant"] == "testbed"]["monitor_cpu_pct"]
    print(f"\n(x plain: median over rounds of the ratio to the plain run of the same round)")
    print(f"monitor's own CPU at {args.interval}: {cpu.mean():.2f} % of one core (mean of {len(cpu)} runs, "
          f"max {cpu.max():.2f} %)")


if __name__ == "__main__":
    main()
