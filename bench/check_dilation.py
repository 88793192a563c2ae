"""iperf3 checks under time dilation: a check sized by round trips against one stretched x K.

Under dilation K a link runs at bw / K on the wall clock. A check that takes its configured length
there (what the testbed does where the links carry no delay: their round trip is not dilated) moves K
times fewer bytes than the undilated check; one stretched x K (what it did before) moves as many, but
16 pairs at x16 then took 13 minutes. Per rate and K (2 hosts on one OVS switch, tc HTB at rate / K)
it runs the check both ways, `--attempts` times each, and prints each one's best and median ratio of
goodput to the wall rate, and its wall time; K = 1 is the undilated check, the plain reference.

Run as root, with nothing else running:
  .venv/bin/python bench/check_dilation.py [--rates 10mbit,100mbit] [--ks 1,4,16] [--duration 3] [--attempts 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import machine_state  # noqa: E402
from testbed.net.network import Network  # noqa: E402
from testbed.run.bringup.checks import iperf3_json, wall_duration  # noqa: E402
from testbed.spec import build_graph, load_spec  # noqa: E402
from testbed.units import parse_bandwidth  # noqa: E402


def readings(net, seconds: float, attempts: int) -> tuple[list[float], float]:
    """Goodputs (bit/s) of `attempts` iperf3 runs h2 -> h1 of `seconds` each, and their wall time."""
    t0 = time.monotonic()
    out = [float(json.loads(iperf3_json(net.nodes["h2"], net.nodes["h1"], seconds, spare_s=60))
                 ["end"]["sum_received"]["bits_per_second"]) for _ in range(attempts)]
    return out, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="10mbit,100mbit")
    ap.add_argument("--ks", default="1,4,16")
    ap.add_argument("--duration", type=float, default=3.0, help="checks.duration, seconds")
    ap.add_argument("--attempts", type=int, default=3)
    args = ap.parse_args()
    print(machine_state())
    print(f"{'rate':>8} {'K':>3} {'wall rate':>10} {'check':>9} {'s each':>6} {'best':>6} {'median':>6} {'wall s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for rate in args.rates.split(","):
            for k in (float(x) for x in args.ks.split(",")):
                bps = parse_bandwidth(rate) / k
                path = Path(tmp) / "check.yaml"
                path.write_text(f"name: check\ntopology: {{template: star, hosts: 2, switch: {{kind: ovs}}, "
                                f"link: {{bw: {round(bps)}bit}}}}\n")
                spec = load_spec(path)
                ways = {"by rtt": wall_duration(args.duration, k, 0.0)}
                if k > 1:
                    ways["x K"] = args.duration * k
                with Network(build_graph(spec.topology), spec.topology) as net:
                    for way, seconds in ways.items():
                        got, wall = readings(net, seconds, args.attempts)
                        print(f"{rate:>8} {k:>3g} {bps / 1e6:>6.3g} Mb/s {way:>9} {seconds:>6.3g} "
                              f"{max(got) / bps:>6.3f} {statistics.median(got) / bps:>6.3f} {wall:>7.1f}", flush=True)
    print(machine_state())


if __name__ == "__main__":
    main()
