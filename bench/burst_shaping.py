"""Shaping of bursts: how long a message takes over a shaped link after an idle moment, against its time
at the link's own goodput, measured by iperf3 in the same network.

Training's exchanges are such bursts: a gradient (or a part of one) sent after the compute's idle
time. A shaper that lets a burst pass at once, or a segment of up to 64 kB before it charges it, makes
each exchange too fast, though iperf3's long flow reads the rate exactly. Per rate (2 hosts on one OVS
switch, tc HTB) it runs iperf3 (the plain tool), then sends messages of each size from h2 to h1, each
answered by one byte, with an idle gap between them, and prints the median message time over its time
at iperf3's goodput (1.00: the link carries the burst at its rate).

Run as root:  .venv/bin/python bench/burst_shaping.py [--rates 10mbit,100mbit,1gbit]
              [--sizes 30000,113000,1000000] [--messages 30] [--gap 0.02]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import machine_state  # noqa: E402
from testbed.net.network import Network  # noqa: E402
from testbed.run.bringup.checks import iperf3_json  # noqa: E402
from testbed.shaping import gso_max_size, htb_burst  # noqa: E402
from testbed.spec import build_graph, load_spec  # noqa: E402
from testbed.units import parse_bandwidth  # noqa: E402

SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 5999)); s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
for size in map(int, sys.argv[1:]):
    got = 0
    while got < size:
        got += len(c.recv(1 << 20))
    c.sendall(b"k")
"""
CLIENT = """
import json, socket, sys, time
sizes, gap = json.loads(sys.argv[2]), float(sys.argv[3])
c = socket.create_connection((sys.argv[1], 5999)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
out = []
for size in sizes:
    time.sleep(gap)
    t0 = time.perf_counter(); c.sendall(b"x" * size); c.recv(1); out.append(time.perf_counter() - t0)
print(json.dumps(out))
"""


def message_times(net, sizes: list[int], messages: int, gap: float) -> dict[int, float]:
    """The median time of `messages` messages of each size from h2 to h1 (the first 3 of each left out)."""
    order = [size for size in sizes for _ in range(messages)]
    server = net.nodes["h1"].popen([sys.executable, "-c", SERVER, *map(str, order)], stdout=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()
        out = net.nodes["h2"].run([sys.executable, "-c", CLIENT, net.nodes["h1"].address, json.dumps(order), str(gap)],
                                  timeout=600, check=True)
    finally:
        server.kill()
        server.wait()
    times = json.loads(out.strip().splitlines()[-1])
    return {size: statistics.median(times[i * messages + 3:(i + 1) * messages]) for i, size in enumerate(sizes)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="10mbit,100mbit,1gbit")
    ap.add_argument("--sizes", default="30000,113000,1000000")
    ap.add_argument("--messages", type=int, default=30)
    ap.add_argument("--gap", type=float, default=0.02, help="idle seconds before each message")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(machine_state())
    print(f"{'rate':>8} {'burst B':>8} {'gso B':>6} {'iperf3':>7}  " + "  ".join(f"{s:>9} B ratio" for s in sizes))
    with tempfile.TemporaryDirectory() as tmp:
        for rate in args.rates.split(","):
            path = Path(tmp) / "burst.yaml"
            path.write_text(f"name: burst\ntopology: {{template: star, hosts: 2, switch: {{kind: ovs}}, link: {{bw: {rate}}}}}\n")
            spec = load_spec(path)
            bps = parse_bandwidth(rate)
            with Network(build_graph(spec.topology), spec.topology) as net:
                goodput = json.loads(iperf3_json(net.nodes["h2"], net.nodes["h1"], 3, spare_s=60))
                goodput = float(goodput["end"]["sum_received"]["bits_per_second"])
                times = message_times(net, sizes, args.messages, args.gap)
            ratios = "  ".join(f"{times[s] * goodput / (8 * s):>15.2f}" for s in sizes)
            print(f"{rate:>8} {htb_burst(bps):>8} {gso_max_size(bps):>6} {goodput / bps:>7.3f}  {ratios}", flush=True)
    print(machine_state())


if __name__ == "__main__":
    main()
