"""Bring-up and teardown time of a topology (OVS, tc-shaped 100mbit links) against its host count,
for each node kind, in the same run; kinds after the first are printed as ratios against it.

Run as root:  .venv/bin/python bench/bringup.py [--hosts 8,32] [--kinds netns,docker] [--template tree]
Every host's reachability from the first is checked (ping, in parallel) before teardown.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed.network import Network, node_problems  # noqa: E402
from testbed.spec import build_graph, load_spec  # noqa: E402


def measure(path: Path) -> tuple[float, float, int]:
    """(up s, down s, hosts reachable from h1)."""
    spec = load_spec(path)
    graph = build_graph(spec.topology)
    problems = node_problems(graph, print)     # e.g. builds the worker image once, outside the timing
    if problems:
        raise SystemExit(f"cannot start: {problems}")
    t0 = time.monotonic()
    net = Network(graph, spec.topology).__enter__()
    up = time.monotonic() - t0
    try:
        first = net.nodes["h1"]
        with ThreadPoolExecutor(16) as pool:
            replies = pool.map(lambda n: "1 received" in first.run(["ping", "-c", "1", "-W", "2", n.address]),
                               list(net.nodes.values())[1:])
            reachable = 1 + sum(replies)
    finally:
        t1 = time.monotonic()
        net.__exit__(None, None, None)
        down = time.monotonic() - t1
    return up, down, reachable


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="8,32")
    ap.add_argument("--kinds", default="netns,docker")
    ap.add_argument("--template", default="star")
    ap.add_argument("--fanout", type=int, default=8)
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    print(f"{'hosts':>5} {'kind':>7} {'up s':>7} {'down s':>7} {'up ms/host':>10} {'up x':>6} {'down x':>6}  reachable")
    with tempfile.TemporaryDirectory() as tmp:
        for n in map(int, args.hosts.split(",")):
            base = None
            for kind in kinds:
                path = Path(tmp) / f"b{n}-{kind}.yaml"
                fanout = f", fanout: {args.fanout}" if args.template == "tree" else ""
                path.write_text(f"name: bringup\ntopology: {{template: {args.template}, hosts: {n}{fanout},"
                                f" link: {{bw: 100mbit}}, host: {{kind: {kind}}}}}\n")
                up, down, reachable = measure(path)
                base = base or (up, down)
                print(f"{n:>5} {kind:>7} {up:>7.2f} {down:>7.2f} {up / n * 1e3:>10.1f} {up / base[0]:>6.2f} "
                      f"{down / base[1]:>6.2f}  {reachable}/{n}", flush=True)


if __name__ == "__main__":
    main()
