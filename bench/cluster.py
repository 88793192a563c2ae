"""The same topology on this machine and spread over two local servers (Mininet's cluster edition,
VXLAN tunnels), in one run: bring-up and teardown time, and iperf3 fidelity (measured / configured)
on a path that crosses the tunnel when spread; the spread figures as ratios against one machine,
and the tunnel's raw capacity and RTT (the fidelity guard's measurement, timed apart).

Run as root, servers up (`run_experiment.py cluster up 2`), under the dev lock:
    flock /tmp/dltb-devlock .venv/bin/python bench/cluster.py [--hosts 4] [--bw 10mbit] [--repeats 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml  # noqa: E402

from testbed.run.bringup.checks import run_iperf  # noqa: E402
from testbed.cluster import cluster_site, servers  # noqa: E402
from testbed.run.bringup.hosthealth import timer_overshoot  # noqa: E402
from testbed.net.network import Network  # noqa: E402
from testbed.spec import build_graph, load_spec  # noqa: E402


def measure(path: Path, duration: float) -> dict:
    """Bring-up, iperf3 from the last host to the first (across the tunnel when spread), teardown."""
    spec = load_spec(path)
    graph = build_graph(spec.topology)
    guard = {}
    measure_tunnels = cluster_site.ClusterSite.measure_tunnels

    def timed(self):
        t = time.monotonic()
        rows = measure_tunnels(self)
        guard.update(seconds=time.monotonic() - t, rows=rows)
        return rows
    cluster_site.ClusterSite.measure_tunnels = timed
    try:
        t0 = time.monotonic()
        net = Network(graph, spec.topology, site=cluster_site.site_for(spec.cluster)).__enter__()
        up = time.monotonic() - t0
    finally:
        cluster_site.ClusterSite.measure_tunnels = measure_tunnels
    try:
        last, first = net.nodes[graph.hosts[-1].name], net.nodes[graph.hosts[0].name]
        bps = max(run_iperf(last, first, duration) for _ in range(2))
        where = {n: getattr(node, "machine", "local") for n, node in net.nodes.items()}
    finally:
        t1 = time.monotonic()
        net.__exit__(None, None, None)
        down = time.monotonic() - t1
    return dict(up=up, down=down, guard=guard.get("seconds", 0.0), tunnels=guard.get("rows", []),
                ratio=bps / spec.topology.link.bw, bps=bps, where=where)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--bw", default="10mbit")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--duration", type=float, default=3.0)
    args = ap.parse_args()
    found = servers.status()
    if len(found) < 2:
        raise SystemExit("needs two servers: run_experiment.py cluster up 2")
    section = yaml.safe_load(servers.cluster_yaml(found[:2]))["cluster"]
    health = timer_overshoot()
    print(f"machine: load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}, timer overshoot "
          f"p50 {health['timer_p50_ms']} ms, p99 {health['timer_p99_ms']} ms, max {health['timer_max_ms']} ms")
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for where in ("one machine", "two servers"):
            doc = {"name": "bench-cluster", "topology": {"template": "star", "hosts": args.hosts, "link": {"bw": args.bw}}}
            if where == "two servers":
                doc["cluster"] = section
            files[where] = Path(tmp) / f"{where.replace(' ', '-')}.yaml"
            files[where].write_text(yaml.safe_dump(doc))
        print(f"star of {args.hosts} hosts, links {args.bw}; iperf3 h{args.hosts} -> h1 ({args.duration:g} s, best of 2)")
        print(f"{'repeat':>6} {'where':>12} {'up s':>7} {'(guard s)':>9} {'down s':>7} {'iperf ratio':>11} "
              f"{'up x':>6} {'down x':>6} {'fidelity x':>10}")
        for r in range(1, args.repeats + 1):
            base = measure(files["one machine"], args.duration)
            spread = measure(files["two servers"], args.duration)
            for where, m in (("one machine", base), ("two servers", spread)):
                print(f"{r:>6} {where:>12} {m['up']:>7.2f} {m['guard']:>9.2f} {m['down']:>7.2f} {m['ratio']:>11.3f} "
                      f"{m['up'] / base['up']:>6.2f} {m['down'] / base['down']:>6.2f} {m['ratio'] / base['ratio']:>10.3f}")
            for row in spread["tunnels"]:
                print(f"{'':>6} tunnel {row['tunnel']} ({row['address_a']} -> {row['address_b']}): raw capacity "
                      f"{cluster_site.rate(row['capacity_bps'])}, RTT {row['rtt_ms']:.3f} ms; carries {row['links']}")
            print(f"{'':>6} placement: {spread['where']}")
    health = timer_overshoot()
    print(f"after: load {os.getloadavg()[0]:.2f}, timer overshoot p99 {health['timer_p99_ms']} ms, "
          f"max {health['timer_max_ms']} ms")


if __name__ == "__main__":
    main()
