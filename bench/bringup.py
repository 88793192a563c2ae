"""Bring-up and teardown time of a star (OVS, tc-shaped 100mbit links) against the number of hosts.

Run as root:  .venv/bin/python bench/bringup.py [--hosts 2,8,32,64]
Prints seconds per phase and per host; a 64-host star on one OVS userspace bridge is also
checked for reachability of its last host (OVS userspace forwarded only 57 ports here once).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed.network import Network  # noqa: E402
from testbed.spec import build_graph, load_spec  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="2,8,32,64")
    ap.add_argument("--template", default="star")
    args = ap.parse_args()
    print(f"{'hosts':>5} {'up s':>6} {'down s':>7} {'up ms/host':>10}  last host reachable")
    with tempfile.TemporaryDirectory() as tmp:
        for n in map(int, args.hosts.split(",")):
            path = Path(tmp) / f"b{n}.yaml"
            fanout = ", fanout: 8" if args.template == "tree" else ""
            path.write_text(f"name: bringup\ntopology: {{template: {args.template}, hosts: {n}{fanout},"
                            " link: {bw: 100mbit}}\n")
            spec = load_spec(path)
            graph = build_graph(spec.topology)
            t0 = time.monotonic()
            net = Network(graph, spec.topology).__enter__()
            up = time.monotonic() - t0
            try:
                last = graph.hosts[-1].name
                out = net.cmd("h1", f"ping -c 1 -W 2 {net.ip(last)}")
                reachable = "1 received" in out
            finally:
                t1 = time.monotonic()
                net.__exit__(None, None, None)
                down = time.monotonic() - t1
            print(f"{n:>5} {up:>6.2f} {down:>7.2f} {up / n * 1e3:>10.1f}  {reachable}", flush=True)


if __name__ == "__main__":
    main()
