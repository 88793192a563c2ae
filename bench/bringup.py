"""Bring-up and teardown time against the host count: the testbed (per node kind) and plain Mininet
(bench/plain_bringup.py: the same topology, switch class and datapath, TCLink shaping) in the same
run, printed as ratios testbed / plain Mininet.

Run as root:
  .venv/bin/python bench/bringup.py --hosts 8,64,256,1000 --template tree --fanout 32
  .venv/bin/python bench/bringup.py --hosts 8,1000 --switch linuxbridge
  .venv/bin/python bench/bringup.py --hosts 8,32 --kinds netns,docker --no-plain
Every host's reachability from h1 is checked before teardown (pings in parallel, both sides alike);
links are shaped with HTB at --bw on both ends. The machine's load and timer health print first.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed.run.bringup.checks import unreachable  # noqa: E402
from testbed.run.bringup.hosthealth import timer_overshoot  # noqa: E402
from testbed.net.network import Network, node_problems  # noqa: E402
from testbed.spec import build_graph, load_spec  # noqa: E402

PLAIN = Path(__file__).resolve().parent / "plain_bringup.py"


def measure(path: Path) -> tuple[float, float, int, bool]:
    """(up s, down s, hosts reachable from h1, whether TX offload was turned off) through the testbed."""
    spec = load_spec(path)
    graph = build_graph(spec.topology)
    problems = node_problems(graph, print)     # e.g. builds the worker image once, outside the timing
    if problems:
        raise SystemExit(f"cannot start: {problems}")
    t0 = time.monotonic()
    net = Network(graph, spec.topology).__enter__()
    up = time.monotonic() - t0
    try:
        nodes = list(net.nodes.values())
        reachable = len(nodes) - len(unreachable(nodes[0], nodes[1:]))
        tx_off = any("TX checksum offload off" in note for note in net.notes)
    finally:
        t1 = time.monotonic()
        net.__exit__(None, None, None)
        down = time.monotonic() - t1
    return up, down, reachable, tx_off


def measure_plain(args, hosts: int, tx_off: bool) -> tuple[float, float, int]:
    """The same through plain Mininet, in a process of its own (as a user's script runs)."""
    cmd = [sys.executable, str(PLAIN), "--hosts", str(hosts), "--template", args.template, "--fanout",
           str(args.fanout), "--switch", args.switch, "--bw", str(args.bw)] + (["--tx-off"] if tx_off else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"plain Mininet failed: {proc.stderr.strip()[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return out["up_s"], out["down_s"], out["reachable"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="8,32")
    ap.add_argument("--kinds", default="netns")
    ap.add_argument("--template", choices=("star", "tree"), default="star")
    ap.add_argument("--fanout", type=int, default=32, help="template tree: hosts per leaf switch, children per switch")
    ap.add_argument("--switch", choices=("ovs", "linuxbridge"), default="ovs")
    ap.add_argument("--bw", type=int, default=100, help="Mbit/s on every link")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain-Mininet runs")
    args = ap.parse_args()
    timers = timer_overshoot()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; timers p50 {timers['timer_p50_ms']} ms, "
          f"p99 {timers['timer_p99_ms']} ms, max {timers['timer_max_ms']} ms; {args.template}"
          + (f" fanout {args.fanout}" if args.template == "tree" else "") + f", {args.switch}, {args.bw} Mbit/s")
    print(f"{'hosts':>5} {'what':>7} {'up s':>7} {'down s':>7} {'up ms/host':>10} {'up x':>6} {'down x':>6}  reachable")
    with tempfile.TemporaryDirectory() as tmp:
        for n in map(int, args.hosts.split(",")):
            rows, tx_off = [], False
            for kind in args.kinds.split(","):
                path = Path(tmp) / f"b{n}-{kind}.yaml"
                fanout = f", fanout: {args.fanout}" if args.template == "tree" else ""
                path.write_text(f"name: bringup\ntopology: {{template: {args.template}, hosts: {n}{fanout}, "
                                f"link: {{bw: {args.bw}mbit}}, host: {{kind: {kind}}}, "
                                f"switch: {{kind: {args.switch}}}}}\n")
                up, down, reachable, off = measure(path)
                tx_off = tx_off or off
                rows.append((kind, up, down, reachable))
            if not args.no_plain:
                rows.append(("plain", *measure_plain(args, n, tx_off)))
            base = rows[-1] if not args.no_plain else rows[0]
            for what, up, down, reachable in rows:
                print(f"{n:>5} {what:>7} {up:>7.2f} {down:>7.2f} {up / n * 1e3:>10.1f} {up / base[1]:>6.2f} "
                      f"{down / base[2]:>6.2f}  {reachable}/{n}", flush=True)


if __name__ == "__main__":
    main()
