"""Shaping fidelity: iperf3 goodput / configured rate for each shaper and switch, at several rates.

Prints one line per configuration, plus this machine's timer health (how late 1 ms sleeps wake up),
which bounds what any kernel shaper can deliver on a VM whose host steals CPU.
Run as root:  .venv/bin/python bench/fidelity.py [--rates 1mbit,10mbit,100mbit,1gbit] [--duration 3s]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from testbed.checks import run_iperf  # noqa: E402
from testbed.network import Network  # noqa: E402
from testbed.shaping import TCP_GOODPUT_CEILING  # noqa: E402
from testbed.spec import build_graph, load_spec  # noqa: E402

CONFIGS = [("tc", "htb", "ovs"), ("tc", "tbf", "ovs"), ("ovs", "htb", "ovs"), ("tc", "htb", "linuxbridge")]


def timer_health(samples: int = 500) -> str:
    late = []
    for _ in range(samples):
        t = time.perf_counter()
        time.sleep(0.001)
        late.append(time.perf_counter() - t - 0.001)
    late.sort()
    return (f"1 ms sleeps overshoot: median {late[len(late) // 2] * 1e3:.2f} ms, "
            f"p99 {late[int(len(late) * 0.99)] * 1e3:.1f} ms, max {late[-1] * 1e3:.0f} ms")


def spec_for(rate: str, shaping: str, qdisc: str, switch: str, folder: Path):
    path = folder / f"bench-{rate}-{shaping}-{qdisc}-{switch}.yaml"
    path.write_text(f"name: bench\ntopology: {{template: star, hosts: 2, link: {{bw: {rate}}}, shaping: {shaping},"
                    f" qdisc: {qdisc}, switch: {{kind: {switch}}}}}\n")
    return load_spec(path)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="1mbit,10mbit,100mbit,1gbit")
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(timer_health())
    print(f"reference: TCP goodput ceiling over HTB = {TCP_GOODPUT_CEILING:.3f} of the configured rate")
    print(f"{'rate':>8} {'shaping':>7} {'qdisc':>5} {'switch':>11}  ratio (each of {args.repeats} runs)  best")
    with tempfile.TemporaryDirectory() as tmp:
        for rate in args.rates.split(","):
            for shaping, qdisc, switch in CONFIGS:
                spec = spec_for(rate, shaping, qdisc, switch, Path(tmp))
                graph = build_graph(spec.topology)
                with Network(graph, spec.topology) as net:
                    ratios = [run_iperf(net.nodes["h2"], net.nodes["h1"], args.duration) / graph.links[0].params.bw
                              for _ in range(args.repeats)]
                print(f"{rate:>8} {shaping:>7} {qdisc:>5} {switch:>11}  "
                      + " ".join(f"{r:.3f}" for r in ratios) + f"  {max(ratios):.3f}", flush=True)
    print(timer_health())


if __name__ == "__main__":
    main()
