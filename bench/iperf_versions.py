"""iperf2 against iperf3 over the same shaped link: what each counts (thesis figure 17).

The thesis measured 9.75 of 10 Mbit/s with iperf2 through OVS QoS; the testbed's iperf3 check reads
about 0.956 of the rate, the TCP goodput ceiling under HTB (1448 payload bytes per 1514-byte
frame). This script shapes one link h2 -> h1 of a 2-host star at `--rate` (OVS QoS linux-htb, as
the thesis's figure 16, and tc htb), and runs both tools in turn, `--repeats` times at each
duration. Per test it prints, as ratios to the configured rate: iperf3's sender and receiver
figures, and iperf2's client figure (the bytes its client wrote into the socket, over its own
time) and server figure (the bytes its server read). If the client's figure runs above the
others by about the same number of bytes at every duration, it counts what still sat in the
socket's buffers when the test ended, and that excess shrinks as the test grows longer.

Run as root:  .venv/bin/python bench/iperf_versions.py [--rate 10mbit] [--durations 10,30] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import machine_state  # noqa: E402
from testbed.net.network import Network  # noqa: E402
from testbed.run.bringup.checks import IPERF_PORT, iperf3_json, wait_listening  # noqa: E402
from testbed.shaping import TCP_GOODPUT_CEILING  # noqa: E402
from testbed.spec import build_graph, load_spec  # noqa: E402
from testbed.units import parse_bandwidth  # noqa: E402

SHAPINGS = ("ovs", "tc")


def iperf3(client, server, duration: float) -> dict:
    """iperf3's sender and receiver bits/s of one TCP test."""
    end = json.loads(iperf3_json(client, server, duration, spare_s=60))["end"]
    return {"iperf3 sender": end["sum_sent"]["bits_per_second"],
            "iperf3 receiver": end["sum_received"]["bits_per_second"]}


def _csv_rate(line: str) -> float:
    """bits/s from an iperf2 `-y C` line: time,src,sport,dst,dport,id,interval,bytes,bits_per_second."""
    return float(line.strip().split(",")[8])


def iperf2(client, server, duration: float) -> dict:
    """iperf2's client and server bits/s of one TCP test (each side's own report)."""
    port = IPERF_PORT + 1
    srv = server.popen(["iperf", "-s", "-p", str(port), "-y", "C"], env=server.env({}),
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        if not wait_listening(server, port):
            raise RuntimeError(f"no server listening on port {port} in {server.name}")
        out = client.run(["iperf", "-c", server.address, "-p", str(port), "-t", f"{duration:g}", "-y", "C"],
                         timeout=duration + 60)
        time.sleep(1)       # the server reports when the connection has closed
    finally:
        srv.kill()
        served, _ = srv.communicate(timeout=10)
    lines = [line for line in served.splitlines() if line.count(",") >= 8]
    if not lines:
        raise RuntimeError("the iperf2 server reported nothing")
    return {"iperf2 client": _csv_rate(out.strip().splitlines()[-1]), "iperf2 server": _csv_rate(lines[-1])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", default="10mbit")
    ap.add_argument("--durations", default="10,30", help="seconds per test (the thesis's iperf2 default is 10)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    missing = [tool for tool in ("iperf", "iperf3") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"missing: {', '.join(missing)} (Debian packages iperf and iperf3: scripts/bootstrap.sh "
                 "installs both)")
    version = subprocess.run(["iperf", "-v"], capture_output=True, text=True)
    print(machine_state())
    print(f"{(version.stdout + version.stderr).strip()}; "
          f"{subprocess.run(['iperf3', '-v'], capture_output=True, text=True).stdout.splitlines()[0]}")
    rate = parse_bandwidth(args.rate)
    print(f"one TCP flow h2 -> h1 at {args.rate}, ratios to the rate (TCP goodput ceiling {TCP_GOODPUT_CEILING:.3f})")
    names = ("iperf3 sender", "iperf3 receiver", "iperf2 client", "iperf2 server")
    print(f"{'shaping':>7} {'s':>4}  " + "  ".join(f"{n:>26}" for n in names) + "   (median of the repeats (each))")
    with tempfile.TemporaryDirectory() as tmp:
        for shaping in SHAPINGS:
            path = Path(tmp) / "iperf.yaml"
            path.write_text(f"name: iperf-versions\ntopology: {{template: star, hosts: 2, link: {{bw: {args.rate}}}, "
                            f"shaping: {shaping}, switch: {{kind: ovs}}}}\n")
            spec = load_spec(path)
            with Network(build_graph(spec.topology), spec.topology) as net:
                client, server = net.nodes["h2"], net.nodes["h1"]
                for duration in (float(d) for d in args.durations.split(",")):
                    tests = []
                    for _ in range(args.repeats):
                        tests.append({**iperf3(client, server, duration), **iperf2(client, server, duration)})
                    cells = []
                    for name in names:
                        ratios = [t[name] / rate for t in tests]
                        cells.append(f"{statistics.median(ratios):6.3f} ({' '.join(f'{r:.3f}' for r in ratios)})")
                    print(f"{shaping:>7} {duration:>4g}  " + "  ".join(f"{c:>26}" for c in cells), flush=True)
    print(machine_state())


if __name__ == "__main__":
    main()
