"""Shaping fidelity: iperf3 goodput / configured rate for each shaper and switch, at several rates,
and 4 flows sharing one shaped bottleneck (dumbbell): their sum / rate and their fairness.

Each configuration is measured `--repeats` times; min, median and max are printed with the TCP
retransmissions. The unshaped path of each switch is measured first in the same run: a shaper cannot
deliver more than the path carries (the userspace OVS datapath and the Linux bridge are CPU-bound
on this machine). The machine's load and timer overshoot are printed before and after.
Run as root:  .venv/bin/python bench/shaping_fidelity.py [--rates 1mbit,10mbit,100mbit,1gbit,5gbit]
              [--duration 3] [--repeats 3] [--dumbbell 10mbit,100mbit,1gbit] [--flows 4]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed.run.bringup.checks import iperf3_json  # noqa: E402
from testbed.run.bringup.hosthealth import timer_overshoot  # noqa: E402
from testbed.net.network import Network  # noqa: E402
from testbed.shaping import TCP_GOODPUT_CEILING  # noqa: E402
from testbed.spec import build_graph, load_spec  # noqa: E402
from testbed.units import parse_bandwidth  # noqa: E402

CONFIGS = [("tc", "htb", "ovs"), ("tc", "tbf", "ovs"), ("ovs", "htb", "ovs"),
           ("tc", "htb", "linuxbridge"), ("tc", "tbf", "linuxbridge")]
SWITCHES = ("ovs", "linuxbridge")


def machine() -> str:
    t = timer_overshoot()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{time.strftime('%Y-%m-%d %H:%M')}  load {load}  1 ms sleeps overshoot p50 {t['timer_p50_ms']} ms, "
            f"p99 {t['timer_p99_ms']} ms, max {t['timer_max_ms']} ms")


def jain(xs: list[float]) -> float:
    """Jain's fairness index: 1 when every flow gets the same, 1/n when one flow gets everything."""
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


def iperf(client, server, duration: float) -> tuple[float, int]:
    """(received bits/s, retransmissions) of one iperf3 TCP test from client to server."""
    end = json.loads(iperf3_json(client, server, duration, spare_s=60))["end"]
    return float(end["sum_received"]["bits_per_second"]), int(end["sum_sent"].get("retransmits", 0))


def network(folder: Path, topology: str):
    path = folder / "bench.yaml"
    path.write_text(f"name: fidelity\ntopology: {topology}\n")
    spec = load_spec(path)
    graph = build_graph(spec.topology)
    return Network(graph, spec.topology)


def summary(ratios: list[float], retrans: list[int]) -> str:
    return (f"{min(ratios):6.3f} {statistics.median(ratios):6.3f} {max(ratios):6.3f}  {max(retrans):6d}  "
            + " ".join(f"{r:.3f}" for r in ratios))


def single_flows(args, folder: Path) -> None:
    print(f"\n1 flow h2->h1, {args.duration:g} s each, {args.repeats} repeats; ratio = goodput / rate "
          f"(TCP ceiling {TCP_GOODPUT_CEILING:.3f}); unshaped rows: Gbit/s the path carries")
    print(f"{'rate':>8} {'shaping':>7} {'qdisc':>5} {'switch':>11}  {'min':>6} {'median':>6} {'max':>6}  "
          f"{'retr':>6}  each run")
    for switch in SWITCHES:
        with network(folder, f"{{template: star, hosts: 2, switch: {{kind: {switch}}}}}") as net:
            gbps = [iperf(net.nodes["h2"], net.nodes["h1"], args.duration) for _ in range(args.repeats)]
            print(f"{'none':>8} {'-':>7} {'-':>5} {switch:>11}  "
                  + summary([g / 1e9 for g, _ in gbps], [r for _, r in gbps]) + "  (Gbit/s)", flush=True)
    for rate in args.rates.split(","):
        for shaping, qdisc, switch in CONFIGS:
            topo = (f"{{template: star, hosts: 2, link: {{bw: {rate}}}, shaping: {shaping}, qdisc: {qdisc},"
                    f" switch: {{kind: {switch}}}}}")
            with network(folder, topo) as net:
                runs = [iperf(net.nodes["h2"], net.nodes["h1"], args.duration) for _ in range(args.repeats)]
            bw = parse_bandwidth(rate)
            print(f"{rate:>8} {shaping:>7} {qdisc:>5} {switch:>11}  "
                  + summary([g / bw for g, _ in runs], [r for _, r in runs]), flush=True)


def rx_bytes(node) -> int:
    """Bytes the node has received on its links (the kernel's counters: one header per TCP segment,
    however many frames the segment stood for on the wire)."""
    links = json.loads(node.run(["ip", "-j", "-s", "link", "show"]))
    return sum(link["stats64"]["rx"]["bytes"] for link in links if link["ifname"] != "lo")


def dumbbell(args, folder: Path) -> None:
    """Rates from the receivers' byte counters over a window inside the test (all flows running, past
    slow start): iperf3's own per-flow rates cover each flow's own start and end, so they do not add up."""
    n, window = args.flows, args.dumbbell_duration - 4
    print(f"\n{n} flows h{{i}}->h{{i+{n}}} at once through one shaped bottleneck s1-s2 (access links unshaped), "
          f"{args.dumbbell_duration:g} s tests, {args.repeats} repeats, received frames counted over {window:g} s from "
          "2 s in; sum = received bytes / rate (a 64 kB TCP segment's headers count once, so about goodput: "
          f"ceiling {TCP_GOODPUT_CEILING:.3f}), Jain = fairness of the flows (1 = equal)")
    print(f"{'rate':>8} {'shaping':>7} {'qdisc':>5} {'switch':>11}  {'sum min':>7} {'median':>6}  "
          f"{'Jain min':>8} {'median':>6}  per-flow share, each run")
    for rate in args.dumbbell.split(","):
        for shaping, qdisc, switch in CONFIGS:
            topo = (f"{{template: dumbbell, hosts: {2 * n}, bottleneck: {{bw: {rate}}}, shaping: {shaping},"
                    f" qdisc: {qdisc}, switch: {{kind: {switch}}}}}")
            sums, fairness, shares = [], [], []
            with network(folder, topo) as net, ThreadPoolExecutor(n) as pool:
                receivers = [net.nodes[f"h{i + n}"] for i in range(1, n + 1)]
                for _ in range(args.repeats):
                    runs = [pool.submit(iperf, net.nodes[f"h{i}"], net.nodes[f"h{i + n}"], args.dumbbell_duration)
                            for i in range(1, n + 1)]
                    time.sleep(2)
                    before, t0 = [rx_bytes(r) for r in receivers], time.monotonic()
                    time.sleep(window)
                    after, t1 = [rx_bytes(r) for r in receivers], time.monotonic()
                    for run in runs:
                        run.result()
                    flows = [(b - a) * 8 / (t1 - t0) for a, b in zip(before, after)]
                    sums.append(sum(flows) / parse_bandwidth(rate))
                    fairness.append(jain(flows))
                    shares.append("/".join(f"{g / sum(flows):.2f}" for g in flows))
            print(f"{rate:>8} {shaping:>7} {qdisc:>5} {switch:>11}  {min(sums):7.3f} {statistics.median(sums):6.3f}  "
                  f"{min(fairness):8.3f} {statistics.median(fairness):6.3f}  {' '.join(shares)}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="1mbit,10mbit,100mbit,1gbit,5gbit")
    ap.add_argument("--duration", type=float, default=3.0, help="seconds per single-flow test")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dumbbell", default="10mbit,100mbit,1gbit", help="bottleneck rates ('' to skip)")
    ap.add_argument("--dumbbell-duration", type=float, default=10.0, help="seconds per test (>= 6)")
    ap.add_argument("--flows", type=int, default=4)
    args = ap.parse_args()
    print("before:", machine())
    with tempfile.TemporaryDirectory() as tmp:
        if args.rates:
            single_flows(args, Path(tmp))
        if args.dumbbell:
            dumbbell(args, Path(tmp))
    print("\nafter: ", machine())


if __name__ == "__main__":
    main()
